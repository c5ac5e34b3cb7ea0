"""Devices: where storage lives and which array namespace computes.

A device owns an array namespace ``xp`` (numpy, CuPy, or ``array_api_strict``) and every op
computes through it, so the same code runs on all of them. Random numbers always come from a
seeded numpy generator, so one seed gives the same values on every device.
"""

from __future__ import annotations

import functools
import numbers
import operator
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from .errors import DeviceUnavailableError, DTypeError, InvalidArgumentError, ShapeError

if TYPE_CHECKING:
    from .tensor import Tensor

_FLOATS = ("float32", "float64")
_DTYPES = ("float32", "float64", "float16", "int8", "int16", "int32", "int64",
           "uint8", "uint16", "uint32", "uint64", "bool")


def dtype_name(dtype: Any) -> str:
    """``"float32"`` for any spelling of a dtype (numpy, CuPy, array_api_strict, a string)."""
    if isinstance(dtype, str):
        return dtype
    key = (type(dtype), dtype)  # the type first: array_api_strict warns when its dtypes meet numpy's in ==
    try:
        return _dtype_names[key]
    except KeyError:
        name = _dtype_names[key] = _name_of(dtype)
        return name
    except TypeError:  # unhashable: not a dtype, but say what it is
        return _name_of(dtype)


_dtype_names: dict[tuple, str] = {}  # numpy computes ``dtype.name`` in Python, about 2 µs a call


def _name_of(dtype: Any) -> str:
    try:
        return np.dtype(dtype).name
    except TypeError:
        return str(dtype).rsplit(".", 1)[-1]


def is_floating(dtype: Any) -> bool:
    """Whether ``dtype`` (of any namespace) is a floating dtype, the kind that has gradients."""
    kind = getattr(dtype, "kind", None)  # numpy and CuPy dtypes say it at once
    return kind == "f" if kind is not None else dtype_name(dtype).startswith("float")


def is_integer(dtype: Any) -> bool:
    """Whether ``dtype`` (of any namespace) is a signed or unsigned integer dtype."""
    kind = getattr(dtype, "kind", None)
    return kind in ("i", "u") if kind is not None else dtype_name(dtype).startswith(("int", "uint"))


def _itemsize(dtype: Any) -> int:
    itemsize = getattr(dtype, "itemsize", None)
    return itemsize if itemsize is not None else np.dtype(dtype_name(dtype)).itemsize


_nbytes = operator.attrgetter("nbytes")  # numpy's and CuPy's arrays know their size in bytes


def _size_bytes(array: Any) -> int:
    """Bytes of an array without an ``nbytes`` (array_api_strict's)."""
    return int(array.size) * _itemsize(array.dtype)


def device_array_as_is(value: Any, xp: Any) -> bool:
    """Whether ``value`` is an array of the namespace ``xp`` to be used as it is, not taken through
    the host (which would read it): one ``tk.compile`` records (it says which namespace it
    stands for), or, on a device other than numpy's, an array of another kind than numpy's."""
    if getattr(value, "recorded_in", None) is not None:
        return True
    return xp is not np and hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(
        value, (np.ndarray, np.generic))


def host_floats(value: Any, what: str, error: type) -> np.ndarray:
    """``value`` given on the host (a number, nested lists, a numpy array) as a float64 array,
    refused with ``error`` unless it is numbers (not text, dates or objects, which numpy would turn
    into day counts or NaN) and with ``InvalidArgumentError`` unless each is finite. ``what``
    names it in the messages: ``the seed for loss``."""
    try:
        host = np.asarray(value)
        if host.dtype.kind not in "iubf":
            raise TypeError(host.dtype)
    except (TypeError, ValueError):
        kind = f"an array of {host.dtype}" if isinstance(value, np.ndarray) else f"a {type(value).__name__}"
        raise error(f"{what} must be numbers (a tensor, an array or nested lists), got {kind}") from None
    host = host.astype(np.float64)
    if not np.isfinite(host).all():
        raise InvalidArgumentError(f"{what} holds a NaN or an infinity, which would reach every gradient; give "
                                   f"finite numbers")
    return host


def checked_device(device: Any, what: str) -> "Device":
    """``device`` when it is a tapekit device; else ``InvalidArgumentError`` (a PyTorch habit: 'cpu')."""
    if not isinstance(device, Device):
        raise InvalidArgumentError(f"{what} must be a tapekit device, such as tk.Cpu() or tk.Cuda(), got {device!r}; "
                                   f"make one once (dev = tk.Cpu()) and pass it")
    return device


def array_nbytes(value: Any) -> int | None:
    """Bytes of ``value`` when it is an array of any namespace, else ``None``."""
    if not isinstance(getattr(value, "shape", None), tuple) or not hasattr(value, "dtype"):
        return None
    return _size_bytes(value)


