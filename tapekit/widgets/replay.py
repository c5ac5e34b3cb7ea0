"""Replaying a small program step by step under one tape policy.

A program is a plain function written once against a tape factory ``tape`` (``tape()`` gives a
new tape of the chosen policy; under ``"global"`` every call gives the one ``GlobalTape`` and the
program runs inside its ``with`` block), so one program runs under every policy:

    def program(tape):
        dev = tk.Cpu()
        x = dev.tensor([1., 2.]).trace(tape())
        y = dev.tensor([4., 5.]).trace(tape())
        z = x + y

The program runs under ``sys.settrace``; step ``i`` is the state right after the ``i``-th line of
the program's own frame ran, with its local tensors. Each replay is a fresh run, stopped there, and
a program of its own for the pictures (`tapekit.viz.palette`): every run letters its tapes alike.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..errors import InvalidArgumentError
from ..history import history, live_store
from ..ids import label, name_of, set_name
from ..tapes import ArcTape, GlobalTape, OwnedTape, UnionTape
from ..tensor import Tensor
from ..viz.palette import replayed_run

POLICIES = ("owned", "arc", "union", "global")
_CLASSES = {"owned": OwnedTape, "arc": ArcTape, "union": UnionTape}


class _Stop(BaseException):
    """Raised from the tracer to stop a replay at its step (a BaseException: programs don't catch it)."""


@dataclass
class Moment:
    """A program stopped right after its ``step``-th line: that line, its local tensors, what it
    raised or warned so far."""

    step: int
    lineno: int | None
    line: str
    tensors: dict[str, Tensor]
    error: str | None = None
    warnings: list[str] = field(default_factory=list)

    def outputs(self) -> list[Tensor]:
        """The local tensors no op has read yet: the ends of the program's DAG so far."""
        seen: set[int] = set()
        unique = [t for t in self.tensors.values() if not (t.id in seen or seen.add(t.id))]
        read = {tid for rec in history(unique) for tid in rec.inputs}
        return [t for t in unique if t.id not in read]

    def name(self, tensor: Tensor) -> str:
        return next((k for k, t in self.tensors.items() if t.id == tensor.id), label(tensor.id))


def tape_factory(policy: str) -> tuple[Callable[[], Any], contextlib.AbstractContextManager]:
    """The ``tape`` a program gets under ``policy``, and the block it runs in."""
    if policy == "global":
        tape = GlobalTape()
        return (lambda: tape), tape
    if policy not in _CLASSES:
        raise InvalidArgumentError(f"unknown tape policy {policy!r}; choose one of {', '.join(POLICIES)}")
    return _CLASSES[policy], contextlib.nullcontext()


class Replay:
    """A program under one policy: its steps, the lines they ran, and which steps merged two tapes."""

    def __init__(self, program: Callable[[Callable[[], Any]], Any], policy: str) -> None:
        if not callable(program):
            raise InvalidArgumentError(f"a program is a function taking a tape factory, got {type(program).__name__}")
        self.program = program
        self.policy = policy
        self._source = _source_lines(program)
        self.lines: list[int] = []
        self.merges: list[int] = []
        self._carried: dict[int, int] = {}
        self._records: set[int] = set()
        last = self.run(None, self._survey)
        self.error = last.error

    @property
    def steps(self) -> int:
        return len(self.lines)

    def line(self, lineno: int | None) -> str:
        first, lines = self._source
        if lineno is None:
            return ""
        if first and 0 <= lineno - first < len(lines):
            return lines[lineno - first].strip()
        return f"line {lineno}"

    def run(self, stop: int | None, visit: Callable[[Moment], None] | None = None) -> Moment:
        """A fresh run stopped right after step ``stop`` (``None``: to the end); ``visit`` sees
        every step on the way."""
        code = getattr(self.program, "__code__", None)
        ran: list[int] = []
        last: Moment | None = None

        def finished(frame: Any, stopping: bool) -> None:
            nonlocal last
            moment = last = Moment(len(ran), ran[-1], self.line(ran[-1]), _tensors(frame.f_locals))
            if visit is not None:
                visit(moment)
            if stopping and moment.step == stop:
                raise _Stop

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                if ran:
                    finished(frame, True)
                ran.append(frame.f_lineno)
            elif event == "return" and ran:
                finished(frame, False)
            return local

        def calls(frame: Any, event: str, arg: Any) -> Any:
            return local if frame.f_code is code else None

        error = None
        with replayed_run(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            factory, block = tape_factory(self.policy)
            with _traced(calls):
                try:
                    with block:
                        self.program(factory)
                except _Stop:
                    pass
                except Exception as err:  # the program's own error is part of what it shows
                    where = f"`{self.line(ran[-1])}`" if ran else "the program"
                    error = f"{where} raised {type(err).__name__}: {err}"
        if last is None:
            return Moment(0, None, "", {}, error, [str(w.message) for w in caught])
        last.error = error
        last.warnings = [str(w.message) for w in caught]
        return last

    def _survey(self, moment: Moment) -> None:
        """Note a step of the first run: its line, and whether an op merged two tapes."""
        self.lines.append(moment.lineno)
        tensors = list(moment.tensors.values())
        records = history(tensors)
        carried = {}
        for t in tensors:
            store = live_store(t)
            if store is not None:
                carried.setdefault(t.id, store._born)
        new = [rec for rec in records if rec.id not in self._records]
        if any(len({self._carried[t] for t in rec.inputs if t in self._carried}) > 1 for rec in new):
            self.merges.append(moment.step)
        self._records.update(rec.id for rec in records)
        self._carried = carried


def _tensors(local_vars: dict[str, Any]) -> dict[str, Tensor]:
    """The tensors among a frame's locals (also inside lists and tuples), named after their variables."""
    found: dict[str, Tensor] = {}
    for key, value in local_vars.items():
        if isinstance(value, Tensor):
            found[key] = value
        elif isinstance(value, (list, tuple)):
            found.update((f"{key}[{i}]", v) for i, v in enumerate(value) if isinstance(v, Tensor))
    for key, value in found.items():
        if name_of(value.id) is None:
            set_name(value.id, key)  # so tapekit's own messages about this run say x, not #12
    return found


def _source_lines(program: Any) -> tuple[int, list[str]]:
    try:
        lines, first = inspect.getsourcelines(program)
    except (OSError, TypeError):
        return 0, []
    return first, lines


@contextlib.contextmanager
def _traced(tracer: Callable) -> Iterator[None]:
    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(previous)
