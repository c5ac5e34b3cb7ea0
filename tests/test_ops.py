"""Every op: forward against numpy, backward against central finite differences in float64,
over broadcasting shapes drawn by hypothesis, on every device."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

import tapekit as tk

from .conftest import DEVICE_KINDS, host, make_device
from .reference import np_sigmoid, np_softmax

FAST = settings(max_examples=12, deadline=None)


def values(shape, domain="any", seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=shape)
    if domain == "positive":
        return np.abs(x) + 0.5
    return x


BINARY = {
    "add": (lambda a, b: a + b, np.add, "any"),
    "sub": (lambda a, b: a - b, np.subtract, "any"),
    "mul": (lambda a, b: a * b, np.multiply, "any"),
    "div": (lambda a, b: a / b, np.divide, "positive"),
    "pow": (lambda a, b: a ** b, np.power, "positive"),
    "maximum": (tk.maximum, np.maximum, "any"),
    "minimum": (tk.minimum, np.minimum, "any"),
}

UNARY = {
    "neg": (lambda a: -a, np.negative, "any"),
    "abs": (lambda a: abs(a), np.abs, "any"),
    "exp": (tk.exp, np.exp, "any"),
    "log": (tk.log, np.log, "positive"),
    "sqrt": (tk.sqrt, np.sqrt, "positive"),
    "tanh": (tk.tanh, np.tanh, "any"),
    "sigmoid": (tk.sigmoid, np_sigmoid, "any"),
    "relu": (tk.relu, lambda x: np.maximum(x, 0), "any"),
    "sin": (tk.sin, np.sin, "any"),
    "cos": (tk.cos, np.cos, "any"),
    "clip": (lambda a: tk.clip(a, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7), "any"),
    "power": (lambda a: a ** 3, lambda x: x ** 3, "any"),
    "power_frac": (lambda a: a ** 0.5, np.sqrt, "positive"),
    "rsub_scalar": (lambda a: 2.0 - a, lambda x: 2.0 - x, "any"),
    "rdiv_scalar": (lambda a: 3.0 / a, lambda x: 3.0 / x, "positive"),
    "rpow_scalar": (lambda a: 2.0 ** a, lambda x: 2.0 ** x, "any"),
    "mul_scalar": (lambda a: a * 1.5, lambda x: x * 1.5, "any"),
}


def check(dev, f, reference, arrays, rtol=1e-5):
    tensors = [dev.tensor(a, dtype="float64") for a in arrays]
    np.testing.assert_allclose(host(f(*tensors)), reference(*arrays), rtol=rtol, atol=1e-12)
    tk.check_grads(f, *tensors)


@pytest.mark.parametrize("kind", DEVICE_KINDS)
@pytest.mark.parametrize("name", sorted(BINARY))
@FAST
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3))
def test_binary_op_broadcasting(kind, name, shapes):
    dev = make_device(kind)
    f, reference, domain = BINARY[name]
    a, b = shapes.input_shapes
    check(dev, f, reference, [values(a, domain, 1), values(b, domain, 2)])


@pytest.mark.parametrize("kind", DEVICE_KINDS)
@pytest.mark.parametrize("name", sorted(UNARY))
@FAST
@given(shape=array_shapes(min_dims=0, max_dims=3, max_side=3))
def test_unary_op(kind, name, shape):
    dev = make_device(kind)
    f, reference, domain = UNARY[name]
    check(dev, f, reference, [values(shape, domain, 3)])


REDUCTIONS = {
    "sum": (lambda t, ax, kd: t.sum(ax, kd), lambda x, ax, kd: np.sum(x, axis=ax, keepdims=kd)),
    "mean": (lambda t, ax, kd: t.mean(ax, kd), lambda x, ax, kd: np.mean(x, axis=ax, keepdims=kd)),
    "max": (lambda t, ax, kd: t.max(ax, kd), lambda x, ax, kd: np.max(x, axis=ax, keepdims=kd)),
    "logsumexp": (lambda t, ax, kd: t.logsumexp(ax, kd),
                  lambda x, ax, kd: np.log(np.sum(np.exp(x), axis=ax, keepdims=kd))),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduction(dev, name, axis, keepdims):
    f, reference = REDUCTIONS[name]
    x = values((2, 3, 4), seed=4)
    check(dev, lambda t: f(t, axis, keepdims), lambda a: reference(a, axis, keepdims), [x])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_family(dev, axis):
    x = values((3, 4), seed=5)
    check(dev, lambda t: t.softmax(axis), lambda a: np_softmax(a, axis), [x])
    check(dev, lambda t: t.log_softmax(axis), lambda a: np.log(np_softmax(a, axis)), [x])


@pytest.mark.parametrize("a,b", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                                 ((2, 2, 3), (3, 4)), ((3,), (2, 3, 4)), ((2, 1, 2, 3), (3, 3, 2))])
def test_matmul(dev, a, b):
    check(dev, lambda x, y: x @ y, np.matmul, [values(a, seed=6), values(b, seed=7)])


def test_shape_ops(dev):
    x = values((2, 3, 4), seed=8)
    check(dev, lambda t: t.reshape(4, -1), lambda a: a.reshape(4, -1), [x])
    check(dev, lambda t: t.reshape((24,)), lambda a: a.reshape(24), [x])
    check(dev, lambda t: t.transpose(0, 2), lambda a: np.swapaxes(a, 0, 2), [x])
    check(dev, lambda t: t.permute(2, 0, 1), lambda a: np.transpose(a, (2, 0, 1)), [x])
    check(dev, lambda t: t.T, lambda a: a.T, [x])
    check(dev, lambda t: t[0].broadcast_to((5, 3, 4)), lambda a: np.broadcast_to(a[0], (5, 3, 4)), [x])


def test_indexing(dev):
    x = values((4, 3), seed=9)
    check(dev, lambda t: t[1:3], lambda a: a[1:3], [x])
    check(dev, lambda t: t[:, 1], lambda a: a[:, 1], [x])
    check(dev, lambda t: t[2], lambda a: a[2], [x])
    check(dev, lambda t: t[None, ..., ::2], lambda a: a[None, ..., ::2], [x])
    index = np.array([0, 2, 2, 3, 0, -1])
    check(dev, lambda t: t[index], lambda a: a[index], [x])


def test_repeated_indices_add_their_gradients(dev):
    x = dev.tensor([1.0, 2.0, 3.0])
    g = x.trace()[[0, 0, 2, 0]].sum().backward()
    np.testing.assert_allclose(host(g[x]), [3.0, 0.0, 1.0])


def test_joining(dev):
    a, b, c = values((2, 3), seed=10), values((1, 3), seed=11), values((2, 3), seed=12)
    check(dev, lambda x, y: tk.concat([x, y], axis=0), lambda x, y: np.concatenate([x, y], 0), [a, b])
    check(dev, lambda x, y: tk.stack([x, y], axis=1), lambda x, y: np.stack([x, y], 1), [a, c])
    cond = a > 0
    check(dev, lambda x, y: tk.where(dev.tensor(cond), x, y), lambda x, y: np.where(cond, x, y), [a, b])
    check(dev, lambda x: tk.where(dev.tensor(cond), x, 0.0), lambda x: np.where(cond, x, 0.0), [a])


def test_zero_d_tensors(dev):
    check(dev, lambda x, y: x * y + x.exp(), lambda x, y: x * y + np.exp(x), [np.array(0.3), np.array(-1.2)])


def test_float32_is_the_default(dev):
    x = dev.tensor([1.0, 2.0])
    assert "float32" in str(x.dtype)
    assert "float32" in str((x * 2.0 + 1).dtype)
    assert "float64" in str(dev.tensor([1.0], dtype="float64").dtype)


def test_check_grads_reports_the_worst_mismatch(cpu):
    def wrong(t):  # a correct forward with a deliberately wrong derivative
        return tk.ops.core.emit("wrong", t.data ** 2, (t,), (lambda g: g * 3.0,), (), t.device).sum()

    report = tk.check_grads(wrong, cpu.tensor([1.0, 2.0], dtype="float64"), raise_on_failure=False)
    assert not report.ok and report.index == (1,)
    assert report.analytic == pytest.approx(3.0) and report.numeric == pytest.approx(4.0)
    with pytest.raises(tk.GradientCheckError, match="worst at input 0, index \\(1,\\)"):
        tk.check_grads(wrong, cpu.tensor([1.0, 2.0], dtype="float64"))


def test_check_grads_fails_a_gradient_that_is_not_finite(cpu):
    """A NaN compares false with everything: it used to be neither bad nor the worst, so a NaN gradient
    "matched"."""
    def nan_rule(t):
        return tk.ops.core.emit("nan_rule", t.data * 2, (t,), (lambda g: g * np.nan,), (), t.device).sum()

    report = tk.check_grads(nan_rule, cpu.tensor([1.0, 2.0], dtype="float64"), raise_on_failure=False)
    assert not report.ok and np.isnan(report.analytic)
    with pytest.raises(tk.GradientCheckError, match="index \\(0,\\)"):  # sqrt(x * x) at 0: a NaN gradient
        tk.check_grads(lambda t: (t * t).sqrt().sum(), cpu.tensor([0.0, 1.0], dtype="float64"))


@pytest.mark.parametrize("bad", [{"eps": 0}, {"eps": -1e-6}, {"eps": "a"}, {"atol": float("nan")},
                                 {"rtol": -1.0}, {"atol": float("inf")}])
def test_check_grads_refuses_a_step_or_tolerance_that_decides_nothing(cpu, bad):
    with pytest.raises(tk.InvalidArgumentError, match=next(iter(bad))):
        tk.check_grads(lambda t: (t * t).sum(), cpu.tensor([1.0], dtype="float64"), **bad)


@pytest.mark.parametrize("call", [lambda x: tk.check_grads(lambda t: t.sum()), lambda x: tk.check_grads(3, x),
                                  lambda x: tk.check_grads(lambda t: t.sum(), [1.0]),
                                  lambda x: tk.check_grads(lambda t: 3.0, x)],
                         ids=["no inputs", "not a function", "a list", "f returns a number"])
def test_check_grads_refuses_what_it_cannot_check(cpu, call):
    with pytest.raises(tk.OperandError):
        call(cpu.tensor([1.0], dtype="float64"))


def test_comparisons_are_masks_without_gradient_and_tensors_stay_hashable(dev):
    x = dev.tensor([-1.0, 2.0, 3.0]).trace()
    assert (x == 2.0).tape is None and host(x == 2.0).tolist() == [False, True, False]
    assert host(x != x).tolist() == [False, False, False]
    g = tk.where(x > 0, x, 0.0).sum().backward()
    np.testing.assert_allclose(host(g[x]), [0.0, 1.0, 1.0])
    y = dev.tensor([1.0])
    assert {x: "x", y: "y"}[y] == "y"  # hashed by identity
    assert bool(y == 1.0) and not bool(y > 1.0)
    with pytest.raises(tk.InvalidArgumentError, match="ambiguous"):
        bool(x > 0)
    assert (x == None) is False  # noqa: E711  (not a value to compare with: identity, as in Python)
