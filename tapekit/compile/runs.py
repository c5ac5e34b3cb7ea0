"""The runs of a program: which of its steps are elementwise, and which consecutive ones, of one
shape after broadcasting, make one run to fuse into loops. A step is elementwise when it is an
arithmetic operator, a comparison, or one of numpy's elementwise functions below, on arrays of
numbers and Python numbers; in place (``g += a``) too, unless the array it writes shares memory with
another the run reads. ``broadcast_to`` is one too (a loop reads an operand where broadcasting puts
it): so the gradient of a sum, broadcast back, joins the run that uses it.
"""

from __future__ import annotations

from typing import Any, Container, Iterator

import numpy as np

from .recorder import Ref, Step

PIECE = 120  # statements per loop: W1's chain at 300 ops compiled in 11 s in loops of 40, 7.4 s of 120, 17 s of 300
LIMIT = 6_000  # statements fused per program: W1's 3,331 compile in 3.7 s; loops that repeat no pattern, ~1 s per 120
SHORTEST = 2  # a run of one call is left to numpy, whose own loop is as fast
VECTORISED = 4_096  # elements from which numpy's own tanh, exp, log, ... (SIMD) beat numba's scalar calls of libm


# numpy's elementwise functions and the scalar statement numba compiles for each ({0}, {1}: operands)
_FUNCTIONS = {name: f"np.{name}({{0}})" for name in (
    "exp", "log", "tanh", "sinh", "cosh", "sin", "cos", "tan", "sqrt", "expm1", "log1p", "log2", "log10",
    "sign", "floor", "ceil", "arctan", "arcsin", "arccos", "isnan", "isfinite", "negative", "square")}
_FUNCTIONS.update({"abs": "abs({0})", "absolute": "abs({0})", "atan": "np.arctan({0})", "asin": "np.arcsin({0})",
                   "acos": "np.arccos({0})", "maximum": "np.maximum({0}, {1})", "minimum": "np.minimum({0}, {1})",
                   "logaddexp": "np.logaddexp({0}, {1})", "multiply": "{0} * {1}", "add": "{0} + {1}",
                   "subtract": "{0} - {1}", "divide": "{0} / {1}", "true_divide": "{0} / {1}",
                   "where": "({1} if {0} else {2})"})
_ARITY = {"where": 3, "maximum": 2, "minimum": 2, "logaddexp": 2, "multiply": 2, "add": 2, "subtract": 2,
          "divide": 2, "true_divide": 2}
_BINARY = {"+", "-", "*", "/", "**", "==", "!=", "<", "<=", ">", ">="}
_COMPARISONS = {"==", "!=", "<", "<=", ">", ">="}
_UNARY = {"-": "-{0}", "+": "+{0}", "abs": "abs({0})"}


def scalar_form(step: Step) -> str | None:
    """The statement ``step`` is as a scalar expression of its operands, or None if it is no
    elementwise call."""
    if step.kwargs:
        return None
    if is_broadcast(step):
        return "{0}"  # a loop reads each element where broadcasting puts it: nothing to compute
    if step.kind in ("binop", "iop") and step.head in _BINARY and len(step.args) == 2:
        return f"{{0}} {step.head} {{1}}"
    if step.kind == "unop" and step.head in _UNARY:
        return _UNARY[step.head]
    if step.kind == "call":
        name = step.head.rsplit(".", 1)[-1]
        form = _FUNCTIONS.get(name)
        if form is not None and len(step.args) == _ARITY.get(name, 1):
            return form
    return None


def is_broadcast(step: Step) -> bool:
    """Whether ``step`` is ``xp.broadcast_to(a, shape)``, whose elements are ``a``'s, broadcast."""
    return step.kind == "call" and step.head.rsplit(".", 1)[-1] == "broadcast_to" and len(step.args) == 2


def operands(step: Step) -> tuple:
    """The values an elementwise step computes with (``broadcast_to``'s shape is none of them)."""
    return step.args[:1] if is_broadcast(step) else step.args


def _gives_bool(step: Step) -> bool:
    """Whether the step may give bools in numba as in numpy."""
    if step.kind == "binop":
        return step.head in _COMPARISONS
    return step.kind == "call" and step.head.rsplit(".", 1)[-1] in ("isnan", "isfinite", "where")


def _is_number(v: Any) -> bool:
    return type(v) in (int, float, bool)


def array_kind(a: Any) -> str | None:
    """``"numpy"`` or ``"cupy"`` for an array whose runs can be fused (numba's loops, CuPy's kernels), else None."""
    if type(a) is np.ndarray:
        return "numpy"
    if type(a).__name__ == "ndarray" and type(a).__module__.split(".")[0] == "cupy":
        return "cupy"
    return None


def _operand_fits(v: Any, values: list, shape: tuple, kind: str) -> bool:
    if _is_number(v):
        return True
    if type(v) is not Ref:
        return False
    a = values[v.slot]
    if not (array_kind(a) == kind or (kind == "numpy" and isinstance(a, np.generic))) or a.dtype.kind not in "biuf":
        return False
    try:
        return np.broadcast_shapes(np.shape(a), shape) == shape
    except ValueError:
        return False


