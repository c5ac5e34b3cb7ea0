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

from typing import Any, Callable, Sequence

import numpy as np

from .backward import chain_rule
from .devices import dtype_name
from .errors import BackwardError, SecondOrderError
from .gradients import Gradients
from .ids import set_name
from .namespace import TensorNamespace
from .ops.core import emit, unbroadcast
from .tapes.base import LOCK, Record, Tape
from .tapes.global_ import _active
from .tapes.merge import merge_tapes
from .tapes.union import UnionTape
from .tensor import Tensor


def recorded_backward(outputs: Sequence[Tensor], seeds: Sequence[Any], tapes: Sequence[Tape],
                      records: list[Record], entries: dict[int, Any], given: Sequence[Any]) -> Gradients:
    """The gradients of ``outputs`` as traced tensors, the backward recorded (see the module's
    docstring): ``chain_rule``, the loop of the first-order backward, with ``Traced`` keeping the
    gradients. ``entries`` are the gradient entries the tapes held before; ``given``, the seeds as
    the caller gave them (``_start``)."""
    scratch = UnionTape()
    found = Traced(records, entries, outputs[0].device, scratch)
    for out, seed, as_given in zip(outputs, seeds, given):
        found.add(out.id, _start(out, seed, as_given, scratch), seed.shape)
    outside = _active.set(())  # the records go to the scratch tape, not to an enclosing GlobalTape block
    try:
        chain_rule(records, found)
    finally:
        _active.reset(outside)
    # every rule has run: only now do the tapes change
    tape = merge_tapes(tapes, "backward")
    grads = tape._take(True, records)
    with LOCK:
        Tape._take_in(tape._store(), scratch)
    for tid, grad in found.arrays.items():
        grads._arrays[tid] = grad._handle(tape)
        grads._owned.discard(tid)
        grads._clean.discard(tid)
    grads._ran = tape._store()._ref
    return grads


def _start(out: Tensor, seed: Any, given: Any, scratch: UnionTape) -> Tensor:
    """The gradient the recorded backward starts from at ``out``: the seed as given, a handle on
    ``scratch``, where it is a tensor of the output's dtype on no tape (its tangent inside
    ``tk.jvp`` flows on) or on the output's own tape, under any policy (its records stay there,
    where the scratch's go: a gradient reaches it), as in PyTorch; else the seed's array, a
    constant. A seed traced on another tape is refused: its records would be split from it, and a
    gradient through it silently zero."""
    if isinstance(given, Tensor) and given.tape is not None:
        if out.tape is None or given.tape._store() is not out.tape._store():
            raise BackwardError(
                f"the seed for {out.label} (in tk.vjp, the cotangent given to vjp_fn) is traced on another tape than "
                f"{out.label}'s, so the recorded backward cannot differentiate through it: a gradient through it "
                f"would be zero. Trace both on one tk.UnionTape(), or pass seed.detach() to start from its values "
                f"as a constant.")
        if given.dtype != out.dtype:
            raise BackwardError(
                f"the seed for {out.label} is traced in {dtype_name(given.dtype)}, but {out.label} is "
                f"{dtype_name(out.dtype)}, and no cast keeps its tape: compute the seed in {out.label}'s dtype, or "
                f"pass seed.detach() to start from its values as a constant.")
        return given._handle(scratch)
    if isinstance(given, Tensor) and given.dtype == out.dtype:
        return given._handle(scratch)
    start = Tensor(seed, out.device)
    set_name(start.id, f"seed_{out.label}")  # a leaf of the tape from now on: named for what it is
    return start._handle(scratch)


class Traced:
    """The gradients a recorded backward finds, as tensors (``arrays``: tensor id -> gradient),
    for ``chain_rule``: each record's rules are called with tensors for the arrays they saved and
    ``TensorNamespace`` for their ``xp`` (``_as_tensors``), so every step they take is an op
    recorded on ``scratch``. Every operand's rule runs (``wanted``); no buffer is written into; a
    failure leaves nothing to undo, since only ``scratch`` changed."""

    buffers: frozenset[int] = frozenset()

    def __init__(self, records: Sequence[Record], entries: dict[int, Any], device: Any, scratch: UnionTape) -> None:
        self.arrays: dict[int, Tensor] = {}
        self.held = entries
        self.wanted = set().union(*(rec.inputs for rec in records))
        self.unreached: list[Record] = []
        self.device, self.scratch, self.ns = device, scratch, TensorNamespace(device)
        self.swaps = {id(device.xp): self.ns, id(device): _RecordingDevice(self.ns)}
        self.rules: list[Any] = []
        self.saved: list[Any] = []

    def gradient(self, rec: Record) -> Tensor | None:
        """The gradient of ``rec``'s output (with the entry its tape held before), and ``rec``'s
        rules and saved values as the rules are to be called: a ``linear`` rule whole (``_whole``)."""
        g = _with_entry(self.arrays.get(rec.out), self.held.get(rec.out), self.device)
        if g is not None:
            self.saved = _as_tensors(rec, self.scratch, self.swaps, self.device)
            self.rules = [_whole(rule, rec, self.device) if hasattr(rule, "transpose") else rule for rule in rec.rules]
        return g

    def add(self, tid: int, part: Any, shape: tuple) -> None:
        """Add a rule's result to the gradient of ``tid``, as a tensor of its operand's shape."""
        _add(self.arrays, tid, _shaped(part, shape, self.ns, self.device))

    def finish(self) -> None:
        _finish(self.arrays, self.unreached, self.held, self.scratch, self.device)

    def undo(self) -> None:
        """Nothing to undo: the rules' records went to the scratch tape, which is dropped."""


def _whole(rule: Any, rec: Record, device: Any) -> Callable[..., Tensor]:
    """A ``linear`` rule of ``rec`` as a rule on tensors: applied to ``g`` and recorded as one op
    whose rule is its transpose (and whose forward rule, as it is linear, is itself applied to the
    tangent). It takes ``rec``'s saved values as they are, not as tensors."""
    def whole(g: Tensor, *_: Any) -> Tensor:
        return emit(f"{rec.name}'s rule", rule(g.data, *rec.saved), (g,), (rule.transpose,), (*rec.saved, g.shape),
                    device, lambda tangents, *_: rule(tangents[0], *rec.saved))

    return whole


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
