"""Reductions, running sums and the softmax family, numerically stable; each rule sits beside its forward.

Every reduction takes numpy's ``axis`` (None for all axes, an int, or a tuple of ints) and
``keepdims``. A 0-d tensor takes axis 0 or -1 and is reduced over no axis (as in PyTorch).
``argmax``, ``argmin``, ``all`` and ``any`` give integer or boolean tensors with no gradient and
no tangent (no forward rule: ``tk.jvp`` refuses them as outputs; inside, they are constants).

A reduction's output moves with each element ``x_i`` at a rate ``slope_i``: its backward rule is
the output's gradient broadcast back times the slope, its forward rule (JVP) the sum of the
tangent times the slope (``by_slope``), one definition of the slope for both.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ..errors import AxisError, InvalidArgumentError, ShapeError, checked_number
from ..tensor import Tensor
from .core import LINEAR, forward_of, normalize_axes, unary

__all__ = ["sum", "mean", "max", "min", "prod", "var", "std", "logsumexp", "softmax", "log_softmax", "cumsum",
           "cumprod", "argmax", "argmin", "all", "any"]


def _expand(g: Any, xp: Any, shape: tuple[int, ...], axes: tuple[int, ...] | None, keepdims: bool) -> Any:
    """Broadcast a reduced gradient back over the reduced axes of ``shape``. Where those are the
    leading axes (all of them, for ``axis=None``), numpy's broadcasting puts them back by itself."""
    leading = axes is None or axes == tuple(range(len(axes)))
    if not keepdims and not leading:
        kept = tuple(1 if axes is None or i in axes else n for i, n in enumerate(shape))
        g = xp.reshape(g, kept)
    return xp.broadcast_to(g, shape)


def by_slope(slope: Callable) -> tuple[Callable, Callable]:
    """The backward and forward rules of a reduction over ``axes`` whose derivative in each element
    is ``slope(xp, axes, *rest)`` (an array of the operand's shape), for ``saved = (xp, axes,
    keepdims, *rest)``: ``g`` broadcast back times the slope, and the sum of ``t`` times the slope."""
    def backward(g: Any, xp: Any, axes: Any, keepdims: bool, *rest: Any) -> Any:
        d = slope(xp, axes, *rest)
        return _expand(g, xp, d.shape, axes, keepdims) * d

    def forward(t: Any, xp: Any, axes: Any, keepdims: bool, *rest: Any) -> Any:
        return xp.sum(t * slope(xp, axes, *rest), axis=axes, keepdims=keepdims)

    return backward, forward


def _count(shape: tuple[int, ...], axes: tuple[int, ...] | None) -> int:
    n = 1
    for i, size in enumerate(shape):
        if axes is None or i in axes:
            n *= size
    return n


def _reduced(y: Any, xp: Any, shape: tuple[int, ...], axes: tuple[int, ...] | None, keepdims: bool) -> Any:
    """``y``, reduced with ``keepdims=True``, without the reduced axes unless ``keepdims``."""
    return y if keepdims else xp.reshape(y, tuple(n for i, n in enumerate(shape) if axes is not None and i not in axes))


def _one_axis(axis: Any, ndim: int, op: str) -> int | None:
    """``axis`` of an op that runs along one axis, as a non-negative int; None for ``axis=None``
    (the flattened tensor) and on a 0-d tensor, which has no axis to run along."""
    if isinstance(axis, (tuple, list)):
        raise AxisError(f"{op} runs along one axis: pass an int, or None for the flattened tensor, not {axis!r}")
    axes = normalize_axes(axis, ndim, op)
    return axes[0] if axes else None


@unary(_expand, LINEAR)
def sum(xp, x, axis=None, keepdims: bool = False):
    """Sum over ``axis``. Every element's gradient is the output's gradient (broadcast back)."""
    axes = normalize_axes(axis, x.ndim, "sum")
    return xp.sum(x, axis=axes, keepdims=keepdims), (xp, x.shape, axes, keepdims)


@unary(lambda g, xp, shape, axes, keepdims, n: _expand(g / n, xp, shape, axes, keepdims), LINEAR)
def mean(xp, x, axis=None, keepdims: bool = False):
    """Mean over ``axis``. Every element's gradient is the output's gradient divided by the count ``n``."""
    axes = normalize_axes(axis, x.ndim, "mean")
    return xp.mean(x, axis=axes, keepdims=keepdims), (xp, x.shape, axes, keepdims, _count(x.shape, axes))


