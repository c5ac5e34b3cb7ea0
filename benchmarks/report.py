"""The results as a markdown table (with the targets and whether each was met) and a plot."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Sequence

from . import merges
from .measure import Case, Result
from .peers import PEERS

Done = Sequence[tuple[Case, list[Result]]]
FLOOR = "numpy floor"
TAPEKIT = "tapekit OwnedTape"  # the policy ``x.trace()`` gives: the one the targets are for
COMPILED = "tapekit compiled"  # the same steps under tk.compile (W1-W4)
COMPILED_LIMITS = {"W1": 1.3, "W3": 1.3}  # W2's depend on the batch, W4's on the length
FUSED = "tapekit fused"  # tk.compile(fn, fuse=True): elementwise runs as numba loops
FUSED_LIMITS = {"W1": 0.1, "W2": 1.0, "W3": 0.3}
FUSED_FIRST_CALL = {"W1": 10.0}  # seconds
FIRST_CALL_PER_OP = 20e-6  # seconds a recorded op of W4's chain may take in the unfused first call


def _first_call(r: Result) -> str:
    seconds = r.extra.get("first_call")
    return "" if seconds is None else f"{seconds * 1e3:,.0f} ms" if seconds < 10 else f"{seconds:,.1f} s"


@dataclass
class Target:
    """One target of the specification and what this run measured for it."""

    workload: str
    wanted: str
    measured: str
    met: bool | None  # None: could not be judged (e.g. a peer is absent)


def _find(done: Done, workload: str, contender: str) -> list[tuple[Case, Result]]:
    return [(case, r) for case, results in done if case.workload == workload
            for r in results if r.contender == contender]


def contender_names(done: Done, floor: bool = True) -> list[str]:
    """Every contender's name once, in the order they first appear, but tapekit's policies before
    the peers (and the floor first, unless ``floor=False`` leaves it out). W6's orders of merging
    share a name: ``tapekit OwnedTape, small left`` is ``tapekit OwnedTape``."""
    names: list[str] = []
    for _, results in done:
        for r in results:
            name = merges.split(r.contender)[0]
            if name not in names and (floor or name != FLOOR):
                names.append(name)
    return sorted(names, key=lambda name: (name != FLOOR, not name.startswith("tapekit")))


def targets(done: Done) -> list[Target]:
    """Every target, judged on this run's figures."""
    found = []
    w1 = [(c, r) for c, r in _find(done, "W1", TAPEKIT) if r.ratio]
    if w1:
        case, r = w1[0]
        found.append(Target("W1", "at most 3x the numpy floor", f"{r.ratio.median:.2f}x", r.ratio.median <= 3))
    for case, r in _find(done, "W2", TAPEKIT):
        batch = int(case.short.split()[-1])
        limit = 1.15 if batch <= 64 else 1.05
        if r.ratio:
            found.append(Target("W2", f"batch {batch}: at most {limit}x the floor", f"{r.ratio.median:.2f}x",
                                r.ratio.median <= limit))
    w4 = _find(done, "W4", TAPEKIT)
    if w4:
        ok = [(c, r) for c, r in w4 if r.seconds]
        failed = [r.note for _, r in w4 if not r.seconds]
        per_op = [c.shown(r.seconds) for c, r in ok]
        own = [c.shown(r.seconds) * (1 - r.extra["collector"].median) for c, r in ok]
        ratios = [r.ratio.median for _, r in ok]
        growth = ratios[-1] / ratios[0] if len(ratios) > 1 else 1.0  # against the floor: a slower machine moves both
        found.append(Target("W4", "linear in the chain length, no recursion error",
                            "; ".join(failed) or f"ratio to the floor {' -> '.join(f'{t:.2f}x' for t in ratios)} "
                                                 f"({growth:.2f}x); {' -> '.join(f'{t:.2f}' for t in per_op)} µs/op, "
                                                 f"without the garbage collector's share "
                                                 f"{' -> '.join(f'{t:.2f}' for t in own)}",
                            not failed and growth <= 1.25))
        memory = [r.extra["memory"] for _, r in w4 if "memory" in r.extra]
        if memory and memory[-1].ratio:
            found.append(Target("W4", "peak memory at most 1.5x the floor", f"{memory[-1].ratio.median:.2f}x",
                                memory[-1].ratio.median <= 1.5))
    for _, r in _find(done, "W5", TAPEKIT):
        if r.ratio:
            found.append(Target("W5", "peak memory at most 1.3x the floor", f"{r.ratio.median:.2f}x",
                                r.ratio.median <= 1.3))
    found += ahead_of_torch(done) + compiled_targets(done) + fused_targets(done)
    for order in merges.ORDERS:
        w6 = [(c, r) for c, r in _find(done, "W6", merges.named("tapekit UnionTape", order)) if r.seconds]
        if len(w6) > 1:
            (small, r_small), (big, r_big) = w6[0], w6[-1]
            first, last = small.shown(r_small.seconds), big.shown(r_big.seconds)
            found.append(Target("W6", merges.named("UnionTape merge cost flat in k", order),
                                f"{first:.2f} -> {last:.2f} µs/merge ({last / first:.2f}x)", last / first <= 1.5))
    return found


