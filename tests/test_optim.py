"""Optimizers: each update rule against hand-computed numbers, partial updates with
UnusedParamsError, and argument and shape errors that change nothing."""

from __future__ import annotations

import numpy as np
import pytest

import tapekit as tk

from .conftest import host


class Pair(tk.nn.Module):
    """Two parameters: ``a = [1, -2]`` and ``b = [0.5]`` (float64)."""

    def __init__(self, dev):
        self.a = dev.tensor([1.0, -2.0], dtype="float64")
        self.b = dev.tensor([0.5], dtype="float64")


def grads_of(model: Pair, dev, a=None, b=None) -> tk.Gradients:
    """Gradients whose entries are exactly ``a`` and ``b`` (from a real backward of sum(param * value))."""
    view = model.trace(tk.UnionTape())
    terms = [(p * dev.tensor(v, dtype="float64")).sum() for p, v in ((view.a, a), (view.b, b)) if v is not None]
    return tk.backward(terms)


G1, G2 = [0.5, 1.0], [-1.0, 2.0]


def run(dev, make_opt, steps):
    model = Pair(dev)
    opt = make_opt(model)
    for g in steps:
        opt.update(model, grads_of(model, dev, a=g, b=[0.0]))
    return host(model.a)


@pytest.mark.parametrize("make_opt, steps, expected", [
    # w -= lr * g: [1, -2] - 0.1 * [0.5, 1] = [0.95, -2.1]; again: [0.9, -2.2]
    (lambda m: tk.optim.Sgd(m, lr=0.1), [G1, G1], [0.9, -2.2]),
    # v = g = [0.5, 1] -> [0.95, -2.1]; v = 0.9 * [0.5, 1] + [0.5, 1] = [0.95, 1.9] -> [0.855, -2.29]
    (lambda m: tk.optim.Sgd(m, lr=0.1, momentum=0.9), [G1, G1], [0.855, -2.29]),
    # step g + 0.9 v = [0.95, 1.9] -> [0.905, -2.19]; v = [0.95, 1.9], step [1.355, 2.71] -> [0.7695, -2.461]
    (lambda m: tk.optim.Sgd(m, lr=0.1, momentum=0.9, nesterov=True), [G1, G1], [0.7695, -2.461]),
    # g + 0.1 w = [0.5 + 0.1, 1 - 0.2] = [0.6, 0.8] -> [1 - 0.06, -2 - 0.08]
    (lambda m: tk.optim.Sgd(m, lr=0.1, weight_decay=0.1), [G1], [0.94, -2.08]),
    # t = 1: m̂ = g, v̂ = g², step = g / (|g| + eps) = [1, 1] (to 1e-8) -> [0.9, -2.1]
    (lambda m: tk.optim.Adam(m, lr=0.1), [G1], [0.9, -2.1]),
    # t = 2 with g = [-1, 2]: m = [-0.055, 0.29], v = [0.00124975, 0.004999], m̂ = m / 0.19, v̂ = v / 0.001999,
    # m̂ / sqrt(v̂) = [-0.3661035, 0.9651820] -> [0.9 + 0.03661035, -2.1 - 0.0965182]
    (lambda m: tk.optim.Adam(m, lr=0.1), [G1, G2], [0.93661035, -2.1965182]),
    # g + 0.5 w = [0.5 + 0.5, 1 - 1] = [1, 0]: step [1, 0] -> [0.9, -2]
    (lambda m: tk.optim.Adam(m, lr=0.1, weight_decay=0.5), [G1], [0.9, -2.0]),
    # beta1 = 0: m̂ = g; beta2 = 0.5, t = 1: v̂ = g² -> [0.9, -2.1]
    (lambda m: tk.optim.Adam(m, lr=0.1, betas=(0.0, 0.5)), [G1], [0.9, -2.1]),
])
def test_update_rules_match_hand_computed_numbers(dev, make_opt, steps, expected):
    np.testing.assert_allclose(run(dev, make_opt, steps), expected, rtol=1e-7)


