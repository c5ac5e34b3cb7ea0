"""One colour per tape, the same in every picture: the Okabe-Ito palette, which colour-blind
readers can tell apart, handed out to tapes in the order they were created."""

from __future__ import annotations

import string
from typing import Iterable

# Okabe-Ito, without vermillion: red is kept for missing gradients.
TAPE_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#F0E442")
CONSUMED = "#999999"  # a record no tape holds any more (consumed by a backward, or dropped)
MISSING = "#D00000"  # a gradient a backward did not produce
LEAF = "#333333"


def rgb(colour: str) -> tuple[int, int, int]:
    """The red, green and blue (0-255) of a ``#RRGGBB`` colour."""
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def lighten(colour: str, amount: float = 0.6) -> str:
    """``colour`` mixed with white (``amount`` of white), for fills under black text."""
    return "#" + "".join(f"{round(c + (255 - c) * amount):02X}" for c in rgb(colour))


class TapeColours:
    """Which colour and letter each tape gets: tapes are ranked by creation (``tape._born``),
    so the same program gets the same colours, whatever ran before it.

    Built from the births of the tapes to show; a tape not among them is ranked after them.
    """

    def __init__(self, births: Iterable[int]) -> None:
        self._rank = {b: i for i, b in enumerate(sorted(set(births)))}

    def rank(self, birth: int) -> int:
        if birth not in self._rank:
            self._rank[birth] = len(self._rank)
        return self._rank[birth]

    def colour(self, birth: int | None) -> str:
        """The tape's colour; ``None`` (no tape any more) is grey."""
        return CONSUMED if birth is None else TAPE_COLOURS[self.rank(birth) % len(TAPE_COLOURS)]

    def name(self, birth: int) -> str:
        """``tape A``, ``tape B``, ... (``tape AA`` after ``tape Z``)."""
        rank, letters = self.rank(birth), ""
        while True:
            rank, digit = divmod(rank, 26)
            letters = string.ascii_uppercase[digit] + letters
            if rank == 0:
                return f"tape {letters}"
            rank -= 1

    def __repr__(self) -> str:
        return f"TapeColours({len(self._rank)} tapes)"
