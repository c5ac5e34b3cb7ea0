"""The elementwise ops beyond what the op factory checks (tests/op_specs/elementwise.py): pow's
gradients at the edges for every spelling of a power, with no numpy warning where they are finite;
docstrings that state the gradient; methods and operators; integers kept by the step functions;
gelu's erf far into the tails; activations that do not overflow; errors that say what to pass."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import tapekit as tk

from .conftest import host


def grads_of(dev, f, *arrays):
    tape = tk.UnionTape()
    tensors = [dev.tensor(a, dtype="float64") for a in arrays]
    out = f(*[t.trace(tape) for t in tensors])
    g = tk.backward([out], [dev.tensor(np.ones(out.shape), dtype="float64")])
    return [host(g[t]) for t in tensors]


# x, y, d(x ** y)/dx, d(x ** y)/dy, as PyTorch gives them
POW = [(0.0, 0.0, 0.0, 0.0), (0.0, 1.0, 1.0, 0.0), (0.0, 2.0, 0.0, 0.0), (0.0, 0.5, np.inf, 0.0),
       (0.0, -1.0, -np.inf, -np.inf), (-2.0, 2.0, -4.0, np.nan), (2.0, 3.0, 12.0, 8 * np.log(2.0))]


@pytest.mark.parametrize("x,y,dx,dy", POW)
def test_pow_gradients_at_the_edges(dev, x, y, dx, dy):
    with warnings.catch_warnings():  # numpy may warn only where a gradient is infinite or nan
        warnings.simplefilter("error" if np.isfinite([dx, dy]).all() else "ignore")
        got = grads_of(dev, lambda a, b: a ** b, [x], [y])
        np.testing.assert_allclose(np.concatenate(got), [dx, dy], rtol=1e-12)
        (got_x,) = grads_of(dev, lambda a: a ** y, [x])  # a number exponent: ``power``
        np.testing.assert_allclose(got_x, [dx], rtol=1e-12)
        (got_y,) = grads_of(dev, lambda b: x ** b, [y])  # a number base: ``pow`` with a scalar base
        np.testing.assert_allclose(got_y, [dy], rtol=1e-12)


METHODS = ["square", "exp2", "expm1", "log2", "log10", "log1p", "tan", "asin", "acos", "atan", "sinh", "cosh",
           "sign", "floor", "ceil", "round"]
BINARY_METHODS = ["logaddexp", "floor_divide", "remainder"]


@pytest.mark.parametrize("name", tk.ops.elementwise.__all__ + ["pow"] + BINARY_METHODS)
def test_help_says_what_the_gradient_is(name):
    assert "gradient" in getattr(tk, name).__doc__.lower()


def test_methods_and_operators_are_the_ops(cpu):
    x, y = cpu.tensor([0.3, 0.5, 0.8]), cpu.tensor([0.7, 1.1, -0.4])
    for name in METHODS:
        np.testing.assert_array_equal(host(getattr(x, name)()), host(getattr(tk, name)(x)), err_msg=name)
    for name in BINARY_METHODS:
        np.testing.assert_array_equal(host(getattr(x, name)(y)), host(getattr(tk, name)(x, y)), err_msg=name)
    np.testing.assert_allclose(host(x // y), np.floor_divide(host(x), host(y)))
    np.testing.assert_allclose(host(2.0 // y), np.floor_divide(2.0, host(y)))
    np.testing.assert_allclose(host(x % 0.5), np.remainder(host(x), 0.5), rtol=1e-6)
    np.testing.assert_allclose(host(2.0 % y), np.remainder(2.0, host(y)), rtol=1e-6)
    np.testing.assert_allclose(host(x.round(1)), np.round(host(x), 1))
    assert tk.arcsin is tk.asin and tk.arccos is tk.acos and tk.arctan is tk.atan


@pytest.mark.parametrize("name", ["sign", "floor", "ceil", "round"])
def test_steps_keep_integers(dev, name):
    x = np.array([-3, 0, 2, 7])
    got = getattr(tk, name)(dev.tensor(x))
    assert "int" in str(got.dtype), f"{name} of integers gave {got.dtype}, numpy keeps integers"
    np.testing.assert_array_equal(host(got), getattr(np, name)(x))


def test_integer_division_keeps_integers(dev):
    x, y = np.array([-7, 0, 5, 9]), np.array([2, 3, -2, 4])
    for got, want in [(dev.tensor(x) // dev.tensor(y), x // y), (dev.tensor(x) % dev.tensor(y), x % y)]:
        assert "int" in str(got.dtype)
        np.testing.assert_array_equal(host(got), want)


def test_gelu_is_exact_far_into_the_tails(dev):
    x = np.concatenate([np.linspace(-12, 12, 2401), [-40.0, 40.0]])
    want = x * np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in x])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(host(tk.gelu(dev.tensor(x, dtype="float64"))), want, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(host(tk.gelu(dev.tensor(x, dtype="float32"))), want, rtol=1e-4, atol=1e-30)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(host(tk.gelu(dev.tensor([-np.inf, np.inf]))), [np.nan, np.inf])  # as PyTorch


@pytest.mark.parametrize("name,kwargs", [("softplus", {}), ("softplus", {"beta": 2.0}), ("elu", {}),
                                         ("silu", {}), ("sigmoid", {}), ("gelu", {}),
                                         ("gelu", {"approximate": "tanh"}), ("leaky_relu", {})])
def test_activations_do_not_overflow(cpu, name, kwargs):
    x = cpu.tensor([-1000.0, -30.0, 0.0, 30.0, 1000.0], dtype="float32")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (g,) = grads_of(cpu, lambda t: getattr(tk, name)(t, **kwargs), host(x))
    assert np.isfinite(g).all(), f"{name}: gradient {g}"


def test_softplus_is_linear_far_out(cpu):
    np.testing.assert_allclose(host(tk.softplus(cpu.tensor([800.0, -800.0]))), [800.0, 0.0])


def test_bad_arguments_say_what_to_pass(cpu):
    x = cpu.tensor([1.0])
    with pytest.raises(tk.InvalidArgumentError, match="'none' .* or 'tanh'"):
        tk.gelu(x, approximate="erf")
    with pytest.raises(tk.InvalidArgumentError, match="decimals must be an integer"):
        x.round(1.5)


def test_relu_keeps_a_nan(dev):
    """A NaN must not be hidden by the activation that follows it: relu(nan) is nan, as in PyTorch."""
    out = tk.relu(dev.tensor([np.nan, -1.0, 2.0], dtype="float64"))
    np.testing.assert_array_equal(host(out), [np.nan, 0.0, 2.0])


@pytest.mark.parametrize("op", [tk.maximum, tk.minimum, tk.logaddexp, tk.div, tk.pow, tk.sub])
def test_binary_ops_take_a_number_on_either_side(dev, op):
    """A Python number as either operand, as in maximum(2.0, t): neither the forward nor the rules
    may hand it to namespace functions that take arrays only (the strict device refuses them)."""
    x = dev.tensor([1.0, 2.5, 3.0], dtype="float64")
    tk.check_grads(lambda a: op(2.0, a), x)
    tk.check_grads(lambda a: op(a, 2.0), x)
