"""Layers with parameters: ``Linear``, ``Embedding``, ``LayerNorm``, ``Dropout`` and ``Constant``.

Each takes ``device`` (default: a shared ``tk.Cpu(seed=0)``) and ``dtype`` (default float32; use
float64 to check gradients against finite differences).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..devices import Device, dtype_name, is_floating, is_integer
from ..errors import DTypeError, InvalidArgumentError, ShapeError, checked_number
from ..ops.core import emit, same
from ..ops.shape import device_array, refuse_out_of_range, take_flat
from ..tensor import Tensor
from .module import Module, branch, device_or_default


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise InvalidArgumentError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _parameter_dtype(device: Device, dtype: Any, layer: str) -> Any:
    """``dtype`` for a layer's parameters: a float (or ``None``, the device's default): an integer
    weight would start at 0 (uniform draws truncated) and could not be trained."""
    if dtype is not None and not is_floating(device.dtype(dtype)):
        raise DTypeError(f"{layer}'s parameters are trained by gradients, so their dtype must be a float ('float32' "
                         f"or 'float64'), got {dtype_name(device.dtype(dtype))}")
    return dtype


class Linear(Module):
    """``x @ weight + bias``, with ``weight`` of shape ``(in_features, out_features)``.

    Both start uniform in ``±1/sqrt(in_features)``, as in PyTorch and dfdx."""

    takes_tensor = True

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Device | None = None,
                 dtype: Any = None) -> None:
        self.in_features = _positive("in_features", in_features)
        self.out_features = _positive("out_features", out_features)
        dev = device_or_default(device)
        dtype = _parameter_dtype(dev, dtype, "Linear")
        bound = 1 / math.sqrt(in_features)
        self.weight = dev.tensor(dev.rng.uniform(-bound, bound, (in_features, out_features)), dtype=dtype)
        self.bias = dev.tensor(dev.rng.uniform(-bound, bound, (out_features,)), dtype=dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        y = x @ self.weight
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """Rows of ``weight`` (``(num_embeddings, dim)``, standard normal) picked by integer indices of
    any shape, from 0 to ``num_embeddings - 1`` (a negative index raises, as in PyTorch); the output
    has the indices' shape plus ``dim``. Integer indices cannot carry a tape, so tag the parameters
    (``model.trace(tape)``) to train it."""

    def __init__(self, num_embeddings: int, dim: int, device: Device | None = None, dtype: Any = None) -> None:
        self.num_embeddings = _positive("num_embeddings", num_embeddings)
        self.dim = _positive("dim", dim)
        dev = device_or_default(device)
        self.weight = dev.tensor(dev.rng.standard_normal((num_embeddings, dim)),
                                 dtype=_parameter_dtype(dev, dtype, "Embedding"))

    def forward(self, indices: Any) -> Tensor:
        index = device_array(indices, self.weight.device, "Embedding: the indices")
        if not is_integer(index.dtype):
            raise DTypeError(f"Embedding takes integer indices, got dtype {dtype_name(index.dtype)}; make them with "
                             f"an integer dtype, e.g. dev.tensor(np.array([...]), dtype='int64')")
        device, rows = self.weight.device, self.num_embeddings
        refuse_out_of_range(index, rows, device, f"Embedding: indices range from {{low}} to {{high}}, but it has "
                                                 f"{rows} rows (valid: 0 to {rows - 1}); a negative index does not "
                                                 f"count from the end here")
        xp = device.xp  # each picked row's positions in the weight flattened, made on the device (never read)
        rows = xp.reshape(xp.astype(index, xp.int64), (-1, 1))  # int64: uint8 rows times dim would wrap
        flat = xp.reshape(rows * self.dim + xp.arange(self.dim, dtype=xp.int64, **device._placement()), (-1,))
        return take_flat(self.weight, flat, (*index.shape, self.dim))

    def extra_repr(self) -> str:
        return f"num_embeddings={self.num_embeddings}, dim={self.dim}"


def _checked_eps(eps: Any) -> float:
    return checked_number(eps, "LayerNorm's eps", lambda v: v > 0, "a positive number")


class LayerNorm(Module):
    """Normalise the last axis to mean 0 and variance 1, then scale by ``weight`` (ones) and shift
    by ``bias`` (zeros)."""

    takes_tensor = True

    def __init__(self, dim: int, eps: float = 1e-5, device: Device | None = None, dtype: Any = None) -> None:
        self.dim = _positive("dim", dim)
        self.eps = _checked_eps(eps)
        dev = device_or_default(device)
        dtype = _parameter_dtype(dev, dtype, "LayerNorm")
        self.weight = dev.ones((dim,), dtype=dtype)
        self.bias = dev.zeros((dim,), dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        if tuple(x.shape[-1:]) != (self.dim,):  # before any op records: a module call is all or nothing too
            raise ShapeError(f"LayerNorm({self.dim}) normalises a last axis of {self.dim} values, but got an input "
                             f"of shape {tuple(x.shape)}: give inputs whose last axis is {self.dim}, or make the "
                             f"layer LayerNorm({x.shape[-1] if x.shape else 1})")
        eps = self.eps = _checked_eps(self.eps)  # set since the layer was made, maybe
        centred = x - branch(x).mean(-1, keepdims=True)
        c = branch(centred)
        variance = (c * c).mean(-1, keepdims=True)
        return centred / (variance + eps).sqrt() * self.weight + self.bias

    def extra_repr(self) -> str:
        return f"dim={self.dim}, eps={self.eps}"


class Dropout(Module):
    """In training mode, zero each value with probability ``p`` and scale the rest by ``1/(1-p)``
    (masks come from the input's device generator); in evaluation mode, the identity."""

    takes_tensor = True

    def __init__(self, p: float = 0.5) -> None:
        self.p = p
        self._check_p()

    def _check_p(self) -> None:
        """``p``, checked when the layer is made and at each call (it may be set in between)."""
        self.p = checked_number(self.p, "Dropout's p", lambda v: 0 <= v < 1, "a number in [0, 1)")

    def forward(self, x: Tensor) -> Tensor:
        self._check_p()
        if not self.training or self.p == 0:
            return x
        keep = x.device.rng.random(x.shape) >= self.p
        return x * x.device.tensor(keep / (1 - self.p), dtype=x.dtype)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def _zeros(g: Any, device: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """The input's gradient: zeros, since the output ignores its values (only its shape is kept)."""
    return device.xp.zeros(shape, dtype=dtype, **device._placement())


def _value_tangent(tangents: tuple, *saved: Any) -> Any:
    """``Constant``'s forward rule: its value's tangent (None, zero, when only the input has one)."""
    return tangents[0]


class Constant(Module):
    """A learned constant: the output is the parameter ``value`` (zeros of ``shape`` at first),
    whatever the input holds.

    It trains whichever side carries the tape. With parameter tagging the parameter carries it.
    With input tagging the input's tape moves onto the parameter, dfdx style: the output of an op
    on the parameter takes it, and under an OwnedTape the input's handle can no longer record."""

    takes_tensor = True

    def __init__(self, shape: int | Sequence[int], device: Device | None = None, dtype: Any = None) -> None:
        self.value = device_or_default(device).zeros(shape, dtype=dtype)

    def forward(self, x: Any) -> Tensor:
        value, xp = self.value, self.value.device.xp
        # one op whose operands are the parameter and the input: its output takes their merged tape
        # like any op's, and the input's gradient is zero since its values are ignored
        return emit("broadcast_to", xp.broadcast_to(value.data, value.shape), (value, x),
                    (same, _zeros), (value.device, x.shape, x.dtype), value.device, _value_tangent)

    def extra_repr(self) -> str:
        return f"shape={self.value.shape}"
