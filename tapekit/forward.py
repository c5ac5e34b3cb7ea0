"""Forward mode: ``tk.jvp`` carries a tangent beside each value through ``f``, and no tape records it.

Each op's forward rule (its JVP, ``J t``) sits beside its backward rule (``Jᵀ g``), with the
conventions in ``tapekit/ops/core.py``. Inside ``jvp``, ``emit`` hands every op's output to
``carry``, which runs the op's forward rule on its operands' tangents. Tangents are kept by tensor
id, as gradients are, so a traced handle of a value (same id) carries the value's tangent. One call
pushes one input direction through ``f``; ``jacfwd`` builds a Jacobian one direction at a time.
"""

from __future__ import annotations

import contextlib
import threading
from contextvars import ContextVar
from typing import Any, Callable, Iterator, Sequence

from .devices import device_array_as_is, dtype_name, host_floats, is_floating
from .errors import (BackwardError, DeviceMismatchError, DTypeError, InvalidArgumentError, ShapeError, TapekitError,
                     TracedOutsideError, checked_function)
from .ids import _births
from .tensor import Tensor

__all__ = ["jvp", "jacfwd"]

ELEMENTWISE = "elementwise"  # an op's forward rule: its backward rules, on tangents broadcast to its output
LINEAR = "linear"  # an op's forward rule: the forward itself, applied to the tangent

on = False  # read by emit: True while any thread is inside jvp
_depth = 0
_lock = threading.Lock()
_tangents: ContextVar[dict[int, Any] | None] = ContextVar("tapekit_tangents", default=None)
_first: ContextVar[int] = ContextVar("tapekit_first_tape_of_the_pass", default=0)  # tapes born since are f's own


def jvp(f: Callable[..., Any], primals: Any, tangents: Any) -> tuple[Any, Any]:
    """Forward mode: ``f``'s outputs at ``primals`` and their tangents ``J t`` along ``tangents``.

    ``primals`` is a tensor or a sequence of them (floating, on no tape), ``tangents`` one tangent
    per primal of its shape (a tensor or an array; a number for a 0-d primal). ``f`` returns a tensor or a tuple or
    list of them; the tangents come back in the same form, as tensors on no tape. One call is one
    pass through ``f`` beside its values: each op's output gets its tangent from the op's forward
    rule, and nothing is recorded on any tape (the primals enter ``f`` as tensors of their own on no
    tape; only a GlobalTape block, whose tape takes every op, records them as it records any). An
    output that does not depend on the primals has a zero tangent. As ``jax.jvp`` and ``torch.func.jvp``.

    ``tk.jvp`` inside ``f`` is refused (forward over forward). A backward inside ``f`` passes
    tangents on only where its rules run as ops, recorded (forward over reverse:
    ``create_graph=True``, or ``tk.grad``, which records it inside ``jvp`` by itself); a plain
    backward of an output that carries a tangent is refused, since its rules compute on arrays and
    its gradients would come back without their tangents. So is an ``f`` that uses a tensor traced
    outside it (``TracedOutsideError``): its tangents could not depend on that tensor, and a gradient
    through them would be zero (reverse over forward); reverse mode differentiates through it."""
    checked_function(f, "tk.jvp")
    single = isinstance(primals, Tensor)
    inputs, tangents = _primals(primals, tangents)
    with _carrying({t.id: d for t, d in zip(inputs, tangents)}) as table:
        outputs = f(inputs[0]) if single else f(*inputs)
    return outputs, _output_tangents(outputs, table)


