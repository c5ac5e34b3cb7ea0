"""``tk.compile``: the tape becomes a program.

``step = tk.compile(fn)`` runs ``fn`` eagerly on its first call (forward, backward, an optimizer
update if ``fn`` makes one) while it records every array call the run makes through the device's
array namespace: the ops' forwards, the backward rules in the order the engine runs them, the
engine's sums of gradients, the optimizer's arithmetic. Later calls whose inputs have the same
shapes, dtypes and devices run that recording, a plain Python function of arrays, without making
a Tensor, a record or a Gradients object for anything in between. ``print(step.source)`` shows it.

How it records. For the first call every input array (the arguments' tensors, the parameters of
the modules ``fn`` uses, the optimizer's state) is swapped for a ``Tracer``: an object that looks
like an array (shape, dtype, operators) and, for each operation on it, computes the result on the
real arrays and notes one line of the program. The device's namespace ``xp`` and its random
generator are swapped for proxies that do the same. tapekit's own code runs unchanged on top:
the ops, the tapes, the backward engine and the optimizers never know they are being recorded.
The program is then written out as Python source (``step.source``) and compiled: a replay is a call
of that function, so it costs what numpy's own calls cost.

What is fixed at record time and what is not (the guards). Shapes, dtypes, devices, tape policies,
Python numbers passed as arguments, modules' training modes and optimizers' settings are part of
a program's key: a call that differs in any of them records a new program. Values are not: Python
that reads a value while recording (``float(t)``, ``t.item()``, ``if t > 0:``) raises a
``CompileError`` that names the line. Random draws (Dropout's masks) are calls of the device's
generator in the program, so every call draws afresh.
"""

from __future__ import annotations

import builtins
import gc
import inspect
import keyword
import math
import numbers
import operator
import re
import sys
import types
import warnings
from typing import Any, Callable, Iterator

import numpy as np

from .devices import Device, dtype_name
from .errors import TapekitError
from .gradients import Gradients
from .ids import label, name_of
from .nn.module import Module
from .optim import Optimizer
from .tensor import Tensor

__all__ = ["compile", "Compiled", "CompileError"]


class CompileError(TapekitError):
    """``fn`` did something a recorded program cannot repeat (it read a value while recording)."""


# -- tracers ----------------------------------------------------------------------------------------
class Tracer:
    """An array being recorded: the real array ``a`` and its slot in the program."""

    __slots__ = ("a", "slot", "rec")
    __array_priority__ = 2000  # numpy defers to our operators

    def __init__(self, a: Any, slot: int, rec: "Recorder") -> None:
        self.a, self.slot, self.rec = a, slot, rec

    # what an array says about itself without its values: static, not recorded
    shape = property(lambda self: getattr(self.a, "shape", ()))
    dtype = property(lambda self: self.a.dtype)
    ndim = property(lambda self: getattr(self.a, "ndim", 0))
    size = property(lambda self: getattr(self.a, "size", 1))
    nbytes = property(lambda self: self.a.nbytes)
    itemsize = property(lambda self: self.a.itemsize)
    device = property(lambda self: self.a.device)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.a, name)
        if callable(value) and not isinstance(value, type):
            return lambda *args, **kw: self.rec.call("method", name, _Method(name), (self,) + args, kw)
        if _is_array(value):
            return self.rec.call("getattr", name, operator.attrgetter(name), (self,), {})
        return value

    @property
    def T(self) -> Any:
        return self.rec.call("getattr", "T", operator.attrgetter("T"), (self,), {})

    @property
    def mT(self) -> Any:
        return self.rec.call("getattr", "mT", operator.attrgetter("mT"), (self,), {})

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
        return self.rec.call("call", f"np.{func.__name__}", func, args, kwargs)


_BINARY = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
           "matmul": "@", "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_UNARY = {"neg": "-", "pos": "+", "invert": "~", "abs": "abs"}


def _operator_methods() -> None:
    def binary(fn: Callable, sym: str) -> Callable:
        return lambda self, other: self.rec.call("binop", sym, fn, (self, other), {})

    def reflected(fn: Callable, sym: str) -> Callable:
        return lambda self, other: self.rec.call("binop", sym, fn, (other, self), {})

    def inplace(fn: Callable, sym: str) -> Callable:
        return lambda self, other: self.rec.call("iop", sym, fn, (self, other), {})

    def unary(fn: Callable, sym: str) -> Callable:
        return lambda self: self.rec.call("unop", sym, fn, (self,), {})

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


class _Method:
    """``a.name(*args)`` as a function of ``a``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, a: Any, *args: Any, **kw: Any) -> Any:
        return getattr(a, self.name)(*args, **kw)


class _Ref:
    """A slot in a step's arguments."""

    __slots__ = ("slot",)

    def __init__(self, slot: int) -> None:
        self.slot = slot


def _is_array(value: Any) -> bool:
    return (hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, (type, np.dtype))
            and not isinstance(value, Tensor))


def _unwrap(value: Any) -> Any:
    t = type(value)
    if t is Tracer:
        return value.a
    if t is tuple or t is list:
        return t(_unwrap(v) for v in value)
    if t is dict:
        return {k: _unwrap(v) for k, v in value.items()}
    if t is slice:
        return slice(_unwrap(value.start), _unwrap(value.stop), _unwrap(value.step))
    return value


def _tracers(value: Any) -> Iterator[Tracer]:
    t = type(value)
    if t is Tracer:
        yield value
    elif t is tuple or t is list:
        for v in value:
            yield from _tracers(v)
    elif t is dict:
        for v in value.values():
            yield from _tracers(v)


class Step:
    """One line of the program: ``out = head(args, kwargs)`` in one of a few forms (``kind``)."""

    __slots__ = ("kind", "head", "args", "kwargs", "out", "asarray", "effect", "group")

    def __init__(self, kind: str, head: str, args: tuple, kwargs: dict, out: int | None, asarray: bool,
                 effect: bool, group: Any) -> None:
        self.kind, self.head, self.args, self.kwargs, self.out = kind, head, args, kwargs, out
        self.asarray, self.effect, self.group = asarray, effect, group


