"""``GlobalTape``: one ambient tape that records every op run inside its ``with`` block."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Sequence

from ..errors import TapePolicyError
from ..ids import letter_all
from .arc import SharedTape
from .base import Tape

_active: ContextVar[tuple["GlobalTape", ...]] = ContextVar("tapekit_global_tapes", default=())


def active_global() -> "GlobalTape | None":
    """The innermost GlobalTape entered in this context (thread or task), if any."""
    stack = _active.get()
    return stack[-1] if stack else None


class GlobalTape(SharedTape):
    """``with tk.GlobalTape() as tape:`` records every op run inside the block, by this thread or
    any other thread that enters the same tape, onto ``tape``: no merges are needed. The active tape
    is context-local (like autograd's grad mode): threads with their own tapes never mix, and in
    nested blocks the innermost tape is active. ``tape.backward(loss)`` runs backward."""

    policy = "global"
    __slots__ = ()

    def __enter__(self) -> "GlobalTape":
        _active.set(_active.get() + (self,))
        return self

    def __exit__(self, *exc: Any) -> None:
        stack = _active.get()
        if self not in stack:
            raise TapePolicyError(f"GlobalTape {self.label}'s block is not open here: close a block with the "
                                  f"`with` statement that opened it")
        at = len(stack) - 1 - stack[::-1].index(self)  # its innermost block: ``with g: with g:`` nests
        opened = stack[at:]
        _active.set(stack[:at])  # the blocks opened inside this one cannot outlive it
        if len(opened) > 1:
            inside = ", ".join(tape.label for tape in opened[1:])
            raise TapePolicyError(f"GlobalTape blocks must close in the order they were opened: {inside}, opened "
                                  f"inside {self.label}'s block, was still open when it closed; all are closed now. "
                                  f"Open each block with a `with` statement.")

    def _merge(self, other: Tape, op: str) -> Tape:
        if other is self:
            return self
        letter_all((self._born, other._born))  # shown together: lettered in the order they were made
        raise TapePolicyError(
            f"op {op} met two different GlobalTapes ({self.label} and {other.label}). A GlobalTape does "
            f"not merge: run the op inside one `with tape:` block, or use UnionTape.")

    def _fresh(self) -> Tape:
        raise TapePolicyError("retaped() has no meaning under a GlobalTape: every op in the block goes to it. "
                              "Use OwnedTape, ArcTape or UnionTape for separate tapes.")

    def backward(self, outputs: Any, seeds: Sequence[Any] | None = None, retain: bool = False,
                 create_graph: bool = False):
        """Backward on one output or a list of outputs recorded on this tape (``tk.backward``;
        ``create_graph=True`` records the backward on this tape too)."""
        from ..backward import backward
        outs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        for out in outs:
            if getattr(out, "_tape", None) is not self:
                raise TapePolicyError(f"{getattr(out, 'label', out)} was not recorded on {self.label}; "
                                      f"call backward on the GlobalTape it was recorded on")
        return backward(outs, seeds=seeds, retain=retain, create_graph=create_graph)
