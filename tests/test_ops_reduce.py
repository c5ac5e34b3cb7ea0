"""Reductions beyond the op factory's specs (tests/op_specs/reduce.py): 0-d tensors, axis errors,
var/std's correction, the ops with no gradient, integer dtypes, Tensor methods and docstrings."""

from __future__ import annotations

import numpy as np
import pytest

import tapekit as tk
from tapekit.devices import dtype_name

from .conftest import host

ZERO_D = [  # (call on dev.tensor(2.), value, gradient)
    (lambda t: t.sum(0), 2.0, 1.0),
    (lambda t: t.sum(-1), 2.0, 1.0),
    (lambda t: t.sum((0,)), 2.0, 1.0),
    (lambda t: t.mean(0), 2.0, 1.0),
    (lambda t: t.max(0), 2.0, 1.0),
    (lambda t: t.min(-1), 2.0, 1.0),
    (lambda t: t.prod(0), 2.0, 1.0),
    (lambda t: t.var(0), 0.0, 0.0),
    (lambda t: t.std(-1), 0.0, 0.0),
    (lambda t: t.logsumexp(0), 2.0, 1.0),
    (lambda t: t.softmax(), 1.0, 0.0),
    (lambda t: t.softmax(0), 1.0, 0.0),
    (lambda t: t.log_softmax(), 0.0, 0.0),
    (lambda t: t.cumsum(0), 2.0, 1.0),
    (lambda t: t.cumsum(-1), 2.0, 1.0),
]


@pytest.mark.parametrize("i", range(len(ZERO_D)))
def test_zero_d_reductions_take_axis_0_and_minus_1(dev, i):
    f, value, grad = ZERO_D[i]
    x = dev.tensor(2.0)
    out = f(x.trace())
    assert out.shape == ()
    assert host(out) == value
    assert host(out.backward()[x]) == grad


def test_zero_d_cumsum_without_axis_flattens_as_numpy(dev):
    assert dev.tensor(2.0).cumsum().shape == np.cumsum(np.float32(2.0)).shape == (1,)


@pytest.mark.parametrize("op", ["argmax", "argmin", "all", "any"])
@pytest.mark.parametrize("axis", [None, 0, -1])
def test_zero_d_ops_without_gradient(dev, op, axis):
    out = getattr(dev.tensor(2.0), op)(axis)
    assert out.shape == () and host(out) == {"argmax": 0, "argmin": 0, "all": True, "any": True}[op]


REDUCTIONS = ["sum", "mean", "max", "min", "prod", "var", "std", "logsumexp", "softmax", "log_softmax", "cumsum",
              "argmax", "argmin", "all", "any"]


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("shape,axis", [((), 1), ((), -2), ((), (0, 1)), ((2, 3), 2), ((2, 3), -3),
                                        ((2, 3), 1.0), ((2, 3), "0")])
def test_bad_axis_is_tapekits_axis_error(dev, op, shape, axis):
    with pytest.raises(tk.AxisError, match=op):
        getattr(tk, op)(dev.zeros(shape), axis)


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod", "var", "std", "logsumexp", "softmax", "all"])
def test_repeated_axis_is_an_axis_error(dev, op):
    with pytest.raises(tk.AxisError, match="repeats"):
        getattr(tk, op)(dev.zeros((2, 3)), (1, -1))


@pytest.mark.parametrize("op", ["cumsum", "argmax", "argmin"])
def test_ops_along_one_axis_refuse_a_tuple(dev, op):
    with pytest.raises(tk.AxisError, match="one axis"):
        getattr(tk, op)(dev.zeros((2, 3)), (0,))


@pytest.mark.parametrize("op", ["var", "std"])
def test_correction_needs_more_elements_than_it_removes(dev, op):
    """Documented: var and std over n <= correction elements raise (numpy gives nan and a warning)."""
    with pytest.raises(tk.InvalidArgumentError, match="correction=0"):
        getattr(tk, op)(dev.tensor([3.0]), correction=1)
    with pytest.raises(tk.InvalidArgumentError, match="correction=0"):
        getattr(dev.tensor([[1.0, 2.0]]), op)(0, ddof=1)
    assert host(getattr(tk, op)(dev.tensor([[1.0, 2.0]]), 1, correction=1)).shape == (1,)


@pytest.mark.parametrize("kwargs,message", [({"correction": -1}, ">= 0"), ({"correction": "1"}, ">= 0"),
                                            ({"correction": float("nan")}, ">= 0"),
                                            ({"correction": 1, "ddof": 0}, "pass one of them")])
