"""The backward engine: the chain rule over a tape's records, newest first, iteratively.

``backward`` checks its outputs and what their tapes can see of their history, runs ``_run``
(``chain_rule``, the loop: each record's rules map its output's gradient to its operands', and each
result is added to its operand's gradient, in ``Found``), and only then changes the tapes: all or
nothing. A recorded backward (``create_graph=True``) runs the same loop with tensors
(``create_graph.Traced``).
"""

from __future__ import annotations

import itertools
import sys
import warnings
from typing import Any, Callable, Iterable, Sequence


from . import anomaly
from .callsite import silenced
from .devices import device_array_as_is, host_floats, is_floating
from .errors import (BackwardError, DeviceMismatchError, DTypeError, IncompleteTapeWarning, NonFiniteError, ShapeError,
                     TapeConsumedError, TapePolicyError, checked_flag)
from .gradients import Gradients, united_leaves, updatable
from .history import Coverage, coverage, home_of, store_at
from .ops.core import unbroadcast
from .ids import Later, label, labels_later
from .tapes.base import KEEP_RECORDS, Record, Tape, _by_id, consumed_error
from .tapes.merge import check_one_policy, merge_tapes
from .tensor import Tensor


def backward(outputs: Any, seeds: Sequence[Any] | None = None, retain: bool = False,
             create_graph: bool = False) -> Gradients:
    """Gradients of several outputs at once, summed, as if one loss were their sum.

    The outputs' tapes are merged first, so every record they hold runs once. ``seeds`` gives the
    starting gradient of each output (``None`` for a one-value output). ``retain=True`` keeps the
    records for another backward; otherwise each policy drains its tape as the design says.

    All or nothing: the rules run before any tape changes, so a rule that raises (or an interrupt)
    leaves every tape, record and gradient as it was; the error is a ``BackwardError`` naming the
    record whose rule failed, and backward can be called again once the cause is fixed.

    ``create_graph=True`` records the backward itself: each gradient is a traced tensor that can be
    differentiated again, and the records are kept (``retain`` is implied). Its records go onto the
    outputs' tape, after the forward's, under every policy (``tapekit.create_graph`` says what a
    second backward then sees).
    """
    retain, create_graph = checked_flag(retain, "retain"), checked_flag(create_graph, "create_graph")
    return _gradients(outputs, seeds, retain, create_graph).drop_non_leaves()


def gradients_for(wrt: Sequence[Tensor], outputs: Any, seeds: Sequence[Any] | None = None, retain: bool = False,
                  create_graph: bool = False) -> list[Any]:
    """``backward``'s gradients for the tensors ``wrt``, whatever the leaf set of the tapes (a
    transform's own inputs, which no leaf set names), ``None`` for one it did not reach."""
    grads = _gradients(outputs, seeds, retain, create_graph)
    found = [grads.get(t) for t in wrt]
    grads.drop_non_leaves()
    return found


def _gradients(outputs: Any, seeds: Sequence[Any] | None, retain: bool, create_graph: bool) -> Gradients:
    """``backward``, its gradients before the leaf set drops the others."""
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    given = _given_seeds(outputs, seeds)  # as the caller gave them
    seeds = [_seed(out, seed) for out, seed in zip(outputs, given)]
    tapes = [_tape_of(out) for out in outputs]
    check_one_policy(outputs, tapes, "tk.backward")
    if not create_graph:
        from .forward import refuse_plain_backward  # here: imported first, forward would load the ops before its names
        refuse_plain_backward(outputs)
    names = labels_later([out.id for out in outputs])  # written when a message is read
    stores = list(dict.fromkeys(tape._store() for tape in tapes))
    cov = _checked_coverage(outputs, stores, tapes[0], names)
    records = sorted(itertools.chain.from_iterable(store._all_records() for store in stores), key=_by_id)
    planned = Planned([store._grads for store in stores])
    if create_graph:
        from .create_graph import recorded_backward
        grads = recorded_backward(outputs, seeds, tapes, records, planned.arrays, given)
    else:
        found = _run(records, planned, outputs, seeds)
        grads = _taken(tapes, records, outputs, retain, names)  # every rule has run: only now do the tapes change
        found.add_to(grads, outputs[0].device)
    grads._why.update(cov.missed)
    grads._partial |= cov.incomplete | cov.missed.keys()  # a missed tensor may still get a zero entry elsewhere
    return grads