@functools.cache
def _tensor_type() -> type:
    from .tensor import Tensor  # imported when first needed: tensor.py imports this module
    return Tensor


def _short(data: Any) -> str:
    text = repr(data)
    return text if len(text) <= 60 else text[:57] + "..."


def _shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    try:
        dims = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(operator.index(s) for s in shape)
        ok = not isinstance(shape, (str, bytes)) and all(n >= 0 for n in dims)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InvalidArgumentError(f"shape must be an int or a sequence of ints, none negative, got {shape!r}; "
                                   f"for example dev.zeros((2, 3))")
    return dims


class Device:
    """Base class of devices. Subclasses set ``xp`` and the host transfers.

    A device is a place, not a value: ``copy.copy`` and ``copy.deepcopy`` give the device itself,
    so a deep copy of a model keeps its tensors here (they can meet the original's in one op), draws
    from the same generator and counts into the same counters. A pickle unpickles to a new device of
    the same place (its tensors can meet this one's too) whose generator makes the same numbers
    next and whose counters go on from this one's.
    """

    xp: Any
    kind: str = "device"
    takes_out: bool = False  # the namespace's functions take ``out=`` (backward writes into preallocated buffers)
    nbytes_of: Callable[[Any], int] = staticmethod(_size_bytes)  # bytes of one of its arrays

    def __init__(self, seed: int = 0, default_dtype: str = "float32") -> None:
        if dtype_name(default_dtype) not in _FLOATS:
            raise DTypeError(f"default_dtype must be float32 or float64, got {default_dtype!r}: it is the dtype of "
                             f"numbers, float data and integer ops that yield floats")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise InvalidArgumentError(f"seed must be an int, 0 or more (the generator's start; None: a fresh one), "
                                       f"got {seed!r}")
        self.seed = seed
        self.default_dtype = dtype_name(default_dtype)
        self._default_host_dtype = np.dtype(self.default_dtype)  # what a numpy array of it has (``tensor``)
        self.rng = np.random.default_rng(seed)
        self.allocations = 0
        self.allocated_bytes = 0

    @property
    def place(self) -> tuple:
        """Where storage lives; tensors whose devices share a place can meet in one op."""
        return (self.kind,)

    # -- accounting ---------------------------------------------------------------------------
    def count(self, array: Any) -> Any:
        """Count one allocated array (an op result or a gradient buffer) and return it."""
        self.allocations += 1
        self.allocated_bytes += self.nbytes_of(array)
        return array

    def reset_counters(self) -> None:
        """Set the allocation counters back to zero."""
        self.allocations = 0
        self.allocated_bytes = 0

    # -- dtypes and transfers -----------------------------------------------------------------
    def dtype(self, spec: Any = None) -> Any:
        """The namespace dtype for ``spec`` (a name, a numpy dtype, or a namespace dtype)."""
        if spec is None:
            return getattr(self.xp, self.default_dtype)
        name = dtype_name(spec)
        if name in ("float", "double"):
            name = "float64"
        if name not in _DTYPES:
            raise DTypeError(f"unknown dtype {spec!r}; use one of {', '.join(_DTYPES)}")
        return getattr(self.xp, name)

    def from_numpy(self, array: np.ndarray) -> Any:
        """Move a numpy array onto this device."""
        return self.xp.asarray(array)

    def to_numpy(self, array: Any) -> np.ndarray:
        """An array of this device as a numpy array on the host (a copy, except on numpy's CPU, where it
        is the storage itself)."""
        return np.asarray(array)

    def index_add(self, shape: tuple[int, ...], index: Any, values: Any) -> Any:
        """A zero array of ``shape`` with ``values`` added at integer ``index`` along axis 0,
        duplicates summed (the backward of ``t[index]``).

        The array API has no scatter, so this one is a matmul with a one-hot matrix of
        ``len(index)`` by ``shape[0]`` values: exact, but its memory grows with both."""
        xp = self.xp
        onehot = xp.astype(index[:, None] == xp.arange(shape[0], device=values.device)[None, :], values.dtype)
        rows = xp.reshape(values, (index.shape[0], int(np.prod(shape[1:], dtype=np.int64))))
        return xp.reshape(xp.matmul(xp.matrix_transpose(onehot), rows), shape)

    # -- constructors -------------------------------------------------------------------------
    def _wrap(self, array: Any, name: str | None) -> "Tensor":
        return _tensor_type()(self.count(array), self, name=name)

    def tensor(self, data: Any, dtype: Any = None, name: str | None = None) -> "Tensor":
        """A tensor holding ``data`` (numbers, nested lists, a numpy array, a tensor).

        Without ``dtype``, numbers (a list of ints too) and float arrays get the device's
        ``default_dtype`` (float32 unless the device was made with another); numpy integer arrays
        keep their dtype (labels: ``dev.tensor(np.array(labels))`` or ``dtype="int64"``), and
        booleans, from a list or an array, stay boolean (masks).
        """
        if type(data) is np.ndarray and dtype is None and data.dtype == self._default_host_dtype:
            return self._wrap(self.from_numpy(data), name)  # as it is: half the instructions (W3 makes 100 a step)
        if isinstance(data, _tensor_type()):
            data = data.numpy()
        try:
            host = np.asarray(data)
        except ValueError:
            raise ShapeError(f"cannot make a tensor from ragged data {_short(data)}: every row must have the same "
                             f"length. Pad the short rows, or make one tensor per row.") from None
        if dtype is None:
            keep = host.dtype.kind == "b" or (host.dtype.kind in "iu" and not isinstance(data, (list, tuple, int)))
            dtype = dtype_name(host.dtype) if keep else self.default_dtype
        if host.dtype.kind not in "iubf":
            raise DTypeError(f"cannot make a tensor from data of dtype {host.dtype}; pass numbers")
        wanted = self.dtype(dtype)
        return self._wrap(self.from_numpy(host.astype(dtype_name(wanted), copy=False)), name)

    def zeros(self, shape: int | Sequence[int], dtype: Any = None, name: str | None = None) -> "Tensor":
        """A tensor of zeros (of the default dtype unless ``dtype`` says otherwise)."""
        return self._wrap(self.xp.zeros(_shape(shape), dtype=self.dtype(dtype), **self._placement()), name)

    def ones(self, shape: int | Sequence[int], dtype: Any = None, name: str | None = None) -> "Tensor":
        """A tensor of ones."""
        return self._wrap(self.xp.ones(_shape(shape), dtype=self.dtype(dtype), **self._placement()), name)

    def full(self, shape: int | Sequence[int], value: float, dtype: Any = None,
             name: str | None = None) -> "Tensor":
        """A tensor filled with ``value``."""
        if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.number)):
            raise InvalidArgumentError(f"full fills a tensor with one number, got {value!r}")
        return self._wrap(self.xp.full(_shape(shape), value, dtype=self.dtype(dtype), **self._placement()), name)

    def zeros_like(self, t: "Tensor", name: str | None = None) -> "Tensor":
        """Zeros of ``t``'s shape and dtype."""
        return self.zeros(t.shape, dtype=t.dtype, name=name)

    def randn(self, shape: int | Sequence[int], dtype: Any = None, name: str | None = None) -> "Tensor":
        """Standard normal samples from this device's seeded generator."""
        return self.tensor(self.rng.standard_normal(_shape(shape)), dtype=self._floating(dtype, "randn"), name=name)

    def rand(self, shape: int | Sequence[int], dtype: Any = None, name: str | None = None) -> "Tensor":
        """Uniform samples in [0, 1) from this device's seeded generator."""
        return self.tensor(self.rng.random(_shape(shape)), dtype=self._floating(dtype, "rand"), name=name)

    def _floating(self, dtype: Any, what: str) -> Any:
        """``dtype`` when it is ``None`` (the default, a float) or a float dtype; a sample cast to an
        integer or bool dtype would be a constant (randn's draws truncate to 0, rand's are all True)."""
        if dtype is not None and not is_floating(self.dtype(dtype)):
            raise DTypeError(f"{what} draws real numbers, so its dtype must be a float ('float32' or 'float64'), got "
                             f"{dtype_name(self.dtype(dtype))}; for random integers draw floats and round them")
        return dtype

    def _placement(self) -> dict[str, Any]:
        return {}

    # -- copies and pickles -------------------------------------------------------------------
    def __copy__(self) -> "Device":
        return self

    def __deepcopy__(self, memo: dict) -> "Device":
        return self

    def __reduce__(self) -> tuple:
        """A pickle holds what makes this device again: its constructor's arguments, its generator's
        state and its counters."""
        state = {"rng": self.rng.bit_generator.state, "allocations": self.allocations,
                 "allocated_bytes": self.allocated_bytes}
        return type(self), self._arguments(), state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.allocations = state["allocations"]
        self.allocated_bytes = state["allocated_bytes"]

    def _arguments(self) -> tuple:
        """The constructor's arguments that make this device again."""
        raise NotImplementedError

    def _dtype_text(self) -> str:
        return "" if self.default_dtype == "float32" else f", default_dtype={self.default_dtype!r}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed}{self._dtype_text()})"


