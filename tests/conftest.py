"""Shared fixtures: every device-parametrized test runs on numpy, on array_api_strict (which
proves no op calls numpy directly on storage), and on CuPy when a GPU is present."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tapekit as tk
from tapekit.ops.core import ELEMENTWISE, unary


def _gpu_available() -> bool:
    try:
        import cupy
        return bool(cupy.cuda.is_available())
    except Exception:
        return False


POLICIES = {"owned": tk.OwnedTape, "arc": tk.ArcTape, "union": tk.UnionTape, "global": tk.GlobalTape}
"""Every recording policy by a short name; "global" means a ``tk.GlobalTape()`` block around the call."""

DEVICE_KINDS = ["numpy", "strict"] + (["cuda"] if _gpu_available() else [])


def make_device(kind: str, seed: int = 0) -> tk.Device:
    if kind == "cuda":
        return tk.Cuda(seed=seed)
    return tk.Cpu(seed=seed, backend=kind)


@pytest.fixture(params=DEVICE_KINDS)
def dev(request) -> tk.Device:
    """A fresh device of each kind available here."""
    return make_device(request.param)


@pytest.fixture
def cpu() -> tk.Device:
    return tk.Cpu(seed=0)


def host(a) -> np.ndarray:
    """Any tensor or device array as a numpy array."""
    if isinstance(a, tk.Tensor):
        return a.numpy()
    if isinstance(a, np.ndarray) or np.isscalar(a):
        return np.asarray(a)
    if hasattr(a, "get"):  # CuPy
        return a.get()
    return np.from_dlpack(a)


@unary(lambda g, xp, x: g * xp.exp2(x) * math.log(2.0), ELEMENTWISE)
def exp2_by_hand(xp, x):
    """``2 ** x``, its rule written with ``xp.exp2``, which ``tapekit.namespace`` does not have: an
    op with a first derivative and no recorded one (``SecondOrderError`` names ``xp.exp2``)."""
    return xp.exp2(x), (xp, x)
