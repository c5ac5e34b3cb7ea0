"""``Tensor``: storage on a device, a global id, an optional name, and a tape handle.

Tensors never change after they are made. ``x.trace(tape)`` gives another handle to the same
tensor (same id, same storage) that carries ``tape``; every operator is an op (``tapekit.ops``).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .devices import checked_device, dtype_name, is_floating
from .errors import DTypeError, InvalidArgumentError, OperandError, ShapeError, TapeError, TapePolicyError
from .ids import label, name_of, next_id, set_name
from .tapes import NoneTape, OwnedTape, Tape
from .tapes.base import MOVED, MovedTape

if TYPE_CHECKING:
    from .gradients import Gradients
    from .tapes.base import Record


class Tensor:
    """An immutable array on a device, with an id shared by all its traced handles."""

    __slots__ = ("id", "data", "device", "_tape", "_record", "_moved_by", "_moved_from", "__weakref__")

    def __init__(self, data: Any, device: Any, tape: "Tape | None" = None, name: str | None = None) -> None:
        self.id = next_id()
        self.data = data
        self.device = device
        self._tape = tape
        self._record: Record | None = None
        if name is not None:
            set_name(self.id, name)

    def _handle(self, tape: "Tape | None") -> "Tensor":
        """Another handle to this tensor (same id and storage) carrying ``tape``."""
        t = Tensor.__new__(Tensor)
        t.id, t.data, t.device, t._tape, t._record = self.id, self.data, self.device, tape, self._record
        return t

    # -- description ------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def dtype(self) -> Any:
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return int(self.data.size)

    @property
    def name(self) -> str | None:
        return name_of(self.id)

    @name.setter
    def name(self, value: str) -> None:
        set_name(self.id, value)

    @property
    def label(self) -> str:
        """What every printout, message and picture calls this tensor: its name, else its label (``t7``)."""
        return label(self.id)

    @property
    def tape(self) -> "Tape | None":
        """The tape this handle carries (``None``: no tape, inference); once an op moved its
        OwnedTape away, a ``MovedTape`` that says which op."""
        if self._tape is MOVED:
            return MovedTape(self.id, self._moved_by, self._moved_from)
        return self._tape

    def __len__(self) -> int:
        if self.ndim == 0:
            raise OperandError(f"len() of a 0-d tensor ({self.label}): it has one value and no first axis; read "
                               f"it with .item()")  # a TypeError, as Python's protocol says
        return self.shape[0]

    def __repr__(self) -> str:
        values = np.array2string(self.numpy(), precision=4, separator=", ", threshold=20)
        tape = "no tape" if self._tape is None else repr(self.tape).strip("<>")
        name = f", name={self.name!r}" if self.name else f", label={self.label!r}"  # what every printout calls it
        return f"Tensor({values}, shape={self.shape}, dtype={dtype_name(self.dtype)}{name}, {tape})"

    # -- tapes -------------------------------------------------------------------------------
    def trace(self, tape: "Tape | None" = None) -> "Tensor":
        """This tensor on ``tape`` (default: a fresh leaky ``OwnedTape``)."""
        if tape is None:
            tape = OwnedTape()
        if isinstance(tape, NoneTape):
            return self._handle(None)
        if not isinstance(tape, Tape):
            made = f"the class {tape.__name__}" if isinstance(tape, type) else f"a {type(tape).__name__}"
            raise InvalidArgumentError(f"trace takes a tape object, got {made}. Make one first: "
                                       f"x.trace(tk.UnionTape()), x.trace(tk.OwnedTape()), or x.trace() for a fresh "
                                       f"OwnedTape.")
        if not is_floating(self.dtype):
            raise DTypeError(f"cannot trace {self.label}: its dtype {dtype_name(self.dtype)} is not floating, so "
                             f"it has no gradient. Make it with dtype='float32' or 'float64'.")
        if tape._live().moves:
            if getattr(tape, "_held", False):
                raise TapePolicyError("this OwnedTape already belongs to a tensor: an owned tape has one owner. "
                                      "Trace with a fresh tk.OwnedTape(), or share one with tk.UnionTape().")
            tape._held = True
        return self._handle(tape)

    def retaped(self) -> "Tensor":
        """This tensor on a fresh empty tape of the same policy (a second branch from one value)."""
        if self._tape is None:
            return self._handle(None)
        fresh = self.tape._live()._fresh()
        if fresh.moves:
            fresh._held = True
        return self._handle(fresh)

    def clone(self) -> "Tensor":
        """Another handle to this tensor sharing its tape (an error for an OwnedTape)."""
        if self._tape is None:
            return self._handle(None)
        return self._handle(self.tape._live()._shared())

    def detach(self) -> "Tensor":
        """A stop-gradient, as PyTorch's ``detach()``: a tensor of its own (a new id) sharing this
        one's storage, with no tape. Ops on it record nothing, and no gradient flows back through
        it: ``(x.detach() * x).sum()`` has the gradient ``x``, not ``2 x``."""
        return Tensor(self.data, self.device)

    def split_tape(self) -> "tuple[Tensor, Tape | None]":
        """dfdx's ``split_tape()``: this tensor's handle with no tape (the same id and storage) and
        the tape this handle carries. Gradients are keyed by id, so the untaped handle is not a
        stop-gradient: an op between it and a traced ``x`` still collects into ``x``'s entry
        (``(same * x).sum()`` gives ``2 x``). Use ``detach()`` to stop a gradient."""
        return self._handle(None), self.tape

    # -- copies and pickles (of handles with no tape: a tape is not a value) -----------------
    def __copy__(self) -> "Tensor":
        """``copy.copy(x)``: another handle to this tensor (the same id and storage), as
        ``x.split_tape()[0]``."""
        self._refuse_tape("copy")
        return self._handle(None)

    def __deepcopy__(self, memo: dict) -> "Tensor":
        """``copy.deepcopy(x)``: a tensor of its own (a new id, so it never shares a gradient entry
        with ``x``) holding a copy of the storage, on the same device, with the same name. The
        same tensor met twice in one deep copy gives one copy."""
        self._refuse_tape("deepcopy")
        shared = id(self.data) in memo  # storage already copied in this call (x and x.detach() share it)
        data = copy.deepcopy(self.data, memo)
        return Tensor(data if shared else self.device.count(data), self.device, name=self.name)

    def __reduce__(self) -> tuple:
        """A pickle holds the values (a numpy array), the dtype, the device and the name; it
        unpickles to a new tensor with a new id. Ids number the events of one process, so an id
        kept from another process (or from the original, in this one) would name another tensor."""
        self._refuse_tape("pickle")
        return self.device.tensor, (self.numpy(), dtype_name(self.dtype), self.name)

    def _refuse_tape(self, action: str) -> None:
        if self._tape is not None:
            raise TapeError(f"cannot {action} {self.label}: it carries a tape, and a tape is not a value: detach() "
                            f"first (or x.split_tape()[0] to keep the id). Copies and pickles hold values; the "
                            f"tape stays with the computation that records on it.")

    def backward(self, seed: Any = None, retain: bool = False, create_graph: bool = False) -> "Gradients":
        """Gradients of this output with respect to everything its tape recorded.

        A non-scalar output needs ``seed`` (the gradient to start from, of the output's shape).
        ``retain=True`` keeps the records for another backward. ``create_graph=True`` records the
        backward too, so each gradient is a traced tensor to differentiate again (see ``tk.backward``).
        """
        from .backward import backward
        return backward([self], None if seed is None else [seed], retain=retain, create_graph=create_graph)

    # -- values ------------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The values as a numpy array on the host."""
        return self.device.to_numpy(self.data)

    def item(self) -> float:
        if self.size != 1:
            raise ShapeError(f"item() needs a tensor of one value, {self.label} has shape {self.shape}: reduce it "
                             f"first (.sum(), .mean()) or index one value")
        return self.numpy().reshape(()).item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def to(self, device: Any) -> "Tensor":
        """The values on ``device``, as a new tensor with no tape (a transfer is not differentiable
        here). Where the storage already lives there (numpy to numpy), it is shared, not copied:
        tensors never change, so nothing can tell, and no allocation is counted."""
        device = checked_device(device, "to()'s device")
        data = device.from_numpy(self.numpy())
        return Tensor(data if data is self.data else device.count(data), device)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """A numpy ufunc given a tensor (``np.exp(t)``, ``np.add(arr, t)``, ``arr * t``) runs as
        tapekit's op, so the result is a tensor on the tape like any op's; one tapekit has no op
        for, or one called with ``out=``, ``where=`` or as ``.reduce`` and the like, raises
        ``OperandError``, rather than computing on the values and leaving the tape behind."""
        name = ufunc.__name__
        if method == "__call__" and not kwargs:
            if name in _UFUNC_OPERATORS:
                mine, reflected = _UFUNC_OPERATORS[name]
                first, second = inputs
                return getattr(first, mine)(second) if isinstance(first, Tensor) else getattr(second, reflected)(first)
            op = _UFUNC_OPS.get(name, name)
            if op in ops.elementwise.__all__ or op in ops.arithmetic.__all__:
                return getattr(ops, op)(*inputs)
        call = f"np.{name}" if method == "__call__" else f"np.{name}.{method}"
        raise OperandError(f"{call}{' with ' + ', '.join(kwargs) if kwargs else ''} got {self.label}: numpy would "
                           f"compute on its values and leave its tape behind, so no gradient would reach it. Use "
                           f"tapekit's op (tk.{_UFUNC_OPS.get(name, name)}, or an operator) to keep it traced, or "
                           f"{call} on {self.label}.numpy() for plain values.")

    def __float__(self) -> float:
        return float(self.item())

    def __bool__(self) -> bool:
        """The truth of a one-value tensor (``if (x > 0):``); more values are ambiguous, as in numpy."""
        if self.size != 1:
            raise InvalidArgumentError(f"the truth value of a tensor of shape {self.shape} is ambiguous; reduce it "
                                       f"first with .any() or .all(), or compare one value")
        return bool(self.item())

    # -- operators (each is an op in tapekit.ops) --------------------------------------------
    def __add__(self, other: Any) -> "Tensor":
        return ops.add(self, other)

    def __radd__(self, other: Any) -> "Tensor":
        return ops.add(other, self)

    def __sub__(self, other: Any) -> "Tensor":
        return ops.sub(self, other)

    def __rsub__(self, other: Any) -> "Tensor":
        return ops.sub(other, self)

    def __mul__(self, other: Any) -> "Tensor":
        return ops.mul(self, other)

    def __rmul__(self, other: Any) -> "Tensor":
        return ops.mul(other, self)

    def __truediv__(self, other: Any) -> "Tensor":
        return ops.div(self, other)

    def __rtruediv__(self, other: Any) -> "Tensor":
        return ops.div(other, self)

    def __pow__(self, other: Any) -> "Tensor":
        return ops.pow(self, other) if isinstance(other, (Tensor, np.ndarray)) else ops.power(self, other)

    def __rpow__(self, other: Any) -> "Tensor":
        return ops.pow(other, self)

    def __neg__(self) -> "Tensor":
        return ops.neg(self)

    def __abs__(self) -> "Tensor":
        return ops.abs(self)

    def __matmul__(self, other: "Tensor") -> "Tensor":
        return ops.matmul(self, other)

    def __rmatmul__(self, other: "Tensor") -> "Tensor":
        return ops.matmul(other, self)

    def __getitem__(self, key: Any) -> "Tensor":
        return ops.getitem(self, key)

    # comparisons (and &, |, ~ of their masks) give boolean tensors on no tape (they have no
    # gradient), usable as masks and in tk.where; tensors stay hashable by identity, as in PyTorch
    def _compare(self, other: Any, fn: str) -> "Tensor":
        """A comparison or a mask operator (``&``, ``|``): a tensor on no tape, with no gradient."""
        if fn in ("__and__", "__or__"):
            _mask_operand(self, fn)
            if isinstance(other, Tensor):
                _mask_operand(other, fn)
        if isinstance(other, Tensor):
            if other.device is not self.device:
                ops.core.check_devices((self, other), fn.strip("_"))
            other = other.data
        elif isinstance(other, np.ndarray):
            other = ops.core.host_constant(other, fn.strip("_"), self)
        elif not isinstance(other, (int, float, bool, np.number, np.bool_)):
            return NotImplemented
        if hasattr(other, "shape"):
            ops.core.broadcast_shape(self.shape, tuple(other.shape), fn.strip("_"))  # a ShapeError naming both
        return Tensor(self.device.count(getattr(self.data, fn)(other)), self.device)

    def __eq__(self, other: Any) -> "Tensor":  # type: ignore[override]
        return self._compare(other, "__eq__")

    def __ne__(self, other: Any) -> "Tensor":  # type: ignore[override]
        return self._compare(other, "__ne__")

    def __gt__(self, other: Any) -> "Tensor":
        return self._compare(other, "__gt__")

    def __ge__(self, other: Any) -> "Tensor":
        return self._compare(other, "__ge__")

    def __lt__(self, other: Any) -> "Tensor":
        return self._compare(other, "__lt__")

    def __le__(self, other: Any) -> "Tensor":
        return self._compare(other, "__le__")

    def __and__(self, other: Any) -> "Tensor":
        return self._compare(other, "__and__")

    def __or__(self, other: Any) -> "Tensor":
        return self._compare(other, "__or__")

    def __invert__(self) -> "Tensor":
        _mask_operand(self, "__invert__")
        return Tensor(self.device.count(~self.data), self.device)

    __hash__ = object.__hash__

    # -- methods that are ops ----------------------------------------------------------------
    def exp(self) -> "Tensor":
        return ops.exp(self)

    def log(self) -> "Tensor":
        return ops.log(self)

    def sqrt(self) -> "Tensor":
        return ops.sqrt(self)

    def abs(self) -> "Tensor":
        return ops.abs(self)

    def tanh(self) -> "Tensor":
        return ops.tanh(self)

    def sigmoid(self) -> "Tensor":
        return ops.sigmoid(self)

    def relu(self) -> "Tensor":
        return ops.relu(self)

    def sin(self) -> "Tensor":
        return ops.sin(self)

    def cos(self) -> "Tensor":
        return ops.cos(self)

    def clip(self, low: float | None = None, high: float | None = None) -> "Tensor":
        return ops.clip(self, low, high)

    def maximum(self, other: Any) -> "Tensor":
        return ops.maximum(self, other)

    def minimum(self, other: Any) -> "Tensor":
        return ops.minimum(self, other)

    def sum(self, axis: Any = None, keepdims: bool = False, *, dtype: Any = None, out: Any = None) -> "Tensor":
        _numpy_keywords("sum", dtype, out)
        return ops.sum(self, axis, keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False, *, dtype: Any = None, out: Any = None) -> "Tensor":
        _numpy_keywords("mean", dtype, out)
        return ops.mean(self, axis, keepdims)

    def max(self, axis: Any = None, keepdims: bool = False, *, out: Any = None) -> "Tensor":
        _numpy_keywords("max", None, out)
        return ops.max(self, axis, keepdims)

    def logsumexp(self, axis: Any = None, keepdims: bool = False) -> "Tensor":
        return ops.logsumexp(self, axis, keepdims)

    def softmax(self, axis: int = -1) -> "Tensor":
        return ops.softmax(self, axis)

    def log_softmax(self, axis: int = -1) -> "Tensor":
        return ops.log_softmax(self, axis)

    def matmul(self, other: "Tensor") -> "Tensor":
        return ops.matmul(self, other)

    def reshape(self, *shape: Any) -> "Tensor":
        return ops.reshape(self, *shape)

    def permute(self, *axes: Any) -> "Tensor":
        return ops.permute(self, *axes)

    def transpose(self, axis1: int = -2, axis2: int = -1) -> "Tensor":
        return ops.transpose(self, axis1, axis2)

    @property
    def T(self) -> "Tensor":
        """All axes reversed."""
        return ops.permute(self, tuple(reversed(range(self.ndim))))

    def broadcast_to(self, shape: Sequence[int]) -> "Tensor":
        return ops.broadcast_to(self, shape)

    # -- methods of the elementwise ops (tapekit.ops.elementwise and .arithmetic) ------------
    def __floordiv__(self, other: Any) -> "Tensor":
        return ops.floor_divide(self, other)

    def __rfloordiv__(self, other: Any) -> "Tensor":
        return ops.floor_divide(other, self)

    def __mod__(self, other: Any) -> "Tensor":
        return ops.remainder(self, other)

    def __rmod__(self, other: Any) -> "Tensor":
        return ops.remainder(other, self)

    def square(self) -> "Tensor":
        return ops.square(self)

    def exp2(self) -> "Tensor":
        return ops.exp2(self)

    def expm1(self) -> "Tensor":
        return ops.expm1(self)

    def log2(self) -> "Tensor":
        return ops.log2(self)

    def log10(self) -> "Tensor":
        return ops.log10(self)

    def log1p(self) -> "Tensor":
        return ops.log1p(self)

    def tan(self) -> "Tensor":
        return ops.tan(self)

    def asin(self) -> "Tensor":
        return ops.asin(self)

    def acos(self) -> "Tensor":
        return ops.acos(self)

    def atan(self) -> "Tensor":
        return ops.atan(self)

    def sinh(self) -> "Tensor":
        return ops.sinh(self)

    def cosh(self) -> "Tensor":
        return ops.cosh(self)

    def sign(self) -> "Tensor":
        return ops.sign(self)

    def floor(self) -> "Tensor":
        return ops.floor(self)

    def ceil(self) -> "Tensor":
        return ops.ceil(self)

    def round(self, decimals: int = 0) -> "Tensor":
        return ops.round(self, decimals)

    def logaddexp(self, other: Any) -> "Tensor":
        return ops.logaddexp(self, other)

    def floor_divide(self, other: Any) -> "Tensor":
        return ops.floor_divide(self, other)

    def remainder(self, other: Any) -> "Tensor":
        return ops.remainder(self, other)

    # (end of elementwise methods)

    # -- methods of the reductions (tapekit.ops.reduce) --------------------------------------
    def min(self, axis: Any = None, keepdims: bool = False, *, out: Any = None) -> "Tensor":
        """Minimum over ``axis``; see ``tk.min``."""
        _numpy_keywords("min", None, out)
        return ops.min(self, axis, keepdims)

    def prod(self, axis: Any = None, keepdims: bool = False, *, dtype: Any = None, out: Any = None) -> "Tensor":
        """Product over ``axis``; see ``tk.prod``."""
        _numpy_keywords("prod", dtype, out)
        return ops.prod(self, axis, keepdims)

    def var(self, axis: Any = None, keepdims: bool = False, *, correction: float = 0,
            ddof: float | None = None, dtype: Any = None, out: Any = None) -> "Tensor":
        """Variance over ``axis``; see ``tk.var``."""
        _numpy_keywords("var", dtype, out)
        return ops.var(self, axis, keepdims, correction=correction, ddof=ddof)

    def std(self, axis: Any = None, keepdims: bool = False, *, correction: float = 0,
            ddof: float | None = None, dtype: Any = None, out: Any = None) -> "Tensor":
        """Standard deviation over ``axis``; see ``tk.std``."""
        _numpy_keywords("std", dtype, out)
        return ops.std(self, axis, keepdims, correction=correction, ddof=ddof)

    def cumsum(self, axis: int | None = None, *, dtype: Any = None, out: Any = None) -> "Tensor":
        """Running sums along ``axis`` (None: the flattened tensor); see ``tk.cumsum``."""
        _numpy_keywords("cumsum", dtype, out)
        return ops.cumsum(self, axis)

    def cumprod(self, axis: int | None = None, *, dtype: Any = None, out: Any = None) -> "Tensor":
        """Running products along ``axis`` (None: the flattened tensor); see ``tk.cumprod``."""
        _numpy_keywords("cumprod", dtype, out)
        return ops.cumprod(self, axis)

    def argmax(self, axis: int | None = None, keepdims: bool = False) -> "Tensor":
        """Indices of the maxima, an integer tensor with no gradient; see ``tk.argmax``."""
        return ops.argmax(self, axis, keepdims)

    def argmin(self, axis: int | None = None, keepdims: bool = False) -> "Tensor":
        """Indices of the minima, an integer tensor with no gradient; see ``tk.argmin``."""
        return ops.argmin(self, axis, keepdims)

    def all(self, axis: Any = None, keepdims: bool = False) -> "Tensor":
        """Whether every element over ``axis`` is nonzero (no gradient); see ``tk.all``."""
        return ops.all(self, axis, keepdims)

    def any(self, axis: Any = None, keepdims: bool = False) -> "Tensor":
        """Whether some element over ``axis`` is nonzero (no gradient); see ``tk.any``."""
        return ops.any(self, axis, keepdims)

    # (end of reduction methods)

    # -- methods of the shape ops (tapekit.ops.shape) ----------------------------------------
    def squeeze(self, axis: Any = None) -> "Tensor":
        """Drop axes of size 1 (those in ``axis``, or all); see ``tk.squeeze``."""
        return ops.squeeze(self, axis)

    def flatten(self) -> "Tensor":
        """The values along one axis; see ``tk.flatten``."""
        return ops.flatten(self)

    def moveaxis(self, source: Any, destination: Any) -> "Tensor":
        """Move axes to new positions; see ``tk.moveaxis``."""
        return ops.moveaxis(self, source, destination)

    def flip(self, axis: Any = None) -> "Tensor":
        """Reverse the values along ``axis`` (None: all axes); see ``tk.flip``."""
        return ops.flip(self, axis)

    def roll(self, shift: Any, axis: Any = None) -> "Tensor":
        """Shift values along ``axis``, wrapping around; see ``tk.roll``."""
        return ops.roll(self, shift, axis)

    def tile(self, reps: Any) -> "Tensor":
        """Repeat the whole tensor ``reps`` times along each axis; see ``tk.tile``."""
        return ops.tile(self, reps)

    def repeat(self, repeats: Any, axis: int | None = None) -> "Tensor":
        """Repeat each value, as numpy's ``ndarray.repeat`` (PyTorch's ``Tensor.repeat`` is ``tile``);
        see ``tk.repeat``."""
        return ops.repeat(self, repeats, axis)

    def tril(self, k: int = 0) -> "Tensor":
        """The lower triangle of the last two axes; see ``tk.tril``."""
        return ops.tril(self, k)

    def triu(self, k: int = 0) -> "Tensor":
        """The upper triangle of the last two axes; see ``tk.triu``."""
        return ops.triu(self, k)

    # (end of shape methods)

    # -- methods of the linear algebra ops (tapekit.ops.linalg) ------------------------------
    # (end of linalg methods)


def _mask_operand(t: "Tensor", fn: str) -> None:
    """``DTypeError`` for a float operand of ``&``, ``|`` or ``~``, which combine truth values (masks)."""
    if is_floating(t.dtype):
        raise DTypeError(f"{fn.strip('_')} combines truth values (masks, such as x > 0) or integers, but {t.label} "
                         f"has dtype {dtype_name(t.dtype)}: compare first (x > 0), or use tk.where for a choice")


def _numpy_keywords(method: str, dtype: Any, out: Any) -> None:
    """Refuse what numpy passes on to a tensor's own reduction (``np.sum(t)`` calls ``t.sum(axis=,
    dtype=, out=)``) and tapekit cannot do: writing into ``out``, or computing in another ``dtype``.
    Not a ``TypeError``: numpy would take that for a method it cannot call, and compute on the values."""
    if out is not None:
        raise InvalidArgumentError(f"np.{method} with out=: an op makes a new tensor and writes into no array; "
                                   f"call it without out= (the result stays traced), or on t.numpy() for values")
    if dtype is not None:
        raise InvalidArgumentError(f"np.{method} with dtype={dtype!r}: tapekit's {method} keeps the tensor's dtype; "
                                   f"make the tensor in the dtype you want, or call it on t.numpy() for values")


# numpy's ufuncs that are an operator of Tensor: (its method, its method with the operands swapped)
_UFUNC_OPERATORS = {"add": ("__add__", "__radd__"), "subtract": ("__sub__", "__rsub__"),
                    "multiply": ("__mul__", "__rmul__"), "divide": ("__truediv__", "__rtruediv__"),
                    "power": ("__pow__", "__rpow__"), "matmul": ("__matmul__", "__rmatmul__"),
                    "greater": ("__gt__", "__lt__"), "less": ("__lt__", "__gt__"), "greater_equal": ("__ge__", "__le__"),
                    "less_equal": ("__le__", "__ge__"), "equal": ("__eq__", "__eq__"), "not_equal": ("__ne__", "__ne__")}
_UFUNC_OPS = {"negative": "neg", "absolute": "abs"}  # numpy's other names for tapekit's ops

from . import ops  # noqa: E402  (ops need Tensor defined first)
