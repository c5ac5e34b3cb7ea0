"""Model files on disk: a save that fails at any step leaves the previous file as it was, and no
temporary file beside it; a checkpoint (``model.save(path, optimizer=opt)``) resumes training to the
bit, and one that does not fit is refused with nothing changed."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

import tapekit as tk

from .conftest import host

nn = tk.nn


def _model(seed, dev=None):
    """A small model whose parameters are drawn from ``seed``, on ``dev`` (numpy's by default)."""
    dev = dev or tk.Cpu()
    model = nn.Sequential(nn.Linear(3, 4, device=dev), nn.Tanh(), nn.Linear(4, 2, device=dev))
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p.data = dev.tensor(rng.standard_normal(p.shape)).data
    return model


def _fail_at_call(monkeypatch, owner, name, n, error):
    """Replace ``owner.name`` by the real function for its first ``n - 1`` calls, then ``error``."""
    real, calls = getattr(owner, name), []

    def fake(*args, **kwargs):
        calls.append(1)
        if len(calls) == n:
            raise error
        return real(*args, **kwargs)
    monkeypatch.setattr(owner, name, fake)


FAULTS = {  # a step of a save: the function that fails there, at which call, with which error
    "gathering the second parameter's values": (tk.Tensor, "numpy", 2, RuntimeError("device lost")),
    "writing the first array (a full disk)": (np.lib.format, "write_array", 1, OSError(errno.ENOSPC, "disk full")),
    "writing the third array": (np.lib.format, "write_array", 3, OSError(errno.EIO, "I/O error")),
    "an interrupt while writing": (np.lib.format, "write_array", 2, KeyboardInterrupt()),
    "flushing the file to disk": (os, "fsync", 1, OSError(errno.EIO, "I/O error")),
    "renaming it over the old file": (os, "replace", 1, OSError(errno.EACCES, "Permission denied")),
    "an interrupt before the rename": (os, "replace", 1, KeyboardInterrupt()),
}


@pytest.mark.parametrize("step", FAULTS)
def test_a_save_that_fails_at_any_step_leaves_the_old_file_and_no_temporary_one(tmp_path, monkeypatch, step):
    old, new = _model(0), _model(1)
    path = tmp_path / "model.npz"
    old.save(path)
    saved = path.read_bytes()
    owner, name, n, error = FAULTS[step]
    _fail_at_call(monkeypatch, owner, name, n, error)
    with pytest.raises(type(error)) as raised:
        new.save(path)
    monkeypatch.undo()
    assert raised.value is error
    assert path.read_bytes() == saved, f"{step}: the old file changed"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.npz"], f"{step}: a temporary file was left"
    for p, q in zip(old.parameters(), _model(2).load(path).parameters()):
        np.testing.assert_array_equal(host(p), host(q))


def test_a_save_replaces_the_old_file_whole_and_keeps_its_name_and_permissions(tmp_path):
    path = tmp_path / "weights"  # no .npz suffix added
    _model(0).save(path)
    path.chmod(0o600)
    model = _model(1)
    model.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["weights"]
    assert path.stat().st_mode & 0o777 == 0o600
    for p, q in zip(model.parameters(), _model(2).load(path).parameters()):
        np.testing.assert_array_equal(host(p), host(q))


# -- checkpoints: the optimizer's state with the parameters ----------------------------------------
OPTIMIZERS = {
    "sgd-momentum": lambda m: tk.optim.Sgd(m, lr=0.1, momentum=0.9),
    "sgd-nesterov": lambda m: tk.optim.Sgd(m, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "adam": lambda m: tk.optim.Adam(m, lr=0.01, weight_decay=1e-3),
}


def _train(model, opt, batches):
    dev = model.parameters()[0].device
    for x, y in batches:
        x, y = dev.tensor(x), dev.tensor(y)
        opt.update(model, tk.mse_loss(model.trace(tk.UnionTape())(x), y).backward())


def _batches(n):
    rng = np.random.default_rng(7)
    return [(rng.standard_normal((5, 3)), rng.standard_normal((5, 2))) for _ in range(n)]


@pytest.mark.parametrize("kind", OPTIMIZERS)
def test_training_resumed_from_a_checkpoint_goes_on_to_the_same_bits(dev, tmp_path, kind):
    batches = _batches(20)
    model = _model(0, dev)
    opt = OPTIMIZERS[kind](model)
    _train(model, opt, batches)

    first = _model(0, dev)
    first_opt = OPTIMIZERS[kind](first)
    _train(first, first_opt, batches[:10])
    first.save(tmp_path / "checkpoint.npz", optimizer=first_opt)
    resumed = _model(1, dev)  # other values, other ids: everything comes from the file
    resumed_opt = OPTIMIZERS[kind](resumed)
    assert resumed.load(tmp_path / "checkpoint.npz", optimizer=resumed_opt) is resumed
    _train(resumed, resumed_opt, batches[10:])

    weights_only = _model(1, dev).load(tmp_path / "checkpoint.npz")  # without the optimizer's state
    _train(weights_only, OPTIMIZERS[kind](weights_only), batches[10:])
    for (name, p), q, w in zip(model.named_parameters(), resumed.parameters(), weights_only.parameters()):
        np.testing.assert_array_equal(host(q), host(p), err_msg=name)
        assert not np.array_equal(host(w), host(p)), f"{name}: the optimizer's state made no difference"


def _snapshot(model, opt):
    params = [host(p).copy() for p in model.parameters()]
    state = {pid: {k: v if isinstance(v, int) else host(v).copy() for k, v in st.items()}
             for pid, (_, st) in opt._state.items()}
    return params, state


def _assert_same(before, after):
    for b, a in zip(before[0], after[0]):
        np.testing.assert_array_equal(b, a)
    assert before[1].keys() == after[1].keys()
    for pid in before[1]:
        assert before[1][pid].keys() == after[1][pid].keys()
        for k in before[1][pid]:
            np.testing.assert_array_equal(before[1][pid][k], after[1][pid][k])


def _edited(path, into, name, value=None):
    """A copy of the file at ``path`` with array ``name`` replaced by ``value`` (None: left out)."""
    with np.load(path) as archive:
        arrays = {n: archive[n] for n in archive.files if n != name}
    np.savez(into, **arrays, **({} if value is None else {name: value}))
    return into


def test_a_checkpoint_that_does_not_fit_is_refused_and_changes_nothing(cpu, tmp_path):
    model = _model(0, cpu)
    adam, sgd = tk.optim.Adam(model, lr=0.01), tk.optim.Sgd(model, lr=0.1, momentum=0.9)
    _train(model, adam, _batches(3))
    _train(model, sgd, _batches(3))
    model.save(tmp_path / "adam.npz", optimizer=adam)
    model.save(tmp_path / "sgd.npz", optimizer=sgd)
    model.save(tmp_path / "model.npz")
    wider = nn.Sequential(nn.Linear(3, 5, device=cpu), nn.Tanh(), nn.Linear(5, 2, device=cpu))
    cases = [  # (model, optimizer, file, what the message names)
        (wider, tk.optim.Adam(wider, lr=0.01), "adam.npz",  # said once, of the parameters
         r"layers.0.weight has shape \(3, 4\) in the file but \(3, 5\) in the model; layers.0.bias has shape "
         r"\(4,\) in the file but \(5,\) in the model; layers.2.weight .*\(5, 2\) in the model. Nothing was loaded"),
        (model, adam, "sgd.npz", "it holds the state of Sgd, not of Adam"),
        (model, sgd, "model.npz", r"it holds no optimizer state \(it was saved by model.save\(path\), without "
                                  r"optimizer=\)"),
        (model, adam, _edited(tmp_path / "adam.npz", tmp_path / "no-t.npz", "optimizer/state/layers.2.bias/t"),
         "missing optimizer state optimizer/state/layers.2.bias/t"),
        (model, adam, _edited(tmp_path / "adam.npz", tmp_path / "float-t.npz", "optimizer/state/layers.2.bias/t",
                              np.array(3.0)), "optimizer/state/layers.2.bias/t has dtype float64 in the file; it is an "
                                              "integer"),
        (model, adam, _edited(tmp_path / "adam.npz", tmp_path / "long-m.npz", "optimizer/state/layers.2.bias/m",
                              np.zeros(3, np.float32)), r"optimizer/state/layers.2.bias/m has shape \(3,\) in the file "
                                                        r"but \(2,\) here"),
        (model, tk.optim.Adam(model, lr=0.02), "adam.npz", "lr is 0.01 in the file but 0.02 here"),
        (model, tk.optim.Sgd(model, lr=0.1), "sgd.npz", "momentum is 0.9 in the file but 0.0 here; unexpected "
                                                        "optimizer state optimizer/state/layers.0.bias/velocity"),
    ]
    for target, opt, name, match in cases:
        before = _snapshot(target, opt)
        with pytest.raises(tk.ModelFileError, match=match):
            target.load(tmp_path / name, optimizer=opt)
        _assert_same(before, _snapshot(target, opt))


def test_a_checkpoint_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    model = _model(0)
    opt = tk.optim.Adam(model)
    _train(model, opt, _batches(2))
    path = tmp_path / "checkpoint.npz"
    model.save(path, optimizer=opt)
    saved = path.read_bytes()
    _fail_at_call(monkeypatch, np.lib.format, "write_array", 9, KeyboardInterrupt())  # among the optimizer's arrays
    with pytest.raises(KeyboardInterrupt):
        model.save(path, optimizer=opt)
    monkeypatch.undo()
    assert path.read_bytes() == saved and sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.npz"]


def test_a_save_through_a_link_replaces_the_file_it_points_to_and_keeps_the_link(tmp_path):
    (tmp_path / "runs").mkdir()
    target, link = tmp_path / "runs" / "model-7.npz", tmp_path / "latest.npz"
    _model(0).save(target)
    link.symlink_to(target)
    model = _model(1)
    model.save(link)
    assert link.is_symlink() and sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["model-7.npz"]
    for p, q in zip(model.parameters(), _model(2).load(target).parameters()):
        np.testing.assert_array_equal(host(p), host(q))


@pytest.mark.parametrize("call, error, words", [
    (lambda m, d: m.save(d / "no" / "such" / "m.npz"), tk.ModelFileError, "not a folder that exists"),
    (lambda m, d: m.save(d), tk.ModelFileError, "is a folder"),
    (lambda m, d: m.save(None), tk.InvalidArgumentError, "give a file's path"),
    (lambda m, d: m.load(d / "missing.npz"), tk.ModelFileError, "no such file"),
    (lambda m, d: m.load(d), tk.ModelFileError, "cannot load from"),
    (lambda m, d: m.save(d / "m.npz", optimizer="adam"), tk.InvalidArgumentError, "must be the model's optimizer"),
], ids=["missing folder", "a folder", "None", "missing file", "load a folder", "optimizer='adam'"])
def test_a_path_or_optimizer_that_cannot_be_used_is_named_with_what_to_give(tmp_path, call, error, words):
    """A raw OSError named the hidden temporary file, not the path given; a folder got a stray file first."""
    model = tk.nn.Linear(2, 2)
    with pytest.raises(error, match=words):
        call(model, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("key, change", [("weight/t", lambda a: np.array(-1)), ("weight/v", lambda a: -np.abs(a) - 1),
                                         ("weight/m", lambda a: a * np.nan)], ids=["t=-1", "v<0", "m nan"])
def test_a_checkpoint_no_run_could_have_saved_is_refused(tmp_path, key, change):
    """It loaded, and the first step gave NaN weights (t = -1 divides by 1 - b1 ** 0)."""
    dev = tk.Cpu(seed=0, default_dtype="float64")
    x = dev.randn((4, 3))
    model = tk.nn.Linear(3, 1, device=dev, dtype="float64")
    opt = tk.optim.Adam(model, lr=0.1)
    opt.update(model, model.trace(tk.UnionTape(model.alloc_grads()))(x).sum().backward())
    model.save(tmp_path / "ok.npz", optimizer=opt)
    arrays = dict(np.load(tmp_path / "ok.npz"))
    arrays[f"optimizer/state/{key}"] = change(arrays[f"optimizer/state/{key}"])
    np.savez(tmp_path / "bad.npz", **arrays)
    fresh = tk.nn.Linear(3, 1, device=dev, dtype="float64")
    with pytest.raises(tk.ModelFileError, match="NaN or infinite|step count is 0 or more|negative values"):
        fresh.load(tmp_path / "bad.npz", optimizer=tk.optim.Adam(fresh, lr=0.1))