EAGER = {"W1": (TAPEKIT,), "W2": (TAPEKIT,), "W3": ("tapekit UnionTape", "tapekit GlobalTape"), "W4": (TAPEKIT,)}


def ahead_of_torch(done: Done) -> list[Target]:
    """The eager targets against PyTorch eager: each tapekit policy of ``EAGER`` faster than it, case
    by case (their ratios to the same floor, compared)."""
    found = []
    for workload, names in EAGER.items():
        for case, results in done:
            if case.workload != workload:
                continue
            by_name = {r.contender: r for r in results if r.ratio}
            torch = by_name.get(PEERS["torch"])
            for name in names:
                if name in by_name:
                    mine = by_name[name]
                    found.append(Target(workload, f"{case.short}: {name.removeprefix('tapekit ')} faster than "
                                                  f"PyTorch eager",
                                        f"{mine.ratio.median:.2f}x vs {torch.ratio.median:.2f}x" if torch
                                        else "PyTorch absent",
                                        mine.ratio.median < torch.ratio.median if torch else None))
    return found


def compiled_targets(done: Done) -> list[Target]:
    """The targets of ``tk.compile``: each compiled step's ratio to the floor, and W4 linear."""
    found = []
    w4 = []
    for case, r in _find(done, "W1", COMPILED) + _find(done, "W2", COMPILED) + _find(done, "W3", COMPILED) + \
            _find(done, "W4", COMPILED):
        if not r.ratio:
            continue
        if case.workload == "W2":
            limit = 1.05 if int(case.short.split()[-1]) <= 64 else 1.02
        elif case.workload == "W4":
            w4.append((case, r))
            limit = 1.5
            if "first_call" in r.extra:
                per_op = r.extra["first_call"] / case.per
                found.append(Target("W4", f"compiled, {case.short}: first call at most "
                                          f"{FIRST_CALL_PER_OP * 1e6:.0f} µs per op",
                                    f"{per_op * 1e6:.0f} µs per op ({_first_call(r)})", per_op <= FIRST_CALL_PER_OP))
        else:
            limit = COMPILED_LIMITS[case.workload]
        found.append(Target(case.workload, f"compiled, {case.short}: at most {limit}x the floor",
                            f"{r.ratio.median:.2f}x (first call {_first_call(r)})", r.ratio.median <= limit))
    if len(w4) > 1:
        growth = w4[-1][1].ratio.median / w4[0][1].ratio.median
        found.append(Target("W4", "compiled: linear in the chain length",
                            f"ratio to the floor {' -> '.join(f'{r.ratio.median:.2f}x' for _, r in w4)} ({growth:.2f}x)",
                            growth <= 1.25))
    return found


