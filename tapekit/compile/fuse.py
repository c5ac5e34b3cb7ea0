"""Fusion: ``tk.compile(fn, fuse=True)`` turns the recorded program's runs of elementwise calls into
loops compiled to machine code.

A run (``runs.py``) is a sequence of consecutive elementwise calls (arithmetic, comparisons,
``tanh``, ``exp``, ``where``, ...) whose results have one shape, their operands broadcasting to it.
Each becomes loops over the elements (``loops.py``) in which every call is one scalar statement and
every intermediate a scalar: the arrays numpy would allocate and walk once per call are never made.
Reductions, matrix products and indexing stay numpy calls between the runs. numba, the optional
extra ``tapekit[fuse]``, compiles the loops (``jit.py``); ``step.fused_source`` shows them, each
statement's comment naming its record, with the program that calls them.

Compile time. numba's grows faster than a loop's body (measured on a 2-core machine: loops of
about 270 statements 0.35 s, 540 statements 0.9 s, 810 statements 1.9 s), so a run is cut into
loops of ``runs.PIECE`` statements, which hand their values on through one buffer per dtype, and a
program fuses at most ``runs.LIMIT`` statements (a few seconds of compiling): the runs past the
limit stay unfused, and ``repr(step)`` says so. A run numba cannot compile stays unfused too.

Fused equals unfused to rounding, not bitwise: numpy evaluates ``tanh``, ``exp`` and ``log`` with
its own vectorised routines, numba with the C library's, and the two may differ in the last bit; and
a float32 statement with a Python number or a float64 operand is computed in float64 by numba and
rounded once, where numpy computes it in float32.
"""

from __future__ import annotations

from typing import Any, Callable

from .jit import compile_loops, loops_module_source
from .loops import Loops
from .runs import Run, plan
from .source import Writer


class Fused:
    """The fused program: its source (loops, wrappers, program), its function, its runs."""

    def __init__(self, source: str, run: Callable, runs: list[Run], over: int) -> None:
        self.source, self.run, self.runs, self.over = source, run, runs, over

    @property
    def seconds(self) -> float:
        """Seconds spent compiling the loops (numba's time; loaded from its cache: far less)."""
        return sum(r.seconds for r in self.runs)

    def summary(self) -> list[str]:
        """A line per run, and one for the calls the limit left unfused: what ``repr(step)`` shows."""
        lines = []
        for r in self.runs:
            what = f"fused run {r.number}: {len(r.steps)} elementwise calls over shape {r.shape}"
            lines.append(f"{what} stays unfused: {r.failed}" if r.failed else
                         f"{what} in {r.pieces} loop{'s' if r.pieces != 1 else ''}, compiled in {r.seconds:.2f} s")
        if self.over:
            lines.append(f"{self.over} elementwise calls stay unfused: past the limit of a program's fused calls")
        return lines or ["no run of elementwise calls to fuse: the fused program is the unfused one"]


def fuse_program(writer: Writer, kept: list) -> Fused:
    """The program of ``kept`` with its runs as compiled loops (a run that fails to compile stays unfused)."""
    items, runs, over = plan(kept, writer.rec.values, writer.needed)
    space: dict[str, Any] = {}
    texts: list[str] = []
    final: list = []
    for item in items:
        if type(item) is not Run:
            final.append(item)
        elif _compile_run(item, writer, space, texts):
            final.append(item)
        else:
            final += item.steps
    source, run = writer.write(final, space, heading=f"; fused: {sum(1 for r in runs if not r.failed)} runs")
    return Fused("\n\n\n".join(texts + [source]), run, runs, over)


def _compile_run(run: Run, writer: Writer, space: dict, texts: list[str]) -> bool:
    """Compile one run's loops into ``space`` and its source into ``texts``; False where numba failed."""
    loops = Loops(run, writer.names, writer.rec.values, writer.comment)
    try:
        compiled, run.seconds = compile_loops(loops)
    except Exception as err:  # numba's typing or lowering errors have no common class
        run.failed = f"numba could not compile it ({type(err).__name__}: {(str(err).splitlines() or [''])[0][:80]})"
        return False
    run.pieces = len(loops.pieces)
    run.line = f"{loops.call_line()}  # fused run {run.number}: {len(run.steps)} calls in {run.pieces} loop{'s' if run.pieces != 1 else ''}"
    space.update(compiled)
    texts.append(loops_module_source(loops, cache=True).split("\n\n", 1)[1] + "\n\n\n" + loops.wrapper_source())
    return True