def _run(records: list[Record], planned: Planned, outputs: Sequence[Tensor], seeds: Sequence[Any]) -> Found:
    """The gradients of ``outputs`` (started from ``seeds``) that the records give, as arrays:
    ``chain_rule`` with a ``Found``."""
    found = Found(records, planned, outputs[0].device)
    for out, seed in zip(outputs, seeds):
        found.seed(out.id, seed)
    chain_rule(records, found)
    found.check_held()
    return found


def chain_rule(records: list[Record], found: Any) -> None:
    """The chain rule, over the records newest first: each record's rule for an operand maps the
    gradient of the record's output to that operand's part, which is added to the operand's
    gradient. ``found`` keeps the gradients and says what the rules are called with: arrays
    (``Found``), or tensors, so that the steps are recorded (``create_graph.Traced``). Nothing else
    changes but zeroed buffers that rules write into, which are zeroed again if a rule fails
    (``found.undo``). A record that no output reaches runs no rule; its operands get zero entries
    at the end (``found.finish``), if nothing else gave them one.
    """
    rec = tid = None
    try:
        for rec in reversed(records):  # newest first: every use of a tensor runs before the op that made it
            tid = None  # the operand whose rule runs (an error names it)
            g = found.gradient(rec)
            if g is None:  # no output depends on this record
                found.unreached.append(rec)
                continue
            for tid, shape, rule in zip(rec.inputs, rec.shapes, found.rules):
                if rule is None or tid not in found.wanted:
                    continue
                if tid in found.buffers:  # a zeroed gradient buffer: the rule writes into it
                    found.fill(tid, rule, shape)
                else:
                    found.add(tid, rule(g, *found.saved), shape)
        rec = tid = None
        found.finish()
    except BaseException as err:
        found.undo()
        if not isinstance(err, Exception) or isinstance(err, NonFiniteError):  # an interrupt stays one
            raise
        raise _rule_error(rec, tid, err) from err


def _checked_coverage(outputs: Sequence[Tensor], stores: list[Tape], tape: Tape, names: Later) -> Coverage:
    """What a backward over the tapes ``stores`` sees of the outputs' history. When it cannot see
    all of it, ``tape``'s policy says what happens: a ``TapeConsumedError``, or (the dfdx policies)
    an ``IncompleteTapeWarning`` and a partial result."""
    cov = Coverage([]) if _holds_history(outputs, stores) else coverage(outputs, stores)
    if not cov.complete:
        if not tape.allows_partial:  # consumed: a backward let the records go; else another tape holds them
            gone = any(home_of(r) is None for r in cov.hidden)
            raise (TapeConsumedError if gone else TapePolicyError)(cov.summary(names))
        level = _caller_level()
        if not silenced(IncompleteTapeWarning, level):
            warnings.warn(cov.summary(names), IncompleteTapeWarning, stacklevel=level)
    return cov


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


