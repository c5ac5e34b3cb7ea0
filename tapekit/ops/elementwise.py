"""Elementwise functions of one tensor; each rule sits beside its forward."""

from __future__ import annotations

from .core import unary, where_true

__all__ = ["neg", "power", "abs", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "sin", "cos", "clip"]


@unary(lambda g: -g)
def neg(xp, x):
    return -x, ()


@unary(lambda g, x, p: g * p * x ** (p - 1))
def power(xp, x, p: float):
    """``x ** p`` for a number ``p``."""
    return x ** p, (x, p)


@unary(lambda g, xp, x: g * xp.sign(x))
def abs(xp, x):
    return xp.abs(x), (xp, x)


@unary(lambda g, y: g * y)
def exp(xp, x):
    y = xp.exp(x)
    return y, (y,)


@unary(lambda g, x: g / x)
def log(xp, x):
    return xp.log(x), (x,)


@unary(lambda g, y: g / (2 * y))
def sqrt(xp, x):
    y = xp.sqrt(x)
    return y, (y,)


@unary(lambda g, y: g * (1 - y * y))
def tanh(xp, x):
    y = xp.tanh(x)
    return y, (y,)


@unary(lambda g, y: g * y * (1 - y))
def sigmoid(xp, x):
    """``1 / (1 + exp(-x))``, computed without overflow for any magnitude."""
    e = xp.exp(-xp.abs(x))
    y = xp.where(x >= 0, 1 / (1 + e), e / (1 + e))
    return y, (y,)


@unary(where_true)
def relu(xp, x):
    keep = x > 0
    return xp.where(keep, x, xp.zeros_like(x)), (xp, keep)


@unary(lambda g, xp, x: g * xp.cos(x))
def sin(xp, x):
    return xp.sin(x), (xp, x)


@unary(lambda g, xp, x: -g * xp.sin(x))
def cos(xp, x):
    return xp.cos(x), (xp, x)


@unary(where_true)
def clip(xp, x, low: float | None = None, high: float | None = None):
    """Limit values to ``[low, high]``; the gradient passes where ``x`` was inside."""
    inside = xp.ones_like(x) > 0
    if low is not None:
        inside = inside & (x >= low)
    if high is not None:
        inside = inside & (x <= high)
    return xp.clip(x, low, high), (xp, inside)
