"""The op specs of tapekit.ops.shape (see tests/opfactory.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, basic_indices, broadcastable_shapes, integer_array_indices
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import tapekit as tk

from ..opfactory import OpSpec, values

SPECS: list[OpSpec] = []

SHAPES = array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3)
SOME_EMPTY = array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)  # axes of size 0 too


def _spec(name, fn, reference, draw, **kw):
    SPECS.append(OpSpec(name, fn, reference, draw, **kw))


def one(shapes=SHAPES, **strategies_of_shape):
    """A draw of one array of a drawn shape, and the op's other arguments, each drawn by
    ``strategy_of(shape)`` for the shape drawn."""
    def draw(data):
        shape = data.draw(shapes, label="shape")
        kwargs = {k: data.draw(of(shape), label=k) for k, of in strategies_of_shape.items()}
        return [values(shape, seed=data.draw(st.integers(0, 2 ** 16), label="seed"))], kwargs
    return draw


def axis_or_none(shape):
    return st.sampled_from([None] + list(range(-len(shape), len(shape))))


def one_axis(shape):
    return st.integers(-len(shape), len(shape) - 1)


def distinct_axes(shape, extra=0, min_size=0, max_size=None):
    """A tuple of distinct axes (negative ones too) of an array with ``len(shape) + extra`` axes."""
    ndim = len(shape) + extra
    if not ndim:
        return st.just(())
    return st.lists(st.integers(0, ndim - 1), unique=True, min_size=min_size, max_size=max_size).flatmap(
        lambda axes: st.tuples(*[st.sampled_from([a, a - ndim]) for a in axes]))


# -- keys ---------------------------------------------------------------------------------------
@st.composite
def mixed_keys(draw, shape):
    """A tuple key that mixes, per axis, ints, slices, integer arrays (repeats, negatives, 0-d,
    empty), boolean masks, with ``None`` and ``...`` among them; arrays apart from each other move
    their axes first, as numpy does. The advanced parts broadcast together: each has length ``n``."""
    n = draw(st.integers(0, 3), label="index length")
    parts = []
    for side in shape:
        kinds = ["slice", "array", "0-d"] + (["int"] if side else []) + (["mask"] if n <= side else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "slice":
            parts.append(draw(st.slices(side)))
        elif kind == "int":
            parts.append(draw(st.integers(-side, side - 1)))
        elif kind == "array" and side:
            parts.append(np.array(draw(st.lists(st.integers(-side, side - 1), min_size=n, max_size=n)), dtype=np.intp))
        elif kind == "0-d" and side:
            parts.append(np.array(draw(st.integers(-side, side - 1))))
        elif kind == "mask":
            picked = draw(st.sets(st.integers(0, side - 1), min_size=n, max_size=n)) if side else set()
            parts.append(np.isin(np.arange(side), list(picked)) if len(picked) == n else slice(None))
        else:
            parts.append(np.zeros(0, dtype=np.intp) if n == 0 else slice(None))
    if draw(st.booleans(), label="ellipsis"):  # ... stands for a run of axes
        at = draw(st.integers(0, len(parts)))
        parts[at:at + draw(st.integers(0, len(parts) - at))] = [Ellipsis]
    else:  # the last axes left out: numpy takes them whole
        parts = parts[:draw(st.integers(0, len(parts)), label="axes named")]
    for _ in range(draw(st.integers(0, 2), label="new axes")):
        parts.insert(draw(st.integers(0, len(parts))), None)
    return tuple(parts)


@st.composite
def apart_keys(draw, shape):
    """Integer arrays on the first and the last axis, slices between them: numpy puts the arrays'
    axis first."""
    n = draw(st.integers(0, 3), label="index length")
    first, last = (np.array(draw(st.lists(st.integers(-side, side - 1), min_size=n, max_size=n)), dtype=np.intp)
                   for side in (shape[0], shape[-1]))
    return (first,) + tuple(draw(st.slices(side)) for side in shape[1:-1]) + (last,)


def index_keys(shape):
    """Every kind of key numpy takes for an array of ``shape``."""
    kinds = [mixed_keys(shape), basic_indices(shape, allow_newaxis=True),
             st.builds(lambda s: values(shape, seed=s) > 0, st.integers(0, 2 ** 16))]  # a mask of every axis
    if shape and all(shape):
        kinds.append(integer_array_indices(shape, result_shape=array_shapes(min_dims=0, max_dims=2, max_side=3)))
    if len(shape) >= 3 and shape[0] and shape[-1]:
        kinds.append(apart_keys(shape))
    return st.one_of(kinds)


_spec("getitem", lambda t, key: t[key], lambda a, key: a[key], one(SOME_EMPTY, key=index_keys), examples=80)


@st.composite
def along_axis(draw, shape):
    """An axis of ``shape`` and integer indices along it: one axis per axis, others of size n or 1."""
    axis = draw(st.integers(0, len(shape) - 1))
    sizes = [draw(st.integers(0, 4)) if d == axis else draw(st.sampled_from([n, 1])) for d, n in enumerate(shape)]
    side = shape[axis]
    count = int(np.prod(sizes))
    flat = draw(st.lists(st.integers(-side, side - 1), min_size=count, max_size=count))
    return {"indices": np.array(flat, dtype=np.intp).reshape(sizes),
            "axis": draw(st.sampled_from([axis, axis - len(shape)]))}


def _along_axis_draw(data):
    shape = data.draw(array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3), label="shape")
    return [values(shape, seed=data.draw(st.integers(0, 2 ** 16)))], data.draw(along_axis(shape), label="indices")


_spec("take_along_axis", tk.take_along_axis, np.take_along_axis, _along_axis_draw, examples=30)


# -- shapes and axes ------------------------------------------------------------------------------
def reshape_targets(shape):
    size = int(np.prod(shape))
    return st.sampled_from([(-1,), tuple(reversed(shape)), (1,) + shape, (size, 1), shape + (1,), (1, -1)])


def _broadcast_draw(data):
    shape = data.draw(SHAPES, label="shape")
    other = data.draw(broadcastable_shapes(shape, max_dims=4, max_side=3), label="other")
    return [values(shape, seed=data.draw(st.integers(0, 2 ** 16)))], {"shape": np.broadcast_shapes(shape, other)}


@st.composite
def move(draw, shape):
    source = draw(distinct_axes(shape))
    destination = draw(st.permutations(range(len(shape))).map(lambda p: tuple(p[:len(source)])))
    return {"source": source, "destination": destination}


def _move_draw(data):
    shape = data.draw(SHAPES, label="shape")
    return [values(shape, seed=data.draw(st.integers(0, 2 ** 16)))], data.draw(move(shape), label="axes")


def squeezable(shape):
    return st.one_of(st.none(), st.lists(st.sampled_from([i for i, n in enumerate(shape) if n == 1] or [None]),
                                         unique=True).map(lambda axes: tuple(a for a in axes if a is not None)))


_spec("reshape", lambda t, shape: t.reshape(shape), lambda a, shape: a.reshape(shape), one(shape=reshape_targets))
_spec("permute", lambda t, axes: t.permute(axes), np.transpose,
      one(axes=lambda s: st.permutations(range(len(s))).map(tuple)))
_spec("transpose", tk.transpose, np.swapaxes,
      one(array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3), axis1=one_axis, axis2=one_axis))
_spec("broadcast_to", tk.broadcast_to, np.broadcast_to, _broadcast_draw)
_spec("squeeze", tk.squeeze, np.squeeze, one(array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=2),
                                             axis=squeezable))
_spec("expand_dims", tk.expand_dims, np.expand_dims,
      one(axis=lambda s: st.integers(1, 2).flatmap(lambda k: distinct_axes(s, k, k, k))))
_spec("flatten", tk.flatten, np.ravel, one(SOME_EMPTY))
_spec("moveaxis", tk.moveaxis, np.moveaxis, _move_draw)


# -- joining and cutting --------------------------------------------------------------------------
def _joined_draw(same_shape):
    """Two or three arrays of one shape (``same_shape``) or of shapes that differ along ``axis``."""
    def draw(data):
        shape = data.draw(array_shapes(min_dims=0 if same_shape else 1, max_dims=3, min_side=1, max_side=3))
        count = data.draw(st.integers(1, 3), label="count")
        limit = len(shape) + 1 if same_shape else len(shape)
        axis = data.draw(st.integers(-limit, limit - 1), label="axis")
        shapes = [shape if same_shape else shape[:axis % limit] + (data.draw(st.integers(0, 3)),) +
                  shape[axis % limit + 1:] for _ in range(count)]
        seed = data.draw(st.integers(0, 2 ** 16), label="seed")
        return [values(s, seed=seed + i) for i, s in enumerate(shapes)], {"axis": axis}
    return draw


def sections(shape, axis):
    n = shape[axis]
    equal = st.sampled_from([k for k in range(1, n + 1) if n % k == 0] or [1])
    return st.one_of(equal, st.lists(st.integers(-n - 1, n + 1), max_size=3))


def _split_draw(data):
    shape = data.draw(array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4), label="shape")
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    kwargs = {"indices_or_sections": data.draw(sections(shape, axis), label="cuts"), "axis": axis}
    return [values(shape, seed=data.draw(st.integers(0, 2 ** 16)))], kwargs


def _weighted(join, pieces, axis):
    """The pieces joined back, piece ``i`` times ``i + 1``: a gradient sent to the wrong piece shows."""
    return join([p * (i + 1.0) for i, p in enumerate(pieces)], axis=axis)


def _where_draw(data):
    shapes = data.draw(mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, max_side=3))
    cond, a, b = shapes.input_shapes
    seed = data.draw(st.integers(0, 2 ** 16), label="seed")
    return [values(a, seed=seed), values(b, seed=seed + 1)], {"condition": values(cond, seed=seed + 2) > 0}


_spec("concat", lambda *ts, axis: tk.concat(ts, axis), lambda *arrays, axis: np.concatenate(arrays, axis),
      _joined_draw(same_shape=False))
_spec("stack", lambda *ts, axis: tk.stack(ts, axis), lambda *arrays, axis: np.stack(arrays, axis),
      _joined_draw(same_shape=True))
_spec("split", lambda t, **kw: _weighted(tk.concat, tk.split(t, **kw), kw["axis"]),
      lambda a, **kw: _weighted(np.concatenate, np.split(a, **kw), kw["axis"]), _split_draw, examples=20)
_spec("where", lambda a, b, condition: tk.where(condition, a, b), lambda a, b, condition: np.where(condition, a, b),
      _where_draw)
_spec("where_number", lambda a: tk.where(a > 0, a, 0.25), lambda a: np.where(a > 0, a, 0.25), one())
_spec("where_numbers", lambda a: tk.where(a > 0, 1.0, -2.0), lambda a: np.where(a > 0, 1.0, -2.0), one(),
      grad=False)


# -- moving values ----------------------------------------------------------------------------------
def pad_widths(shape):
    """numpy's forms: one width, ``(width,)``, ``(before, after)``, and one pair per axis."""
    side = st.integers(0, 2)
    per_axis = [st.tuples(*[st.tuples(side, side) for _ in shape])] if shape else []  # numpy refuses () for 0-d
    return st.one_of([side, st.tuples(side), st.tuples(side, side)] + per_axis)


