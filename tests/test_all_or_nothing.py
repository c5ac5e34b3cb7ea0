"""A backward or an op that fails changes nothing. Faults are injected into the k-th backward rule
(first, middle, last) of random programs under every policy, and into the forward between compute
and record; the full state of every tape, record, gradient entry and handle must equal a snapshot
taken before, and a second backward, once the fault is gone, must give the right gradients."""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import tapekit as tk
from tapekit.ops.core import unary

from .conftest import POLICIES
from .test_bad_input import snapshot
from .test_fuzz_programs import DEV, owned, programs, run, shared


class Injected(Exception):
    """The fault the tests inject."""


class Faults:
    """Wraps every rule of the given records so that the ``k``-th call (0-based, newest record
    first, as backward runs them) raises ``fault``; ``remove()`` puts the rules back."""

    def __init__(self, records, k: int, fault: BaseException) -> None:
        self.calls, self.k, self.fault = 0, k, fault
        self.originals = [(rec, rec.rules) for rec in records]
        for rec in records:
            rec.rules = tuple(None if r is None else self.wrap(r) for r in rec.rules)

    def wrap(self, rule):
        def faulty(g, *saved, **into):
            self.calls += 1
            if self.calls - 1 == self.k:
                raise self.fault
            return rule(g, *saved, **into)
        faulty.__dict__.update(vars(rule))  # what the engine reads off a rule (fills, transpose)
        return faulty

    def remove(self) -> None:
        for rec, rules in self.originals:
            rec.rules = rules


def rule_calls(records) -> int:
    return sum(r is not None for rec in records for r in rec.rules)


def state(policy_tapes, leaves, outs):
    return [snapshot(t) for t in [*policy_tapes, *leaves, *outs]]


def records_of(outs):
    return sorted({id(r): r for o in outs for r in o.tape.records}.values(), key=lambda r: r.id)