def _taken(tapes: list[Tape], records: list[Record], outputs: Sequence[Tensor], retain: bool,
           names: Later) -> Gradients:
    """The gradient entries of the merge of ``tapes``, taken from it. Unless ``retain``, the
    records that ran let go of what they saved, and each tape is left as its policy says."""
    tape = merge_tapes(tapes, "backward")
    grads = tape._take(retain, records)
    grads._ran = tape._store()._ref
    if not retain:
        by = names.after("the backward on ")
        for rec in records:
            rec.rules = rec.saved = rec.home = None
            rec.consumed_by = by
        tape._after_backward(outputs, by)
        for other in tapes:
            if other is not tape and other.moves:  # an OwnedTape the backward's merge took: consumed with it
                other._after_backward((), by)
    return grads


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
    """The gradients one backward finds, kept apart from the tapes' entries until every rule has
    run (``arrays``: tensor id -> gradient). On the chain rule's path are ``gradient`` (all of a
    record's output's gradient, which its rules now pass back) and ``add`` (one rule's result added
    to its operand's gradient); the rest is bookkeeping, each piece named. ``chain_rule`` calls
    the rules of the record ``gradient`` was given (``rules``) with its ``saved`` values."""

    def __init__(self, records: Sequence[Record], planned: Planned, device: Any) -> None:
        self.arrays: dict[int, Any] = {}
        self.held = planned.arrays  # the entries the tapes held before: part of each gradient
        self.mine: set[int] = set()  # arrays this backward made or filled, which it may add into in place
        self.buffers = set(planned.clean) if device.takes_out else set()  # zeroed buffers no rule wrote into yet
        self.filled: set[int] = set()  # the buffers rules wrote into
        self.leaves = planned.leaves
        self.wanted = _wanted(records, planned.leaves)
        self.unreached: list[Record] = []  # records no output reaches, newest first
        self.rec: Record | None = None  # the record whose rules run now (``gradient``)
        self.g: Any = None  # the gradient of its output
        self.rules: Sequence[Callable | None] = ()  # its rules, and what they are called with after g
        self.saved: tuple = ()
        self.fresh = self.fresh_bytes = 0  # arrays this backward made, counted on the device at the end
        self.device, self.xp, self.nbytes_of = device, device.xp, device.nbytes_of

    def seed(self, tid: int, seed: Any) -> None:
        """Start from ``seed``, the gradient of the output ``tid`` (summed when an output is given twice)."""
        self.buffers.discard(tid)  # a rule never writes into an output's buffer: the seed is added to it at the end
        self.add(tid, seed, seed.shape)

    def gradient(self, rec: Record) -> Any:
        """The gradient of ``rec``'s output, once every use of it ran: what this backward found,
        plus the entry its tape held before (``None`` when neither). ``rec``'s rules run next."""
        tid = rec.out
        kept = self.leaves is None or tid in self.leaves  # else let go of now: dropped at the end anyway
        g = self.arrays.get(tid) if kept else self.arrays.pop(tid, None)
        held = self.held.get(tid)
        if held is not None and tid not in self.filled:  # a filled buffer is the tape's entry and what was found
            g = held if g is None else held + g
        self.rec, self.g, self.rules, self.saved = rec, g, rec.rules, rec.saved
        return g

    def add(self, tid: int, part: Any, shape: tuple) -> None:
        """Add ``part``, the result of a rule of the record now running for its operand ``tid``, to
        the gradient found for ``tid``, summed back to the operand's ``shape`` where the op broadcast
        it: kept as it is on first arrival (it may be another entry's array), summed into a new array
        on the second, in place after that."""
        if part.shape != shape:
            part = unbroadcast(self.xp, part, shape)
        if self.rec is not None:
            if part is not self.g:  # a new array (``made`` inline: a call per rule is 3% of W1's backward)
                self.fresh += 1
                self.fresh_bytes += self.nbytes_of(part)
            if anomaly.on:
                anomaly.check_rule(self.rec, tid, part, self.g, self.device)
        old = self.arrays.get(tid)
        if old is None:
            self.arrays[tid] = part
        elif tid in self.mine:
            old += part if part.dtype == old.dtype else self.xp.astype(part, old.dtype)
        else:
            self.arrays[tid] = self.made(updatable(old + (part if part.dtype == old.dtype
                                                          else self.xp.astype(part, old.dtype))))
            self.mine.add(tid)

    # -- bookkeeping -----------------------------------------------------------------------------
    def made(self, array: Any) -> Any:
        """Count an array this backward made (added to the device's count once the backward
        succeeded, so a failed one changes nothing), and return it."""
        self.fresh += 1
        self.fresh_bytes += self.nbytes_of(array)
        return array

    def fill(self, tid: int, rule: Callable, shape: tuple) -> None:
        """The rule's result for ``tid`` written into its zeroed buffer (``alloc_grads``, numpy and
        CuPy), which then is what was found for ``tid``: a rule that can (a matmul) writes into it,
        an un-broadcast sums into it; otherwise the result is copied in. The backward of a
        preallocated MLP step (784-256-256-10, batch 64) then makes no array for any parameter's
        gradient: 5 arrays (0.26 MB) instead of 11 (1.34 MB)."""
        rec, g, buf = self.rec, self.g, self.held[tid]
        if getattr(rule, "fills", False):
            rule(g, *rec.saved, out=buf)
        else:
            gi = rule(g, *rec.saved)
            if gi is not g:
                self.made(gi)
            if gi.shape == shape:
                buf[...] = gi
            else:
                unbroadcast(self.xp, gi, shape, out=buf)
        self.buffers.discard(tid)
        self.filled.add(tid)
        self.mine.add(tid)
        self.arrays[tid] = buf
        if anomaly.on:
            anomaly.check_rule(rec, tid, buf, g, self.device)

    def finish(self) -> None:
        """Zero gradients for the operands of the unreached records that got no entry, since every
        operand of a recorded op gets one (with a leaf set, only leaves are kept). The search ends
        once each of them has one."""
        lacking = set().union(*(rec.inputs for rec in self.unreached)) if self.leaves is None else set(self.leaves)
        lacking.difference_update(self.arrays, self.held, (None,))
        for rec in self.unreached:
            if lacking.isdisjoint(rec.inputs):
                if not lacking:
                    return
                continue
            for tid, shape in zip(rec.inputs, rec.shapes):
                if tid in lacking:
                    place = self.device._placement()
                    self.arrays[tid] = self.made(self.xp.zeros(shape, dtype=rec.dtype, **place))
                    lacking.discard(tid)

    def add_to(self, grads: Gradients, device: Any) -> None:
        """Add what was found into ``grads`` (the merged tape's entries)."""
        for tid in self.filled:
            grads.filled(tid)
        for tid, arr in self.arrays.items():
            if tid in self.filled:
                continue  # already the tape's own entry
            if tid not in grads._arrays and tid in self.mine:
                grads._arrays[tid] = arr
                grads._owned.add(tid)
            else:
                grads.accumulate(tid, arr, device)
        device.allocations += self.fresh
        device.allocated_bytes += self.fresh_bytes

    def check_held(self) -> None:
        """``ShapeError``, with nothing changed, for an entry the tapes held (a ``Gradients`` given to
        a tape) whose shape is not that of the gradient found for its tensor: summed, it would fail
        once the tapes were drained, or broadcast into a gradient of another shape."""
        for tid, held in self.held.items():
            got = self.arrays.get(tid)
            if got is not None and tid not in self.filled and tuple(held.shape) != tuple(got.shape):
                self.undo()
                raise ShapeError(f"the gradient entry of {label(tid)} that its tape held has shape "
                                 f"{tuple(held.shape)}, but {label(tid)} has {tuple(got.shape)}: the Gradients given "
                                 f"to the tape hold another tensor's entry. Nothing changed; give the tape "
                                 f"model.alloc_grads(), or Gradients of this tensor's backward.")

    def undo(self) -> None:
        """Zero the buffers rules wrote into again: the tapes' entries are as they were."""
        for tid in self.filled:
            self.held[tid][...] = 0


