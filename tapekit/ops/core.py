"""How an op becomes a tape record: operand checks, un-broadcasting, and ``emit``.

An op is written as one short function that returns its output and, beside it, its backward
rules (one per operand, mapping the output's gradient to that operand's). The decorators here
turn such a function into an op on tensors: they check operands, compute, and hand the result
to ``emit``, which records it on the merged tape of the operands.
"""

from __future__ import annotations

import functools
import numbers
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import AxisError, DeviceMismatchError, ShapeError
from ..ids import label, next_id
from ..tapes.base import Record, SpentTape, moved_into
from ..tapes.merge import merge_tapes, operand_tapes
from ..tensor import Tensor


def emit(name: str, out: Any, inputs: Sequence[Any], rules: Sequence[Callable | None], device: Any) -> Tensor:
    """Wrap ``out`` in a tensor and, when an operand carries a tape (or a GlobalTape block is
    active), record the op on the operands' merged tape."""
    if type(out) is not np.ndarray and isinstance(out, np.generic):
        out = np.asarray(out)
    tapes = operand_tapes(inputs, name)
    device.count(out)
    if not tapes:
        return Tensor(out, device)
    rid = next_id()
    tape = tapes[0] if len(tapes) == 1 else merge_tapes(tapes, f"#{rid} {name}")
    result = Tensor(out, device, tape)
    ids, shapes, parents, rules = _operands(inputs, rules)
    rec = Record(rid, name, ids, shapes, result.id, out.shape, out.dtype, rules, parents)
    tape._record(rec)
    result._record = rec
    if tape.moves:
        for t in inputs:
            if isinstance(t, Tensor) and t._tape is not None:
                t._tape = SpentTape(moved_into, t.id, rid, name, result.id)
    return result


def _operands(inputs: Sequence[Any], rules: Sequence[Callable | None]) -> tuple[tuple, tuple, tuple, tuple]:
    """Ids, shapes, producing records and rules of an op's operands (for a number: None, (), None,
    None). One or two tensors, the common case, take the short way."""
    if len(inputs) == 1:
        (a,) = inputs
        return (a.id,), (a.data.shape,), (a._record,), tuple(rules)
    if len(inputs) == 2:
        a, b = inputs
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            return (a.id, b.id), (a.data.shape, b.data.shape), (a._record, b._record), tuple(rules)
    tensors = [isinstance(t, Tensor) for t in inputs]
    return (tuple(t.id if is_t else None for t, is_t in zip(inputs, tensors)),
            tuple(t.data.shape if is_t else () for t, is_t in zip(inputs, tensors)),
            tuple(t._record if is_t else None for t, is_t in zip(inputs, tensors)),
            tuple(rule if is_t else None for rule, is_t in zip(rules, tensors)))


def unbroadcast(xp: Any, grad: Any, shape: tuple[int, ...], out: Any = None) -> Any:
    """Sum ``grad`` over the axes that broadcasting added or stretched, back to ``shape``.

    ``out`` (numpy and CuPy only) is an array of ``shape`` to write the sum into instead of a new one.
    """
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and grad.shape[lead + i] != 1)
    if out is not None:
        xp.sum(grad, axis=axes, keepdims=True, out=out[(None,) * lead])
        return out
    if axes:
        grad = xp.sum(grad, axis=axes)
    return xp.reshape(grad, shape)


def fills(rule: Callable) -> Callable:
    """Mark a backward rule that can write its gradient into a zeroed buffer: ``rule(g, out=buf)``.
    The engine passes ``out`` only on devices whose namespace takes it (numpy, CuPy)."""
    rule.fills = True
    return rule


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...], op: str) -> tuple[int, ...]:
    """The numpy broadcast of two shapes, or ``ShapeError`` naming both."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        m = a[-i] if i <= len(a) else 1
        n = b[-i] if i <= len(b) else 1
        if m != n and m != 1 and n != 1:
            raise ShapeError(f"{op}: shapes {a} and {b} do not broadcast (axis {-i}: {m} vs {n}). "
                             f"Reshape one operand, or insert an axis of size 1 to broadcast over.")
        out.append(max(m, n) if m != 1 and n != 1 else m * n)
    return tuple(reversed(out))


def check_devices(tensors: Sequence[Tensor], op: str) -> None:
    first = tensors[0].device
    for t in tensors[1:]:
        if t.device is not first and t.device.place != first.place:
            raise DeviceMismatchError(f"{op}: {label(tensors[0].id)} is on {first!r} but {label(t.id)} is on "
                                      f"{t.device!r}. Move one with t.to(device) first.")


def scalar(value: Any, op: str) -> float | int:
    """A Python number an op can take as a constant operand."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: unsupported operand of type {type(value).__name__}; use a tensor or a number")
    return value.item() if isinstance(value, np.generic) else value


def normalize_axes(axis: Any, ndim: int, op: str) -> tuple[int, ...] | None:
    """``axis`` (None, an int, or a sequence) as a sorted tuple of non-negative axes."""
    if axis is None:
        return None
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for ax in axes:
        if not isinstance(ax, (int, np.integer)) or isinstance(ax, bool):
            raise AxisError(f"{op}: axis {ax!r} is not an integer; pass an int from {-ndim} to {ndim - 1}, "
                            f"a tuple of them, or None for all axes")
        if not -ndim <= ax < max(ndim, 1):
            raise AxisError(f"{op}: axis {ax!r} is out of range for a tensor with {ndim} dimensions "
                            f"(valid: {-ndim} to {ndim - 1})")
        out.append(int(ax) % max(ndim, 1))
    if len(set(out)) != len(out):
        raise AxisError(f"{op}: axis {axis!r} repeats an axis; name each axis once")
    return tuple(sorted(out))


def binary(fn: Callable) -> Callable[[Any, Any], Tensor]:
    """An op of two operands from ``fn(xp, x, y) -> (out, (rule_x, rule_y))``. Either operand may
    be a Python number; shapes broadcast as in numpy."""
    name = fn.__name__

    @functools.wraps(fn)
    def op(a: Any, b: Any) -> Tensor:
        if isinstance(a, Tensor):
            device = a.device
            x = a.data
            if isinstance(b, Tensor):
                y = b.data
                if b.device is not device:
                    check_devices((a, b), name)
                if x.shape != y.shape:
                    broadcast_shape(x.shape, y.shape, name)
            else:
                y = scalar(b, name)
        else:
            if not isinstance(b, Tensor):
                raise TypeError(f"{name} needs at least one tensor operand")
            device = b.device
            x, y = scalar(a, name), b.data
        out, rules = fn(device.xp, x, y)
        return emit(name, out, (a, b), rules, device)

    return op


def unary(fn: Callable) -> Callable[..., Tensor]:
    """An op of one tensor from ``fn(xp, x, *params) -> (out, rule)``."""
    name = fn.__name__

    @functools.wraps(fn)
    def op(a: Tensor, *params: Any, **kw: Any) -> Tensor:
        out, rule = fn(a.device.xp, a.data, *params, **kw)
        return emit(name, out, (a,), (rule,), a.device)

    return op
