"""The op specs of tapekit.ops.reduce (see tests/opfactory.py).

Shapes come from ``SHAPES`` (0-d tensors and size-1 axes included); axes are None, one axis
(negative too) or, where the op takes them, a tuple of distinct axes, each maybe negative. A 0-d
tensor takes axis 0 or -1 (PyTorch's convention), which numpy's reference sees as ``axis=()``.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import tapekit as tk

from ..opfactory import SHAPES, Edge, OpSpec, values

def _axis(data, ndim: int, tuples: bool) -> object:
    """None, one axis, or (``tuples``) a tuple of distinct axes, each maybe counted from the end."""
    n = max(ndim, 1)
    choices = [st.none(), st.integers(-n, n - 1)]
    if tuples:
        choices.append(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True).flatmap(
            lambda axes: st.tuples(*[st.sampled_from([a, a - n]) for a in axes])))
    return data.draw(st.one_of(choices), label="axis")


def _away_from_zero(shape, seed):
    """Values with magnitudes in (0.5, 1.5), either sign: products stay moderate and never pass 0."""
    x = values(shape, "any", seed)
    return np.sign(x) * (0.5 + np.abs(x) / 2)


def _draw(domain="any", tuples=True, keepdims=True):
    """One array of a drawn shape with values in ``domain`` (a name of ``values``, or a function of
    shape and seed), an axis and, where the op takes it, ``keepdims``."""
    make = domain if callable(domain) else lambda shape, seed: values(shape, domain, seed)

    def draw(data):
        shape = data.draw(SHAPES, label="shape")
        seed = data.draw(st.integers(0, 2 ** 16), label="seed")
        x = make(shape, seed)
        kwargs = {"axis": _axis(data, len(shape), tuples)}
        if keepdims:
            kwargs["keepdims"] = data.draw(st.booleans(), label="keepdims")
        return [x], kwargs
    return draw


def _spread_draw(data):
    """Like ``_draw``, plus a ``correction`` (or numpy's ``ddof``) smaller than the count reduced over."""
    [x], kwargs = _draw()(data)
    n = x.size // np.sum(x, axis=_np_axis(x, kwargs["axis"])).size  # the count reduced over
    key = data.draw(st.sampled_from(["correction", "ddof"]), label="key")
    kwargs[key] = data.draw(st.sampled_from([c for c in (0, 0.5, 1) if c < n]), label=key)
    return [x], kwargs


def _rounded(shape, seed):
    """Whole numbers from -2 to 2: zeros (false) are common."""
    return np.round(values(shape, "any", seed))


def _np_axis(x, axis):
    """``axis`` as numpy's reference takes it: axis 0 or -1 of a 0-d array is no axis."""
    return () if x.ndim == 0 and axis is not None else axis


def _reference(fn):
    """A numpy reduction as a reference: ``fn(x, axis=..., **kwargs)`` with the axis mapped."""
    return lambda x, axis=None, **kw: fn(x, axis=_np_axis(x, axis), **kw)


def _softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=_np_axis(x, axis), keepdims=True))
    return e / np.sum(e, axis=_np_axis(x, axis), keepdims=True)


def _index(fn):
    """numpy's argmax or argmin; on a 0-d array any axis is the flattened one."""
    return lambda x, axis=None, keepdims=False: fn(x, axis=None if x.ndim == 0 else axis, keepdims=keepdims)


def _edge(inputs, grads, why, **kwargs):
    return Edge([np.asarray(a, dtype=float) for a in inputs], [np.asarray(g, dtype=float) for g in grads],
                kwargs, why)


ZERO_D = "a 0-d tensor with axis 0 or -1 is reduced over no axis"

