"""What is swapped while a call is recorded, and put back however it ends: each device's array
namespace ``xp``, its random generator and its ``tensor`` for recording proxies; ``emit`` in the
ops, so that each op's array calls are grouped under it and its backward rules record theirs;
the engine's ``backward``, to learn which slots are gradients; and ``Optimizer.update``, to
group an update's arithmetic. tapekit's own code runs unchanged on top of these.

Compiled calls run one at a time (``RECORDING``): a call in another thread waits, so the swaps
never interleave and no replay reads the tracers a recording put in its inputs. While one records,
other threads' eager ops and array calls pass through unrecorded; the tensors the recorded call
uses (its arguments, the parameters of its modules) hold tracers until it ends, so eager code in
other threads must leave those alone meanwhile."""

from __future__ import annotations

import sys
import threading
from threading import get_ident
import types
from typing import Any, Callable

import numpy as np

from ..devices import Device, dtype_name
from ..gradients import Gradients
from ..nn.module import Module
from ..optim import Optimizer
from ..tensor import Tensor
from .errors import CompileError
from .guards import GLOBAL_DRAWS, frozen, refuse_global_draw
from .inputs import Inputs
from .recorder import Recorder
from .tracer import Tracer, is_array, tracers_in


class _Namespace:
    """A device's array namespace, recording: ``xp.tanh(x)`` is a step ``xp.tanh(x)``."""

    def __init__(self, real: Any, rec: Recorder, path: str) -> None:
        self._real, self._rec, self._path = real, rec, path

    def __getattr__(self, name: str) -> Any:
        """The first look-up of a name (the next ones find it in the instance, without a Python call)."""
        value = getattr(self._real, name)
        if isinstance(value, types.ModuleType) or (type(value).__name__ == "_CupyNamespace"):
            made = _Namespace(value, self._rec, f"{self._path}.{name}")
        elif callable(value) and not isinstance(value, type) and not isinstance(value, np.dtype):
            rec, head = self._rec, f"{self._path}.{name}"
            made = _recorded(rec, head, value)
        else:
            return value
        setattr(self, name, made)
        return made


def _recorded(rec: Recorder, head: str, fn: Callable) -> Callable:
    """``xp.name`` recording: a call of one or two operands and no keywords takes the hot path."""
    def call(*args: Any, **kw: Any) -> Any:
        if kw or not 0 < len(args) < 3:
            return rec.call("call", head, fn, args, kw)
        return rec.operation("call", head, fn, *args)

    return call


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


RECORDING = threading.RLock()  # held by a compiled call (one called inside another's recording runs within it)


class Patches:
    """Everything swapped while a call is recorded, and put back however it ends."""

    def __init__(self, rec: Recorder, inputs: Inputs) -> None:
        self.rec, self.inputs, self.undo = rec, inputs, []

    def __enter__(self) -> "Patches":
        self._devices()
        self._emit()
        self._backward()
        self._update()
        self._numpy_random()
        return self

    def _swap(self, obj: Any, attr: str, value: Any) -> None:
        """Set ``obj.attr`` to ``value`` until the recording ends."""
        had = attr in vars(obj)
        self.undo.append((obj, attr, vars(obj).get(attr), had))
        setattr(obj, attr, value)

    def _devices(self) -> None:
        """Each device's namespace, generator and ``tensor``, recording."""
        rec = self.rec
        for i, dev in enumerate(self.inputs.devices.values()):
            name = rec.bind(dev, "dev")
            if i == 0:
                rec.globals["xp"] = dev.xp
            self._swap(dev, "xp", _Namespace(dev.xp, rec, "xp" if i == 0 else f"{name}.xp"))
            self._swap(dev, "rng", _Generator(dev.rng, rec, name))
            self._swap(dev, "tensor", lambda data, dtype=None, name=None, _d=dev, _o=dev.tensor:
                       _traced_tensor(_d, _o, data, dtype, name))

    def _emit(self) -> None:
        """``emit`` in every tapekit module that imported it: each op's calls grouped under it."""
        from ..ops import core
        real = core.emit
        for module in [m for n, m in list(sys.modules.items()) if n.startswith("tapekit") and m is not None]:
            if getattr(module, "emit", None) is real:
                self._swap(module, "emit", _recording_emit(real, self.rec))

    def _backward(self) -> None:
        """The engine's ``backward`` (and ``tk.backward``): which slots hold gradients, and of which tensor."""
        rec = self.rec
        engine, package = sys.modules["tapekit.backward"], sys.modules["tapekit"]
        real_backward = engine.backward

        def backward(*args: Any, **kw: Any) -> Gradients:
            grads = real_backward(*args, **kw)
            for tid, arr in grads._arrays.items():
                if type(arr) is Tracer:
                    rec.grad_of.setdefault(arr.slot, tid)
            return grads

        self._swap(engine, "backward", backward)
        if getattr(package, "backward", None) is real_backward:
            self._swap(package, "backward", backward)

    def _update(self) -> None:
        """``Optimizer.update``: an update's calls grouped under it."""
        rec = self.rec
        real_update = Optimizer.update

        def update(opt: Optimizer, model: Module, grads: Gradients) -> None:
            if get_ident() != rec.thread:
                return real_update(opt, model, grads)
            params = [(p, p.data) for p in model._origin().parameters()]
            state = {pid: (p, dict(kept)) for pid, (p, kept) in opt._state.items()}
            outer, rec.group, rec.mark = rec.group, ("update", type(opt).__name__), len(rec.steps)
            try:
                real_update(opt, model, grads)
            finally:
                rec.group, rec.mark = outer, len(rec.steps)
            missed = [p for p, _ in params if p.id < rec.first_id and not self.inputs.holds(p)]
            if missed or _older_state(opt, state, self.inputs):
                _put_back(opt, params, state)
                raise _not_inputs(rec, opt, missed)

        self._swap(Optimizer, "update", update)

    def _numpy_random(self) -> None:
        """numpy's global random functions: a draw from the recording thread is refused, at its line;
        one from another thread is counted (the global generator's state then tells nothing)."""
        rec = self.rec
        for name in GLOBAL_DRAWS:
            real = getattr(np.random, name)

            def draw(*args: Any, _name: str = name, _real: Callable = real, **kw: Any) -> Any:
                if get_ident() == rec.thread:
                    raise refuse_global_draw(_name, rec.fn_name)
                rec.global_draws_elsewhere += 1
                return _real(*args, **kw)

            self._swap(np.random, name, draw)

    def __exit__(self, *exc: Any) -> None:
        for obj, attr, value, had in reversed(self.undo):
            if had:
                setattr(obj, attr, value)
            else:
                delattr(obj, attr)


