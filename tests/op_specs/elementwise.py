"""The op specs of tapekit.ops.elementwise (see tests/opfactory.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import tapekit as tk

from ..opfactory import Edge, OpSpec, axis_of, binary_draw, unary_draw, values

SPECS: list[OpSpec] = []


def _unary(name, fn, reference, domain="any", **kw):
    SPECS.append(OpSpec(name, fn, reference, unary_draw(domain), **kw))


def _binary(name, fn, reference, domain="any", domain_y=None, **kw):
    SPECS.append(OpSpec(name, fn, reference, binary_draw(domain, domain_y), **kw))


_binary("add", lambda a, b: a + b, np.add)
_binary("sub", lambda a, b: a - b, np.subtract)
_binary("mul", lambda a, b: a * b, np.multiply)
_binary("div", lambda a, b: a / b, np.divide, "positive")
_binary("pow", lambda a, b: a ** b, np.power, "positive")
_binary("maximum", tk.maximum, np.maximum)
_binary("minimum", tk.minimum, np.minimum)

_unary("neg", lambda a: -a, np.negative)
_unary("abs", abs, np.abs)
_unary("exp", tk.exp, np.exp)
_unary("log", tk.log, np.log, "positive")
_unary("sqrt", tk.sqrt, np.sqrt, "positive")
_unary("tanh", tk.tanh, np.tanh)
_unary("sigmoid", tk.sigmoid, lambda x: 0.5 * (1.0 + np.tanh(0.5 * x)))
_unary("relu", tk.relu, lambda x: np.maximum(x, 0))
_unary("sin", tk.sin, np.sin)
_unary("cos", tk.cos, np.cos)
_unary("clip", lambda a: tk.clip(a, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7))
_unary("power", lambda a: a ** 3, lambda x: x ** 3)
_unary("power_frac", lambda a: a ** 0.5, np.sqrt, "positive")
_unary("rsub_scalar", lambda a: 2.0 - a, lambda x: 2.0 - x)
_unary("rdiv_scalar", lambda a: 3.0 / a, lambda x: 3.0 / x, "positive")
_unary("rpow_scalar", lambda a: 2.0 ** a, lambda x: 2.0 ** x)
_unary("mul_scalar", lambda a: a * 1.5, lambda x: x * 1.5)
