"""One figure of the results: the ratios to the floor of W1, W2, W3 and W5, the time per op of W4
against the chain length, and the time per merge of W6 against the number of tapes (a solid line
per contender for the pairwise order, a dashed one for the small-left order)."""

from __future__ import annotations

from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from .merges import PAIRWISE, split  # noqa: E402
from .report import FLOOR, Done, contender_names  # noqa: E402


def _colours(done: Done) -> dict[str, str]:
    """One colour per contender, the same in every panel: the floor black, the others from
    matplotlib's 20 (its 10 darker hues first, then their lighter halves)."""
    names = contender_names(done, floor=False)
    palette = plt.get_cmap("tab20").colors
    hues = palette[0::2] + palette[1::2]
    return {FLOOR: "black"} | {name: hues[i % len(hues)] for i, name in enumerate(names)}


def _log_axis(axis, unit: str, subs: tuple[float, ...] = (1.0, 2.0, 5.0)) -> None:
    axis.set_major_locator(LogLocator(subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}{unit}"))
    axis.set_minor_formatter(NullFormatter())


def _ratio_bars(ax, done: Done, workloads: tuple[str, ...], title: str, colours: dict[str, str]) -> None:
    """One group of bars per case, one bar per contender: its ratio to the floor (log scale)."""
    cases = [(case, results) for case, results in done if case.workload in workloads]
    names = contender_names(cases, floor=False)
    width = 0.8 / max(len(names), 1)
    highest = 1.0
    for i, name in enumerate(names):
        xs, ys = [], []
        for j, (_, results) in enumerate(cases):
            for r in results:
                if r.contender == name and r.ratio is not None:
                    xs.append(j + (i - (len(names) - 1) / 2) * width)
                    ys.append(r.ratio.median)
        ax.bar(xs, ys, width, label=name, color=colours[name])
        highest = max([highest, *ys])
    ax.axhline(1.0, color="black", linewidth=0.8)
    if highest > 4:  # ratios that far apart read best on a log scale
        ax.set_yscale("log")
        _log_axis(ax.yaxis, "x")
    else:
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.set_xticks(range(len(cases)), [case.short for case, _ in cases], fontsize=7)
    ax.set_ylabel("ratio to the numpy floor")
    ax.set_title(title, fontsize=9)


def _lines(ax, done: Done, workload: str, title: str, xlabel: str, colours: dict[str, str]) -> None:
    """Time per unit against size, one line per contender, log-log; the same colour for one
    contender's orders of merging (W6), solid for pairwise, dashed for the others."""
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for case, results in done:
        if case.workload == workload:
            size = case.per
            for r in results:
                if r.seconds is not None:
                    series[r.contender].append((size, case.shown(r.seconds)))
    for name, points in series.items():
        xs, ys = zip(*points)
        base, order = split(name)
        ax.plot(xs, ys, marker="o" if order == PAIRWISE else "s", linestyle="-" if order == PAIRWISE else "--",
                label=name, color=colours[base])
    ax.set_xscale("log")
    ax.set_yscale("log")
    _log_axis(ax.xaxis, "", subs=(1.0,))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    _log_axis(ax.yaxis, "")
    ax.set_xlabel(xlabel)
    units = {case.unit for case, _ in done if case.workload == workload}
    ax.set_ylabel(", ".join(sorted(units)))
    ax.set_title(title, fontsize=9)


def figure(done: Done, path: str, machine: str) -> None:
    """Draw the figure and save it as a PNG at ``path``."""
    fig, axes = plt.subplots(2, 3, figsize=(15, 9))
    colours = _colours(done)
    _ratio_bars(axes[0, 0], done, ("W1",), "W1: per-op cost (chain of elementwise ops)", colours)
    _ratio_bars(axes[0, 1], done, ("W2",), "W2: MLP training step", colours)
    _ratio_bars(axes[0, 2], done, ("W3",), "W3: wide DAG, backward over all outputs", colours)
    _lines(axes[1, 0], done, "W4", "W4: long chain, time per op", "chain length (ops)", colours)
    _ratio_bars(axes[1, 1], done, ("W5",), "W5: peak memory of the MLP step (tracemalloc)", colours)
    _lines(axes[1, 2], done, "W6", "W6: time per merge (solid: pairwise, dashed: small left)", "merges",
           colours)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    fig.legend(handles, list(colours), loc="lower center", ncol=min(len(colours), 6), fontsize=8, frameon=False)
    fig.suptitle(f"tapekit benchmarks ({machine}): bars are ratios to the hand-written numpy floor, lower is "
                 f"better", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
