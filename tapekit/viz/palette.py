"""One letter and one colour per tape, the same in every picture of a program: the Okabe-Ito
palette, which colour-blind readers can tell apart, handed out to a program's tapes in the order
they were made (``tape._born``), so the first tape of a program is tape A, whatever ran before it.

What is a program?

- One run of a replayed program (``tk.widgets.Replay``, behind every widget): its tapes are counted
  from the start of the run. Every run of it, at any step and under any policy, letters them alike,
  and a picture of some of them names each as a picture of all of them does.
- Otherwise, the tapes behind the tensors a picture or print is of: those they hold and those that
  hold the records of their history. Each snapshot, gradient split and DAG letters its own, and a
  figure of several shows each one as it prints.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import string
from typing import Iterable, Iterator

from ..tapes.base import _births

# Okabe-Ito, without vermillion: red is kept for missing gradients.
TAPE_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#F0E442")
CONSUMED = "#999999"  # a record no tape holds any more (consumed by a backward, or dropped)
MISSING = "#D00000"  # a gradient a backward did not produce
LEAF = "#333333"

# The birth numbers that open and close each replayed run, oldest first (runs never overlap): two
# numbers a run, a few dozen bytes.
_run_starts: list[int] = []
_run_ends: list[float] = []  # infinity while the run is going on


@contextlib.contextmanager
def replayed_run() -> Iterator[None]:
    """Make the tapes made inside the block one program: the run of a replayed program."""
    _run_starts.append(next(_births))
    _run_ends.append(math.inf)
    try:
        yield
    finally:
        _run_ends[-1] = next(_births)


def _run_start(birth: int) -> int | None:
    """The birth number that opened the replayed run that made this tape (``None``: none did)."""
    i = bisect.bisect(_run_starts, birth) - 1
    return _run_starts[i] if i >= 0 and birth < _run_ends[i] else None


def tape_name(rank: int) -> str:
    """The name of a program's tape number ``rank``: ``tape A``, ``tape B``, ... (``tape AA`` after ``tape Z``)."""
    letters = ""
    while True:
        rank, digit = divmod(rank, 26)
        letters = string.ascii_uppercase[digit] + letters
        if rank == 0:
            return f"tape {letters}"
        rank -= 1


def tape_colour(rank: int) -> str:
    """The colour of a program's tape number ``rank``."""
    return TAPE_COLOURS[rank % len(TAPE_COLOURS)]


def rgb(colour: str) -> tuple[int, int, int]:
    """The red, green and blue (0-255) of a ``#RRGGBB`` colour."""
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def lighten(colour: str, amount: float = 0.6) -> str:
    """``colour`` mixed with white (``amount`` of white), for fills under black text."""
    return "#" + "".join(f"{round(c + (255 - c) * amount):02X}" for c in rgb(colour))


class TapeColours:
    """The letter and colour of each tape in one picture, made from the births of the tapes behind
    the tensors it is of: a tape's place among its program's tapes, in the order they were made."""

    def __init__(self, births: Iterable[int]) -> None:
        unreplayed = sorted(b for b in set(births) if _run_start(b) is None)
        self._rank = {b: i for i, b in enumerate(unreplayed)}

    def rank(self, birth: int) -> int:
        """The tape's place in its program: 0 for tape A."""
        start = _run_start(birth)
        return self._rank[birth] if start is None else birth - start - 1

    def colour(self, birth: int | None) -> str:
        """The tape's colour; ``None`` (no tape any more) is grey."""
        return CONSUMED if birth is None else tape_colour(self.rank(birth))

    def name(self, birth: int) -> str:
        """``tape A``, ``tape B``, ..."""
        return tape_name(self.rank(birth))