def traced_program(program, policy: str, preallocated: bool) -> tuple:
    """A fuzzed program run under ``policy`` (each leaf on a tape of its own, or in one GlobalTape
    block; the first tape holds a ``Gradients`` of zeroed buffers when ``preallocated``): its
    leaves, their tapes, their traced handles and its outputs that carry a tape."""
    leaves = [DEV.tensor(v, dtype="float64") for v in program.values]
    grads = tk.Gradients() if preallocated else None
    for x in leaves if preallocated else ():
        grads.alloc(x)
    block = tk.GlobalTape(grads=grads) if policy == "global" else contextlib.nullcontext()
    with block as active:
        tapes = [active if policy == "global" else POLICIES[policy](grads=grads if i == 0 else None)
                 for i, _ in enumerate(leaves)]
        traced = [x.trace(tape) for x, tape in zip(leaves, tapes)]
        outs = run(program, traced, owned if policy == "owned" else shared)
    return leaves, tapes, traced, [o for o in outs if o.tape is not None]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("fault", [Injected("boom"), KeyboardInterrupt()], ids=["error", "interrupt"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=programs(), preallocated=st.booleans(), retain=st.booleans())
def test_a_failing_rule_changes_nothing(policy, where, fault, program, preallocated, retain):
    leaves, tapes, traced, outs = traced_program(program, policy, preallocated)
    records = records_of(outs)
    n = rule_calls(records)
    if not outs or n == 0:
        return
    k = {"first": 0, "middle": n // 2, "last": n - 1}[where]
    seeds = [DEV.tensor(np.ones(o.shape), dtype="float64") for o in outs]
    faults = Faults(records, k, fault)
    before = state(tapes, traced, outs)
    error = type(fault) if isinstance(fault, KeyboardInterrupt) else tk.BackwardError
    with pytest.raises(error) as info:
        tk.backward(outs, seeds, retain=retain)
    assert state(tapes, traced, outs) == before
    if error is tk.BackwardError:
        assert isinstance(info.value.__cause__, Injected)
        assert "Nothing changed" in str(info.value)
    faults.remove()
    got = tk.backward(outs, seeds, retain=retain)
    reference = reference_grads(program, policy, seeds, leaves)
    for x, want in zip(leaves, reference):
        if want is not None:
            np.testing.assert_allclose(got[x], want, rtol=1e-9, atol=1e-12)


def reference_grads(program, policy, seeds, leaves):
    """The gradients of a fresh run of ``program`` on one UnionTape (every record seen)."""
    tape = tk.UnionTape()
    fresh = [x.trace(tape) for x in leaves]
    outs = [o for o in run(program, fresh, shared) if o.tape is not None]
    g = tk.backward(outs, seeds[:len(outs)])
    return [g.get(x) for x in leaves]


# -- the error names the record and the operand --------------------------------------------------
def test_the_error_names_the_record_and_operand_and_a_second_try_works(cpu):
    broken = {"yes": True}

    def rule(g, x):
        if broken["yes"]:
            raise RuntimeError("a bug in my rule")
        return g * 2 * x

    @unary(rule)
    def square(xp, x):
        return x * x, (x,)

    x = cpu.tensor([1.0, 2.0, 3.0], name="x").trace()
    loss = (square(x) * 3.0).sum()
    before = snapshot(loss)
    with pytest.raises(tk.BackwardError, match=r"the backward rule of `t\d+ = square\(x\)` for its "
                                               r"operand x raised RuntimeError: a bug in my rule") as info:
        loss.backward()
    assert isinstance(info.value.__cause__, RuntimeError)
    assert snapshot(loss) == before and len(loss.tape) == 3
    broken["yes"] = False
    np.testing.assert_allclose(loss.backward()[x], [6.0, 12.0, 18.0])


def test_preallocated_buffers_are_zero_again_after_a_failure(cpu):
    w = cpu.tensor(np.ones((2, 2)), name="w")
    grads = tk.Gradients()
    buf = grads.alloc(w)
    x = cpu.tensor(np.ones((3, 2)))
    loss = (x @ w.trace(tk.OwnedTape(grads=grads))).tanh().sum()
    faults = Faults(loss.tape.records, 2, Injected())  # sum, tanh, then matmul's rule for w
    with pytest.raises(tk.BackwardError):
        loss.backward()
    assert not buf.any() and w.id in grads._clean
    faults.remove()
    assert loss.backward()[w] is buf and buf.any()


# -- the forward ---------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["owned", "arc", "union"])
@pytest.mark.parametrize("fault", [Injected("boom"), KeyboardInterrupt()], ids=["error", "interrupt"])
def test_an_interrupt_between_compute_and_record_changes_nothing(policy, fault, monkeypatch):
    a = DEV.tensor([1.0, 2.0]).trace(POLICIES[policy]()) * 2.0
    b = DEV.tensor([3.0, 4.0]).trace(POLICIES[policy]()) * 3.0
    before = [snapshot(a), snapshot(b)]

    def interrupted(*args, **kw):
        raise fault

    monkeypatch.setattr("tapekit.ops.core.Record", interrupted)
    with pytest.raises(type(fault)):
        a * b
    assert [snapshot(a), snapshot(b)] == before
    monkeypatch.undo()
    c = a * b  # the operands can still record
    assert len(c.tape) == 3


@pytest.mark.parametrize("policy", ["owned", "arc", "union"])
def test_a_shape_error_in_the_forward_changes_nothing(policy):
    a = DEV.tensor([1.0, 2.0]).trace(POLICIES[policy]()) * 2.0
    b = DEV.tensor([3.0, 4.0, 5.0]).trace(POLICIES[policy]()) * 3.0
    before = [snapshot(a), snapshot(b)]
    with pytest.raises(tk.ShapeError):
        a * b
    assert [snapshot(a), snapshot(b)] == before
    assert len((a * 1.0).tape) == 2


# -- threads ------------------------------------------------------------------------------------
def test_eight_threads_on_one_tape_while_one_backward_fails():
    """Threads record onto one shared UnionTape while a backward on part of it fails; nothing
    recorded is lost, and a later backward over everything gives every gradient."""
    tape = tk.UnionTape()
    x = DEV.tensor(np.arange(1.0, 9.0), dtype="float64").trace(tape)
    first = (x * 2.0).sum()
    faults = Faults(first.tape.records, 0, Injected())
    outs: list = [None] * 8
    start = threading.Barrier(9)

    def work(i):
        start.wait()
        h = x[i:i + 1]
        for _ in range(50):
            h = h * 1.0 + 0.0
        outs[i] = h.sum()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    start.wait()
    with pytest.raises(tk.BackwardError):
        first.backward()
    for t in threads:
        t.join()
    faults.remove()
    g = tk.backward([first, *outs])
    np.testing.assert_allclose(g[x], np.full(8, 3.0))


def _misfit_then_fit(policy: str, traced_params: bool):
    """Call a model whose second layer does not fit on x, then one that does: the gradients of x and
    of the parameters, and x's tape, as if the failed call never ran."""
    dev = tk.Cpu(seed=0)
    first = tk.nn.Linear(3, 4, device=dev, dtype="float64")
    good = tk.nn.Sequential(first, tk.nn.Tanh(), tk.nn.Linear(4, 2, device=dev, dtype="float64"))
    bad = tk.nn.Sequential(first, tk.nn.Tanh(), tk.nn.Linear(5, 2, device=dev, dtype="float64"))
    x = dev.tensor(np.linspace(-1, 1, 15).reshape(5, 3), dtype="float64", name="x").trace(POLICIES[policy]())
    models = [bad, good]
    if traced_params:  # the parameters on tapes of their own, which the first layer's ops merge with x's
        models = [m.trace(POLICIES[policy]()) for m in models]
    before = str(x.tape), len(x.tape)
    with pytest.raises(tk.ShapeError):
        models[0](x)
    assert (str(x.tape), len(x.tape)) == before
    loss = models[1](x).sum()
    grads = loss.backward()
    return grads[x], [grads[p] for p in models[1].parameters() if p in grads]


@pytest.mark.parametrize("policy, traced_params", [("owned", False), ("arc", False), ("union", False),
                                                    ("arc", True), ("union", True)])  # model.trace refuses OwnedTape
def test_a_model_call_that_fails_at_a_later_layer_leaves_x_usable_with_the_right_gradients(policy, traced_params):
    gx, gp = _misfit_then_fit(policy, traced_params)
    dev = tk.Cpu(seed=0)
    first = tk.nn.Linear(3, 4, device=dev, dtype="float64")
    model = tk.nn.Sequential(first, tk.nn.Tanh(), tk.nn.Linear(4, 2, device=dev, dtype="float64"))
    x = dev.tensor(np.linspace(-1, 1, 15).reshape(5, 3), dtype="float64").trace(POLICIES[policy]())
    if traced_params:
        model = model.trace(POLICIES[policy]())
    grads = model(x).sum().backward()
    np.testing.assert_allclose(gx, grads[x])
    assert len(gp) == len([p for p in model.parameters() if p in grads])
    for got, p in zip(gp, [p for p in model.parameters() if p in grads]):
        np.testing.assert_allclose(got, grads[p])


@pytest.mark.parametrize("policy", ["arc", "union"])
def test_a_failed_module_call_that_merged_a_tape_it_did_not_note_loses_none_of_its_records(policy):
    """The forward reads a traced tensor from a global: putting x's tape back would have cut that
    tensor's records out with the call's, so the tapes are left as the call left them."""
    dev = tk.Cpu(default_dtype="float64")
    w0 = dev.tensor([1.0, 2.0, 3.0])
    scale = w0.trace(POLICIES[policy](leaves=[w0])) * 2.0

    class Scaled(tk.nn.Module):
        def forward(self, x):
            x * scale
            raise Injected

    x = dev.tensor([1.0, 1.0, 1.0]).trace(POLICIES[policy]()) * 1.0
    with pytest.raises(Injected):
        Scaled()(x)
    held = {rec.id for t in (x, scale) for rec in t.tape.records}
    assert scale._record.id in held  # the record that made scale lives on a tape still
    grads = tk.backward([scale.sum(), x.sum()])
    np.testing.assert_array_equal(grads[w0], [2.0, 2.0, 2.0])


def test_a_failed_module_call_leaves_another_threads_records_on_a_shared_tape():
    """Cutting the shared list back to its length at the call's start erased what the other
    thread recorded meanwhile: its completed step lost its gradient."""
    dev = tk.Cpu(default_dtype="float64")
    tape = tk.UnionTape()
    w = dev.tensor([1.0, 2.0, 3.0]).trace(tape)
    started, other_done, losses = threading.Event(), threading.Event(), []

    class Slow(tk.nn.Module):
        def forward(self, x):
            x * w
            started.set()
            other_done.wait(10)
            raise Injected

    def failing():
        with pytest.raises(Injected):
            Slow()(dev.tensor([1.0, 1.0, 1.0]).trace(tape))

    def other():
        started.wait(10)
        losses.append((w * 3.0).sum())
        other_done.set()

    threads = [threading.Thread(target=failing), threading.Thread(target=other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(losses[0].backward()[w], [3.0, 3.0, 3.0])


def test_a_module_called_on_a_moved_handle_says_it_was_moved():
    """all_or_nothing noted the spent handle's tape and failed on it with an AttributeError."""
    dev = tk.Cpu()
    x = dev.randn((4, 3)).trace(tk.OwnedTape())
    x * 2.0
    with pytest.raises(tk.TapeMovedError):
        tk.nn.Linear(3, 2, device=dev)(x)


@pytest.mark.parametrize("policy", ["owned", "union"])
def test_a_module_taking_a_tuple_of_tensors_is_all_or_nothing_for_each(policy):
    dev = tk.Cpu(default_dtype="float64")

    class Pair(tk.nn.Module):
        def forward(self, xs):
            a, b = xs
            a @ dev.tensor(np.ones((3, 2)))
            return b @ dev.tensor(np.ones((5, 2)))  # does not fit

    a = dev.tensor(np.ones((4, 3))).trace(POLICIES[policy]()) * 1.0
    b = dev.tensor(np.ones((4, 3))).trace(POLICIES[policy]()) * 1.0
    before = [snapshot(t) for t in (a, b)]
    with pytest.raises(tk.ShapeError):
        Pair()((a, b))
    assert [snapshot(t) for t in (a, b)] == before
