"""Memory: tapes and the arrays their records save are freed by reference counting alone (no
reference cycles), as soon as backward ran and the tensors are gone; training holds flat memory."""

from __future__ import annotations

import contextlib
import gc
import tracemalloc
import weakref
from collections import Counter
from typing import Callable, Iterator

import numpy as np
import pytest

import tapekit as tk
from tapekit.history import history
from tapekit.tapes.base import Record

from .conftest import POLICIES


class Tracked(np.ndarray):
    """An ndarray that can be weakly referenced. Arrays numpy derives from one by ufuncs, views and
    reductions (op results, the arrays backward rules save) are ones too; each is listed in ``born``."""

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
    """Matmul, elementwise ops, integer and slice indexing, reductions, the softmax family, where
    and stack; each taped handle is used once, so it runs under every policy."""
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
    assert peak - base > 1_000_000, "the program should hold megabytes while it runs"
    assert after - base < 50_000, f"{after - base} bytes stayed allocated after the program"


def _input_tagged(model: tk.nn.Module, x: tk.Tensor, labels: np.ndarray, grads: tk.Gradients) -> tk.Gradients:
    """dfdx style: the input carries an OwnedTape into reused gradient buffers."""
    model.zero_grads(grads)
    return tk.cross_entropy(model(x.trace(tk.OwnedTape(grads))), labels).backward()


def _parameter_tagged(model: tk.nn.Module, x: tk.Tensor, labels: np.ndarray, grads: tk.Gradients) -> tk.Gradients:
    """The parameters carry a fresh UnionTape each step; gradients are new arrays."""
    return tk.cross_entropy(model.trace(tk.UnionTape())(x), labels).backward()


def _live() -> tuple[int, Counter]:
    """Traced bytes of live objects, and how many tapekit objects are alive by type. A full
    collection first empties CPython's free lists, which keep freed tuples and floats for reuse and
    would count as growth; it must find no cycles, since the loop relies on reference counting."""
    assert gc.collect() == 0, "a training step left objects in reference cycles"
    # type(o), not isinstance(o, ...): isinstance asks a weakref.proxy for its referent's class, and
    # raises ReferenceError for a dead one, which another library may keep alive in this process
    kinds = Counter(type(o).__name__ for o in gc.get_objects()
                    if issubclass(type(o), (tk.Tensor, tk.Tape, tk.Gradients, Record, tk.nn.Module)))
    return tracemalloc.get_traced_memory()[0], kinds


@pytest.mark.parametrize("step", [_input_tagged, _parameter_tagged], ids=["input-tagged", "parameter-tagged"])
def test_training_holds_flat_memory(step: Callable) -> None:
    """1,000 training steps of a small MLP, with the collector off: from step 100 to step 1,000 no
    tensor, tape, record, Gradients or module accumulates, and traced bytes stay within 32 kB
    (numpy's small caches of shapes still fill; measured: about 16 kB). A leak of one 64 x 3
    float32 array a step would add 700 kB."""
    dev = tk.Cpu(seed=0)
    model = tk.nn.Sequential(tk.nn.Linear(8, 32, device=dev), tk.nn.Tanh(), tk.nn.Linear(32, 3, device=dev))
    opt = tk.optim.Sgd(model, lr=0.1)
    x = dev.randn((64, 8))
    labels = (x.numpy()[:, 0] > 0).astype(np.int64) + (x.numpy()[:, 1] > 0)
    grads = model.alloc_grads()
    losses = []
    with no_gc():
        tracemalloc.start()
        try:
            for i in range(1000):
                opt.update(model, step(model, x, labels, grads))
                if i == 99:
                    warm, warm_kinds = _live()
                if i % 100 == 0:
                    losses.append(tk.cross_entropy(model(x), labels).item())
            end, end_kinds = _live()
        finally:
            tracemalloc.stop()
    assert losses[-1] < 0.5 * losses[0], f"the model should learn: losses {losses}"
    assert end_kinds == warm_kinds, f"tapekit objects accumulated: {end_kinds - warm_kinds}"
    assert end - warm < 32_768, f"memory grew by {end - warm} bytes over 900 steps"