def _shares(xp, axes, x, y):
    """The slope of a maximum or minimum ``y``: the elements equal to it (the NaNs, for a NaN
    result) share it equally; the others have none."""
    hit = xp.astype((x == y) | (xp.isnan(x) & xp.isnan(y)), x.dtype)
    return hit / xp.sum(hit, axis=axes, keepdims=True)


def _extremum(pick: Callable, xp: Any, x: Any, axis: Any, keepdims: bool, op: str) -> tuple:
    axes = normalize_axes(axis, x.ndim, op)
    if 0 in [x.shape[a] for a in (range(x.ndim) if axes is None else axes)]:  # (this module's any is an op)
        raise ShapeError(f"{op} over an empty axis of a tensor of shape {tuple(x.shape)} has no value; reduce over "
                         f"axes that hold values")
    y = pick(x, axis=axes, keepdims=True)
    return _reduced(y, xp, x.shape, axes, keepdims), (xp, axes, keepdims, x, y)


@unary(*by_slope(_shares))
def max(xp, x, axis=None, keepdims: bool = False):
    """Maximum over ``axis``. The gradient goes to the maximal elements; ties share it equally.
    Forward rule (JVP): the tangent of the maximal element, the mean of theirs at a tie."""
    return _extremum(xp.max, xp, x, axis, keepdims, "max")


@unary(*by_slope(_shares))
def min(xp, x, axis=None, keepdims: bool = False):
    """Minimum over ``axis``. The gradient goes to the minimal elements; ties share it equally.
    Forward rule (JVP): the tangent of the minimal element, the mean of theirs at a tie."""
    return _extremum(xp.min, xp, x, axis, keepdims, "min")


def _product_of_others(xp: Any, x: Any, axes: tuple[int, ...] | None) -> Any:
    """For each element, the product of the other elements over ``axes``: the running product of
    the elements before it times that of the elements after it. No division, so zeros are exact."""
    axes = tuple(range(x.ndim)) if axes is None else axes
    last = tuple(range(x.ndim - len(axes), x.ndim))
    moved = xp.moveaxis(x, axes, last)  # the reduced axes last, then flattened into one
    lines = xp.reshape(moved, moved.shape[:x.ndim - len(axes)] + (_count(x.shape, axes),))
    before, after = _products_before(xp, lines), xp.flip(_products_before(xp, xp.flip(lines, axis=-1)), axis=-1)
    return xp.moveaxis(xp.reshape(before * after, moved.shape), last, axes)


@unary(*by_slope(lambda xp, axes, x: _product_of_others(xp, x, axes)))
def prod(xp, x, axis=None, keepdims: bool = False):
    """Product over ``axis``. Each element's gradient is the output's gradient times the product of
    the other elements, computed without dividing by the element: where one element is 0 only it
    gets a gradient (the product of the others); where two or more are 0 every gradient is 0.
    Forward rule (JVP): the sum of each tangent times the product of the other elements."""
    axes = normalize_axes(axis, x.ndim, "prod")
    return xp.prod(x, axis=axes, keepdims=keepdims), (xp, axes, keepdims, x)


def _deviations(xp: Any, x: Any, axis: Any, correction: float, ddof: float | None, op: str) -> tuple:
    """The reduced axes, ``x - mean(x)`` over them, and the divisor ``n - correction`` (``ddof`` is
    numpy's name for ``correction``)."""
    if ddof is not None:
        if correction not in (0, ddof):
            raise InvalidArgumentError(f"{op}: correction={correction!r} and ddof={ddof!r} disagree; ddof is "
                                       f"numpy's name for correction, so pass one of them")
        correction = ddof
    c = checked_number(correction, f"{op}'s correction", lambda v: v >= 0,
                       "a number >= 0 (0: the population variance, 1: the sample variance)")
    axes = normalize_axes(axis, x.ndim, op)
    n = _count(x.shape, axes)
    if n <= c:
        raise InvalidArgumentError(f"{op}: correction={c:g} leaves no positive divisor n - correction for the {n} "
                                   f"element(s) reduced over: the spread of so few values is undefined (numpy "
                                   f"gives nan). Use correction=0, or reduce over more elements.")
    return axes, _centred(xp, x, axes), n - c


