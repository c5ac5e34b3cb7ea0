"""``backward(..., create_graph=True)``: the backward itself recorded on a tape.

The same records run newest-first, with the same rules, but each rule is handed tensors for
arrays and ``TensorNamespace`` for its ``xp``, so every step it takes is an op recorded on a tape
(``tapekit.namespace``): one definition of each op's maths serves the first derivative and the
second. A saved array that is the record's operand or output (``Record.links``) becomes a handle
of that tensor (same id, same storage), so a second backward flows through it into the forward's
records and on to the inputs; any other saved array is a constant.

Which tape holds the backward's records
---------------------------------------
Under every policy, the tape the forward's records are on: the merge of the outputs' tapes, as a
first-order backward merges them. Every gradient returned is a handle of it. The forward's records
stay (``create_graph`` implies ``retain``: the gradients are functions of them), and the backward's
follow them, numbered after them, so a second backward on anything computed from the gradients
sees both, and runs the records it reaches: the backward's, then the forward's they lead to.

- ``UnionTape``, ``ArcTape``: the shared tape; each gradient holds it, as a clone would.
- ``GlobalTape``: the global tape, inside its ``with`` block or after it.
- ``OwnedTape``: the one tape the output owned; each gradient is a handle of it, so, as for any
  owned handle, the op that first uses a gradient moves it (a second use raises
  ``TapeMovedError``; ``retaped()`` makes a second branch).

A second backward without ``retain`` drains (or consumes) that tape as the design says, taking
the forward's records and the backward's with it.

All or nothing: the rules record onto a scratch tape of their own first, outside any GlobalTape
block; only once every rule has run are its records moved onto the outputs' tape. A rule that
raises, or an interrupt, leaves every tape, record and gradient as it was.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .errors import NonFiniteError, SecondOrderError
from .gradients import Gradients
from .namespace import TensorNamespace
from .ops.core import emit, unbroadcast
from .tapes.base import LOCK, Record, Tape
from .tapes.global_ import _active
from .tapes.merge import merge_tapes
from .tapes.union import UnionTape
from .tensor import Tensor


def recorded_backward(outputs: Sequence[Tensor], seeds: Sequence[Any], tapes: Sequence[Tape],
                      records: list[Record], entries: dict[int, Any], rule_error: Any) -> Gradients:
    """The gradients of ``outputs`` as traced tensors, the backward recorded (see the module's
    docstring). ``entries`` are the gradient entries the tapes held before; ``rule_error(rec, tid,
    err)`` makes the error of a failed rule."""
    scratch = UnionTape()
    found = _run(records, entries, outputs, seeds, scratch, rule_error)
    # every rule has run: only now do the tapes change
    tape = merge_tapes(tapes, "backward")
    grads = tape._take(True, records)
    with LOCK:
        Tape._take_in(tape._store(), scratch)
    for tid, grad in found.items():
        grads._arrays[tid] = grad._handle(tape)
        grads._owned.discard(tid)
        grads._clean.discard(tid)
    grads._ran = tape._store()._ref
    return grads


def _run(records: list[Record], entries: dict[int, Any], outputs: Sequence[Tensor], seeds: Sequence[Any],
         scratch: UnionTape, rule_error: Any) -> dict[int, Tensor]:
    """Run the rules newest-first on tensors, recording on ``scratch``; the gradients found."""
    device = outputs[0].device
    found: dict[int, Tensor] = {}
    for out, seed in zip(outputs, seeds):
        _add(found, out.id, Tensor(seed, device)._handle(scratch))
    ns = TensorNamespace(device)
    swaps = {id(device.xp): ns, id(device): _RecordingDevice(ns)}
    unreached: list[Record] = []
    rec = tid = None
    outside = _active.set(())  # the records go to the scratch tape, not to an enclosing GlobalTape block
    try:
        for rec in reversed(records):
            tid = None
            g = _with_entry(found.get(rec.out), entries.get(rec.out), device)
            if g is None:
                unreached.append(rec)
                continue
            saved = _as_tensors(rec, scratch, swaps, device)
            for tid, shape, rule in zip(rec.inputs, rec.shapes, rec.rules):
                if rule is not None:
                    gi = _whole(rule, g, rec, device) if hasattr(rule, "transpose") else rule(g, *saved)
                    _add(found, tid, _shaped(gi, shape, swaps[id(device.xp)], device))
        rec = tid = None
        _finish(found, unreached, entries, scratch, device)
    except BaseException as err:
        if not isinstance(err, Exception) or isinstance(err, NonFiniteError):
            raise
        raise rule_error(rec, tid, err) from err
    finally:
        _active.reset(outside)
    return found


def _whole(rule: Any, g: Tensor, rec: Record, device: Any) -> Tensor:
    """A ``linear`` rule applied to ``g``, recorded as one op whose rule is its transpose (and
    whose forward rule, as it is linear, is itself applied to the tangent)."""
    return emit(f"{rec.name}'s rule", rule(g.data, *rec.saved), (g,), (rule.transpose,), (*rec.saved, g.shape),
                device, lambda tangents, *_: rule(tangents[0], *rec.saved))


def _with_entry(g: Tensor | None, entry: Any, device: Any) -> Tensor | None:
    """A record's output gradient plus the entry its tape held before this backward, if any."""
    if entry is None:
        return g
    held = Tensor(entry, device)
    return held if g is None else g + held


