"""Tape policies: what happens to the record of ops when tensors meet, and after backward."""

from .arc import ArcTape
from .base import Record, Tape
from .global_ import GlobalTape
from .owned import OwnedTape
from .union import UnionTape


class NoneTape:
    """No tape: ops record nothing (inference). ``x.trace(tk.NoneTape())`` is the same tensor
    (same id) with no tape, as ``x.split_tape()[0]``; ``x.detach()`` is a new tensor (a stop-gradient)."""

    policy = "none"

    def __repr__(self) -> str:
        return "NoneTape()"


__all__ = ["Tape", "Record", "NoneTape", "OwnedTape", "ArcTape", "UnionTape", "GlobalTape"]