# -- the recorder -----------------------------------------------------------------------------------
class Recorder:
    """What one recording run collects: the values of the slots, the steps, the constants."""

    def __init__(self, fn_name: str) -> None:
        self.fn_name = fn_name
        self.values: list[Any] = []  # slot -> its value in the recording run
        self.kinds: list[str] = []  # slot -> "input", "const" or "step"
        self.steps: list[Step] = []
        self.consts: dict[int, int] = {}  # id of a constant array -> its slot
        self.keep: list[Any] = []  # the constants as first seen, alive so their ids stay theirs
        self.depth = 0  # > 0 inside a recorded call: calls made there are its own business
        self.group: Any = None
        self.mark = 0  # steps before this index have a group or belong to none
        self.globals: dict[str, Any] = {"np": np, "asarray": np.asarray, "copy_of": _copy}
        self.bound: dict[int, str] = {}  # id of an object the program refers to -> its global name
        self.grad_of: dict[int, int] = {}  # slot of a gradient a backward returned -> its tensor id
        self.info: dict[int, tuple] = {}  # slot -> (record id, op name, input ids, output id)

    def slot(self, value: Any, kind: str) -> Tracer:
        self.values.append(value)
        self.kinds.append(kind)
        return Tracer(value, len(self.values) - 1, self)

    def bind(self, obj: Any, stem: str) -> str:
        """A global name of the program for ``obj``."""
        name = self.bound.get(id(obj))
        if name is None:
            name = f"{stem}{len(self.bound)}"
            while name in self.globals:
                name += "_"
            self.bound[id(obj)] = name
            self.globals[name] = obj
            self.keep.append(obj)
        return name

    def template(self, value: Any) -> Any:
        t = type(value)
        if t is Tracer:
            return _Ref(value.slot)
        if t is tuple or t is list:
            return t(self.template(v) for v in value)
        if t is dict:
            return {k: self.template(v) for k, v in value.items()}
        if t is slice:
            return slice(self.template(value.start), self.template(value.stop), self.template(value.step))
        if _is_array(value):  # an array made outside the program: a constant
            slot = self.consts.get(id(value))
            if slot is None:
                snapshot = _copy(value)
                self.keep.append(value)
                slot = self.consts[id(value)] = self.slot(snapshot, "const").slot
            return _Ref(slot)
        return value

    def call(self, kind: str, head: str, fn: Callable, args: tuple, kwargs: dict) -> Any:
        """Compute ``fn(*args, **kwargs)`` on the real arrays and note it as a step."""
        real_args, real_kw = _unwrap(args), _unwrap(kwargs)
        if self.depth:
            return fn(*real_args, **real_kw)
        templates = self.template(args), self.template(kwargs)  # before the call: a constant it writes into is kept as it was
        self.depth += 1
        try:
            res = fn(*real_args, **real_kw)
        finally:
            self.depth -= 1
        traced = list(_tracers(args)) + list(_tracers(kwargs))
        effect = kind in ("iop", "setitem") or "out" in kwargs or head.endswith(".at")
        same = next((t for t in traced if t.a is res), None) if res is not None else None
        if same is not None:  # the result is an operand: in place (recorded) or an alias (nothing to do)
            if effect:
                self._note(kind, head, templates, same.slot, False, True)
            return same
        if res is None:
            if effect or kind == "call" or kind == "method":
                self._note(kind, head, templates, None, False, True)
            return None
        asarray = False
        if _is_array(res):
            if isinstance(res, np.generic):  # numpy made a scalar: keep 0-d arrays, as emit does
                res, asarray = np.asarray(res), True
        elif isinstance(res, (tuple, list)) and res and all(_is_array(r) for r in res):
            whole = self.slot(res, "step")
            self._note(kind, head, templates, whole.slot, False, effect)
            return type(res)(self.call("getitem", "", operator.getitem, (whole, i), {}) for i in range(len(res)))
        elif not (traced and isinstance(res, numbers.Number)):
            return res  # a dtype, a shape, a flag: static
        out = self.slot(res, "step")
        self._note(kind, head, templates, out.slot, asarray, effect)
        return out

    def _note(self, kind: str, head: str, templates: tuple, out: int | None, asarray: bool, effect: bool) -> None:
        self.steps.append(Step(kind, head, templates[0], templates[1], out, asarray, effect, self.group))

    def read(self, tracer: Tracer, how: str, read: Callable) -> Any:
        """A value read while recording: tapekit's own checks get the value (fixed in the program);
        the function being compiled gets a ``CompileError`` naming its line."""
        frame, entry = sys._getframe(2), None
        while frame is not None and frame.f_globals.get("__name__", "").startswith("tapekit"):
            entry, frame = frame, frame.f_back
        if entry is not None and entry.f_code not in _USER_READS:
            return read(tracer.a)
        if entry is not None:
            how = _READ_NAMES.get(entry.f_code.co_name, how)
        where = "" if frame is None else f" at {frame.f_code.co_filename}:{frame.f_lineno}"
        line = _source_line(frame)
        raise CompileError(
            f"{how} reads a value of an array while tk.compile records {self.fn_name}(){where}"
            f"{f': `{line}`' if line else ''}. A compiled step is a fixed program of array calls, so Python "
            f"inside it cannot see values: a read would be frozen at the first call's value. Move the read out "
            f"of {self.fn_name}: return the tensor and read it after the call (loss = step(x); "
            f"print(float(loss))), or compute a branch on values with tk.where(cond, a, b).")


_READ_NAMES = {"__bool__": "bool() of a tensor (an `if` or `while` on it)", "__float__": "float() of a tensor",
               "item": ".item()", "numpy": ".numpy()", "tolist": ".tolist()", "__array__": "np.asarray() of a tensor",
               "__repr__": "printing a tensor"}


def _source_line(frame: Any) -> str:
    if frame is None:
        return ""
    import linecache
    return linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()


_USER_READS = {getattr(Tensor, name).__code__ for name in ("item", "tolist", "numpy", "__float__", "__bool__",
                                                           "__array__", "__repr__")}


def _copy(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, np.generic):
        return np.asarray(value)
    space = getattr(value, "__array_namespace__", None)
    if space is not None:
        return space().asarray(value, copy=True)
    return value.copy()


class _Namespace:
    """A device's array namespace, recording: ``xp.tanh(x)`` is a step ``xp.tanh(x)``."""

    def __init__(self, real: Any, rec: Recorder, path: str) -> None:
        self._real, self._rec, self._path = real, rec, path
        self._made: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        made = self._made.get(name)
        if made is not None:
            return made
        value = getattr(self._real, name)
        if isinstance(value, types.ModuleType) or (type(value).__name__ == "_CupyNamespace"):
            made = _Namespace(value, self._rec, f"{self._path}.{name}")
        elif callable(value) and not isinstance(value, type) and not isinstance(value, np.dtype):
            rec, head = self._rec, f"{self._path}.{name}"
            made = lambda *args, **kw: rec.call("call", head, value, args, kw)  # noqa: E731
        else:
            return value
        self._made[name] = made
        return made


