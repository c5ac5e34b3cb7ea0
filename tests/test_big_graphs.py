"""Big graphs: a 100,000-op chain and a 10,000-input fan-in run backward correctly under every
policy, with Python's default recursion limit, and the graph is freed afterwards without
recursion (a chain of records is as deep as the program is long)."""

from __future__ import annotations

import contextlib
import gc
import sys
import weakref
from typing import Iterator

import numpy as np
import pytest

import tapekit as tk

from .conftest import POLICIES

CHAIN = 100_000
FAN_IN = 10_000


@pytest.fixture(autouse=True)
def default_recursion_limit() -> Iterator[None]:
    """Run at CPython's default limit, whatever the test runner set."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


@contextlib.contextmanager
def recording(policy: str) -> Iterator[tk.Tape]:
    """A fresh tape of ``policy``; for ``global``, the block that records every op on it."""
    if policy == "global":
        with tk.GlobalTape() as tape:
            yield tape
    else:
        yield POLICIES[policy]()


@pytest.mark.parametrize("policy", POLICIES)
def test_chain_of_100k_ops(policy: str) -> None:
    """y <- y * c, then y <- y + d, 50,000 times each: dy/dx = c ** 50,000."""
    dev = tk.Cpu(seed=0)
    x = dev.tensor([0.5, -2.0], dtype="float64")
    c, d = 1.00002, 1e-3
    with recording(policy) as tape:
        y = x.trace(tape)
        for _ in range(CHAIN // 2):
            y = y * c
            y = y + d
        out = y.sum()
    assert len(out.tape) == CHAIN + 1

    grads = out.backward()

    scale = c ** (CHAIN // 2)
    np.testing.assert_allclose(grads[x], [scale, scale], rtol=1e-9)
    added = d * sum(c ** k for k in range(CHAIN // 2))
    np.testing.assert_allclose(y.numpy(), x.numpy() * scale + added, rtol=1e-9)

    # freeing: the last handles hold a 100,001-record chain through their records' parents
    tape_ref = weakref.ref(tape)
    gc.collect()
    gc.disable()
    try:
        del y, out, tape, grads
        assert tape_ref() is None
    finally:
        gc.enable()
    assert gc.collect() == 0


@pytest.mark.parametrize("policy", ["owned", "union"])
def test_chain_kept_for_a_second_backward(policy: str) -> None:
    """``retain=True`` on a 100k chain: the second backward gives the same gradient."""
    dev = tk.Cpu(seed=0)
    x = dev.tensor([1.5], dtype="float64")
    y = x.trace(POLICIES[policy]())
    for _ in range(CHAIN):
        y = y * 1.00001
    first = y.sum().backward(retain=True) if policy == "union" else None
    out = y.sum()
    grads = out.backward(retain=True)
    again = out.backward()
    np.testing.assert_allclose(grads[x], [1.00001 ** CHAIN], rtol=1e-9)
    np.testing.assert_allclose(again[x], grads[x], rtol=0)
    if first is not None:
        np.testing.assert_allclose(first[x], grads[x], rtol=0)


@pytest.mark.parametrize("policy", POLICIES)
def test_fan_in_of_10k_inputs_in_one_op(policy: str) -> None:
    """10,000 inputs, each on its own tape (one GlobalTape under ``global``), meet in one concat."""
    dev = tk.Cpu(seed=0)
    values = np.random.default_rng(0).standard_normal(FAN_IN)
    weights = np.random.default_rng(1).standard_normal(FAN_IN)
    xs = [dev.tensor(values[i:i + 1], dtype="float64") for i in range(FAN_IN)]
    with recording(policy) as shared:
        traced = [x.trace(shared if policy == "global" else POLICIES[policy]()) for x in xs]
        joined = tk.concat(traced)
        out = (joined * dev.tensor(weights, dtype="float64")).sum()
    grads = out.backward()
    assert len(grads) >= FAN_IN
    np.testing.assert_allclose(np.concatenate([grads[x] for x in xs]), weights, rtol=1e-12)


@pytest.mark.parametrize("policy", POLICIES)
def test_fan_in_of_10k_inputs_through_a_tree_of_adds(policy: str) -> None:
    """10,000 inputs on their own tapes, summed pairwise (9,999 merges), each scaled by its index."""
    dev = tk.Cpu(seed=0)
    xs = [dev.tensor(float(i % 7), dtype="float64") for i in range(FAN_IN)]
    with recording(policy) as shared:
        level = [x.trace(shared if policy == "global" else POLICIES[policy]()) * float(i)
                 for i, x in enumerate(xs)]
        while len(level) > 1:
            pairs = [level[i] + level[i + 1] for i in range(0, len(level) - 1, 2)]
            level = pairs + ([level[-1]] if len(level) % 2 else [])
        out = level[0]
    grads = out.backward()
    got = np.array([float(grads[x]) for x in xs])
    np.testing.assert_array_equal(got, np.arange(FAN_IN, dtype=float))
    assert out.item() == sum(i * (i % 7) for i in range(FAN_IN))
