"""Tracers: an array being recorded. A ``Tracer`` holds the real array and its slot in the program;
it answers what an array says about itself without its values (shape, dtype, device) at once, and
hands every operation on it (operators, methods, indexing, numpy functions and ufuncs) to its
recorder, which computes the result on the real arrays and notes one step. Reading a value
(``bool()``, ``float()``, ``.item()``) is the one thing it cannot record: it asks the recorder."""

from __future__ import annotations

import functools
import operator
import types
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from ..tensor import Tensor

if TYPE_CHECKING:
    from .recorder import Recorder


class Tracer:
    """An array being recorded: the real array ``a``, its slot in the program, and its shape."""

    __slots__ = ("a", "slot", "rec", "shape")
    __array_priority__ = 2000  # numpy defers to our operators

    def __init__(self, a: Any, slot: int, rec: "Recorder") -> None:
        self.a, self.slot, self.rec = a, slot, rec
        self.shape = getattr(a, "shape", ())

    # what an array says about itself without its values: static, not recorded (read in C, without a
    # Python call, where the array has it: tapekit reads a tracer's shape, dtype and nbytes ten times
    # an op, and a Python call costs 1,400 instructions of a first call's 344,000 an op: measured)
    dtype = property(operator.attrgetter("a.dtype"))
    ndim = property(lambda self: getattr(self.a, "ndim", 0))
    size = property(lambda self: getattr(self.a, "size", 1))
    nbytes = property(operator.attrgetter("a.nbytes"))
    itemsize = property(operator.attrgetter("a.itemsize"))
    device = property(operator.attrgetter("a.device"))
    recorded_in = property(operator.attrgetter("rec"))  # what tapekit's ops ask to use it as it is (devices.py)

    def __len__(self) -> int:
        return len(self.a)

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self.a)))

    def __getitem__(self, key: Any) -> Any:
        return self.rec.call("getitem", "", operator.getitem, (self, key), {})

    def __setitem__(self, key: Any, value: Any) -> None:
        self.rec.call("setitem", "", operator.setitem, (self, key, value), {})

    # reading a value: what a recorded program cannot do
    def __bool__(self) -> bool:
        return self.rec.read(self, "bool()", bool)

    def __float__(self) -> float:
        return self.rec.read(self, "float()", float)

    def __int__(self) -> int:
        return self.rec.read(self, "int()", int)

    def __index__(self) -> int:
        return self.rec.read(self, "an index", operator.index)

    def item(self) -> Any:
        return self.rec.read(self, ".item()", lambda a: a.item())

    def tolist(self) -> Any:
        return self.rec.read(self, ".tolist()", lambda a: a.tolist())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.rec.read(self, "np.asarray()", lambda a: np.asarray(a, dtype=dtype))

    def __repr__(self) -> str:
        return f"<array being recorded by tk.compile: slot {self.slot}, shape {self.shape}, dtype {self.dtype}>"

    __hash__ = object.__hash__

    # numpy functions and ufuncs called on a tracer (library code that calls numpy directly)
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        head = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        return self.rec.call("call", head, getattr(ufunc, method), inputs, kwargs)

    def __array_function__(self, func: Any, types_: Any, args: Any, kwargs: Any) -> Any:
        return self.rec.call("call", numpy_path(func) or self.rec.bind(func, func.__name__), func, args, kwargs)


@functools.cache
def numpy_path(func: Callable) -> str | None:
    """Where numpy keeps ``func``, as a program writes it (``np.sum``, ``np.linalg.slogdet``), or
    None for a function numpy does not hold where its module says."""
    module = getattr(func, "__module__", None) or ""
    if module != "numpy" and not module.startswith("numpy."):
        return None
    path = [*module.split(".")[1:], func.__name__]
    found: Any = np
    for name in path:
        found = getattr(found, name, None)
    return ".".join(["np", *path]) if found is func else None


_BINARY = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
           "matmul": "@", "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_UNARY = {"neg": "-", "pos": "+", "invert": "~", "abs": "abs"}


