"""Numerical stability: the softmax family, sigmoid and the losses built on them give finite values
and gradients, equal to a float64 reference, for inputs of magnitude 1e4 (where a naive
``exp`` overflows: ``exp(1e4)`` is inf even in float64)."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

import tapekit as tk

from .conftest import host
from .reference import np_logsumexp, np_sigmoid, np_softmax

# rows of logits: huge of both signs, huge and equal, huge with small gaps, ordinary
LOGITS = np.array([[1e4, -1e4, 0.0, 3.0],
                   [1e4, 1e4, 1e4, 1e4],
                   [-1e4, -1e4 + 1.0, -1e4 + 2.0, -1e4 + 3.0],
                   [-1e4, -1e4, -1e4, 1e4],
                   [0.5, -1.0, 2.0, 0.0]])
LABELS = np.array([1, 2, 0, 3, 2])
TARGETS = np.array([[1.0, 0.0, 0.5, 1.0], [0.0, 1.0, 0.25, 0.0], [1.0, 1.0, 0.0, 0.75],
                    [0.0, 0.5, 1.0, 1.0], [0.3, 0.0, 1.0, 0.0]])


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


# name: (tapekit function of the logits, reference value, reference gradient for seed g)
CASES: dict[str, tuple[Callable, Callable, Callable]] = {
    "log_softmax": (lambda x: x.log_softmax(-1),
                    lambda x: x - np_logsumexp(x)[:, None],
                    lambda x, g: g - np_softmax(x) * g.sum(-1, keepdims=True)),
    "softmax": (lambda x: x.softmax(-1),
                np_softmax,
                lambda x, g: np_softmax(x) * (g - (g * np_softmax(x)).sum(-1, keepdims=True))),
    "logsumexp": (lambda x: x.logsumexp(axis=-1),
                  np_logsumexp,
                  lambda x, g: g[:, None] * np_softmax(x)),
    "logsumexp_all": (lambda x: tk.logsumexp(x),
                      lambda x: np_logsumexp(x.reshape(-1), 0),
                      lambda x, g: g * np_softmax(x.reshape(-1)).reshape(x.shape)),
    "sigmoid": (tk.sigmoid,
                np_sigmoid,
                lambda x, g: g * np_sigmoid(x) * np_sigmoid(-x)),
    "cross_entropy": (lambda x: tk.cross_entropy(x, LABELS, reduction="sum"),
                      lambda x: -(x - np_logsumexp(x)[:, None])[np.arange(len(x)), LABELS].sum(),
                      lambda x, g: g * (np_softmax(x) - np.eye(x.shape[1])[LABELS])),
    "cross_entropy_mean": (lambda x: tk.cross_entropy(x, LABELS),
                           lambda x: -(x - np_logsumexp(x)[:, None])[np.arange(len(x)), LABELS].mean(),
                           lambda x, g: g * (np_softmax(x) - np.eye(x.shape[1])[LABELS]) / len(x)),
    "bce_with_logits": (lambda x: tk.binary_cross_entropy_with_logits(x, TARGETS, reduction="sum"),
                        lambda x: (_softplus(x) - TARGETS * x).sum(),
                        lambda x, g: g * (np_sigmoid(x) - TARGETS)),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", CASES)
def test_finite_values_and_gradients_at_1e4(dev, name: str, dtype: str) -> None:
    f, value, grad = CASES[name]
    x = dev.tensor(LOGITS, dtype=dtype)
    out = f(x.trace(tk.UnionTape()))
    seed = np.random.default_rng(0).standard_normal(out.shape)
    grads = out.backward(seed=dev.tensor(seed, dtype=dtype))
    got_value, got_grad = out.numpy(), host(grads[x])

    assert np.all(np.isfinite(got_value)), f"{name}: non-finite values {got_value}"
    assert np.all(np.isfinite(got_grad)), f"{name}: non-finite gradient {got_grad}"
    tol = dict(rtol=1e-6, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(got_value, value(LOGITS), **tol)
    np.testing.assert_allclose(got_grad, grad(LOGITS, seed), **tol)


def test_reference_would_overflow_naively() -> None:
    """The inputs are hard: the textbook formulas give inf or nan on them."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        naive_lse = np.log(np.exp(LOGITS).sum(-1))
        naive_sigmoid_grad = np.exp(-LOGITS) / (1 + np.exp(-LOGITS)) ** 2
    assert not np.all(np.isfinite(naive_lse))
    assert not np.all(np.isfinite(naive_sigmoid_grad))


@pytest.mark.parametrize("name", ["log_softmax", "sigmoid", "cross_entropy", "bce_with_logits"])
def test_scaled_logits_train_without_nan(name: str) -> None:
    """A weight that multiplies the inputs up to 1e4 still gets a finite gradient through each loss."""
    dev = tk.Cpu(seed=0)
    f, _, _ = CASES[name]
    x = dev.tensor(LOGITS / 1e4)
    w = dev.tensor(1e4).trace(tk.UnionTape())
    loss = f(x * w).sum()
    grads = loss.backward()
    assert np.isfinite(loss.item())
    assert np.isfinite(host(grads[w])).all()
