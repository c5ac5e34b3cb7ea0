"""Which tape an op's output gets: validate its operands' tapes, then merge them left to right."""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import TapePolicyError
from ..ids import label, label_all
from .base import Tape, raise_spent
from .global_ import GlobalTape, _active, active_global


def operand_tapes(inputs: Sequence[Any], op: str) -> Sequence[Tape]:
    """The tapes whose merge, left to right, an op's record goes on, checked: none spent, one
    policy; inside a GlobalTape block, the block's tape; ``()`` when nothing records. Changes
    nothing. The common cases (one tape among the operands, the block's own, several handles of one
    merged UnionTape) are told apart without ``_checked_tapes``' walk, which makes the forward of a
    chain of small ops (the benchmarks' W1) 14% slower."""
    tape = None
    for t in inputs:
        held = getattr(t, "_tape", None)
        if held is not None and held is not tape:
            tape = held if tape is None else _SEVERAL
    active = _active.get()
    if active and (tape is None or tape is active[-1]):  # a GlobalTape is never spent: nothing to check
        return active[-1:]
    if tape is None:
        return ()
    if tape is not _SEVERAL and not active:
        if tape._spent is not None:
            raise_spent(next(t.tape for t in inputs if getattr(t, "_tape", None) is tape))  # as its holder shows it
        return (tape,)
    store = None if active else _one_store(inputs)
    return (store,) if store is not None else _checked_tapes(inputs, op)


_SEVERAL = object()  # the mark for operands that carry more than one tape handle


def _one_store(inputs: Sequence[Any]) -> Tape | None:
    """The one tape that all the operands' live handles record into (merged UnionTapes each keep
    their own handle), else ``None``."""
    store = None
    for t in inputs:
        tape = getattr(t, "_tape", None)
        if tape is None:
            continue
        if tape._spent is not None:
            return None
        mine = tape._store()
        if store is None:
            store = mine
        elif mine is not store:
            return None
    return store


def _checked_tapes(inputs: Sequence[Any], op: str) -> list[Tape]:
    tapes: list[Tape] = []
    holders: list[Any] = []
    for t in inputs:
        if getattr(t, "_tape", None) is not None:
            tapes.append(t.tape._live())
            holders.append(t)
    active = active_global()
    if active is not None:
        for t, tape in zip(holders, tapes):
            if not isinstance(tape, GlobalTape):
                raise TapePolicyError(
                    f"op {op} runs inside a GlobalTape block, but {label(t.id)} carries "
                    f"{_a(type(tape).__name__)}: one op cannot mix tape policies. Use {label(t.id)}.detach() "
                    f"inside the block, or run the op outside it.")
        return [active]
    check_one_policy(holders, tapes, f"op {op}")
    return tapes


def check_one_policy(holders: Sequence[Any], tapes: Sequence[Tape], what: str) -> None:
    """``TapePolicyError`` unless every tape (carried by the tensor beside it) has one policy."""
    for t, tape in zip(holders[1:], tapes[1:]):
        if type(tape) is not type(tapes[0]):
            if tapes[0]._transform or tape._transform:
                raise TapePolicyError(_mixed_with_a_transform(what, (holders[0], tapes[0]), (t, tape)))
            label_all([holders[0].id, t.id])  # named together: labelled in the order they were made
            raise TapePolicyError(
                f"{what}: {label(holders[0].id)} carries {_a(type(tapes[0]).__name__)} and {label(t.id)} "
                f"{_a(type(tape).__name__)}; one call cannot mix tape policies. Trace both with the same policy.")


def _mixed_with_a_transform(what: str, a: tuple[Any, Tape], b: tuple[Any, Tape]) -> str:
    """The policy error of an op inside ``tk.grad`` (``tk.vjp``) whose function met a tensor traced
    outside: ``a`` and ``b`` are (tensor, tape), one of them a transform's argument on its own tape."""
    (arg, own), (other, tape) = (a, b) if a[1]._transform else (b, a)
    transform = own._transform
    rec = arg._record  # ``arg`` is the transform's copy of the argument given (an identity reshape of it)
    given = rec.inputs[0] if rec is not None and rec.name == "reshape" else arg.id
    label_all([given, other.id])
    name = label(other.id)
    return (f"{what}: {label(given)} is an argument of {transform}, which traces a copy of it on a UnionTape of its "
            f"own, and {name} carries {type(tape).__name__} {tape.label}, traced outside {transform}: one op "
            f"cannot mix tape policies. To differentiate through {transform} with respect to {name} too, trace "
            f"{name} with tk.UnionTape(); if the function only needs its values, use {name}.detach() in it.")


def _a(noun: str) -> str:
    return ("an " if noun[0] in "AEIO" else "a ") + noun


def merge_tapes(tapes: Sequence[Tape], op: str) -> Tape:
    """Merge validated tapes left to right; the result is the output's tape."""
    tape = tapes[0]
    for other in tapes[1:]:
        if other is not tape:
            tape = tape._merge(other, op)
    return tape
