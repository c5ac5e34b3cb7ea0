"""Ops that move values around: reshape, axes, broadcasting, joining, cutting, selecting, indexing.

Each is linear in its tensors, so its forward rule (JVP) is the op itself applied to the tangents."""

from __future__ import annotations

import functools
import math
import numbers
import operator
from typing import Any, Callable, Sequence

import numpy as np

from ..devices import device_array_as_is, dtype_name
from ..errors import (AxisError, DeviceMismatchError, DTypeError, IndexingError, InvalidArgumentError, OperandError,
                      ShapeError)
from ..ids import label, label_all
from ..reads import each_call
from ..tensor import Tensor
from .core import (ELEMENTWISE, LINEAR, broadcast_shape, check_devices, emit, linear, normalize_axes, same, unary,
                   where_false, where_true)

__all__ = ["reshape", "permute", "transpose", "broadcast_to", "squeeze", "expand_dims", "flatten", "moveaxis",
           "concat", "stack", "split", "where", "getitem", "take_along_axis", "flip", "roll", "tile", "repeat",
           "tril", "triu", "pad"]


# -- shapes and axes ---------------------------------------------------------------------------
def _reshaped_back(g: Any, xp: Any, shape: tuple[int, ...]) -> Any:
    """The rule of an op that only changes the shape: the gradient takes the operand's shape back."""
    return xp.reshape(g, shape)


def _target_shape(old: tuple[int, ...], new: Sequence[int]) -> tuple[int, ...]:
    new = sizes(new, "reshape")
    known = math.prod(n for n in new if n != -1)
    if new.count(-1) > 1 or (-1 in new and (known == 0 or math.prod(old) % known)) or \
            (-1 not in new and known != math.prod(old)) or any(n < -1 for n in new):
        raise ShapeError(f"reshape: cannot reshape {old} ({math.prod(old)} values) to {new}; "
                         f"the sizes must match (one -1 may stand for the rest)")
    return tuple(math.prod(old) // known if n == -1 else n for n in new)


@unary(_reshaped_back, LINEAR)
def reshape(xp, x, *shape):
    """The same values in a new shape (one -1 stands for the rest); the gradient is reshaped back."""
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        if not isinstance(shape[0], (tuple, list, np.ndarray)):
            raise InvalidArgumentError(f"reshape: give the new shape as ints or a tuple of them (one -1 for the "
                                       f"rest), got {shape[0]!r}")
        shape = tuple(shape[0])
    target = _target_shape(x.shape, shape)
    return xp.reshape(x, target), (xp, x.shape)


@unary(_reshaped_back, LINEAR)
def squeeze(xp, x, axis=None):
    """Drop axes of size 1: those in ``axis`` (an int or a tuple), or all of them. The gradient is
    reshaped back."""
    axes = normalize_axes(axis, x.ndim, "squeeze")
    if axes is None:
        axes = tuple(i for i, n in enumerate(x.shape) if n == 1)
    for ax in axes:
        if x.shape[ax] != 1:
            raise ShapeError(f"squeeze: axis {ax} has size {x.shape[ax]}; only axes of size 1 can be dropped "
                             f"(tk.reshape changes other sizes)")
    return xp.squeeze(x, axis=axes), (xp, x.shape)


@unary(_reshaped_back, LINEAR)
def expand_dims(xp, x, axis):
    """Insert axes of size 1 at ``axis`` (an int or a tuple: positions in the result). The gradient
    is reshaped back."""
    shape = x.shape
    for ax in normalize_axes(_given(axis, "expand_dims"), x.ndim + len(_as_tuple(axis)), "expand_dims"):
        x = xp.expand_dims(x, axis=ax)
    return x, (xp, shape)


def flatten(t: Tensor) -> Tensor:
    """The values along one axis, in row-major order (numpy's ``flatten``); the gradient is
    reshaped back, and the forward rule (JVP) flattens the tangent."""
    return reshape(t, -1)


@unary(lambda g, xp, inverse: xp.permute_dims(g, inverse), LINEAR)
def permute(xp, x, *axes):
    """The axes in a new order (``axes`` names all of them); the gradient puts them back."""
    if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
        axes = tuple(axes[0])
    order = normalize_axes(axes, x.ndim, "permute")
    if len(axes) != x.ndim:
        raise ShapeError(f"permute: give all {x.ndim} axes in their new order, got {axes}")
    axes = tuple(int(a) % x.ndim for a in axes)
    inverse = tuple(axes.index(i) for i in order)
    return xp.permute_dims(x, axes), (xp, inverse)


def transpose(t: Tensor, axis1: int = -2, axis2: int = -1) -> Tensor:
    """Swap two axes (the last two by default); the gradient is swapped back, and the forward rule
    (JVP) swaps the tangent's."""
    axes = list(range(t.ndim))
    a, b = normalize_axes(axis1, t.ndim, "transpose")[0], normalize_axes(axis2, t.ndim, "transpose")[0]
    axes[a], axes[b] = axes[b], axes[a]
    return permute(t, axes)


@unary(lambda g, xp, source, destination: xp.moveaxis(g, destination, source), LINEAR)
def moveaxis(xp, x, source, destination):
    """Move the axes ``source`` to the positions ``destination`` (ints or tuples of them); the other
    axes keep their order. The gradient moves them back."""
    src, dst = _axes_in_order(source, x.ndim, "moveaxis"), _axes_in_order(destination, x.ndim, "moveaxis")
    if len(src) != len(dst):
        raise AxisError(f"moveaxis: give as many destinations as sources, got {source!r} and {destination!r}")
    return xp.moveaxis(x, src, dst), (xp, src, dst)


def broadcast_to(t: Tensor, shape: Sequence[int]) -> Tensor:
    """``t`` stretched to ``shape`` as numpy broadcasts; the gradient sums over the stretched axes.
    Forward rule (JVP): the tangent stretched alike."""
    shape = sizes(shape, "broadcast_to")
    if broadcast_shape(t.shape, shape, "broadcast_to") != shape:
        raise ShapeError(f"broadcast_to: {t.shape} cannot be broadcast to {shape}")
    xp = t.device.xp
    return emit("broadcast_to", xp.broadcast_to(t.data, shape), (t,), (same,), (), t.device, ELEMENTWISE)


def _given(axis: Any, op: str) -> Any:
    if axis is None:
        raise AxisError(f"{op}: give an axis (an int or a tuple of ints), not None")
    return axis


def _as_tuple(axis: Any) -> tuple:
    return tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)