class _Generator:
    """A device's random generator, recording: each draw is a step, so every call draws afresh."""

    def __init__(self, real: Any, rec: Recorder, dev: str) -> None:
        self._real, self._rec, self._dev = real, rec, dev

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._real, name)
        if not callable(value):
            return value
        rec, head = self._rec, f"{self._dev}.rng.{name}"
        return lambda *args, **kw: rec.call("call", head, value, args, kw)


def _traced_tensor(device: Device, original: Callable, data: Any, dtype: Any = None, name: str | None = None) -> Tensor:
    """``device.tensor(data)`` for data being recorded (a Dropout mask): the same conversion, recorded."""
    if type(data) is not Tracer:
        return original(data, dtype=dtype, name=name)
    if dtype is None:
        dtype = dtype_name(data.dtype) if np.dtype(dtype_name(data.dtype)).kind in "iub" else device.default_dtype
    wanted = dtype_name(device.dtype(dtype))
    array = device.from_numpy(data.astype(wanted, copy=False)) if isinstance(data.a, np.ndarray) else data
    return device._wrap(array, name)


# -- finding the inputs -----------------------------------------------------------------------------
class Cell:
    """A place that holds an input: ``obj.attr`` (a tensor's storage) or ``obj[key]`` (optimizer state)."""

    __slots__ = ("obj", "key", "attr", "what")

    def __init__(self, obj: Any, key: Any, attr: bool, what: str) -> None:
        self.obj, self.key, self.attr, self.what = obj, key, attr, what

    def get(self) -> Any:
        return getattr(self.obj, self.key) if self.attr else self.obj[self.key]

    def set(self, value: Any) -> None:
        if self.attr:
            setattr(self.obj, self.key, value)
        else:
            self.obj[self.key] = value


def _describe(value: Any) -> tuple:
    if _is_array(value):
        return ("array", tuple(value.shape), value.dtype)
    return (type(value).__name__,)


def _what(what: Any) -> str:
    """An input's description in words: ``argument x[0]`` for the path ``("arg", ("x", 0))``."""
    if isinstance(what, tuple) and what[:1] == ("arg",):
        path = what[1]
        return "argument " + str(path[0]) + "".join(f"[{p!r}]" for p in path[1:])
    return str(what)


class Inputs:
    """The inputs of one call: the cells that hold arrays, the devices, and the key of the call
    (everything a program is fixed to: shapes, dtypes, devices, policies, settings)."""

    def __init__(self, fn: Callable, args: tuple, kwargs: dict) -> None:
        self.cells: list[Cell] = []
        self.arg_tensors: list[Tensor] = []  # in the order they were found
        self.devices: dict[int, Device] = {}
        self.optimizers: list[Optimizer] = []
        self.grads: list[Gradients] = []
        self.key: list[tuple] = []
        self._seen: set[tuple] = set()
        self._objects: set[int] = set()
        self._pname: dict[int, str] = {}
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
            for name, value in bound.arguments.items():
                self._walk_arg((name,), value)
        except (TypeError, ValueError):
            self._walk_arg(("args",), args)
            self._walk_arg(("kwargs",), kwargs)
        for name, obj in _captured(fn):
            self._walk_captured(name, obj, 0)
        from .nn import module as _module
        if _module._default_device is not None:
            self.devices.setdefault(id(_module._default_device), _module._default_device)
        # aliasing: which cells hold the same array
        firsts: dict[int, int] = {}
        values = [c.get() for c in self.cells]
        self.alias = tuple(firsts.setdefault(id(v), i) if _is_array(v) else i for i, v in enumerate(values))
        self.key.append(("aliasing", self.alias))
        self.frozen = tuple(self.key)

    def _cell(self, obj: Any, key: Any, attr: bool, what: Any) -> None:
        mark = (id(obj), key)
        if mark in self._seen:
            return
        self._seen.add(mark)
        cell = Cell(obj, key, attr, what)
        value = cell.get()
        self.cells.append(cell)
        self.key.append((what, _describe(value)))

    def _tensor(self, t: Tensor, what: Any) -> None:
        """A tensor's storage as an input (the hot path of every call: kept short)."""
        device = t.device
        if id(device) not in self.devices:
            self.devices[id(device)] = device
        mark = (id(t), "data")
        if mark in self._seen:
            return
        self._seen.add(mark)
        data = t.data
        self.cells.append(Cell(t, "data", True, what))
        self.key.append((what, "array", data.shape, data.dtype, type(t._tape), device.place))

    def _walk_arg(self, path: tuple, value: Any) -> None:
        what = ("arg", path)  # made into words only when a message needs them
        if isinstance(value, Tensor):
            self.arg_tensors.append(value)
            self._tensor(value, what)
        elif isinstance(value, (list, tuple)):
            self.key.append((what, type(value).__name__, len(value)))
            for i, v in enumerate(value):
                self._walk_arg(path + (i,), v)
        elif isinstance(value, dict):
            self.key.append((what, "dict", tuple(value)))
            for k, v in value.items():
                self._walk_arg(path + (k,), v)
        elif isinstance(value, (Module, Optimizer, Device)):
            self._object(_what(what), value)
        elif isinstance(value, (numbers.Number, str, bytes, type(None))):
            self.key.append((what, type(value).__name__, value))
        elif isinstance(value, Gradients):
            self._gradients(_what(what), value)
        else:
            self.key.append((what, type(value).__name__, id(value)))

    def _gradients(self, what: str, g: Gradients) -> None:
        """Gradient buffers made outside the step (``model.alloc_grads()``): each entry is an input,
        and what a backward does to them (in place, or new entries) is put back after each call."""
        if id(g) in self._objects:
            return
        self._objects.add(id(g))
        self.grads.append(g)
        self.key.append((f"{what} (a Gradients)", id(g), g.leaves))
        self.key.append((f"the buffers of {what} that hold zeros (a backward writes into those)", frozenset(g._clean)))
        self.key.append((f"the entries of {what} that it may update in place", frozenset(g._owned)))
        self.key.append((f"the entries of {what} that are partial", frozenset(g._partial)))
        for tid in list(g._arrays):
            self._cell(g._arrays, tid, False, f"gradient of {label(tid)}")

    def _walk_captured(self, name: Any, obj: Any, depth: int) -> None:
        """What ``fn`` reaches by name: a module, an optimizer, a tensor, gradient buffers, or a list
        or dict of them (one level deep, and only where its first item is one: a list of numbers or
        arrays is data, read as constants)."""
        if isinstance(obj, Gradients):
            self._gradients(name, obj)
        elif isinstance(obj, (Module, Optimizer, Device)):
            self._object(name, obj)
        elif isinstance(obj, Tensor):
            self._tensor(obj, name)
        elif depth < 1 and isinstance(obj, (list, tuple)) and obj and isinstance(obj[0], _FOUND):
            for i, v in enumerate(obj):
                self._walk_captured(f"{name}[{i}]", v, depth + 1)
        elif depth < 1 and isinstance(obj, dict) and obj and isinstance(next(iter(obj.values())), _FOUND):
            for k, v in obj.items():
                self._walk_captured(f"{name}[{k!r}]", v, depth + 1)

    def _object(self, name: str, obj: Any) -> None:
        if id(obj) in self._objects:
            return
        self._objects.add(id(obj))
        if isinstance(obj, Device):
            self.devices.setdefault(id(obj), obj)
        elif isinstance(obj, Module):
            origin = obj._origin()
            self.key.append((f"{name} (a {type(obj).__name__})", id(origin), id(obj),
                             tuple(_settings(m) for m in _modules_of(origin))))
            for pname, p in origin.named_parameters():
                self._pname.setdefault(p.id, pname)
                self._tensor(p, f"parameter {pname}")
        elif isinstance(obj, Optimizer):
            self.optimizers.append(obj)
            self.key.append((f"{name} (a {type(obj).__name__})", id(obj), _settings(obj)))
            for pid, (p, state) in obj._state.items():
                pname = self._pname.get(p.id, label(p.id))
                self._tensor(p, f"parameter {pname}")
                for key in sorted(state):
                    self._cell(state, key, False, f"{type(obj).__name__}'s {key} of {pname}")


