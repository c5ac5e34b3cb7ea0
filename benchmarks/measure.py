"""Timing and peak memory, always against a baseline measured in the same run.

Contenders of one case run interleaved (floor, then each contender, repeat after repeat), so a
background load that comes and goes slows them alike, and each figure is a ratio to the floor of
the same repeat.
"""

from __future__ import annotations

import functools
import gc
import importlib.util
import statistics
import time
import tracemalloc
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence


@dataclass
class Contender:
    """One way to compute a case: ``run(state)`` does the whole step once and returns the arrays
    to check against the floor's (the gradients, in the case's order). ``setup()`` makes a fresh
    ``state`` before each run, untimed (``None``: no state). A contender with ``skipped`` set is not
    run: the report gives the reason instead of a figure."""

    name: str
    run: Callable[..., Any] | None
    memory: bool = True  # False where tracemalloc cannot see the allocations (PyTorch's C++ heap)
    setup: Callable[[], Any] | None = None
    first_call: float | None = None  # seconds the first run took, where it differs from the rest (a compiler's)
    skipped: str = ""

    def prepare(self) -> Callable[[], Any]:
        """A fresh state made now, and the run bound to it: a call of what this returns is one run
        (without ``setup``, the run itself)."""
        return self.run if self.setup is None else functools.partial(self.run, self.setup())

    def once(self) -> Any:
        """One run with a fresh state, whole (for checks and warm-ups)."""
        return self.prepare()()


def compiled(name: str, step: Callable[[], Any], memory: bool = True) -> Contender:
    """A contender whose first run records or compiles its program (``tk.compile``, ``jax.jit``,
    ``torch.compile``: timed apart, as ``first_call``) and whose later runs replay it."""
    contender = Contender(name, step, memory=memory)

    def run() -> Any:
        if contender.first_call is None:
            start = time.perf_counter()
            result = step()
            contender.first_call = time.perf_counter() - start
            return result
        return step()

    contender.run = run
    return contender


def fusions() -> list[bool]:
    """The compiled contenders to measure: unfused, and fused where numba is installed."""
    return [False] + ([True] if importlib.util.find_spec("numba") is not None else [])


def compiled_name(fuse: bool) -> str:
    """``tapekit compiled``, or ``tapekit fused`` for ``tk.compile(fn, fuse=True)``."""
    return "tapekit fused" if fuse else "tapekit compiled"


@dataclass
class Case:
    """One workload at one size: the contenders (the floor first) and how to show its times."""

    workload: str  # "W1"
    name: str  # what is computed, in words
    short: str  # a label for the plot: "batch 64"
    contenders: list[Contender]
    unit: str = "ms"  # "ms", "µs/op", ...
    per: float = 1.0  # a time is shown as seconds / per * scale
    scale: float = 1e3
    memory: bool = False  # also measure peak memory
    time: bool = True  # False: measure peak memory only
    collector: bool = True  # False: Python's cyclic garbage collector is paused while a run is timed

    def shown(self, seconds: Spread) -> float:
        """The median of ``seconds`` in the case's unit."""
        return seconds.median / self.per * self.scale


@dataclass
class Spread:
    """Median, min and max of some repeats."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> "Spread":
        return cls(statistics.median(values), min(values), max(values))


@dataclass
class Result:
    """What one contender did on one case: its time (seconds per step) and its time relative to
    the floor, per repeat; or why it has no figure. ``extra`` holds the garbage collector's share
    of each run (``"collector"``), the peak in bytes (``"peak_bytes"``), and the memory result of a
    timed case that also measured memory (``"memory"``)."""

    case: str
    contender: str
    seconds: Spread | None = None
    ratio: Spread | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def first_line(err: BaseException, width: int = 80) -> str:
    """The error's type and the first line of its message, cut to ``width`` characters."""
    return f"{type(err).__name__}: {(str(err).splitlines() or [''])[0][:width]}"


def failure(err: BaseException) -> str:
    """The note of a contender that raised ``err``."""
    return f"failed: {first_line(err)}"


class CollectorClock:
    """Seconds Python's cyclic garbage collector ran while this clock was installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._start

    def __enter__(self) -> "CollectorClock":
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        gc.callbacks.remove(self)


def _timed(c: Contender, collector: bool) -> tuple[float, float]:
    """Seconds one run of ``c`` took, and how many of them the garbage collector ran; with
    ``collector=False`` the collector is paused during the run."""
    step = c.prepare()
    if not collector:
        gc.disable()
    try:
        with CollectorClock() as clock:
            start = time.perf_counter()
            step()
            seconds = time.perf_counter() - start
    finally:
        gc.enable()
    return seconds, clock.seconds


def time_interleaved(case: str, contenders: Sequence[Contender], repeats: int, collect: bool = True,
                     collector: bool = True) -> list[Result]:
    """Time every contender ``repeats`` times after one warm-up, interleaved; the first contender
    is the floor. A contender that raises is reported with its error instead of a time.
    ``collect``: run the garbage collector before each round, so no contender pays for another's
    garbage. ``collector=False``: pause the collector while a run is timed. The share of each run
    that the collector took is kept in ``extra["collector"]``."""
    results = {c.name: Result(case, c.name) for c in contenders}
    live = []
    for c in contenders:
        try:
            c.once()  # warm-up
            live.append(c)
        except Exception as err:  # a peer that cannot run this case is reported, not guessed
            results[c.name].note = failure(err)
    if not live or live[0] is not contenders[0]:
        raise RuntimeError(f"{case}: the floor {contenders[0].name} failed: {results[contenders[0].name].note}")
    times: dict[str, list[tuple[float, float]]] = {c.name: [] for c in live}
    for _ in range(repeats):
        if collect:
            gc.collect()
        for c in live:
            times[c.name].append(_timed(c, collector))
    floor = [t for t, _ in times[live[0].name]]
    for c in live:
        seconds = [t for t, _ in times[c.name]]
        results[c.name].seconds = Spread.of(seconds)
        results[c.name].ratio = Spread.of([t / f for t, f in zip(seconds, floor)])
        results[c.name].extra["collector"] = Spread.of([g / t for t, g in times[c.name]])
        if c.first_call is not None:
            results[c.name].extra["first_call"] = c.first_call
    return [results[c.name] for c in contenders]


def peak_bytes(run: Callable[[], Any], collect: bool = True) -> int:
    """The most memory ``run()`` held at once beyond what was allocated before it, as tracemalloc
    sees it (Python objects and numpy arrays; not PyTorch's own allocator)."""
    if collect:
        gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        result = run()
        _, peak = tracemalloc.get_traced_memory()
        del result
    finally:
        tracemalloc.stop()
    return peak - before


def memory_ratios(case: str, contenders: Sequence[Contender], collect: bool = True) -> list[Result]:
    """Peak memory of each contender (after a warm-up run) and its ratio to the floor's (the first
    contender, which must succeed)."""
    results = []
    floor = None
    for c in contenders:
        result = Result(case, c.name)
        if not c.memory:
            result.note = "not measured: its allocator is invisible to tracemalloc"
        else:
            try:
                c.once()
                peak = peak_bytes(c.once, collect)
            except Exception as err:
                if floor is None:
                    raise
                result.note = failure(err)
            else:
                floor = peak if floor is None else floor
                result.extra["peak_bytes"] = peak
                result.ratio = Spread(peak / floor, peak / floor, peak / floor)
        results.append(result)
    return results