def test_bad_correction_says_what_to_pass(dev, kwargs, message):
    with pytest.raises(tk.InvalidArgumentError, match=message):
        tk.var(dev.tensor([1.0, 2.0, 3.0]), **kwargs)


def test_ddof_is_numpys_name_for_correction(dev):
    x = np.array([1.0, 2.0, 4.0])
    for f in (tk.var, tk.std):
        ref = getattr(np, f.__name__)(x, ddof=1)
        assert np.allclose(host(f(dev.tensor(x), ddof=1)), ref)
        assert np.allclose(host(f(dev.tensor(x), correction=1, ddof=1)), ref)


@pytest.mark.parametrize("op", ["argmax", "argmin", "all", "any"])
def test_ops_without_gradient_record_nothing(dev, op):
    x = dev.tensor([[1.0, 0.0], [3.0, 3.0]])
    assert getattr(x.trace(tk.UnionTape()), op)(1).tape is None
    with tk.GlobalTape() as tape:
        out = getattr(tk, op)(x, 0)
    assert out.tape is None and len(tape) == 0


def test_argmax_argmin_pick_the_first_of_ties_as_integers(dev):
    x = dev.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    assert host(x.argmax(1)).tolist() == [1, 0] and host(x.argmin(1)).tolist() == [0, 2]
    assert host(x.argmax()) == 1 and x.argmax(-1, keepdims=True).shape == (2, 1)
    assert dtype_name(x.argmax().dtype) == "int64" and dtype_name(x.all().dtype) == "bool"


@pytest.mark.parametrize("op", ["sum", "prod", "cumsum", "min", "max"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_inputs_keep_numpys_integer_dtype(dev, op, dtype):
    a = np.array([[1, -2, 3], [4, 5, -6]], dtype=dtype)
    got = getattr(tk, op)(dev.tensor(a), 0)
    want = getattr(np, op)(a, axis=0)
    assert dtype_name(got.dtype) == want.dtype.name
    assert np.array_equal(host(got), want)


METHODS = [("min", (1,), {}), ("prod", (0, True), {}), ("var", (None,), {"correction": 1}),
           ("std", (1,), {"ddof": 1}), ("cumsum", (0,), {}), ("argmax", (1,), {}), ("argmin", (), {}),
           ("all", ((0, 1),), {}), ("any", (0, True), {})]


@pytest.mark.parametrize("op,args,kwargs", METHODS)
def test_methods_are_the_functions(dev, op, args, kwargs):
    t = dev.tensor([[0.5, -1.0, 2.0], [0.0, 3.0, 1.5]])
    assert np.array_equal(host(getattr(t, op)(*args, **kwargs)), host(getattr(tk, op)(t, *args, **kwargs)))


@pytest.mark.parametrize("op", REDUCTIONS)
def test_docstrings_say_what_and_the_gradient(op):
    doc = getattr(tk, op).__doc__
    assert doc and "gradient" in doc


@pytest.mark.parametrize("x, axis, want", [
    ([-np.inf, -np.inf], None, -np.inf),  # exp of nothing: log(0)
    ([[-np.inf, -np.inf], [0.0, 1.0]], 1, [-np.inf, np.log1p(np.e)]),
    ([np.inf, 1.0], None, np.inf),
    ([np.inf, np.inf], None, np.inf),
])
def test_logsumexp_of_infinities_is_pytorchs(dev, x, axis, want):
    """The shift by the maximum must not turn -inf - -inf or inf - inf into nan."""
    with np.errstate(invalid="ignore"):
        got = tk.logsumexp(dev.tensor(x, dtype="float64"), axis=axis)
    np.testing.assert_allclose(host(got), want)


@pytest.mark.parametrize("op", ["logsumexp", "softmax", "log_softmax"])
@pytest.mark.parametrize("shape, axis", [((3, 0), -1), ((0,), None), ((0, 2), 0)])
def test_the_exp_reductions_take_an_empty_axis(dev, op, shape, axis):
    """An empty axis has no maximum to shift by: logsumexp over it is log(0) = -inf and a softmax of
    it is empty, as in PyTorch (not numpy's 'zero-size array' error)."""
    x = dev.tensor(np.zeros(shape), dtype="float64").trace(tk.UnionTape())
    with np.errstate(divide="ignore"):
        out = getattr(tk, op)(x, axis=axis)
    want = (np.full(np.sum(np.zeros(shape), axis=axis).shape, -np.inf) if op == "logsumexp" else np.zeros(shape))
    np.testing.assert_array_equal(host(out), want)
    assert host(tk.backward([out], [np.ones(out.shape)])[x]).shape == shape
