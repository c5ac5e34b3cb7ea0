"""Modules: parameters found by attribute, layers (values and gradients), both ways to tag a step,
preallocated gradients, the learned constant (P8), footprints, and model files."""

from __future__ import annotations

import numpy as np
import pytest

import tapekit as tk

from .conftest import host

nn = tk.nn


def check_layer(layer: nn.Module, *inputs: tk.Tensor) -> None:
    """Finite differences against backward for the layer's inputs and every parameter (float64)."""
    params = layer.parameters()

    def f(*args):
        xs, ps = args[:len(inputs)], args[len(inputs):]
        swap = {p.id: q for p, q in zip(params, ps)}
        return layer._view(lambda p: swap[p.id])(*xs)

    tk.check_grads(f, *inputs, *params)


class Block(nn.Module):
    """A model with a nested module, a list of modules, a tied weight and a private tensor."""

    def __init__(self, dev):
        self.first = nn.Linear(3, 4, device=dev)
        self.stack = [nn.Linear(4, 4, device=dev), nn.Sequential(nn.Tanh(), nn.Linear(4, 2, device=dev))]
        self.tied = self.first.weight
        self._scratch = dev.zeros(3)

    def forward(self, x):
        return self.stack[1](self.stack[0](self.first(x)))


# -- parameters -------------------------------------------------------------------------------------
def test_parameters_are_found_by_attribute_through_nested_modules_and_lists(cpu):
    block = Block(cpu)
    names = [name for name, _ in block.named_parameters()]
    assert names == ["first.weight", "first.bias", "stack.0.weight", "stack.0.bias",
                     "stack.1.layers.1.weight", "stack.1.layers.1.bias"]
    assert [p.id for p in block.parameters()] == [p.id for _, p in block.named_parameters()]
    assert block.tied.id not in [p.id for p in block.parameters()[1:]]  # a tied tensor appears once
    assert block._scratch.id not in {p.id for p in block.parameters()}
    assert block(cpu.randn((5, 3))).shape == (5, 2)


def test_linear_computes_x_at_weight_plus_bias(dev):
    layer = nn.Linear(3, 2, device=dev)
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    expected = x @ host(layer.weight) + host(layer.bias)
    np.testing.assert_allclose(host(layer(dev.tensor(x))), expected, rtol=1e-6)
    assert nn.Linear(3, 2, bias=False, device=dev).parameters()[0].shape == (3, 2)
    assert len(nn.Linear(3, 2, bias=False, device=dev).parameters()) == 1
    bound = 1 / np.sqrt(3)
    assert np.all(np.abs(host(layer.weight)) <= bound)


def _layers(dev):
    f64 = dict(device=dev, dtype="float64")
    return {
        "linear": (nn.Linear(3, 2, **f64), (4, 3)),
        "linear-no-bias": (nn.Linear(3, 2, bias=False, **f64), (4, 3)),
        "relu": (nn.ReLU(), (4, 3)),
        "tanh": (nn.Tanh(), (4, 3)),
        "sigmoid": (nn.Sigmoid(), (4, 3)),
        "sequential": (nn.Sequential(nn.Linear(3, 4, **f64), nn.Tanh(), nn.Linear(4, 2, **f64)), (4, 3)),
        "layernorm": (nn.LayerNorm(3, **f64), (4, 3)),
        "residual": (nn.Residual(nn.Sequential(nn.Linear(3, 3, **f64), nn.Tanh())), (4, 3)),
        "constant": (nn.Constant((2, 3), **f64), (4, 3)),
    }


@pytest.mark.parametrize("name", ["linear", "linear-no-bias", "relu", "tanh", "sigmoid", "sequential", "layernorm",
                                  "residual", "constant"])
def test_layer_gradients_match_finite_differences(dev, name):
    layer, shape = _layers(dev)[name]
    for p in layer.parameters():  # move LayerNorm's scale and shift away from 1 and 0
        p.data = p.data + dev.tensor(dev.rng.standard_normal(p.shape) * 0.3, dtype="float64").data
    check_layer(layer, dev.randn(shape, dtype="float64"))


