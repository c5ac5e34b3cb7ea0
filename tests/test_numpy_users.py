"""What code written for numpy expects of tapekit: numpy arrays as operands (constants, on the numpy
device), and errors it catches by numpy's classes."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import tapekit as tk


def test_an_axis_error_is_caught_as_numpy_code_catches_numpy_s(cpu):
    assert issubclass(np.exceptions.AxisError, ValueError) and issubclass(np.exceptions.AxisError, IndexError)
    for numpy_catches in (ValueError, IndexError):
        with pytest.raises(numpy_catches, match="out of range"):
            cpu.tensor([1.0, 2.0]).sum(axis=3)


# -- numpy arrays as operands -----------------------------------------------------------------------
BINARY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
          "pow": operator.pow, "floor_divide": operator.floordiv, "remainder": operator.mod,
          "maximum": tk.maximum, "minimum": tk.minimum, "logaddexp": tk.logaddexp}
COMPARISONS = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


def _ordered(side, t, c):
    return (t, c) if side == "right" else (c, t)


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("name", BINARY)
def test_a_numpy_array_is_a_constant_operand_on_the_numpy_device_as_a_number_is(cpu, name, side):
    fn, x = BINARY[name], cpu.tensor([[0.5, 1.5, 2.5]], dtype="float64")
    arr = np.array([[1.25], [2.0]])  # broadcasts against x: (2, 1) with (1, 3)
    as_tensor = cpu.tensor(arr, dtype="float64")  # the same values as an untraced tensor
    out = fn(*_ordered(side, x.trace(), arr))
    np.testing.assert_array_equal(out.numpy(), fn(*_ordered(side, x, as_tensor)).numpy())
    grads = out.sum().backward()
    want = fn(*_ordered(side, x.trace(), as_tensor)).sum().backward()
    np.testing.assert_array_equal(grads[x], want[x])
    assert x.id in grads and out.id in grads
    assert len(grads) == 3, "the array got a gradient entry (x, out and the sum have one): it is a constant"


@pytest.mark.parametrize("side", ["right", "left"])
def test_matmul_and_comparisons_take_a_numpy_array_on_the_numpy_device(cpu, side):
    x, arr = cpu.tensor([[1.0, 2.0], [3.0, 4.0]], dtype="float64"), np.array([[0.5, -1.0], [2.0, 0.0]])
    out = operator.matmul(*_ordered(side, x.trace(), arr))
    want = operator.matmul(*_ordered(side, x.trace(), cpu.tensor(arr, dtype="float64")))
    np.testing.assert_array_equal(out.numpy(), want.numpy())
    np.testing.assert_array_equal(out.sum().backward()[x], want.sum().backward()[x])
    for compare in COMPARISONS:
        got = compare(*_ordered(side, x, np.array([2.0, 3.0])))
        assert isinstance(got, tk.Tensor) and got.tape is None
        np.testing.assert_array_equal(got.numpy(), compare(*_ordered(side, x.numpy(), np.array([2.0, 3.0]))))


def test_a_numpy_array_operand_is_taken_as_it_is_when_the_op_runs(cpu):
    x, arr = cpu.tensor([1.0, 1.0, 1.0]), np.array([1.0, 2.0, 3.0])
    out = (x.trace() * arr).sum()
    arr[:] = 0.0  # a later write to the array changes neither the output nor the gradient
    np.testing.assert_array_equal(out.backward()[x], [1.0, 2.0, 3.0])


@pytest.mark.parametrize("tensor_dtype,array,want", [
    ("float32", np.arange(3.0), "float32"),  # a float array takes the tensor's float dtype, as a number does
    ("float64", np.arange(3.0, dtype=np.float32), "float64"),
    ("int32", np.arange(3.0), "float32"),  # beside integers: the device's default float, as for t * 0.5
    ("float32", np.arange(3), "float32"),  # integers take the float tensor's dtype (PyTorch's rule)
    ("float32", np.array([True, False, True]), "float32"),  # a mask
])
def test_a_numpy_array_operand_takes_the_dtype_a_number_would(cpu, tensor_dtype, array, want):
    assert str((cpu.tensor([1, 2, 3], dtype=tensor_dtype) * array).dtype) == want


def test_a_numpy_array_of_what_no_op_takes_is_refused(cpu):
    with pytest.raises(tk.OperandError, match="mul: unsupported operand, a numpy array of dtype <U1; use numbers"):
        cpu.tensor([1.0]) * np.array(["a"])


MIRRORED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}  # arr < t is t > arr: Python asks t.__gt__


def _strict_cases():
    ops = [(name, fn) for name, fn in BINARY.items()] + [("matmul", operator.matmul)]
    cases = [(name, fn, side) for name, fn in ops for side in ("right", "left")]
    return cases + [(name if side == "right" else MIRRORED.get(name, name), fn, side)
                    for fn in COMPARISONS for name in [fn.__name__] for side in ("right", "left")]


@pytest.mark.parametrize("name,fn,side", _strict_cases())
def test_off_the_numpy_device_a_numpy_array_operand_is_refused_and_the_tape_is_unchanged(name, fn, side):
    dev = tk.Cpu(backend="strict")
    x = dev.tensor([[1.0, 2.0], [3.0, 4.0]])
    traced = x.trace(tk.OwnedTape())
    with pytest.raises(tk.DeviceMismatchError, match=rf"{name}: a numpy array cannot meet .* on Cpu\(seed=0, "
                                                     rf"backend='strict'.*Make it a tensor there first: "
                                                     rf"dev.tensor\(array\)"):
        fn(*_ordered(side, traced, np.ones((2, 2))))
    np.testing.assert_array_equal((traced * 2.0).sum().backward()[x], np.full((2, 2), 2.0))


# -- numpy's ufuncs called on tensors ---------------------------------------------------------------
NUMPY_UFUNCS = [(np.add, operator.add), (np.subtract, operator.sub), (np.multiply, operator.mul),
                (np.divide, operator.truediv), (np.power, operator.pow), (np.maximum, tk.maximum),
                (np.logaddexp, tk.logaddexp)]


@pytest.mark.parametrize("ufunc,same", NUMPY_UFUNCS, ids=lambda f: getattr(f, "__name__", "op"))
@pytest.mark.parametrize("side", ["right", "left"])
def test_a_numpy_ufunc_of_a_tensor_and_an_array_is_the_traced_op(cpu, ufunc, same, side):
    x, y = (cpu.tensor([0.5, 1.5], dtype="float64").trace(tk.UnionTape()) for _ in range(2))
    c = np.array([2.0, 3.0])
    got, want = ufunc(*_ordered(side, x, c)), same(*_ordered(side, y, c))
    assert isinstance(got, tk.Tensor) and got.tape is not None
    np.testing.assert_allclose(got.numpy(), want.numpy())
    np.testing.assert_allclose(got.sum().backward()[x], want.sum().backward()[y])


def test_numpy_ufuncs_of_one_tensor_and_comparisons_and_matmul_are_tapekit_s(cpu):
    x = cpu.tensor([0.5, -1.5], dtype="float64").trace(tk.UnionTape())
    for ufunc, op in [(np.exp, tk.exp), (np.tanh, tk.tanh), (np.negative, tk.neg), (np.absolute, tk.abs),
                      (np.sqrt, lambda t: tk.sqrt(t * t))]:
        arg = x * x if ufunc is np.sqrt else x
        got = ufunc(arg)
        assert isinstance(got, tk.Tensor) and got.tape is not None
        np.testing.assert_allclose(got.numpy(), op(x).numpy())
    assert (np.greater(np.zeros(2), x).numpy() == [False, True]).all()
    assert (np.zeros(2) < x).numpy().tolist() == [True, False]
    m = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(np.matmul(m, x).numpy(), m @ x.numpy())
    assert isinstance(m @ x, tk.Tensor)


def test_a_numpy_ufunc_tapekit_has_no_op_for_is_refused_not_computed_on_the_values(cpu):
    x = cpu.tensor([0.5, 1.5]).trace(tk.UnionTape())
    with pytest.raises(tk.OperandError, match=r"np\.hypot got .*leave its tape behind.*\.numpy\(\)"):
        np.hypot(x, x)
    with pytest.raises(tk.OperandError, match=r"np\.add\.reduce"):
        np.add.reduce(x)
    with pytest.raises(tk.OperandError, match=r"np\.exp with out"):
        np.exp(x, out=np.zeros(2))
    assert len(x.tape) == 0  # nothing was recorded
    np.testing.assert_allclose(np.hypot(x.numpy(), x.numpy()), np.hypot([0.5, 1.5], [0.5, 1.5]), rtol=1e-6)


@pytest.mark.parametrize("side", ["right", "left"])
def test_tk_matmul_takes_a_numpy_array_as_the_operator_does(cpu, side):
    x, arr = cpu.tensor([[1.0, 2.0], [3.0, 4.0]], dtype="float64"), np.array([[0.5, -1.0], [2.0, 0.0]])
    out = tk.matmul(*_ordered(side, x.trace(), arr))
    want = operator.matmul(*_ordered(side, x.trace(), arr))
    np.testing.assert_array_equal(out.numpy(), want.numpy())
    np.testing.assert_array_equal(out.sum().backward()[x], want.sum().backward()[x])


@pytest.mark.parametrize("fn, op", [(np.sum, tk.sum), (np.mean, tk.mean), (np.max, tk.max), (np.min, tk.min),
                                    (np.prod, tk.prod), (np.std, tk.std), (np.var, tk.var), (np.cumsum, tk.cumsum),
                                    (np.cumprod, tk.cumprod)])
def test_numpy_reductions_of_a_tensor_run_as_tapekit_s(cpu, fn, op):
    """numpy calls a tensor's own method for these (``t.sum(axis=, dtype=, out=)``): the result
    stays traced, and ``out=`` or a ``dtype`` tapekit would not give is refused, changing nothing
    (with no ``TypeError``, which numpy's ``cumsum`` would take for a missing method and compute on
    the values)."""
    x = cpu.tensor([[0.5, -1.5, 2.0], [1.0, 0.25, -0.5]], dtype="float64").trace(tk.UnionTape())
    for kw in ({}, {"axis": 1}):
        got = fn(x, **kw)
        assert isinstance(got, tk.Tensor) and got.tape is not None
        np.testing.assert_allclose(got.numpy(), op(x, **kw).numpy())
    before = len(x.tape)
    with pytest.raises(tk.InvalidArgumentError, match="out="):
        fn(x, out=np.zeros(np.shape(fn(x.numpy()))))
    if fn not in (np.max, np.min):  # which take no dtype
        with pytest.raises(tk.InvalidArgumentError, match="dtype"):
            fn(x, dtype=np.float32)
    assert len(x.tape) == before
