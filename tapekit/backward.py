"""The backward engine: run a tape's records newest-first, iteratively, accumulating gradients."""

from __future__ import annotations

import sys
import warnings
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from . import anomaly
from .devices import is_floating
from .errors import (BackwardError, DeviceMismatchError, DTypeError, IncompleteTapeWarning, NonFiniteError, ShapeError,
                     TapeConsumedError)
from .gradients import Gradients, united_leaves, updatable
from .history import Coverage, coverage, store_at
from .ops.core import unbroadcast
from .ids import label, labels_later
from .tapes.base import Record, Tape, _by_id, consumed_error
from .tapes.merge import check_one_policy, merge_tapes
from .tensor import Tensor


def backward(outputs: Any, seeds: Sequence[Any] | None = None, retain: bool = False) -> Gradients:
    """Gradients of several outputs at once, summed, as if one loss were their sum.

    The outputs' tapes are merged first, so every record they hold runs once. ``seeds`` gives the
    starting gradient of each output (``None`` for a one-value output). ``retain=True`` keeps the
    records for another backward; otherwise each policy drains its tape as the design says.

    All or nothing: the rules run before any tape changes, so a rule that raises (or an interrupt)
    leaves every tape, record and gradient as it was; the error is a ``BackwardError`` naming the
    record whose rule failed, and backward can be called again once the cause is fixed.
    """
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    seeds = _seeds(outputs, seeds)
    tapes = [_tape_of(out) for out in outputs]
    check_one_policy(outputs, tapes, "tk.backward")
    names = labels_later([out.id for out in outputs])  # written when a message is read
    stores = list(dict.fromkeys(tape._store() for tape in tapes))
    cov = Coverage([]) if _holds_history(outputs, stores) else coverage(outputs, stores)
    if not cov.complete:
        if not tapes[0].allows_partial:
            raise TapeConsumedError(cov.summary(names))
        warnings.warn(cov.summary(names), IncompleteTapeWarning, stacklevel=_caller_level())
    records = sorted((rec for store in stores for rec in store._all_records()), key=_by_id)
    found = _run(records, Planned([store._grads for store in stores]), outputs, seeds)
    # every rule has run: only now do the tapes change
    tape = merge_tapes(tapes, "backward")
    grads = tape._take(retain, records)
    grads._why.update(cov.missed)
    grads._partial |= cov.incomplete | cov.missed.keys()  # a missed tensor may still get a zero entry elsewhere
    grads._ran = tape._store()._ref
    if not retain:
        by = names.after("the backward on ")
        for rec in records:  # what each record saved is let go
            rec.rules = rec.saved = rec.home = None
            rec.consumed_by = by
        tape._after_backward(outputs, by)
    found.add_to(grads, outputs[0].device)
    return grads.drop_non_leaves()


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside tapekit, so a warning names the user's line."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("tapekit."):
        frame, level = frame.f_back, level + 1
    return level


def _holds_history(outputs: Sequence[Tensor], stores: Iterable[Tape]) -> bool:
    """Whether ``stores`` hold the outputs' whole history: each output's record is on them, and so
    is every parent that lived on another tape when a record of theirs was made (a record's other
    parents share its tape for good: tapes only merge whole and drain whole). Each place such a
    record was kept is looked up once. When not, ``coverage`` walks the history to say what is
    missing."""
    stores = set(stores)
    records = [out._record for out in outputs if out._record is not None]
    records += [parent for store in stores for parent in store._foreign]
    homes = {id(rec.home): rec.home for rec in records}
    return all(home is not None and store_at(home) in stores for home in homes.values())


class Planned:
    """What the merge of the outputs' tapes will hold, read before any tape changes: their
    gradient entries (the right tape's entry wins on equal ids, as in a merge), which of them are
    zeroed buffers a rule may write into, and the united leaf set."""

    def __init__(self, grads: Sequence[Gradients]) -> None:
        self.arrays: dict[int, Any] = {}
        clean: set[int] = set()
        self.leaves: frozenset[int] | None = None
        for g in grads:
            self.arrays.update(g._arrays)
            clean = (clean - g._arrays.keys()) | g._clean
            self.leaves = united_leaves(self.leaves, g.leaves)
        self.clean = clean


