"""An output's history (the records it depends on, wherever they live) and what a backward that
runs only some tapes can see of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from .ids import Later, label, label_all, letter_all, tape_name
from .tapes.base import Record, Tape, is_spent, plural


def history(outputs: Sequence[Any]) -> list[Record]:
    """Every record the outputs depend on, newest first (iterative: deep chains are fine)."""
    seen: dict[int, Record] = {}
    stack = [o._record for o in outputs if o._record is not None]
    while stack:
        rec = stack.pop()
        if rec is None or rec.id in seen:
            continue
        seen[rec.id] = rec
        stack.extend(rec.parents)
    return sorted(seen.values(), key=lambda r: r.id, reverse=True)


def home_of(rec: Record) -> Tape | None:
    """The tape that holds ``rec`` now (``None`` once consumed or its tape is gone)."""
    return None if rec.home is None else store_at(rec.home)


def store_at(home: Any) -> Tape | None:
    """The tape that holds the records kept at ``home`` (a record's ``home``), if it lives."""
    tape = home()
    return None if tape is None else tape._store()


def live_store(tensor: Any) -> Tape | None:
    """The tape object a tensor's handle records into, ``None`` when it has none or it is spent."""
    tape = tensor._tape
    return None if tape is None or is_spent(tape) else tape._store()


def where(rec: Record) -> str:
    """Where a record is, in words: its tape's label, or what happened to it."""
    tape = home_of(rec)
    if tape is not None:
        return f"on tape {tape.label}"
    return f"let go by {rec.consumed_by}" if rec.consumed_by else "dropped with its tape"


@dataclass
class Coverage:
    """What a backward over ``stores`` sees of the outputs' history. Its messages (``summary``, and
    why each gradient is missed) are written when first read: a backward whose warning is silenced
    names no tape and no tensor (`tapekit.ids` hands a name out for life)."""

    records: list[Record]
    hidden: list[Record] = field(default_factory=list)  # in the history, not on the tapes run
    missed: dict[int, Later] = field(default_factory=dict)  # tensor id -> why its gradient is missing
    incomplete: set[int] = field(default_factory=set)  # ids whose gradient arrives only in part
    naming: tuple[list[int], list[int]] | None = None  # the tapes (births) and tensors its messages name

    @property
    def complete(self) -> bool:
        return not self.hidden

    def name_all(self) -> None:
        """Letter the tapes and label the tensors its messages name, all at once, in the order they
        were made (`tapekit.ids`), before the first of them is written."""
        if self.naming is not None:
            births, tids = self.naming
            self.naming = None
            letter_all(births)
            label_all(tids)

    def summary(self, outs: str) -> str:
        self.name_all()
        places = sorted({where(r) for r in self.hidden})
        return (f"backward on {outs} cannot see {plural(len(self.hidden), 'record')} of the "
                f"{len(self.records)} in its history ({'; '.join(places)}): {self._losses()}. "
                f"{_advice(self.hidden)}")

    def _losses(self) -> str:
        """``gradients of y will be missing and those of x incomplete``, as far as each applies."""
        missing, partial = _labels(self.missed), _labels(self.incomplete)
        if partial and not missing:
            return f"gradients of {partial} will be incomplete"
        return f"gradients of {missing or 'none'} will be missing" + (f" and those of {partial} incomplete"
                                                                       if partial else "")


def coverage(outputs: Sequence[Any], stores: Iterable[Tape]) -> Coverage:
    """Which records of the outputs' history the tapes ``stores`` hold; which tensors lose their
    gradient because every way from them to the outputs runs through a record that is elsewhere;
    and which get only part of it, because some ways do and others do not."""
    stores = set(stores)
    records = history(outputs)
    hidden = {r.id for r in records if home_of(r) not in stores}
    cov = Coverage(records, [r for r in records if r.id in hidden])
    blocked: dict[int, Record | None] = {o.id: None for o in outputs}  # tensor id -> first hidden record
    for rec in records:  # newest first: every consumer of a tensor comes before its producer
        if rec.out not in blocked:
            continue
        block = blocked[rec.out] or (rec if rec.id in hidden else None)
        passes_part = block is None and rec.out in cov.incomplete  # an incomplete gradient flows on
        for tid in rec.inputs:
            if tid is None:
                continue
            if tid in blocked and (blocked[tid] is None) != (block is None):  # one way blocked, one open
                cov.incomplete.add(tid)
                blocked[tid] = None
            elif tid not in blocked:
                blocked[tid] = block
            if passes_part:
                cov.incomplete.add(tid)
    blocking = {tid: rec for tid, rec in blocked.items() if rec is not None}
    homes = {home_of(r) for r in cov.hidden} - {None}
    let_go_by = [t for r in cov.hidden for t in _let_go_by(r)]
    cov.naming = ([b for tape in homes for b in tape._named()],
                  [*(o.id for o in outputs), *blocking, *cov.incomplete, *let_go_by,
                   *(t for r in blocking.values() for t in (*r.inputs, r.out))])
    cov.missed = {tid: _why(cov, tid, rec) for tid, rec in blocking.items()}
    return cov


def _let_go_by(rec: Record) -> tuple[int, ...]:
    """The outputs of the backward that let ``rec`` go, which its place names (none: it is not let go)."""
    return rec.consumed_by.tids if rec.consumed_by else ()


def _why(cov: Coverage, tid: int, rec: Record) -> Later:
    """Why ``tid`` has no gradient, as things are now (where ``rec`` lives, who holds its tape),
    written when first read."""
    tape = home_of(rec)
    if tape is not None:
        kind, parts, records = type(tape).__name__, tuple(tape._parts()), tape.records
        holder = records[-1].out if records else None
        place = lambda: (f"lives on {kind} {tape_name(parts)}{'' if holder is None else f', held by {label(holder)}'}"
                         ", which this backward does not run")
    else:
        by = rec.consumed_by
        place = lambda: f"was let go by {by}" if by else "was dropped with its tape"
    advice = _advice([rec])

    def write() -> str:
        cov.name_all()
        return f"{label(tid)} has no gradient: the record `{rec.line()}` on its way to the output {place()}. {advice}"

    return Later(write, (tid,))


def name_tapes(records: Iterable[Record], *tapes: Tape | None) -> None:
    """Letter the tapes holding ``records`` (and ``tapes``) in the order they were made, before a
    message names some of them (`tapekit.ids`)."""
    stores = {home_of(rec) for rec in records} | set(tapes)
    letter_all(b for s in stores if s is not None for b in s._named())


def _labels(tids: Iterable[int]) -> str:
    return ", ".join(label(t) for t in sorted(tids))


def _advice(hidden: Sequence[Record]) -> str:
    """What to do about hidden records: a backward let them go, they were dropped with their tape,
    or another tape holds them."""
    if all(home_of(r) is None for r in hidden):
        if not any(r.consumed_by for r in hidden):
            whose = "its tape" if len(hidden) == 1 else "their tapes"
            return (f"Keep a tensor that holds {whose} (a variable) until the backward runs: a tape no tensor "
                    "holds is dropped with its records.")
        return ("Run tk.backward([...]) over all outputs at once, or keep the records for another backward with "
                "backward(retain=True).")
    if any(getattr(home_of(r), "policy", None) == "global" for r in hidden):
        return ("Record the whole computation in one `with tk.GlobalTape()` block: a block opened inside another "
                "records on a tape of its own, which a backward on this one does not run.")
    return "Run tk.backward([...]) over all outputs at once, or use tk.UnionTape() so merged tapes stay one."

