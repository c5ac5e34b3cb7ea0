"""Reductions and the softmax family, numerically stable; each rule sits beside its forward."""

from __future__ import annotations

from typing import Any

from .core import normalize_axes, unary


def _expand(xp: Any, g: Any, shape: tuple[int, ...], axes: tuple[int, ...] | None, keepdims: bool) -> Any:
    """Broadcast a reduced gradient back over the reduced axes of ``shape``."""
    if not keepdims:
        kept = tuple(1 if axes is None or i in axes else n for i, n in enumerate(shape))
        g = xp.reshape(g, kept)
    return xp.broadcast_to(g, shape)


def _count(shape: tuple[int, ...], axes: tuple[int, ...] | None) -> int:
    n = 1
    for i, size in enumerate(shape):
        if axes is None or i in axes:
            n *= size
    return n


@unary
def sum(xp, x, axis=None, keepdims: bool = False):
    axes = normalize_axes(axis, x.ndim, "sum")
    shape = x.shape
    return xp.sum(x, axis=axes, keepdims=keepdims), lambda g: _expand(xp, g, shape, axes, keepdims)


@unary
def mean(xp, x, axis=None, keepdims: bool = False):
    axes = normalize_axes(axis, x.ndim, "mean")
    shape, n = x.shape, _count(x.shape, axes)
    return xp.mean(x, axis=axes, keepdims=keepdims), lambda g: _expand(xp, g / n, shape, axes, keepdims)


@unary
def max(xp, x, axis=None, keepdims: bool = False):
    """Maximum over ``axis``; ties share the gradient equally."""
    axes = normalize_axes(axis, x.ndim, "max")
    y = xp.max(x, axis=axes, keepdims=True)

    def rule(g):
        hit = xp.astype(x == y, x.dtype)
        share = hit / xp.sum(hit, axis=axes, keepdims=True)
        return share * _expand(xp, g, x.shape, axes, keepdims)

    return (y if keepdims else xp.reshape(y, tuple(n for i, n in enumerate(x.shape)
                                                   if axes is not None and i not in axes))), rule


@unary
def logsumexp(xp, x, axis=None, keepdims: bool = False):
    """``log(sum(exp(x)))`` over ``axis``, shifted by the maximum so it never overflows."""
    axes = normalize_axes(axis, x.ndim, "logsumexp")
    m = xp.max(x, axis=axes, keepdims=True)
    e = xp.exp(x - m)
    s = xp.sum(e, axis=axes, keepdims=True)
    y = m + xp.log(s)
    out = y if keepdims else xp.reshape(y, tuple(n for i, n in enumerate(x.shape) if axes is not None and i not in axes))
    return out, lambda g: _expand(xp, g, x.shape, axes, keepdims) * (e / s)


@unary
def softmax(xp, x, axis: int = -1):
    (ax,) = normalize_axes(axis, x.ndim, "softmax")
    e = xp.exp(x - xp.max(x, axis=ax, keepdims=True))
    y = e / xp.sum(e, axis=ax, keepdims=True)
    return y, lambda g: y * (g - xp.sum(g * y, axis=ax, keepdims=True))


@unary
def log_softmax(xp, x, axis: int = -1):
    (ax,) = normalize_axes(axis, x.ndim, "log_softmax")
    shifted = x - xp.max(x, axis=ax, keepdims=True)
    y = shifted - xp.log(xp.sum(xp.exp(shifted), axis=ax, keepdims=True))
    return y, lambda g: g - xp.exp(y) * xp.sum(g, axis=ax, keepdims=True)
