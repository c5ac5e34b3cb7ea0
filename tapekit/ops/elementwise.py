"""Elementwise functions of one tensor; each rule sits beside its forward.

Where a function has a kink or a step, its gradient there is one side's (PyTorch's choice); each
docstring says which. Each function's Jacobian is diagonal, its own transpose, so its backward rule
applied to a tangent is its forward rule (JVP) too (``ELEMENTWISE``): the tangent times the gradient.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..devices import is_integer
from ..errors import DTypeError, InvalidArgumentError
from ..reads import only_checks
from ..tensor import Tensor
from .core import ELEMENTWISE, unary, where_false, where_true, zero

__all__ = ["neg", "power", "square", "abs", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt",
           "sin", "cos", "tan", "asin", "acos", "atan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh",
           "sign", "floor", "ceil", "round", "sigmoid", "relu", "leaky_relu", "elu", "softplus", "silu", "gelu",
           "clip"]


@unary(lambda g: -g, ELEMENTWISE)
def neg(xp, x):
    """``-x``; gradient -1."""
    return -x, ()


def d_power(g, xp, x, p):
    """The rule of ``x ** p`` for ``x``: ``p * x ** (p - 1)``, and 0 where ``p == 0`` (also at
    ``x == 0``, where the formula would give ``0 * inf``), as in PyTorch. Where only ``p`` is 0 it is
    the formula's 0, so that its derivative in ``p`` (a recorded backward's) is ``x ** (p - 1)``."""
    if not hasattr(p, "shape"):
        return xp.zeros_like(g) if p == 0 else g * p * x ** (p - 1)
    both = (p == 0) & (x == 0)  # only there is the formula 0 * inf; elsewhere p == 0 gives 0, linked to p
    q = xp.where(both, 1.0, p)
    return xp.where(both, xp.zeros_like(g), g * q * x ** (q - 1))


@only_checks
def refuse_negative_integer_power(xp, x, p) -> None:
    """``DTypeError`` for integers to a negative integer power, which are not integers (numpy and
    PyTorch refuse them too)."""
    def integer(v):
        return is_integer(v.dtype) if hasattr(v, "dtype") else isinstance(v, int)

    if integer(x) and integer(p) and bool(xp.any(p < 0) if hasattr(p, "dtype") else p < 0):
        raise DTypeError("integers to a negative integer power are not integers: make the base a float first, "
                         "as in (t * 1.0) ** -2, or make the tensor with dtype='float32'")


@unary(d_power, ELEMENTWISE)
def power(xp, x, p: float):
    """``x ** p`` for a number ``p``. Gradient ``p * x ** (p - 1)``; 0 for ``p == 0`` (also at 0),
    and at ``x == 0``: 1 for ``p == 1``, 0 for ``p > 1``, ``inf`` for ``0 < p < 1``, ``-inf`` for
    ``p < 0``, as in PyTorch. An integer tensor to a negative integer power is a ``DTypeError``."""
    _number(p, "power", "p")
    refuse_negative_integer_power(xp, x, p)
    return x ** p, (xp, x, p)


@unary(lambda g, x: 2 * g * x, ELEMENTWISE)
def square(xp, x):
    """``x * x``; gradient ``2 * x``."""
    return x * x, (x,)


@unary(lambda g, xp, x: g * xp.sign(x), ELEMENTWISE)
def abs(xp, x):
    """``|x|``; gradient ``sign(x)``: 0 at 0."""
    return xp.abs(x), (xp, x)


@unary(lambda g, y: g * y, ELEMENTWISE, saves=("out",))
def exp(xp, x):
    """``e ** x``; gradient ``e ** x``."""
    y = xp.exp(x)
    return y, (y,)


@unary(lambda g, y: g * y * math.log(2), ELEMENTWISE)
def exp2(xp, x):
    """``2 ** x``; gradient ``2 ** x * log(2)``."""
    y = 2.0 ** x
    return y, (y,)


@unary(lambda g, y: g * (y + 1), ELEMENTWISE)
def expm1(xp, x):
    """``exp(x) - 1``, accurate for small ``x``; gradient ``exp(x)``."""
    y = xp.expm1(x)
    return y, (y,)


@unary(lambda g, x: g / x, ELEMENTWISE)
def log(xp, x):
    """Natural logarithm; gradient ``1 / x``."""
    return xp.log(x), (x,)


@unary(lambda g, x: g / (x * math.log(2)), ELEMENTWISE)
def log2(xp, x):
    """Base-2 logarithm; gradient ``1 / (x * log(2))``."""
    return xp.log2(x), (x,)


@unary(lambda g, x: g / (x * math.log(10)), ELEMENTWISE)
def log10(xp, x):
    """Base-10 logarithm; gradient ``1 / (x * log(10))``."""
    return xp.log10(x), (x,)


@unary(lambda g, x: g / (1 + x), ELEMENTWISE)
def log1p(xp, x):
    """``log(1 + x)``, accurate for small ``x``; gradient ``1 / (1 + x)``."""
    return xp.log1p(x), (x,)


@unary(lambda g, y: g / (2 * y), ELEMENTWISE)
def sqrt(xp, x):
    """Square root; gradient ``1 / (2 * sqrt(x))`` (``inf`` at 0)."""
    y = xp.sqrt(x)
    return y, (y,)


@unary(lambda g, xp, x: g * xp.cos(x), ELEMENTWISE)
def sin(xp, x):
    """Sine; gradient ``cos(x)``."""
    return xp.sin(x), (xp, x)


@unary(lambda g, xp, x: -g * xp.sin(x), ELEMENTWISE)
def cos(xp, x):
    """Cosine; gradient ``-sin(x)``."""
    return xp.cos(x), (xp, x)


@unary(lambda g, y: g * (1 + y * y), ELEMENTWISE)
def tan(xp, x):
    """Tangent; gradient ``1 + tan(x) ** 2``."""
    y = xp.tan(x)
    return y, (y,)


@unary(lambda g, xp, x: g / xp.sqrt(1 - x * x), ELEMENTWISE)
def asin(xp, x):
    """Inverse sine (``arcsin``), for ``x`` in [-1, 1]; gradient ``1 / sqrt(1 - x ** 2)`` (``inf`` at ±1)."""
    return xp.asin(x), (xp, x)


@unary(lambda g, xp, x: -g / xp.sqrt(1 - x * x), ELEMENTWISE)
def acos(xp, x):
    """Inverse cosine (``arccos``), for ``x`` in [-1, 1]; gradient ``-1 / sqrt(1 - x ** 2)`` (``-inf`` at ±1)."""
    return xp.acos(x), (xp, x)


@unary(lambda g, x: g / (1 + x * x), ELEMENTWISE)
def atan(xp, x):
    """Inverse tangent (``arctan``); gradient ``1 / (1 + x ** 2)``."""
    return xp.atan(x), (x,)


arcsin, arccos, arctan = asin, acos, atan  # numpy's older names


@unary(lambda g, xp, x: g * xp.cosh(x), ELEMENTWISE)
def sinh(xp, x):
    """Hyperbolic sine; gradient ``cosh(x)``."""
    return xp.sinh(x), (xp, x)


@unary(lambda g, xp, x: g * xp.sinh(x), ELEMENTWISE)
def cosh(xp, x):
    """Hyperbolic cosine; gradient ``sinh(x)``."""
    return xp.cosh(x), (xp, x)


@unary(lambda g, y: g * (1 - y * y), ELEMENTWISE, saves=("out",))
def tanh(xp, x):
    """Hyperbolic tangent; gradient ``1 - tanh(x) ** 2``."""
    y = xp.tanh(x)
    return y, (y,)


@unary(zero, ELEMENTWISE)
def sign(xp, x):
    """-1, 0 or 1 by the sign of ``x``. A step function: gradient 0 everywhere, also at 0 (as in PyTorch)."""
    return xp.sign(x), (xp,)


@unary(zero, ELEMENTWISE)
def floor(xp, x):
    """The largest integer ``<= x``. A step function: gradient 0 everywhere, also at the integers."""
    return xp.floor(x), (xp,)


@unary(zero, ELEMENTWISE)
def ceil(xp, x):
    """The smallest integer ``>= x``. A step function: gradient 0 everywhere, also at the integers."""
    return xp.ceil(x), (xp,)


@unary(zero, ELEMENTWISE)
def round(xp, x, decimals: int = 0):
    """Round to ``decimals`` places (negative: to tens, hundreds...), halves to even as numpy does
    (``round(0.5) == 0``, ``round(1.5) == 2``). A step function: gradient 0 everywhere, also at the halves."""
    if isinstance(decimals, bool) or not isinstance(decimals, numbers.Integral):
        raise InvalidArgumentError(f"round: decimals must be an integer, got {decimals!r}")
    if decimals == 0:
        return xp.round(x), (xp,)
    if decimals > 0:
        return xp.round(x * 10.0 ** decimals) / 10.0 ** decimals, (xp,)
    return xp.round(x / 10.0 ** -decimals) * 10.0 ** -decimals, (xp,)


def stable_sigmoid(xp, x):
    """``1 / (1 + exp(-x))`` without overflow: ``exp`` only ever sees ``-|x|``, taken as ``-x`` or
    ``x`` by ``where``, not by ``abs``: a recorded backward (create_graph) differentiates this, and
    abs's kink at 0 would make its derivative there 0."""
    e = xp.exp(xp.where(x >= 0, -x, x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


@unary(lambda g, y: g * y * (1 - y), ELEMENTWISE, saves=("out",))
def sigmoid(xp, x):
    """``1 / (1 + exp(-x))``, computed without overflow for any magnitude; gradient ``s * (1 - s)``."""
    y = stable_sigmoid(xp, x)
    return y, (y,)


@unary(where_false, ELEMENTWISE, saves=("xp", "dead"))
def relu(xp, x):
    """``max(x, 0)``; gradient 1 where ``x > 0``, else 0: 0 at 0. A NaN stays NaN and passes its
    gradient (both as in PyTorch)."""
    dead = x <= 0
    return xp.where(dead, xp.zeros_like(x), x), (xp, dead)


@unary(lambda g, xp, pos, slope: xp.where(pos, g, slope * g), ELEMENTWISE)
def leaky_relu(xp, x, negative_slope: float = 0.01):
    """``x`` where ``x > 0``, else ``negative_slope * x``; gradient 1 where ``x > 0``, else
    ``negative_slope``: ``negative_slope`` at 0 (as in PyTorch)."""
    _number(negative_slope, "leaky_relu", "negative_slope")
    pos = x > 0
    return xp.where(pos, x, negative_slope * x), (xp, pos, negative_slope)


@unary(lambda g, xp, x, pos, alpha: xp.where(pos, g, g * (alpha * xp.exp(xp.where(pos, 0.0, x)))), ELEMENTWISE)
def elu(xp, x, alpha: float = 1.0):
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``; gradient 1 where ``x > 0``, else
    ``alpha * exp(x)``: ``alpha`` at 0 (as in PyTorch)."""
    _number(alpha, "elu", "alpha")
    pos = x > 0
    below = xp.where(pos, 0.0, x)  # exp of a positive x could overflow (not minimum: its tie at 0 splits)
    return xp.where(pos, x, alpha * xp.expm1(below)), (xp, x, pos, alpha)


def _d_softplus(g, xp, x, beta, threshold):
    bx = beta * x
    d = stable_sigmoid(xp, bx)
    return g * (d if threshold is None else xp.where(bx > threshold, 1.0, d))


@unary(_d_softplus, ELEMENTWISE)
def softplus(xp, x, beta: float = 1.0, threshold: float | None = None):
    """``log(1 + exp(beta * x)) / beta``, a smooth relu, without overflow; gradient ``sigmoid(beta * x)``.

    With a ``threshold`` (PyTorch's option; 20 there), it is ``x`` where ``beta * x > threshold``, with
    gradient 1 (at ``beta * x == threshold`` the smooth formula holds)."""
    _number(beta, "softplus", "beta")
    if isinstance(beta, numbers.Real) and beta == 0:
        raise InvalidArgumentError("softplus: beta must not be 0 (it divides by beta); 1 is the plain softplus")
    if threshold is not None:
        _number(threshold, "softplus", "threshold")
    bx = beta * x
    y = xp.logaddexp(0.0, bx) / beta
    if threshold is not None:
        y = xp.where(bx > threshold, x, y)
    return y, (xp, x, beta, threshold)


def _d_silu(g, xp, x):
    s = stable_sigmoid(xp, x)
    return g * s * (1 + x * (1 - s))


@unary(_d_silu, ELEMENTWISE)
def silu(xp, x):
    """``x * sigmoid(x)`` (swish); gradient ``s * (1 + x * (1 - s))`` with ``s = sigmoid(x)``."""
    return x * stable_sigmoid(xp, x), (xp, x)


_ERF_SERIES = [2.0 ** n / math.prod(range(1, 2 * n + 2, 2)) for n in range(30)]  # terms: float64 below 2
_ERFC_LEVELS = 20  # levels of the continued fraction: float64 beyond 2


def _erfc(xp, x):
    """``1 - erf(x)`` to about 1e-13 relative in float64, from array-API calls alone (the array API
    has no erf). Below 2, the series ``erf(a) = 2 a exp(-a²) / sqrt(pi) * sum_n (2 a²) ** n / (1 * 3 *
    ... * (2n + 1))``; beyond, the continued fraction ``erfc(a) = a exp(-a²) / sqrt(pi) / (a² + 1/2 -
    (1*2/4) / (a² + 5/2 - (3*4/4) / (a² + 9/2 - ...)))``, run from its tail. ``where`` needs both
    everywhere, so each sees ``|x|`` clipped to its own range."""
    a = xp.where(x >= 0, x, -x)  # |x|, smooth through 0 as stable_sigmoid's is
    s = xp.minimum(a, 2.0)
    s2 = s * s
    series = _ERF_SERIES[-1]
    for c in reversed(_ERF_SERIES[:-1]):  # Horner's rule in s²
        series = series * s2 + c
    near = 1 - 2 * s * xp.exp(-s2) * series / math.sqrt(math.pi)
    t = xp.clip(a, 2.0, 30.0)  # erfc(30) is below float64's smallest number: 0
    t2 = t * t
    frac = t2 + (2 * _ERFC_LEVELS + 0.5)
    for k in range(_ERFC_LEVELS, 0, -1):
        frac = t2 + (2 * k - 1.5) - k * (2 * k - 1) / 2 / frac
    far = t * xp.exp(-t2) / math.sqrt(math.pi) / frac
    e = xp.where(a < 2.0, near, far)
    return xp.where(x < 0, 2 - e, e)


def _gelu_part(xp, x, approximate):
    """What gelu multiplies: ``Phi(x)`` (``"none"``), or the tanh of PyTorch's form (``"tanh"``)."""
    if approximate == "none":
        return 0.5 * _erfc(xp, -x / math.sqrt(2))
    return xp.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x))


def _d_gelu(g, xp, x, approximate):
    v = _gelu_part(xp, x, approximate)
    if approximate == "none":  # v is Phi(x); phi(x) = exp(-x²/2) / sqrt(2 pi)
        return g * (v + x * xp.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))
    slope = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x * x)  # v is the tanh
    return g * (0.5 * (1 + v) + 0.5 * x * (1 - v * v) * slope)