def _centred(xp: Any, x: Any, axes: Any) -> Any:
    """``x - mean(x)`` over ``axes``, corrected by a second pass: where the mean rounds (three 0.1s),
    each deviation would be the same tiny number instead of 0, and std's gradient -1/n each."""
    d = x - xp.mean(x, axis=axes, keepdims=True)
    return d - xp.mean(d, axis=axes, keepdims=True)


@unary(*by_slope(lambda xp, axes, x, dof: (2 / dof) * _centred(xp, x, axes)))
def var(xp, x, axis=None, keepdims: bool = False, *, correction: float = 0, ddof: float | None = None):
    """Variance over ``axis``: ``sum((x - mean)**2) / (n - correction)`` for ``n`` elements.

    ``correction=0`` (the default, as in numpy) is the population variance, ``correction=1`` the
    sample variance; ``ddof`` is numpy's name for it. Reducing over ``n <= correction`` elements
    raises ``InvalidArgumentError`` (numpy gives nan). The gradient is ``2 (x - mean) / (n - correction)``;
    forward rule (JVP): the sum of the tangent times it."""
    axes, d, dof = _deviations(xp, x, axis, correction, ddof, "var")
    return xp.sum(d * d, axis=axes, keepdims=keepdims) / dof, (xp, axes, keepdims, x, dof)


def _std_slope(xp, axes, x, dof):
    """``(x - mean) / ((n - correction) std)``, and 0 where std is 0 (a kink, like ``abs`` at 0)."""
    d = _centred(xp, x, axes)
    v = xp.sum(d * d, axis=axes, keepdims=True) / dof
    # std is 0 only where every deviation is 0: the slope is 0 there, and so is its derivative (a recorded
    # backward's: create_graph). The root is taken of 1 there, not of 0, whose derivative is infinite: the
    # branch where() does not take would still pass 0 * inf = NaN back.
    positive = v > 0
    s = xp.sqrt(xp.where(positive, v, xp.ones_like(v)))
    return xp.where(positive, d / (dof * s), xp.zeros_like(d))


@unary(*by_slope(_std_slope))
def std(xp, x, axis=None, keepdims: bool = False, *, correction: float = 0, ddof: float | None = None):
    """Standard deviation over ``axis``: the square root of ``var`` (same ``correction``/``ddof``).

    The gradient is ``(x - mean) / ((n - correction) std)``; where std is 0 (all values equal, or
    one value), it is 0 rather than 0/0. Forward rule (JVP): the sum of the tangent times the gradient."""
    axes, d, dof = _deviations(xp, x, axis, correction, ddof, "std")
    s = xp.sqrt(xp.sum(d * d, axis=axes, keepdims=True) / dof)
    return _reduced(s, xp, x.shape, axes, keepdims), (xp, axes, keepdims, x, dof)


@unary(*by_slope(lambda xp, axes, x: _softmax_of(xp, x, axes)))
def logsumexp(xp, x, axis=None, keepdims: bool = False):
    """``log(sum(exp(x)))`` over ``axis``, shifted by the maximum so it never overflows; all -inf gives
    -inf, an inf gives inf, and an empty axis -inf (as in PyTorch). The gradient is the output's
    gradient times ``softmax(x)`` over ``axis``; forward rule (JVP): the sum of the tangent times
    ``softmax(x)``."""
    axes = normalize_axes(axis, x.ndim, "logsumexp")
    m = _shift(xp, x, axes)
    e = xp.exp(x - m)
    s = xp.sum(e, axis=axes, keepdims=True)
    return _reduced(m + xp.log(s), xp, x.shape, axes, keepdims), (xp, axes, keepdims, x)


def _softmax_of(xp: Any, x: Any, axes: Any) -> Any:
    """``softmax(x)`` over ``axes``, shifted by the maximum (the slope of ``logsumexp``)."""
    e = xp.exp(x - _shift(xp, x, axes))
    return e / xp.sum(e, axis=axes, keepdims=True)


def _softmax_rule(g, xp, y, ax):
    """``y (g - sum(g y))``: ``Jᵀ g`` and, as the Jacobian ``diag(y) - y yᵀ`` is symmetric, ``J g``."""
    return y * (g - xp.sum(g * y, axis=ax, keepdims=True))