class Cpu(Device):
    """CPU storage. ``backend="numpy"`` (default) computes with numpy; ``backend="strict"``
    computes with ``array_api_strict``, which rejects anything outside the array API standard,
    so tests on it prove that no op calls numpy directly (what would break CuPy).

    ``where`` picks one of array_api_strict's simulated devices (``"CPU_DEVICE"``, ``"device1"``,
    ``"device2"``), so tests can mix devices without a GPU.
    """

    kind = "cpu"

    def __init__(self, seed: int = 0, backend: str = "numpy", where: str = "CPU_DEVICE",
                 default_dtype: str = "float32") -> None:
        super().__init__(seed, default_dtype)
        if backend == "numpy":
            self.xp = np
            self._device = None
            self.takes_out = True
            self.nbytes_of = _nbytes
        elif backend == "strict":
            try:
                import array_api_strict
            except ImportError:
                raise DeviceUnavailableError(
                    "tk.Cpu(backend='strict') needs array_api_strict: pip install array-api-strict") from None
            self.xp = array_api_strict
            self._device = array_api_strict.Device(where)
        else:
            raise InvalidArgumentError(f"unknown backend {backend!r}; use 'numpy' or 'strict'")
        self.backend = backend
        self.where = where

    @property
    def place(self) -> tuple:
        return ("cpu",) if self._device is None else ("strict", self.where)

    def _placement(self) -> dict[str, Any]:
        return {} if self._device is None else {"device": self._device}

    def from_numpy(self, array: np.ndarray) -> Any:
        if self._device is None:
            return array
        return self.xp.asarray(array, device=self._device)

    def to_numpy(self, array: Any) -> np.ndarray:
        if self._device is None:
            return array
        return np.from_dlpack(array.to_device(self.xp.Device("CPU_DEVICE")))

    def index_add(self, shape: tuple[int, ...], index: Any, values: Any) -> Any:
        if self._device is not None:
            return super().index_add(shape, index, values)
        out = np.zeros(shape, dtype=values.dtype)
        np.add.at(out, index, values)
        return out

    def _arguments(self) -> tuple:
        return self.seed, self.backend, self.where, self.default_dtype

    def __repr__(self) -> str:
        extra = "" if self.backend == "numpy" else f", backend='strict', where={self.where!r}"
        return f"Cpu(seed={self.seed}{extra}{self._dtype_text()})"


