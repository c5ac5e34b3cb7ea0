"""Fusion: ``tk.compile(fn, fuse=True)`` turns the recorded program's runs of elementwise calls into
loops compiled to machine code.

A run (``runs.py``) is a sequence of consecutive elementwise calls (arithmetic, comparisons,
``tanh``, ``exp``, ``where``, ...) whose results have one shape, their operands broadcasting to it.
Each becomes loops over the elements (``loops.py``) in which every call is one scalar statement and
every intermediate a scalar: the arrays numpy would allocate and walk once per call are never made.
Reductions, matrix products and indexing stay numpy calls between the runs. numba, the optional
extra ``tapekit[fuse]``, compiles the loops (``jit.py``); ``step.fused_source`` shows them, each
statement's comment naming its record, with the program that calls them.

Compile time. numba's grows faster than a loop's body, and each value a loop stores or loads costs
it about four statements' worth (measured on a busy 2-core machine: a scalar loop of 270 statements
0.35 s, of 810 statements 1.9 s; W1's chain at 300 ops, 1,003 calls, 7.4 s in loops of 120
statements, 11 s in loops of 40, 17 s in loops of 300). So a run is cut into loops of ``runs.PIECE``
statements, which hand their values on through buffers. A loop's rows are counted from an argument
and a run's loops start at one point of its pattern, so the loops of a chain are a few sources,
each compiled once: W1's 3,331 statements are 29 loops of 6 sources, compiled in 3.7 s with numba's
cache empty (20 s to 35 s when each loop was a source of its own). A program fuses at most
``runs.LIMIT`` statements: the runs past the limit stay unfused (W4's chains of 10,000 and 100,000
ops), and ``repr(step)`` says so. numba keeps compiled loops on disk (``jit.py``). A run numba
cannot compile stays unfused too.

Fused equals unfused to rounding, not bitwise: numpy evaluates ``tanh``, ``exp`` and ``log`` with
its own vectorised routines, numba with the C library's, and the two may differ in the last bit; and
a float32 statement with a Python number or a float64 operand is computed in float64 by numba and
rounded once, where numpy computes it in float32.
"""

from __future__ import annotations

import time
from typing import Any, Callable


from .cuda import CudaKernel
from .jit import compile_loops, loops_module_source
from .loops import Loops
from .runs import Run, plan
from .source import Built, Source, Writer


class Fused:
    """The fused program: its source (loops, wrappers, program), its function, its runs."""

    def __init__(self, text: Source, run: Callable, runs: list[Run], over: int, failed: list[str]) -> None:
        self.text, self.run, self.runs, self.over, self.failed = text, run, runs, over, failed

    @property
    def source(self) -> str:
        return self.text.read()

    @property
    def seconds(self) -> float:
        """Seconds spent compiling the loops (numba's time; loaded from its cache: far less)."""
        return sum(r.seconds for r in self.runs)

    def summary(self) -> list[str]:
        """A line per run, and one for the calls the limit left unfused: what ``repr(step)`` shows."""
        lines = []
        for r in self.runs:
            made = "one CuPy kernel" if r.kind == "cupy" else f"{r.pieces} loop{'s' if r.pieces != 1 else ''}"
            lines.append(f"fused run {r.number}: {len(r.steps)} elementwise calls over shape {r.shape} in "
                         f"{made}, compiled in {r.seconds:.2f} s")
        lines += self.failed
        if self.over:
            lines.append(f"{self.over} elementwise calls stay unfused: past the limit of a program's fused calls")
        return lines or ["no run of elementwise calls to fuse: the fused program is the unfused one"]