def _shaped(gi: Any, shape: tuple, ns: TensorNamespace, device: Any) -> Tensor:
    """A rule's result as a tensor of its operand's shape (summed over broadcast axes)."""
    if not isinstance(gi, Tensor):
        gi = Tensor(gi, device)
    return gi if gi.shape == tuple(shape) else unbroadcast(ns, gi, tuple(shape))


def _add(found: dict[int, Tensor], tid: int, grad: Tensor) -> None:
    old = found.get(tid)
    if old is None:
        found[tid] = grad
    else:
        found[tid] = old + (grad if grad.dtype == old.dtype else TensorNamespace(grad.device).astype(grad, old.dtype))


def _finish(found: dict[int, Tensor], unreached: list[Record], entries: dict[int, Any], scratch: UnionTape,
            device: Any) -> None:
    """Give every operand of the unreached records a zero entry, add the entries the tapes held,
    and put every gradient on ``scratch`` (a constant one as a tensor of its own)."""
    xp = device.xp
    for rec in unreached:
        for tid, shape in zip(rec.inputs, rec.shapes):
            if tid is not None and tid not in found and tid not in entries:
                found[tid] = Tensor(xp.zeros(shape, dtype=rec.dtype, **device._placement()), device)
    for tid, entry in entries.items():  # an entry the tapes held is part of the gradient
        found[tid] = _with_entry(found.get(tid), entry, device)
    for tid, grad in found.items():
        if grad.tape is None:
            found[tid] = grad._handle(scratch)


def _as_tensors(rec: Record, scratch: UnionTape, swaps: dict[int, Any], device: Any) -> list[Any]:
    """What ``rec`` saved, for its rules to compute on tensors: the namespace swapped for
    tensor ops, the record's operand and output arrays (``Record.links``) as handles of those
    tensors (on ``scratch``), other arrays as constants."""
    saved = []
    for j, v in enumerate(rec.saved):
        k = rec.link(j)
        if k is None:
            if type(v) is list:
                saved.append([_constant(w, device) for w in v])
            else:
                saved.append(swaps.get(id(v)) or _constant(v, device))
        elif k == -1:
            saved.append(_handle_of(rec.out, v, rec, device, scratch))
        else:
            saved.append(_handle_of(rec.inputs[k], v, rec.parents[k], device, scratch))
    return saved


def _constant(value: Any, device: Any) -> Any:
    """An array as a tensor on no tape; anything else as it is."""
    if isinstance(getattr(value, "shape", None), tuple) and hasattr(value, "dtype") and not isinstance(value, Tensor):
        return Tensor(value, device)
    return value


def _handle_of(tid: int, array: Any, parent: Record | None, device: Any, tape: Tape) -> Tensor:
    """A handle of the tensor ``tid`` (made by ``parent``) that carries ``tape``."""
    if isinstance(array, np.generic):  # numpy's 0-d result, saved before emit made it an array
        array = np.asarray(array)
    t = Tensor.__new__(Tensor)
    t.id, t.data, t.device, t._tape, t._record = tid, array, device, tape, parent
    return t


class _RecordingDevice:
    """What a rule that saved its device is handed: its namespace ``xp`` computes with tapekit's
    ops, as the namespace a rule saved does (the transposes of the indexing rules, run again for
    a third derivative, reshape and take with it). Anything else of the device (a scatter with
    ``index_add``, an allocation) cannot be recorded, so using it says so."""

    def __init__(self, ns: TensorNamespace) -> None:
        self.xp = ns

    def __getattr__(self, name: str) -> Any:
        raise SecondOrderError(f"this rule computes with the device itself (device.{name}), not with its array "
                               f"namespace, so its steps cannot be recorded and the op has no second derivative here. "
                               f"Differentiate it once only, or write its rule with the namespace's functions.")
