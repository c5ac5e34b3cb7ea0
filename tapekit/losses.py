"""Losses: ``mse_loss`` and ``binary_cross_entropy_with_logits`` are built from tapekit's ops, so
the tape shows each step; ``cross_entropy`` (integer labels or class probabilities) is one op with
the classic fused rule, ``softmax(logits) - target``, which is exact and spares the tape four records
per step.

Every argument is checked before anything is recorded. ``reduction`` is ``"mean"`` or ``"sum"``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .errors import DTypeError, IndexingError, InvalidArgumentError, ShapeError
from .nn.module import branch
from .devices import dtype_name, is_floating, is_integer
from .ops import logsumexp, stack
from .ops.core import emit
from .ops.reduce import stable_log_softmax
from .ops.shape import device_array, value_range
from .tensor import Tensor

__all__ = ["mse_loss", "cross_entropy", "binary_cross_entropy_with_logits"]

REDUCTIONS = ("mean", "sum")


def mse_loss(pred: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """Squared error ``(pred - target)²``, averaged (or summed); ``target`` has ``pred``'s shape."""
    _check_reduction(reduction, "mse_loss")
    target = _like(target, pred, "mse_loss", "target")
    diff = pred - target
    return _reduce(diff * diff, reduction)


def cross_entropy(logits: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """``-sum(target * log softmax(logits))`` per example, averaged (or summed).

    ``logits`` has classes on its last axis. ``target`` is either integer class indices of the
    other axes' shape (``(N,)`` for ``(N, C)`` logits), or floating class probabilities of the
    logits' shape (a one-hot, or soft labels), which get no gradient. The log-softmax is shifted by
    the maximum, so any logits work."""
    _check_reduction(reduction, "cross_entropy")
    probs = _class_probabilities(logits, target)
    xp, x, t = logits.device.xp, logits.data, probs.data
    logp = stable_log_softmax(xp, x, -1)
    n = math.prod(logits.shape[:-1]) if reduction == "mean" else 1
    return emit("cross_entropy", -xp.sum(logp * t) / n, (logits, probs), (_cross_entropy_grad, None),
                (xp, logp, t, n), logits.device)


def _cross_entropy_grad(g: Any, xp: Any, logp: Any, target: Any, n: int) -> Any:
    """The gradient of the logits: ``(softmax * sum(target) - target) / n`` per unit of the loss's
    gradient, which is ``softmax - target`` for probabilities."""
    return (xp.exp(logp) * xp.sum(target, axis=-1, keepdims=True) - target) * (g / n)


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


def _class_probabilities(logits: Tensor, target: Any) -> Tensor:
    """The checked target of ``cross_entropy`` as probabilities of the logits' shape and dtype (no
    tape): integer labels become a one-hot."""
    if not isinstance(logits, Tensor):
        raise InvalidArgumentError(f"cross_entropy takes a tensor of logits first, got a {type(logits).__name__}")
    values = device_array(target, logits.device, "cross_entropy: the target")
    if is_integer(values.dtype):
        return _onehot(logits, values)
    if not is_floating(values.dtype):
        raise DTypeError(f"cross_entropy: the target must be integer class indices or floating class probabilities, "
                         f"got dtype {dtype_name(values.dtype)}. Make labels integers, e.g. "
                         f"dev.tensor(np.array(labels), dtype='int64').")
    if tuple(values.shape) != logits.shape:
        raise ShapeError(f"cross_entropy: a floating target holds class probabilities and needs the logits' shape "
                         f"{logits.shape}, got {tuple(values.shape)}. For class indices, pass integers of shape "
                         f"{logits.shape[:-1]}.")
    xp = logits.device.xp
    probs = values if values.dtype == logits.dtype else logits.device.count(xp.astype(values, logits.dtype))
    return Tensor(probs, logits.device)


def _onehot(logits: Tensor, index: Any) -> Tensor:
    """Checked integer labels (a device array) as a one-hot tensor of the logits' shape and dtype."""
    device = logits.device
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
