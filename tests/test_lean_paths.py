"""The short cuts the hot path takes, each checked against the long way round: a leaf set skips
gradients it would drop anyway, and lets go of used entries early; the history check that backward
runs first agrees with the full walk; a moved handle's error is written when it is raised; a
UnionTape's records stay at home after their first tape's holders are gone; records of the same
shapes share one shape tuple; concat and stack share rules made once."""

from __future__ import annotations

import gc
import sys
import tracemalloc

import numpy as np
import pytest

import tapekit as tk
from tapekit.history import coverage
from tapekit.ops import core
from tapekit.ops.core import binary

engine = sys.modules["tapekit.backward"]


def spied_mul(calls: list[str]):
    """``x * y`` whose rules note which operand's gradient they computed."""

    @binary(lambda g, x, y: calls.append("x") or g * y, lambda g, x, y: calls.append("y") or g * x)
    def spy(xp, x, y):
        return x * y, (x, y)

    return spy


def test_a_leaf_set_skips_the_gradient_of_an_operand_no_op_made(cpu) -> None:
    calls: list[str] = []
    mul = spied_mul(calls)
    batch, w = cpu.tensor([1.0, 2.0]), cpu.tensor([3.0, 4.0])
    g = mul(batch, w.trace(tk.OwnedTape(leaves=[w]))).sum().backward()
    assert calls == ["y"]
    assert np.allclose(g[w], [1.0, 2.0]) and batch not in g

    calls.clear()
    g = mul(batch, w.trace()).sum().backward()  # no leaf set: every operand gets its entry
    assert sorted(calls) == ["x", "y"] and np.allclose(g[batch], [3.0, 4.0])


def test_a_leaf_set_still_runs_rules_on_the_way_to_a_leaf(cpu) -> None:
    calls: list[str] = []
    mul = spied_mul(calls)
    x, w = cpu.tensor([0.5, -1.0]), cpu.tensor([2.0, 3.0])
    h = x.trace(tk.OwnedTape(leaves=[x])).tanh()  # h is no leaf, but x's gradient passes through it
    g = mul(h, w).sum().backward()
    assert calls == ["x"]
    assert np.allclose(g[x], 2.0 * (1 - np.tanh([0.5, -1.0]) ** 2) * np.array([1.0, 1.5]))
    with pytest.raises(tk.MissingGradientError, match="not in the leaf set"):
        g[w]


def _backward_peak(dev: tk.Device, leaves: bool) -> int:
    x = dev.randn((256, 256))
    h = x.trace(tk.OwnedTape(leaves=[x] if leaves else None))
    for _ in range(12):
        h = h.tanh()
    loss = h.sum()
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        g = loss.backward()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert x in g
    return peak - before


def test_a_leaf_set_lets_go_of_used_entries_during_backward(cpu) -> None:
    kept, let_go = _backward_peak(cpu, leaves=False), _backward_peak(cpu, leaves=True)
    one = 256 * 256 * 4
    assert kept > 10 * one  # every tanh output keeps its gradient entry to the end
    assert let_go < 4 * one  # only the entries still in use


def _programs(dev: tk.Device):
    """(outputs, tapes a backward would run) for programs whose history is or is not all there."""
    x = dev.tensor([1.0, 2.0]).trace(tk.ArcTape())
    y = dev.tensor([4.0, 5.0]).trace(tk.ArcTape())
    z = x + y
    zz = y * 2.0
    yield [z.sum()], True
    yield [zz.sum()], True
    a = dev.tensor([1.0, 2.0]).trace(tk.ArcTape())
    b = dev.tensor([3.0, 4.0]).trace(tk.ArcTape())
    bb = b.exp()  # on b's tape; the merge below moves it into a's
    c = a * bb
    yield [(bb * 2.0).sum()], False  # bb's record now lives on a's tape
    yield [c.sum()], True
    u = dev.tensor([1.0]).trace(tk.UnionTape())
    v = dev.tensor([2.0]).trace(tk.UnionTape())
    w = u.exp() + v.sin()
    yield [w.sum(), (v * 3.0).sum()], True
    o = dev.tensor([1.0]).trace()
    p = o.retaped().exp()
    yield [(p + 1.0).sum()], True


def test_the_quick_history_check_never_passes_an_incomplete_history(cpu) -> None:
    for outputs, complete in _programs(cpu):
        stores = {out.tape._store() for out in outputs}
        quick = engine._holds_history(outputs, stores)
        assert coverage(outputs, stores).complete is complete
        assert quick is complete  # exact on these; in general it may only err towards the full walk