def fused_targets(done: Done) -> list[Target]:
    """The targets of ``tk.compile(fn, fuse=True)``: W1 and W3 under their limits and ahead of JAX's
    ``jit``, W1's first call within its budget, W2 no slower than the floor, W4 no slower than unfused."""
    found = []
    for workload in ("W1", "W2", "W3", "W4"):
        for case, r in _find(done, workload, FUSED):
            if not r.ratio:
                continue
            by_name = {x.contender: x for c, results in done if c is case for x in results if x.ratio}
            measured = f"{r.ratio.median:.2f}x (first call {_first_call(r)})"
            if workload == "W4":
                unfused = by_name.get(COMPILED)
                found.append(Target(workload, f"fused, {case.short}: no slower than unfused",
                                    f"{measured} vs {unfused.ratio.median:.2f}x" if unfused else measured,
                                    r.ratio.median <= unfused.ratio.median * 1.05 if unfused else None))
                continue
            limit = FUSED_LIMITS[workload]
            found.append(Target(workload, f"fused, {case.short}: at most {limit}x the floor", measured,
                                r.ratio.median <= limit))
            jax = by_name.get(PEERS["jax"])
            if workload in ("W1", "W3"):
                found.append(Target(workload, f"fused, {case.short}: faster than JAX jit",
                                    f"{r.ratio.median:.2f}x vs {jax.ratio.median:.2f}x" if jax else "JAX absent",
                                    r.ratio.median < jax.ratio.median if jax else None))
            budget = FUSED_FIRST_CALL.get(workload)
            if budget is not None and "first_call" in r.extra:
                found.append(Target(workload, f"fused, {case.short}: first call at most {budget:.0f} s "
                                              f"(numba's cache empty)", _first_call(r), r.extra["first_call"] <= budget))
    return found


def _cell(case: Case, r: Result) -> tuple[str, str, str]:
    if case.time and r.seconds:
        time = f"{case.shown(r.seconds):,.2f} {case.unit}"
        share = r.extra["collector"].median
        if share >= 0.1:
            time += f" (garbage collector {share:.0%})"
        ratio = f"{r.ratio.median:.2f}x"
        spread = f"{r.ratio.low:.2f} – {r.ratio.high:.2f}"
    elif not case.time and r.ratio:
        time = f"{r.extra['peak_bytes'] / 2**20:,.2f} MiB peak"
        ratio, spread = f"{r.ratio.median:.2f}x", ""
    else:
        return "—", "—", r.note
    if "first_call" in r.extra:
        time += f"; first call {_first_call(r)}"
    if "memory" in r.extra:
        m = r.extra["memory"]
        time += f"; {m.extra['peak_bytes'] / 2**20:,.2f} MiB peak ({m.ratio.median:.2f}x)" if m.ratio else f"; {m.note}"
    return time, ratio, spread + (f" ({r.note})" if r.note else "")


def orders(results: list[Result]) -> list[str]:
    """The orders of merging the results of one case were measured in (W6), ``[PAIRWISE]`` for any
    other case."""
    found = {merges.split(r.contender)[1] for r in results}
    return [order for order in merges.ORDERS if order in found]