def test_updates_keep_ids_dtypes_and_reused_gradient_buffers_working(dev):
    model = tk.nn.Linear(3, 2, device=dev)
    ids = [p.id for p in model.parameters()]
    opt = tk.optim.Adam(model, lr=0.01)
    x, target = dev.randn((4, 3)), dev.zeros((4, 2))
    grads = model.alloc_grads()
    losses = []
    for _ in range(20):
        model.zero_grads(grads)
        loss = tk.mse_loss(model(x.trace(tk.OwnedTape(grads))), target)
        losses.append(loss.item())
        grads = loss.backward()
        opt.update(model, grads)
    assert [p.id for p in model.parameters()] == ids
    assert all(p.dtype == dev.dtype("float32") for p in model.parameters())
    assert losses[-1] < losses[0]


def test_updating_through_a_traced_view_updates_the_model(dev):
    model = Pair(dev)
    view = model.trace(tk.UnionTape())
    tk.optim.Sgd(model, lr=1.0).update(view, grads_of(model, dev, a=[1.0, 1.0], b=[1.0]))
    assert host(model.a).tolist() == [0.0, -3.0] and host(model.b).tolist() == [-0.5]


def test_a_parameter_without_gradient_does_not_stop_the_others(dev):
    model = Pair(dev)
    opt = tk.optim.Adam(model, lr=0.1)
    with pytest.raises(tk.UnusedParamsError, match=r"no gradient for 1 parameter\(s\): b; the other parameters were "
                                                   r"updated"):
        opt.update(model, grads_of(model, dev, a=G1))
    np.testing.assert_allclose(host(model.a), [0.9, -2.1])
    assert host(model.b).tolist() == [0.5]
    opt.update(model, grads_of(model, dev, a=G1, b=[2.0]))  # b's first step: Adam's t counts per parameter
    np.testing.assert_allclose(host(model.b), [0.4])
    model.zero_grads(grads := model.alloc_grads())
    opt.update(model, grads)  # never the case after alloc_grads


def test_gradients_of_the_wrong_shape_change_nothing(dev):
    model = Pair(dev)
    grads = grads_of(model, dev, a=G1)
    grads.accumulate(model.b.id, dev.zeros((3,), dtype="float64").data, dev)
    with pytest.raises(tk.ShapeError, match=r"gradient for b has shape \(3,\) but the parameter has \(1,\)"):
        tk.optim.Sgd(model, lr=0.1).update(model, grads)
    assert host(model.a).tolist() == [1.0, -2.0]


@pytest.mark.parametrize("make, match", [
    (lambda m: tk.optim.Sgd(m, lr=0), "lr must be a positive number, got 0"),
    (lambda m: tk.optim.Sgd(m, lr=-0.1), "lr must be"),
    (lambda m: tk.optim.Adam(m, lr=float("nan")), "lr must be"),
    (lambda m: tk.optim.Sgd(m, lr=0.1, momentum=-0.5), "momentum"),
    (lambda m: tk.optim.Sgd(m, lr=0.1, nesterov=True), "nesterov=True needs a positive momentum"),
    (lambda m: tk.optim.Sgd(m, lr=0.1, weight_decay=-1), "weight_decay"),
    (lambda m: tk.optim.Adam(m, betas=(0.9, 1.0)), "betas"),
    (lambda m: tk.optim.Adam(m, betas=(0.9,)), "betas must be two numbers"),
    (lambda m: tk.optim.Adam(m, eps=0), "eps"),
    (lambda m: tk.optim.Sgd([m.a], lr=0.1), "takes the model to train"),
])
def test_bad_optimizer_arguments_raise_invalid_argument(cpu, make, match):
    with pytest.raises(tk.InvalidArgumentError, match=match):
        make(Pair(cpu))


def test_update_takes_gradients(cpu):
    model = Pair(cpu)
    with pytest.raises(tk.InvalidArgumentError, match="Gradients"):
        tk.optim.Sgd(model, lr=0.1).update(model, {model.a.id: np.ones(2)})


