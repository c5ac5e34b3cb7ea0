"""``OwnedTape``: dfdx's tape. It travels inside one tensor; an op moves its operands' tapes into
its output, the left absorbing the right."""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import TapePolicyError
from .base import SpentTape, Tape, consumed_error, consumed_of, moved_error


class OwnedTape(Tape):
    """A tape with one owner. When taped tensors meet in an op, the left tape absorbs the right
    (records, gradient entries and leaf set; the right's entry wins on equal ids, and the leaf sets
    unite, a leaky side adding nothing) and the output
    takes it: the operands can no longer record (``TapeMovedError``). Backward consumes it."""

    policy = "owned"
    moves = True
    allows_partial = True
    __slots__ = ("_held",)

    def __init__(self, grads=None, leaves=None) -> None:
        super().__init__(grads, leaves)
        self._held = False  # set when a tensor takes this tape: it has one owner

    def _merge(self, other: Tape, op: str) -> Tape:
        self._absorb(other)
        other._spent = moved_error("this OwnedTape", f"op {op}", ", whose left operand's tape absorbed it")
        return self

    def _shared(self) -> Tape:
        raise TapePolicyError(
            "clone() of a tensor with an OwnedTape: an owned tape has one owner. Use .retaped() for "
            "the same tensor on a fresh tape, or share one tape with tk.ArcTape() or tk.UnionTape().")

    def _after_backward(self, outputs: Sequence[Any], by: str) -> None:
        self._spent = consumed_error("this OwnedTape", by)
        for out in outputs:
            out._tape = SpentTape(consumed_of, out.id, by, of=self._born)