def _wanted(records: Sequence[Record], leaves: frozenset[int] | None) -> set[int]:
    """The ids whose gradients the rules compute: without a leaf set, every operand's. With one,
    the leaves' and the records' outputs' (those on the way to a leaf), and the gradient of a
    record's output is let go of once all of it arrived (a backward through 12 tanh ops of
    256 x 256 then holds at most 3 gradient arrays at once, not 13). An operand that no record made
    and that is no leaf (an input batch, a constant) would be dropped at the end anyway, so its rule
    is not run: the benchmarks' MLP step (W2, batch 64) skips the gradient of its input batch, its
    largest matmul, and runs 1.2 times as fast."""
    if leaves is None:
        return set().union(*(rec.inputs for rec in records))
    wanted = {rec.out for rec in records}
    wanted.update(leaves)  # in place: a long tape's set is not copied
    return wanted


def _rule_error(rec: Record | None, tid: int | None, err: Exception) -> BackwardError:
    what = (f"the backward rule of `{rec.line()}` for its operand {label(tid)}" if rec is not None and tid is not None
            else f"backward at `{rec.line()}`" if rec is not None else "backward")
    return BackwardError(f"{what} raised {type(err).__name__}: {err}. Nothing changed: every tape and gradient "
                         f"is as it was before this backward, so fix the cause and call backward again.")


