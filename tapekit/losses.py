"""Losses: ``mse_loss``, ``binary_cross_entropy_with_logits`` and ``nll_loss`` are built from
tapekit's ops, so the tape shows each step; ``cross_entropy`` (integer labels or class
probabilities, optionally smoothed) is one op with the classic fused rule,
``softmax(logits) - target``, which is exact and spares the tape four records per step.

Every argument is checked before anything is recorded. ``reduction`` is ``"mean"`` (over the
examples), ``"sum"`` or ``"none"`` (one loss per example), as in PyTorch.
"""

from __future__ import annotations

import math
from typing import Any

from .errors import DTypeError, InvalidArgumentError, ShapeError, checked_number
from .devices import dtype_name, host_floats, is_floating, is_integer
from .ops import where
from .ops.core import ELEMENTWISE, check_devices, emit
from .ops.elementwise import stable_sigmoid
from .ops.reduce import stable_log_softmax
from .ops.shape import device_array, refuse_out_of_range
from .tensor import Tensor

__all__ = ["mse_loss", "cross_entropy", "nll_loss", "binary_cross_entropy_with_logits"]

REDUCTIONS = ("mean", "sum", "none")


def mse_loss(pred: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """Squared error ``(pred - target)²``, averaged, summed, or one per element (``"none"``);
    ``target`` has ``pred``'s shape. Gradient: ``2 (pred - target)`` for ``pred`` and its negative
    for a traced ``target``, divided by the number of elements for ``"mean"``. Built from ops, so
    its forward rule (JVP) is theirs: ``2 (pred - target) (t_pred - t_target)``, reduced alike."""
    _check_reduction(reduction, "mse_loss")
    target = _like(target, pred, "mse_loss", "target")
    diff = pred - target
    return _reduce(diff * diff, reduction)


def cross_entropy(logits: Tensor, target: Any, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """PyTorch's ``cross_entropy``: ``-sum(t * log softmax(logits))`` over the classes (the last
    axis) for each example, averaged over the examples, summed, or one per example (``"none"``).

    ``target`` is either integer class indices of the other axes' shape (``(N,)`` for ``(N, C)``
    logits), or floating class probabilities of the logits' shape (a one-hot, or soft labels,
    which may be traced). With ``label_smoothing=ε`` the target ``t`` is ``(1 - ε) target + ε / C``.
    The log-softmax is shifted by the maximum, so any logits work; a class whose target is 0 adds
    nothing, even with a logit of -inf (a masked class: ``0 log 0 = 0``).

    Gradient, per unit of an example's loss (divided by the number of examples for ``"mean"``):
    ``softmax(logits) * sum(t) - t`` for the logits, which is ``softmax - t`` when ``t`` sums to 1,
    and ``-(1 - ε) log softmax(logits)`` for a probability target. Forward rule (JVP): each
    example's sum over the classes of the tangents times those gradients, reduced as the loss is."""
    _check_reduction(reduction, "cross_entropy")
    eps = checked_number(label_smoothing, "cross_entropy: label_smoothing", lambda v: 0 <= v <= 1, "from 0 to 1")
    operand, probs = _target(logits, target)
    xp, x = logits.device.xp, logits.data
    t = logits.device.count(_smoothed(probs, eps)) if eps else probs
    logp = stable_log_softmax(xp, x, -1)
    per_example = -xp.sum(xp.where(t == 0, xp.zeros_like(logp), logp) * t, axis=-1)  # 0 log 0 = 0
    n = math.prod(x.shape[:-1]) if reduction == "mean" else 1
    out = per_example if reduction == "none" else xp.sum(per_example) / n
    rules = (_logits_grad, _target_grad if operand is target else None)  # a target made here is a constant
    saved = (xp, x, probs, n, eps, reduction != "none")
    return emit("cross_entropy", out, (logits, operand), rules, saved, logits.device, _cross_entropy_jvp)


def _smoothed(probs: Any, eps: float) -> Any:
    """The target probabilities with label smoothing ``eps``: ``(1 - eps) probs + eps / C``."""
    return probs * (1 - eps) + eps / probs.shape[-1] if eps else probs


def _logits_slope(xp: Any, x: Any, probs: Any, eps: float) -> Any:
    """How an example's loss moves with each logit: ``softmax(logits) * sum(t) - t``."""
    t = _smoothed(probs, eps)
    return xp.exp(stable_log_softmax(xp, x, -1)) * xp.sum(t, axis=-1, keepdims=True) - t


def _logits_grad(g: Any, xp: Any, x: Any, probs: Any, n: int, eps: float, reduced: bool) -> Any:
    return _logits_slope(xp, x, probs, eps) * _per_class(g, xp, n)


def _target_grad(g: Any, xp: Any, x: Any, probs: Any, n: int, eps: float, reduced: bool) -> Any:
    return -stable_log_softmax(xp, x, -1) * ((1 - eps) * _per_class(g, xp, n))


def _cross_entropy_jvp(tangents: tuple, xp: Any, x: Any, probs: Any, n: int, eps: float, reduced: bool) -> Any:
    """Each example's sum over the classes of the tangents times the slopes of its loss (the
    gradients' factors), reduced as the loss is."""
    t_logits, t_target = tangents
    moved = 0.0
    if t_logits is not None:
        moved = moved + _logits_slope(xp, x, probs, eps) * t_logits
    if t_target is not None:
        log_p = xp.where(t_target == 0, 0.0, stable_log_softmax(xp, x, -1))  # a class of logit -inf: no -inf * 0
        moved = moved - (1 - eps) * log_p * t_target
    per_example = xp.sum(moved, axis=-1)
    return xp.sum(per_example) / n if reduced else per_example


def _per_class(g: Any, xp: Any, n: int) -> Any:
    """The gradient of each example's loss, with an axis to broadcast along the classes."""
    return xp.expand_dims(g, axis=-1) / n


def nll_loss(log_probs: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """PyTorch's ``nll_loss``: ``-log_probs[..., target]`` for each example (classes on the last
    axis), averaged, summed, or one per example (``"none"``). ``target`` holds integer class indices
    of the other axes' shape, and ``nll_loss(log_softmax(x), target)`` is ``cross_entropy(x, target)``.
    Built from ops as ``-sum(where(onehot(target), log_probs, 0))``, so the gradient is ``-onehot(target)``
    per unit of an example's loss (divided by the number of examples for ``"mean"``), and a class the
    label does not pick adds nothing, even a log-probability of -inf. Forward rule (JVP), through
    those ops: minus the tangent of the labelled class's log-probability, reduced alike."""
    _check_reduction(reduction, "nll_loss")
    _check_first(log_probs, "nll_loss", "log-probabilities")
    labels = device_array(target, log_probs.device, "nll_loss: the target")
    if not is_integer(labels.dtype):
        raise DTypeError(f"nll_loss: the target must be integer class indices, got dtype {dtype_name(labels.dtype)}. "
                         f"Make labels integers, e.g. dev.tensor(np.array(labels), dtype='int64'); for class "
                         f"probabilities use cross_entropy(logits, probs).")
    picked = where(_label_mask(log_probs, labels, "nll_loss", "log-probabilities"), log_probs, 0.0).sum(axis=-1)
    return _reduce(-picked, reduction)


def binary_cross_entropy_with_logits(logits: Tensor, targets: Any, reduction: str = "mean") -> Tensor:
    """``-(t log σ(x) + (1 - t) log(1 - σ(x)))`` from logits ``x``, computed as ``log(1 + eᵡ) - t x``
    with ``log(1 + eᵡ) = logaddexp(0, x)``: no overflow, and the gradient is ``σ(x) - t`` everywhere,
    at infinite logits too (``-x`` for traced targets), per element; averaged, summed, or one per
    element (``"none"``). ``targets`` (probabilities in [0, 1]) have the logits' shape. Forward rule
    (JVP): the tangents times those gradients, elementwise, reduced as the loss is."""
    _check_reduction(reduction, "binary_cross_entropy_with_logits")
    operand = _like(targets, logits, "binary_cross_entropy_with_logits", "targets")
    xp, x, t = logits.device.xp, logits.data, operand.data
    per_element = xp.logaddexp(0.0, x) - t * x
    rules = (_bce_logits_grad, _bce_targets_grad if operand is targets else None)  # a target made here is a constant
    losses = emit("binary_cross_entropy_with_logits", per_element, (logits, operand), rules, (xp, x, t), logits.device,
                  ELEMENTWISE)
    return _reduce(losses, reduction)


def _bce_logits_grad(g: Any, xp: Any, x: Any, t: Any) -> Any:
    return g * (stable_sigmoid(xp, x) - t)


def _bce_targets_grad(g: Any, xp: Any, x: Any, t: Any) -> Any:
    return -g * x


def _check_reduction(reduction: str, loss: str) -> None:
    if reduction not in REDUCTIONS:
        raise InvalidArgumentError(f"{loss}: reduction must be 'mean', 'sum' or 'none' (one loss per example), "
                                   f"got {reduction!r}")


def _reduce(values: Tensor, reduction: str) -> Tensor:
    """The losses averaged, summed, or as they are (``"none"``)."""
    if reduction == "none":
        return values
    return values.mean() if reduction == "mean" else values.sum()


def _check_first(t: Any, loss: str, what: str) -> None:
    if not isinstance(t, Tensor):
        raise InvalidArgumentError(f"{loss} takes a tensor of {what} first, got a {type(t).__name__}")


def _like(other: Any, t: Tensor, loss: str, what: str) -> Tensor:
    """``other`` as a tensor of ``t``'s shape on ``t``'s device (numbers and arrays are converted)."""
    _check_first(t, loss, "predictions")
    if not isinstance(other, Tensor):
        other = t.device.tensor(host_floats(other, f"{loss}: the {what}", InvalidArgumentError), dtype=t.dtype)
    check_devices([t, other], loss)
    if other.shape != t.shape:
        raise ShapeError(f"{loss}: the {what} has shape {other.shape} but the prediction has {t.shape}; give "
                         f"them one shape (a broadcast here would silently compare the wrong values)")
    return other


def _target(logits: Tensor, target: Any) -> tuple[Tensor, Any]:
    """``cross_entropy``'s checked target: the operand to record (the target itself when it is a
    floating tensor, which may be traced; otherwise a constant made here) and its class
    probabilities, an array of the logits' dtype (integer labels become a one-hot)."""
    _check_first(logits, "cross_entropy", "logits")
    values = device_array(target, logits.device, "cross_entropy: the target")
    if is_integer(values.dtype):
        device = logits.device
        mask = _label_mask(logits, values, "cross_entropy")
        onehot = Tensor(device.count(device.xp.astype(mask, logits.dtype)), device)
        return onehot, onehot.data
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
    return (target if isinstance(target, Tensor) else Tensor(probs, logits.device)), probs


def _label_mask(logits: Tensor, index: Any, loss: str, what: str = "logits") -> Any:
    """Checked integer labels (a device array) as a boolean array of the logits' shape, true at each
    example's labelled class (a one-hot); ``what`` names the logits in errors."""
    device = logits.device
    if logits.ndim == 0 or tuple(index.shape) != logits.shape[:-1]:
        raise ShapeError(f"{loss}: labels of shape {tuple(index.shape)} do not fit {what} of shape {logits.shape}; "
                         f"the {what} need a class axis last and the labels the shape of the other axes")
    classes = logits.shape[-1]
    refuse_out_of_range(index, classes, device, f"{loss}: labels range from {{low}} to {{high}}, but the {what} have "
                                                f"{classes} classes (valid labels: 0 to {classes - 1})")
    return index[..., None] == device.xp.arange(classes, **device._placement())
