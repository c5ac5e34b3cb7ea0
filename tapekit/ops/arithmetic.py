"""Arithmetic of two operands, broadcasting as numpy does; rules sit beside their forward."""

from __future__ import annotations

from typing import Any

from .core import binary, same, where_false, where_true

__all__ = ["add", "sub", "mul", "div", "pow", "maximum", "minimum"]


def _neg(g: Any) -> Any:
    return -g


@binary(same, same)
def add(xp, x, y):
    return x + y, ()


@binary(same, _neg)
def sub(xp, x, y):
    return x - y, ()


@binary(lambda g, x, y: g * y, lambda g, x, y: g * x)
def mul(xp, x, y):
    return x * y, (x, y)


@binary(lambda g, x, y: g / y, lambda g, x, y: -g * x / (y * y))
def div(xp, x, y):
    return x / y, (x, y)


def _d_exponent(g, xp, x, y, out):
    base = x if hasattr(x, "shape") else xp.full_like(out, float(x))
    return g * out * xp.log(xp.where(base > 0, base, xp.ones_like(base)))


@binary(lambda g, xp, x, y, out: g * y * x ** (y - 1), _d_exponent)
def pow(xp, x, y):
    """``x ** y`` with a tensor exponent (``Tensor.__pow__`` uses ``power`` for a number)."""
    out = x ** y
    return out, (xp, x, y, out)


@binary(where_true, where_false)
def maximum(xp, x, y):
    """Elementwise maximum; at ties the gradient goes to ``x``."""
    return xp.maximum(x, y), (xp, x >= y)


@binary(where_true, where_false)
def minimum(xp, x, y):
    """Elementwise minimum; at ties the gradient goes to ``x``."""
    return xp.minimum(x, y), (xp, x <= y)
