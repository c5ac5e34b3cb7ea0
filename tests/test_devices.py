"""Devices: constructors, seeds, dtypes, transfers, allocation counters, and device mismatch."""

from __future__ import annotations

import re
import warnings

import array_api_strict as strict
import numpy as np
import pytest

import tapekit as tk
from tapekit.devices import dtype_name

from .conftest import DEVICE_KINDS, host, make_device


def test_constructors(dev):
    assert dev.zeros((2, 3)).shape == (2, 3) and host(dev.zeros(3)).sum() == 0
    assert host(dev.ones(2)).tolist() == [1.0, 1.0]
    assert host(dev.full((2,), 7.0)).tolist() == [7.0, 7.0]
    x = dev.tensor([[1, 2], [3, 4]], name="m")
    assert x.name == "m" and x.shape == (2, 2) and "float32" in str(x.dtype)
    assert dev.zeros_like(x).shape == (2, 2)
    assert "float64" in str(dev.randn((2,), dtype="float64").dtype)
    r = host(dev.rand(1000))
    assert 0 <= r.min() and r.max() < 1


def test_integer_arrays_keep_their_dtype(dev):
    labels = dev.tensor(np.array([1, 0, 2]))
    assert "int" in str(labels.dtype)


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_one_seed_gives_the_same_values_on_every_device(kind):
    a = make_device(kind, seed=7).randn((3, 2))
    b = tk.Cpu(seed=7).randn((3, 2))
    assert np.array_equal(a.numpy(), b.numpy())


def test_transfers_and_values(dev):
    x = dev.tensor([1.5, 2.5])
    assert isinstance(x.numpy(), np.ndarray) and x.tolist() == [1.5, 2.5]
    assert dev.tensor([3.0]).item() == 3.0 and float(dev.tensor(2.0)) == 2.0
    y = x.to(tk.Cpu())
    assert np.array_equal(np.asarray(y), [1.5, 2.5]) and y.device is not x.device


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_a_transfer_counts_an_allocation_only_when_it_copies(kind):
    source, target = make_device(kind), tk.Cpu()
    x = source.tensor([1.5, 2.5])
    target.reset_counters()
    y = x.to(target)
    shared = kind == "numpy"  # numpy storage already lives on tk.Cpu()
    assert (y.data is x.data) is shared
    assert target.allocations == (0 if shared else 1)


def test_allocation_counter_counts_results_and_gradients(cpu):
    x = cpu.tensor([1.0, 2.0]).trace()
    cpu.reset_counters()
    y = (x * x).sum()
    assert cpu.allocations == 2 and cpu.allocated_bytes == 8 + 4
    y.backward()
    assert cpu.allocations > 2


def test_strict_devices_do_not_mix():
    a = tk.Cpu(backend="strict", where="device1").tensor([1.0])
    b = tk.Cpu(backend="strict", where="device2").tensor([1.0])
    with pytest.raises(tk.DeviceMismatchError, match="device1.*device2"):
        a + b
    with pytest.raises(tk.DeviceMismatchError):
        a @ b


def test_two_numpy_devices_share_storage():
    assert np.allclose((tk.Cpu(seed=1).tensor([1.0]) + tk.Cpu(seed=2).tensor([2.0])).numpy(), [3.0])


def test_cuda_without_a_gpu_says_so():
    if "cuda" in DEVICE_KINDS:
        pytest.skip("a GPU is present: the GPU suite covers tk.Cuda")
    with pytest.raises(tk.DeviceUnavailableError, match="CuPy|GPU"):
        tk.Cuda()


def test_unknown_backend_and_dtype():
    with pytest.raises(tk.InvalidArgumentError, match="unknown backend"):
        tk.Cpu(backend="torch")
    with pytest.raises(tk.DTypeError, match="unknown dtype"):
        tk.Cpu().zeros(2, dtype="complex128")


def test_repr_shows_values_shape_dtype_and_tape(cpu):
    x = cpu.tensor([1.0, 2.0], name="x")
    assert repr(x) == "Tensor([1., 2.], shape=(2,), dtype=float32, name='x', no tape)"
    assert re.search(r"OwnedTape [A-Z]+: 0 records", repr(x.trace()))


def test_tracing_an_integer_tensor_is_an_error(cpu):
    labels = cpu.tensor(np.array([1, 2]))
    with pytest.raises(tk.DTypeError, match="not floating"):
        labels.trace()


def test_cupy_namespace_adds_the_array_api_names_older_cupy_lacks():
    import types

    from tapekit.devices import _CupyNamespace
    old_cupy = types.SimpleNamespace(concatenate=np.concatenate, transpose=np.transpose, swapaxes=np.swapaxes,
                                     exp=np.exp)
    xp = _CupyNamespace(old_cupy)
    a = np.arange(6.0).reshape(2, 3)
    assert xp.concat([a, a]).shape == (4, 3) and xp.permute_dims(a, (1, 0)).shape == (3, 2)
    assert xp.matrix_transpose(a).shape == (3, 2) and xp.astype(a, np.float32).dtype == np.float32
    assert xp.exp is np.exp


def test_dtype_names_agree_across_namespaces_and_warn_of_nothing():
    spellings = {"float32": [np.float32, np.dtype("float32"), strict.float32, "float32"],
                 "int64": [np.int64, np.dtype("int64"), strict.int64],
                 "bool": [np.bool_, strict.bool]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # array_api_strict warns when its dtypes are compared with numpy's
        for _ in range(2):  # the second round reads the names back from the cache
            for name, dtypes in spellings.items():
                assert [dtype_name(d) for d in dtypes] == [name] * len(dtypes)
    assert dtype_name([1, 2]) == "[1, 2]"  # not a dtype, and not hashable: still a readable name