def test_a_union_tape_keeps_records_whose_first_tape_lost_its_holders(cpu) -> None:
    x = cpu.tensor([1.0, 2.0]).trace(tk.UnionTape())
    y = cpu.tensor([4.0, 5.0]).trace(tk.UnionTape())
    z = x.exp() + y.exp()  # y.exp() was recorded on y's own tape, then the two merged
    del y
    gc.collect()
    s = z.sum()
    assert coverage([s], {s.tape._store()}).complete
    assert np.allclose(s.backward()[x], np.exp([1.0, 2.0]))


def test_a_moved_handle_names_its_op_when_it_is_used_and_not_a_holder_that_goes_stale(cpu) -> None:
    """'(now held by y)' was wrong once y's op moved the tape on: the op's line names its output."""
    x = cpu.tensor([1.0], name="x").trace()
    y = x * 2.0
    y.name = "y"  # named after the move: the message is written when it is raised
    y.exp()
    moved = r"x's OwnedTape was moved into the output of `y = mul\(x, const\)`: "
    with pytest.raises(tk.TapeMovedError, match=moved) as err:
        x + 1.0
    assert "held by" not in str(err.value)


def test_records_of_the_same_shapes_share_one_shape_tuple(cpu) -> None:
    x, w = cpu.tensor(np.ones((2, 3))), cpu.tensor(np.ones(3))
    h = x.trace(tk.OwnedTape())
    for _ in range(3):
        h = (h * w).tanh()
    first, *rest = [rec for rec in h.tape.records if rec.name == "mul"]
    assert first.shapes == ((2, 3), (3,)) and first.out_shape == (2, 3)
    assert all(rec.shapes is first.shapes and rec.out_shape is first.out_shape for rec in rest)
    tanhs = [rec for rec in h.tape.records if rec.name == "tanh"]
    assert tanhs[0].shapes == ((2, 3),) and all(rec.shapes is tanhs[0].shapes for rec in tanhs)


def test_the_shared_tuples_start_over_instead_of_growing_without_bound(monkeypatch) -> None:
    monkeypatch.setattr(core, "_shared", {})
    for n in range(1, 5000):
        core.shared((((n,),), (n,)))
        assert len(core._shared) <= 4096
    key = (((7,),), (7,))
    assert core.shared(key) is key and core.shared((((7,),), (7,))) is key


def test_a_record_links_the_saved_operands_and_output_in_a_number_python_keeps_once(cpu) -> None:
    x, w = cpu.tensor([0.5, -1.0]).trace(tk.UnionTape()), cpu.tensor([2.0, 3.0])
    h = (x * w).tanh()
    mul, tanh = h.tape.records
    assert [mul.link(j) for j in range(2)] == [0, 1]  # mul saves (x, y), its operands' own arrays
    assert tanh.link(0) == -1 and sys.getrefcount(tanh.links) > 100  # tanh saves its output; a cached int
    power = (x ** 3.0).tape.records[-1]
    assert [power.link(j) for j in range(3)] == [None, 0, None]  # (xp, x, p)
    assert (x + w).tape.records[-1].links == 0  # add saves nothing


def test_an_op_of_one_tensor_keeps_its_forwards_name_and_signature(cpu) -> None:
    x = cpu.tensor([0.5, -1.0])
    assert tk.ops.sigmoid.__name__ == "sigmoid" and tk.ops.sigmoid.__doc__.startswith("``1 / (1 + exp(-x))``")
    with pytest.raises(TypeError, match="positional argument"):
        tk.ops.tanh(x, 2.0)
    assert np.allclose(tk.ops.clip(x, high=0.0).numpy(), [0.0, -1.0])  # parameters still pass through
    assert np.allclose(tk.ops.sum(x, axis=0, keepdims=True).numpy(), [-0.5])


def test_joined_operands_share_rules_made_once_and_save_no_arrays(cpu) -> None:
    tape = tk.UnionTape()
    a, b = cpu.tensor([1.0, 2.0]).trace(tape), cpu.tensor([3.0, 4.0]).trace(tape)
    joined, stacked = tk.concat([a, b]), tk.stack([b, a])
    cat, stk = joined._record, stacked._record
    assert cat.rules[0] is stk.rules[0] and cat.rules[1] is stk.rules[1] and cat.rules[0] is not cat.rules[1]
    assert cat.saved_bytes == 0 and stk.saved_bytes == 0
    g = tk.backward([(joined * cpu.tensor([1.0, 2.0, 3.0, 4.0])).sum(), (stacked[0] * 10.0).sum()])
    assert np.allclose(g[a], [1.0, 2.0]) and np.allclose(g[b], [13.0, 14.0])
