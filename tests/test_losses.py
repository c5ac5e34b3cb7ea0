"""Losses: values against numpy formulas, stability at extreme logits, gradients against finite
differences, and argument errors raised before anything is recorded."""

from __future__ import annotations

import numpy as np
import pytest

import tapekit as tk

from .conftest import host
from .reference import np_log_softmax, np_sigmoid


# -- mse ---------------------------------------------------------------------------------------------
def test_mse_loss_is_the_mean_or_sum_of_squared_errors(dev):
    pred, target = np.array([[1.0, 2.0], [3.0, -1.0]]), np.array([[0.5, 2.0], [1.0, 1.0]])
    p = dev.tensor(pred, dtype="float64")
    assert np.isclose(tk.mse_loss(p, dev.tensor(target, dtype="float64")).item(), np.mean((pred - target) ** 2))
    assert np.isclose(tk.mse_loss(p, target.tolist(), reduction="sum").item(), np.sum((pred - target) ** 2))
    g = tk.mse_loss(p.trace(), target).backward()
    np.testing.assert_allclose(host(g[p]), 2 * (pred - target) / pred.size)
    tk.check_grads(lambda a, b: tk.mse_loss(a, b), p, dev.tensor(target, dtype="float64"))


def test_mse_loss_refuses_a_target_of_another_shape(dev):
    p = dev.tensor([1.0, 2.0]).trace(tk.UnionTape())
    with pytest.raises(tk.ShapeError, match=r"target has shape \(2, 1\)"):
        tk.mse_loss(p, dev.tensor([[1.0], [2.0]]))
    assert len(p.tape) == 0


# -- cross entropy -----------------------------------------------------------------------------------
def test_cross_entropy_matches_the_log_softmax_formula(dev):
    logits = np.random.default_rng(0).standard_normal((5, 4))
    labels = np.array([0, 3, 1, 1, 2])
    per_example = -np_log_softmax(logits)[np.arange(5), labels]
    z = dev.tensor(logits, dtype="float64")
    assert np.isclose(tk.cross_entropy(z, labels).item(), per_example.mean())
    assert np.isclose(tk.cross_entropy(z, dev.tensor(labels), reduction="sum").item(), per_example.sum())
    softmax = np.exp(np_log_softmax(logits))
    g = tk.cross_entropy(z.trace(), labels).backward()
    np.testing.assert_allclose(host(g[z]), (softmax - np.eye(4)[labels]) / 5, atol=1e-12)
    tk.check_grads(lambda t: tk.cross_entropy(t, labels), z)
    tk.check_grads(lambda t: tk.cross_entropy(t, labels, reduction="sum"), z)


def test_cross_entropy_takes_class_probabilities_of_the_logits_shape(dev):
    logits = np.random.default_rng(2).standard_normal((4, 3))
    labels = np.array([2, 0, 1, 1])
    z = dev.tensor(logits, dtype="float64")
    onehot = np.eye(3)[labels]
    for reduction in ("mean", "sum"):
        by_labels = tk.cross_entropy(z.trace(), labels, reduction=reduction)
        by_onehot = tk.cross_entropy(z.trace(), dev.tensor(onehot, dtype="float64"), reduction=reduction)
        assert np.isclose(by_labels.item(), by_onehot.item())
        np.testing.assert_allclose(host(by_labels.backward()[z]), host(by_onehot.backward()[z]), atol=1e-12)
    soft = np.random.default_rng(3).uniform(0.1, 1.0, (4, 3))  # not normalised: the rule must not assume it
    expected = -(soft * np_log_softmax(logits)).sum(-1).mean()
    assert np.isclose(tk.cross_entropy(z, soft).item(), expected)
    tk.check_grads(lambda t: tk.cross_entropy(t, soft), z)
    tk.check_grads(lambda t: tk.cross_entropy(t, soft, reduction="sum"), z)


def test_cross_entropy_takes_any_leading_shape_and_one_example(dev):
    logits = np.random.default_rng(1).standard_normal((2, 3, 4))
    labels = np.array([[0, 1, 2], [3, 3, 0]])
    expected = -np.take_along_axis(np_log_softmax(logits), labels[..., None], -1).mean()
    assert np.isclose(tk.cross_entropy(dev.tensor(logits, dtype="float64"), labels).item(), expected)
    tk.check_grads(lambda t: tk.cross_entropy(t, labels), dev.tensor(logits, dtype="float64"))
    three = dev.tensor([1.0, 2.0, 3.0], dtype="float64")
    one = tk.cross_entropy(three, np.array(2))
    assert np.isclose(one.item(), -np_log_softmax(np.array([1.0, 2.0, 3.0]))[2])
    tk.check_grads(lambda t: tk.cross_entropy(t, np.array(2), reduction="sum"), three)


