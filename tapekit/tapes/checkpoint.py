"""All or nothing for a call of many ops: each op leaves the tapes as they were when it fails, but a
module call or a transform that fails at its third op has run two that recorded, merged tapes and
moved an OwnedTape out of its input. ``all_or_nothing(tensors)`` notes, before such a call, the
state of the given tensors' tape handles and of every tape they and the active GlobalTape block
can reach, and puts it back if the call raises: the tapes' record lists, merges (an absorbed
tape's records and name, a union's links), moves, leaf sets and gradient entries.

What a forward op changes is only ever appended to a tape's lists, or a list is swapped for a
new one, so a list is noted as the list object and its length, not copied: noting costs the
same whatever the tapes hold, 1.2% of the instructions of a training step of a 784-256-256-10
``Sequential`` at batch 64 (callgrind). Not undone: a backward run inside the call (what it let
go of is gone), and the tapes of tensors the call reached some other way (a global it reads)."""

from __future__ import annotations

import functools
from contextvars import ContextVar
from typing import Any, Iterable

from .base import Tape
from .global_ import _active
from ..tensor import Tensor

_inside: ContextVar[bool] = ContextVar("tapekit_all_or_nothing", default=False)  # an outer call notes it all
_GRADIENT_PARTS = ("_arrays", "_owned", "_clean", "leaves", "_why", "_partial", "_ran")


@functools.cache
def _slots(kind: type) -> tuple[str, ...]:
    """The state a tape of type ``kind`` keeps (its slots, all the way up)."""
    return tuple(name for cls in kind.__mro__ for name in getattr(cls, "__slots__", ()) if name != "__weakref__")


class _TapeState:
    """One tape object as it was: its slots (a list as itself and its length), its Gradients'
    containers (copied: gradient entries are few in a forward), and its union home's link."""

    def __init__(self, tape: Tape) -> None:
        self.tape = tape
        self.slots = [(name, value, len(value) if type(value) is list else None)
                      for name in _slots(type(tape)) for value in [getattr(tape, name)]]
        grads = tape._grads
        self.grads = [(name, _copied(getattr(grads, name))) for name in _GRADIENT_PARTS]
        self.up = getattr(tape._ref, "up", None)
        self.into = tape._into

    def restore(self) -> None:
        tape = self.tape
        absorbed = tape._into != self.into
        for name, value, length in self.slots:
            if length is not None:
                del value[length:]
            setattr(tape, name, value)
        for name, value in self.grads:
            setattr(tape._grads, name, _copied(value))
        if hasattr(tape._ref, "up"):
            tape._ref.up = self.up
        elif absorbed:  # its records were moved to the tape that absorbed it: they come home
            for rec in tape._records:
                rec.home = tape._ref


def _copied(value: Any) -> Any:
    return value.copy() if type(value) in (dict, set) else value


def _reachable(tensors: Iterable[Any]) -> list[Tape]:
    """The tape objects the tensors' handles and the active GlobalTape block lead to: each handle,
    and for a UnionTape the tapes up to its root."""
    found: dict[int, Tape] = {}
    for tape in [*(t._tape for t in tensors), *_active.get()]:
        while isinstance(tape, Tape) and id(tape) not in found:
            found[id(tape)] = tape
            tape = getattr(tape, "_parent", None)
    return list(found.values())


class all_or_nothing:  # noqa: N801  (used as a function: ``with all_or_nothing(...)``)
    """Put the tapes that ``tensors`` and the active GlobalTape block reach, and the tensors' tape
    handles, back as they were if the block raises. Inside another such block it adds nothing: the
    outer one puts everything back."""

    __slots__ = ("tensors", "handles", "states", "token")

    def __init__(self, tensors: Iterable[Any]) -> None:
        self.tensors = tensors

    def __enter__(self) -> None:
        self.token = None
        if _inside.get():
            return
        found = [t for t in self.tensors if type(t) is Tensor]
        self.handles = [(t, t._tape, getattr(t, "_moved_by", None), getattr(t, "_moved_from", None)) for t in found]
        self.states = [_TapeState(tape) for tape in _reachable(found)]
        self.token = _inside.set(True)

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        if self.token is None:
            return
        _inside.reset(self.token)
        if kind is not None:
            for state in self.states:
                state.restore()
            for t, tape, by, origin in self.handles:
                t._tape, t._moved_by, t._moved_from = tape, by, origin
