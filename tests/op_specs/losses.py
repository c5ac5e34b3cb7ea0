"""The op specs of tapekit.losses (see tests/opfactory.py).

Every loss in every ``reduction``. Logits have 0 to 2 leading axes and 1 to 4 classes (last).
Integer labels cannot be finite-differenced, so they travel in ``kwargs``: the factory passes
them to ``fn`` and the reference, and differentiates only the arrays. Probability targets are
arrays, so their gradient is checked too; their rows need not sum to 1.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

import tapekit as tk

from ..opfactory import SHAPES, Edge, OpSpec, values
from ..reference import np_log_softmax

REDUCTIONS = st.sampled_from(["mean", "sum", "none"])
LOGITS = array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)
SMOOTHING = st.sampled_from([0.0, 0.1, 0.5, 1.0])


def _reduced(losses, reduction):
    return losses if reduction == "none" else losses.mean() if reduction == "mean" else losses.sum()


def _np_cross_entropy(logits, probs, reduction="mean", label_smoothing=0.0):
    """PyTorch's formula: ``-sum(t * log_softmax(logits))`` with ``t = (1 - ε) probs + ε / C``."""
    t = (1 - label_smoothing) * probs + label_smoothing / logits.shape[-1]
    return _reduced(-(t * np_log_softmax(logits)).sum(-1), reduction)


def _onehot(labels, classes):
    return np.eye(classes)[labels]


def _draw(target, smoothing=st.just(0.0)):
    """Logits and a ``target``: ``"labels"`` (integers, in kwargs), ``"probs"`` (positive values of
    the logits' shape, an array) or ``"same"`` (any values of the logits' shape, for elementwise
    losses); a reduction, and for cross entropy a ``label_smoothing``."""
    def draw(data):
        shape = data.draw(SHAPES if target == "same" else LOGITS, label="shape")
        seed = data.draw(st.integers(0, 2 ** 16), label="seed")
        arrays, kwargs = [values(shape, "any", seed)], {"reduction": data.draw(REDUCTIONS, label="reduction")}
        if target == "labels":
            kwargs["labels"] = np.random.default_rng(seed).integers(0, shape[-1], size=shape[:-1])
        else:
            arrays.append(values(shape, "positive" if target == "probs" else "any", seed + 1))
        if smoothing is not None:
            kwargs["label_smoothing"] = data.draw(smoothing, label="label_smoothing")
        return arrays, kwargs
    return draw


def _ce_labels(logits, labels, **kw):
    return tk.cross_entropy(logits, labels, **kw)


def _np_ce_labels(logits, labels, **kw):
    return _np_cross_entropy(logits, _onehot(labels, logits.shape[-1]), **kw)


def _bce(logits, targets, reduction):
    return _reduced(np.logaddexp(0, logits) - targets * logits, reduction)


def _nll(log_probs, labels, reduction):
    return _reduced(-(log_probs * _onehot(labels, log_probs.shape[-1])).sum(-1), reduction)


LOGITS_2 = [[0.5, -1.0, 2.0], [0.0, 0.0, 1.0]]
SOFT_2 = [[0.2, 0.3, 0.9], [1.0, 0.0, 0.5]]

SPECS: list[OpSpec] = [
    OpSpec("mse_loss", tk.mse_loss, lambda p, t, reduction: _reduced((p - t) ** 2, reduction), _draw("same", None)),
    OpSpec("cross_entropy_labels", _ce_labels, _np_ce_labels, _draw("labels"), examples=15),
    OpSpec("cross_entropy_probs", tk.cross_entropy, _np_cross_entropy, _draw("probs"), examples=15, edges=[
        Edge([np.array(LOGITS_2), np.array(SOFT_2)], [
            np.exp(np_log_softmax(np.array(LOGITS_2))) * np.sum(SOFT_2, -1, keepdims=True) - SOFT_2,
            -np_log_softmax(np.array(LOGITS_2))], {"reduction": "sum"},
            "the logits get softmax * sum(t) - t (rows of t need not sum to 1); the target gets -log softmax")]),
    OpSpec("cross_entropy_label_smoothing", _ce_labels, _np_ce_labels, _draw("labels", SMOOTHING), examples=15),
    OpSpec("cross_entropy_probs_label_smoothing", tk.cross_entropy, _np_cross_entropy, _draw("probs", SMOOTHING),
           examples=15),
    OpSpec("binary_cross_entropy_with_logits", tk.binary_cross_entropy_with_logits, _bce, _draw("same", None)),
    OpSpec("nll_loss", lambda x, labels, reduction: tk.nll_loss(x, labels, reduction), _nll, _draw("labels", None)),
]