def test_cross_entropy_is_stable_for_huge_logits(dev):
    z = dev.tensor([[1e4, 0.0, -1e4], [-1e4, -1e4, 1e4]]).trace()
    loss = tk.cross_entropy(z, np.array([1, 2]))
    assert np.isclose(loss.item(), 5e3)  # (1e4 + 0) / 2: the first example is 1e4 off, the second right
    g = host(loss.backward()[z])
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, [[0.5, -0.5, 0.0], [0.0, 0.0, 0.0]], atol=1e-6)


@pytest.mark.parametrize("labels, error, match", [
    (np.array([0.0, 1.0]), tk.ShapeError, r"class probabilities and needs the logits' shape \(2, 3\), got \(2,\)"),
    ([0.5, 1.0], tk.ShapeError, r"pass integers of shape \(2,\)"),
    (np.array([True, False]), tk.DTypeError, "integer class indices or floating class probabilities, got dtype bool"),
    (np.array([0, 3]), tk.IndexingError, "labels range from 0 to 3, but the logits have 3 classes"),
    (np.array([-1, 0]), tk.IndexingError, "valid labels: 0 to 2"),
    (np.array([0, 1, 2]), tk.ShapeError, r"labels of shape \(3,\) do not fit logits of shape \(2, 3\)"),
])
def test_cross_entropy_refuses_bad_labels_before_recording(dev, labels, error, match):
    z = dev.randn((2, 3)).trace(tk.OwnedTape())
    with pytest.raises(error, match=match):
        tk.cross_entropy(z, labels)
    assert len(z.tape) == 0
    assert tk.cross_entropy(z, np.array([0, 2])).backward()[z].shape == (2, 3)  # z still owns its tape


def test_losses_refuse_an_unknown_reduction(dev):
    z = dev.randn((2, 3))
    for call in (lambda: tk.cross_entropy(z, np.array([0, 1]), reduction="none"),
                 lambda: tk.mse_loss(z, z, reduction="avg"),
                 lambda: tk.binary_cross_entropy_with_logits(z, z, reduction="")):
        with pytest.raises(tk.InvalidArgumentError, match="reduction must be 'mean' or 'sum'"):
            call()


# -- binary cross entropy ----------------------------------------------------------------------------
def test_binary_cross_entropy_with_logits_matches_the_sigmoid_formula(dev):
    x = np.array([[-2.0, 0.0, 0.5], [3.0, -0.25, 1.0]])
    t = np.array([[0.0, 1.0, 0.3], [1.0, 0.0, 0.5]])
    s = np_sigmoid(x)
    naive = -(t * np.log(s) + (1 - t) * np.log(1 - s))
    z = dev.tensor(x, dtype="float64")
    assert np.isclose(tk.binary_cross_entropy_with_logits(z, t).item(), naive.mean())
    assert np.isclose(tk.binary_cross_entropy_with_logits(z, dev.tensor(t, dtype="float64"), "sum").item(),
                      naive.sum())
    g = tk.binary_cross_entropy_with_logits(z.trace(), t).backward()
    np.testing.assert_allclose(host(g[z]), (s - t) / x.size, atol=1e-12)  # at x = 0 too: sigmoid(0) = 0.5
    tk.check_grads(lambda a, b: tk.binary_cross_entropy_with_logits(a, b), z, dev.tensor(t, dtype="float64"))


def test_binary_cross_entropy_with_logits_is_stable_for_huge_logits(dev):
    z = dev.tensor([1e4, -1e4, 1e4, -1e4]).trace()
    loss = tk.binary_cross_entropy_with_logits(z, [1.0, 0.0, 0.0, 1.0], reduction="sum")
    assert np.isclose(loss.item(), 2e4)
    np.testing.assert_allclose(host(loss.backward()[z]), [0.0, 0.0, 1.0, -1.0])


def test_binary_cross_entropy_with_logits_trains_under_an_owned_tape(dev):
    z = dev.tensor([0.0, 2.0]).trace(tk.OwnedTape())
    g = tk.binary_cross_entropy_with_logits(z, [1.0, 0.0]).backward()
    np.testing.assert_allclose(host(g[z]), (1 / (1 + np.exp(-np.array([0.0, 2.0]))) - [1.0, 0.0]) / 2, rtol=1e-6)
    with pytest.raises(tk.ShapeError, match="targets"):
        tk.binary_cross_entropy_with_logits(dev.zeros((2,)), [1.0, 0.0, 1.0])
