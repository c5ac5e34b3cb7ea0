"""Derivatives at the points the op factory's random sampling misses: 0, ties, equal values,
infinite logits. Each value is the limit from both sides where the function is smooth there
(checked by float64 finite differences of the first derivative), or the documented value at a kink.
A backward rule that computes through a kink (``abs``, ``minimum``) or masks a branch after an
infinite derivative (``where`` after ``sqrt`` at 0) is right at first order and wrong when the
backward itself is differentiated (``tk.hessian``, ``tk.grad`` of ``tk.grad``, ``tk.hvp``)."""

from __future__ import annotations

import numpy as np
import pytest

import tapekit as tk

DEV = tk.Cpu(default_dtype="float64")


def T(values) -> tk.Tensor:
    return DEV.tensor(np.asarray(values, dtype="float64"))


def second(f, at) -> np.ndarray:
    return tk.hessian(lambda x: f(x).sum(), T(at)).numpy()


@pytest.mark.parametrize("f, at, want", [
    (tk.softplus, [0.0], 0.25),
    (lambda x: tk.softplus(x, 2.0), [0.0], 0.5),
    (lambda x: tk.logaddexp(x, T([0.0])), [0.0], 0.25),
    (lambda x: tk.binary_cross_entropy_with_logits(x, T([0.3]), reduction="sum"), [0.0], 0.25),
    (tk.silu, [0.0], 0.5),
    (tk.gelu, [0.0], 2 / np.sqrt(2 * np.pi)),
], ids=["softplus", "softplus beta=2", "logaddexp", "bce with logits", "silu", "gelu"])
def test_a_smooth_functions_second_derivative_at_0_is_its_limit(f, at, want):
    """Their rules computed through abs (sigmoid's and erfc's overflow guards), whose gradient is 0
    at 0: the second derivative came out 0 or halved."""
    np.testing.assert_allclose(second(f, at), [[want]], rtol=1e-6)
    slope = tk.grad(lambda x: f(x).sum())
    np.testing.assert_allclose(tk.grad(lambda x: slope(x).sum())(T(at)).numpy(), [want], rtol=1e-6)


def test_logaddexp_at_a_tie_has_the_hessian_of_its_smooth_pair():
    h = tk.hessian(lambda z: tk.logaddexp(z[0:1], z[1:2]).sum(), T([3.0, 3.0])).numpy()
    np.testing.assert_allclose(h, [[0.25, -0.25], [-0.25, 0.25]], rtol=1e-6)


@pytest.mark.parametrize("tie", [-np.inf, np.inf])
def test_logaddexp_at_an_infinite_tie_splits_its_gradient_as_documented(tie):
    gx, gy = tk.grad(lambda x, y: tk.logaddexp(x, y).sum(), argnums=(0, 1))(T([tie]), T([tie]))
    assert gx.numpy().tolist() == [0.5] and gy.numpy().tolist() == [0.5]


def test_a_power_with_a_tensor_exponent_has_a_symmetric_hessian_at_exponent_0():
    """d/dp of the x-gradient p x^(p-1) is x^(p-1) (1 + p log x): 1/2 at (2, 0). The mask for
    p == 0 cut the link to p wherever p was 0, not only where x is 0 too."""
    h = tk.hessian(lambda z: tk.pow(z[0:1], z[1:2]).sum(), T([2.0, 0.0])).numpy()
    np.testing.assert_allclose(h, [[0.0, 0.5], [0.5, np.log(2) ** 2]], rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("dtype, values", [("float64", [0.1] * 3), ("float32", [1 / 3] * 7),
                                           ("float64", [2.0] * 3)])
def test_std_of_equal_values_has_gradient_0_even_where_the_mean_rounds(dtype, values):
    """std(x + c) = std(x), so its gradient sums to 0; a rounded mean left each deviation the same
    tiny number, and the slope was -1/n each."""
    x = DEV.tensor(np.asarray(values, dtype=dtype), dtype=dtype)
    assert tk.std(x).numpy() == 0
    assert np.all(tk.grad(tk.std)(x).numpy() == 0)


def test_std_of_equal_values_has_hessian_0_as_abs_at_0():
    """A kink, as documented: its Hessian was (I - 11ᵀ/n)/n, from the 1 the root was taken of."""
    np.testing.assert_array_equal(tk.hessian(tk.std, T([2.0, 2.0, 2.0])).numpy(), np.zeros((3, 3)))


def test_elus_second_derivative_at_0_is_one_sides():
    """It was 0.5, minimum's half-and-half tie inside the rule: neither side's value."""
    assert second(tk.elu, [0.0]).tolist() in ([[0.0]], [[1.0]])


def test_cross_entropys_forward_mode_in_a_probability_target_skips_a_masked_class():
    """-log_softmax is inf in a class whose logit is -inf, times the target's tangent 0: NaN, summed
    over the classes into the whole example's tangent."""
    logits = T([[0.0, -np.inf, 1.0]])
    p0 = T([[0.6, 0.0, 0.4]])
    _, tangent = tk.jvp(lambda p: tk.cross_entropy(logits, p), (p0,), (T([[1.0, 0.0, -1.0]]),))
    np.testing.assert_allclose(tangent.numpy(), 1.0, rtol=1e-12)
