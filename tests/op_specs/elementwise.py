"""The op specs of tapekit.ops.elementwise and tapekit.ops.arithmetic (see tests/opfactory.py)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

import tapekit as tk

from ..opfactory import Edge, OpSpec, binary_draw, quotient_draw, unary_draw

SPECS: list[OpSpec] = []
inf, nan = np.inf, np.nan


def _unary(name, fn, reference, domain="any", params=None, **kw):
    """``params``: strategies for the op's other arguments, by name."""
    SPECS.append(OpSpec(name, fn, reference, unary_draw(domain, **(params or {})), **kw))


def _binary(name, fn, reference, domain="any", domain_y=None, **kw):
    SPECS.append(OpSpec(name, fn, reference, binary_draw(domain, domain_y), **kw))


def _np_gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / np.sqrt(2)))


def _np_softplus(x, beta=1.0, threshold=None):
    y = np.logaddexp(0, beta * x) / beta
    return y if threshold is None else np.where(beta * x > threshold, x, y)


STEP = "a step function: gradient 0"

_binary("add", lambda a, b: a + b, np.add)
_binary("sub", lambda a, b: a - b, np.subtract)
_binary("mul", lambda a, b: a * b, np.multiply)
_binary("div", lambda a, b: a / b, np.divide, "positive", edges=[
    Edge([[1e160, 1e-200], [1e160, 1e-200]], [[1e-160, 1e200], [-1e-160, -1e200]],
         why="-x / y ** 2 for y, computed as -(x / y) / y: y ** 2 would overflow or underflow")])
_binary("pow", lambda a, b: a ** b, np.power, "positive", edges=[
    Edge([[0.0, 0.0, 0.0, 0.0, 0.0, -2.0, -2.0], [0.0, 1.0, 2.0, 0.5, -1.0, 2.0, 0.5]],
         [[0.0, 1.0, 0.0, inf, -inf, -4.0, nan], [0.0, 0.0, 0.0, 0.0, -inf, nan, nan]],
         why="PyTorch's values: y * x ** (y - 1), 0 for y == 0; x ** y * log(x), 0 at x == 0 for y >= 0")])
_binary("maximum", tk.maximum, np.maximum, edges=[
    Edge([[1.0, 2.0, 4.0], [1.0, 3.0, 3.0]], [[0.5, 0.0, 1.0], [0.5, 1.0, 0.0]],
         why="the larger operand's; half each at a tie, as dfdx, PyTorch and central differences give"),
    Edge([[nan, 1.0, nan], [1.0, nan, nan]], [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]],
         why="a NaN output's gradient goes to the NaN operand it came from (x when both are NaN)")])
_binary("minimum", tk.minimum, np.minimum, edges=[
    Edge([[1.0, 2.0, 4.0], [1.0, 3.0, 3.0]], [[0.5, 1.0, 0.0], [0.5, 0.0, 1.0]],
         why="the smaller operand's; half each at a tie, as dfdx, PyTorch and central differences give"),
    Edge([[nan, 1.0, nan], [1.0, nan, nan]], [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]],
         why="a NaN output's gradient goes to the NaN operand it came from (x when both are NaN)")])
_binary("logaddexp", tk.logaddexp, np.logaddexp, edges=[
    Edge([[0.3], [0.3]], [[0.5], [0.5]], why="half each at a tie"),
    Edge([[1e16, -1e17, 1e300], [1e16, -1e17, 1e300]], [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]],
         why="half each at a tie of any size: sigmoid(x - y), not exp(x - out), which rounds to exp(0)"),
    Edge([[inf, 1.0], [1.0, inf]], [[1.0, 0.0], [0.0, 1.0]], why="all of it to an infinite operand, as in PyTorch")])
_binary("floor_divide", lambda a, b: a // b, np.floor_divide, "any", "positive", edges=[
    Edge([[2.0, -1.0], [1.0, 0.5]], [[0.0, 0.0], [0.0, 0.0]], why=STEP + ", also at the jumps")])
_binary("remainder", lambda a, b: a % b, np.remainder, "any", "positive", edges=[
    Edge([[2.0, -1.0, 3.0], [1.0, 0.5, -1.5]], [[1.0, 1.0, 1.0], [-2.0, 2.0, 2.0]],
         why="PyTorch's 1 and -floor(x / y), at the jumps too")])

_unary("neg", lambda a: -a, np.negative)
_unary("abs", abs, np.abs, edges=[Edge([[-1.0, 0.0, 1.0]], [[-1.0, 0.0, 1.0]], why="sign(x): 0 at 0")])
_unary("exp", tk.exp, np.exp)
_unary("exp2", tk.exp2, np.exp2)
_unary("expm1", tk.expm1, np.expm1)
_unary("log", tk.log, np.log, "positive")
_unary("log2", tk.log2, np.log2, "positive")
_unary("log10", tk.log10, np.log10, "positive")
_unary("log1p", tk.log1p, np.log1p, "unit")
_unary("sqrt", tk.sqrt, np.sqrt, "positive", edges=[Edge([[0.0]], [[inf]], why="1 / (2 sqrt(x)): inf at 0")])
_unary("square", tk.square, np.square)
_unary("sin", tk.sin, np.sin)
_unary("cos", tk.cos, np.cos)
_unary("tan", tk.tan, np.tan, "unit")
_unary("asin", tk.asin, np.arcsin, "unit", edges=[Edge([[-1.0, 1.0]], [[inf, inf]], why="inf at ±1")])
_unary("acos", tk.acos, np.arccos, "unit", edges=[Edge([[-1.0, 1.0]], [[-inf, -inf]], why="-inf at ±1")])
_unary("atan", tk.atan, np.arctan)
_unary("sinh", tk.sinh, np.sinh)
_unary("cosh", tk.cosh, np.cosh)
_unary("tanh", tk.tanh, np.tanh)
_unary("sign", tk.sign, np.sign, edges=[Edge([[-1.5, 0.0, 2.0]], [[0.0, 0.0, 0.0]], why=STEP + ", also at 0")])
_unary("floor", tk.floor, np.floor, "nonint",
       edges=[Edge([[-1.0, 0.0, 1.5]], [[0.0, 0.0, 0.0]], why=STEP + ", also at the integers")])
