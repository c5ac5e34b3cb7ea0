"""Elementwise functions of one tensor; each rule sits beside its forward."""

from __future__ import annotations

from .core import unary


@unary
def neg(xp, x):
    return -x, lambda g: -g


@unary
def power(xp, x, p: float):
    """``x ** p`` for a number ``p``."""
    return x ** p, lambda g: g * p * x ** (p - 1)


@unary
def abs(xp, x):
    return xp.abs(x), lambda g: g * xp.sign(x)


@unary
def exp(xp, x):
    y = xp.exp(x)
    return y, lambda g: g * y


@unary
def log(xp, x):
    return xp.log(x), lambda g: g / x


@unary
def sqrt(xp, x):
    y = xp.sqrt(x)
    return y, lambda g: g / (2 * y)


@unary
def tanh(xp, x):
    y = xp.tanh(x)
    return y, lambda g: g * (1 - y * y)


@unary
def sigmoid(xp, x):
    """``1 / (1 + exp(-x))``, computed without overflow for any magnitude."""
    e = xp.exp(-xp.abs(x))
    y = xp.where(x >= 0, 1 / (1 + e), e / (1 + e))
    return y, lambda g: g * y * (1 - y)


@unary
def relu(xp, x):
    keep = x > 0
    return xp.where(keep, x, xp.zeros_like(x)), lambda g: xp.where(keep, g, xp.zeros_like(g))


@unary
def sin(xp, x):
    return xp.sin(x), lambda g: g * xp.cos(x)


@unary
def cos(xp, x):
    return xp.cos(x), lambda g: -g * xp.sin(x)


@unary
def clip(xp, x, low: float | None = None, high: float | None = None):
    """Limit values to ``[low, high]``; the gradient passes where ``x`` was inside."""
    inside = xp.ones_like(x) > 0
    if low is not None:
        inside = inside & (x >= low)
    if high is not None:
        inside = inside & (x <= high)
    return xp.clip(x, low, high), lambda g: xp.where(inside, g, xp.zeros_like(g))
