"""The workloads W1-W6 at their sizes, and the run that checks, times and measures them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Iterator

import numpy as np

import tapekit as tk

from . import chain, dag, merges, mlp
from .measure import Case, Result, failure, memory_ratios, time_interleaved
from .peers import Peer


@dataclass(frozen=True)
class Sizes:
    """How big each workload is, and how many timed repeats each case gets."""

    chain_ops: int = 1_000
    chain_shape: tuple[int, ...] = (4,)
    mlp_dims: tuple[int, ...] = (784, 256, 256, 10)
    mlp_batches: tuple[int, ...] = (64, 512)
    dag: tuple[int, int, int] = (100, 1_000, 10)  # inputs, ops, outputs
    dag_shape: tuple[int, ...] = (8,)
    long_chains: tuple[int, ...] = (10_000, 100_000)
    merges: tuple[int, ...] = (100, 1_000, 10_000, 100_000)
    repeats: int = 7
    collect: bool = True  # collect garbage before each round of timing and each memory peak


FULL = Sizes()
SMOKE = Sizes(chain_ops=12, mlp_dims=(12, 8, 8, 3), mlp_batches=(4,), dag=(6, 20, 2), long_chains=(30, 90),
              merges=(4, 16), repeats=1, collect=False)


def cases(sizes: Sizes, peers: dict[str, Peer]) -> Iterator[Case]:
    n, shape = sizes.chain_ops, sizes.chain_shape
    yield Case("W1", f"chain of {n:,} ops (add, mul, tanh), shape {shape}, forward + backward", f"{n:,} ops",
               chain.contenders(n, shape, peers), unit="µs/op", per=n, scale=1e6)
    for batch in sizes.mlp_batches:
        dims = "-".join(map(str, sizes.mlp_dims))
        yield Case("W2", f"MLP {dims}, batch {batch}, float32: forward, backward, SGD step", f"batch {batch}",
                   mlp.contenders(batch, sizes.mlp_dims, peers), unit="ms/step")
    inputs, ops, outputs = sizes.dag
    yield Case("W3", f"DAG: {inputs} inputs, {ops:,} ops, {outputs} outputs, shape {sizes.dag_shape}, "
                     f"one backward over all outputs", f"{ops:,} ops", dag.contenders(inputs, ops, outputs, sizes.dag_shape, peers))
    for n in sizes.long_chains:
        yield Case("W4", f"chain of {n:,} ops, shape (1,), forward + backward", f"{n:,} ops",
                   chain.contenders(n, (1,), peers, policies=(tk.OwnedTape,)), unit="µs/op", per=n, scale=1e6,
                   memory=n == sizes.long_chains[-1])
    if sizes.mlp_batches:
        batch = sizes.mlp_batches[-1]
        yield Case("W5", f"peak memory of the W2 step at batch {batch}", f"batch {batch}", mlp.contenders(batch, sizes.mlp_dims, peers),
                   memory=True, time=False)
    for k in sizes.merges:
        yield Case("W6", f"{k:,} tapes merged ({k - 1:,} merges), collector paused", f"k = {k:,}",
                   merges.contenders(k), unit="µs/merge", per=max(k - 1, 1), scale=1e6, collector=False)


def check(case: Case) -> dict[str, str]:
    """Run every contender once and compare what it returns with the floor's. tapekit must agree
    (``AssertionError`` otherwise); a peer that disagrees or fails gets a note."""
    expected = [np.asarray(a) for a in case.contenders[0].once()]
    notes = {}
    for c in case.contenders[1:]:
        try:
            got = [np.asarray(a) for a in c.once()]
        except Exception as err:
            if c.name.startswith("tapekit"):
                raise
            notes[c.name] = failure(err)
            continue
        same = len(got) == len(expected) and all(
            g.shape == e.shape and np.allclose(g, e, rtol=1e-3, atol=1e-5) for g, e in zip(got, expected))
        if not same:
            if c.name.startswith("tapekit"):
                raise AssertionError(f"{case.workload} {case.name}: {c.name} disagrees with the numpy floor")
            notes[c.name] = "its gradients differ from the floor's"
    return notes


def run(sizes: Sizes, peers: dict[str, Peer], log: Callable[[str], None] = print,
        only: Collection[str] | None = None) -> list[tuple[Case, list[Result]]]:
    """Check, time and measure every case (``only``: the cases of these workloads); the results in order."""
    done = []
    for case in cases(sizes, peers):
        if only is not None and case.workload not in only:
            continue
        log(f"{case.workload}: {case.name}")
        done.append((case, run_case(case, sizes)))
    return done


def run_case(case: Case, sizes: Sizes) -> list[Result]:
    """Check, time and measure one case: a result per contender, those that failed or were
    skipped last, with why."""
    skipped = [Result(case.name, c.name, note=c.skipped) for c in case.contenders if c.skipped]
    case.contenders = [c for c in case.contenders if not c.skipped]
    notes = check(case)
    case.contenders = [c for c in case.contenders if not notes.get(c.name, "").startswith("failed")]
    results = (time_interleaved(case.name, case.contenders, sizes.repeats, sizes.collect, case.collector)
               if case.time
               else memory_ratios(case.name, case.contenders, sizes.collect))
    if case.time and case.memory:
        memory = {r.contender: r for r in memory_ratios(case.name, case.contenders, sizes.collect)}
        for r in results:
            r.extra["memory"] = memory[r.contender]
    failed = [Result(case.name, name, note=note) for name, note in notes.items() if note.startswith("failed")]
    for r in results:
        r.note = r.note or notes.get(r.contender, "")
    return results + failed + skipped
