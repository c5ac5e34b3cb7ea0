"""Arithmetic of two operands, broadcasting as numpy does; rules sit beside their forward."""

from __future__ import annotations

import math
from typing import Any

from .core import binary, same, zero
from .elementwise import d_power, refuse_negative_integer_power, stable_sigmoid

__all__ = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "logaddexp", "floor_divide", "remainder"]


def _neg(g: Any) -> Any:
    return -g


@binary(same, same)
def add(xp, x, y):
    """``x + y``, broadcasting as numpy; gradient 1 for both (summed over broadcast axes)."""
    return x + y, ()


@binary(same, _neg)
def sub(xp, x, y):
    """``x - y``, broadcasting as numpy; gradient 1 for ``x`` and -1 for ``y``."""
    return x - y, ()


@binary(lambda g, x, y: g * y, lambda g, x, y: g * x, saves=("x", "y"))
def mul(xp, x, y):
    """``x * y``, broadcasting as numpy; gradient ``y`` for ``x`` and ``x`` for ``y``."""
    return x * y, (x, y)


@binary(lambda g, y, out: g / y, lambda g, y, out: -g * out / y, saves=("y", "out"))
def div(xp, x, y):
    """``x / y``, broadcasting as numpy; gradient ``1 / y`` for ``x`` and ``-x / y²`` for ``y``,
    computed as ``-(x / y) / y`` so that ``y²`` cannot overflow or underflow."""
    out = x / y
    return out, (y, out)


def _d_exponent(g, xp, x, y, out):
    """The rule of ``x ** y`` for ``y``: ``x ** y * log(x)``, with PyTorch's values where the base is 0
    (0 for ``y >= 0``, ``-inf`` for ``y < 0``) and nan for a negative base."""
    base = x if hasattr(x, "shape") else xp.full_like(out, float(x))
    base_0 = base == 0
    at_0 = xp.where(y < 0, -out, xp.zeros_like(out))  # -out is -inf there
    return g * xp.where(base_0, at_0, out * xp.log(xp.where(base_0, 1.0, base)))


@binary(lambda g, xp, x, y, out: d_power(g, xp, x, y), _d_exponent)
def pow(xp, x, y):
    """``x ** y`` with a tensor exponent or a number base (``Tensor.__pow__`` uses ``power`` for a
    number exponent). Gradients: ``y * x ** (y - 1)`` for ``x`` (0 where ``y == 0``; see ``power`` for
    ``x == 0``) and ``x ** y * log(x)`` for ``y`` (0 where ``x == 0`` and ``y >= 0``, ``-inf`` where
    ``x == 0`` and ``y < 0``, nan for ``x < 0``), as in PyTorch."""
    refuse_negative_integer_power(xp, x, y)
    out = x ** y
    return out, (xp, x, y, out)


def _winner_x(g: Any, xp: Any, x_wins: Any, tie: Any) -> Any:
    """``x``'s gradient of a pick between ``x`` and ``y``: all of ``g`` where ``x`` was picked, half at a tie."""
    return xp.where(x_wins, g, xp.where(tie, g / 2, xp.zeros_like(g)))


def _winner_y(g: Any, xp: Any, x_wins: Any, tie: Any) -> Any:
    """``y``'s gradient of a pick between ``x`` and ``y``: all of ``g`` where ``y`` was picked, half at a tie."""
    return xp.where(x_wins, xp.zeros_like(g), xp.where(tie, g / 2, g))


@binary(_winner_x, _winner_y)
def maximum(xp, x, y):
    """Elementwise maximum; the gradient goes to the larger operand, half to each at a tie (as in
    dfdx and PyTorch), and to a NaN operand where the output is NaN (``x`` when both are)."""
    return xp.maximum(x, y), (xp, (x > y) | (x != x), x == y)  # x != x: x is NaN (x may be a number)


@binary(_winner_x, _winner_y)
def minimum(xp, x, y):
    """Elementwise minimum; the gradient goes to the smaller operand, half to each at a tie (as in
    dfdx and PyTorch), and to a NaN operand where the output is NaN (``x`` when both are)."""
    return xp.minimum(x, y), (xp, (x < y) | (x != x), x == y)  # x != x: x is NaN (x may be a number)


def _share_x(g: Any, xp: Any, x: Any, y: Any) -> Any:
    """``x``'s gradient of ``logaddexp``: ``g`` times the softmax of the pair, ``exp(x - out)``, computed
    from the difference as ``sigmoid(x - y)``, so that at a tie it is 1/2 however large ``x`` is
    (``x - out`` rounds to 0 from about 1e16)."""
    if not (hasattr(x, "shape") and hasattr(y, "shape")):  # a number beside an array: the difference as it is
        return g * stable_sigmoid(xp, x - y)
    tie = (x == y) & (xp.abs(x) == math.inf)  # a tie of infinities, whose difference is NaN: 1/2 each
    return g * stable_sigmoid(xp, xp.where(tie, 0.0, x) - xp.where(tie, 0.0, y))


@binary(_share_x, lambda g, xp, x, y: _share_x(g, xp, y, x))
def logaddexp(xp, x, y):
    """``log(exp(x) + exp(y))`` without overflow. Gradients ``exp(x - out)`` and ``exp(y - out)``
    (the softmax of the pair: 1/2 each at ties, all of it to an infinite operand)."""
    return xp.logaddexp(x, y), (xp, x, y)


@binary(zero, zero)
def floor_divide(xp, x, y):
    """``floor(x / y)`` (``x // y``) as numpy computes it. A step function: gradient 0 for both
    operands (PyTorch has no derivative for it and raises; JAX gives 0 too)."""
    return x // y, (xp,)


@binary(same, lambda g, x, y: -g * (x // y))
def remainder(xp, x, y):
    """``x - floor(x / y) * y`` (``x % y``), with the sign of ``y`` as in numpy. Gradients, as in
    PyTorch: 1 for ``x`` and ``-floor(x / y)`` for ``y``, at the jumps (where ``x / y`` is an integer) too."""
    return x % y, (x, y)
