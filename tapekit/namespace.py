"""The array API over tensors: the functions the backward rules call, as tapekit ops.

Every backward rule computes with the array namespace it saved (``xp.exp(x)``, ``xp.sum(g,
axis=...)``). Handed ``TensorNamespace(device)`` instead, with tensors for its arrays, a rule runs
unchanged and each of its steps is an op recorded on a tape: that is how ``backward(...,
create_graph=True)`` records the backward itself, with one definition of each op's maths. What
has no gradient (masks, ``zeros_like``, ``isnan``) gives a tensor on no tape. A function with no
tapekit op raises ``SecondOrderError`` naming it.
"""

from __future__ import annotations

from typing import Any, Sequence

from . import ops
from .errors import SecondOrderError
from .ops.core import unary
from .tensor import Tensor


@unary(lambda g, xp, dtype: xp.astype(g, dtype))
def astype(xp, x, dtype):
    """``x`` as ``dtype``; the gradient is cast back to ``x``'s dtype (no gradient from a bool or
    integer ``x``, which is never traced)."""
    return xp.astype(x, dtype), (xp, x.dtype)


def _data(v: Any) -> Any:
    return v.data if isinstance(v, Tensor) else v


class TensorNamespace:
    """``device``'s array namespace with tensors for arrays: ``ns.exp(t)`` is ``tk.exp(t)``."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.xp = device.xp

    def __repr__(self) -> str:
        return f"<the array API as tapekit ops on {self.device!r}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise SecondOrderError(f"xp.{name} has no tapekit op, so a backward rule that calls it cannot be recorded: "
                               f"the op whose rule it is has no second derivative here. Write that rule with the "
                               f"ops of tapekit.namespace, or differentiate it once only.")

    # -- constants: values with no gradient, on no tape ------------------------------------------
    def _constant(self, array: Any) -> Tensor:
        return Tensor(self.device.count(array), self.device)

    def zeros_like(self, x: Any, dtype: Any = None) -> Tensor:
        return self._constant(self.xp.zeros_like(_data(x), dtype=dtype))

    def ones_like(self, x: Any, dtype: Any = None) -> Tensor:
        return self._constant(self.xp.ones_like(_data(x), dtype=dtype))

    def full_like(self, x: Any, value: Any, dtype: Any = None) -> Tensor:
        return self._constant(self.xp.full_like(_data(x), value, dtype=dtype))

    def zeros(self, shape: Sequence[int], dtype: Any = None, **placement: Any) -> Tensor:
        return self._constant(self.xp.zeros(shape, dtype=dtype, **placement))

    def full(self, shape: Sequence[int], value: Any, dtype: Any = None, **placement: Any) -> Tensor:
        return self._constant(self.xp.full(shape, value, dtype=dtype, **placement))

    def eye(self, n: int, dtype: Any = None, **placement: Any) -> Tensor:
        return self._constant(self.xp.eye(n, dtype=dtype, **placement))

    def isnan(self, x: Any) -> Tensor:
        return self._constant(self.xp.isnan(_data(x)))

    def isfinite(self, x: Any) -> Tensor:
        return self._constant(self.xp.isfinite(_data(x)))

    def result_type(self, *args: Any) -> Any:
        return self.xp.result_type(*[_data(a) for a in args])

    def astype(self, x: Any, dtype: Any) -> Any:
        if not isinstance(x, Tensor) or x.tape is None:
            return self._constant(self.xp.astype(_data(x), dtype))
        return x if x.dtype == dtype else astype(x, dtype)

    # -- elementwise: tapekit's ops -------------------------------------------------------------
    exp, log, sqrt, sin, cos, tan = (staticmethod(f) for f in (ops.exp, ops.log, ops.sqrt, ops.sin, ops.cos, ops.tan))
    sinh, cosh, tanh, abs, sign = (staticmethod(f) for f in (ops.sinh, ops.cosh, ops.tanh, ops.abs, ops.sign))
    expm1, log1p, asin, acos, atan = (staticmethod(f) for f in (ops.expm1, ops.log1p, ops.asin, ops.acos, ops.atan))
    floor, ceil, logaddexp = staticmethod(ops.floor), staticmethod(ops.ceil), staticmethod(ops.logaddexp)
    maximum, minimum, multiply = staticmethod(ops.maximum), staticmethod(ops.minimum), staticmethod(ops.mul)

    where, clip = staticmethod(ops.where), staticmethod(ops.clip)

    # -- reductions and running sums ---------------------------------------------------------------
    sum, max, min, mean = (staticmethod(f) for f in (ops.sum, ops.max, ops.min, ops.mean))

    @staticmethod
    def cumulative_sum(x: Tensor, axis: int | None = None) -> Tensor:
        return ops.cumsum(x, axis)

    def cumulative_prod(self, x: Tensor, axis: int | None = None, include_initial: bool = False) -> Tensor:
        products = ops.cumprod(x, axis)
        if not include_initial:
            return products
        ax = -1 if axis is None else axis
        shape = list(products.shape)
        shape[ax] = 1
        ones = self._constant(self.xp.ones(tuple(shape), dtype=products.dtype, **self.device._placement()))
        return ops.concat([ones, products], axis=ax)

    # -- shapes, indexing and linear algebra ------------------------------------------------------
    @staticmethod
    def take(x: Tensor, indices: Any, axis: int | None = None) -> Tensor:
        """The values of ``x`` at the integer ``indices`` along ``axis`` (a 1-d ``x`` needs none)."""
        if axis is None and x.ndim != 1:
            raise SecondOrderError("take without an axis needs a 1-d tensor (the array API's rule); pass the axis")
        key = (slice(None),) * ((axis or 0) % max(x.ndim, 1)) + (indices,)
        return ops.getitem(x, key)

    @staticmethod
    def reshape(x: Tensor, shape: Sequence[int]) -> Tensor:
        return ops.reshape(x, tuple(shape))

    @staticmethod
    def broadcast_to(x: Tensor, shape: Sequence[int]) -> Tensor:
        return ops.broadcast_to(x, shape)

    @staticmethod
    def permute_dims(x: Tensor, axes: Sequence[int]) -> Tensor:
        return ops.permute(x, tuple(axes))

    @staticmethod
    def matrix_transpose(x: Tensor) -> Tensor:
        return ops.transpose(x, -2, -1)

    @staticmethod
    def moveaxis(x: Tensor, source: Any, destination: Any) -> Tensor:
        return ops.moveaxis(x, source, destination)

    @staticmethod
    def expand_dims(x: Tensor, axis: Any) -> Tensor:
        return ops.expand_dims(x, axis)

    @staticmethod
    def squeeze(x: Tensor, axis: Any = None) -> Tensor:
        return ops.squeeze(x, axis)

    @staticmethod
    def flip(x: Tensor, axis: Any = None) -> Tensor:
        return ops.flip(x, axis)

    @staticmethod
    def roll(x: Tensor, shift: Any, axis: Any = None) -> Tensor:
        return ops.roll(x, shift, axis)

    @staticmethod
    def tile(x: Tensor, reps: Any) -> Tensor:
        return ops.tile(x, reps)

    @staticmethod
    def tril(x: Tensor, k: int = 0) -> Tensor:
        return ops.tril(x, k)

    @staticmethod
    def triu(x: Tensor, k: int = 0) -> Tensor:
        return ops.triu(x, k)

    @staticmethod
    def matmul(a: Tensor, b: Tensor) -> Tensor:
        return ops.matmul(a, b)

    @staticmethod
    def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
        return ops.concat(tensors, axis)

    @staticmethod
    def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
        return ops.stack(tensors, axis)