_FOUND = (Tensor, Module, Optimizer, Gradients, Device)


def _settings(obj: Any) -> tuple:
    return tuple((k, v) for k, v in sorted(vars(obj).items()) if not k.startswith("_")
                 and isinstance(v, (numbers.Number, str, tuple, type(None)))) + (("training", getattr(obj, "training", None)),)


def _modules_of(module: Module) -> Iterator[Module]:
    from .nn.module import _modules
    return _modules(module)


def _captured(fn: Callable) -> Iterator[tuple[str, Any]]:
    """The objects ``fn`` can reach without arguments: its closure, the globals it names (and the
    globals its nested functions name), and ``self`` of a bound method."""
    owner = getattr(fn, "__self__", None)
    if owner is not None:
        yield "self", owner
        for k, v in vars(owner).items() if hasattr(owner, "__dict__") else ():
            yield f"self.{k}", v
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            yield name, cell.cell_contents
        except ValueError:
            pass
    space = fn.__globals__
    for name in _names(code):
        if name in space:
            yield name, space[name]


def _names(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const)


# -- recording ----------------------------------------------------------------------------------------
class _Patches:
    """Everything swapped while a call is recorded, and put back however it ends."""

    def __init__(self, rec: Recorder, inputs: Inputs) -> None:
        self.rec, self.inputs, self.undo = rec, inputs, []

    def __enter__(self) -> "_Patches":
        rec = self.rec
        for i, dev in enumerate(self.inputs.devices.values()):
            name = rec.bind(dev, "dev")
            space = "xp" if i == 0 else f"{name}.xp"
            if i == 0:
                rec.globals["xp"] = dev.xp
            for attr, value in (("xp", _Namespace(dev.xp, rec, space)),
                                ("rng", _Generator(dev.rng, rec, name)),
                                ("tensor", lambda data, dtype=None, name=None, _d=dev, _o=dev.tensor:
                                 _traced_tensor(_d, _o, data, dtype, name))):
                had = attr in vars(dev)
                self.undo.append((dev, attr, vars(dev).get(attr), had))
                setattr(dev, attr, value)
        from .ops import core
        real = core.emit
        for module in [m for n, m in list(sys.modules.items()) if n.startswith("tapekit") and m is not None]:
            if getattr(module, "emit", None) is real:
                self.undo.append((module, "emit", real, True))
                module.emit = _recording_emit(real, rec)
        engine = sys.modules["tapekit.backward"]
        real_backward = engine.backward

        def backward(*args: Any, **kw: Any) -> Gradients:
            grads = real_backward(*args, **kw)
            for tid, arr in grads._arrays.items():
                if type(arr) is Tracer:
                    rec.grad_of.setdefault(arr.slot, tid)
            return grads

        package = sys.modules["tapekit"]
        self.undo.append((engine, "backward", real_backward, True))
        engine.backward = backward
        if getattr(package, "backward", None) is real_backward:
            self.undo.append((package, "backward", real_backward, True))
            package.backward = backward
        real_update = Optimizer.update
        self.undo.append((Optimizer, "update", real_update, True))

        def update(opt: Optimizer, model: Module, grads: Gradients) -> None:
            outer, rec.group, rec.mark = rec.group, ("update", type(opt).__name__), len(rec.steps)
            try:
                real_update(opt, model, grads)
            finally:
                rec.group, rec.mark = outer, len(rec.steps)

        Optimizer.update = update
        return self

    def __exit__(self, *exc: Any) -> None:
        for obj, attr, value, had in reversed(self.undo):
            if had:
                setattr(obj, attr, value)
            else:
                delattr(obj, attr)


def _recording_emit(real: Callable, rec: Recorder) -> Callable:
    def emit(name: str, out: Any, inputs: Any, rules: Any, saved: tuple, device: Any) -> Tensor:
        result = real(name, out, inputs, rules, saved, device)
        r = result._record
        info = (None if r is None else r.id, name, tuple(getattr(t, "id", None) for t in inputs), result.id)
        group = ("op", info)
        wanted = {t.slot for t in _tracers((out,) + tuple(saved))}
        for step in reversed(rec.steps[rec.mark:]):  # the calls this op made: those its output and saved need
            if step.group is None and step.out in wanted:
                step.group = group
                wanted.update(_slots(step.args))
                wanted.update(_slots(step.kwargs))
        rec.mark = len(rec.steps)
        if type(result.data) is Tracer:
            rec.info.setdefault(result.data.slot, info)
        if r is not None:
            r.rules = tuple(None if rule is None else _recording_rule(rule, rec, info, i)
                            for i, rule in enumerate(r.rules))
        return result

    return emit