def _axes_in_order(axis: Any, ndim: int, op: str) -> tuple[int, ...]:
    """``axis`` (an int or a sequence, no axis twice) as non-negative axes in the order given."""
    normalize_axes(_given(axis, op), ndim, op)  # each an int in range, none repeated
    return tuple(int(a) % ndim for a in _as_tuple(axis)) if ndim else ()


# -- joining and cutting ---------------------------------------------------------------------
def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join tensors along an existing axis; each gets its own piece of the gradient. Forward rule
    (JVP): the tangents joined alike."""
    tensors = _tensors(tensors, "concat")
    first = tensors[0]
    if first.ndim == 0:
        raise ShapeError("concat: 0-d tensors have no axis to join; use tk.stack([...]) to join them along a new axis")
    ax = _one_axis(axis, first.ndim, "concat")
    for t in tensors[1:]:
        if t.ndim != first.ndim or any(m != n for i, (m, n) in enumerate(zip(t.shape, first.shape)) if i != ax):
            raise _unlike("concat", t, first, f"all shapes must match except along axis {ax}")
    bounds = np.cumsum([0] + [t.shape[ax] for t in tensors])
    pieces = tuple(tuple(slice(int(lo), int(hi)) if i == ax else slice(None) for i in range(first.ndim))
                   for lo, hi in zip(bounds[:-1], bounds[1:]))
    out = first.device.xp.concat([t.data for t in tensors], axis=ax)
    return emit("concat", out, tensors, _piece_rules(len(tensors)), (pieces,), first.device,
                _joined(first.device.xp.concat, tensors, ax))


def _unlike(op: str, t: Tensor, first: Tensor, rule: str) -> ShapeError:
    """The error for ``t``, whose shape does not fit ``first``'s, with the rule it breaks."""
    label_all([first.id, t.id])  # named together: labelled in the order they were made
    return ShapeError(f"{op}: {label(t.id)} has shape {t.shape} but {label(first.id)} has {first.shape}; {rule}")