def run_shape(step: Step, values: list) -> tuple | None:
    """The shape of the run ``step`` can belong to (its result's, and whether it is numpy's or CuPy's),
    or None if it cannot be fused."""
    if step.out is None or scalar_form(step) is None:
        return None
    a = values[step.out]
    kind = array_kind(a)
    if kind is None or a.dtype.kind not in "biuf" or (step.asarray and a.ndim):
        return None
    if step.kind == "iop" and (type(step.args[0]) is not Ref or step.args[0].slot != step.out):
        return None
    if (a.dtype.kind == "b" and not _gives_bool(step)) or (step.head == "**" and a.dtype.kind != "f"):
        return None  # numpy's bool + bool is a logical or, numba's an integer sum; int ** int differs too
    if not all(_operand_fits(v, values, a.shape, kind) for v in operands(step)):
        return None
    if is_broadcast(step) and kind != "numpy":
        return None  # CuPy's kernels broadcast their inputs themselves; not written for them
    if kind == "numpy" and a.size >= VECTORISED and step.kind == "call" and "np." in scalar_form(step) \
            and a.dtype.kind == "f":
        return None  # measured on W2 (batch 512): a fused tanh over 512 x 256 made the step 1.6x slower
    return (kind, a.shape)


# -- the plan: which steps make which runs ---------------------------------------------------------------
class Run:
    """One run of elementwise steps over ``shape``, as one item of the program: it reads its
    external slots and writes the slots that later items or the results need."""

    group: Any = None

    def __init__(self, number: int, steps: list[Step], where: tuple, start: int = 0) -> None:
        self.number, self.steps, self.start = number, steps, start  # start: its first step's index in the program
        self.kind, self.shape = where  # "numpy" (numba's loops) or "cupy" (a CuPy kernel), and the shape
        self.group = steps[0].group
        made: set[int] = set()
        self.external: list[int] = []  # slots read from outside, in first-read order
        self.targets: set[int] = set()  # external slots written in place (``g += ...``)
        for s in steps:
            for v in s.args:
                if type(v) is Ref and v.slot not in made and v.slot not in self.external:
                    self.external.append(v.slot)
            if s.kind == "iop" and s.out in self.external:
                self.targets.add(s.out)
            else:
                made.add(s.out)
        self.made = made
        self.outputs: list[int] = []  # made slots read after the run (set by ``plan``)
        self.views: list[int] = []  # outputs that numpy's calls read, as arrays (set by ``fuse``)
        self.read_slots: list[int] = []  # what the program passes in: arrays, earlier runs' buffers
        self.write_slots: list[int] = []  # and what it gets back: the run's buffers, the views
        self.seconds: float = 0.0
        self.pieces = 0
        self.line = ""

    def reads(self) -> Iterator[int]:
        return iter(self.read_slots)

    def writes(self) -> Iterator[int]:
        return iter(self.write_slots)


def plan(kept: list[Step], values: list, needed: list, skip: Container[int] = ()) -> tuple[list, list[Run], int]:
    """``kept`` with its runs of elementwise steps made ``Run`` items (``LIMIT`` steps at most; none
    of those that start at an index in ``skip``), the runs, and how many fusable steps were left
    unfused for the limit."""
    spans = _spans(kept, values)
    last_read = _last_reads(kept, needed)
    items: list = []
    runs: list[Run] = []
    budget, over, at = LIMIT, 0, 0
    for start, end, shape in spans:
        items += kept[at:start]
        at = end
        if start in skip:
            items += kept[start:end]
            continue
        if end - start > budget:
            over += end - start
            items += kept[start:end]
            continue
        budget -= end - start
        run = Run(len(runs) + 1, kept[start:end], shape, start)
        run.outputs = [s for s in dict.fromkeys(x.out for x in run.steps)
                       if s in run.made and last_read.get(s, -1) >= end]
        runs.append(run)
        items.append(run)
    return items + kept[at:], runs, over


def _spans(kept: list[Step], values: list) -> list[tuple[int, int, tuple]]:
    """(start, end, shape) of each run of at least ``SHORTEST`` consecutive fusable steps of one shape."""
    spans, start, shape, memory = [], 0, None, _Memory(values)
    for i, step in enumerate(kept + [None]):
        now = None if step is None else run_shape(step, values)
        if now is not None and now == shape and memory.admits(step):
            continue
        if shape is not None and i - start >= SHORTEST:
            spans.append((start, i, shape))
        start, shape, memory = i, now, _Memory(values)
        if now is not None and not memory.admits(step):
            shape = None  # it writes in place what it reads under another name: numpy's call, alone
    return spans


class _Memory:
    """What a run being built reads from outside and writes in place, to refuse a step that would make
    it read, under another name, memory it writes (numpy's call would have read it whole first)."""

    def __init__(self, values: list) -> None:
        self.values = values
        self.made: set[int] = set()
        self.outside: set[int] = set()
        self.written: set[int] = set()  # outside arrays written in place

    def admits(self, step: Step) -> bool:
        """Whether ``step`` can join the run (noted if so)."""
        reads = {v.slot for v in step.args if type(v) is Ref and v.slot not in self.made}
        writes = {step.out} - self.made if step.kind == "iop" else set()
        if any(_may_share(self.values[a], self.values[b]) for a in self.written | writes
               for b in (reads - self.outside if a in self.written else reads | self.outside) if a != b):
            return False
        self.outside |= reads
        self.written |= writes
        if step.kind != "iop":
            self.made.add(step.out)
        return True


def _may_share(a: Any, b: Any) -> bool:
    if type(a) is np.ndarray and isinstance(b, (np.ndarray, np.generic)):
        return np.may_share_memory(a, b)
    return True  # a CuPy array: no in-place write into it is fused


def _last_reads(kept: list[Step], needed: list) -> dict[int, int]:
    """The index of the last step that reads each slot (past the end for the program's results)."""
    last = {}
    for i, step in enumerate(kept):
        for slot in step.reads():
            last[slot] = i
    return last | {s: len(kept) for s in needed}
