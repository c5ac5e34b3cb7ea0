"""What a recording may not leave behind, checked when it ends: a name the step bound to a tensor
it made, and a draw from one of numpy's own generators. A replay is the program's array calls
alone: it binds no Python name, and it calls only the device's generator (whose draws are steps),
so either would keep the first call's values. Each is refused with a ``CompileError`` that says
what to do instead. And what it may use with a warning, checked at each op: a tensor made before
the call that is not an input, whose values the program holds as constants."""

from __future__ import annotations

from typing import Any

import warnings

import numpy as np

from ..tensor import Tensor
from .errors import CompileError, FrozenTensorWarning
from .inputs import Inputs, Reach, _modules_of
from .tracer import Tracer

GLOBAL = "numpy's global random functions"  # np.random.rand, np.random.normal, ...


def refuse_rebound(reach: Reach, inputs: Inputs, fn_name: str) -> None:
    """A name the step bound to a tensor it made (``global ema; ema = ema * 0.5 + x``, or a module's
    attribute set in ``forward``) holds a tracer once the recording ends: give it its array, and refuse."""
    found = [(name, t) for name, t, _ in reach.captured() if isinstance(t, Tensor)]
    found += [(f"{name}.{pname}", p) for name, module in inputs.modules for pname, p in module.named_parameters()]
    rebound = [(name, t) for name, t in found if type(t.data) is Tracer]
    for _, t in rebound:
        if type(t.data) is Tracer:  # one tensor may be found under two names
            t.data = t.data.a
    if rebound:
        name, t = rebound[0]
        short = name.rsplit(".", 1)[-1]
        raise CompileError(
            f"{fn_name} binds {name} to {t.label}, a tensor it made; but a replay of {fn_name} is its array calls "
            f"alone, and binds no Python name, so {name} would keep this call's value. Return the tensor instead, "
            f"and pass it back in: {short}, loss = {fn_name}(..., {short}).")


def drawn(reach: Reach, inputs: Inputs) -> list[tuple[str, Any, Any]]:
    """Before a recording: numpy's generators the step can draw from (the global one, those it
    reaches by name, and its modules' attributes), each with its state, to tell afterwards whether it drew."""
    found = [(GLOBAL, None, np.random.get_state())]
    reached = [(name, value) for name, value, _ in reach.captured()]
    reached += [(f"{name}.{attr}", value) for name, module in inputs.modules for m in _modules_of(module)
                for attr, value in vars(m).items()]
    for name, value in reached:
        if isinstance(value, np.random.Generator):
            found.append((name, value, value.bit_generator.state))
        elif isinstance(value, np.random.RandomState):
            found.append((name, value, value.get_state()))
    return found


def refuse_draws(generators: list[tuple[str, Any, Any]], fn_name: str) -> None:
    """After a recording: refuse it if the step drew from one of ``generators`` (``drawn``)."""
    for name, generator, before in generators:
        if not _same(before, _state(generator)):
            raise CompileError(
                f"{fn_name} draws from {name} while tk.compile records it; but a replay of {fn_name} is its array "
                f"calls alone, so every call would reuse this call's draw (a dropout mask, frozen). Draw with the "
                f"device's generator instead (dev.rand, dev.randn, nn.Dropout: each call draws afresh), or draw "
                f"outside {fn_name} and pass the array in.")


def _state(generator: Any) -> Any:
    if generator is None:
        return np.random.get_state()
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
    """The ids of the tensors the step's modules hold that are not parameters (a private mask):
    constants of the program by design (their owner declared them so), used without a warning."""
    return {value.id for _, module in inputs.modules for m in _modules_of(module) for value in vars(m).values()
            if isinstance(value, Tensor)}


def warn_frozen(operands: Any, first_id: int, warned: set, fn_name: str) -> None:
    """Warn of each operand that is a tensor made before the call (an id below ``first_id``) whose
    storage is not an input (it holds no tracer), once per recording (``warned``: their ids)."""
    for t in operands:
        if type(t) is Tensor and t.id < first_id and type(t.data) is not Tracer and t.id not in warned:
            warned.add(t.id)
            warnings.warn(
                f"{fn_name} uses {t.label}, a tensor made before the call that tk.compile did not find among its "
                f"inputs: its values are constants of the program, and a replay will not see them change. It "
                f"looks in {fn_name}'s arguments and their defaults, its closure, the globals it names and the "
                f"attributes it reads of them, and the modules and optimizers found there. If {t.label} changes "
                f"between calls, pass it to {fn_name} as an argument.", FrozenTensorWarning, stacklevel=2)