def test_optimizer_reprs(cpu):
    model = Pair(cpu)
    assert repr(tk.optim.Sgd(model, lr=0.1, momentum=0.9)) == \
        "Sgd(lr=0.1, momentum=0.9, nesterov=False, weight_decay=0.0)"
    assert repr(tk.optim.Adam(model)) == "Adam(lr=0.001, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.0)"


def test_the_state_of_the_models_parameters_exists_before_the_first_update(cpu):
    """So the first call of a compiled training step already sees the state it updates, and its
    second call replays instead of recording again."""
    model = tk.nn.Linear(3, 2, device=cpu)
    adam, momentum = tk.optim.Adam(model), tk.optim.Sgd(model, lr=0.1, momentum=0.9)
    for p in model.parameters():
        assert adam._state[p.id][1]["t"] == 0 and not adam._state[p.id][1]["m"].any()
        assert momentum._state[p.id][1]["velocity"].shape == p.shape


def test_a_zero_entry_is_a_gradient_and_a_missing_one_is_not(dev):
    """After a step that moved b, a step whose entry for b is zeros still moves it (momentum keeps
    going, as after PyTorch's zero_grad(set_to_none=False)); a step without an entry for b leaves it."""
    model = Pair(dev)
    opt = tk.optim.Sgd(model, lr=0.1, momentum=0.9)
    opt.update(model, grads_of(model, dev, a=G1, b=[1.0]))
    np.testing.assert_allclose(host(model.b), [0.4])
    opt.update(model, grads_of(model, dev, a=G1, b=[0.0]))
    np.testing.assert_allclose(host(model.b), [0.4 - 0.1 * 0.9])
    with pytest.raises(tk.UnusedParamsError, match="b"):
        opt.update(model, grads_of(model, dev, a=G1))
    np.testing.assert_allclose(host(model.b), [0.31])


@pytest.mark.parametrize("make, setting, value", [
    (lambda m: tk.optim.Sgd(m, 0.1), "lr", float("nan")), (lambda m: tk.optim.Sgd(m, 0.1), "lr", "a"),
    (lambda m: tk.optim.Sgd(m, 0.1), "momentum", -1.0), (lambda m: tk.optim.Adam(m), "eps", 0.0),
    (lambda m: tk.optim.Adam(m), "betas", (1.0, 0.999)), (lambda m: tk.optim.Adam(m), "betas", 5),
    (lambda m: tk.optim.Sgd(m, 0.1), "weight_decay", -1.0),
], ids=["lr nan", "lr text", "momentum -1", "eps 0", "beta 1", "betas 5", "weight_decay -1"])
def test_a_setting_changed_after_the_optimizer_was_made_is_checked_before_the_next_step(make, setting, value):
    """The constructor's checks were skipped: lr = nan turned the weights into NaN silently."""
    model = tk.nn.Linear(2, 1, dtype="float64")
    opt = make(model)
    x = model.weight.device.tensor([[1.0, 2.0]], dtype="float64")
    grads = model(x.trace(tk.OwnedTape(model.alloc_grads()))).sum().backward()
    before = model.weight.numpy().copy()
    setattr(opt, setting, value)
    with pytest.raises(tk.InvalidArgumentError, match=setting):
        opt.update(model, grads)
    np.testing.assert_array_equal(model.weight.numpy(), before)


def test_momentum_set_after_an_sgd_made_without_it_starts_from_zero_velocity():
    model = tk.nn.Linear(2, 1, dtype="float64")
    opt = tk.optim.Sgd(model, 0.1)
    opt.momentum = 0.9
    x = model.weight.device.tensor([[1.0, 2.0]], dtype="float64")
    before = model.weight.numpy().copy()
    grads = model(x.trace(tk.OwnedTape(model.alloc_grads()))).sum().backward()
    opt.update(model, grads)
    np.testing.assert_allclose(model.weight.numpy(), before - 0.1 * grads[model.weight])
