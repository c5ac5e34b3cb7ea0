"""Losses built from tapekit's ops, so the tape shows each step: ``mse_loss``, ``cross_entropy``
(integer labels, stable log-softmax) and ``binary_cross_entropy_with_logits``.

Every argument is checked before anything is recorded. ``reduction`` is ``"mean"`` or ``"sum"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import DTypeError, IndexingError, InvalidArgumentError, ShapeError
from .nn.module import branch
from .devices import dtype_name
from .ops import logsumexp, stack
from .ops.shape import device_array, is_integer, value_range
from .tensor import Tensor

REDUCTIONS = ("mean", "sum")


def mse_loss(pred: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """Squared error ``(pred - target)²``, averaged (or summed); ``target`` has ``pred``'s shape."""
    _check_reduction(reduction, "mse_loss")
    target = _like(target, pred, "mse_loss", "target")
    diff = pred - target
    return _reduce(diff * diff, reduction)


def cross_entropy(logits: Tensor, labels: Any, reduction: str = "mean") -> Tensor:
    """``-log softmax(logits)[label]`` per example, averaged (or summed).

    ``logits`` has classes on its last axis; ``labels`` holds integer class indices and has the
    other axes' shape (``(N,)`` for ``(N, C)`` logits). The log-softmax is shifted by the maximum,
    so any logits work."""
    _check_reduction(reduction, "cross_entropy")
    onehot = _onehot(logits, labels)
    picked = (logits.log_softmax(-1) * onehot).sum(-1)
    return -_reduce(picked, reduction)


def binary_cross_entropy_with_logits(logits: Tensor, targets: Any, reduction: str = "mean") -> Tensor:
    """``-(t log σ(x) + (1 - t) log(1 - σ(x)))`` from logits ``x``, computed as ``log(1 + eᵡ) - t x``
    with ``log(1 + eᵡ) = logsumexp([x, 0])``: no overflow, and the gradient is ``σ(x) - t`` everywhere.
    ``targets`` (probabilities in [0, 1]) have the logits' shape."""
    _check_reduction(reduction, "binary_cross_entropy_with_logits")
    targets = _like(targets, logits, "binary_cross_entropy_with_logits", "targets")
    picked = branch(logits) * targets
    softplus = logsumexp(stack([logits, logits.device.zeros(logits.shape, dtype=logits.dtype)]), axis=0)
    return _reduce(softplus - picked, reduction)


def _check_reduction(reduction: str, loss: str) -> None:
    if reduction not in REDUCTIONS:
        raise InvalidArgumentError(f"{loss}: reduction must be 'mean' or 'sum', got {reduction!r}")


def _reduce(values: Tensor, reduction: str) -> Tensor:
    return values.mean() if reduction == "mean" else values.sum()


def _like(other: Any, t: Tensor, loss: str, what: str) -> Tensor:
    """``other`` as a tensor of ``t``'s shape on ``t``'s device (numbers and arrays are converted)."""
    if not isinstance(t, Tensor):
        raise InvalidArgumentError(f"{loss} takes a tensor first, got a {type(t).__name__}")
    if not isinstance(other, Tensor):
        other = t.device.tensor(np.asarray(other, dtype=np.float64), dtype=t.dtype)
    if other.shape != t.shape:
        raise ShapeError(f"{loss}: the {what} has shape {other.shape} but the prediction has {t.shape}; give "
                         f"them one shape (a broadcast here would silently compare the wrong values)")
    return other


def _onehot(logits: Tensor, labels: Any) -> Tensor:
    """Checked integer labels as a one-hot tensor of the logits' shape and dtype (no tape)."""
    if not isinstance(logits, Tensor):
        raise InvalidArgumentError(f"cross_entropy takes a tensor of logits first, got a {type(logits).__name__}")
    device = logits.device
    index = device_array(labels, device, "cross_entropy: the labels")
    kind = dtype_name(index.dtype)
    if not is_integer(kind):
        raise DTypeError(f"cross_entropy: labels must be integer class indices, got dtype {kind}. Make them "
                         f"integers, e.g. dev.tensor(np.array(labels), dtype='int64').")
    if logits.ndim == 0 or tuple(index.shape) != logits.shape[:-1]:
        raise ShapeError(f"cross_entropy: labels of shape {tuple(index.shape)} do not fit logits of shape "
                         f"{logits.shape}; the logits need a class axis last and the labels the shape of the other axes")
    classes = logits.shape[-1]
    low, high = value_range(index, device)
    if low < 0 or high >= classes:
        raise IndexingError(f"cross_entropy: labels range from {low} to {high}, but the logits have {classes} "
                            f"classes (valid labels: 0 to {classes - 1})")
    xp = device.xp
    onehot = xp.astype(index[..., None] == xp.arange(classes, **device._placement()), logits.dtype)
    return Tensor(logits.device.count(onehot), logits.device)