class Found:
    """The gradients one backward found, kept apart from the tapes' entries until every rule has
    run: ``arrays`` are this backward's sums, ``filled`` the zeroed buffers rules wrote into."""

    def __init__(self, device: Any) -> None:
        self.arrays: dict[int, Any] = {}
        self.mine: set[int] = set()  # sums this backward made, which it may add into in place
        self.filled: list[int] = []
        self.fresh = self.fresh_bytes = 0  # arrays this backward made, counted on the device at the end
        self.nbytes_of = device.nbytes_of

    def made(self, array: Any) -> None:
        """Count an array this backward made."""
        self.fresh += 1
        self.fresh_bytes += self.nbytes_of(array)

    def add_to(self, grads: Gradients, device: Any) -> None:
        """Add what was found into ``grads`` (the merged tape's entries)."""
        for tid in self.filled:
            grads.filled(tid)
        for tid, arr in self.arrays.items():
            if tid not in grads._arrays and tid in self.mine:
                grads._arrays[tid] = arr
                grads._owned.add(tid)
            else:
                grads.accumulate(tid, arr, device)
        device.allocations += self.fresh
        device.allocated_bytes += self.fresh_bytes

    def undo(self, planned: Planned) -> None:
        """Zero the buffers rules wrote into again: the tapes' entries are as they were."""
        for tid in self.filled:
            planned.arrays[tid][...] = 0


def _run(records: list[Record], planned: Planned, outputs: Sequence[Tensor], seeds: Sequence[Any]) -> Found:
    """Run the records newest-first, each rule mapping its output's gradient to an operand's, and
    return what was found. Nothing outside the result changes, but for zeroed buffers that rules
    write into, which are zeroed again if a rule fails. A record that no output reaches runs no
    rule; its operands get zero entries at the end, if nothing else gave them one.

    With a leaf set, work whose result the end of backward would drop is skipped: an operand that
    no record of this backward made and that is not a leaf (an input batch, a constant) gets no
    gradient, and an output's gradient is let go as soon as the record that made it has run.
    """
    device = outputs[0].device
    xp = device.xp
    found = Found(device)
    arrays, mine, have = found.arrays, found.mine, planned.arrays
    get, nbytes_of = arrays.get, device.nbytes_of
    fresh = fresh_bytes = 0  # arrays the rules made (found.made's count, kept in locals on the hot path)
    clean = set(planned.clean) if device.takes_out else ()  # zeroed buffers a rule may write into
    leaves = planned.leaves
    wanted = None  # with a leaf set: the ids whose gradients are of use (the rest is dropped at the end)
    if leaves is not None:
        wanted = {rec.out for rec in records}
        wanted.update(leaves)  # in place: a long tape's set is not copied
    for out, seed in zip(outputs, seeds):
        _add(found, out.id, seed, xp)
    rec, tid, checking = None, None, anomaly.on
    unreached: list[Record] = []  # records no output reaches: their operands get zero entries at the end
    try:
        for rec in reversed(records):
            tid = None
            rules, saved = rec.rules, rec.saved
            g = get(rec.out)
            if rec.out in have:  # an entry the tape held before this backward adds to the gradient
                g = have[rec.out] if g is None else have[rec.out] + g
            if g is None:
                unreached.append(rec)
                continue
            for tid, shape, rule in zip(rec.inputs, rec.shapes, rules):
                if rule is None or (wanted is not None and tid not in wanted):
                    continue
                if tid in clean:
                    _write_into_buffer(found, planned.arrays[tid], tid, rule, g, saved, shape, xp)
                    clean.discard(tid)
                    if checking:
                        anomaly.check_rule(rec, tid, planned.arrays[tid], g, device)
                    continue
                gi = rule(g, *saved)
                if gi.shape != shape:
                    gi = unbroadcast(xp, gi, shape)
                if checking:
                    anomaly.check_rule(rec, tid, gi, g, device)
                if gi is not g:
                    fresh += 1
                    fresh_bytes += nbytes_of(gi)
                old = get(tid)  # _add's two common cases, inline on the hot path
                if old is None:
                    arrays[tid] = gi
                elif tid in mine and old.dtype == gi.dtype:
                    old += gi
                else:
                    _add(found, tid, gi, xp)
            if leaves is not None and rec.out not in leaves:  # used, and no leaf: let it go now
                arrays.pop(rec.out, None)
        found.fresh += fresh
        found.fresh_bytes += fresh_bytes
        rec = tid = None
        _zero_entries(found, unreached, have, leaves, device)
    except BaseException as err:
        found.undo(planned)
        if not isinstance(err, Exception) or isinstance(err, NonFiniteError):  # an interrupt stays one
            raise
        raise _rule_error(rec, tid, err) from err
    return found


def _zero_entries(found: Found, unreached: list[Record], have: dict[int, Any], leaves: frozenset[int] | None,
                  device: Any) -> None:
    """Zero gradients for the operands of the ``unreached`` records (newest first) that got no
    entry, since every operand of a recorded op gets one (with a leaf set, only leaves are kept).
    The search ends once each of them has one."""
    arrays = found.arrays
    lacking = set().union(*(rec.inputs for rec in unreached)) if leaves is None else set(leaves)
    lacking.difference_update(arrays, have, (None,))
    for rec in unreached:
        if lacking.isdisjoint(rec.inputs):
            if not lacking:
                return
            continue
        for tid, shape in zip(rec.inputs, rec.shapes):
            if tid in lacking:
                arrays[tid] = device.xp.zeros(shape, dtype=rec.dtype, **device._placement())
                found.made(arrays[tid])
                lacking.discard(tid)