@unary(_softmax_rule, _softmax_rule)
def softmax(xp, x, axis: Any = -1):
    """``exp(x) / sum(exp(x))`` along ``axis`` (default -1; a tuple or None normalizes over those
    axes or all of them, as ``scipy.special.softmax``). The gradient is ``y (g - sum(g y))``; a 0-d
    tensor's softmax is 1, with gradient 0. The Jacobian is symmetric, so the forward rule (JVP) is
    the same, ``y (t - sum(t y))``."""
    ax = normalize_axes(axis, x.ndim, "softmax")
    e = xp.exp(x - _shift(xp, x, ax))
    y = e / xp.sum(e, axis=ax, keepdims=True)
    return y, (xp, y, ax)


@unary(lambda g, xp, y, ax: g - xp.exp(y) * xp.sum(g, axis=ax, keepdims=True),
       lambda t, xp, y, ax: t - xp.sum(xp.exp(y) * t, axis=ax, keepdims=True))
def log_softmax(xp, x, axis: Any = -1):
    """``log(softmax(x))`` along ``axis``, computed stably. The gradient is ``g - softmax(x) sum(g)``;
    forward rule (JVP): ``t - sum(softmax(x) t)``. A 0-d tensor's log_softmax is 0, with gradient 0."""
    ax = normalize_axes(axis, x.ndim, "log_softmax")
    y = stable_log_softmax(xp, x, ax)
    return y, (xp, y, ax)


def _shift(xp: Any, x: Any, axis: Any) -> Any:
    """What to subtract from ``x`` before ``exp`` so that it cannot overflow: the maximum over
    ``axis`` (kept as axes of size 1), except 0 where the maximum is infinite (no shift makes all -inf,
    or an inf, finite) and over an empty axis, which has no maximum."""
    axes = range(x.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
    if 0 in [x.shape[i] for i in axes]:  # not any(...): in this module, any is the op
        return xp.zeros_like(xp.sum(x, axis=axis, keepdims=True))
    m = xp.max(x, axis=axis, keepdims=True)
    return xp.where(xp.isfinite(m), m, xp.zeros_like(m))


def stable_log_softmax(xp: Any, x: Any, axis: Any) -> Any:
    """``log softmax(x)`` along ``axis`` of an array, shifted by the maximum so it never overflows."""
    shifted = x - _shift(xp, x, axis)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))


def _cumsum_grad(g, xp, shape, lines, ax):
    """The running sum of ``g`` from the end: element i feeds every output from i on."""
    g = xp.flip(xp.cumulative_sum(xp.flip(xp.reshape(g, lines), axis=ax), axis=ax), axis=ax)
    return xp.reshape(g, shape)


@unary(_cumsum_grad, LINEAR)
def cumsum(xp, x, axis=None):
    """Running sums along ``axis``; ``axis=None`` runs along the flattened tensor (as numpy does).
    Element i's gradient is the sum of the output's gradients from i to the end of its line."""
    ax = _one_axis(axis, x.ndim, "cumsum")
    lines = x if ax is not None else xp.reshape(x, (-1,))  # a 0-d tensor is a line of one
    ax = 0 if ax is None else ax
    y = xp.cumulative_sum(lines, axis=ax)
    return (y if axis is None else xp.reshape(y, x.shape)), (xp, x.shape, lines.shape, ax)


def _ahead(xp: Any, v: Any, k: int) -> Any:
    """``v`` moved ``k`` places back along the last axis: element i holds ``v[i + k]``, 0 past the end."""
    return xp.concat([v[..., k:], xp.zeros_like(v[..., :k])], axis=-1)


def _suffix_scan(xp: Any, u: Any, a: Any) -> Any:
    """``T`` with ``T[k] = u[k] + a[k] * T[k + 1]`` along the last axis (0 past the end), that is
    ``T[k] = sum over i >= k of u[i] * a[k] * ... * a[i - 1]``, in log2(n) doubling steps: after
    each, ``u[k]`` holds the terms of a span twice as long and ``a[k]`` the product over that
    span. Products and sums only, so zeros are exact, and every step records as ops."""
    span = 1
    while span < u.shape[-1]:
        u = u + a * _ahead(xp, u, span)
        a = a * _ahead(xp, a, span)
        span *= 2
    return u


def _products_before(xp: Any, x: Any) -> Any:
    """The product of the elements before each one along the last axis (1 for the first)."""
    return xp.cumulative_prod(x, axis=-1, include_initial=True)[..., :-1]


