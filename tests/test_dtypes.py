"""Which dtype an op gives. Integer inputs to an op that yields floats give the device's default
float dtype (float32 unless the device says otherwise), as PyTorch does; numpy would give float64."""

from __future__ import annotations

import numpy as np
import pytest

import tapekit as tk

from .conftest import DEVICE_KINDS, host, make_device


def ints(dev, values=(1, 2, 4), dtype="int32"):
    return dev.tensor(np.array(values, dtype=dtype))


FLOAT_FROM_INTS = {
    "div": lambda i: i / ints(i.device, (2, 2, 2)),
    "div_number": lambda i: i / 2,
    "rdiv_number": lambda i: 2 / i,
    "exp": lambda i: i.exp(),
    "add_half": lambda i: i + 0.5,
    "radd_half": lambda i: 0.5 + i,
    "pow_float": lambda i: i ** 0.5,
    "mean": lambda i: i.mean(),
    "sqrt": lambda i: tk.sqrt(i),
}


@pytest.mark.parametrize("kind", DEVICE_KINDS)
@pytest.mark.parametrize("name", sorted(FLOAT_FROM_INTS))
def test_integer_inputs_give_the_default_float(kind, name):
    dev = make_device(kind)
    out = FLOAT_FROM_INTS[name](ints(dev))
    assert tk.devices.dtype_name(out.dtype) == "float32"


def test_a_device_can_make_float64_its_default():
    dev = tk.Cpu(default_dtype="float64")
    assert tk.devices.dtype_name((ints(dev) / 2).dtype) == "float64"
    assert tk.devices.dtype_name(dev.tensor([1.0]).dtype) == "float64"
    assert "default_dtype='float64'" in repr(dev)
    with pytest.raises(tk.DTypeError, match="float32 or float64"):
        tk.Cpu(default_dtype="int32")


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_integer_beside_a_float_tensor_takes_the_float_dtype(kind):
    dev = make_device(kind)
    x = dev.tensor([1.0, 2.0, 3.0]).trace()
    y = x * ints(dev, dtype="int64")
    assert tk.devices.dtype_name(y.dtype) == "float32"
    g = y.sum().backward()[x]
    assert tk.devices.dtype_name(g.dtype) == "float32"
    np.testing.assert_allclose(host(g), [1, 2, 4])


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_integer_ops_that_stay_integer_keep_their_dtype(kind):
    dev = make_device(kind)
    i = ints(dev)
    for out in (i + i, i * 3, -i, i.sum(), abs(i)):
        assert tk.devices.dtype_name(out.dtype).startswith("int"), out
    assert host(i + i).tolist() == [2, 4, 8]


def test_float64_values_stay_float64(cpu):
    x = cpu.tensor([1.0], dtype="float64")
    assert tk.devices.dtype_name((x + ints(cpu, (1,))).dtype) == "float64"
    assert tk.devices.dtype_name((x * cpu.tensor([2.0])).dtype) == "float64"  # float32 beside float64: float64


def test_booleans_stay_boolean_and_where_takes_two_numbers(dev):
    mask = dev.tensor([True, False])
    assert tk.devices.dtype_name(mask.dtype) == "bool"
    assert host(tk.where(mask, 1, 3)).tolist() == [1.0, 3.0]
    assert tk.devices.dtype_name(dev.tensor([1, 2]).dtype) == "float32"  # numbers in a list are values


@pytest.mark.parametrize("create_graph", [False, True])
def test_a_gradient_has_its_tensors_dtype_beside_an_operand_of_another(create_graph):
    """As in PyTorch and JAX: float32 x times a float64 c is float64, and x's gradient is float32
    (it was float64, the dtype of the product's)."""
    dev = tk.Cpu()
    x = dev.tensor([1.0, 2.0], dtype="float32")
    c = dev.tensor([3.0, 4.0], dtype="float64")
    xt = x.trace(tk.UnionTape())
    g = ((xt * c).sum() + (c * xt.exp()).sum()).backward(create_graph=create_graph)
    for t in (x, c):
        got = g[t].data if create_graph else g[t]
        assert got.dtype == t.dtype, (t.label, got.dtype)
    np.testing.assert_allclose(np.asarray(g[x].data if create_graph else g[x]), [3 + 3 * np.e, 4 + 4 * np.e ** 2],
                               rtol=1e-6)


def test_a_compiled_step_gives_a_gradient_its_tensors_dtype_as_eager():
    dev = tk.Cpu()
    c = dev.tensor([3.0, 4.0], dtype="float64")

    def step(x):
        return ((x.trace(tk.UnionTape()) * c).sum()).backward()[x]

    compiled, x = tk.compile(step), dev.tensor([1.0, 2.0], dtype="float32")
    for _ in range(2):
        got = compiled(x)
        assert got.dtype == x.dtype and np.array_equal(host(got), host(step(x)))
