"""Losses: values against numpy formulas, stability at extreme logits, gradients against finite
differences, and argument errors raised before anything is recorded."""

from __future__ import annotations

import warnings

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


def test_cross_entropy_gives_a_traced_probability_target_its_gradient(dev):
    logits = np.random.default_rng(4).standard_normal((4, 3))
    soft = np.random.default_rng(5).uniform(0.1, 1.0, (4, 3))  # rows that do not sum to 1, as PyTorch allows
    z, t = dev.tensor(logits, dtype="float64"), dev.tensor(soft, dtype="float64")
    for reduction, scale in (("mean", 1 / 4), ("sum", 1.0)):
        tape = tk.UnionTape()
        g = tk.cross_entropy(z.trace(tape), t.trace(tape), reduction=reduction).backward()
        np.testing.assert_allclose(host(g[t]), -np_log_softmax(logits) * scale, atol=1e-12)
        softmax = np.exp(np_log_softmax(logits))  # PyTorch's rule for -sum(t * log_softmax(x)): softmax * sum(t) - t
        np.testing.assert_allclose(host(g[z]), (softmax * soft.sum(-1, keepdims=True) - soft) * scale, atol=1e-12)
        tk.check_grads(lambda a, b: tk.cross_entropy(a, b, reduction=reduction), z, t)
    only_target = tk.cross_entropy(z, t.trace(), reduction="sum").backward()  # untraced logits: the target still learns
    np.testing.assert_allclose(host(only_target[t]), -np_log_softmax(logits), atol=1e-12)


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


def test_losses_ignore_an_impossible_class_the_label_does_not_pick(dev):
    """A logit of -inf (a class masked out) that the label does not pick adds nothing: the loss is
    finite, as in PyTorch, and so is its gradient (0 for the masked class)."""
    logits = np.array([[-np.inf, 0.0, 1.0], [2.0, -np.inf, 0.0]])
    want = np.mean([np.log1p(np.e), np.log1p(np.exp(-2.0))])
    x = dev.tensor(logits, dtype="float64").trace(tk.UnionTape())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nor does numpy warn of 0 * -inf
        loss = tk.cross_entropy(x, [1, 0])
        g = loss.backward()
    np.testing.assert_allclose(loss.item(), want)
    assert np.isfinite(host(g[x])).all() and host(g[x])[0, 0] == 0 and host(g[x])[1, 1] == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nll = tk.nll_loss(dev.tensor(logits, dtype="float64"), [1, 0])
    np.testing.assert_allclose(nll.item(), -1.0)



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
    for call in (lambda: tk.cross_entropy(z, np.array([0, 1]), reduction="avg"),
                 lambda: tk.nll_loss(z, np.array([0, 1]), reduction=None),
                 lambda: tk.mse_loss(z, z, reduction="elementwise"),
                 lambda: tk.binary_cross_entropy_with_logits(z, z, reduction="")):
        with pytest.raises(tk.InvalidArgumentError, match="reduction must be 'mean', 'sum' or 'none'"):
            call()


def test_every_loss_gives_one_loss_per_example_with_reduction_none(dev):
    rng = np.random.default_rng(6)
    x, soft, labels = rng.standard_normal((4, 3)), rng.uniform(0, 1, (4, 3)), np.array([2, 0, 1, 1])
    logp = np_log_softmax(x)
    per_example = {
        "mse_loss": (lambda a: tk.mse_loss(a, soft, reduction="none"), (x - soft) ** 2),
        "cross_entropy": (lambda a: tk.cross_entropy(a, labels, reduction="none"), -logp[np.arange(4), labels]),
        "cross_entropy (probabilities)": (lambda a: tk.cross_entropy(a, soft, reduction="none"),
                                          -(soft * logp).sum(-1)),
        "nll_loss": (lambda a: tk.nll_loss(a, labels, reduction="none"), -x[np.arange(4), labels]),
        "binary_cross_entropy_with_logits": (lambda a: tk.binary_cross_entropy_with_logits(a, soft, reduction="none"),
                                             np.logaddexp(0, x) - soft * x),
    }
    z = dev.tensor(x, dtype="float64")
    for name, (loss, want) in per_example.items():
        np.testing.assert_allclose(host(loss(z)), want, atol=1e-12, err_msg=name)
        tk.check_grads(loss, z)