def _add(found: Found, tid: int, grad: Any, xp: Any) -> None:
    """Add ``grad`` to what was found for ``tid``: kept as is on first arrival (it may alias
    another entry), summed into a new array on the second, in place after that."""
    old = found.arrays.get(tid)
    if old is None:
        found.arrays[tid] = grad
    elif tid in found.mine:
        old += grad if grad.dtype == old.dtype else xp.astype(grad, old.dtype)
    else:
        found.arrays[tid] = updatable(old + (grad if grad.dtype == old.dtype else xp.astype(grad, old.dtype)))
        found.mine.add(tid)
        found.made(found.arrays[tid])


def _rule_error(rec: Record | None, tid: int | None, err: Exception) -> BackwardError:
    what = (f"the backward rule of `{rec.line()}` for its operand {label(tid)}" if rec is not None and tid is not None
            else f"backward at `{rec.line()}`" if rec is not None else "backward")
    return BackwardError(f"{what} raised {type(err).__name__}: {err}. Nothing changed: every tape and gradient "
                         f"is as it was before this backward, so fix the cause and call backward again.")


def _write_into_buffer(found: Found, buf: Any, tid: int, rule: Callable, g: Any, saved: tuple, shape: tuple,
                       xp: Any) -> None:
    """The gradient of operand ``tid``, whose entry is a zeroed preallocated buffer ``buf``: a rule
    that can write into it does, an un-broadcast sums into it; otherwise it is copied in."""
    if getattr(rule, "fills", False):
        rule(g, *saved, out=buf)
    else:
        gi = rule(g, *saved)
        if gi is not g:
            found.made(gi)
        if gi.shape == shape:
            buf[...] = gi
        else:
            unbroadcast(xp, gi, shape, out=buf)
    found.filled.append(tid)


def _tape_of(out: Any) -> Tape:
    if not isinstance(out, Tensor):
        raise BackwardError(f"backward takes tensors, got {type(out).__name__}")
    tape = out._tape
    if tape is None:
        raise BackwardError(f"{out.label} carries no tape, so nothing was recorded for it. Trace an input first: "
                            f"x.trace() (or x.trace(tk.UnionTape())), then compute the output from it.")
    tape._live()
    rec = out._record
    if rec is not None and rec.home is None and rec.consumed_by:
        raise consumed_error(f"{out.label}'s tape", rec.consumed_by)
    return tape


def _seeds(outputs: list[Any], seeds: Sequence[Any] | None) -> list[Any]:
    if not outputs:
        raise BackwardError("tk.backward([]) got no outputs; pass the tensors to differentiate, e.g. "
                            "tk.backward([loss1, loss2])")
    if seeds is None:
        seeds = [None] * len(outputs)
    seeds = list(seeds)
    if len(seeds) != len(outputs):
        raise BackwardError(f"got {len(seeds)} seeds for {len(outputs)} outputs; give one per output "
                            f"(None for a one-value output)")
    return [_seed(out, seed) for out, seed in zip(outputs, seeds)]


def _seed(out: Any, seed: Any) -> Any:
    if not isinstance(out, Tensor):
        raise BackwardError(f"backward takes tensors, got {type(out).__name__}")
    if not is_floating(out.dtype):
        raise DTypeError(f"{out.label} has dtype {out.dtype}, which has no gradient; backward needs a floating "
                         f"output computed from traced floating inputs")
    xp = out.device.xp
    if seed is None:
        if out.size != 1:
            raise BackwardError(f"{out.label} has shape {out.shape}, not one value, so backward needs a seed: the "
                                f"gradient to start from, e.g. out.backward(seed=dev.ones({out.shape})), or reduce "
                                f"it first with out.sum().")
        return xp.ones_like(out.data)
    if isinstance(seed, Tensor):
        if seed.device is not out.device and seed.device.place != out.device.place:
            raise DeviceMismatchError(f"the seed for {out.label} is on {seed.device!r} but the output is on "
                                      f"{out.device!r}; make the seed on the output's device (seed.to(device))")
        data = seed.data
    else:
        try:
            data = out.device.from_numpy(np.asarray(seed, dtype=np.float64))
        except (TypeError, ValueError):
            raise DTypeError(f"the seed for {out.label} must be numbers (a tensor, an array or nested lists), "
                             f"got {type(seed).__name__}") from None
    if tuple(data.shape) != out.shape:
        raise ShapeError(f"the seed for {out.label} has shape {tuple(data.shape)} but the output has shape "
                         f"{out.shape}; give a seed of the output's shape")
    return xp.astype(data, out.dtype)
