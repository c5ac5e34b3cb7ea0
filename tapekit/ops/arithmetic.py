"""Arithmetic of two operands, broadcasting as numpy does; rules sit beside their forward."""

from __future__ import annotations

from typing import Any

from .core import binary


def _same(g: Any) -> Any:
    return g


def _neg(g: Any) -> Any:
    return -g


@binary
def add(xp, x, y):
    return x + y, (_same, _same)


@binary
def sub(xp, x, y):
    return x - y, (_same, _neg)


@binary
def mul(xp, x, y):
    return x * y, (lambda g: g * y, lambda g: g * x)


@binary
def div(xp, x, y):
    return x / y, (lambda g: g / y, lambda g: -g * x / (y * y))


@binary
def pow(xp, x, y):
    """``x ** y`` with a tensor exponent (``Tensor.__pow__`` uses ``power`` for a number)."""
    out = x ** y

    def d_exponent(g):
        base = x if hasattr(x, "shape") else xp.full_like(out, float(x))
        return g * out * xp.log(xp.where(base > 0, base, xp.ones_like(base)))

    return out, (lambda g: g * y * x ** (y - 1), d_exponent)


@binary
def maximum(xp, x, y):
    """Elementwise maximum; at ties the gradient goes to ``x``."""
    pick = x >= y
    return xp.maximum(x, y), (lambda g: xp.where(pick, g, xp.zeros_like(g)), lambda g: xp.where(pick, xp.zeros_like(g), g))


@binary
def minimum(xp, x, y):
    """Elementwise minimum; at ties the gradient goes to ``x``."""
    pick = x <= y
    return xp.minimum(x, y), (lambda g: xp.where(pick, g, xp.zeros_like(g)), lambda g: xp.where(pick, xp.zeros_like(g), g))
