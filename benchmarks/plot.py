"""One figure of the results: the ratios to the floor of W1, W2, W3 and W5, the time per op of W4
against the chain length, and the time per merge of W6 against the number of tapes."""

from __future__ import annotations

from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

from .report import Done  # noqa: E402


def _ratio_bars(ax, done: Done, workloads: tuple[str, ...], title: str, memory: bool = False) -> None:
    """One group of bars per case, one bar per contender: its ratio to the floor (log scale)."""
    cases = [(case, results) for case, results in done if case.workload in workloads]
    names = []
    for _, results in cases:
        names += [r.contender for r in results if r.contender not in names and r.contender != "numpy floor"]
    width = 0.8 / max(len(names), 1)
    for i, name in enumerate(names):
        xs, ys = [], []
        for j, (_, results) in enumerate(cases):
            for r in results:
                ratio = r.extra["memory"].ratio if memory and "memory" in r.extra else r.ratio
                if r.contender == name and ratio is not None:
                    xs.append(j + (i - (len(names) - 1) / 2) * width)
                    ys.append(ratio.median)
        ax.bar(xs, ys, width, label=name, color=f"C{i}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(cases)), [case.short for case, _ in cases], fontsize=7)
    ax.set_ylabel("ratio to the numpy floor")
    ax.set_title(title, fontsize=9)


def _lines(ax, done: Done, workload: str, title: str, xlabel: str) -> None:
    """Time per unit against size, one line per contender, log-log."""
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for case, results in done:
        if case.workload == workload:
            size = case.per
            for r in results:
                if r.seconds is not None:
                    series[r.contender].append((size, r.seconds.median / case.per * case.scale))
    for i, (name, points) in enumerate(series.items()):
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o", label=name, color=f"C{i}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    units = {case.unit for case, _ in done if case.workload == workload}
    ax.set_ylabel(", ".join(sorted(units)))
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6)


def figure(done: Done, path: str, machine: str) -> None:
    """Draw the figure and save it as a PNG at ``path``."""
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    _ratio_bars(axes[0, 0], done, ("W1",), "W1: per-op cost (chain of elementwise ops)")
    _ratio_bars(axes[0, 1], done, ("W2",), "W2: MLP training step")
    _ratio_bars(axes[0, 2], done, ("W3",), "W3: wide DAG, backward over all outputs")
    _lines(axes[1, 0], done, "W4", "W4: long chain, time per op", "chain length (ops)")
    _ratio_bars(axes[1, 1], done, ("W5",), "W5: peak memory of the MLP step")
    _lines(axes[1, 2], done, "W6", "W6: time per merge", "merges")
    axes[0, 0].legend(fontsize=6)
    axes[0, 1].legend(fontsize=6)
    fig.suptitle(f"tapekit benchmarks ({machine}); ratios below 1 beat the floor", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