def _table_head(names: list[str]) -> list[str]:
    """The heading rows of a table with a row per case and a column per contender in ``names``."""
    return ["| workload | case | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]


def summary(done: Done) -> list[str]:
    """One row per case (per case and order of merging, where W6 has two), one column per
    contender: the median ratio to the floor (for W5, of peak memory), or why there is none."""
    names = contender_names(done, floor=False)
    lines = _table_head(names)
    for case, results in done:
        by_name = {r.contender: r for r in results}
        several = len(orders(results)) > 1
        for order in orders(results):
            cells = []
            for name in names:
                r = by_name.get(merges.named(name, order))
                cells.append("" if r is None else f"{r.ratio.median:.2f}x" if r.ratio else "—")
            short = f"{case.short}, {order}" if several else case.short
            lines.append(f"| {case.workload} | {short} | " + " | ".join(cells) + " |")
    return lines


def first_calls(done: Done) -> list[str]:
    """One row per timed case that has a compiler among its contenders (``tk.compile``, JAX's
    ``jit``, ``torch.compile``), one column per compiler: what its first call (trace + compile)
    took, or why it has no figure."""
    timed = [(case, results) for case, results in done if case.time]
    compilers = {r.contender for _, results in timed for r in results if "first_call" in r.extra}
    names = [name for name in contender_names(timed, floor=False) if name in compilers]
    if not names:
        return []
    lines = _table_head(names)
    for case, results in timed:
        by_name = {r.contender: r for r in results}
        if any(name in by_name for name in names):
            cells = ["" if name not in by_name else _first_call(by_name[name]) or by_name[name].note or "—"
                     for name in names]
            lines.append(f"| {case.workload} | {case.short} | " + " | ".join(cells) + " |")
    return lines


def markdown(done: Done, machine: Sequence[str], repeats: int, plot: str | None) -> str:
    """The whole report: machine, method, targets, then one table per workload."""
    lines = ["# tapekit benchmarks", "",
             "Measured by `make bench` (`python -m benchmarks`) on:", ""]
    lines += [f"- {line}" for line in machine]
    lines += ["", f"Each time is the median of {repeats} timed repeats after a warm-up, the contenders of a case "
              "interleaved repeat by repeat; the ratio is to the hand-written numpy floor of the same repeat "
              "(median, then min – max over the repeats). Peak memory is what tracemalloc saw beyond the "
              "memory in use before the step. Every contender's gradients were checked against the floor's "
              "before timing. Where Python's cyclic garbage collector took 10% of a run or more, the share is "
              "shown; in W6, which measures the cost of merging tapes, the collector is paused while a run "
              "is timed. W6 adds its k tensors in two orders, timed against one floor (numpy runs the same "
              "ops in either): pairwise, a tournament whose merges join tapes of equal size, and "
              f"{merges.SMALL_LEFT}, x0 + (x1 + (x2 + ...)), whose every merge has a one-op tape on the left and "
              "everything merged so far on the right (OwnedTape and ArcTape, whose left tape absorbs the "
              f"right one, run it up to k = {merges.SMALL_LEFT_ABSORB_MAX_K:,}: it costs them O(k^2)).", ""]
    found = targets(done)
    if found:
        lines += ["## Targets", "", "| workload | target | measured | met |", "|---|---|---|---|"]
        for t in found:
            met = "yes" if t.met else "no" if t.met is not None else "n/a"
            lines.append(f"| {t.workload} | {t.wanted} | {t.measured} | {met} |")
        lines.append("")
    lines += ["## Summary", "", "Ratio to the numpy floor, median over the repeats (W5: of peak memory; "
              "lower is better):", ""] + summary(done) + [""]
    first = first_calls(done)
    if first:
        lines += ["## First calls", "", "What the first call of each compiled contender took: tapekit's records "
                  "the step and builds its program (fused: and numba compiles its loops, with numba's cache "
                  "empty); JAX's and PyTorch's trace and compile. Later calls replay what it made, and those "
                  "are the times above.", ""] + first + [""]
    if plot:
        lines += [f"![benchmark plot]({plot})", ""]
    for workload, group in itertools.groupby(done, key=lambda item: item[0].workload):
        lines += [f"## {workload}", "", "| case | contender | time | ratio to floor | min – max |",
                  "|---|---|---|---|---|"]
        for case, results in group:
            lines += [f"| {case.name} | {r.contender} | " + " | ".join(_cell(case, r)) + " |" for r in results]
        lines.append("")
    return "\n".join(lines)