@unary(_d_gelu, ELEMENTWISE)
def gelu(xp, x, approximate: str = "none"):
    """``x * Phi(x)``, ``Phi`` the standard normal CDF (``0.5 * erfc(-x / sqrt(2))``); gradient
    ``Phi(x) + x * phi(x)``, ``phi`` the normal density.

    ``approximate="tanh"`` is PyTorch's tanh form, ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715
    * x ** 3)))``, with that formula's own gradient."""
    if approximate == "none":
        return x * _gelu_part(xp, x, approximate), (xp, x, approximate)
    if approximate == "tanh":
        return 0.5 * x * (1 + _gelu_part(xp, x, approximate)), (xp, x, approximate)
    raise InvalidArgumentError(f"gelu: approximate must be 'none' (the exact erf form) or 'tanh', "
                               f"got {approximate!r}")


@unary(where_true, ELEMENTWISE)
def clip(xp, x, low: float | None = None, high: float | None = None):
    """Limit values to ``[low, high]``; gradient 1 where ``low <= x <= high`` (at the bounds too, as
    in PyTorch), else 0. At least one bound must be given."""
    if low is None and high is None:
        raise InvalidArgumentError("clip needs a bound: give low, high or both, as in x.clip(0.0, None)")
    for bound, name in ((low, "low"), (high, "high")):
        if bound is not None:
            _number(bound, "clip", name, finite=False)
    inside = xp.ones_like(x) > 0
    if low is not None:
        inside = inside & (x >= low)
    if high is not None:
        inside = inside & (x <= high)
    return xp.clip(x, low, high), (xp, inside)


def _number(value: object, op: str, name: str, finite: bool = True) -> None:
    """``InvalidArgumentError`` unless an op's parameter is a real number or an array of them,
    finite unless not ``finite`` (a bound of ``clip`` may be infinite). A tensor is refused: an op's
    parameters are not differentiated."""
    if isinstance(value, Tensor):
        instead = "use tk.maximum(x, t) or tk.minimum(x, t), whose gradients reach t" if op == "clip" else \
            f"pass {value.label}.numpy() for its values"
        raise InvalidArgumentError(f"{op}: {name} must be a number or an array, got the tensor {value.label}; an "
                                   f"op's parameters are not differentiated: {instead}")
    if not hasattr(value, "dtype") and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
        raise InvalidArgumentError(f"{op}: {name} must be a number, got {value!r}")
    finite_value = math.isfinite(value) if isinstance(value, numbers.Real) else (
        not isinstance(value, (np.ndarray, np.generic)) or bool(np.all(np.isfinite(value))))  # a device's array: unread
    if finite and not finite_value:
        raise InvalidArgumentError(f"{op}: {name} must be finite, got {value!r}")