def test_embedding_picks_rows_and_sums_gradients_of_repeated_indices(dev):
    emb = nn.Embedding(5, 3, device=dev, dtype="float64")
    idx = np.array([[0, 3], [3, 4]])
    out = emb(dev.tensor(idx))
    assert out.shape == (2, 2, 3)
    np.testing.assert_allclose(host(out), host(emb.weight)[idx])
    g = emb.trace(tk.UnionTape()).forward(idx).sum().backward()
    np.testing.assert_allclose(host(g[emb.weight]), np.array([1, 0, 0, 2, 1])[:, None] * np.ones((5, 3)))
    tk.check_grads(lambda w: emb._view(lambda p: w)(idx), emb.weight)
    with pytest.raises(tk.DTypeError, match="integer indices"):
        emb(dev.tensor([0.0, 1.0]))
    with pytest.raises(tk.IndexingError):
        emb(np.array([5]))
    with pytest.raises(tk.IndexingError, match=r"indices range from -1 to 0, but it has 5 rows \(valid: 0 to 4\)"):
        emb(np.array([-1, 0]))  # a negative index is a bug in the data, not a row counted from the end


def test_layernorm_normalises_the_last_axis(dev):
    norm = nn.LayerNorm(6, device=dev, dtype="float64")
    out = host(norm(dev.randn((4, 6), dtype="float64") * 5 + 3))
    np.testing.assert_allclose(out.mean(-1), 0, atol=1e-12)
    np.testing.assert_allclose(out.var(-1), 1, atol=1e-4)


def test_dropout_zeroes_and_rescales_in_training_and_is_the_identity_in_eval(dev):
    drop = nn.Dropout(0.25)
    x = dev.ones((200, 50))
    out = host(drop(x))
    assert set(np.unique(out)) == {0.0, np.float32(1 / 0.75)}
    assert abs((out == 0).mean() - 0.25) < 0.02
    drop.eval()
    assert drop(x) is x
    for p in (-0.1, 1.0):
        with pytest.raises(tk.InvalidArgumentError):
            nn.Dropout(p)


def test_dropout_gradient_is_its_mask(dev):
    drop = nn.Dropout(0.5)

    def f(x):
        dev.rng = np.random.default_rng(7)  # the same mask on every call
        return drop(x)

    tk.check_grads(f, dev.randn((3, 4), dtype="float64"))


def test_train_and_eval_reach_every_submodule(cpu):
    model = nn.Sequential(nn.Linear(2, 2, device=cpu), nn.Residual(nn.Dropout(0.5)))
    assert model.eval() is model
    assert not model[1].module.training and not model[0].training
    model.train()
    assert model[1].module.training


def test_repr_shows_the_architecture(cpu):
    model = nn.Sequential(nn.Linear(64, 10, device=cpu), nn.ReLU(), nn.Dropout(0.1))
    assert repr(model) == ("Sequential(\n  (layers.0): Linear(in_features=64, out_features=10, bias=True)\n"
                           "  (layers.1): ReLU()\n  (layers.2): Dropout(p=0.1)\n)")


def test_bad_constructor_arguments_raise_clear_errors(cpu):
    with pytest.raises(tk.InvalidArgumentError, match="in_features"):
        nn.Linear(0, 3, device=cpu)
    with pytest.raises(tk.InvalidArgumentError, match="argument 1 is a int"):
        nn.Sequential(nn.ReLU(), 3)
    with pytest.raises(tk.InvalidArgumentError, match="eps"):
        nn.LayerNorm(3, eps=0)
    for eps in (True, float("inf"), "1e-5"):
        with pytest.raises(tk.InvalidArgumentError, match="LayerNorm's eps must be a positive number"):
            nn.LayerNorm(3, eps=eps)
    with pytest.raises(tk.InvalidArgumentError, match=r"Dropout's p must be a number in \[0, 1\), got '0.5'"):
        nn.Dropout("0.5")


# -- tagging ----------------------------------------------------------------------------------------
def test_trace_gives_a_view_whose_parameters_carry_the_tape(cpu):
    model = nn.Sequential(nn.Linear(3, 2, device=cpu), nn.Tanh())
    tape = tk.UnionTape()
    view = model.trace(tape)
    assert [p.id for p in view.parameters()] == [p.id for p in model.parameters()]
    assert all(p.tape is tape for p in view.parameters())
    assert all(p.tape is None for p in model.parameters())
    assert view[0].weight.data is model[0].weight.data


def test_trace_with_an_owned_tape_is_refused_and_suggests_union_tape(cpu):
    model = nn.Linear(3, 2, device=cpu)
    with pytest.raises(tk.TapePolicyError, match="UnionTape"):
        model.trace(tk.OwnedTape())


