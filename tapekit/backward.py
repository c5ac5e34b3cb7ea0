"""The backward engine: run a tape's records newest-first, iteratively, accumulating gradients."""

from __future__ import annotations

import sys
import warnings
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .devices import is_floating
from .errors import BackwardError, DeviceMismatchError, DTypeError, IncompleteTapeWarning, ShapeError, TapeConsumedError
from .gradients import Gradients
from .history import Coverage, coverage, store_at
from .ops.core import unbroadcast
from .tapes.base import Record, Tape, consumed_error
from .tapes.merge import check_one_policy, merge_tapes
from .tensor import Tensor


def backward(outputs: Any, seeds: Sequence[Any] | None = None, retain: bool = False) -> Gradients:
    """Gradients of several outputs at once, summed, as if one loss were their sum.

    The outputs' tapes are merged first, so every record they hold runs once. ``seeds`` gives the
    starting gradient of each output (``None`` for a one-value output). ``retain=True`` keeps the
    records for another backward; otherwise each policy drains its tape as the design says.
    """
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    seeds = _seeds(outputs, seeds)
    tapes = [_tape_of(out) for out in outputs]
    check_one_policy(outputs, tapes, "tk.backward")
    names = ", ".join(out.label for out in outputs)
    stores = {tape._store() for tape in tapes}
    cov = Coverage([]) if _holds_history(outputs, stores) else coverage(outputs, stores)
    if not cov.complete:
        if not tapes[0].allows_partial:
            raise TapeConsumedError(cov.summary(names))
        warnings.warn(cov.summary(names), IncompleteTapeWarning, stacklevel=_caller_level())
    tape = merge_tapes(tapes, "backward")
    records, grads = tape._take(retain)
    grads._why.update(cov.missed)
    grads._partial |= cov.incomplete | cov.missed.keys()  # a missed tensor may still get a zero entry elsewhere
    grads._ran = tape._store()._ref
    by = None if retain else f"the backward on {names}"
    _run(records, grads, outputs, seeds, by)
    if not retain:
        tape._after_backward(outputs, by)
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


def _run(records: list[Record], grads: Gradients, outputs: Sequence[Tensor], seeds: Sequence[Any],
         by: str | None) -> None:
    """Run the records newest-first, each rule mapping its output's gradient to an operand's.

    With a leaf set, work whose result the end of backward would drop is skipped: an operand that
    no record of this backward made and that is not a leaf (an input batch, a constant) gets no
    gradient, and an output's entry is let go as soon as the record that made it has run. ``by``
    (the backward's name; ``None`` to retain) marks each record consumed once it ran, freeing what
    it saved.
    """
    device = outputs[0].device
    xp, count, arrays, accumulate = device.xp, device.count, grads._arrays, grads.accumulate
    get, owned, nbytes_of = arrays.get, grads._owned, device.nbytes_of
    fresh, fresh_bytes = 0, 0  # arrays the rules made, counted on the device at the end
    clean = grads._clean if device.takes_out else ()  # ids of zeroed buffers a rule may write into
    inplace = owned if device.takes_out else ()  # ids of buffers to add into in place (none clean past `clean`)
    leaves = grads.leaves
    wanted = None  # with a leaf set: the ids whose gradients are of use (the rest is dropped at the end)
    if leaves is not None:
        wanted = {rec.out for rec in records}
        wanted.update(leaves)  # in place: a long tape's set is not copied
    for out, seed in zip(outputs, seeds):
        accumulate(out.id, seed, device)
    for rec in reversed(records):
        rules, saved = rec.rules, rec.saved
        if by is not None:
            rec.rules = rec.saved = rec.home = None
            rec.consumed_by = by
        g = get(rec.out)
        if g is None:  # not on the way to an output: its operands still get (zero) entries
            for tid, shape in zip(rec.inputs, rec.shapes):
                if tid is not None and tid not in arrays and (leaves is None or tid in leaves):
                    arrays[tid] = count(xp.zeros(shape, dtype=rec.dtype, **device._placement()))
            continue
        for tid, shape, rule in zip(rec.inputs, rec.shapes, rules):
            if rule is None or (wanted is not None and tid not in wanted):
                continue
            if tid in clean:
                _write_into_buffer(grads, tid, rule, g, saved, shape, device)
                continue
            gi = rule(g, *saved)
            if gi.shape != shape:
                gi = unbroadcast(xp, gi, shape)
            if gi is not g:
                fresh += 1
                fresh_bytes += nbytes_of(gi)
            old = get(tid)  # Gradients.accumulate's two common cases, inline on the hot path
            if old is None:
                arrays[tid] = gi
            elif tid in inplace and old.dtype == gi.dtype:
                old += gi
            else:
                accumulate(tid, gi, device)
        if leaves is not None and rec.out not in leaves:  # used, and no leaf: let it go now
            del arrays[rec.out]
            if rec.out in owned:
                grads._disown(rec.out)
    device.allocations += fresh
    device.allocated_bytes += fresh_bytes


def _write_into_buffer(grads: Gradients, tid: int, rule: Callable, g: Any, saved: tuple, shape: tuple,
                       device: Any) -> None:
    """The gradient of operand ``tid``, whose entry is a zeroed preallocated buffer: a rule that
    can write into it does, an un-broadcast sums into it; otherwise the gradient is added to it."""
    buf = grads._arrays[tid]
    if getattr(rule, "fills", False):
        rule(g, *saved, out=buf)
    else:
        gi = rule(g, *saved)
        if gi is not g:
            device.count(gi)
        if gi.shape == shape:
            grads.accumulate(tid, gi, device)
            return
        unbroadcast(device.xp, gi, shape, out=buf)
    grads.filled(tid)


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