# -- cross entropy: label smoothing ------------------------------------------------------------------
def test_cross_entropy_smooths_labels_as_pytorch_does(dev):
    x = np.random.default_rng(7).standard_normal((5, 4))
    labels, soft = np.array([0, 3, 1, 1, 2]), np.random.default_rng(8).uniform(0, 1, (5, 4))
    z = dev.tensor(x, dtype="float64")
    for eps in (0.1, 1.0):
        for target, t in ((labels, np.eye(4)[labels]), (soft, soft)):
            smoothed = (1 - eps) * t + eps / 4  # PyTorch: the same for class indices and probabilities
            want = -(smoothed * np_log_softmax(x)).sum(-1)
            loss = tk.cross_entropy(z, target, reduction="none", label_smoothing=eps)
            np.testing.assert_allclose(host(loss), want, atol=1e-12)
            assert np.isclose(tk.cross_entropy(z, target, label_smoothing=eps).item(), want.mean())
    t = dev.tensor(soft, dtype="float64")
    tk.check_grads(lambda a, b: tk.cross_entropy(a, b, label_smoothing=0.2), z, t)  # the target's: -(1 - ε) log p / N
    tk.check_grads(lambda a: tk.cross_entropy(a, labels, reduction="sum", label_smoothing=0.2), z)


@pytest.mark.parametrize("eps", [-0.1, 1.5, float("nan"), "0.1", True])
def test_cross_entropy_refuses_a_smoothing_outside_0_to_1(dev, eps):
    with pytest.raises(tk.InvalidArgumentError, match="label_smoothing must be from 0 to 1"):
        tk.cross_entropy(dev.randn((2, 3)), np.array([0, 1]), label_smoothing=eps)


# -- negative log likelihood -------------------------------------------------------------------------
def test_nll_loss_picks_the_labelled_log_probabilities(dev):
    x = np.random.default_rng(9).standard_normal((2, 3, 4))
    labels = np.array([[0, 1, 2], [3, 3, 0]])
    z = dev.tensor(x, dtype="float64")
    picked = np.take_along_axis(x, labels[..., None], -1)[..., 0]
    assert np.isclose(tk.nll_loss(z, labels).item(), -picked.mean())
    assert np.isclose(tk.nll_loss(z, dev.tensor(labels), reduction="sum").item(), -picked.sum())
    g = tk.nll_loss(z.trace(), labels).backward()
    np.testing.assert_allclose(host(g[z]), -np.eye(4)[labels] / 6)
    by_ops = tk.nll_loss(tk.log_softmax(z), labels)  # nll of the log-softmax is the cross entropy
    assert np.isclose(by_ops.item(), tk.cross_entropy(z, labels).item())
    tk.check_grads(lambda t: tk.nll_loss(tk.log_softmax(t), labels), z)


@pytest.mark.parametrize("labels, error, match", [
    (np.array([0.0, 1.0]), tk.DTypeError, "nll_loss: the target must be integer class indices, got dtype float64"),
    (np.array([0, 3]), tk.IndexingError, "but the log-probabilities have 3 classes"),
    (np.array([[0, 1]]), tk.ShapeError, r"labels of shape \(1, 2\) do not fit log-probabilities of shape \(2, 3\)"),
])
def test_nll_loss_refuses_bad_labels_before_recording(dev, labels, error, match):
    z = dev.randn((2, 3)).trace(tk.OwnedTape())
    with pytest.raises(error, match=match):
        tk.nll_loss(z, labels)
    assert len(z.tape) == 0


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



def test_binary_cross_entropy_with_logits_has_its_gradient_at_infinite_logits(dev):
    """sigmoid(x) - t at x = +-inf too: 1 - t and -t, as PyTorch gives (the loss itself is nan or 0)."""
    z = dev.tensor([np.inf, np.inf, -np.inf, -np.inf], dtype="float64").trace(tk.UnionTape())
    with np.errstate(invalid="ignore"):
        g = tk.binary_cross_entropy_with_logits(z, [1.0, 0.0, 1.0, 0.0], reduction="sum").backward()
    np.testing.assert_array_equal(host(g[z]), [0.0, 1.0, -1.0, 0.0])