def _mixed_model(dev):
    f64 = dict(device=dev, dtype="float64")
    return nn.Sequential(nn.LayerNorm(4, **f64), nn.Linear(4, 5, **f64),
                         nn.Residual(nn.Sequential(nn.Linear(5, 5, **f64), nn.Tanh())), nn.Linear(5, 3, **f64))


@pytest.mark.parametrize("tagging", ["owned-input", "union-input", "union-params", "arc-params", "global-params"])
def test_every_way_to_tag_gives_the_same_gradients(dev, tagging):
    model = _mixed_model(dev)
    x, labels = dev.randn((6, 4), dtype="float64"), np.array([0, 1, 2, 0, 1, 2])
    reference = tk.cross_entropy(model.trace(tk.UnionTape())(x), labels).backward()
    if tagging == "owned-input":
        grads = tk.cross_entropy(model(x.trace(tk.OwnedTape(model.alloc_grads()))), labels).backward()
    elif tagging == "union-input":
        grads = tk.cross_entropy(model(x.trace(tk.UnionTape())), labels).backward()
    elif tagging == "union-params":
        grads = tk.cross_entropy(model.trace(tk.UnionTape(model.alloc_grads()))(x), labels).backward()
    elif tagging == "arc-params":
        grads = tk.cross_entropy(model.trace(tk.ArcTape())(x), labels).backward()
    else:
        with tk.GlobalTape() as tape:
            loss = tk.cross_entropy(model.trace(tape)(x), labels)
        grads = tape.backward(loss)
    for name, p in model.named_parameters():
        np.testing.assert_allclose(host(grads[p]), host(reference[p]), rtol=1e-10, err_msg=name)


def test_step_footprint_parameter_tagging_records_only_what_parameters_need(cpu):
    x, labels = cpu.randn((8, 6)), np.arange(8) % 3

    def loss(out):
        return tk.cross_entropy(out, labels)

    mlp = nn.Sequential(nn.Linear(6, 5, device=cpu), nn.ReLU(), nn.Linear(5, 3, device=cpu))
    by_input, by_params = (nn.step_footprint(mlp, x, loss, t) for t in ("input", "parameters"))
    assert by_input.ops == by_params.ops == ("matmul", "add", "relu", "matmul", "add", "cross_entropy")
    normed = nn.Sequential(nn.LayerNorm(6, device=cpu), *mlp)
    by_input, by_params = (nn.step_footprint(normed, x, loss, t) for t in ("input", "parameters"))
    # the normalisation of the input touches no parameter: only input tagging records it
    assert by_input.ops[:7] == ("mean", "sub", "mul", "mean", "add", "sqrt", "div")
    assert by_params.ops == ("mul", "add") + by_input.ops[9:]
    assert by_params.records == by_input.records - 7
    assert by_params.nbytes < by_input.nbytes
    assert str(by_params).startswith(f"parameters tagging: 8 records, {by_params.nbytes:,} bytes (mul, add, matmul")
    with pytest.raises(tk.InvalidArgumentError, match="tagging"):
        nn.step_footprint(mlp, x, loss, "weights")


# -- the learned constant (P8) ----------------------------------------------------------------------
def test_p8_learned_constant_trains_tagged_either_way(dev):
    c = tk.nn.Constant((2,), device=dev); opt = tk.optim.Sgd(c, lr=0.1); target = dev.tensor([3., -1.])
    for _ in range(200):                                             # parameters carry the tape
        opt.update(c, tk.mse_loss(c.trace(tk.UnionTape())(dev.tensor([0.])), target).backward())
    assert np.allclose(host(c.value), [3, -1])
    c.value.data = dev.zeros(2).data
    for _ in range(200):                                             # the input carries the tape (dfdx style:
        x = dev.tensor([0.]).trace(tk.OwnedTape(c.alloc_grads()))   #  the module moves it onto its parameter)
        opt.update(c, tk.mse_loss(c(x), target).backward())
    assert np.allclose(host(c.value), [3, -1])