def _tape_of(out: Any) -> Tape:
    if not isinstance(out, Tensor):
        raise BackwardError(f"backward takes tensors, got {type(out).__name__}")
    tape = out.tape
    if tape is None:
        raise BackwardError(f"{out.label} carries no tape, so nothing was recorded for it. Trace an input first: "
                            f"x.trace() (or x.trace(tk.UnionTape())), then compute the output from it.")
    tape._live()
    rec = out._record
    if rec is not None and rec.home is None and rec.consumed_by:
        raise _let_go_error(out, tape, rec.consumed_by)
    return tape


def _let_go_error(out: Tensor, tape: Tape, by: Later) -> TapeConsumedError:
    """The error of a backward on ``out``, whose records the backward ``by`` let go, in the words
    of the pictures (`tapekit.ids`): it drained a shared tape, which records again, and names it
    when ``out`` holds that tape; it consumed an OwnedTape."""
    if tape.moves:
        return consumed_error(f"{out.label}'s OwnedTape", by)
    store = tape._store()
    if store._drained is by:
        what = (f"tape {store.label} was drained by {by}, which let go of {out.label}'s records "
                f"(tape {store.label} records again, but not them)")
    else:
        what = f"{out.label}'s records were drained by {by}"
    return TapeConsumedError(f"{what}. {KEEP_RECORDS}")


def _seeds(outputs: list[Any], seeds: Sequence[Any] | None) -> list[Any]:
    """The seed of each output, checked, as an array of its shape, dtype and device."""
    return [_seed(out, seed) for out, seed in zip(outputs, _given_seeds(outputs, seeds))]


def _given_seeds(outputs: list[Any], seeds: Sequence[Any] | None) -> list[Any]:
    """One seed per output, as given (``None`` for each, where ``seeds`` is)."""
    if not outputs:
        raise BackwardError("tk.backward([]) got no outputs; pass the tensors to differentiate, e.g. "
                            "tk.backward([loss1, loss2])")
    if seeds is None:
        return [None] * len(outputs)
    if not isinstance(seeds, (list, tuple)):
        raise BackwardError(f"seeds takes one seed per output, as a list: tk.backward([out], seeds=[seed]), got a "
                            f"{type(seeds).__name__}")
    if len(seeds) != len(outputs):
        raise BackwardError(f"got {len(seeds)} seeds for {len(outputs)} outputs; give one per output "
                            f"(None for a one-value output)")
    return list(seeds)


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
    elif device_array_as_is(seed, xp):
        data = seed
    else:
        data = out.device.from_numpy(host_floats(seed, f"the seed for {out.label}", DTypeError))
    if tuple(data.shape) != out.shape:
        raise ShapeError(f"the seed for {out.label} has shape {tuple(data.shape)} but the output has shape "
                         f"{out.shape}; give a seed of the output's shape")
    return xp.astype(data, out.dtype)
