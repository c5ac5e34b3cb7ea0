"""What a picture of the ops behind some tensors shows, frozen at one moment: the ops oldest
first, the tensors they read and make, and the tape holding each op's record right now.

A ``Scene`` holds no tape or array, so it can be drawn later (in another colour order) and
two scenes of one run can be compared."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ..errors import InvalidArgumentError
from ..history import history, home_of, live_store
from ..ids import name_of
from ..tapes.base import Tape
from ..tensor import Tensor
from .palette import TapeColours


@dataclass(frozen=True)
class OpView:
    """One recorded op: its name, operand ids (``None``: a constant), output id, and the birth of
    the tape holding its record (``None`` when no tape holds it any more, ``fate`` says why)."""

    name: str
    inputs: tuple[int | None, ...]
    out: int
    tape: int | None
    fate: str = ""


@dataclass(frozen=True)
class TensorView:
    """One tensor in the picture. ``made_on``: birth of the tape holding the op that made it;
    ``carries``: birth of the live tape it carries, for a tensor the picture was given (an output);
    ``grad``: whether the given gradients hold it (``None``: no gradients given)."""

    name: str
    shape: tuple[int, ...]
    leaf: bool
    output: bool
    made_on: int | None
    carries: int | None
    grad: bool | None


@dataclass(frozen=True)
class TapeView:
    """A live tape in the picture: its policy and how many records it holds in all."""

    birth: int
    policy: str
    records: int


@dataclass(frozen=True)
class Scene:
    ops: tuple[OpView, ...]
    tensors: dict[int, TensorView]  # by tensor id, in order of appearance
    tapes: dict[int, TapeView]  # by birth: the tapes holding the ops, and those the outputs carry

    def name(self, tid: int) -> str:
        return self.tensors[tid].name

    @property
    def colours(self) -> TapeColours:
        """The letter and colour of each tape: its place among the tapes of its program."""
        return TapeColours(self.tapes)


def tensors_given(tensors: Sequence[Any], what: str) -> list[Tensor]:
    """The arguments, checked to be tensors (at least one)."""
    if not tensors:
        raise InvalidArgumentError(f"{what} needs at least one tensor, e.g. {what}(loss)")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise InvalidArgumentError(f"{what} takes tensors, got {type(t).__name__}; pass the tensors to "
                                       f"draw, and names=locals() to name them")
    return list(tensors)


def capture(tensors: Sequence[Tensor], grads: Any = None, names: Mapping[str, Any] | None = None) -> Scene:
    """The scene behind ``tensors`` now; ``names`` (e.g. ``locals()``) names tensors that have no
    ``name=``; ``grads`` (a ``Gradients``) marks which tensors have a gradient."""
    if names is not None and not isinstance(names, Mapping):
        raise InvalidArgumentError(f"names= takes a mapping from names to tensors, such as locals(), "
                                   f"not {type(names).__name__}")
    records = list(reversed(history(tensors)))
    handles = _handles(tensors, names or {})
    stores: dict[int, Tape] = {}
    made: dict[int, OpView] = {}  # output id -> the op that made it
    for rec in records:
        store = home_of(rec)
        if store is not None:
            stores[store._born] = store
        fate = "" if store is not None else ("consumed" if rec.consumed_by else "dropped")
        made[rec.out] = OpView(rec.name, tuple(rec.inputs), rec.out, None if store is None else store._born, fate)
    order = _appearance(records, tensors)
    shapes = _shapes(records, tensors)
    namer = _Namer(handles)
    outputs = {t.id for t in tensors}
    views = {}
    for tid in order:
        store = live_store(handles[tid][0]) if tid in outputs else None
        if store is not None:
            stores[store._born] = store
        op = made.get(tid)
        views[tid] = TensorView(namer(tid), shapes[tid], op is None, tid in outputs, None if op is None else op.tape,
                                None if store is None else store._born, None if grads is None else tid in grads)
    tapes = {b: TapeView(b, type(s).__name__, len(s)) for b, s in sorted(stores.items())}
    return Scene(tuple(made.values()), views, tapes)


def _handles(tensors: Sequence[Tensor], names: Mapping[str, Any]) -> dict[int, tuple[Tensor, str | None]]:
    """For each tensor id: a handle (one carrying a live tape when there is one) and its name from
    ``names`` (the first key naming it; keys starting with ``_`` are skipped)."""
    found: dict[int, tuple[Tensor, str | None]] = {t.id: (t, None) for t in tensors}
    for key, value in names.items():
        if not isinstance(value, Tensor) or key.startswith("_"):
            continue
        handle, name = found.get(value.id, (value, None))
        if live_store(handle) is None and live_store(value) is not None:
            handle = value
        found[value.id] = (handle, name or key)
    return found


class _Namer:
    """Names in the picture: a tensor's ``name=``, else its name in ``names``, else ``t1``, ``t2``, ...
    numbered in order of appearance, so the picture does not depend on global ids."""

    def __init__(self, handles: Mapping[int, tuple[Tensor, str | None]]) -> None:
        self.handles = handles
        self.unnamed = 0

    def __call__(self, tid: int) -> str:
        given = name_of(tid)
        if given is not None:
            return given
        if tid in self.handles and self.handles[tid][1]:
            return self.handles[tid][1]
        self.unnamed += 1
        return f"t{self.unnamed}"


def _appearance(records: Iterable[Any], tensors: Sequence[Tensor]) -> list[int]:
    """Tensor ids in order of first appearance: each op's operands then its output, oldest op
    first, then the given tensors."""
    seen: dict[int, None] = {}
    for rec in records:
        for tid in (*rec.inputs, rec.out):
            if tid is not None:
                seen.setdefault(tid)
    for t in tensors:
        seen.setdefault(t.id)
    return list(seen)


def _shapes(records: Iterable[Any], tensors: Sequence[Tensor]) -> dict[int, tuple[int, ...]]:
    shapes = {t.id: t.shape for t in tensors}
    for rec in records:
        shapes[rec.out] = tuple(rec.out_shape)
        for tid, shape in zip(rec.inputs, rec.shapes):
            if tid is not None:
                shapes[tid] = tuple(shape)
    return shapes
