"""The recorder: what one recording run collects. Every array the run touches gets a slot (an
input, a constant made outside the program, or the result of a step); every array call made on
tracers becomes a ``Step`` whose arguments are templates, with a ``Ref`` where a slot goes. Calls
made inside a recorded call are its own business and are not noted. A value read while recording
is given to tapekit's own checks and refused, with a ``CompileError`` naming the line, to the
function being compiled."""

from __future__ import annotations

import numbers
import operator
import sys
from threading import get_ident
import types
from typing import Any, Callable, Iterator

import numpy as np

from ..callsite import code_at, place
from ..ids import _births, next_id
from ..reads import CHECKS
from ..tensor import Tensor
from .errors import CompileError
from .tracer import Tracer, forward_attributes, is_array, nested


_ONE = object()  # ``Recorder.operation``'s second operand, where it has none
_SLOT = operator.attrgetter("slot")


class Ref:
    """A slot in a step's arguments."""

    __slots__ = ("slot",)

    def __init__(self, slot: int) -> None:
        self.slot = slot


class Step:
    """One line of the program: ``out = head(args, kwargs)`` in one of a few forms (``kind``)."""

    __slots__ = ("kind", "head", "args", "kwargs", "out", "asarray", "effect", "group", "slots")

    def __init__(self, kind: str, head: str, args: tuple, kwargs: dict, out: int | None, asarray: bool,
                 effect: bool, group: Any, slots: tuple[int, ...]) -> None:
        self.kind, self.head, self.args, self.kwargs, self.out = kind, head, args, kwargs, out
        self.asarray, self.effect, self.group, self.slots = asarray, effect, group, slots

    def reads(self) -> tuple[int, ...]:
        """The slots the step reads (its ``Ref``s, however nested, found once when it was noted)."""
        return self.slots

    def writes(self) -> tuple[int, ...]:
        """The slots the step writes."""
        return () if self.out is None else (self.out,)


