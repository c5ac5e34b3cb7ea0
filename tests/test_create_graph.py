"""``backward(..., create_graph=True)``: the backward recorded on the outputs' tape under every
policy, so a gradient is a traced tensor that a second backward differentiates; and all or nothing,
with faults injected into the rules as for the first-order backward."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import tapekit as tk

from .conftest import POLICIES, exp2_by_hand
from .test_all_or_nothing import Faults, reference_grads, records_of, rule_calls, state, traced_program
from .test_fuzz_programs import DEV, programs

X = np.array([0.5, -1.0, 2.0])


def second_of_tanh_chain(x: np.ndarray) -> np.ndarray:
    """``d/dx sum(d/dx sum(tanh(x) * x))``: f' = tanh + x s, f'' = 2 s - 2 x t s with s = 1 - t²."""
    t = np.tanh(x)
    s = 1 - t * t
    return 2 * s - 2 * x * t * s


def traced_under(policy: str, x: tk.Tensor):
    """``x`` on a fresh tape of ``policy`` (two handles under OwnedTape: one retaped) and the block
    a GlobalTape needs."""
    if policy == "global":
        tape = tk.GlobalTape()
        with tape:
            t = x.trace(tape)
        return tape, (t, t)
    t = x.trace(POLICIES[policy]())
    return t.tape, ((t, t.retaped()) if policy == "owned" else (t, t))


@pytest.mark.parametrize("policy", POLICIES)
def test_a_second_backward_differentiates_the_gradient_under_every_policy(policy, dev):
    x = dev.tensor(X, dtype="float64")
    tape, (a, b) = traced_under(policy, x)
    with tape if policy == "global" else contextlib.nullcontext():
        loss = (a.tanh() * b).sum()
    forward_records = len(loss.tape)
    g = loss.backward(create_graph=True)
    assert g[x].tape is not None and g[x].tape.same_as(loss.tape), "the backward's records go onto the outputs' tape"
    assert len(loss.tape) > forward_records, "the forward's records are kept, the backward's follow them"
    t = np.tanh(X)
    np.testing.assert_allclose(g[x].numpy(), t + X * (1 - t * t))
    h = g[x].sum().backward()
    np.testing.assert_allclose(h[x], second_of_tanh_chain(X))
    assert len(tape) == 0, "the second backward drains the tape of both the forward's and the backward's records"


@pytest.mark.parametrize("policy", POLICIES)
def test_inside_and_after_a_global_block_or_any_policy_third_order_works(policy):
    x = tk.Cpu().tensor(0.3, dtype="float64")
    tape, (a, _) = traced_under(policy, x)
    with tape if policy == "global" else contextlib.nullcontext():
        y = a.sin()
        g1 = y.backward(create_graph=True)[x]  # cos
    g2 = g1.backward(create_graph=True)[x]  # -sin
    g3 = g2.backward()[x]  # -cos
    assert np.isclose(g3, -np.cos(0.3))


def test_under_owned_tape_a_gradient_is_an_owned_handle_moved_by_its_first_use():
    x = tk.Cpu().tensor(X, dtype="float64")
    g = x.trace(tk.OwnedTape()).exp().sum().backward(create_graph=True)[x]
    first = g * 2.0
    with pytest.raises(tk.TapeMovedError):
        g * 3.0
    assert first.sum().backward()[x].shape == (3,)


def test_held_entries_and_leaf_sets_are_kept_as_a_first_order_backward_keeps_them():
    dev = tk.Cpu()
    x, w = dev.tensor(X, dtype="float64"), dev.tensor([1.0, 2.0, 3.0], dtype="float64")
    grads = tk.Gradients()
    grads.alloc(x)[...] = 1.0  # an entry the tape held before: part of the gradient
    tape = tk.UnionTape(grads=grads, leaves=[x])
    g = (x.trace(tape) * x.trace(tape) * w).sum().backward(create_graph=True)
    np.testing.assert_allclose(g[x].numpy(), 2 * X * w.numpy() + 1.0)
    with pytest.raises(tk.MissingGradientError):
        g[w]
    np.testing.assert_allclose(g[x].sum().backward()[x], 2 * w.numpy())