def test_constant_ignores_the_input_values_and_moves_an_owned_tape_off_the_input(cpu):
    c = nn.Constant((2,), device=cpu)
    c.value.data = cpu.tensor([1.0, 2.0]).data
    assert host(c(cpu.tensor([5.0, 6.0, 7.0]))).tolist() == host(c(cpu.tensor([[-1.0]]))).tolist() == [1.0, 2.0]
    x = cpu.tensor([0.0]).trace(tk.OwnedTape())
    out = c(x)
    with pytest.raises(tk.TapeMovedError, match="broadcast_to"):
        x + 1.0
    assert out.backward(seed=[1.0, 1.0])[c.value].tolist() == [1.0, 1.0]
    shared = cpu.tensor([0.0]).trace(tk.UnionTape())
    out = c(shared)
    keep = shared * 2.0  # a shared tape stays with the input too
    assert out.tape is keep.tape


# -- preallocated gradients -------------------------------------------------------------------------
def test_alloc_grads_holds_a_zeroed_entry_for_every_parameter_with_the_parameters_as_leaves(dev):
    model = _mixed_model(dev)
    grads = model.alloc_grads()
    params = model.parameters()
    assert len(grads) == len(params)
    assert grads.leaves == frozenset(p.id for p in params)
    for p in params:
        assert grads[p].shape == p.data.shape and not np.any(host(grads[p]))


def test_zero_grads_zeroes_the_same_buffers_in_place(dev):
    model = _mixed_model(dev)
    grads = model.alloc_grads()
    buffers = {p.id: grads[p] for p in model.parameters()}
    x = dev.randn((3, 4), dtype="float64")
    grads = tk.cross_entropy(model(x.trace(tk.OwnedTape(grads))), np.array([0, 1, 2])).backward()
    assert all(grads[p] is buffers[p.id] for p in model.parameters())
    assert any(np.any(host(grads[p])) for p in model.parameters())
    model.zero_grads(grads)
    assert all(grads[p] is buffers[p.id] and not np.any(host(grads[p])) for p in model.parameters())
    fresh = tk.Gradients()
    model.zero_grads(fresh)  # buffers of missing parameters are allocated
    assert len(fresh) == len(model.parameters())


class Tied(nn.Module):
    """One weight used by two matmuls, so its gradient is written once and then accumulated."""

    def __init__(self, dev):
        self.w = nn.Linear(4, 4, device=dev).weight
        self.b = dev.tensor(np.linspace(-1, 1, 4))

    def forward(self, x):
        h = (x @ self.w + self.b).tanh()
        return h @ self.w


def _training_step(model, x, labels, grads):
    if grads is None:
        return tk.cross_entropy(model.trace(tk.UnionTape())(x), labels).backward()
    model.zero_grads(grads)
    return tk.cross_entropy(model.trace(tk.UnionTape(grads))(x), labels).backward()


@pytest.mark.parametrize("make", [lambda dev: nn.Sequential(nn.Linear(8, 16, device=dev), nn.ReLU(),
                                                            nn.Linear(16, 4, device=dev)), Tied])
def test_preallocated_gradients_allocate_less_per_step_and_agree(dev, make):
    model = make(dev)
    x, labels = dev.randn((32, 8 if isinstance(model, nn.Sequential) else 4)), np.arange(32) % 4
    counts = {}
    results = {}
    for way in ("plain", "preallocated"):
        grads = model.alloc_grads() if way == "preallocated" else None
        grads = _training_step(model, x, labels, grads)
        dev.reset_counters()
        for _ in range(3):
            grads = _training_step(model, x, labels, grads if way == "preallocated" else None)
        counts[way] = (dev.allocations / 3, dev.allocated_bytes / 3)
        results[way] = grads
    for p in model.parameters():
        np.testing.assert_allclose(host(results["preallocated"][p]), host(results["plain"][p]), rtol=1e-5, atol=1e-7)
    if getattr(dev, "backend", "cuda") != "strict":  # numpy, CuPy: backward writes into the buffers (out=)
        assert counts["preallocated"][0] < counts["plain"][0]
        assert counts["preallocated"][1] < counts["plain"][1]
    else:  # elsewhere only a second contribution to one gradient is saved (added in place)
        assert counts["preallocated"][0] <= counts["plain"][0]


def test_reused_gradients_accumulate_when_not_zeroed(cpu):
    model = nn.Linear(3, 2, device=cpu)
    x = cpu.randn((4, 3))
    once = tk.mse_loss(model.trace(tk.UnionTape())(x), cpu.zeros((4, 2))).backward()
    grads = model.alloc_grads()
    for _ in range(2):  # no zero_grads: gradient accumulation over two steps
        grads = tk.mse_loss(model.trace(tk.UnionTape(grads))(x), cpu.zeros((4, 2))).backward()
    for p in model.parameters():
        np.testing.assert_allclose(grads[p], 2 * once[p], rtol=1e-6)