def shifts_and_axes(shape):
    """A shift of the flattened array, of one axis, or of each of some axes (one shift each, or one
    for all)."""
    shift = st.integers(-4, 4)
    forms = [st.fixed_dictionaries({"shift": shift, "axis": st.none()})]
    if shape:
        forms.append(st.fixed_dictionaries({"shift": shift, "axis": one_axis(shape)}))
        forms.append(distinct_axes(shape, min_size=1).flatmap(lambda axes: st.fixed_dictionaries(
            {"shift": st.one_of(shift, st.tuples(*[shift] * len(axes))), "axis": st.just(axes)})))
    return st.one_of(forms)


def _roll_draw(data):
    shape = data.draw(SHAPES, label="shape")
    return [values(shape, seed=data.draw(st.integers(0, 2 ** 16)))], data.draw(shifts_and_axes(shape), label="roll")


@st.composite
def repeat_args(draw, shape):
    axis = draw(axis_or_none(shape))
    n = int(np.prod(shape)) if axis is None or not shape else shape[axis]
    counts = st.one_of(st.integers(0, 2), st.lists(st.integers(0, 2), min_size=n, max_size=n))
    return {"repeats": draw(counts), "axis": axis}


def _repeat_draw(data):
    shape = data.draw(SHAPES, label="shape")
    return [values(shape, seed=data.draw(st.integers(0, 2 ** 16)))], data.draw(repeat_args(shape), label="repeat")


MATRICES = array_shapes(min_dims=2, max_dims=3, min_side=1, max_side=3)
_spec("pad", lambda t, pad_width, constant_values: tk.pad(t, pad_width, constant_values=constant_values),
      lambda a, pad_width, constant_values: np.pad(a, pad_width, constant_values=constant_values),
      one(pad_width=pad_widths, constant_values=lambda s: st.sampled_from([0, -1.5])))
_spec("flip", tk.flip, np.flip, one(axis=lambda s: st.one_of(axis_or_none(s), distinct_axes(s))))
_spec("roll", tk.roll, np.roll, _roll_draw)
_spec("tile", tk.tile, np.tile, one(reps=lambda s: st.one_of(st.integers(0, 2), st.lists(st.integers(0, 2),
                                                                                            max_size=4).map(tuple))))
_spec("repeat", tk.repeat, np.repeat, _repeat_draw)
_spec("tril", tk.tril, np.tril, one(MATRICES, k=lambda s: st.integers(-3, 3)))
_spec("triu", tk.triu, np.triu, one(MATRICES, k=lambda s: st.integers(-3, 3)))
