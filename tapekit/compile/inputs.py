"""Finding the inputs of one call: the places (``Cell``s) that hold its arrays, found in the
arguments, in what ``fn`` reaches by name (its closure, the globals it names, ``self``), in the
parameters of the modules and the state of the optimizers found there, and in gradient buffers
made outside the step. Along the way it writes the call's key: everything a program is fixed to
(shapes, dtypes, devices, tape policies, Python numbers, modules' modes, optimizers' settings,
which cells hold the same array)."""

from __future__ import annotations

import dataclasses
import dis
import enum
import functools
import inspect
import numbers
import site
import sys
import sysconfig
import types
from operator import itemgetter
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ..devices import Device
from ..gradients import Gradients
from ..ids import label
from ..nn import module as _module
from ..nn.module import Module
from ..optim import Optimizer
from ..tensor import Tensor
from .tracer import is_array


def _per_object(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` of a module or a class, computed once for each (by identity: some classes cannot be hashed)."""
    found: dict[int, tuple[Any, Any]] = {}

    def cached(obj: Any) -> Any:
        kept = found.get(id(obj))
        if kept is None or kept[0] is not obj:
            kept = found[id(obj)] = (obj, fn(obj))
        return kept[1]

    return cached


class Cell(tuple):
    """A place that holds an input: ``obj.attr`` (a tensor's storage) or ``obj[key]`` (optimizer
    state), and ``what`` it is, in words: ``Cell((obj, key, attr, what))``. A tuple, since every
    call makes one per input, and a tuple is made in two thirds of the time of an object with an
    ``__init__`` (measured: 214 ns against 324)."""

    __slots__ = ()
    obj = property(itemgetter(0))
    key = property(itemgetter(1))
    attr = property(itemgetter(2))
    what = property(itemgetter(3))

    def get(self) -> Any:
        obj, key, attr, _ = self
        return getattr(obj, key) if attr else obj[key]

    def set(self, value: Any) -> None:
        obj, key, attr, _ = self
        if attr:
            setattr(obj, key, value)
        else:
            obj[key] = value


def _describe(value: Any) -> tuple:
    if is_array(value):
        return ("array", tuple(value.shape), value.dtype)
    return (type(value).__name__,)


def in_words(what: Any) -> str:
    """An input's description in words: ``argument x[0]`` for the path ``("arg", ("x", 0))``."""
    if isinstance(what, tuple) and what[:1] == ("arg",):
        path = what[1]
        return "argument " + str(path[0]) + "".join(f".{p}" if type(p) is _Field else f"[{p!r}]" for p in path[1:])
    return str(what)


class _Field(str):
    """A dataclass field's name in an argument's path (``argument batch.x``, where a dict's key is ``[k]``)."""


MODULE, OPTIMIZER = "<module>", "<optimizer>"  # the marks of a model's and an optimizer's keys (no type is named so)


class Inputs:
    """The inputs of one call, found from what its step function reaches (``reach``): the cells
    that hold arrays, the devices, and the key of the call (everything a program is fixed to:
    shapes, dtypes, devices, policies, settings)."""

    def __init__(self, reach: "Reach", args: tuple, kwargs: dict) -> None:
        self.cells: list[Cell] = []
        self._ids: list[int | None] = []  # cell -> id of the array it holds (None: not an array)
        self.arg_tensors: list[Tensor] = []  # in the order they were found
        self.devices: dict[int, Device] = {}
        self.optimizers: list[Optimizer] = []
        self.modules: list[tuple[str, Module]] = []  # (the name it was found by, the module)
        self.grads: list[Gradients] = []
        self.key: list[tuple] = []
        self._seen: set[tuple] = set()
        self._tensors: set[int] = set()  # ids of the tensors whose storage is a cell already
        self._places: dict[int, tuple] = {}  # id of a device -> its place
        self._objects: set[int] = set()
        self.param_names: dict[int, str] = {}
        self.held: list[Any] = []  # what the key names by id: its program keeps them, so no other takes their ids
        self._read = reach.read  # the names the step's code reads (a plain object's attributes among them)
        self._read_keys = reach.keys  # the strings it holds (a dict's keys it reads among them)
        self._named = reach.named
        self.new_code = any(fn.__code__ is not code for fn, code in reach.followed)  # edited in place (autoreload)
        self.unfollowed: list[Any] = []  # models and functions among the arguments whose code reach has not read
        self._roots = reach.roots
        for path, value in reach.arguments(args, kwargs):
            self._walk_arg(path, value)
        for name, obj in reach.captured():
            if _is_code(obj) and id(obj) not in reach.code:
                self.new_code = True  # another function under the name: what it reads is found again
            self._walk_captured(name, obj, 0)
        self.key.append(("the code of the functions it calls", reach.code_text))
        if _module._default_device is not None:
            self.devices.setdefault(id(_module._default_device), _module._default_device)
        # aliasing: which cells hold the same array
        firsts: dict[int, int] = {}
        self.alias = tuple(i if v is None else firsts.setdefault(v, i) for i, v in enumerate(self._ids))
        self.key.append(("aliasing", self.alias))
        self.frozen = tuple(self.key)

    def _cell(self, obj: Any, key: Any, attr: bool, what: Any) -> None:
        mark = (id(obj), key)
        if mark in self._seen:
            return
        self._seen.add(mark)
        place = Cell((obj, key, attr, what))
        value = place.get()
        self.cells.append(place)
        self._ids.append(id(value) if is_array(value) else None)
        self.key.append((what, _describe(value)))

    def holds(self, t: Tensor) -> bool:
        """Whether the storage of tensor ``t`` is an input of the call."""
        return id(t) in self._tensors

    def _tensor(self, t: Tensor, what: Any) -> None:
        """A tensor's storage as an input (the hot path of every call: kept short, and a device's
        place looked up once per call, not per tensor)."""
        if id(t) in self._tensors:
            return
        self._tensors.add(id(t))
        device = t.device
        place = self._places.get(id(device))
        if place is None:
            self.devices[id(device)] = device
            place = self._places[id(device)] = device.place
        data = t.data
        self.cells.append(Cell((t, "data", True, what)))
        self._ids.append(id(data))
        self.key.append((what, "array", data.shape, data.dtype, type(t._tape), place))

    def _walk_arg(self, path: tuple, value: Any) -> None:
        what = ("arg", path)  # made into words only when a message needs them
        if (_is_code(value) or isinstance(value, Module)) and _root(value) not in self._roots:
            self.unfollowed.append(value)  # step(model, x), step(loss, x): what its code reads
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
            self._object(in_words(what), value)
        elif isinstance(value, _PLAIN):
            self.key.append((what, *_plain_key(value)))
        elif isinstance(value, Gradients):
            self._gradients(in_words(what), value)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):  # a batch: its fields, as a dict's
            fields = tuple(field.name for field in dataclasses.fields(value))
            self.key.append((what, type(value).__name__, fields))
            for name in fields:
                self._walk_arg(path + (_Field(name),), getattr(value, name))
        elif isinstance(value, types.MethodType):  # obj.method: a new object at each access, of one function
            self.key.append((what, f"method {value.__qualname__} of", id(value.__self__), id(value.__func__)))
            self.held.append(value)
            self._walk_arg(path + (_Field("__self__"),), value.__self__)  # a model's forward: its parameters
        elif isinstance(value, functools.partial):  # made afresh at each call: its function and its arguments
            self.key.append((what, _code_text(value.func), id(value.func)))
            self.held.append(value)
            self._walk_arg(path + (_Field("args"),), value.args)
            self._walk_arg(path + (_Field("keywords"),), value.keywords)
        else:
            self.key.append((what, f"{type(value).__name__} at", id(value)))
            self.held.append(value)
            if _plain_object(value) or _slots(type(value)):  # step(x, hp): the attributes it reads, as of a global's
                self._walk_attributes(in_words(what), value, 0)

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
        """What ``fn`` reaches by name: a module, an optimizer, a tensor, gradient buffers; a Python
        number (or string, or None), which the program holds as a constant, so a new value records a
        new program, as an argument's does; an array, also a constant: binding the name to another
        array records again; a function or a class, by identity: binding the name to another records
        again. And, ``_DEEPEST`` levels down, what the code reads inside: the attributes it names of
        an object, a class or a module of the user's (``hp.lr``, ``Config.lr``, ``settings.lr``), the
        values under the keys it names of a dict, the items of a short list or tuple."""
        kind = type(obj)
        if _is_code(obj):
            self._code(name, obj, depth)
        elif kind is types.ModuleType:
            if depth < _DEEPEST and _users_namespace(obj):  # not numpy's, tapekit's or a library's
                self._walk_attributes(name, obj, depth)
        elif (value := _value_key(obj)) is not None:
            self.key.append((name, *value))
        elif is_array(obj):  # a constant of the program, copied as recorded: another array records again
            self.key.append((name, "array at", id(obj)))
            self.held.append(obj)
        elif isinstance(obj, Gradients):
            self._gradients(name, obj)
        elif isinstance(obj, (Module, Optimizer, Device)):
            self._object(name, obj)
        elif isinstance(obj, Tensor):
            self._tensor(obj, name)
        elif depth < _DEEPEST and isinstance(obj, (list, tuple, dict)) and obj:
            self._walk_items(name, obj, depth)
        elif depth < _DEEPEST and (_plain_object(obj) or _slots(type(obj))):
            self._walk_attributes(name, obj, depth)

    def _code(self, name: str, obj: Any, depth: int) -> None:
        """A function or a class, by identity; a function's code too (autoreload replaces it in
        place); a bound method's object, walked (a model's parameters, for ``model.forward``); the
        attributes the code names of a user's class (a namespace of settings)."""
        self.key.append((name, _code_text(obj), id(obj)))
        self.held.append(obj)
        if type(obj) is types.FunctionType:
            self.key.append((f"{name} (its code)", "code at", id(obj.__code__)))
            self.held.append(obj.__code__)
        elif type(obj) is types.MethodType and depth < _DEEPEST:
            self._walk_captured(f"{name}.__self__", obj.__self__, depth + 1)
        if isinstance(obj, type) and depth < _DEEPEST and _users_namespace(obj):
            self._walk_attributes(name, obj, depth)

    def _walk_attributes(self, name: str, obj: Any, depth: int) -> None:
        """The attributes of ``obj`` that the code names (``hp.lr``, ``holder.model``), walked; looked
        up by name where ``obj`` has more of them (a module of 500 names) than the code names."""
        attrs = vars(obj) if hasattr(obj, "__dict__") else _slot_values(obj)
        names = [a for a in attrs if a in self._read] if len(attrs) <= len(self._read) else \
            [a for a in self._read if a in attrs]
        for attr in names:
            self._walk_captured(f"{name}.{attr}", attrs[attr], depth + 1)

    def _walk_items(self, name: str, obj: Any, depth: int) -> None:
        """A list, tuple or dict reached by name: all its items walked where the first is a tensor,
        module, optimizer, gradients or device; of another dict, the values under the keys the code
        names (``config["lr"]``), or all of them where it has at most ``_SHORT`` and the code iterates
        a dict's items or values (loss weights); of another list or tuple, its length, and its items
        where it has at most ``_SHORT`` (``betas[0]``): a longer one is data, a constant of the
        program, as an array is."""
        if isinstance(obj, dict):
            iterated = len(obj) <= _SHORT and not self._read.isdisjoint(("items", "values"))  # for k, w in d.items()
            if iterated or isinstance(next(iter(obj.values())), _FOUND):
                for k, v in obj.items():
                    self._walk_captured(f"{name}[{k!r}]", v, depth + 1)
            else:
                for k in self._read_keys:  # few: a dict of data (a vocabulary) is not walked
                    if k in obj:
                        self._walk_captured(f"{name}[{k!r}]", obj[k], depth + 1)
        else:
            self.key.append((name, type(obj).__name__, len(obj)))  # len(data) may be a number of the program
            if isinstance(obj[0], _FOUND) or len(obj) <= _SHORT:
                for i, v in enumerate(obj):
                    self._walk_captured(f"{name}[{i}]", v, depth + 1)

    def _object(self, name: str, obj: Any) -> None:
        if id(obj) in self._objects:
            return
        self._objects.add(id(obj))
        if isinstance(obj, Device):
            self.devices.setdefault(id(obj), obj)
        elif isinstance(obj, Module):
            origin = obj._origin()
            self.modules.append((name, origin))
            self.key.append((f"{name} (a {type(obj).__name__})", MODULE, id(origin), id(obj),
                             tuple((type(m).__name__, _settings(m, self.held, self._named)) for m in _modules_of(origin))))
            for pname, p in origin.named_parameters():
                self.param_names.setdefault(p.id, pname)
                self._tensor(p, f"parameter {pname}")
        elif isinstance(obj, Optimizer):
            self.optimizers.append(obj)
            self.key.append((f"{name} (a {type(obj).__name__})", OPTIMIZER, id(obj),
                             (("", _settings(obj, self.held)),)))
            for pid, (p, state) in obj._state.items():
                pname = self.param_names.get(p.id, label(p.id))
                self._tensor(p, f"parameter {pname}")
                for key in sorted(state):
                    self._cell(state, key, False, f"{type(obj).__name__}'s {key} of {pname}")


_FOUND = (Tensor, Module, Optimizer, Gradients, Device)
_DEEPEST = 3  # how deep a walk looks inside what the step names: settings.optim.betas[0]
_SHORT = 32  # the longest list or tuple of numbers whose items are keyed; a longer one is data
_CODE = frozenset({types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial, np.ufunc,
                   type(np.mean), functools._lru_cache_wrapper, staticmethod, classmethod})  # np.mean: not a ufunc


def _is_code(obj: Any) -> bool:
    """Whether ``obj`` is a function or a class (one with a metaclass too): keyed by identity."""
    return type(obj) in _CODE or isinstance(obj, type)


def _code_text(obj: Any) -> str:
    """A function or a class in a call's key, before its id: ``function loss at``, ``class OwnedTape at``."""
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__
    return f"{'class' if isinstance(obj, type) else 'function'} {name} at"


_PLAIN = (numbers.Number, str, bytes, type(None))  # values a program holds as constants: keyed by value


def _value_key(value: Any) -> tuple | None:
    """A value keyed by what it is, not by identity: a number, a string or None (``_plain_key``); an
    Enum member, by its text (a Flag's combination has no name); a range, a set or a frozenset of
    at most ``_SHORT`` numbers or strings; a slice. None for anything else."""
    kind = type(value)
    if isinstance(value, enum.Enum):
        return kind.__name__, _Text(repr(value))
    if isinstance(value, _PLAIN):
        return _plain_key(value)
    if kind in _BY_CONTENTS and len(value) <= _SHORT and all(isinstance(i, _PLAIN) for i in value):
        return kind.__name__, _Text(repr(sorted(value, key=repr))) if kind is set else value
    if kind is slice:
        return "slice", _Text(repr((value.start, value.stop, value.step)))
    return None


def _plain_key(value: Any) -> tuple:
    """A plain value in a call's key: its type and value; a float (numpy's too, complex ones, and a
    tuple of them) by its text, since 0.0 and -0.0 are equal numbers that compute differently
    (1 / x), and NaN equals nothing."""
    return type(value).__name__, _Text(repr(value)) if isinstance(value, _BY_TEXT) else value


_BY_TEXT = (float, complex, np.floating, np.complexfloating, tuple)
_BY_CONTENTS = (range, set, frozenset)  # compared by their items


def settings_changed(before: tuple, now: tuple) -> str:
    """What changed between two keys of a model or an optimizer (``(MODULE or OPTIMIZER, ids...,
    ((type name, settings) for it and each of its modules))``), in words: each setting, where, and
    its values (``p 0.5 -> 0.25 in its module 2 (a Dropout)``), or the module that is another."""
    if before[:-1] != now[:-1]:
        return "another object"
    kinds_before, kinds_now = [kind for kind, _ in before[-1]], [kind for kind, _ in now[-1]]
    if len(kinds_before) != len(kinds_now):
        return f"it holds {len(kinds_now) - 1} modules, where it held {len(kinds_before) - 1}"
    for i, (was, is_now) in enumerate(zip(kinds_before, kinds_now)):
        if was != is_now:
            return f"its module {i} is a {is_now}, where it was a {was}"
    where: dict[tuple, list[int]] = {}  # (setting, before, now) -> the modules where it changed so
    for i, ((_, old), (_, new)) in enumerate(zip(before[-1], now[-1])):
        old_values, new_values = {k: v for k, *v in old}, {k: v for k, *v in new}
        for k in dict.fromkeys([*old_values, *new_values]):
            if old_values.get(k) != new_values.get(k):
                where.setdefault((k, *_values_text(old_values.get(k), new_values.get(k))), []).append(i)
    count = len(kinds_now)
    parts = []
    for (k, old, new), places in where.items():
        if count == 1:
            at = ""
        elif len(places) == count:
            at = f" in it and its {count - 1} module{'s' if count > 2 else ''}"
        else:
            at = " in " + ", ".join("it" if i == 0 else f"its module {i} (a {kinds_now[i]})" for i in places)
        parts.append(f"{k} {old} -> {new}{at}")
    return "; ".join(parts) or "its settings changed"


def _values_text(old: list | None, new: list | None) -> tuple[str, str]:
    """A setting's values before and after (``_settings``: its type and value, an array's id, or the
    mode), in words; with their types where the values read alike (``int 3 -> int64 3``)."""
    texts = [_value_text(old), _value_text(new)]
    if texts[0] == texts[1] and old is not None and new is not None:
        texts = [f"{old[0]} {texts[0]}", f"{new[0]} {texts[1]}"]
    return texts[0], texts[1]


def _value_text(value: list | None) -> str:
    if value is None:
        return "unset"
    return f"{value[0]} {value[1]:#x}" if str(value[0]).endswith(" at") else str(value[-1])


class _Text(str):
    """A float's text in a key, shown as the number it is (``-0.0``, not ``'-0.0'``)."""

    def __repr__(self) -> str:
        return str(self)


def _settings(obj: Any, held: list, named: frozenset = frozenset()) -> tuple:
    """What a module's or optimizer's public attributes fix in a program (``_setting``), and its
    training mode. Private ones (``_calls``) are its own bookkeeping: not keyed; nor is what is
    inside an attribute that neither a call of it (its forward and the methods that names) nor the
    step's code (``named``) names (a history the training loop keeps)."""
    key: list[tuple] = []
    reads = _class_reads(type(obj))
    for k, v in sorted(vars(obj).items()):
        if not k.startswith("_") and k != "training":  # the mode is below, wherever it is set (train() after eval())
            _setting(key, k, v, held, 0 if k in reads or k in named else _INSIDE)
    for k, v in _class_settings(type(obj), reads, vars(obj)):
        _setting(key, k, v, held, 0)
    return tuple(key) + (("training", getattr(obj, "training", None)),)


def _class_settings(cls: type, reads: Iterable[str], own: dict) -> list[tuple[str, Any]]:
    """The public values a user's module class holds that its methods read and its object does not
    shadow (``scale = 2.0`` in the class body, read as ``self.scale``), by name; not its methods."""
    found = {}
    for klass in reversed(cls.__mro__):
        if _users_namespace(klass):
            found.update((k, v) for k, v in vars(klass).items()
                         if k in reads and k not in own and not k.startswith("_") and not callable(v)
                         and not hasattr(v, "__get__"))
    return sorted(found.items())


_INSIDE = 2  # how deep a model's settings are keyed inside a config object, a dict or a list it reads


def _setting(key: list, name: str, value: Any, held: list, depth: int) -> None:
    """A setting's entries in a key: a number, a string, None or a tuple of them by value; an array
    or a function by identity (kept in ``held``: another records again); and ``_INSIDE`` levels
    inside a config object, a dict or a list (its length, and its items where it has at most
    ``_SHORT``), each entry named by its path (``config.dropout``)."""
    entry = _value_key(value)
    if entry is None and isinstance(value, tuple) and all(isinstance(i, _PLAIN) for i in value):
        entry = _plain_key(value)
    if entry is not None:
        key.append((name, *entry))
    elif is_array(value):
        key.append((name, "array at", id(value)))
        held.append(value)
    elif _is_code(value):  # self.act = np.sin
        key.append((name, _code_text(value), id(value)))
        held.append(value)
    elif depth >= _INSIDE or isinstance(value, _FOUND):
        return
    elif isinstance(value, (list, tuple, dict)):
        key.append((name, type(value).__name__, len(value)))
        if len(value) <= _SHORT:
            for k, v in value.items() if isinstance(value, dict) else enumerate(value):
                _setting(key, f"{name}[{k!r}]", v, held, depth + 1)
    elif _plain_object(value):
        for k, v in sorted(vars(value).items()):
            if not k.startswith("_"):
                _setting(key, f"{name}.{k}", v, held, depth + 1)


@_per_object
def _class_reads(cls: type) -> frozenset:
    """The names and strings a call of an object of ``cls`` reads (its forward or ``__call__``,
    and the methods they name): none for tapekit's own modules and optimizers."""
    code = [fn.__code__ for fn in _methods_called(cls, _ENTRIES)]
    return frozenset(name for c in code for name in (*_names(c), *_strings(c)))


_ENTRIES = ("forward", "__call__")  # what calling a model or an object runs


def _methods_called(cls: type, names: Iterable[str]) -> list[types.FunctionType]:
    """The user's methods of ``cls`` that code naming ``names`` may call, and those they name in
    turn (a model's forward and its helpers, the owner's ``self._loss``); not the others (a loop's
    ``fit``, a ``log`` that reads what the loop changes)."""
    found: dict[str, types.FunctionType] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        fn = None if name in found else _user_method(cls, name)
        if fn is not None:
            found[name] = fn
            todo.extend(_names(fn.__code__))
    return list(found.values())


def _user_method(cls: type, name: str) -> types.FunctionType | None:
    """The function behind ``cls.name`` (a method, a static or class method, a property's getter),
    where it is the user's own."""
    for klass in cls.__mro__:
        member = vars(klass).get(name)
        if member is not None:
            fn = member.fget if isinstance(member, property) else \
                member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
            return fn if isinstance(fn, types.FunctionType) and _users(fn) else None
    return None


@_per_object
def _slots(cls: type) -> tuple[str, ...]:
    """The slots of a user's class without a ``__dict__`` (a dataclass with ``slots=True``)."""
    if not _users_namespace(cls) or "__dict__" in dir(cls):
        return ()
    names = (name for klass in cls.__mro__ for name in _listed(getattr(klass, "__slots__", ())))
    return tuple(dict.fromkeys(name for name in names if name != "__weakref__"))


def _listed(slots: Any) -> tuple[str, ...]:
    return (slots,) if isinstance(slots, str) else tuple(slots)


def _slot_values(obj: Any) -> dict[str, Any]:
    """The attributes a slotted object holds (a slot never set is not one)."""
    values = {}
    for name in _slots(type(obj)):
        try:
            values[name] = getattr(obj, name)
        except AttributeError:
            pass
    return values


def _plain_object(obj: Any) -> bool:
    """Whether ``obj`` is an instance of a class of the user's (a namespace of settings, a holder)."""
    try:
        has_dict = hasattr(obj, "__dict__")
    except Exception:  # a __dict__ property that raises: nothing to walk
        return False
    return has_dict and not isinstance(obj, (type, types.ModuleType, types.FunctionType, types.MethodType,
                                             functools.partial, Tensor))


@_per_object
def _users_namespace(obj: Any) -> bool:
    """Whether a module, or a class's module, is the user's own (a notebook's, a project's), not
    tapekit's or one installed with Python or a package: numpy's are not walked at every call."""
    module = obj if isinstance(obj, types.ModuleType) else sys.modules.get(getattr(obj, "__module__", ""))
    name = getattr(module, "__name__", "")
    file = getattr(module, "__file__", None)
    if name == "__main__":
        return True
    return file is not None and not name.startswith("tapekit") and not file.startswith(_LIBRARIES)


def _modules_of(module: Module) -> Iterator[Module]:
    from ..nn.module import _modules
    return _modules(module)


class Reach:
    """What a step function reaches, found once for every call of it: its signature, which binds
    each call's arguments to their names; its default arguments and those a ``functools.partial``
    binds; the closure cells and global names its code reads (its nested functions' too), and
    those of the functions it calls in turn (``_callees``: a loss defined elsewhere, a model's
    forward, the owner's methods it names); and ``self`` of a bound method, or the object itself
    (``tk.compile(model)``). Each call reads their current values, and finds the reach again where
    a name holds another function or a function's code was edited. Found once, not per call,
    and positional arguments bound by hand (``_by_position``), finding the inputs of W1's step (2
    tensors) takes 15 us a call, not 61 (measured): a fused W1 call took about 200 us."""

    def __init__(self, fn: Callable, passed: tuple = ()) -> None:
        try:
            self.signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            self.signature = None
        params = [] if self.signature is None else list(self.signature.parameters.values())
        self.positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.rest = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
        self.plain = self.signature is not None and not any(
            p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in params)
        self.bound: list[tuple[str, Any]] = [(f"default of {p.name}", p.default) for p in params
                                             if p.default is not p.empty]
        while isinstance(fn, functools.partial):  # what it binds, then the function it calls
            self.bound += [(f"bound argument {i}", v) for i, v in enumerate(fn.args)] + list(fn.keywords.items())
            fn = fn.func
        self.owner = getattr(fn, "__self__", None)
        if self.owner is None and getattr(fn, "__code__", None) is None:  # tk.compile(model): a callable object
            self.owner = fn
        self.passed = passed  # models and functions passed to it, followed as its defaults are
        self.roots = {_root(value): value for value in passed}
        self._follow_all(getattr(fn, "__func__", fn))
        self.read = frozenset(self.names)
        self.code_text = _Text(", ".join(f"{fn.__qualname__} at {id(code):#x}" for fn, code in self.followed))
        self.strings = frozenset(self.keys)  # getattr(self, "scale") names an attribute too
        self.named = self.read | self.strings
        self.keys = tuple(sorted(self.keys))
        # the functions and classes it reaches by name, alive so that their ids stay theirs: a call that
        # finds another under a name finds its reach again (the new function's globals and closure)
        self.code = {id(v): v for _, v in self.captured() if _is_code(v)}

    def _follow_all(self, fn: Any) -> None:
        """Follow ``fn``, then the functions its defaults, a partial's arguments, its owner and what
        is passed to it hold or run (``self.loss_fn``, ``self._loss``, a model's forward)."""
        self.closure: list[tuple[str, Any]] = []  # (name, with the function that reads it if not fn: cell)
        self.globals: list[tuple[dict, list[str], str]] = []  # (a function's globals, the names it reads, whose)
        self.keys: Any = set()  # the strings the code holds (the keys of a dict it reads), then in order
        self.names: set[str] = set()  # every name its code reads: globals, attributes, methods
        self.followed: list[tuple[types.FunctionType, types.CodeType]] = []  # and its code, as followed
        self._listed: dict[int, set[str]] = {}  # while it is found: id of a globals dict -> the names listed
        seen: set[int] = set()
        self._follow(fn, seen, 0)
        for value in [v for _, v in self.bound] + ([] if self.owner is None else [self.owner]) + list(self.passed):
            for callee in _callees(value, set(self.names)):
                self._follow(callee, seen, 1)
        del self._listed

    def _follow(self, fn: Any, seen: set, depth: int) -> None:
        """Note what ``fn`` reads by name, and follow the functions among it that are the user's
        own (``_users``), ``_FOLLOWED`` deep."""
        code = getattr(fn, "__code__", None)
        if code is None or id(fn) in seen:
            return
        seen.add(id(fn))
        self.followed.append((fn, code))
        cells = list(zip(code.co_freevars, fn.__closure__ or ()))
        names = list(dict.fromkeys(_names(code)))
        self.names.update(names)
        found = list(dict.fromkeys(_global_names(code)))
        listed = self._listed.setdefault(id(fn.__globals__), set())  # one key entry a global, however many read it
        whose = f" (read by {fn.__name__})" if depth > 0 else ""  # a number's key names the helper that reads it
        self.closure += [(name + whose, cell) for name, cell in cells]
        self.globals.append((fn.__globals__, [name for name in found if name not in listed], whose))
        listed.update(found)
        self.keys.update(_strings(code))
        if depth == _FOLLOWED:
            return
        values = [_contents(cell) for _, cell in cells] + [fn.__globals__.get(name) for name in found]
        for value in values:
            for callee in _callees(value, names):
                self._follow(callee, seen, depth + 1)

    def arguments(self, args: tuple, kwargs: dict) -> list[tuple[tuple, Any]]:
        """The call's arguments by name (by position and keyword where they do not bind)."""
        if self.plain and not kwargs and len(args) >= len(self.positional):
            named = self._by_position(args)
            if named is not None:
                return named
        if self.signature is not None:
            try:
                return [((name,), value) for name, value in self.signature.bind(*args, **kwargs).arguments.items()]
            except TypeError:
                pass
        return [(("args",), args), (("kwargs",), kwargs)]

    def _by_position(self, args: tuple) -> list[tuple[tuple, Any]] | None:
        """Positional arguments named as ``inspect.Signature.bind`` names them, without its general
        machinery (a speed-up, see the class); None where they do not bind."""
        n = len(self.positional)
        named = [((name,), value) for name, value in zip(self.positional, args)]
        if len(args) > n:
            if self.rest is None:
                return None
            named.append(((self.rest,), args[n:]))
        return named

    def captured(self) -> Iterator[tuple[str, Any]]:
        """The objects the function can reach without arguments, as they are now, by name: its
        defaults and a partial's arguments, ``self`` and its attributes, its closure, the globals it
        names, and the same of the functions it calls (``SCALE (read by loss)``)."""
        for name, value in self.bound:
            yield name, value
        owner = self.owner
        if owner is not None:
            yield "self", owner
            for k, v in vars(owner).items() if hasattr(owner, "__dict__") else ():
                if k in self.read or k in self.strings:  # what its code names: not the losses a loop appends to
                    yield f"self.{k}", v
        for name, cell in self.closure:
            try:
                yield name, cell.cell_contents
            except ValueError:
                pass
        for space, names, whose in self.globals:
            for name in names:
                if name in space:
                    yield name + whose, space[name]


_FOLLOWED = 3  # how deep Reach follows the functions a step names (a step -> its loss -> a helper)


def _root(value: Any) -> int:
    """What following an argument's code depends on: a function's code, a model's class."""
    if isinstance(value, Module):
        return id(type(value))
    fn = value
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = getattr(fn, "__func__", fn)
    return id(fn.__code__) if isinstance(fn, types.FunctionType) else id(value)


def _wrapped(value: Any) -> Any:
    """The function an object wraps (``__wrapped__``, as ``functools.wraps`` names it), or None."""
    try:
        fn = getattr(value, "__wrapped__", None)
    except Exception:  # an attribute dict (__getattr__ = dict.__getitem__) raises KeyError
        return None
    return fn if callable(fn) else None


def _callees(value: Any, names: Iterable[str]) -> Iterator[types.FunctionType]:
    """The user's functions a step may call through ``value``: a function; a bound method's, a
    partial's or a static method's; of a user's module, class or object, those ``names`` names
    (``losses.loss``, ``Helper.loss``, ``holder.loss_fn``); an object's methods they name, and its
    forward or ``__call__``, which calling it runs (a model's submodules' too); the callables a dict,
    a list or a tuple holds (``losses["mse"]``)."""
    if not isinstance(value, types.FunctionType):
        value = _wrapped(value) or value  # a compiled step (or a decorator's object) runs the function it wraps
    fn = value
    while isinstance(fn, (functools.partial, types.MethodType, staticmethod, classmethod)):
        fn = fn.func if isinstance(fn, functools.partial) else fn.__func__
    if isinstance(fn, types.FunctionType):
        if _users(fn):
            yield fn
        return
    if isinstance(value, (dict, list, tuple)):  # losses["mse"]: the callables it holds
        for item in list(value.values() if isinstance(value, dict) else value)[:_SHORT]:
            if callable(item) and not isinstance(item, type):
                yield from _callees(item, ())
        return
    namespace = isinstance(value, (types.ModuleType, type))
    if namespace and not _users_namespace(value) or not namespace and not _plain_object(value):
        return
    attrs = vars(value)
    for name in names:
        if name in attrs:
            yield from _callees(attrs[name], ())
    if not namespace:
        yield from _methods_called(type(value), [*names, *_ENTRIES])
    if isinstance(value, Module):  # what calling its submodules runs
        for module in _modules_of(value):
            yield from _methods_called(type(module), _ENTRIES)


def _users(fn: types.FunctionType) -> bool:
    """Whether ``fn`` is the user's own code: not tapekit's, nor installed with Python or a package."""
    return not (fn.__module__ or "").startswith("tapekit") and not fn.__code__.co_filename.startswith(_LIBRARIES)


_LIBRARIES = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
                   | set(site.getsitepackages()) | {site.getusersitepackages()})  # Debian's dist-packages, pip --user


def _strings(code: types.CodeType) -> Iterator[str]:
    """The strings a function's code holds (its nested functions' too, and in its constant tuples:
    ``for name in ("enc", "dec")``): the keys it reads, the attributes it names to ``getattr``."""
    for const in code.co_consts:
        yield from _strings_in(const)


def _strings_in(const: Any) -> Iterator[str]:
    if isinstance(const, str):
        yield const
    elif isinstance(const, (tuple, frozenset)):
        for item in const:
            yield from _strings_in(item)
    elif isinstance(const, types.CodeType):
        yield from _strings(const)


def _contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a closure variable not bound yet
        return None


def _global_names(code: types.CodeType) -> Iterator[str]:
    """The global names a function's code reads or binds (its nested functions' too): not the
    attributes it names, which ``co_names`` holds alike (``self.sched.step()`` reads no global ``step``)."""
    for instruction in dis.get_instructions(code):
        if instruction.opname in _GLOBAL_OPS:
            yield instruction.argval
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _global_names(const)


_GLOBAL_OPS = {"LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_NAME", "STORE_NAME", "DELETE_NAME"}


def _names(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const)