def _recording_rule(rule: Callable, rec: Recorder, info: tuple, i: int) -> Callable:
    def traced_rule(g: Any, *saved: Any, **kw: Any) -> Any:
        outer, rec.group = rec.group, ("rule", info, i)
        try:
            return rule(g, *saved, **kw)
        finally:
            rec.group, rec.mark = outer, len(rec.steps)

    if getattr(rule, "fills", False):
        traced_rule.fills = True
    return traced_rule


# -- the program ----------------------------------------------------------------------------------------
class Program:
    """One recorded call: a Python function of the input arrays, and how to put its results back."""

    def __init__(self, key: tuple, why: str, source: str, run: Callable, writes: list, results: Any,
                 warned: list, first_seconds: float, steps: int) -> None:
        self.key, self.why, self.source, self.run = key, why, source, run
        self.writes, self.results, self.warned = writes, results, warned
        self.first_seconds, self.steps = first_seconds, steps
        self.calls = 0


class Compiled:
    """A step function that records itself once per kind of input and then replays. See ``tk.compile``."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "step")
        self.__doc__ = getattr(fn, "__doc__", None)
        self.programs: dict[tuple, Program] = {}
        self.history: list[Program] = []
        self.last: Program | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        inputs = Inputs(self.fn, args, kwargs)
        program = self.programs.get(inputs.frozen)
        if program is None:
            return self._record(inputs, args, kwargs)
        self.last = program
        program.calls += 1
        cells = inputs.cells
        outs = program.run(*[cells[i].get() for i in program.takes])
        for i, slot in program.writes:
            cells[i].set(outs[slot])
        for g, (entries, slots, meta) in zip(inputs.grads, program.grads):
            values = iter(slots)
            g._arrays = {tid: outs[next(values)] if value is None else value for tid, value in entries}
            g.leaves, g._owned, g._clean, g._partial, g._why = meta[0], set(meta[1]), set(meta[2]), set(meta[3]), dict(meta[4])
            g._ran = None
        for message, category in program.warned:
            warnings.warn(message, category, stacklevel=2)
        ids = {old: t.id for old, t in zip(program.results[1], inputs.arg_tensors)}
        return _build(program.results[0], outs, ids, inputs.arg_tensors)

    # -- recording -------------------------------------------------------------------------------------
    def _record(self, inputs: Inputs, args: tuple, kwargs: dict) -> Any:
        import time
        start = time.perf_counter()
        rec = Recorder(self.__name__)
        cells = inputs.cells
        first: dict[int, Tracer] = {}
        tracers = []
        for i, cell in enumerate(cells):
            value = cell.get()
            t = first.get(inputs.alias[i])
            if t is None:
                t = first[i] = rec.slot(value, "input")
            tracers.append(t)
            cell.set(t)
        warned: list = []
        collecting = gc.isenabled()
        gc.disable()  # a recording makes many small objects and frees none: the collector would walk them all, again and again
        try:
            with warnings.catch_warnings(record=True) as caught, _Patches(rec, inputs):
                warnings.simplefilter("always")
                result = self.fn(*args, **kwargs)
            warned = [(str(w.message), w.category) for w in caught]
        finally:
            ends = [cell.get() for cell in cells]
            for cell, end in zip(cells, ends):
                cell.set(end.a if type(end) is Tracer else end)
            grads_after = [_grads_state(g) for g in inputs.grads]
            _release_state(inputs)
            if collecting:
                gc.enable()
        for message, category in warned:
            warnings.warn(message, category, stacklevel=2)
        writes = []
        for i, (t, end) in enumerate(zip(tracers, ends)):
            if type(end) is Tracer and end is not t:
                writes.append((i, end.slot))
        arg_ids = [t.id for t in inputs.arg_tensors]
        template, outputs = _template(result, rec, arg_ids, inputs.arg_tensors)
        grad_slots = [slot for state in grads_after for slot in state[1]]
        needed = [slot for _, slot in writes] + outputs + grad_slots
        gc.disable()
        try:
            source, run, nsteps = _generate(rec, tracers, needed, self.__name__, inputs, len(self.history) + 1)
        finally:
            if collecting:
                gc.enable()
        slot_of = {slot: n for n, slot in enumerate(dict.fromkeys(needed))}
        program = Program(inputs.frozen, self._why(inputs.frozen), source, run,
                          [(i, slot_of[s]) for i, s in writes], (_renumber(template, slot_of), arg_ids),
                          warned, time.perf_counter() - start, nsteps)
        program.takes = [i for i, a in enumerate(inputs.alias) if a == i]
        program.grads = [(entries, [slot_of[s] for s in slots], meta) for entries, slots, meta in grads_after]
        self.programs[inputs.frozen] = program
        self.history.append(program)
        self.last = program
        return _unwrap_result(result)

    def _why(self, key: tuple) -> str:
        if not self.history:
            return "the first call"
        before = dict((k[0], k[1:]) for k in self.history[-1].key)
        now = dict((k[0], k[1:]) for k in key)
        for name, value in now.items():
            if name not in before:
                return f"{_what(name)} is new"
            if before[name] != value:
                return f"{_what(name)} changed: {_short(before[name])} -> {_short(value)}"
        gone = [_what(name) for name in before if name not in now]
        return f"{gone[0]} is gone" if gone else "its inputs changed"

    # -- what it holds ----------------------------------------------------------------------------------
    @property
    def source(self) -> str:
        """The Python source of the program the last call ran (or recorded)."""
        if self.last is None:
            return f"# {self.__name__} has not been called yet: the first call records its program"
        return self.last.source

    def __repr__(self) -> str:
        n = len(self.history)
        lines = [f"<tk.compile of {self.__name__}: {n} program{'s' if n != 1 else ''}"]
        for i, p in enumerate(self.history, 1):
            lines.append(f"  #{i}: {p.steps} array calls, recorded because of {p.why} "
                         f"(record + build {p.first_seconds * 1e3:.1f} ms), replayed {p.calls} times")
        return "\n".join(lines) + ">"


def _short(value: Any) -> str:
    if isinstance(value, tuple) and len(value) == 1 and isinstance(value[0], frozenset):
        return f"{len(value[0])} of them"
    if isinstance(value, tuple) and value[:1] == ("array",):  # a tensor: its shape, dtype, tape and device
        _, shape, dtype, *rest = value
        tape = "no" if not rest or rest[0] is type(None) else rest[0].__name__
        more = "" if not rest else f", {tape} tape, on {'/'.join(map(str, rest[1]))}"
        return f"{dtype_name(dtype)} {tuple(shape)}{more}"
    if isinstance(value, tuple) and len(value) == 1 and isinstance(value[0], tuple) and value[0][:1] == ("array",):
        _, shape, dtype = value[0]
        return f"{dtype_name(dtype)} {tuple(shape)}"
    text = repr(value[0] if isinstance(value, tuple) and len(value) == 1 else value)
    return text if len(text) <= 80 else text[:77] + "..."


def _grads_state(g: Gradients) -> tuple:
    """What a recording left in gradient buffers made outside it, with their real arrays put back:
    the entries (tid, None for a slot, or the value), their slots, and the bookkeeping."""
    entries, slots = [], []
    for tid, value in list(g._arrays.items()):
        if type(value) is Tracer:
            entries.append((tid, None))
            slots.append(value.slot)
            g._arrays[tid] = value.a
        else:
            entries.append((tid, value))
    return entries, slots, (g.leaves, frozenset(g._owned), frozenset(g._clean), frozenset(g._partial), dict(g._why))


def _release_state(inputs: Inputs) -> None:
    """Optimizer state made while recording holds tracers: give it its real arrays."""
    for opt in inputs.optimizers:
        for p, state in opt._state.values():
            if type(p.data) is Tracer:
                p.data = p.data.a
            for k, v in list(state.items()):
                if type(v) is Tracer:
                    state[k] = v.a


# -- results ---------------------------------------------------------------------------------------------
def _template(value: Any, rec: Recorder, arg_ids: list, arg_tensors: list) -> tuple[Any, list[int]]:
    """The structure of ``fn``'s result with its arrays as slots, and the slots it needs."""
    outputs: list[int] = []

    def walk(v: Any) -> Any:
        if type(v) is Tracer:
            outputs.append(v.slot)
            return ("slot", v.slot)
        if isinstance(v, Tensor):
            if any(v is t for t in arg_tensors):
                return ("arg", next(i for i, t in enumerate(arg_tensors) if t is v))
            data = v.data
            if type(data) is not Tracer:
                return ("value", v)
            outputs.append(data.slot)
            return ("tensor", data.slot, v.id, v.device, v.name)
        if isinstance(v, Gradients):
            entries = []
            for tid, arr in v._arrays.items():
                if type(arr) is Tracer:
                    outputs.append(arr.slot)
                    entries.append((tid, ("slot", arr.slot)))
                else:
                    entries.append((tid, ("value", arr)))
            return ("grads", entries, v.leaves, dict(v._why), set(v._partial))
        if isinstance(v, (list, tuple)):
            return ("seq", type(v), [walk(x) for x in v])
        if isinstance(v, dict):
            return ("dict", [(k, walk(x)) for k, x in v.items()])
        return ("value", v)

    return walk(value), outputs