def fuse_program(writer: Writer, kept: list, unfused: Built) -> Fused:
    """The program of ``kept`` with its runs as compiled loops (``unfused``: the program unfused,
    which it is where nothing fuses). A run numba cannot compile stays unfused: the program is
    planned again without it."""
    failed: dict[int, str] = {}
    while True:
        items, runs, over = plan(kept, writer.rec.values, writer.needed, skip=failed)
        _mark_views(items, set(writer.needed))
        texts: list[str] = []
        space = _compile_runs(runs, writer, texts, failed)
        if space is not None:
            break
    if not runs:  # no second program to write and compile (W4's 333,000 calls: seconds)
        return Fused(unfused.text, unfused.run, runs, over, list(failed.values()))
    heading = f"; fused: {len(runs)} run{'s' if len(runs) != 1 else ''}"
    program, run = writer.write(items, unfused.steps, space, heading=heading)
    return Fused(Source(lambda: "\n\n\n".join(texts + [program.read()])), run, runs, over, list(failed.values()))


def _mark_views(items: list, needed: set) -> None:
    """Set each run's ``views``: the values it makes that the program returns or numpy's calls read
    (a later run of its shape reads them from its buffer)."""
    made_by: dict[int, Run] = {}
    viewed: set[int] = set(needed)
    for item in items:
        for slot in _reads(item):
            maker = made_by.get(slot)
            if maker is not None and (type(item) is not Run or (item.kind, item.shape) != (maker.kind, maker.shape)):
                viewed.add(slot)
        if type(item) is Run:
            made_by.update(dict.fromkeys(item.outputs, item))
    for item in items:
        if type(item) is Run:
            item.views = [s for s in item.outputs if s in viewed]


def _reads(item: Any) -> set:
    return set(item.external) if type(item) is Run else set(item.reads())


def _compile_runs(runs: list[Run], writer: Writer, texts: list[str], failed: dict) -> dict | None:
    """The runs' wrappers, compiled (their sources into ``texts``); None where one failed (noted in ``failed``)."""
    space: dict[str, Any] = {}
    shared: dict = {}
    made: dict = {}
    for run in runs:
        try:
            if run.kind == "cupy":
                space.update(_build_kernel(run, writer, texts))
                continue
            loops = Loops(run, writer.names, writer.rec.values, writer.comment, shared)
            compiled, run.seconds = compile_loops(loops, made)
        except Exception as err:  # numba's (and CuPy's) typing and lowering errors have no common class
            failed[run.start] = (f"a run of {len(run.steps)} elementwise calls over shape {run.shape} stays unfused: "
                                 f"numba could not compile it ({type(err).__name__}: "
                                 f"{(str(err).splitlines() or [''])[0][:80]})")
            return None
        _connect(run, loops, writer.names)
        space.update(compiled)
        texts.append(loops_module_source(loops, cache=True).split("\n\n", 1)[1] + "\n\n\n" + loops.wrapper_source())
    return space


def _cupy() -> Any:
    import cupy
    return cupy


def _build_kernel(run: Run, writer: Writer, texts: list[str]) -> dict:
    """A run on the GPU as CuPy's elementwise kernel (compiled by NVRTC on its first call)."""
    start = time.perf_counter()
    kernel = CudaKernel(run, writer.names, writer.rec.values, writer.comment)
    built = kernel.build(_cupy())
    run.seconds, run.pieces = time.perf_counter() - start, 1
    run.views = list(run.outputs)  # no buffers on the GPU: every value read on is an output of the kernel
    run.read_slots, run.write_slots = list(run.external), list(run.outputs)
    run.line = f"{kernel.call_line()}  # fused run {run.number}: {len(run.steps)} calls in one CuPy kernel"
    texts.append(kernel.source())
    return built


def _connect(run: Run, loops: Loops, names: dict) -> None:
    """What the run's line reads and writes, for the program's writer: its buffers get slots of their own."""
    slot_of = {name: slot for slot, name in names.items() if slot < 0}
    for buffer in loops.handed():
        slot_of[buffer] = -len(slot_of) - 1
        names[slot_of[buffer]] = buffer
    run.read_slots = list(loops.passed) + [slot_of[b] for b in loops.read_buffers]
    run.write_slots = [slot_of[b] for b in loops.handed()] + list(run.views)
    run.pieces = len(loops.pieces)
    plural = "s" if run.pieces != 1 else ""
    run.line = f"{loops.call_line()}  # fused run {run.number}: {len(run.steps)} calls in {run.pieces} loop{plural}"