class _CupyNamespace:
    """CuPy's namespace, plus the array-API names tapekit uses that older CuPy lacks."""

    def __init__(self, cupy: Any) -> None:
        self._cupy = cupy
        self.concat = getattr(cupy, "concat", cupy.concatenate)
        self.permute_dims = getattr(cupy, "permute_dims", cupy.transpose)
        self.matrix_transpose = getattr(cupy, "matrix_transpose", lambda a: cupy.swapaxes(a, -1, -2))
        self.astype = getattr(cupy, "astype", lambda a, dtype, copy=True: a.astype(dtype, copy=copy))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cupy, name)

    @staticmethod
    def scatter_add(out: Any, index: Any, values: Any) -> None:
        """``out[index] += values`` with duplicate indices summed (``cupyx.scatter_add``): a call of
        the namespace, so that a compiled program records it."""
        import cupyx
        cupyx.scatter_add(out, index, values)


class Cuda(Device):
    """NVIDIA GPU storage through CuPy (imported when the device is made)."""

    kind = "cuda"
    takes_out = True
    nbytes_of = _nbytes

    def __init__(self, device_id: int = 0, seed: int = 0, default_dtype: str = "float32") -> None:
        super().__init__(seed, default_dtype)
        try:
            import cupy
        except ImportError:
            raise DeviceUnavailableError(
                "tk.Cuda() needs CuPy: pip install 'tapekit[gpu]' on a machine with an NVIDIA GPU") from None
        try:
            if not cupy.cuda.is_available():
                raise DeviceUnavailableError("tk.Cuda() found no usable NVIDIA GPU; use tk.Cpu()")
            cupy.cuda.Device(device_id).use()
        except cupy.cuda.runtime.CUDARuntimeError as err:
            raise DeviceUnavailableError(f"tk.Cuda({device_id}) cannot use the GPU: {err}") from None
        self.cupy = cupy
        self.device_id = device_id
        self.xp = _CupyNamespace(cupy)

    @property
    def place(self) -> tuple:
        return ("cuda", self.device_id)

    def from_numpy(self, array: np.ndarray) -> Any:
        with self.cupy.cuda.Device(self.device_id):
            return self.cupy.asarray(array)

    def to_numpy(self, array: Any) -> np.ndarray:
        return self.cupy.asnumpy(array)

    def index_add(self, shape: tuple[int, ...], index: Any, values: Any) -> Any:
        out = self.xp.zeros(shape, dtype=values.dtype)
        self.xp.scatter_add(out, index, values)
        return out

    def _arguments(self) -> tuple:
        return self.device_id, self.seed, self.default_dtype  # unpickled onto the GPU of the same id

    def __repr__(self) -> str:
        return f"Cuda(device_id={self.device_id}, seed={self.seed}{self._dtype_text()})"