_unary("ceil", tk.ceil, np.ceil, "nonint",
       edges=[Edge([[-1.0, 0.0, 1.5]], [[0.0, 0.0, 0.0]], why=STEP + ", also at the integers")])
_unary("round", tk.round, np.round, "nonint", params={"decimals": st.sampled_from([0, 1, -1])},
       edges=[Edge([[0.5, 1.5, -2.5, 1.0]], [[0.0, 0.0, 0.0, 0.0]], why=STEP + ", also at the halves")])
_unary("sigmoid", tk.sigmoid, lambda x: 0.5 * (1.0 + np.tanh(0.5 * x)))
_unary("relu", tk.relu, lambda x: np.maximum(x, 0),
       edges=[Edge([[-1.0, 0.0, 1.0]], [[0.0, 0.0, 1.0]], why="0 at 0, as in PyTorch"),
              Edge([[nan]], [[1.0]], why="relu(nan) is nan, and the gradient passes, as in PyTorch")])
_unary("leaky_relu", tk.leaky_relu, lambda x, negative_slope=0.01: np.where(x > 0, x, negative_slope * x),
       params={"negative_slope": st.sampled_from([0.01, 0.2])},
       edges=[Edge([[0.0]], [[0.01]], why="negative_slope at 0, as in PyTorch"),
              Edge([[-1.0, 0.0, 1.0]], [[0.2, 0.2, 1.0]], {"negative_slope": 0.2})])
_unary("elu", tk.elu, lambda x, alpha=1.0: np.where(x > 0, x, alpha * np.expm1(x)),
       params={"alpha": st.sampled_from([1.0, 0.5])},
       edges=[Edge([[-1.0, 0.0, 1.0]], [[0.5 * np.exp(-1.0), 0.5, 1.0]], {"alpha": 0.5},
                   why="alpha * exp(x) for x <= 0: alpha at 0, as in PyTorch"),
              Edge([[-30.0, -40.0]], [[1e6 * np.exp(-30.0), 1e6 * np.exp(-40.0)]], {"alpha": 1e6},
                   why="alpha * exp(x) far below 0, where the output + alpha would cancel to nothing")])
_unary("softplus", tk.softplus, _np_softplus,
       params={"beta": st.sampled_from([1.0, 2.0]), "threshold": st.sampled_from([None, 1.0])},
       edges=[Edge([[1.0, 1.5]], [[1 / (1 + np.exp(-1.0)), 1.0]], {"threshold": 1.0},
                   why="sigmoid(beta x) up to the threshold (included), 1 beyond")])
_unary("silu", tk.silu, lambda x: x / (1 + np.exp(-x)))
_unary("gelu", tk.gelu, _np_gelu, params={"approximate": st.sampled_from(["none", "tanh"])})
_unary("clip", lambda a: tk.clip(a, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7),
       edges=[Edge([[-0.5, 0.7, -0.6, 0.8]], [[1.0, 1.0, 0.0, 0.0]], why="1 at the bounds, as in PyTorch")])
_unary("power", lambda a, p=3: a ** p, lambda x, p=3: x ** p, edges=[
    Edge([[0.0, 2.0]], [[0.0, 0.0]], {"p": 0}, why="0 for p == 0, also at 0"),
    Edge([[0.0]], [[1.0]], {"p": 1}, why="p * x ** (p - 1) at 0"),
    Edge([[0.0]], [[0.0]], {"p": 2}, why="p * x ** (p - 1) at 0"),
    Edge([[0.0]], [[inf]], {"p": 0.5}, why="p * x ** (p - 1) at 0"),
    Edge([[0.0]], [[-inf]], {"p": -1}, why="p * x ** (p - 1) at 0")])
_unary("power_frac", lambda a: a ** 0.5, np.sqrt, "positive")
_unary("rsub_scalar", lambda a: 2.0 - a, lambda x: 2.0 - x)
_unary("rdiv_scalar", lambda a: 3.0 / a, lambda x: 3.0 / x, "positive")
_unary("rpow_scalar", lambda a, b=2.0: b ** a, lambda x, b=2.0: b ** x, edges=[
    Edge([[0.0, 1.0, -1.0]], [[0.0, 0.0, -inf]], {"b": 0.0}, why="0 ** y * log(0): 0 for y >= 0, -inf below"),
    Edge([[2.0]], [[nan]], {"b": -2.0}, why="nan for a negative base, as in PyTorch")])
_unary("mul_scalar", lambda a: a * 1.5, lambda x: x * 1.5)
SPECS += [OpSpec("floordiv_scalar", lambda a: a // 0.7, lambda x: x // 0.7, quotient_draw(divisor=0.7)),
          OpSpec("rfloordiv_scalar", lambda a: 2.5 // a, lambda x: 2.5 // x, quotient_draw(dividend=2.5)),
          OpSpec("mod_scalar", lambda a: a % 0.7, lambda x: x % 0.7, quotient_draw(divisor=0.7)),
          OpSpec("rmod_scalar", lambda a: 2.5 % a, lambda x: 2.5 % x, quotient_draw(dividend=2.5))]
