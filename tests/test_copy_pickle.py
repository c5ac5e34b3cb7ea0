"""Copies and pickles: devices (by place and generator state), untraced tensors (new ids),
``Gradients`` (same ids), modules (independent copies) and optimizers (state that follows the
copied parameters). Refusals of traced handles are in the bad-input catalogue."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tapekit as tk

from .conftest import DEVICE_KINDS, host, make_device

nn = tk.nn


def roundtrip(thing):
    return pickle.loads(pickle.dumps(thing))


# -- devices ------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [lambda: tk.Cpu(seed=3), lambda: tk.Cpu(seed=None, default_dtype="float64"),
                                  lambda: tk.Cpu(seed=1, backend="strict", where="device2")],
                         ids=["numpy", "unseeded-float64", "strict-device2"])
def test_a_pickled_device_is_the_same_place_drawing_the_same_numbers_next(make):
    dev = make()
    dev.randn((4,))
    dev.rand((2, 2))
    back = roundtrip(dev)
    assert type(back) is type(dev) and repr(back) == repr(dev) and back.place == dev.place
    assert back.default_dtype == dev.default_dtype and back.xp is dev.xp
    assert (back.allocations, back.allocated_bytes) == (dev.allocations, dev.allocated_bytes)
    np.testing.assert_array_equal(host(back.randn((5,))), host(dev.randn((5,))))
    np.testing.assert_array_equal(back.rng.integers(0, 1000, 8), dev.rng.integers(0, 1000, 8))


def test_tensors_of_a_device_and_its_unpickled_twin_meet_in_one_op():
    dev = tk.Cpu(seed=0, backend="strict", where="device1")
    twin = roundtrip(dev)
    assert twin is not dev
    np.testing.assert_allclose(host(dev.tensor([1.0, 2.0]) + twin.tensor([3.0, 4.0])), [4.0, 6.0])


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_copies_of_a_device_are_the_device(kind):
    dev = make_device(kind)
    assert copy.copy(dev) is dev and copy.deepcopy(dev) is dev


@pytest.mark.skipif("cuda" not in DEVICE_KINDS, reason="needs CuPy and an NVIDIA GPU")
def test_a_pickled_cuda_device_comes_back_on_the_same_gpu():
    import cupy
    last = cupy.cuda.runtime.getDeviceCount() - 1
    dev = tk.Cuda(device_id=last, seed=5)
    x = dev.randn((3,), name="x")
    back_dev, back_x = roundtrip((dev, x))
    assert back_dev.device_id == last and back_dev.place == dev.place and back_x.device is back_dev
    assert back_x.data.device.id == last and back_x.name == "x"
    np.testing.assert_array_equal(host(back_x), host(x))
    np.testing.assert_array_equal(host(back_dev.randn((4,))), host(dev.randn((4,))))


# -- tensors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
def test_a_pickled_tensor_keeps_values_dtype_device_and_name_with_a_new_id(dev, dtype):
    x = dev.tensor(np.array([[1, 0, 3], [0, 5, 6]]), dtype=dtype, name="x")
    back = roundtrip(x)
    assert back.id != x.id and back.name == "x" and back.tape is None
    assert tk.devices.dtype_name(back.dtype) == dtype and back.shape == (2, 3)
    assert type(back.device) is type(dev) and back.device.place == dev.place
    np.testing.assert_array_equal(host(back), host(x))


def test_one_pickle_shares_one_device_among_its_tensors(cpu):
    a, b = roundtrip((cpu.randn((2,)), cpu.randn((2,))))
    assert a.device is b.device and a.device is not cpu


def test_copy_is_another_handle_of_the_same_tensor(dev):
    x = dev.randn((3,), name="x")
    same = copy.copy(x)
    assert same is not x and same.id == x.id and same.data is x.data and same.tape is None


def test_deepcopy_is_a_tensor_of_its_own_on_the_same_device(dev):
    x = dev.randn((2, 3), name="x")
    before = dev.allocations
    y = copy.deepcopy(x)
    assert y.id != x.id and y.name == "x" and y.device is dev and y.data is not x.data
    np.testing.assert_array_equal(host(y), host(x))
    assert dev.allocations == before + 1
    if dev.xp is np:
        assert not np.shares_memory(y.data, x.data)


def test_deepcopy_of_one_tensor_met_twice_gives_one_copy(cpu):
    x = cpu.randn((3,))
    d = x.detach()  # a tensor of its own sharing x's storage
    a, b, c = copy.deepcopy([x, x, d])
    assert a is b and c.id != a.id and c.data is a.data and cpu.allocations == 2  # randn, one copied storage


def test_gradients_of_a_deep_copy_and_its_original_are_separate(cpu):
    x = cpu.tensor([1.0, 2.0])
    y = copy.deepcopy(x)
    tape = tk.UnionTape()
    g = (x.trace(tape) * y.trace(tape) * x.trace(tape)).sum().backward()
    np.testing.assert_allclose(host(g[x]), [2.0 * 1 * 1, 2.0 * 2 * 2])  # d/dx of x² y
    np.testing.assert_allclose(host(g[y]), [1.0, 4.0])  # x²


# -- Gradients ----------------------------------------------------------------------------------
def partial_gradients(dev):
    """Gradients of a backward that could see only part of y's history (y's entry is incomplete)."""
    x = dev.tensor([1., 2.], name="x").trace(tk.ArcTape())
    y = dev.tensor([4., 5.], name="y").trace(tk.ArcTape())
    zz = y * 2.0
    x + y
    with pytest.warns(tk.IncompleteTapeWarning):
        g = (zz + y).sum().backward()
    return g, y


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_gradients_copies_keep_ids_entries_leaves_and_marks_and_are_independent(dev, how):
    g, y = partial_gradients(dev)
    c = {"copy": copy.copy, "deepcopy": copy.deepcopy, "pickle": roundtrip}[how](g)
    assert list(c) == list(g) and c.leaves == g.leaves
    for tid, arr in g.items():
        np.testing.assert_array_equal(host(c[tid]), host(arr))
    assert not c.is_complete(y) and repr(c) == repr(g)
    assert "no op recorded on the tape" in c.why_missing(10**9)
    c.zero_()
    assert c.is_complete(y) and not g.is_complete(y)
    np.testing.assert_allclose(host(g[y]), [1.0, 1.0])
    c.accumulate(y.id, dev.tensor([5.0, 5.0]).data, dev)
    np.testing.assert_allclose(host(g[y]), [1.0, 1.0])


def test_gradients_copied_with_a_model_keep_naming_the_original_parameters(cpu):
    model = nn.Linear(2, 1, device=cpu)
    grads = model.alloc_grads()
    copied, copied_grads = copy.deepcopy((model, grads))
    assert set(copied_grads) == {p.id for p in model.parameters()}
    assert not set(copied_grads) & {p.id for p in copied.parameters()}


# -- modules ------------------------------------------------------------------------------------
class Tied(nn.Module):
    """Two layers and a weight used twice (tied)."""

    def __init__(self, dev):
        self.first = nn.Linear(3, 3, device=dev, dtype="float64")
        self.norm = nn.LayerNorm(3, device=dev, dtype="float64")
        self.again = self.first.weight

    def forward(self, x):
        return self.norm(self.first(x)) @ self.again


def mlp(dev):
    return nn.Sequential(nn.Linear(3, 4, device=dev, dtype="float64"), nn.Tanh(), nn.Dropout(0.25),
                         nn.Linear(4, 2, device=dev, dtype="float64"))


def values(model):
    return [(name, host(p).copy()) for name, p in model.named_parameters()]


def assert_same_values(a, b):
    assert [n for n, _ in a] == [n for n, _ in b]
    for (_, x), (_, y) in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copied_model_has_new_ids_and_the_same_structure_names_and_values(dev, how):
    model = mlp(dev).eval()
    model.layers[0].weight.name = "w0"
    copied = copy.deepcopy(model) if how == "deepcopy" else roundtrip(model)
    assert repr(copied) == repr(model) and not copied.training and not copied.layers[2].training
    assert not {p.id for p in copied.parameters()} & {p.id for p in model.parameters()}
    assert copied.layers[0].weight.name == "w0"
    assert_same_values(values(copied), values(model))
    assert (copied.parameters()[0].device is dev) == (how == "deepcopy")
    x = dev.randn((5, 3), dtype="float64")
    np.testing.assert_array_equal(host(copied(x)), host(model(x)))


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_tied_weight_stays_tied(cpu, how):
    copied = copy.deepcopy(Tied(cpu)) if how == "deepcopy" else roundtrip(Tied(cpu))
    assert copied.again is copied.first.weight and len(copied.parameters()) == 4


def test_training_a_deep_copy_leaves_the_original_as_it_was(dev):
    model = mlp(dev)
    target = copy.deepcopy(model)
    before = values(model)
    opt = tk.optim.Sgd(target, lr=0.5)
    x = dev.randn((5, 3), dtype="float64")
    for _ in range(3):
        opt.update(target, tk.mse_loss(target(x.trace(tk.OwnedTape(target.alloc_grads()))),
                                       np.zeros((5, 2))).backward())
    assert_same_values(values(model), before)
    assert not np.array_equal(host(target.layers[0].weight), before[0][1])


def test_one_backward_through_a_model_and_its_copy_gives_each_its_own_entries(cpu):
    model = Tied(cpu)
    twin = copy.deepcopy(model)
    x = cpu.randn((2, 3), dtype="float64")
    alone = tk.backward([model.trace(tk.UnionTape())(x).sum()])
    tape = tk.UnionTape()
    both = tk.backward([(model.trace(tape)(x) + twin.trace(tape)(x)).sum()])
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(host(both[p]), host(alone[p]))
        np.testing.assert_allclose(host(both[q]), host(alone[p]))


def test_a_shallow_copy_of_a_model_holds_the_same_parameters(cpu):
    model = mlp(cpu)
    same = copy.copy(model)
    assert same is not model and [p.id for p in same.parameters()] == [p.id for p in model.parameters()]
    assert same.layers is model.layers


def test_dropout_in_a_deep_copy_draws_from_the_devices_one_generator(cpu):
    model = mlp(cpu)
    twin = copy.deepcopy(model)
    x = cpu.ones((4, 3), dtype="float64")
    first = host(model(x))
    state = cpu.rng.bit_generator.state
    second = host(twin(x))
    cpu.rng.bit_generator.state = state
    np.testing.assert_array_equal(host(model(x)), second)
    assert not np.array_equal(first, second)


# -- optimizers ---------------------------------------------------------------------------------
OPTIMIZERS = {
    "sgd": lambda m: tk.optim.Sgd(m, lr=0.1),
    "momentum": lambda m: tk.optim.Sgd(m, lr=0.1, momentum=0.9, weight_decay=0.01),
    "nesterov": lambda m: tk.optim.Sgd(m, lr=0.1, momentum=0.9, nesterov=True),
    "adam": lambda m: tk.optim.Adam(m, lr=0.05, weight_decay=0.01),
}

COPIES = {
    "deepcopy": lambda m, o: copy.deepcopy((m, o)),
    "deepcopy-optimizer-first": lambda m, o: copy.deepcopy((o, m))[::-1],
    "pickle": lambda m, o: roundtrip((m, o)),
    "pickle-optimizer-first": lambda m, o: roundtrip((o, m))[::-1],
}


def train_step(model, opt, x):
    grads = tk.mse_loss(model(x.trace(tk.OwnedTape(model.alloc_grads()))), np.ones((5, 2))).backward()
    opt.update(model, grads)


@pytest.mark.parametrize("how", COPIES)
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_a_copied_optimizer_updates_the_copied_model_as_the_original_would(dev, name, how):
    model = mlp(dev).eval()
    opt = OPTIMIZERS[name](model)
    x = dev.randn((5, 3), dtype="float64")
    for _ in range(2):
        train_step(model, opt, x)
    copied, copied_opt = COPIES[how](model, opt)
    assert type(copied_opt) is type(opt) and repr(copied_opt) == repr(opt)
    assert sorted(copied_opt._state) == sorted(p.id for p in copied.parameters())
    before = values(model)
    for _ in range(3):
        train_step(copied, copied_opt, x)
    assert_same_values(values(model), before)  # the copy's steps leave the original alone
    for _ in range(3):
        train_step(model, opt, x)
    assert_same_values(values(copied), values(model))


def test_adam_step_counts_and_moments_survive_a_pickle(cpu):
    model = mlp(cpu).eval()
    opt = tk.optim.Adam(model)
    x = cpu.randn((5, 3), dtype="float64")
    for _ in range(4):
        train_step(model, opt, x)
    copied, copied_opt = roundtrip((model, opt))
    for p, q in zip(model.parameters(), copied.parameters()):
        mine, theirs = opt._state[p.id][1], copied_opt._state[q.id][1]
        assert theirs["t"] == mine["t"] == 4
        np.testing.assert_array_equal(theirs["m"], mine["m"])
        np.testing.assert_array_equal(theirs["v"], mine["v"])


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_a_shallow_copy_of_an_optimizer_goes_on_for_the_same_model_with_state_of_its_own(cpu, name):
    model = mlp(cpu).eval()
    opt = OPTIMIZERS[name](model)
    x = cpu.randn((5, 3), dtype="float64")
    train_step(model, opt, x)
    branch = copy.copy(opt)
    saved = values(model)
    train_step(model, branch, x)
    after_branch = values(model)
    for p, (_, v) in zip(model.parameters(), saved):  # back to the values before the branch's step
        p.data = v.copy()
    train_step(model, opt, x)  # the original's state did not see the branch's step
    assert_same_values(values(model), after_branch)



def test_a_model_and_its_optimizer_go_to_another_process_and_train_there(tmp_path):
    """What a worker process gets: the pickle of (model, opt), unpickled under its own id clock."""
    dev = tk.Cpu(seed=0)
    model = mlp(dev).eval()
    opt = tk.optim.Adam(model, lr=0.05)
    x = dev.randn((5, 3), dtype="float64")
    train_step(model, opt, x)
    (tmp_path / "job.pkl").write_bytes(pickle.dumps((model, opt, x)))
    worker = ("import pickle, sys, numpy as np, tapekit as tk\n"
              "model, opt, x = pickle.load(open(sys.argv[1], 'rb'))\n"
              "out = model(x.trace(tk.OwnedTape(model.alloc_grads())))\n"
              "opt.update(model, tk.mse_loss(out, np.ones((5, 2))).backward())\n"
              "np.save(sys.argv[2], model(x).numpy())\n")
    subprocess.run([sys.executable, "-c", worker, str(tmp_path / "job.pkl"), str(tmp_path / "out.npy")],
                   check=True, cwd=Path(tk.__file__).parent.parent)
    train_step(model, opt, x)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), host(model(x)))
