"""Matrix multiplication with numpy's rules: vectors promoted, batch axes broadcast."""

from __future__ import annotations

from ..errors import OperandError, ShapeError
from ..tensor import Tensor
from .core import broadcast_shape, check_devices, emit, fills, unbroadcast

__all__ = ["matmul"]


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b``. A 1-D operand is a row (left) or a column (right); leading axes broadcast."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise OperandError(f"matmul takes two tensors, got {type(a).__name__} @ {type(b).__name__}; make an array a "
                        f"tensor with dev.tensor(array), and multiply by a number with *")
    check_devices((a, b), "matmul")
    x, y = a.data, b.data
    if x.ndim == 0 or y.ndim == 0:
        raise ShapeError(f"matmul: operands need at least 1 dimension, got {x.shape} @ {y.shape}; use * for scalars")
    inner = y.shape[-2] if y.ndim > 1 else y.shape[0]
    if x.shape[-1] != inner:
        raise ShapeError(f"matmul: {x.shape} @ {y.shape}: the last axis of the left ({x.shape[-1]}) must match "
                         f"the {'second-to-last' if y.ndim > 1 else 'only'} axis of the right ({inner}). "
                         f"Transpose or reshape an operand so these agree.")
    broadcast_shape(x.shape[:-2], y.shape[:-2], "matmul (batch axes)")
    xp = a.device.xp
    out = xp.matmul(x, y)
    if x.ndim == 2 and y.ndim == 2:  # the common case: each rule can write into a preallocated buffer
        return emit("matmul", out, (a, b), _MATRIX_RULES, (xp, x, y), a.device)
    shape2 = list(out.shape) + ([1] if y.ndim == 1 else [])
    if x.ndim == 1:
        shape2.insert(len(shape2) - 1, 1)
    return emit("matmul", out, (a, b), (_grad_x, _grad_y), (xp, x, y, tuple(shape2)), a.device)


_MATRIX_RULES = (fills(lambda g, xp, x, y, **into: xp.matmul(g, xp.matrix_transpose(y), **into)),
                 fills(lambda g, xp, x, y, **into: xp.matmul(xp.matrix_transpose(x), g, **into)))


def _as_matrices(xp, x, y):
    """``x`` and ``y`` with a 1-D left operand as a row and a 1-D right operand as a column."""
    return (x if x.ndim > 1 else xp.reshape(x, (1, x.shape[0])),
            y if y.ndim > 1 else xp.reshape(y, (y.shape[0], 1)))


def _grad_x(g, xp, x, y, shape2):
    x2, y2 = _as_matrices(xp, x, y)
    g2 = xp.reshape(g, shape2)
    return xp.reshape(unbroadcast(xp, xp.matmul(g2, xp.matrix_transpose(y2)), x2.shape), x.shape)


def _grad_y(g, xp, x, y, shape2):
    x2, y2 = _as_matrices(xp, x, y)
    g2 = xp.reshape(g, shape2)
    return xp.reshape(unbroadcast(xp, xp.matmul(xp.matrix_transpose(x2), g2), y2.shape), y.shape)