# -- model files ------------------------------------------------------------------------------------
def test_save_and_load_round_trip(dev, tmp_path):
    model, other = _mixed_model(dev), _mixed_model(dev)
    path = tmp_path / "model.npz"
    model.save(path)
    ids = [p.id for p in other.parameters()]
    assert other.load(path) is other
    assert [p.id for p in other.parameters()] == ids
    for (name, p), q in zip(model.named_parameters(), other.parameters()):
        np.testing.assert_array_equal(host(p), host(q), err_msg=name)
        assert q.dtype == p.dtype


def _assert_refused(model, path, match):
    before = [host(p).copy() for p in model.parameters()]
    with pytest.raises(tk.ModelFileError, match=match):
        model.load(path)
    for b, p in zip(before, model.parameters()):
        np.testing.assert_array_equal(b, host(p))


def test_a_file_with_wrong_names_or_shapes_is_refused_and_the_model_is_unchanged(cpu, tmp_path):
    model = nn.Sequential(nn.Linear(3, 2, device=cpu), nn.Linear(2, 1, device=cpu))
    arrays = {name: host(p) for name, p in model.named_parameters()}
    renamed = dict(arrays, extra=np.zeros(2, np.float32))
    del renamed["layers.1.bias"]
    np.savez(tmp_path / "names.npz", **renamed)
    _assert_refused(model, tmp_path / "names.npz", "missing layers.1.bias; unexpected extra")
    np.savez(tmp_path / "shapes.npz", **dict(arrays, **{"layers.1.weight": np.ones((3, 1), np.float32)}))
    _assert_refused(model, tmp_path / "shapes.npz", r"layers.1.weight has shape \(3, 1\) in the file but \(2, 1\)")
    np.savez(tmp_path / "ints.npz", **dict(arrays, **{"layers.0.bias": np.ones(2, np.int64)}))
    _assert_refused(model, tmp_path / "ints.npz", "dtype int64")


def test_pickled_objects_and_other_files_are_refused(cpu, tmp_path):
    model = nn.Linear(3, 2, device=cpu)
    arrays = {name: host(p) for name, p in model.named_parameters()}
    np.savez(tmp_path / "pickled.npz", **dict(arrays, weight=np.array([{"evil": 1}], dtype=object)))
    _assert_refused(model, tmp_path / "pickled.npz", "pickled objects are refused")
    (tmp_path / "text.npz").write_text("not a model")
    _assert_refused(model, tmp_path / "text.npz", "not a model file")
    np.save(tmp_path / "one.npy", np.zeros(3))
    _assert_refused(model, tmp_path / "one.npy", "one array")


@pytest.mark.parametrize("make, setting, value", [(lambda: tk.nn.LayerNorm(3), "eps", 0.0),
                                                  (lambda: tk.nn.Dropout(0.5), "p", 1.0)], ids=["eps 0", "p 1"])
def test_a_layers_setting_changed_after_it_was_made_is_checked_at_its_call(make, setting, value):
    """LayerNorm.eps = 0 gave NaN on a constant row, Dropout.p = 1 NaN everywhere."""
    layer = make()
    setattr(layer, setting, value)
    x = tk.Cpu().tensor(np.ones((2, 3)))
    with pytest.raises(tk.InvalidArgumentError, match=setting):
        layer(x)


def test_step_footprint_leaves_a_traced_input_as_it_was_and_measures_alike_each_time():
    """It merged the caller's tape into the one it measured, and a second measurement counted the first's records."""
    dev = tk.Cpu()
    model = tk.nn.Sequential(tk.nn.Linear(3, 2, device=dev), tk.nn.Tanh())
    x = dev.tensor(np.ones((4, 3))).trace(tk.UnionTape()) * 1.0
    before = str(x.tape)
    first = tk.nn.step_footprint(model, x, lambda out: out.sum())
    second = tk.nn.step_footprint(model, x, lambda out: out.sum())
    assert str(x.tape) == before and first.records == second.records
    with pytest.raises(tk.OperandError, match="no tape"):
        tk.nn.step_footprint(model, x, lambda out: dev.tensor(1.0))
