"""Ops that move values around: reshape, axes, broadcasting, joining, selecting, indexing."""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence

import numpy as np

from ..devices import dtype_name, is_integer
from ..errors import DeviceMismatchError, DTypeError, IndexingError, OperandError, ShapeError
from ..ids import label
from ..tensor import Tensor
from .core import broadcast_shape, check_devices, emit, normalize_axes, same, unary, where_false, where_true

__all__ = ["reshape", "permute", "transpose", "broadcast_to", "concat", "stack", "where", "getitem"]


def _target_shape(old: tuple[int, ...], new: Sequence[int]) -> tuple[int, ...]:
    new = tuple(int(n) for n in new)
    known = math.prod(n for n in new if n != -1)
    if new.count(-1) > 1 or (-1 in new and (known == 0 or math.prod(old) % known)) or \
            (-1 not in new and known != math.prod(old)) or any(n < -1 for n in new):
        raise ShapeError(f"reshape: cannot reshape {old} ({math.prod(old)} values) to {new}; "
                         f"the sizes must match (one -1 may stand for the rest)")
    return tuple(math.prod(old) // known if n == -1 else n for n in new)


@unary(lambda g, xp, shape: xp.reshape(g, shape))
def reshape(xp, x, *shape):
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = tuple(shape[0])
    target = _target_shape(x.shape, shape)
    return xp.reshape(x, target), (xp, x.shape)


@unary(lambda g, xp, inverse: xp.permute_dims(g, inverse))
def permute(xp, x, *axes):
    if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
        axes = tuple(axes[0])
    order = normalize_axes(axes, x.ndim, "permute")
    if len(axes) != x.ndim:
        raise ShapeError(f"permute: give all {x.ndim} axes in their new order, got {axes}")
    axes = tuple(int(a) % x.ndim for a in axes)
    inverse = tuple(axes.index(i) for i in order)
    return xp.permute_dims(x, axes), (xp, inverse)


def transpose(t: Tensor, axis1: int = -2, axis2: int = -1) -> Tensor:
    """Swap two axes (the last two by default)."""
    axes = list(range(t.ndim))
    a, b = normalize_axes(axis1, t.ndim, "transpose")[0], normalize_axes(axis2, t.ndim, "transpose")[0]
    axes[a], axes[b] = axes[b], axes[a]
    return permute(t, axes)


def broadcast_to(t: Tensor, shape: Sequence[int]) -> Tensor:
    shape = tuple(int(n) for n in shape)
    if broadcast_shape(t.shape, shape, "broadcast_to") != shape:
        raise ShapeError(f"broadcast_to: {t.shape} cannot be broadcast to {shape}")
    xp = t.device.xp
    return emit("broadcast_to", xp.broadcast_to(t.data, shape), (t,), (same,), (), t.device)


def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join tensors along an existing axis."""
    tensors = _tensors(tensors, "concat")
    first = tensors[0]
    (ax,) = normalize_axes(axis, first.ndim, "concat")
    for t in tensors[1:]:
        if t.ndim != first.ndim or any(m != n for i, (m, n) in enumerate(zip(t.shape, first.shape)) if i != ax):
            raise ShapeError(f"concat: {label(t.id)} has shape {t.shape} but {label(first.id)} has {first.shape}; "
                             f"all shapes must match except along axis {ax}")
    bounds = np.cumsum([0] + [t.shape[ax] for t in tensors])
    pieces = tuple(tuple(slice(int(lo), int(hi)) if i == ax else slice(None) for i in range(first.ndim))
                   for lo, hi in zip(bounds[:-1], bounds[1:]))
    out = first.device.xp.concat([t.data for t in tensors], axis=ax)
    return emit("concat", out, tensors, _piece_rules(len(tensors)), (pieces,), first.device)


def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join tensors of one shape along a new axis."""
    tensors = _tensors(tensors, "stack")
    first = tensors[0]
    for t in tensors[1:]:
        if t.shape != first.shape:
            raise ShapeError(f"stack: {label(t.id)} has shape {t.shape} but {label(first.id)} has {first.shape}; "
                             f"stacked tensors must have one shape")
    (ax,) = normalize_axes(axis, first.ndim + 1, "stack")
    pieces = tuple(tuple(i if d == ax else slice(None) for d in range(first.ndim + 1)) for i in range(len(tensors)))
    out = first.device.xp.stack([t.data for t in tensors], axis=ax)
    return emit("stack", out, tensors, _piece_rules(len(tensors)), (pieces,), first.device)


def _piece_rules(n: int) -> tuple[Callable, ...]:
    """The rules of ``n`` joined operands: operand ``i`` takes its own piece of the gradient,
    ``g[pieces[i]]``, where ``pieces`` (saved) holds every operand's index into the output. Each
    rule is made once per position, not per call."""
    return tuple(_piece_rule(i) for i in range(n))


@functools.cache
def _piece_rule(i: int) -> Callable:
    return lambda g, pieces: g[pieces[i]]


def where(condition: Any, a: Any, b: Any) -> Tensor:
    """``a`` where ``condition`` holds, else ``b``; ``a`` and ``b`` may be numbers."""
    tensors = [t for t in (a, b) if isinstance(t, Tensor)]
    if not tensors:
        raise OperandError("where needs at least one tensor among its two value operands, got two numbers; make "
                           "one a tensor with dev.tensor(value)")
    device = tensors[0].device
    xp = device.xp
    check_devices(tensors, "where")
    cond = device_array(condition, device, "where: the condition")
    if dtype_name(cond.dtype) != "bool":
        raise DTypeError(f"where: the condition must be boolean, got {dtype_name(cond.dtype)}; compare first (t > 0)")
    target = cond.shape
    for t in tensors:
        target = broadcast_shape(target, t.shape, "where")

    def values(v: Any) -> Any:
        return v.data if isinstance(v, Tensor) else xp.full(target, v, dtype=tensors[0].dtype, **device._placement())

    x, y = values(a), values(b)
    out = xp.where(cond, x, y)
    return emit("where", out, (a, b), (where_true, where_false), (xp, cond), device)


def getitem(t: Tensor, key: Any) -> Tensor:
    """``t[key]``: basic indexing (ints, slices, ``None``, ``...``) or an integer array along axis 0,
    whose backward adds the gradients of repeated indices."""
    xp, device = t.device.xp, t.device
    shape = t.shape  # records save the shape, not the tensor: no tape -> record -> tensor cycle
    index = _integer_index(key, t)
    if index is not None:
        out = xp.take(t.data, index, axis=0)
        return emit("index", out, (t,), (_index_add,), (device, shape, index), device)
    asked, key = key, key if isinstance(key, tuple) else (key,)
    if not any(k is Ellipsis for k in key):
        key = key + (...,)  # numpy's implicit trailing axes, spelled out for the array API
    try:
        out = t.data[key]
    except (IndexError, ValueError, TypeError) as err:
        raise IndexingError(f"t[{asked!r}] is not a valid index for shape {t.shape}: {err}. Use ints, slices, "
                            f"None and ..., or one integer array along axis 0.") from None
    plain = tuple(k for k in key if k is not None)  # setitem takes no new axes
    plain_shape = out.shape if plain == key else t.data[plain].shape
    return emit("index", out, (t,), (_scatter,), (device, shape, plain, plain_shape), device)


def _index_add(g: Any, device: Any, shape: tuple[int, ...], index: Any) -> Any:
    return device.index_add(shape, index, g)


def _scatter(g: Any, device: Any, shape: tuple[int, ...], plain: tuple, plain_shape: tuple[int, ...]) -> Any:
    """The gradient of ``t[plain]``: zeros of ``t``'s shape with ``g`` where the values came from."""
    full = device.xp.zeros(shape, dtype=g.dtype, **device._placement())
    full[plain] = device.xp.reshape(g, plain_shape)
    return full


def _integer_index(key: Any, t: Tensor) -> Any:
    """The key as a device integer array when it is one (a tensor, array or list of ints)."""
    if not isinstance(key, (Tensor, list, np.ndarray)):
        return None
    index = device_array(key, t.device, "an index array")
    if not is_integer(index.dtype) or index.ndim != 1:
        kind = dtype_name(index.dtype)
        if kind == "bool":
            raise IndexingError("boolean mask indexing is not differentiable here; use tk.where(mask, t, 0) instead")
        raise IndexingError(f"an index array must be 1-D integers, got dtype {kind} and shape {tuple(index.shape)}")
    if t.ndim == 0:
        raise IndexingError("a 0-d tensor cannot be indexed by an array")
    n = t.shape[0]
    low, high = value_range(index, t.device)
    if low < -n or high >= n:
        raise IndexingError(f"index array holds values from {low} to {high}, outside axis 0 of size {n} "
                            f"(valid: {-n} to {n - 1})")
    xp = t.device.xp
    return xp.astype(xp.where(index < 0, index + n, index) if low < 0 else index, xp.int64)


def device_array(key: Any, device: Any, what: str) -> Any:
    """``key`` (a tensor, array or list) as an array on ``device``; a tensor already there is used
    as is, with no trip through the host."""
    if not isinstance(key, Tensor):
        return device.from_numpy(np.asarray(key))
    if key.device is not device and key.device.place != device.place:
        raise DeviceMismatchError(f"{what} is on {key.device!r} but the tensor it goes with is on {device!r}; "
                                  f"move it first with .to(device)")
    return key.data


def value_range(index: Any, device: Any) -> tuple[int, int]:
    """The smallest and largest value of an integer array (two scalars read from the device);
    ``(0, -1)`` when it is empty."""
    if not index.size:
        return 0, -1
    xp = device.xp
    return int(xp.min(index)), int(xp.max(index))


def _tensors(tensors: Sequence[Any], op: str) -> list[Tensor]:
    try:
        items = list(tensors)
    except TypeError:
        items = None
    if not items or not all(isinstance(t, Tensor) for t in items):
        got = (f"a {type(tensors).__name__}" if items is None else "an empty sequence" if not items else
               "a sequence of " + ", ".join(sorted({type(t).__name__ for t in items})))
        raise OperandError(f"{op} takes a non-empty sequence of tensors, got {got}; pass a list such as "
                           f"tk.{op}([a, b])")
    check_devices(items, op)
    return items