def _recording_emit(real: Callable, rec: Recorder) -> Callable:
    def emit(name: str, out: Any, inputs: Any, rules: Any, saved: tuple, device: Any, jvp: Any = None,
             links: Any = None) -> Tensor:
        result = real(name, out, inputs, rules, saved, device, jvp, links)
        if get_ident() != rec.thread:
            return result
        frozen(inputs, rec.first_id, rec.frozen)
        r = result._record
        ids = tuple([getattr(t, "id", None) for t in inputs]) if r is None else r.inputs  # a record has them
        info = (None if r is None else r.id, name, ids, result.id)
        _group_op(rec, ("op", info), out, saved)
        if type(result.data) is Tracer:
            rec.info.setdefault(result.data.slot, info)
        if r is not None:
            r.rules = tuple([None if rule is None else _recording_rule(rule, rec, ("rule", info, i))
                             for i, rule in enumerate(r.rules)])
        return result

    return emit


def _older_state(opt: Optimizer, state: dict, inputs: Inputs) -> bool:
    """Whether ``opt`` is an optimizer made before the call that the call did not find, with state
    of its own (an array that is not one the recording made): the update wrote tracers into it."""
    return opt not in inputs.optimizers and any(
        is_array(v) and type(v) is not Tracer for _, kept in state.values() for v in kept.values())


def _put_back(opt: Optimizer, params: list, state: dict) -> None:
    """The parameters and the optimizer's state as they were before a refused update."""
    for p, data in params:
        p.data = data
    for pid in [pid for pid in opt._state if pid not in state]:
        del opt._state[pid]
    for pid, (_, kept) in state.items():
        opt._state[pid][1].clear()
        opt._state[pid][1].update(kept)


def _not_inputs(rec: Recorder, opt: Optimizer, missed: list) -> CompileError:
    """The error for an optimizer update on parameters, or with an optimizer, the call did not find."""
    kind = type(opt).__name__
    what = f"{len(missed)} parameters (such as {missed[0].label})" if missed else f"an optimizer ({kind})"
    fn = rec.fn_name
    return CompileError(
        f"{fn} updates {what} that tk.compile did not find among its inputs, so a replay could not put the new "
        f"values back. It finds them in {fn}'s arguments and their defaults, a functools.partial's arguments, "
        f"its closure, the globals it names, the attributes it reads of an object it names, and the same in the "
        f"functions it calls: pass the model and the optimizer to {fn} as arguments.")


def _group_op(rec: Recorder, group: tuple, out: Any, saved: tuple) -> None:
    """Put the calls an op made (since ``rec.mark``) that its output and saved values need under
    its ``group``. Most ops made one call, their output, and that is found without a walk (W4's
    chain: 10,000 instructions an op of 250,000, measured)."""
    steps, mark = rec.steps, rec.mark
    rec.mark = len(steps)
    if rec.mark == mark + 1 and type(out) is Tracer and steps[mark].out == out.slot and steps[mark].group is None:
        steps[mark].group = group
        return
    wanted = _slots_of(out, saved)
    for step in reversed(steps[mark:]):  # the calls this op made: those its output and saved need
        if step.group is None and step.out in wanted:
            step.group = group
            wanted.update(step.slots)


def _slots_of(out: Any, saved: tuple) -> set[int]:
    """The slots of the tracers in an op's output and saved values (most are tracers themselves:
    those without a walk through ``tracers_in``: 1.0 us an op, not 2.5, measured)."""
    slots = set()
    for value in (out, *saved):
        if type(value) is Tracer:
            slots.add(value.slot)
        else:
            slots.update(t.slot for t in tracers_in(value))
    return slots


def _recording_rule(rule: Callable, rec: Recorder, group: tuple) -> Callable:
    def traced_rule(g: Any, *saved: Any, **kw: Any) -> Any:
        outer, rec.group = rec.group, group
        try:
            return rule(g, *saved, **kw)
        finally:
            rec.group, rec.mark = outer, len(rec.steps)

    if getattr(rule, "fills", False):
        traced_rule.fills = True
    return traced_rule
