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
the program's own frame ran, with its local tensors. Each replay is a fresh run, stopped there;
every run of one program under one policy names its tapes and unnamed tensors alike (`tapekit.ids`).
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
from ..ids import label, name_of, replayed, set_name
from ..tapes import ArcTape, GlobalTape, OwnedTape, UnionTape
from ..tensor import Tensor

#: The policy names the widgets take, each a tape class's (``"global"``: one GlobalTape block around the run).
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


def checked_controls(policy: Any, step: Any) -> None:
    """``InvalidArgumentError`` unless ``policy`` is one of ``POLICIES`` and ``step`` an int (or ``None``)."""
    if policy not in POLICIES:
        raise InvalidArgumentError(f"unknown tape policy {policy!r}; choose one of {', '.join(POLICIES)}")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
        raise InvalidArgumentError(f"step must be a step number (an int), got {step!r}")


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
        steps = _Steps(self, stop, visit)
        error = None
        with replayed((getattr(self.program, "__code__", self.program), self.policy)), \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            factory, block = tape_factory(self.policy)
            with _traced(steps.calls):
                try:
                    with block:
                        self.program(factory)
                except _Stop:
                    pass
                except Exception as err:  # the program's own error is part of what it shows
                    where = f"`{self.line(steps.ran[-1])}`" if steps.ran else "the program"
                    error = f"{where} raised {type(err).__name__}: {err}"
        last = steps.last or Moment(0, None, "", {})
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


class _Steps:
    """The tracer of one run: it notes each line of the program's frame, and after each line the
    moment it ends (``last``), shown to ``visit``; it stops the run after step ``stop``."""

    def __init__(self, replay: Replay, stop: int | None, visit: Callable[[Moment], None] | None) -> None:
        self.replay, self.stop, self.visit = replay, stop, visit
        self.code = getattr(replay.program, "__code__", None)
        self.ran: list[int] = []
        self.last: Moment | None = None
        self.named: dict[str, int] = {}  # the names this run gave its tensors -> their ids

    def calls(self, frame: Any, event: str, arg: Any) -> Any:
        return self.local if frame.f_code is self.code else None

    def local(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            if self.ran:
                self.finished(frame, True)
            self.ran.append(frame.f_lineno)
        elif event == "return" and self.ran:
            self.finished(frame, False)
        return self.local

    def finished(self, frame: Any, stopping: bool) -> None:
        ran = self.ran
        moment = self.last = Moment(len(ran), ran[-1], self.replay.line(ran[-1]), _tensors(frame.f_locals, self.named))
        if self.visit is not None:
            self.visit(moment)
        if stopping and moment.step == self.stop:
            raise _Stop


def _tensors(local_vars: dict[str, Any], named: dict[str, int]) -> dict[str, Tensor]:
    """The tensors among a frame's locals (also inside lists and tuples), named after their
    variables; a variable that held another tensor of this run before names its new one ``h_2``
    (``named``: the names given so far), so that no two tensors share a name."""
    found: dict[str, Tensor] = {}
    for key, value in local_vars.items():
        if isinstance(value, Tensor):
            found[key] = value
        elif isinstance(value, (list, tuple)):
            found.update((f"{key}[{i}]", v) for i, v in enumerate(value) if isinstance(v, Tensor))
    for key, value in found.items():
        if name_of(value.id) is None:  # so tapekit's own messages about this run say x, not t12
            name, n = key, 1
            while named.get(name, value.id) != value.id:
                n += 1
                name = f"{key}_{n}"
            set_name(value.id, name)
        named.setdefault(name_of(value.id), value.id)
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