class Recorder:
    """What one recording run collects: the values of the slots, the steps, the constants."""

    def __init__(self, fn_name: str) -> None:
        self.fn_name = fn_name
        self.values: list[Any] = []  # slot -> its value in the recording run
        self.refs: list[Ref] = []  # slot -> the one ``Ref`` that templates use for it
        self.kinds: list[str] = []  # slot -> "input", "const" or "step"
        self.steps: list[Step] = []
        self.consts: dict[int, int] = {}  # id of a constant array -> its slot
        self.keep: list[Any] = []  # the constants as first seen, alive so their ids stay theirs
        self.depth = 0  # > 0 inside a recorded call: calls made there are its own business
        self.group: Any = None
        self.mark = 0  # steps before this index have a group or belong to none
        self.globals: dict[str, Any] = {"np": np, "asarray": np.asarray, "copy_of": copy_array}
        self.bound: dict[int, str] = {}  # id of an object the program refers to -> its global name
        self.grad_of: dict[int, int] = {}  # slot of a gradient a backward returned -> its tensor id
        self.info: dict[int, tuple] = {}  # slot -> (record id, op name, input ids, output id)
        self.first_birth = next(_births)  # tapes made before the recording were born earlier
        self.first_id = next_id()  # and tensors made before it have smaller ids
        self.frozen: dict[int, str | None] = {}  # tensors made before the call, not inputs: id -> label (None: ok)
        self.thread = get_ident()  # the thread that records: calls from others (get_ident() != thread) pass through
        self.global_draws_elsewhere = 0  # draws from numpy's global generator by other threads while it records

    def slot(self, value: Any, kind: str) -> Tracer:
        if type(value) is not np.ndarray and is_array(value):  # a CuPy or array-API array: its methods, for the tracer
            forward_attributes(type(value))
        slot = len(self.values)
        self.values.append(value)
        self.kinds.append(kind)
        self.refs.append(Ref(slot))
        return Tracer(value, slot, self)

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

    def split(self, value: Any, traced: list, refs: list) -> tuple[Any, Any]:
        """``value`` with its tracers' real arrays, and its template (a ``Ref`` for each tracer and
        each constant, an array made outside the program), noting the tracers and the slots found."""
        t = type(value)
        if t is Tracer:
            traced.append(value)
            refs.append(value.slot)
            return value.a, self.refs[value.slot]
        if t in _PLAIN:
            return value, value
        if t is tuple or t is list:
            reals, templates = self._split_items(value, traced, refs)
            return t(reals), t(templates)
        if t is dict:
            pairs = {k: self.split(v, traced, refs) for k, v in value.items()}
            return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
        if t is slice:
            parts = [self.split(v, traced, refs) for v in (value.start, value.stop, value.step)]
            return slice(*[p[0] for p in parts]), slice(*[p[1] for p in parts])
        if is_array(value):
            refs.append(self._constant(value))
            return value, self.refs[refs[-1]]
        return value, value

    def _split_items(self, items: Any, traced: list, refs: list) -> tuple[list, list]:
        """``split`` of each of ``items``, the common ones (tracers and plain values) without a
        call each: a call's arguments are such a tuple, and this loop is the hot path of recording.
        With it, and ``_result`` kept to few calls, recording W4's chain of 10,000
        ops took 70 us an op, not 99 (measured; the eager run alone: about 20)."""
        reals, templates = [], []
        for v in items:
            t = type(v)
            if t is Tracer:
                traced.append(v)
                refs.append(v.slot)
                reals.append(v.a)
                templates.append(self.refs[v.slot])
            elif t in _PLAIN:
                reals.append(v)
                templates.append(v)
            else:
                real, template = self.split(v, traced, refs)
                reals.append(real)
                templates.append(template)
        return reals, templates

    def _constant(self, value: Any) -> int:
        """The slot of an array made outside the program, as first seen (a copy: the program may write into it)."""
        slot = self.consts.get(id(value))
        if slot is None:
            snapshot = copy_array(value)
            self.keep.append(value)
            slot = self.consts[id(value)] = self.slot(snapshot, "const").slot
        return slot

    def call(self, kind: str, head: str, fn: Callable, args: tuple, kwargs: dict) -> Any:
        """Compute ``fn(*args, **kwargs)`` on the real arrays and note it as a step."""
        if self.depth or get_ident() != self.thread:
            return fn(*_unwrap(args), **_unwrap(kwargs))
        traced: list[Tracer] = []
        refs: list[int] = []
        # templated before the call: a constant it writes into is kept as it was
        real_args, arg_templates = self._split_items(args, traced, refs)
        real_kw, kw_templates = self.split(kwargs, traced, refs) if kwargs else (kwargs, _NO_KWARGS)
        self.depth += 1
        try:
            res = fn(*real_args, **real_kw)
        finally:
            self.depth -= 1
        effect = kind == "iop" or kind == "setitem" or "out" in kwargs or head.endswith(".at")
        step = Step(kind, head, tuple(arg_templates), kw_templates, None, False, effect, self.group, tuple(refs))
        return self._result(step, res, traced)

    def operation(self, kind: str, head: str, fn: Callable, a: Any, b: Any = _ONE) -> Any:
        """``call`` of ``fn(a)`` or ``fn(a, b)`` without keywords: an operator (``a + b``, ``-a``,
        ``a += b``) or a namespace function of one or two operands (``xp.tanh(a)``). Where the
        operands are tracers and numbers, the step is noted without ``call``'s templating of any
        argument; anything else goes to ``call``. Most steps are these (W4's chain: all 10 of every
        3 ops), and this path takes its first call from 243,000 instructions an op to 228,000
        (callgrind), from 35 us an op to 30 (at 30,000 ops)."""
        one = b is _ONE
        ta, tb = type(a), type(b)
        if (self.depth or get_ident() != self.thread or (ta is not Tracer and ta not in _PLAIN)
                or (tb is not Tracer and tb not in _PLAIN and not one)):
            return self.call(kind, head, fn, (a,) if one else (a, b), {})
        ra = a.a if ta is Tracer else a
        rb = b.a if tb is Tracer else b
        self.depth += 1
        try:
            res = fn(ra) if one else fn(ra, rb)
        finally:
            self.depth -= 1
        refs = self.refs
        ref_a = refs[a.slot] if ta is Tracer else a
        args = (ref_a,) if one else (ref_a, refs[b.slot] if tb is Tracer else b)
        traced = ([a, b] if tb is Tracer else [a]) if ta is Tracer else ([b] if tb is Tracer else [])
        slots = tuple(map(_SLOT, traced))
        step = Step(kind, head, args, _NO_KWARGS, None, False, kind == "iop", self.group, slots)
        if type(res) is not np.ndarray or res is ra or res is rb:  # in place, or not a new array: as call does
            return self._result(step, res, traced)
        return self._noted(step, res)

    def _result(self, step: Step, res: Any, traced: list) -> Any:
        """What a call returns while recording (a tracer for an array), its step noted with the slot it writes."""
        if res is None:
            if step.effect or step.kind == "call" or step.kind == "method":
                step.effect = True
                self.steps.append(step)
            return None
        for t in traced:
            if t.a is res:  # the result is an operand: in place (recorded) or an alias (nothing to do)
                if step.effect:
                    step.out = t.slot
                    self.steps.append(step)
                return t
        if type(res) is not np.ndarray:  # an ndarray, the common case, is spared is_array's tests
            if is_array(res):
                if isinstance(res, np.generic):  # numpy made a scalar: keep 0-d arrays, as emit does
                    res, step.asarray = np.asarray(res), True
            elif isinstance(res, (tuple, list)) and res and all(is_array(r) for r in res):
                whole = self._noted(step, res)
                items = [self.call("getitem", "", operator.getitem, (whole, i), {}) for i in range(len(res))]
                return type(res)(*items) if hasattr(res, "_fields") else type(res)(items)  # a named tuple: slogdet's
            elif traced and isinstance(res, (str, bytes)):  # text made of the values (x.tobytes(), a printout)
                return self.read(traced[0], f".{step.head}()" if step.kind == "method" else f"{step.head}()",
                                 lambda a: res)
            elif not (traced and isinstance(res, numbers.Number)):
                return res  # a dtype, a shape, a flag: static
        return self._noted(step, res)

    def _noted(self, step: Step, res: Any) -> Tracer:
        """Note ``step``, which made the array ``res``: a new slot, and its tracer."""
        out = self.slot(res, "step")
        step.out = out.slot
        self.steps.append(step)
        return out

    def read(self, tracer: Tracer, how: str, read: Callable) -> Any:
        """A value read while recording: a check of tapekit's (``reads.only_checks``) gets the value
        (it checks the first call's values); anything else, the function being compiled or an op
        that would compute with the value, gets a ``CompileError`` naming the function's line."""
        frame, entry, check = sys._getframe(1), None, False
        while frame is not None and _module_of(frame).startswith(("tapekit.compile.", "numpy.")):
            frame = frame.f_back  # the tracer's and the recorder's own frames, and numpy's that read
        while frame is not None and _module_of(frame).startswith(("tapekit", "numpy.")):
            if _module_of(frame).startswith("tapekit"):  # numpy's frames between tapekit's are neither
                check = check or frame.f_code in CHECKS
                entry = frame
            frame = frame.f_back
        if check:
            return read(tracer.a)
        where = "" if frame is None else f" at {place(frame)}"
        line = "" if frame is None else code_at(frame)
        at = f"while tk.compile records {self.fn_name}(){where}{f': `{line}`' if line else ''}"
        frozen = "A compiled step is a fixed program of array calls"
        if entry is not None and entry.f_code not in _USER_READS:  # an op that computes with what it reads
            op = _op_name(entry)
            raise CompileError(
                f"{op} reads the values of a tensor {at}. It computes with them (the positions an index or a mask "
                f"picks, a count), and {frozen[0].lower()}{frozen[1:]}: they would be frozen at the first call's "
                f"values. Give it a numpy array or a list instead (a constant of the program, which another array "
                f"records anew), or make the call outside {self.fn_name}.")
        if entry is not None:
            how = _READ_NAMES.get(entry.f_code.co_name, how)
        raise CompileError(
            f"{how} reads a value of an array {at}. {frozen}, so Python inside it cannot see values: a read would "
            f"be frozen at the first call's value. Move the read out of {self.fn_name}: return the tensor and read "
            f"it after the call (loss = step(x); print(float(loss))), or compute a branch on values with "
            f"tk.where(cond, a, b).")