def _operator_methods() -> None:
    def binary(fn: Callable, sym: str) -> Callable:
        return lambda self, other: self.rec.operation("binop", sym, fn, self, other)

    def reflected(fn: Callable, sym: str) -> Callable:
        return lambda self, other: self.rec.operation("binop", sym, fn, other, self)

    def inplace(fn: Callable, sym: str) -> Callable:
        return lambda self, other: self.rec.operation("iop", sym, fn, self, other)

    def unary(fn: Callable, sym: str) -> Callable:
        return lambda self: self.rec.operation("unop", sym, fn, self)

    for name, sym in _BINARY.items():
        fn = getattr(operator, name + "_" if name in ("and", "or") else name)
        setattr(Tracer, f"__{name}__", binary(fn, sym))
        setattr(Tracer, f"__r{name}__", reflected(fn, sym))
        setattr(Tracer, f"__i{name}__", inplace(getattr(operator, f"i{name}"), sym))
    for name, sym in _COMPARE.items():
        setattr(Tracer, f"__{name}__", binary(getattr(operator, name), sym))
    for name, sym in _UNARY.items():
        setattr(Tracer, f"__{name}__", unary(getattr(operator, name), sym))


_operator_methods()


class _Forwarded:
    """A public attribute of the recorded arrays' type, looked up on the real array: a method is
    recorded as a call when called, an array (``x.real``) as a step, a fact about the array
    (``x.strides``, ``x.flags``) is static, and anything else (``x.flat``, ``x.data``, ``x.ctypes``:
    ways to the values) is a read. Tracers get these one by one (``forward_attributes``), not through ``__getattr__``:
    numpy asks what it converts for ``__array_interface__`` first, which ``__getattr__`` would have
    answered with the real array's, so that numpy read values unseen; and a class with
    ``__getattr__`` makes every attribute look-up on it slower (W4's first call: 4% of it)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, tracer: Tracer | None, owner: type | None = None) -> Any:
        if tracer is None:
            return self
        name = self.name
        value = getattr(tracer.a, name)
        if callable(value) and not isinstance(value, type):
            return lambda *args, **kw: tracer.rec.call("method", name, _Method(name), (tracer,) + args, kw)
        if is_array(value):
            return tracer.rec.call("getattr", name, operator.attrgetter(name), (tracer,), {})
        if isinstance(value, _FACTS):
            return value
        return tracer.rec.read(tracer, f".{name}", lambda a: value)


_FACTS = (int, str, tuple, type(None), np.dtype, type(np.empty(0).flags))  # what an array says without its values


_FORWARDED: set[type] = set()  # the array types whose attributes tracers have


def forward_attributes(kind: type) -> None:
    """Give tracers the public attributes of arrays of type ``kind`` that they lack (once a type)."""
    if kind in _FORWARDED:
        return
    _FORWARDED.add(kind)
    for name in dir(kind):
        if not name.startswith("_") and not hasattr(Tracer, name):
            setattr(Tracer, name, _Forwarded(name))


forward_attributes(np.ndarray)


class _Method:
    """``a.name(*args)`` as a function of ``a``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, a: Any, *args: Any, **kw: Any) -> Any:
        return getattr(a, self.name)(*args, **kw)


def is_array(value: Any) -> bool:
    """Whether ``value`` is an array of the device (not a Tensor, a type or a dtype)."""
    try:
        return (hasattr(value, "shape") and hasattr(value, "dtype")
                and not isinstance(value, (type, np.dtype, Tensor, types.ModuleType)))  # numpy has np.shape
    except Exception:  # an attribute dict (__getattr__ = dict.__getitem__) raises KeyError: not an array
        return False


def nested(value: Any, kind: type) -> Iterator[Any]:
    """The values of type ``kind`` in ``value``, or inside its nested tuples, lists, dicts and slices."""
    t = type(value)
    if t is kind:
        yield value
    elif t is tuple or t is list:
        for v in value:
            yield from nested(v, kind)
    elif t is dict:
        for v in value.values():
            yield from nested(v, kind)
    elif t is slice:
        for v in (value.start, value.stop, value.step):
            yield from nested(v, kind)


def tracers_in(value: Any) -> Iterator[Tracer]:
    """The tracers among a call's arguments."""
    return nested(value, Tracer)