def _renumber(template: Any, slot_of: dict) -> Any:
    kind = template[0]
    if kind == "slot":
        return ("slot", slot_of[template[1]])
    if kind == "tensor":
        return ("tensor", slot_of[template[1]]) + template[2:]
    if kind == "grads":
        entries = [(tid, _renumber(e, slot_of)) for tid, e in template[1]]
        return ("grads", entries) + template[2:]
    if kind == "seq":
        return ("seq", template[1], [_renumber(t, slot_of) for t in template[2]])
    if kind == "dict":
        return ("dict", [(k, _renumber(t, slot_of)) for k, t in template[1]])
    return template


def _build(template: Any, outs: tuple, ids: dict, arg_tensors: list) -> Any:
    """The result of a replayed call from its template: fresh tensors and gradients for its arrays."""
    made: dict[int, int] = {}
    todo: list = []

    def walk(t: Any) -> Any:
        kind = t[0]
        if kind == "slot":
            return outs[t[1]]
        if kind == "arg":
            return arg_tensors[t[1]]
        if kind == "tensor":
            tensor = Tensor(outs[t[1]], t[3], name=t[4])
            made[t[2]] = tensor.id
            return tensor
        if kind == "seq":
            items = [walk(x) for x in t[2]]
            return t[1](items) if t[1] in (list, tuple) else t[1](*items)
        if kind == "dict":
            return {k: walk(x) for k, x in t[1]}
        if kind == "grads":
            g = Gradients()
            todo.append((g, t))
            return g
        return t[1]

    result = walk(template)
    for g, (_, entries, leaves, why, partial) in todo:  # after the tensors: their new ids key the entries
        def key(tid: int) -> int:
            return ids.get(tid, made.get(tid, tid))
        g._arrays = {key(tid): outs[e[1]] if e[0] == "slot" else e[1] for tid, e in entries}
        g._owned = set(g._arrays)
        g.leaves = None if leaves is None else frozenset(key(tid) for tid in leaves)
        g._why = {key(tid): text for tid, text in why.items()}
        g._partial = {key(tid) for tid in partial}
    return result


def _unwrap_result(value: Any) -> Any:
    """The first call's result, with the real arrays in place of tracers."""
    if type(value) is Tracer:
        return value.a
    if isinstance(value, Tensor):
        if type(value.data) is Tracer:
            value.data = value.data.a
        return value
    if isinstance(value, Gradients):
        for tid, arr in list(value._arrays.items()):
            if type(arr) is Tracer:
                value._arrays[tid] = arr.a
        return value
    if isinstance(value, (list, tuple)):
        items = [_unwrap_result(v) for v in value]
        return type(value)(items) if type(value) in (list, tuple) else type(value)(*items)
    if isinstance(value, dict):
        return {k: _unwrap_result(v) for k, v in value.items()}
    return value


# -- the source -----------------------------------------------------------------------------------------
_IDENT = re.compile(r"[^0-9a-zA-Z_]+")
_RESERVED = {"np", "xp", "asarray", "copy_of"}