def _along(rule: Callable, v: Any, xp: Any, lines: tuple, ax: int, x: Any, shape: tuple) -> Any:
    """``rule(xp, v, x)``, written along the last axis, applied along axis ``ax`` of ``v`` and ``x``
    seen as ``lines``; the result shaped as ``shape``."""
    last = rule(xp, xp.moveaxis(xp.reshape(v, lines), ax, -1), xp.moveaxis(xp.reshape(x, lines), ax, -1))
    return xp.reshape(xp.moveaxis(last, -1, ax), shape)


def _gradient_along_last(xp: Any, g: Any, x: Any) -> Any:
    """Element k feeds every output i >= k, as ``x[0] ... x[i]`` without ``x[k]``: its gradient is
    the product of the elements before it times ``S[k] = g[k] + x[k + 1] * S[k + 1]``."""
    return _products_before(xp, x) * _suffix_scan(xp, g, _ahead(xp, x, 1))


def _tangent_along_last(xp: Any, t: Any, x: Any) -> Any:
    """``R[i] = t[i] * (the product before i) + x[i] * R[i - 1]``: the suffix scan, run backwards."""
    ahead = _suffix_scan(xp, xp.flip(t * _products_before(xp, x), axis=-1), xp.flip(x, axis=-1))
    return xp.flip(ahead, axis=-1)


def _cumprod_grad(g, xp, shape, out_shape, lines, ax, x):
    return _along(_gradient_along_last, g, xp, lines, ax, x, shape)


def _cumprod_jvp(t, xp, shape, out_shape, lines, ax, x):
    return _along(_tangent_along_last, t, xp, lines, ax, x, out_shape)


@unary(_cumprod_grad, _cumprod_jvp)
def cumprod(xp, x, axis=None):
    """Running products along ``axis``; ``axis=None`` runs along the flattened tensor (as numpy
    does). Element k's gradient is the sum over the outputs i >= k of their gradients times the
    product of ``x[0] ... x[i]`` without ``x[k]``, computed without dividing by ``x[k]`` (a linear
    recurrence solved in log2(n) doubling steps), so zeros get exact gradients. Forward rule (JVP):
    each output's tangent is the sum of each earlier tangent times the product of the others."""
    ax = _one_axis(axis, x.ndim, "cumprod")
    lines = x.shape if ax is not None else (math.prod(x.shape),)  # a 0-d tensor is a line of one
    ax = 0 if ax is None else ax
    y = xp.cumulative_prod(xp.reshape(x, lines), axis=ax)
    out = y if axis is None else xp.reshape(y, x.shape)
    return out, (xp, x.shape, out.shape, lines, ax, x)


def _no_gradient(fn: Callable) -> Callable[..., Tensor]:
    """An op from ``fn(xp, x, *params)`` whose output has no gradient (indices, truth values): a
    tensor on no tape, whatever tapes its operand carries."""
    @forward_of(fn)
    def op(a: Tensor, *params: Any, **kw: Any) -> Tensor:
        xp = a.device.xp
        return Tensor(a.device.count(xp.asarray(fn(xp, a.data, *params, **kw))), a.device)

    return op


@_no_gradient
def argmax(xp, x, axis=None, keepdims: bool = False):
    """Index of the maximum along ``axis`` (None: in the flattened tensor); the first one among ties.
    An integer tensor with no gradient and no tangent."""
    return xp.argmax(x, axis=_one_axis(axis, x.ndim, "argmax"), keepdims=keepdims)


@_no_gradient
def argmin(xp, x, axis=None, keepdims: bool = False):
    """Index of the minimum along ``axis`` (None: in the flattened tensor); the first one among ties.
    An integer tensor with no gradient and no tangent."""
    return xp.argmin(x, axis=_one_axis(axis, x.ndim, "argmin"), keepdims=keepdims)


@_no_gradient
def all(xp, x, axis=None, keepdims: bool = False):
    """Whether every element over ``axis`` is true (nonzero). A boolean tensor with no gradient and no tangent."""
    return xp.all(x, axis=normalize_axes(axis, x.ndim, "all"), keepdims=keepdims)


@_no_gradient
def any(xp, x, axis=None, keepdims: bool = False):
    """Whether some element over ``axis`` is true (nonzero). A boolean tensor with no gradient and no tangent."""
    return xp.any(x, axis=normalize_axes(axis, x.ndim, "any"), keepdims=keepdims)
