"""Inspection that explains: which tapes exist behind some tensors, and what a backward on an
output will see of its history."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from .errors import OperandError
from .history import Coverage, coverage, history, home_of, live_store, name_tapes, plural, where
from .ids import label, label_all, letter_all
from .tapes.base import Tape
from .tensor import Tensor


@dataclass(frozen=True)
class TapeInfo:
    """One live tape: its label and policy, and what it holds right now."""

    label: str
    policy: str
    records: int
    grad_entries: int
    nbytes: int
    leaves: str
    tape: Tape
    state: str = ""

    def row(self) -> tuple[str, ...]:
        return (self.label, self.policy, str(self.records), str(self.grad_entries), f"{self.nbytes:,}", self.leaves,
                self.state)


class TapeTable(list):
    """A list of ``TapeInfo`` that prints as a table (and as HTML in Jupyter)."""

    header = ("tape", "policy", "records", "grad entries", "bytes", "leaves", "merges and backwards")

    def __str__(self) -> str:
        rows = [self.header] + [info.row() for info in self]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self.header))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in self.header)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in info.row()) + "</tr>" for info in self)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def tapes(*tensors: Tensor) -> TapeTable:
    """The distinct live tapes behind ``tensors``: those they carry and those holding records of
    their history, in order of first appearance."""
    found: dict[int, Tape] = {}
    for t in tensors:
        _tensor(t, "tk.tapes")
        store = live_store(t)
        if store is not None:
            found.setdefault(id(store), store)
        for rec in reversed(history([t])):
            tape = home_of(rec)
            if tape is not None:
                found.setdefault(id(tape), tape)
    letter_all(birth for tape in found.values() for birth in tape._named())  # named in the order they were made
    return TapeTable(TapeInfo(tape.label, type(tape).__name__, len(tape), len(tape.grads), tape.nbytes,
                              tape._leaves_text(), tape, tape._state()) for tape in found.values())


@dataclass
class Explanation:
    """What a backward on ``output`` will see: its history record by record, where each lives,
    the gradients it will miss, with why, and those it will get only in part."""

    output: Tensor
    tape: str
    coverage: Coverage
    refusal: str = ""  # why a backward on it raises, in words (empty: it runs)

    @property
    def complete(self) -> bool:
        return self.coverage.complete

    @property
    def missing(self) -> dict[str, str]:
        return {label(tid): str(why) for tid, why in sorted(self.coverage.missed.items())}

    @property
    def incomplete(self) -> list[str]:
        """The tensors that will get only part of their gradient: some of their ways to the output
        run through a missed record, others do not."""
        return [label(tid) for tid in sorted(self.coverage.incomplete)]

    def __str__(self) -> str:
        cov = self.coverage
        has = f"{plural(len(cov.records), 'record')}:" if cov.records else "no records."
        lines = [f"{self.output.label} carries {self.tape}; its history has {has}"]
        hidden = {r.id for r in cov.hidden}
        code = [rec.line() for rec in reversed(cov.records)]
        width = max(map(len, code), default=0)
        for line, rec in zip(code, reversed(cov.records)):
            mark = "  missed" if rec.id in hidden else "  seen  "
            lines.append(f"{mark} {line:<{width}}   [{where(rec)}]")
        if self.refusal:
            lines.append(f"A backward on it raises: {self.refusal}")
        elif cov.complete:
            lines.append("A backward on it sees its whole history: every gradient it depends on will be there.")
        else:
            lines.append(f"A backward on it will miss {plural(len(hidden), 'record')}; missing gradients:")
            lines += [f"  - {why}" for why in self.missing.values()] or ["  (none)"]
            if self.incomplete:
                lines.append(f"Incomplete gradients (only some of their ways to {self.output.label} run through a "
                             f"missed record): {', '.join(self.incomplete)}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def _tensor(t: Any, what: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise OperandError(f"{what} takes tensors, such as {what}(loss), got a {type(t).__name__}")
    return t


def explain(output: Tensor) -> Explanation:
    """Which records ``output`` depends on, on which tape each lives, which gradients a backward
    on it will miss and why, and which it will get only in part."""
    tape, store = _tensor(output, "tk.explain").tape, live_store(output)
    past = history([output])
    name_tapes(past, store)
    label_all([output.id, *(t for rec in past for t in (*rec.inputs, rec.out))])  # all it shows, in the order made
    cov = coverage([output], set() if store is None else {store})
    if store is None:
        text = "no tape" if tape is None else f"a spent tape ({tape._spent})"
    else:
        state = store._state()
        text = f"{type(tape).__name__} {tape.label}" + (f" ({state})" if state else "")
    return Explanation(output, text, cov, _refusal(output, store, cov))


def _refusal(output: Tensor, store: Any, cov: Coverage) -> str:
    """Why a backward on ``output`` raises, in words (empty when it runs)."""
    if store is None and output.tape is None:
        return (f"{output.label} carries no tape, so nothing was recorded for it. Trace an input before computing "
                f"it (x.trace()).")
    if store is None:
        return str(output.tape._spent)
    if not cov.complete and not store.allows_partial:
        return f"{type(store).__name__} runs no partial backward. {cov.summary(output.label)}"
    return ""