def _generate(rec: Recorder, tracers: list, needed: list, fn_name: str, inputs: Inputs, number: int) -> tuple:
    """The program as Python source, compiled: ``run(*inputs) -> (needed values...)``."""
    # keep the steps whose results are used (or that change something); drop the rest
    live = set(needed)
    kept = []
    for step in reversed(rec.steps):
        if step.effect or step.out in live:
            kept.append(step)
            live.update(_slots(step.args))
            live.update(_slots(step.kwargs))
            if step.effect and step.out is not None:
                live.add(step.out)
    kept.reverse()
    names = _names_of(rec, inputs, tracers)
    lines = []
    params = list(dict.fromkeys(names[t.slot] for t in tracers))
    consts = [s for s in sorted(live) if rec.kinds[s] == "const"]
    mutated = {s.out for s in kept if s.effect and s.out is not None} | {
        s.args[0].slot for s in kept if s.effect and s.args and type(s.args[0]) is _Ref}
    for step in reversed(kept):  # what a written array may be a view of may be written too (a copy too many is harmless)
        if not step.effect and step.out in mutated:
            mutated.update(_slots(step.args))
    for s in consts:
        rec.globals[f"_{names[s]}"] = rec.values[s]
        if s in mutated:
            lines.append(f"{names[s]} = copy_of(_{names[s]})  # a constant this program writes into: a fresh copy")
        else:
            rec.globals[names[s]] = rec.values[s]
    tensors = {info[3]: names[slot] for slot, info in rec.info.items()}
    for cell, t in zip(inputs.cells, tracers):
        if isinstance(cell.obj, Tensor):
            tensors.setdefault(cell.obj.id, names[t.slot])
    body = _body(kept, rec, names, tensors)
    big = {names[slot] for slot, value in enumerate(rec.values) if _is_array(value)
           and getattr(value, "size", 0) * getattr(value.dtype, "itemsize", 8) >= BIG}
    outs = [names[s] for s in dict.fromkeys(needed)]
    main = f"{_ident(fn_name)}_program_{number}"
    devices = ", ".join(f"{name} = {rec.globals[name]!r}" for name in rec.globals if name.startswith("dev"))
    text = [f"# {fn_name}, recorded by tk.compile: {len(kept)} array calls; {devices}"]
    if len(kept) <= PART:
        text += _function(main, params, lines + _freeing(body, kept, names, big, set(outs)), outs)
    else:  # a long program in parts: Python's tools (tracebacks, tracemalloc) slow down on huge functions
        text += _parts(main, params, lines, body, kept, names, outs, big)
    source = "\n".join(text) + "\n"
    space = dict(rec.globals)
    exec(builtins.compile(source, f"<tk.compile {fn_name} #{number}>", "exec"), space)
    return source, space[main], len(kept)


BIG = 1 << 16  # bytes from which an array is let go (``del``) right after its last use, as eager code would


def _freeing(entries: list, kept: list[Step], names: dict, big: set, keep: set) -> list[str]:
    """The lines of ``entries``, each big array let go after the last line that uses it: a program
    that held every intermediate to its end would need more memory than the eager step it replays,
    and fresh memory is slow (the operating system hands it out page by page)."""
    last: dict[str, int] = {}
    for j, (i, _) in enumerate(entries):
        if i is not None:
            step = kept[i]
            for slot in [*_slots(step.args), *_slots(step.kwargs), step.out]:
                if slot is not None and names[slot] in big:
                    last[names[slot]] = j
    ends: dict[int, list[str]] = {}
    for name, j in last.items():
        if name not in keep:
            ends.setdefault(j, []).append(name)
    lines = []
    for j, (_, line) in enumerate(entries):
        lines.append(line)
        if j in ends:
            lines.append(f"del {', '.join(sorted(ends[j]))}")
    return lines


PART = 200  # array calls per function of a long program (Python looks up line numbers from a function's start)


def _function(name: str, params: list[str], lines: list[str], outs: list[str]) -> list[str]:
    ret = f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})"
    return [f"def {name}({', '.join(params)}):"] + ["    " + line if line else "" for line in lines] + [ret]


def _parts(main: str, params: list[str], prelude: list[str], body: list, kept: list[Step], names: dict,
           outs: list[str], big: set) -> list[str]:
    """A long program as functions of at most ``PART`` array calls each, and one that calls them
    in turn, passing on the values that later parts read."""
    chunks: list[list] = [[]]
    count = 0
    for entry in body:
        if entry[0] is not None:
            if count == PART:
                chunks.append([])
                count = 0
            count += 1
        chunks[-1].append(entry)
    reads: list[set] = []
    writes: list[set] = []
    for chunk in chunks:
        r: set = set()
        w: set = set()
        for i, _ in chunk:
            if i is None:
                continue
            step = kept[i]
            r.update(names[s] for s in _slots(step.args))
            r.update(names[s] for s in _slots(step.kwargs))
            if step.out is not None:
                w.add(names[step.out])
        reads.append(r)
        writes.append(w)
    available = set(params) | {line.split(" = ")[0] for line in prelude}
    last_read = dict.fromkeys(outs, len(chunks))  # the last part that reads each value (the end for results)
    for k, r in enumerate(reads):
        for name in r:
            if last_read.get(name, -1) < k:
                last_read[name] = k
    text: list[str] = []
    calls: list[str] = []
    for k, chunk in enumerate(chunks):
        args = sorted((reads[k] | writes[k]) & available)
        results = sorted(name for name in writes[k] if last_read.get(name, -1) > k)
        text += _function(f"{main}_part{k + 1}", args, _freeing(chunk, kept, names, big, set(results)), results)
        text.append("")
        call = f"{main}_part{k + 1}({', '.join(args)})"
        calls.append(f"{', '.join(results)}{',' if len(results) == 1 else ''} = {call}" if results else call)
        available |= writes[k]
    return text + _function(main, params, prelude + calls, outs)


def _slots(template: Any) -> Iterator[int]:
    t = type(template)
    if t is _Ref:
        yield template.slot
    elif t is tuple or t is list:
        for v in template:
            yield from _slots(v)
    elif t is dict:
        for v in template.values():
            yield from _slots(v)
    elif t is slice:
        for v in (template.start, template.stop, template.step):
            yield from _slots(v)


def _ident(text: str) -> str:
    name = _IDENT.sub("_", str(text)).strip("_") or "v"
    if name[0].isdigit():
        name = "v" + name
    return name + "_" if keyword.iskeyword(name) or name in _RESERVED else name