def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join tensors of one shape along a new axis; each gets its own slice of the gradient.
    Forward rule (JVP): the tangents stacked alike."""
    tensors = _tensors(tensors, "stack")
    first = tensors[0]
    for t in tensors[1:]:
        if t.shape != first.shape:
            raise _unlike("stack", t, first, "stacked tensors must have one shape")
    ax = _one_axis(axis, first.ndim + 1, "stack")
    pieces = tuple(tuple(i if d == ax else slice(None) for d in range(first.ndim + 1)) for i in range(len(tensors)))
    out = first.device.xp.stack([t.data for t in tensors], axis=ax)
    return emit("stack", out, tensors, _piece_rules(len(tensors)), (pieces,), first.device,
                _joined(first.device.xp.stack, tensors, ax))


def _piece_rules(n: int) -> tuple[Callable, ...]:
    """The rules of ``n`` joined operands: operand ``i`` takes its own piece of the gradient,
    ``g[pieces[i]]``, where ``pieces`` (saved) holds every operand's index into the output. Each
    rule is made once per position, not per call."""
    return tuple(_piece_rule(i) for i in range(n))


@functools.cache
def _piece_rule(i: int) -> Callable:
    return lambda g, pieces: g[pieces[i]]


def _joined(join: Callable, tensors: Sequence[Tensor], axis: int) -> Callable:
    """The forward rule of ``join(tensors, axis)``: the tangents joined alike, zeros for a tensor
    without one."""
    def jvp(tangents: tuple, *saved: Any) -> Any:
        xp = tensors[0].device.xp
        return join([xp.zeros_like(t.data) if d is None else d for t, d in zip(tensors, tangents)], axis=axis)

    return jvp


def split(t: Tensor, indices_or_sections: Any, axis: int = 0) -> list[Tensor]:
    """``t`` cut along ``axis`` into a list of tensors, as numpy's ``split``: an int N gives N equal
    pieces, a list of indices cuts before each of them. Each piece is a slice of ``t`` (an op of
    its own), so its gradient goes back to its own part, and its forward rule (JVP) cuts the
    tangent alike. Under an ``OwnedTape`` the second piece
    raises ``TapeMovedError``, as any second use of an owned handle does: trace with an ``ArcTape``
    or a ``UnionTape`` to cut a taped tensor."""
    if t.ndim == 0:
        raise ShapeError("split: a 0-d tensor has no axis to cut; make it 1-d first (t.reshape(1))")
    ax = _one_axis(axis, t.ndim, "split")
    n = t.shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0 or n % sections:
            raise ShapeError(f"split: axis {ax} of size {n} does not divide into {sections} equal sections; give a "
                             f"number of sections that divides {n}, or the indices to cut at, e.g. [{n // 2}]")
        cuts = [i * n // sections for i in range(1, sections)]
    else:
        cuts = list(_ints(indices_or_sections, "split", "indices_or_sections"))
    before = (slice(None),) * ax
    return [getitem(t, before + (slice(lo, hi),)) for lo, hi in zip([None] + cuts, cuts + [None])]


# -- selecting ---------------------------------------------------------------------------------
def where(condition: Any, a: Any, b: Any) -> Tensor:
    """``a`` where ``condition`` holds, else ``b`` (numpy's ``where``); ``a`` and ``b`` may be
    numbers. The gradient of a tensor operand passes where its values were picked; forward rule
    (JVP): ``where(condition, ta, tb)`` of the tangents."""
    tensors = [t for t in (a, b) if isinstance(t, Tensor)]
    if not tensors and not isinstance(condition, Tensor):
        raise OperandError("where needs a tensor among the condition and the values, got none; make the condition "
                           "a tensor with dev.tensor(mask), or compare a tensor (t > 0)")
    device = tensors[0].device if tensors else condition.device
    xp = device.xp
    if len(tensors) == 2:
        check_devices(tensors, "where")
    for v in (a, b):
        kind = getattr(getattr(v, "dtype", None), "kind", "")  # an array of numbers, of any namespace
        if not isinstance(v, (Tensor, numbers.Real)) and (not kind or kind not in "iubf"):
            raise OperandError(f"where picks from tensors, arrays or numbers, got {v!r}; give numbers")
    cond = device_array(condition, device, "where: the condition")
    if dtype_name(cond.dtype) != "bool":
        raise DTypeError(f"where: the condition must be boolean, got {dtype_name(cond.dtype)}; compare first (t > 0)")
    target = cond.shape
    for t in tensors:
        target = broadcast_shape(target, t.shape, "where")
    dtype = tensors[0].dtype if tensors else device.dtype()

    def values(v: Any) -> Any:
        return v.data if isinstance(v, Tensor) else xp.full(target, v, dtype=dtype, **device._placement())

    out = xp.where(cond, values(a), values(b))
    if not tensors:
        return Tensor(device.count(out), device)
    return emit("where", out, (a, b), (where_true, where_false), (xp, cond), device, ELEMENTWISE)


# -- indexing ----------------------------------------------------------------------------------
def getitem(t: Tensor, key: Any) -> Tensor:
    """``t[key]`` for every key numpy takes: ints, slices, ``None``, ``...``, integer arrays (lists,
    numpy arrays, integer tensors) and boolean masks, alone or mixed in a tuple as numpy mixes them.

    A basic key (ints, slices, ``None``, ``...``) picks each value at most once: the output is a
    view where the namespace makes one, and the gradient is ``g`` written into zeros where the
    values came from. Any other key may pick a value many times. numpy finds, on the host, where
    each picked value sits in ``t`` flattened; the forward takes the values at those positions and
    the gradient adds ``g`` at them, so a value picked twice gets its gradient twice. Forward rule
    (JVP): the tangent indexed alike."""
    asked, key = key, _host_key(key)
    basic = all(_is_basic(k) for k in key)
    try:  # numpy checks the key as it applies it
        found = _probe(t.shape)[key] if basic else _positions(t.shape, key)
    except (IndexError, TypeError, ValueError) as err:
        raise IndexingError(f"t[{asked!r}] is not a valid index for shape {t.shape}: {err}. Use ints, slices, None, "
                            f"..., integer arrays (lists, arrays, integer tensors) or boolean masks, alone or in a "
                            f"tuple, as in numpy.") from None
    if basic:
        return _view(t, _spelled_out(key, t.shape))
    return take_flat(t, t.device.from_numpy(found.reshape(-1)), found.shape)


def take_along_axis(t: Tensor, indices: Any, axis: int | None = -1) -> Tensor:
    """The values of ``t`` at ``indices`` along ``axis``, as numpy's ``take_along_axis``: the
    integer ``indices`` have one axis per axis of ``t`` (sizes 1 broadcast); ``axis=None`` reads
    ``t`` flattened. It is ``t`` indexed by ``indices`` along ``axis`` and by each value's own
    coordinate along the others, so the gradient adds up values picked more than once; its
    forward rule (JVP) picks the tangent's values alike."""
    index = indices.numpy() if isinstance(indices, Tensor) else np.asarray(indices)
    if index.dtype.kind not in "iu":
        raise IndexingError(f"take_along_axis: indices must be integers, got dtype {index.dtype}")
    if axis is None:  # checked before the flatten is recorded
        if index.ndim != 1:
            raise ShapeError(f"take_along_axis: axis=None reads the tensor flattened, so it takes one axis of "
                             f"indices, got shape {index.shape}")
        if index.size and not -t.size <= index.min() <= index.max() < t.size:
            raise IndexingError(f"take_along_axis: an index is out of range for the {t.size} values of a tensor "
                                f"of shape {t.shape} read flattened (axis=None)")
        return take_along_axis(flatten(t), index, 0)
    if t.ndim == 0 or index.ndim != t.ndim:
        raise ShapeError(f"take_along_axis: indices of shape {index.shape} for a tensor of shape {t.shape}; give "
                         f"one index axis per tensor axis (tk.expand_dims adds axes of size 1), or axis=None")
    ax = _one_axis(axis, t.ndim, "take_along_axis")
    coordinates = np.indices(t.shape, sparse=True)  # axis d's own coordinate, shaped to broadcast along d
    return getitem(t, tuple(index if d == ax else c for d, c in enumerate(coordinates)))


def _host_key(key: Any) -> tuple:
    """``key`` as a tuple numpy can apply, with any tensor in it read to the host."""
    return tuple(k.numpy() if isinstance(k, Tensor) else k for k in (key if isinstance(key, tuple) else (key,)))


@functools.lru_cache(maxsize=1024)
def _probe(shape: tuple[int, ...]) -> np.ndarray:
    """Zeros of ``shape`` that cost one byte (a read-only broadcast view, kept per shape): numpy
    indexes it to check a key and to learn the shape of the result, without touching a tensor."""
    return np.broadcast_to(np.int8(0), shape)


def _is_basic(k: Any) -> bool:
    """Whether ``k`` is a basic index (an int, a slice, ``None`` or ``...``): one that picks each
    value once. ``True`` and ``False`` are masks."""
    return k is None or k is Ellipsis or isinstance(k, slice) or (
        isinstance(k, (int, np.integer)) and not isinstance(k, bool))


def _spelled_out(key: tuple, shape: tuple[int, ...]) -> tuple:
    """A checked basic key as the array API takes it: ``...`` written out as one slice per axis,
    and each slice's start and stop inside its axis (numpy clips them; the array API leaves them
    unspecified)."""
    named = sum(k is not None and k is not Ellipsis for k in key)
    at = next((i for i, k in enumerate(key) if k is Ellipsis), len(key))
    key = key[:at] + (slice(None),) * (len(shape) - named) + key[at + 1:]
    sizes, out = iter(shape), []
    for k in key:
        if k is not None:
            n = next(sizes)
            k = _inside(k, n) if isinstance(k, slice) else k
        out.append(k)
    return tuple(out)


def _inside(s: slice, n: int) -> slice:
    """The slice ``s`` of an axis of size ``n`` with its start and stop inside the axis."""
    picked = range(*s.indices(n))
    if not picked:
        return slice(0, 0)
    return slice(picked.start, picked.stop if picked.stop >= 0 else None, picked.step)  # stop -1: run to the start


def _view(t: Tensor, key: tuple) -> Tensor:
    """``t[key]`` for a spelled-out basic key: a view where the namespace makes one."""
    plain = tuple(k for k in key if k is not None)  # setitem takes no new axes
    saved = (t.device, t.shape, plain, _probe(t.shape)[plain].shape)
    return emit("index", t.data[key], (t,), (_scatter,), saved, t.device, lambda tangents, *_: tangents[0][key])


@linear(lambda gg, device, shape, plain, plain_shape, g_shape: device.xp.reshape(gg[plain], g_shape))
def _scatter(g: Any, device: Any, shape: tuple[int, ...], plain: tuple, plain_shape: tuple[int, ...]) -> Any:
    """The gradient of ``t[plain]`` (a basic key): zeros of ``t``'s shape with ``g`` where the
    values came from."""
    full = device.xp.zeros(shape, dtype=g.dtype, **device._placement())
    full[plain] = device.xp.reshape(g, plain_shape)
    return full


def _positions(shape: tuple[int, ...], key: tuple) -> np.ndarray:
    """Where each value of ``t[key]`` sits in ``t`` flattened: an integer array of the result's shape.

    numpy applies ``key`` to each axis's coordinates (broadcast views: this costs about the sizes of
    the result and of the key, not of ``t``), and Horner's rule joins them: ``(i0 * n1 + i1) * n2 + i2``
    for 3 axes."""
    flat = _probe(shape)[key].astype(np.int64)
    for n, coordinate in zip(shape, np.indices(shape, sparse=True)):
        flat = flat * n + np.broadcast_to(coordinate, shape)[key]
    return flat


def take_flat(t: Tensor, flat: Any, shape: tuple[int, ...]) -> Tensor:
    """The values of ``t`` at the flat positions ``flat`` (an integer array on ``t``'s device), in
    ``shape``: a positions' array made on the device is never read on the host, so ``tk.compile``
    records how it is made (``nn.Embedding``'s rows)."""
    device, xp = t.device, t.device.xp

    def taken(values: Any, *saved: Any) -> Any:
        return xp.reshape(xp.take(xp.reshape(values, (-1,)), flat), shape)

    return emit("index", taken(t.data), (t,), (_add_at,), (device, t.shape, flat), device,
                lambda tangents, *_: taken(tangents[0]))


@linear(lambda gg, device, shape, flat, g_shape: device.xp.reshape(
    device.xp.take(device.xp.reshape(gg, (-1,)), flat), g_shape))
def _add_at(g: Any, device: Any, shape: tuple[int, ...], flat: Any) -> Any:
    """The gradient of a take at flat positions: ``g`` added into zeros at them, repeats summed."""
    xp = device.xp
    return xp.reshape(device.index_add((math.prod(shape),), flat, xp.reshape(g, (-1,))), shape)


# -- moving values ---------------------------------------------------------------------------
@unary(lambda g, xp, axes: xp.flip(g, axis=axes), LINEAR)
def flip(xp, x, axis=None):
    """The values in reverse order along ``axis`` (an int, a tuple, or None for all axes); the
    gradient is flipped back."""
    axes = normalize_axes(axis, x.ndim, "flip")
    return xp.flip(x, axis=axes), (xp, axes)


def _roll_back(g: Any, xp: Any, shift: Any, axes: tuple[int, ...] | None) -> Any:
    return xp.roll(g, -shift if axes is None else tuple(-s for s in shift), axis=axes)


@unary(_roll_back, LINEAR)
def roll(xp, x, shift, axis=None):
    """The values shifted ``shift`` places along ``axis``, those pushed off the end coming back at
    the start (numpy's ``roll``; ``axis=None`` rolls the flattened tensor; a tuple of axes takes
    one shift each, or one for all). The gradient rolls back."""
    shifts = _ints(shift, "roll", "shift")
    if axis is None:
        if len(shifts) != 1:
            raise InvalidArgumentError(f"roll: the flattened tensor (axis=None) rolls by one int, got {shift!r}")
        return xp.roll(x, shifts[0]), (xp, shifts[0], None)
    axes = _axes_in_order(axis, x.ndim, "roll")
    shifts = shifts * len(axes) if len(shifts) == 1 else shifts
    if len(shifts) != len(axes):
        raise InvalidArgumentError(f"roll: give one shift per axis, or one for all, got {shift!r} for axes {axis!r}")
    return xp.roll(x, shifts, axis=axes), (xp, shifts, axes)


def _sum_copies(g: Any, xp: Any, shape: tuple[int, ...], reps: tuple[int, ...], padded: tuple[int, ...]) -> Any:
    """The rule of ``tile``: each copy gets an axis of its own, ``(r0, n0, r1, n1, ...)``, and the
    copies are summed."""
    copies = tuple(n for pair in zip(reps, padded) for n in pair)
    return xp.reshape(xp.sum(xp.reshape(g, copies), axis=tuple(range(0, len(copies), 2))), shape)


@unary(_sum_copies, LINEAR)
def tile(xp, x, reps):
    """``x`` repeated ``reps`` times along each axis, as numpy's ``tile`` (fewer reps than axes
    apply to the last axes; more add leading axes). The gradient sums the copies."""
    reps = _ints(reps, "tile", "reps")
    if any(r < 0 for r in reps):
        raise InvalidArgumentError(f"tile: reps must be ints >= 0, got {reps!r}")
    ndim = max(len(reps), x.ndim)
    reps, padded = (1,) * (ndim - len(reps)) + reps, (1,) * (ndim - x.ndim) + x.shape
    return xp.tile(x, reps), (xp, x.shape, reps, padded)


def repeat(t: Tensor, repeats: Any, axis: int | None = None) -> Tensor:
    """Each value ``repeats`` times along ``axis`` (one count for all, or one per value), as
    numpy's ``repeat``; ``axis=None`` repeats the flattened tensor. It is indexing with each index
    repeated, so the gradient sums each value's copies, and the forward rule (JVP) repeats the
    tangent alike. (PyTorch's ``Tensor.repeat`` is ``tk.tile``.)"""
    flat = axis is None or t.ndim == 0
    ax = _one_axis(0 if axis is None else axis, max(t.ndim, 1), "repeat")
    length = t.size if flat else t.shape[ax]
    counts = _ints(repeats, "repeat", "repeats")  # checked before a flatten is recorded
    try:
        index = np.repeat(np.arange(length), counts)
    except ValueError as err:
        raise InvalidArgumentError(f"repeat: {err}; give one count (an int >= 0) for all values or one per value "
                                   f"({length} along axis {ax})") from None
    return getitem(flatten(t) if flat else t, (slice(None),) * ax + (index,))


def _one_axis(axis: Any, ndim: int, op: str) -> int:
    """``axis`` as one non-negative axis of a tensor with ``ndim`` axes: an int (None, which numpy
    reads as "flattened", and a tuple are refused)."""
    if axis is None or isinstance(axis, (tuple, list)):
        raise AxisError(f"{op}: axis must be one int from {-max(ndim, 1)} to {max(ndim, 1) - 1}, got {axis!r}")
    return normalize_axes(axis, max(ndim, 1), op)[0]


def _diagonal(k: Any, op: str) -> int:
    """A diagonal's number as an int (1.5 is refused, not truncated to 1)."""
    try:
        return operator.index(k)
    except TypeError:
        raise InvalidArgumentError(f"{op}: k, the diagonal, must be an int (0 the main one), got {k!r}") from None


def _matrices(x: Any, op: str) -> None:
    if x.ndim < 2:
        raise ShapeError(f"{op} takes a matrix or a stack of matrices (2 or more axes), got shape {tuple(x.shape)}; "
                         f"make a matrix first, e.g. t.reshape(1, -1)")


@unary(lambda g, xp, k: xp.tril(g, k=k), LINEAR)
def tril(xp, x, k=0):
    """The lower triangle of the last two axes: values above diagonal ``k`` become 0 (``k > 0``
    keeps diagonals above the main one). The gradient keeps the same triangle."""
    _matrices(x, "tril")
    k = _diagonal(k, "tril")
    return xp.tril(x, k=k), (xp, k)


@unary(lambda g, xp, k: xp.triu(g, k=k), LINEAR)
def triu(xp, x, k=0):
    """The upper triangle of the last two axes: values below diagonal ``k`` become 0. The gradient
    keeps the same triangle."""
    _matrices(x, "triu")
    k = _diagonal(k, "triu")
    return xp.triu(x, k=k), (xp, k)


def pad(t: Tensor, pad_width: Any, mode: str = "constant", constant_values: float = 0) -> Tensor:
    """``t`` with ``constant_values`` added before and after each axis, as numpy's ``pad``:
    ``pad_width`` is an int (every side), ``(before, after)`` (every axis), or one pair per axis.
    The gradient is the middle part of ``g``, where ``t``'s values went; forward rule (JVP): the
    tangent padded with zeros."""
    if mode != "constant":
        raise InvalidArgumentError(f"pad: only mode='constant' is supported, got mode={mode!r}; build other modes "
                                   f"from slices and tk.concat")
    if isinstance(constant_values, bool) or not isinstance(constant_values, numbers.Real):
        raise InvalidArgumentError(f"pad: constant_values must be one number, got {constant_values!r}")
    try:
        widths = np.asarray(pad_width)
        if widths.dtype.kind not in "iu" or not widths.size or (widths < 0).any():
            raise ValueError
        widths = np.broadcast_to(widths, (t.ndim, 2))  # numpy's forms, as one (before, after) per axis
    except ValueError:
        raise InvalidArgumentError(f"pad: pad widths must be ints >= 0: one for every side, (before, after) for every "
                                   f"axis, or one pair per axis ({t.ndim} pairs); got {pad_width!r}") from None
    inner = tuple(slice(int(before), int(before) + n) for (before, _), n in zip(widths, t.shape))
    shape = tuple(int(b + a) + n for (b, a), n in zip(widths, t.shape))

    def padded(values: Any, constant: float) -> Any:
        out = t.device.xp.full(shape, constant, dtype=values.dtype, **t.device._placement())
        out[inner] = values
        return out

    return emit("pad", padded(t.data, constant_values), (t,), (_middle,), (inner,), t.device,
                lambda tangents, *_: padded(tangents[0], 0))


def _middle(g: Any, inner: tuple) -> Any:
    """The rule of ``pad``: the part of ``g`` where ``t``'s values went."""
    return g[inner]


# -- helpers -----------------------------------------------------------------------------------
def sizes(shape: Sequence[Any], op: str) -> tuple[int, ...]:
    """A shape's sizes as Python ints; ``InvalidArgumentError`` for one that is not an int (2.7 is
    not truncated to 2)."""
    try:
        return tuple(operator.index(n) for n in shape)
    except TypeError:
        raise InvalidArgumentError(f"{op}: sizes must be ints, got {tuple(shape)!r}") from None


def _ints(value: Any, op: str, what: str) -> tuple[int, ...]:
    """``value`` (an int or a sequence of ints) as a tuple of Python ints."""
    items = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
    if items.ndim > 1 or (items.size and items.dtype.kind not in "iu"):
        raise InvalidArgumentError(f"{op}: {what} must be an int or a sequence of ints, got {value!r}")
    return tuple(int(v) for v in items.reshape(-1))


def device_array(key: Any, device: Any, what: str) -> Any:
    """``key`` (a tensor, array or list) as an array on ``device``; a tensor already there, or an
    array of the device's own (a mask an op made), is used as is, with no trip through the host
    (which would read its values: ``tk.compile`` would freeze them)."""
    if not isinstance(key, Tensor):
        if device_array_as_is(key, device.xp):
            return key
        try:
            return device.from_numpy(np.asarray(key))
        except ValueError:  # a ragged list
            raise InvalidArgumentError(f"{what} must be an array of one shape; got a list whose rows differ in "
                                       f"length") from None
    if key.device is not device and key.device.place != device.place:
        raise DeviceMismatchError(f"{what} is on {key.device!r} but the tensor it goes with is on {device!r}; "
                                  f"move it first with .to(device)")
    return key.data


@each_call
def refuse_out_of_range(index: Any, count: int, device: Any, message: str) -> None:
    """``IndexingError`` unless each value of the integer array ``index`` is from 0 to ``count - 1``:
    ``message`` with the values' ``{low}`` and ``{high}`` filled in (two scalars read from the device)."""
    if not index.size:
        return
    xp = device.xp
    low, high = int(xp.min(index)), int(xp.max(index))
    if low < 0 or high >= count:
        raise IndexingError(message.format(low=low, high=high))


def _tensors(tensors: Sequence[Any], op: str) -> list[Tensor]:
    try:  # a tensor is refused, not iterated (each row an index op recorded)
        items = None if isinstance(tensors, Tensor) else list(tensors)
    except TypeError:
        items = None
    if not items or not all(isinstance(t, Tensor) for t in items):
        got = (f"a {type(tensors).__name__}" if items is None else "an empty sequence" if not items else
               "a sequence of " + ", ".join(sorted({type(t).__name__ for t in items})))
        raise OperandError(f"{op} takes a non-empty sequence of tensors, got {got}; pass a list such as "
                           f"tk.{op}([a, b])")
    check_devices(items, op)
    return items
