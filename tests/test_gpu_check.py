"""The prepared GPU check: its training step runs on any device, and without a GPU it says so."""

from __future__ import annotations

import numpy as np

import tapekit as tk
from benchmarks import gpu


def test_training_step_learns_on_the_cpu():
    losses = {}
    for compiled in (False, True):
        step = gpu.step_timer(tk.Cpu(seed=0), batch=32, dims=(6, 8, 3), sync=lambda: None, compiled=compiled)
        losses[compiled] = [step() for _ in range(21)]
        assert np.isfinite(losses[compiled][0]) and losses[compiled][-1] < losses[compiled][0]
        assert gpu.median_seconds(step, repeats=2) > 0
    assert losses[True] == losses[False]  # the compiled step trains the same parameters, bit for bit


def test_same_seed_same_parameters_on_every_device():
    a = gpu.mlp(tk.Cpu(seed=3), (4, 5, 2))
    b = gpu.mlp(tk.Cpu(seed=3, backend="strict"), (4, 5, 2))
    for (_, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert np.array_equal(p.numpy(), q.numpy())


def test_without_a_gpu_it_says_so(capsys):
    try:
        tk.Cuda()
        has_gpu = True
    except tk.DeviceUnavailableError:
        has_gpu = False
    if not has_gpu:
        assert gpu.main(["--batch", "8", "--dims", "4", "3"]) == 1
        assert "no GPU here" in capsys.readouterr().out
    else:
        assert gpu.main(["--batch", "64", "--dims", "8", "16", "4"]) == 0
        assert "GPU is" in capsys.readouterr().out