SPECS: list[OpSpec] = [
    OpSpec("sum", tk.sum, _reference(np.sum), _draw(), edges=[
        _edge([2.0], [1.0], ZERO_D, axis=0), _edge([2.0], [1.0], ZERO_D, axis=-1)]),
    OpSpec("mean", tk.mean, _reference(np.mean), _draw(), edges=[_edge([2.0], [1.0], ZERO_D, axis=0)]),
    OpSpec("max", tk.max, _reference(np.max), _draw("apart"), edges=[
        _edge([[1.0, 3.0, 3.0]], [[0.0, 0.5, 0.5]], "ties share the gradient equally"),
        _edge([[[1.0, 1.0], [2.0, 0.0]]], [[[0.5, 0.5], [1.0, 0.0]]], "ties share it within each row", axis=1),
        _edge([[1.0, np.nan, 3.0, np.nan]], [[0.0, 0.5, 0.0, 0.5]], "a NaN maximum: the NaN elements share it"),
        _edge([2.0], [1.0], ZERO_D, axis=0)]),
    OpSpec("min", tk.min, _reference(np.min), _draw("apart"), edges=[
        _edge([[2.0, 1.0, 1.0, 1.0]], [[0.0, 1 / 3, 1 / 3, 1 / 3]], "ties share the gradient equally"),
        _edge([[[0.0, 1.0], [4.0, 4.0]]], [[[1.0, 0.0], [0.5, 0.5]]], "ties share it within each row", axis=-1),
        _edge([2.0], [1.0], ZERO_D, axis=-1)]),
    OpSpec("prod", tk.prod, _reference(np.prod), _draw(_away_from_zero), edges=[
        _edge([[2.0, 0.0, 3.0]], [[0.0, 6.0, 0.0]], "one zero: only it gets a gradient, the product of the others"),
        _edge([[0.0, 2.0, 0.0]], [[0.0, 0.0, 0.0]], "two zeros: every gradient is 0"),
        _edge([[[2.0, 0.0, 3.0], [1.0, 2.0, 3.0]]], [[[0.0, 6.0, 0.0], [6.0, 3.0, 2.0]]], "a zero in one row only",
              axis=1),
        _edge([[[[0.0, 2.0], [3.0, 4.0]]]], [[[[24.0, 0.0], [0.0, 0.0]]]], "one zero over two axes", axis=(1, 2)),
        _edge([2.0], [1.0], "a 0-d tensor's product of no others is 1", axis=0)]),
    OpSpec("var", tk.var, _reference(np.var), _spread_draw, edges=[
        _edge([[1.0, 3.0]], [[-2.0, 2.0]], "2 (x - mean) / (n - correction)", correction=1),
        _edge([[1.0, 3.0]], [[-2.0, 2.0]], "ddof is numpy's name for correction", ddof=1),
        _edge([[5.0]], [[0.0]], "one element, correction=0: the variance is 0, and so is its gradient")]),
    OpSpec("std", tk.std, _reference(np.std), _spread_draw, edges=[
        _edge([[2.0, 2.0, 2.0]], [[0.0, 0.0, 0.0]], "std 0 (all equal): the gradient is 0, not 0/0"),
        _edge([[5.0]], [[0.0]], "one element: std 0, gradient 0"),
        _edge([[1.0, 3.0]], [[-0.5, 0.5]], "(x - mean) / (n std)")]),
    OpSpec("logsumexp", tk.logsumexp, _reference(lambda x, axis, keepdims: np.log(np.sum(np.exp(x), axis=axis,
                                                                                         keepdims=keepdims))),
           _draw(), edges=[_edge([2.0], [1.0], ZERO_D, axis=0)]),
    OpSpec("softmax", tk.softmax, _softmax, _draw(keepdims=False), edges=[
        _edge([2.0], [0.0], "a 0-d tensor's softmax is 1 whatever its value")]),
    OpSpec("log_softmax", tk.log_softmax, lambda x, axis=-1: np.log(_softmax(x, axis)), _draw(keepdims=False),
           edges=[_edge([2.0], [0.0], "a 0-d tensor's log_softmax is 0 whatever its value")]),
    OpSpec("cumsum", tk.cumsum, lambda x, axis=None: np.cumsum(x, axis=axis) if axis is None or x.ndim else x,
           _draw(tuples=False, keepdims=False), edges=[
               _edge([[1.0, 2.0, 3.0]], [[3.0, 2.0, 1.0]], "a running sum's gradient runs from the end"),
               _edge([[[1.0, 2.0], [3.0, 4.0]]], [[[2.0, 2.0], [1.0, 1.0]]], "along axis 0", axis=0),
               _edge([2.0], [1.0], "a 0-d tensor is a line of one", axis=0)]),
    OpSpec("cumprod", tk.cumprod, lambda x, axis=None: np.cumprod(x, axis=axis) if axis is None or x.ndim else x,
           _draw(_away_from_zero, tuples=False, keepdims=False), edges=[
               _edge([[2.0, 0.0, 3.0]], [[1.0, 8.0, 0.0]], "a zero: exact gradients, with no division by it"),
               _edge([[0.0, 2.0, 0.0]], [[3.0, 0.0, 0.0]], "two zeros: only the first element feeds a nonzero output"),
               _edge([[[2.0, 0.0], [3.0, 4.0]]], [[[4.0, 5.0], [2.0, 0.0]]], "along axis 0", axis=0),
               _edge([2.0], [1.0], "a 0-d tensor is a line of one", axis=0)]),
    OpSpec("argmax", tk.argmax, _index(np.argmax), _draw("apart", tuples=False), grad=False),
    OpSpec("argmin", tk.argmin, _index(np.argmin), _draw("apart", tuples=False), grad=False),
    OpSpec("all", tk.all, _reference(np.all), _draw(_rounded),
           grad=False),
    OpSpec("any", tk.any, _reference(np.any), _draw(_rounded),
           grad=False),
]
