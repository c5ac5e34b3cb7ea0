"""What a recording may not do or leave behind. A replay is the program's array calls alone: it
binds no Python name, and it draws only from the device's generator (whose draws are steps). So a
name the step bound to a tensor it made, and a draw from one of numpy's own generators, would keep
the first call's values: each is refused with a ``CompileError`` that says what to do instead. And
what it may do with a warning: use a tensor made before the call that is not an input, whose values
the program holds as constants (``tk.FrozenTensorWarning``)."""

from __future__ import annotations

import functools
import sys
import warnings
from typing import Any, Callable, Iterator

import numpy as np

from ..callsite import code_at, place
from ..nn.module import Module
from ..tensor import Tensor
from .errors import CompileError, FrozenTensorWarning
from .inputs import Inputs, Reach, _plain_object
from .tracer import Tracer


GLOBAL_DRAWS = [name for name in dir(np.random) if name not in ("get_state", "set_state")
                and getattr(getattr(np.random, name), "__self__", None) is np.random.mtrand._rand]
# numpy's global random functions (np.random.rand, np.random.normal, ...): while a call records, they refuse


def held(name: str, value: Any, seen: set, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """``(name, object)`` for ``value`` and what it holds where a step may keep a tensor or a
    generator: a module's attributes (and its modules'), a plain object's attributes, a list's,
    tuple's or dict's items (one level deep)."""
    if id(value) in seen:
        return
    seen.add(id(value))
    yield name, value
    if isinstance(value, Module):
        for attr, v in vars(value).items():
            yield from held(f"{name}.{attr}", v, seen)
    elif depth == 0 and isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from held(f"{name}[{i}]", v, seen, 1)
    elif depth == 0 and isinstance(value, dict):
        for k, v in list(value.items()):
            yield from held(f"{name}[{k!r}]", v, seen, 1)
    elif depth == 0 and _plain_object(value):  # state.ema, sampler.rng
        for attr, v in list(vars(value).items()):
            yield from held(f"{name}.{attr}", v, seen, 1)


def _reached(reach: Reach, inputs: Inputs) -> Iterator[tuple[str, Any]]:
    """What the step reaches by name, and the modules it was found to use, with what they hold."""
    seen: set[int] = set()
    for name, value in reach.captured():
        yield from held(name, value, seen)
    for name, module in inputs.modules:
        yield from held(name, module, seen)


def refuse_rebound(reach: Reach, inputs: Inputs, tracer_of: Callable[[Any], bool], fn_name: str) -> None:
    """A name the step bound to a tensor it made (``global ema; ema = ema * 0.5 + x``, a module's
    attribute set in ``forward``, a list it appended to) holds a tracer of this recording
    (``tracer_of``) once it ends: give it its array, and refuse."""
    rebound = [(name, t) for name, t in _reached(reach, inputs) if isinstance(t, Tensor) and tracer_of(t.data)]
    for _, t in rebound:
        t.data = t.data.a
    if rebound:
        name, t = rebound[0]
        raise CompileError(
            f"{fn_name} binds {name} to {t.label}, a tensor it made; but a replay of {fn_name} is its array calls "
            f"alone, and binds no Python name, so {name} would keep this call's value. Return the tensor instead "
            f"(and pass it back in as an argument, if the next call needs it).")


def drawn(reach: Reach, inputs: Inputs) -> list[tuple[str, Any, Any]]:
    """Before a recording: numpy's generators the step can draw from (those it reaches by name, those
    its modules hold, those passed to it), each with its state, to tell afterwards whether it drew.
    Not a device's own generator, under any name: tapekit's draws from it are steps of the program."""
    devices = {id(dev.rng) for dev in inputs.devices.values()}
    found = list(_reached(reach, inputs)) + [("an argument", value) for value in inputs.held]
    return [(name, g, _state(g)) for name, g in map(_generator_of, found)
            if isinstance(g, _GENERATORS) and id(g) not in devices]


_GENERATORS = (np.random.Generator, np.random.RandomState)


def _generator_of(found: tuple[str, Any]) -> tuple[str, Any]:
    """A generator's method under a name (``from numpy.random import rand``, ``draw = rng.normal``)
    draws from its generator: that generator, named by the method's name."""
    name, value = found
    try:
        owner = getattr(value.func if isinstance(value, functools.partial) else value, "__self__", None)
    except Exception:  # an attribute dict raises KeyError
        return name, value
    if isinstance(owner, _GENERATORS) and not isinstance(value, _GENERATORS):
        return f"{name} (a {type(owner).__name__}'s method)", owner
    return name, value


def refuse_draws(generators: list[tuple[str, Any, Any]], fn_name: str, global_draws_elsewhere: int) -> None:
    """After a recording: refuse it if the step drew from one of ``generators`` (``drawn``); not for
    numpy's global generator where other threads drew from it meanwhile (a data loader's)."""
    for name, generator, before in generators:
        if generator is np.random.mtrand._rand and global_draws_elsewhere:
            continue
        if not _same(before, _state(generator)):
            raise _frozen_draw(name, fn_name, "")


def refuse_global_draw(name: str, fn_name: str) -> CompileError:
    """The error for a call of numpy's global random function ``name`` while ``fn_name`` records."""
    frame = sys._getframe(2)
    line = code_at(frame)
    return _frozen_draw(f"numpy's global generator (np.random.{name})", fn_name,
                        f" at {place(frame)}{f': `{line}`' if line else ''}")


def _frozen_draw(name: str, fn_name: str, where: str) -> CompileError:
    return CompileError(
        f"{fn_name} draws from {name} while tk.compile records it{where}; but a replay of {fn_name} is its array "
        f"calls alone, so every call would reuse this call's draw (a dropout mask, frozen). Draw with the "
        f"device's generator instead (dev.rand, dev.randn, nn.Dropout: each call draws afresh), or draw outside "
        f"{fn_name} and pass the array in.")


def _state(generator: Any) -> Any:
    if isinstance(generator, np.random.Generator):
        return generator.bit_generator.state
    return generator.get_state()


def _same(a: Any, b: Any) -> bool:
    """Whether two generator states are equal (dicts, tuples, numbers and arrays, nested)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return bool(np.array_equal(a, b))
    return a == b


def module_constants(inputs: Inputs) -> set[int]:
    """The ids of the tensors the step's modules hold that are not parameters (a private mask, a
    list of them): constants of the program by design (their owner declared them so), used without
    a warning."""
    seen: set[int] = set()
    return {t.id for name, module in inputs.modules for _, t in held(name, module, seen) if isinstance(t, Tensor)}


def frozen(operands: Any, first_id: int, warned: dict) -> None:
    """Note each operand that is a tensor made before the call (an id below ``first_id``) whose
    storage is not an input (it holds no tracer), once (``warned``: id -> its label, or None for a
    module's own tensor): ``warn_frozen`` warns of them when the recording ends."""
    for t in operands:
        if type(t) is Tensor and t.id < first_id and type(t.data) is not Tracer and t.id not in warned:
            warned[t.id] = t.label


def warn_frozen(warned: dict, fn_name: str) -> None:
    """``tk.FrozenTensorWarning`` naming the tensors ``frozen`` noted (at the caller's line)."""
    names = [text for text in warned.values() if text is not None]
    if not names:
        return
    which = names[0] if len(names) == 1 else f"{', '.join(names[:3])}{' and more' if len(names) > 3 else ''}"
    it = "it" if len(names) == 1 else "them"
    warnings.warn(
        f"{fn_name} uses {which}, {'a tensor' if len(names) == 1 else 'tensors'} made before the call that "
        f"tk.compile did not find among its inputs: {'its' if len(names) == 1 else 'their'} values are constants of "
        f"the program, and a replay will not see them change. It looks in {fn_name}'s arguments (and the lists, "
        f"tuples, dicts and dataclasses among them) and their defaults, its closure and the globals it names, three "
        f"levels inside them (the attributes, keys and items it reads), the same in the functions it calls, and the "
        f"modules and optimizers found there. If {which} may change between "
        f"calls, pass {it} to {fn_name} as an argument.", FrozenTensorWarning, stacklevel=6)