def _names_of(rec: Recorder, inputs: Inputs, tracers: list) -> dict[int, str]:
    """A variable name for every slot: the tensor's name where it has one."""
    taken = set(rec.globals)
    names: dict[int, str] = {}

    def give(slot: int, wanted: str) -> None:
        if slot in names:
            return
        name, n = _ident(wanted), 1
        base = name
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name)
        names[slot] = name

    tensor_of = {}
    for t in inputs.arg_tensors:
        tensor_of.setdefault(id(t), t)
    for cell, t in zip(inputs.cells, tracers):
        obj = cell.obj
        if isinstance(obj, Tensor):
            given = obj.name
            what = _what(cell.what)
            if given is None and what.startswith("parameter "):
                given = what[len("parameter "):]
            give(t.slot, given or what.replace("argument ", ""))
        else:
            what = _what(cell.what)
            if what.startswith("gradient of ") and isinstance(cell.key, int):
                what = "grad_" + inputs._pname.get(cell.key, label(cell.key))
            give(t.slot, what.replace("'s ", "_").replace(" of ", "_").lower())
    for slot, info in rec.info.items():
        given = name_of(info[3])
        give(slot, given or f"t{info[3]}")
    for slot, tid in rec.grad_of.items():
        given = name_of(tid) or inputs._pname.get(tid)
        give(slot, f"grad_{given}" if given else f"grad_t{tid}")
    for slot, kind in enumerate(rec.kinds):
        give(slot, ("c" if kind == "const" else "a") + str(slot))
    return names


def _render(v: Any, rec: Recorder, names: dict) -> str:
    t = type(v)
    if t is _Ref:
        return names[v.slot]
    if t is tuple:
        inner = ", ".join(_render(x, rec, names) for x in v)
        return f"({inner}{',' if len(v) == 1 else ''})"
    if t is list:
        return "[" + ", ".join(_render(x, rec, names) for x in v) + "]"
    if t is slice:
        return f"slice({_render(v.start, rec, names)}, {_render(v.stop, rec, names)}, {_render(v.step, rec, names)})"
    if v is None or v is Ellipsis or t in (bool, int, str):
        return "..." if v is Ellipsis else repr(v)
    if t is float and math.isfinite(v):
        return repr(v)
    if isinstance(v, type) and getattr(v, "__module__", "") == "numpy":
        return f"np.{v.__name__}"
    if isinstance(v, np.dtype):
        return f"np.{v.name}"
    return rec.bind(v, "k")


def _index(v: Any, rec: Recorder, names: dict) -> str:
    def one(k: Any) -> str:
        if type(k) is slice:
            parts = ["" if p is None else _render(p, rec, names) for p in (k.start, k.stop, k.step)]
            return ":".join(parts[:2]) + (f":{parts[2]}" if parts[2] else "")
        return "None" if k is None else _render(k, rec, names)

    if type(v) is tuple:
        return ", ".join(one(k) for k in v) if v else "()"
    return one(v)


def _comment(group: Any, called: Callable[[int], str]) -> str:
    if group is None:
        return ""
    kind = group[0]
    if kind == "update":
        return f"  # {group[1]} update"
    rid, name, ids, out = group[1]
    record = f"#{rid} " if rid is not None else ""
    args = ", ".join(called(i) if i is not None else "const" for i in ids)
    text = f"{record}{name}({args}) -> {called(out)}"
    if kind == "rule":
        return f"  # {text}: rule for {called(ids[group[2]]) if ids[group[2]] is not None else 'const'}"
    return f"  # {text}"


def _phases(steps: list[Step]) -> list[str]:
    """forward, backward or update for each step: a step of no op, rule or update (the engine's sums,
    the seed) belongs with the grouped step before it, or with the backward that follows the forward."""
    kinds = {"op": "forward", "rule": "backward", "update": "update"}
    grouped = [kinds[s.group[0]] if s.group else None for s in steps]
    after, nxt = [None] * len(grouped), None
    for i in range(len(grouped) - 1, -1, -1):  # the phase of the next grouped step, for each step
        after[i] = nxt
        nxt = grouped[i] or nxt
    out, before = [], "forward"
    for i, phase in enumerate(grouped):
        if phase is None:
            phase = "backward" if before == "forward" and after[i] == "backward" else before
        out.append(phase)
        before = phase
    return out


def _body(steps: list[Step], rec: Recorder, names: dict, tensors: dict) -> list[tuple[int | None, str]]:
    """The lines of the program: (the index of the step, or None for a heading, the line)."""
    lines: list[tuple[int | None, str]] = []

    def called(tid: int) -> str:
        return tensors.get(tid) or label(tid)

    phase = None
    phases = _phases(steps)
    for i, step in enumerate(steps):
        now = phases[i]
        if now != phase:
            title = {"forward": "forward: the ops, in the order they ran",
                     "backward": "backward: the rules, newest record first, and the sums of gradients",
                     "update": "update: the optimizer's step"}[now]
            lines += ([(None, "")] if lines else []) + [(None, f"# {title}")]
            phase = now
        args = [_render(a, rec, names) for a in step.args]
        kwargs = [f"{k}={_render(v, rec, names)}" for k, v in step.kwargs.items()]
        out = names[step.out] if step.out is not None else None
        k = step.kind
        if k == "binop":
            expr = f"{args[0]} {step.head} {args[1]}"
        elif k == "unop":
            expr = f"abs({args[0]})" if step.head == "abs" else f"{step.head}{args[0]}"
        elif k == "iop":
            expr = None
            line = f"{args[0]} {step.head}= {args[1]}"
        elif k == "getitem":
            expr = f"{args[0]}[{_index(step.args[1], rec, names)}]"
        elif k == "setitem":
            expr = None
            line = f"{args[0]}[{_index(step.args[1], rec, names)}] = {args[2]}"
        elif k == "getattr":
            expr = f"{args[0]}.{step.head}"
        elif k == "method":
            expr = f"{args[0]}.{step.head}({', '.join(args[1:] + kwargs)})"
        else:
            expr = f"{step.head}({', '.join(args + kwargs)})"
        if expr is not None:
            if step.asarray:
                expr = f"asarray({expr})"
            line = f"{out} = {expr}" if out is not None else expr
        comment = _comment(step.group, called)
        nxt = steps[i + 1].group if i + 1 < len(steps) else None
        if comment and nxt is step.group:  # one comment per op or rule, on its last line
            comment = ""
        lines.append((i, line + comment))
    return lines


def compile(fn: Callable) -> Compiled:  # noqa: A001  (the name the issue asks for: tk.compile)
    """``fn`` as a compiled step: the first call runs it eagerly and records its array calls (the
    forward, the backward rules in the order they ran, an optimizer's update); later calls with
    inputs of the same shapes, dtypes and devices run the recorded program on the new arrays,
    without Tensors, records or Gradients for anything in between. Inputs are the tensors among
    the arguments and the parameters and optimizer state that ``fn`` reaches through its
    arguments, its closure or the globals it names. ``step.source`` is the program;
    ``repr(step)`` says how many programs it holds and why each was recorded."""
    if not callable(fn):
        raise CompileError(f"tk.compile takes a function, got a {type(fn).__name__}")
    return Compiled(fn)