_NO_KWARGS = types.MappingProxyType({})  # the keyword arguments of most steps, one for all (a dict a step: 64 bytes)
_PLAIN = frozenset({int, float, bool, str, type(None), type(Ellipsis)})


_READ_NAMES = {"__bool__": "bool() of a tensor (an `if` or `while` on it)", "__float__": "float() of a tensor",
               "item": ".item()", "numpy": ".numpy()", "tolist": ".tolist()", "__array__": "np.asarray() of a tensor",
               "__repr__": "printing a tensor"}


_OP_NAMES = {"__getitem__": "t[key] with a tensor in the key", "__setitem__": "t[key] = value with a tensor in the key"}


_USER_READS = {getattr(Tensor, name).__code__ for name in ("item", "tolist", "numpy", "__float__", "__bool__",
                                                           "__array__", "__repr__")}


def _op_name(frame: types.FrameType) -> str:
    """What the user called, as a read's message names it: ``t[key] with a tensor in the key``,
    ``Embedding(...)`` (a module called), ``take_along_axis()``."""
    name = frame.f_code.co_name
    if name == "__call__" and "self" in frame.f_locals:
        return f"{type(frame.f_locals['self']).__name__}(...)"
    return _OP_NAMES.get(name, f"{name}()")


def _module_of(frame: types.FrameType) -> str:
    return frame.f_globals.get("__name__", "")


def copy_array(value: Any) -> Any:
    """A copy of an array of any namespace (a numpy scalar: as a 0-d array)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, np.generic):
        return np.asarray(value)
    space = getattr(value, "__array_namespace__", None)
    if space is not None:
        return space().asarray(value, copy=True)
    return value.copy()


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


def slots_in(template: Any) -> Iterator[int]:
    """The slots a step's template refers to (its ``Ref``s, however nested)."""
    return (ref.slot for ref in nested(template, Ref))