def jacfwd(f: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """The Jacobian of ``f`` at ``x`` by forward mode, of shape ``f(x).shape + x.shape``: one pass
    of ``jvp`` per element of ``x``, along each basis direction, gives one column. (Reverse mode
    gives a row per backward: it is cheaper when ``f`` has fewer outputs than inputs.)"""
    if not isinstance(x, Tensor):
        raise InvalidArgumentError(f"jacfwd takes a tensor x, got a {type(x).__name__}; make one: dev.tensor(values)")
    xp, n = x.device.xp, x.size
    index = xp.arange(n, **x.device._placement())
    point = _primal(0, x)
    columns, out = [], None
    with _carrying({}) as table:  # one table, cleared for each direction
        for i in range(max(n, 1)):
            table.clear()
            table[point.id] = xp.reshape(xp.astype(index == i, x.dtype), x.shape)  # no setitem: any namespace
            out = f(point)
            columns.append(xp.reshape(_output_tangents(out, table, "jacfwd: f must return one tensor").data,
                                      (out.size,)))
    jac = xp.stack(columns, axis=-1) if n else xp.zeros((out.size, 0), dtype=out.dtype, **x.device._placement())
    return Tensor(x.device.count(xp.reshape(jac, out.shape + x.shape)), x.device)


def refuse_plain_backward(outputs: Sequence[Tensor]) -> None:
    """``BackwardError`` when one of ``outputs``, about to be differentiated by a plain backward
    inside ``jvp``, carries a tangent: the gradients would lose theirs (a zero tangent, silently)."""
    table = _tangents.get() if on else None
    carrying = [out for out in outputs if table and out.id in table]
    if carrying:
        raise BackwardError(f"a plain backward of {carrying[0].label} inside tk.jvp: {carrying[0].label} carries a "
                            f"tangent, but a plain backward's rules compute on arrays, so its gradients would come "
                            f"back without theirs. Pass create_graph=True to record the backward, and the tangents "
                            f"flow through it (forward over reverse), or use tk.grad or tk.hvp, which do so.")


def carry(result: Tensor, name: str, inputs: Sequence[Any], rules: Sequence[Any], saved: tuple, jvp: Any) -> Tensor:
    """``result``, the output of the op ``name``, given its tangent from the op's forward rule ``jvp``
    (see ``tapekit/ops/core.py``) when an operand has one in this context's ``jvp``."""
    table = _tangents.get()
    if table is None:
        return result
    given = tuple([table.get(getattr(t, "id", None)) for t in inputs])  # a number has no id, and no tangent
    if all([t is None for t in given]):
        return result
    if jvp is None:
        raise TapekitError(f"{name} has no forward rule, so tk.jvp cannot push a tangent through it. Give the op "
                           f"one (unary(rule, jvp=...), emit(..., jvp=...): the kinds are in tapekit.ops.core), or use "
                           f"reverse mode (backward) for this function")
    tangent = _elementwise(result, given, rules, saved) if jvp is ELEMENTWISE else jvp(given, *saved)
    if tangent is not None:
        table[result.id] = tangent
    return result


def _elementwise(result: Tensor, given: tuple, rules: Sequence[Any], saved: tuple) -> Any:
    """The forward rule of an op that is elementwise on operands broadcast to its output: each
    operand's backward rule applied to its tangent, broadcast to the output's shape, summed."""
    xp, shape = result.device.xp, result.data.shape
    total = None
    for tangent, rule in zip(given, rules):
        if tangent is not None:
            part = rule(tangent if tangent.shape == shape else xp.broadcast_to(tangent, shape), *saved)
            total = part if total is None else total + part
    return total


@contextlib.contextmanager
def _carrying(table: dict[int, Any]) -> Iterator[dict[int, Any]]:
    """Inside the block, every op in this context carries tangents in ``table``."""
    global on, _depth
    if _tangents.get() is not None:
        raise InvalidArgumentError("tk.jvp inside tk.jvp (forward over forward) is not supported: the inner pass's "
                                   "tangents are plain arrays that the outer pass cannot see. For a second "
                                   "derivative, take tk.jvp of a gradient (forward over reverse).")
    token, born = _tangents.set(table), _first.set(next(_births))
    with _lock:
        _depth += 1
        on = True
    try:
        yield table
    finally:
        _tangents.reset(token)
        _first.reset(born)
        with _lock:
            _depth -= 1
            on = _depth > 0


def _primals(primals: Any, tangents: Any) -> tuple[list[Tensor], list[Any]]:
    """The checked primals, as tensors of their own (``_primal``), and their tangents as arrays of
    the primals' shapes, dtypes and devices."""
    if isinstance(primals, Tensor):  # one primal: one tangent, whatever its form
        primals, tangents = [primals], [tangents]
    elif isinstance(primals, (list, tuple)) and isinstance(tangents, (list, tuple)):
        primals, tangents = list(primals), list(tangents)
    else:
        raise InvalidArgumentError(f"jvp takes a tensor and its tangent, or a tuple of tensors and a tuple of their "
                                   f"tangents, got a {type(primals).__name__} and a {type(tangents).__name__}")
    if len(primals) != len(tangents):
        raise InvalidArgumentError(f"jvp: {len(primals)} primals but {len(tangents)} tangents; give one tangent per "
                                   f"primal, as a tuple (tk.jvp(f, (x, y), (dx, dy)))")
    inputs = [_primal(i, p) for i, p in enumerate(primals)]
    return inputs, [tangent_of(p, t, f"jvp: tangent {i}") for i, (p, t) in enumerate(zip(inputs, tangents))]


def _primal(i: int, primal: Any) -> Tensor:
    """Primal ``i``, checked, as a tensor of its own (a new id: a primal given twice takes two
    tangents) sharing its storage, on no tape."""
    if not isinstance(primal, Tensor):
        raise InvalidArgumentError(f"jvp: primal {i} is a {type(primal).__name__}; pass tensors (dev.tensor(values))")
    if not is_floating(primal.dtype):
        raise DTypeError(f"jvp: primal {i} has dtype {dtype_name(primal.dtype)}, which has no tangent; make it with "
                         f"dtype='float32' or 'float64'")
    if primal.tape is not None:
        raise InvalidArgumentError(f"jvp: primal {i} carries a tape, but forward mode records nothing, so no gradient "
                                   f"could flow back through it; pass x.detach() (or the tensor before trace())")
    return Tensor(primal.data, primal.device)


def tangent_of(primal: Tensor, tangent: Any, what: str) -> Any:
    """A tangent (``what``: how messages name it), checked, as an array of its primal's shape, dtype
    and device. A traced tensor is refused: forward mode computes tangents on arrays, so a gradient
    with respect to it would be a silent zero."""
    device = primal.device
    if isinstance(tangent, Tensor):
        if tangent.tape is not None:
            raise TracedOutsideError(
                f"{what} carries a tape, but forward mode computes tangents on arrays, so a gradient with respect "
                f"to it would be zero. J v is linear in v, and its gradient in v is a vector-Jacobian product: "
                f"use reverse mode (tk.vjp(f, x)[1](u) gives uᵀ J), or pass {tangent.label}.detach() for the "
                f"tangent alone.")
        if tangent.device is not device and tangent.device.place != device.place:
            raise DeviceMismatchError(f"{what} is on {tangent.device!r} but its primal is on {device!r}; "
                                      f"move it with .to(device)")
        data = tangent.data
    elif device_array_as_is(tangent, device.xp):  # an array of the device's own (not numpy's): not read
        data = tangent
    else:
        data = device.from_numpy(host_floats(tangent, what, InvalidArgumentError))
    if tuple(data.shape) != primal.shape:
        raise ShapeError(f"{what} has shape {tuple(data.shape)} but its primal has {primal.shape}; a "
                         f"tangent is a direction in the primal's space, of its shape")
    return data if data.dtype == primal.dtype else device.xp.astype(data, primal.dtype)


def _output_tangents(outputs: Any, table: dict[int, Any], one: str = "") -> Any:
    """The tangent of each output, as tensors in the outputs' form (a tensor, tuple or list); with
    ``one``, the message to refuse anything but one tensor with."""
    if one and not isinstance(outputs, Tensor):
        raise InvalidArgumentError(f"{one}, got a {type(outputs).__name__}")
    many = isinstance(outputs, (tuple, list))
    for i, out in enumerate(outputs if many else [outputs]):
        if not isinstance(out, Tensor):
            raise InvalidArgumentError(f"jvp: f must return a tensor or a tuple or list of them; output {i} is a "
                                       f"{type(out).__name__}")
        if not is_floating(out.dtype):
            raise DTypeError(f"jvp: output {i} has dtype {dtype_name(out.dtype)}: indices (argmax), truth values "
                             f"(comparisons, any, all) have no tangent; return a floating tensor")
    tangents = [_tangent_of(out, table) for out in (outputs if many else [outputs])]
    return type(outputs)(tangents) if many else tangents[0]


def holds_older_tape(out: Any, first: int) -> bool:
    """Whether ``out`` is a tensor holding records of a tape born before ``first``: the function
    that made it used a tensor traced before it began."""
    tape = out.tape if isinstance(out, Tensor) else None
    return tape is not None and getattr(tape, "_spent", None) is None and _born_before(tape, first)


def _born_before(tape: Any, first: int) -> bool:
    """Whether ``tape`` holds records of a tape (one it merged with, too) born before ``first``."""
    return min(tape._store()._parts()) < first


def refuse_traced_outside(name: str, inputs: Sequence[Any]) -> None:
    """``TracedOutsideError`` when the op ``name``, about to record inside ``jvp``, has an operand
    traced outside the forward pass (its tape born before the pass began): its tangents, computed on
    arrays, carry no dependence on that tensor, so a gradient through them would be a silent zero.
    Refused before the op records, so the outer tape is left as it was. A GlobalTape block's tape,
    which takes every op, is not refused; nor is anything outside this context's ``jvp``."""
    if _tangents.get() is None:
        return
    first = _first.get()
    for t in inputs:
        tape = getattr(t, "_tape", None)
        if tape is not None and tape.policy != "global" and _born_before(tape, first):
            raise TracedOutsideError(
                f"jvp: f used {t.label} (in op {name}), traced outside it on tape {tape.label}, and forward mode "
                f"records no tangent, so the tangents would not depend on {t.label}: a gradient through them would "
                f"be zero. Differentiate through it in reverse mode (tk.grad, tk.vjp), or give f its values "
                f"({t.label}.detach()) if only the tangent is wanted.")


def _tangent_of(out: Tensor, table: dict[int, Any]) -> Tensor:
    tangent = table.get(out.id)
    xp = out.device.xp
    if tangent is None:  # the output does not depend on the primals
        tangent = xp.zeros_like(out.data)
    elif tangent.dtype != out.dtype:
        tangent = xp.astype(tangent, out.dtype)
    return Tensor(out.device.count(tangent), out.device)
