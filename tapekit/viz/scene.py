"""What a picture of the ops behind some tensors shows, frozen at one moment: the ops oldest
first, the tensors they read and make, and the tape holding each op's record right now, each
named and coloured as `tapekit.ids` says.

A ``Scene`` holds no tape or array, so it can be drawn later and two scenes of one run can be
compared."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ..errors import InvalidArgumentError
from ..gradients import Gradients
from ..history import history, home_of, live_store
from ..ids import label, label_all, letter_all, name_unshown
from ..tapes.base import Tape, is_spent
from ..tensor import Tensor
from .palette import TapeLook, TapeLooks, look_of


@dataclass(frozen=True)
class OpView:
    """One recorded op: its name, operand ids (``None``: a constant), output id, and the birth of
    the tape holding its record (``None`` when no tape holds it any more). ``fate`` says why not:
    ``drained`` (a backward ran it, and its shared tape records again), ``consumed`` (a backward ran
    it and consumed its OwnedTape), ``let go`` (a backward ran it) or ``dropped`` (its tape is gone);
    ``by`` names that backward."""

    name: str
    inputs: tuple[int | None, ...]
    out: int
    tape: int | None
    fate: str = ""
    by: str = ""


@dataclass(frozen=True)
class TensorView:
    """One tensor in the picture. ``made_on``: birth of the tape holding the op that made it;
    ``carries``: birth of the live tape it carries, for a tensor the picture was given (an output);
    ``outline``: for a leaf, birth of the tape holding the first op that reads it (``None``: none,
    or no tape any more: ``reader_gone``); ``grad``: whether the given gradients hold it (``None``:
    none given); ``not_kept``: they do not, because their leaf set left it out on purpose."""

    name: str
    shape: tuple[int, ...]
    leaf: bool
    output: bool
    made_on: int | None
    carries: int | None
    grad: bool | None
    outline: int | None = None
    reader_gone: bool = False  # a leaf whose first reader's record no tape holds any more
    not_kept: bool = False


@dataclass(frozen=True)
class TapeView:
    """A live tape in the picture: its policy, how many records it holds in all, its name and
    colour, and what merges and backwards did to it (``absorbed B``, ``drained by ...``)."""

    birth: int
    policy: str
    records: int
    look: TapeLook
    state: str = ""


@dataclass(frozen=True)
class Scene:
    ops: tuple[OpView, ...]
    tensors: dict[int, TensorView]  # by tensor id, in order of appearance
    tapes: dict[int, TapeView]  # by birth: the tapes holding the ops, and those the outputs carry

    def name(self, tid: int) -> str:
        return self.tensors[tid].name

    @property
    def colours(self) -> TapeLooks:
        """The name and colour of each tape, as `tapekit.ids` gave them."""
        return TapeLooks({b: t.look for b, t in self.tapes.items()})


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
    """The scene behind ``tensors`` now; ``names`` (e.g. ``locals()``) names the tensors that have
    neither a ``name=`` nor a label yet, for good (`tapekit.ids`); ``grads`` (a ``Gradients``) marks
    which tensors have a gradient."""
    if grads is not None and not isinstance(grads, Gradients):
        raise InvalidArgumentError(f"grads is what a backward returned (a Gradients), got {type(grads).__name__}")
    if names is not None and not isinstance(names, Mapping):
        raise InvalidArgumentError(f"names= takes a mapping from names to tensors, such as locals(), "
                                   f"not {type(names).__name__}")
    records = list(reversed(history(tensors)))
    handles = _handles(tensors, names or {})
    stores = _stores(records, tensors, handles)
    fates = _Fates(handles)
    made = {rec.out: fates.view(rec) for rec in records}  # output id -> the op that made it
    order = _appearance(records, tensors)
    label_all(order)
    outline = first_readers(made.values())
    shapes = _shapes(records, tensors)
    outputs = {t.id for t in tensors}
    views = {}
    for tid in order:
        store = live_store(handles[tid][0]) if tid in outputs else None
        op = made.get(tid)
        views[tid] = TensorView(label(tid), shapes[tid], op is None, tid in outputs, None if op is None else op.tape,
                                None if store is None else store._born, None if grads is None else tid in grads,
                                outline.get(tid), tid in outline and outline[tid] is None, left_out(grads, tid))
    tapes = {b: TapeView(b, type(s).__name__, len(s), look_of(s), s._state()) for b, s in sorted(stores.items())}
    return Scene(tuple(made.values()), views, tapes)


def left_out(grads: Any, tid: int) -> bool:
    """Whether the gradients ``grads`` have no entry for ``tid`` because their leaf set left it out,
    not because a backward missed it (as ``Gradients.why_missing`` tells the two apart)."""
    if grads is None or tid in grads or tid in grads._why:
        return False
    return grads.leaves is not None and tid not in grads.leaves


def _stores(records: Sequence[Any], tensors: Sequence[Tensor],
            handles: Mapping[int, tuple[Tensor, str | None]]) -> dict[int, Tape]:
    """By birth, the live tapes holding ``records`` and those the given tensors carry, lettered in
    the order they were made (`tapekit.ids`)."""
    stores: dict[int, Tape] = {}
    for rec in records:
        store = home_of(rec)
        if store is not None:
            stores[store._born] = store
    for t in tensors:
        store = live_store(handles[t.id][0])
        if store is not None:
            stores[store._born] = store
    letter_all(b for s in stores.values() for b in s._named())
    return stores


class _Fates:
    """Why a record no tape holds is gone, from the tapes the picture's handles carry: the backward
    that let it go drained one of them (it records again), or consumed an OwnedTape (a handle is spent)."""

    def __init__(self, handles: Mapping[int, tuple[Tensor, str | None]]) -> None:
        carried = [h._tape for h, _ in handles.values() if h._tape is not None]
        self.drained = {t._store()._drained for t in carried if not is_spent(t)}
        self.spent = any(is_spent(t) for t in carried)

    def view(self, rec: Any) -> OpView:
        store = home_of(rec)
        if store is not None:
            return OpView(rec.name, tuple(rec.inputs), rec.out, store._born)
        by = rec.consumed_by
        fate = "dropped" if not by else "drained" if by in self.drained else "consumed" if self.spent else "let go"
        return OpView(rec.name, tuple(rec.inputs), rec.out, None, fate, str(by or ""))


def first_readers(ops: Iterable[OpView]) -> dict[int, int | None]:
    """For each leaf (an operand no op here made), the tape of the first op that reads it."""
    made = {op.out for op in ops}
    first: dict[int, int | None] = {}
    for op in ops:
        for tid in op.inputs:
            if tid is not None and tid not in made:
                first.setdefault(tid, op.tape)
    return first


def _handles(tensors: Sequence[Tensor], names: Mapping[str, Any]) -> dict[int, tuple[Tensor, str | None]]:
    """For each tensor id: a handle (one carrying a live tape when there is one) and its name from
    ``names`` (the first key naming it; keys starting with ``_`` are skipped), which names it for
    good when it has no name or label yet."""
    found: dict[int, tuple[Tensor, str | None]] = {t.id: (t, None) for t in tensors}
    for key, value in names.items():
        if not isinstance(value, Tensor) or key.startswith("_"):
            continue
        handle, name = found.get(value.id, (value, None))
        if live_store(handle) is None and live_store(value) is not None:
            handle = value
        found[value.id] = (handle, name or key)
        name_unshown(value.id, name or key)
    return found


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
