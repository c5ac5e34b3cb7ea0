"""Model files on disk: a save that fails at any step leaves the previous file as it was, and no
temporary file beside it."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

import tapekit as tk

from .conftest import host

nn = tk.nn


def _model(seed=0):
    dev = tk.Cpu(seed=seed)
    return nn.Sequential(nn.Linear(3, 4, device=dev), nn.Tanh(), nn.Linear(4, 2, device=dev))


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
    old, new = _model(seed=0), _model(seed=1)
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
    for p, q in zip(old.parameters(), _model(seed=2).load(path).parameters()):
        np.testing.assert_array_equal(host(p), host(q))


def test_a_save_replaces_the_old_file_whole_and_keeps_the_name_as_given(tmp_path):
    path = tmp_path / "weights"  # no .npz suffix added
    _model(seed=0).save(path)
    model = _model(seed=1)
    model.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["weights"]
    for p, q in zip(model.parameters(), _model(seed=2).load(path).parameters()):
        np.testing.assert_array_equal(host(p), host(q))