def test_an_op_without_a_recorded_rule_says_so_and_changes_nothing():
    x = tk.Cpu().tensor(X + 3.0, dtype="float64")
    loss = exp2_by_hand(x.trace(tk.UnionTape())).sum()
    before = len(loss.tape)
    with pytest.raises(tk.BackwardError) as info:
        loss.backward(create_graph=True)
    assert isinstance(info.value.__cause__, tk.SecondOrderError)
    assert "xp.exp2" in str(info.value) and "second derivative" in str(info.value)
    assert len(loss.tape) == before
    np.testing.assert_allclose(loss.backward()[x], np.exp2(X + 3.0) * np.log(2.0))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("fault", [RuntimeError("boom"), KeyboardInterrupt()], ids=["error", "interrupt"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=programs(), preallocated=st.booleans())
def test_a_failing_rule_of_a_recorded_backward_changes_nothing(policy, where, fault, program, preallocated):
    leaves, tapes, traced, outs = traced_program(program, policy, preallocated)
    records = records_of(outs)
    n = rule_calls(records)
    if not outs or n == 0:
        return
    seeds = [DEV.tensor(np.ones(o.shape), dtype="float64") for o in outs]
    faults = Faults(records, {"first": 0, "middle": n // 2, "last": n - 1}[where], fault)
    before = state(tapes, traced, outs)
    error = type(fault) if isinstance(fault, KeyboardInterrupt) else tk.BackwardError
    with pytest.raises(error):
        tk.backward(outs, seeds, create_graph=True)
    assert state(tapes, traced, outs) == before
    faults.remove()
    got = tk.backward(outs, seeds, create_graph=True)
    for x, want in zip(leaves, reference_grads(program, policy, seeds, leaves)):
        if want is not None:
            assert isinstance(got[x], tk.Tensor) and got[x].tape is not None
            np.testing.assert_allclose(got[x].numpy(), want, rtol=1e-9, atol=1e-12)


def test_an_optimizer_steps_with_a_recorded_backwards_gradients_as_with_a_plain_one():
    dev = tk.Cpu(seed=0, default_dtype="float64")
    models = [tk.nn.Linear(3, 2, device=dev) for _ in range(2)]
    models[1].weight.data, models[1].bias.data = models[0].weight.data.copy(), models[0].bias.data.copy()
    x, target = dev.tensor(np.ones((4, 3))), dev.tensor(np.zeros((4, 2)))
    for model, create_graph in zip(models, (False, True)):
        loss = tk.mse_loss(model.trace(tk.UnionTape())(x), target)
        tk.optim.Sgd(model, lr=0.1).update(model, loss.backward(create_graph=create_graph))
    np.testing.assert_array_equal(models[0].weight.numpy(), models[1].weight.numpy())


@pytest.mark.parametrize("policy", POLICIES)
def test_the_tape_that_holds_a_recorded_backward_is_named_as_before_it_under_every_policy(policy):
    x = tk.Cpu().tensor(X, dtype="float64")
    tape, (a, b) = traced_under(policy, x)
    with tape if policy == "global" else contextlib.nullcontext():
        loss = (a.tanh() * b).sum()
    before = loss.tape.label, loss.tape._store()._state()
    g = loss.backward(create_graph=True)[x]
    assert (g.tape.label, g.tape._store()._state()) == before, "the rules' scratch tape is no tape of the program"


def test_a_seed_that_depends_on_the_input_is_differentiated_through():
    """backward(seed=s, create_graph=True) starts from s itself: inside tk.jvp its tangent flows on
    (h(x) = x (1 - tanh(x)^2) has h'(x) = 1 - tanh^2 - 2 x tanh (1 - tanh^2)), and traced on the
    output's tape it gets a gradient (d/du of sum(u (1 - tanh(x)^2)) is 1 - tanh(x)^2)."""
    dev = tk.Cpu(default_dtype="float64")
    x0, v0 = np.array([0.5, -1.0, 2.0]), np.array([0.3, -0.2, 1.0])

    def h(x):
        return x.trace(tk.UnionTape()).tanh().backward(seed=x, create_graph=True)[x]

    t = np.tanh(x0)
    _, tangent = tk.jvp(h, (dev.tensor(x0),), (dev.tensor(v0),))
    np.testing.assert_allclose(tangent.numpy(), (1 - t ** 2 - 2 * x0 * t * (1 - t ** 2)) * v0)
    x, u = dev.tensor(x0), dev.tensor(v0)
    tape = tk.UnionTape()
    xt, ut = x.trace(tape), u.trace(tape)
    g = xt.tanh().backward(seed=ut, create_graph=True)[x]
    np.testing.assert_allclose(g.sum().backward()[u], 1 - t ** 2)


def test_a_seed_traced_on_another_tape_is_refused_not_made_a_silent_constant():
    """Its records would be split from the recorded backward, so a gradient through it would be zero:
    backward(seed=s, create_graph=True) and tk.vjp's vjp_fn given a traced cotangent say so, and
    change no tape; the seed's values as a constant (s.detach()) still work."""
    dev = tk.Cpu(default_dtype="float64")
    x, u = dev.tensor([0.5, -1.0]).trace(tk.UnionTape()), dev.tensor([1.0, 2.0]).trace(tk.UnionTape())
    y = x.tanh()
    before = len(y.tape)
    with pytest.raises(tk.BackwardError, match="traced on another tape"):
        y.backward(seed=u, create_graph=True)
    assert len(y.tape) == before
    np.testing.assert_allclose(y.backward(seed=u.detach(), create_graph=True)[x].numpy(),
                               [1.0, 2.0] * (1 - np.tanh([0.5, -1.0]) ** 2))
    _, pull = tk.vjp(lambda t: t.tanh() * 2.0, dev.tensor([0.5, -1.0]))
    with pytest.raises(tk.BackwardError, match="cotangent given to vjp_fn"):
        tk.grad(lambda c: pull(c)[0].sum())(dev.tensor([1.0, 1.0]))


@pytest.mark.parametrize("policy", ["arc", "union", "global"])
def test_a_seed_computed_from_the_output_on_its_own_tape_is_differentiated_under_every_policy(policy):
    """y.backward(seed=2 y, create_graph=True) of y = sin(x) gives 2 sin(x) cos(x) = sin(2x), whose
    gradient is 2 cos(2x): under ArcTape and in a GlobalTape block the seed met the recorded
    backward's scratch UnionTape, and one op cannot mix tape policies."""
    dev = tk.Cpu(default_dtype="float64")
    x0 = np.array([0.3, -0.8, 1.1])
    with tk.GlobalTape() if policy == "global" else contextlib.nullcontext():
        x = dev.tensor(x0)
        t = x if policy == "global" else x.trace(POLICIES[policy]())
        y = t.sin()
        g = y.backward(seed=y * 2.0, create_graph=True)[x]
        np.testing.assert_allclose(g.numpy(), np.sin(2 * x0), atol=1e-12)
        np.testing.assert_allclose(np.asarray(g.sum().backward()[x]), 2 * np.cos(2 * x0), atol=1e-12)


def test_a_seed_on_the_outputs_tape_in_another_dtype_is_refused_for_its_dtype():
    """Not said to be 'traced on another tape': it is on the output's, in float32 for a float64 output."""
    dev = tk.Cpu(default_dtype="float64")
    tape = tk.UnionTape()
    y = dev.tensor([0.3, -0.8]).trace(tape).sin()
    seed = dev.tensor([1.0, 2.0], dtype="float32").trace(tape) * 2.0
    with pytest.raises(tk.BackwardError, match="traced in float32, but .* is float64"):
        y.backward(seed=seed, create_graph=True)
