"""Reductions and the softmax family, numerically stable; each rule sits beside its forward."""

from __future__ import annotations

from typing import Any

from .core import normalize_axes, unary

__all__ = ["sum", "mean", "max", "logsumexp", "softmax", "log_softmax"]


def _expand(g: Any, xp: Any, shape: tuple[int, ...], axes: tuple[int, ...] | None, keepdims: bool) -> Any:
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


def _reduced(y: Any, xp: Any, shape: tuple[int, ...], axes: tuple[int, ...] | None, keepdims: bool) -> Any:
    """``y``, reduced with ``keepdims=True``, without the reduced axes unless ``keepdims``."""
    return y if keepdims else xp.reshape(y, tuple(n for i, n in enumerate(shape) if axes is not None and i not in axes))


@unary(_expand)
def sum(xp, x, axis=None, keepdims: bool = False):
    axes = normalize_axes(axis, x.ndim, "sum")
    return xp.sum(x, axis=axes, keepdims=keepdims), (xp, x.shape, axes, keepdims)


@unary(lambda g, xp, shape, axes, keepdims, n: _expand(g / n, xp, shape, axes, keepdims))
def mean(xp, x, axis=None, keepdims: bool = False):
    axes = normalize_axes(axis, x.ndim, "mean")
    return xp.mean(x, axis=axes, keepdims=keepdims), (xp, x.shape, axes, keepdims, _count(x.shape, axes))


def _max_grad(g, xp, x, y, axes, keepdims):
    """Ties share the gradient equally."""
    hit = xp.astype(x == y, x.dtype)
    share = hit / xp.sum(hit, axis=axes, keepdims=True)
    return share * _expand(g, xp, x.shape, axes, keepdims)


@unary(_max_grad)
def max(xp, x, axis=None, keepdims: bool = False):
    """Maximum over ``axis``; ties share the gradient equally."""
    axes = normalize_axes(axis, x.ndim, "max")
    y = xp.max(x, axis=axes, keepdims=True)
    return _reduced(y, xp, x.shape, axes, keepdims), (xp, x, y, axes, keepdims)


@unary(lambda g, xp, shape, axes, keepdims, e, s: _expand(g, xp, shape, axes, keepdims) * (e / s))
def logsumexp(xp, x, axis=None, keepdims: bool = False):
    """``log(sum(exp(x)))`` over ``axis``, shifted by the maximum so it never overflows."""
    axes = normalize_axes(axis, x.ndim, "logsumexp")
    m = xp.max(x, axis=axes, keepdims=True)
    e = xp.exp(x - m)
    s = xp.sum(e, axis=axes, keepdims=True)
    return _reduced(m + xp.log(s), xp, x.shape, axes, keepdims), (xp, x.shape, axes, keepdims, e, s)


@unary(lambda g, xp, y, ax: y * (g - xp.sum(g * y, axis=ax, keepdims=True)))
def softmax(xp, x, axis: int = -1):
    (ax,) = normalize_axes(axis, x.ndim, "softmax")
    e = xp.exp(x - xp.max(x, axis=ax, keepdims=True))
    y = e / xp.sum(e, axis=ax, keepdims=True)
    return y, (xp, y, ax)


@unary(lambda g, xp, y, ax: g - xp.exp(y) * xp.sum(g, axis=ax, keepdims=True))
def log_softmax(xp, x, axis: int = -1):
    (ax,) = normalize_axes(axis, x.ndim, "log_softmax")
    y = stable_log_softmax(xp, x, ax)
    return y, (xp, y, ax)


def stable_log_softmax(xp: Any, x: Any, axis: int) -> Any:
    """``log softmax(x)`` along ``axis`` of an array, shifted by the maximum so it never overflows."""
    shifted = x - xp.max(x, axis=axis, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))
