"""Memory: tapes and the arrays their records save are freed by reference counting alone (no
reference cycles), as soon as backward ran and the tensors are gone; training holds flat memory."""

from __future__ import annotations

import contextlib
import gc
import tracemalloc
import weakref
from typing import Callable, Iterator

import numpy as np
import pytest

import tapekit as tk
from tapekit.history import history

POLICIES = {"owned": tk.OwnedTape, "arc": tk.ArcTape, "union": tk.UnionTape, "global": tk.GlobalTape}


class Tracked(np.ndarray):
    """An ndarray that can be weakly referenced; every array numpy derives from one (op results,
    the arrays backward rules save) is one too, and is listed in ``born``."""

    born: list[weakref.ref] = []

    def __array_finalize__(self, obj: object) -> None:
        Tracked.born.append(weakref.ref(self))


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Only reference counting frees objects inside the block; on leaving it, no cyclic garbage
    may be left behind."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
    assert gc.collect() == 0, "objects were left in reference cycles"


def tracked(dev: tk.Device, shape: tuple[int, ...]) -> tk.Tensor:
    return tk.Tensor(dev.rng.standard_normal(shape).view(Tracked), dev)


def branch(t: tk.Tensor) -> tk.Tensor:
    """A second handle for another use of ``t``: a fresh tape, except under a GlobalTape."""
    return t if isinstance(t.tape, tk.GlobalTape) else t.retaped()


def program(x: tk.Tensor, w: tk.Tensor) -> tk.Tensor:
    """Every kind of op, each taped handle used once, so it runs under every policy."""
    h = (x @ w).tanh()
    other = branch(h)[1:]
    y = h[[0, 1, 1]]
    y1, y2, y3, o1 = branch(y), branch(y), y, branch(other)
    parts = [y1.exp().sigmoid().sum(), y2.logsumexp(axis=0).sum(), y3.log_softmax().mean(), o1.max(),
             tk.where(other > 0, other, 0.0).sum()]
    return tk.stack(parts).sum()


def run(policy: str, make: Callable[[tk.Tape], tk.Tensor], backward: bool) -> tuple[list, weakref.ref]:
    """Build with ``make`` on ``policy``, maybe run backward, drop everything; the weak references
    to the tape and to every array born on the way."""
    Tracked.born.clear()
    block = tk.GlobalTape() if policy == "global" else contextlib.nullcontext()
    with block as active:
        tape = active if policy == "global" else POLICIES[policy]()
        loss = make(tape)
    tape_ref = weakref.ref(tape)
    if backward:
        grads = loss.backward()
        assert len(grads) > 0
        assert sum(rec.saved_bytes for rec in history([loss])) == 0, "backward kept saved arrays alive"
        del grads
    del loss, tape, active, block
    return list(Tracked.born), tape_ref


@pytest.mark.parametrize("backward", [True, False], ids=["after-backward", "never-backward"])
@pytest.mark.parametrize("policy", POLICIES)
def test_tape_and_saved_arrays_are_freed_without_gc(policy: str, backward: bool) -> None:
    dev = tk.Cpu(seed=0)

    def make(tape: tk.Tape) -> tk.Tensor:
        x, w = tracked(dev, (5, 4)), tracked(dev, (4, 3))
        return program(x.trace(tape), w if policy == "global" else w.trace(POLICIES[policy]()))

    with no_gc():
        born, tape_ref = run(policy, make, backward)
        assert len(born) > 20, "the program should derive many tracked arrays"
        alive = [ref() for ref in born if ref() is not None]
        assert tape_ref() is None, f"the {policy} tape outlived its tensors"
        assert not alive, f"{len(alive)} arrays outlived the tape: shapes {[a.shape for a in alive]}"


@pytest.mark.parametrize("policy", POLICIES)
def test_rejected_and_partial_calls_leave_no_cycles(policy: str) -> None:
    """Errors raised on the way (their tracebacks hold frames) do not keep tapes alive either."""
    dev = tk.Cpu(seed=0)
    with no_gc():
        Tracked.born.clear()
        block = tk.GlobalTape() if policy == "global" else contextlib.nullcontext()
        with block as active:
            tape = active if policy == "global" else POLICIES[policy]()
            y = tracked(dev, (3, 2)).trace(tape).exp()
            with pytest.raises(tk.ShapeError):
                y @ tracked(dev, (3, 2)).trace(tape if policy != "owned" else tk.OwnedTape())
            with pytest.raises(tk.BackwardError):
                y.backward()
        ref = weakref.ref(tape)
        del y, tape, active, block
        assert ref() is None
        assert all(r() is None for r in Tracked.born)


@pytest.mark.parametrize("policy", POLICIES)
def test_program_memory_returns_to_baseline(policy: str) -> None:
    """Large arrays on the tape: after backward and dropping the tensors, traced bytes come back
    to where they were (within a small constant), with the collector off."""
    dev = tk.Cpu(seed=0)
    x_host = dev.rng.standard_normal((256, 256))

    def step() -> float:
        block = tk.GlobalTape() if policy == "global" else contextlib.nullcontext()
        with block as active:
            tape = active if policy == "global" else POLICIES[policy]()
            x = tk.Tensor(x_host, dev).trace(tape)
            loss = program(x, tk.Tensor(x_host[:, :128], dev))
        grads = loss.backward()
        return float(np.sum(grads[x]))

    with no_gc():
        step()  # warm caches (ids, labels, numpy internals)
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            step()
            after, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak - base > 2_000_000, "the program should hold megabytes while it runs"
    assert after - base < 50_000, f"{after - base} bytes stayed allocated after the program"
