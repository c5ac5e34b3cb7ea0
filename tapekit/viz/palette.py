"""The colours of the pictures. Tapes are named and coloured as `tapekit.ids` says, the same in
every picture and printout of a program: a picture looks each tape's name and colour up when it
is taken, and keeps them (``TapeLooks``), so it can be drawn later as it was."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..ids import TAPE_COLOURS, letter_number

CONSUMED = "#999999"  # a record a backward let go (its tape drained or consumed), or dropped with its tape
MISSING = "#D00000"  # a gradient a backward did not produce
INK = "#333333"  # outlines and text of the legend's swatches

__all__ = ["TAPE_COLOURS", "CONSUMED", "GONE_FILL", "MISSING", "INK", "TapeLook", "TapeLooks", "look_of", "rgb",
           "lighten", "text_on"]


@dataclass(frozen=True)
class TapeLook:
    """A tape as the pictures show it: its name and colour, and where it sorts (its first letter)."""

    name: str
    colour: str
    order: int


def look_of(tape: Any) -> TapeLook:
    """The name and colour of a live tape object (its store) now."""
    return TapeLook(tape.label, tape.colour, min(map(letter_number, tape._store()._parts())))


class TapeLooks:
    """The name and colour of each tape in one picture, by birth (``None``: no tape any more, grey)."""

    def __init__(self, looks: Mapping[int, TapeLook]) -> None:
        self._looks = dict(looks)

    def colour(self, birth: int | None) -> str:
        return CONSUMED if birth is None else self._looks[birth].colour

    def name(self, birth: int) -> str:
        """``tape A``, ``tape A∪B``."""
        return f"tape {self._looks[birth].name}"

    def order(self, birth: int | None) -> int:
        """Where the tape sorts in a legend: by its first letter (no tape: first)."""
        return -1 if birth is None else self._looks[birth].order

    def sorted(self, births: Iterable[int]) -> list[int]:
        return sorted(births, key=self.order)


def rgb(colour: str) -> tuple[int, int, int]:
    """The red, green and blue (0-255) of a ``#RRGGBB`` colour."""
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def lighten(colour: str, amount: float = 0.6) -> str:
    """``colour`` mixed with white (``amount`` of white), for fills under black text."""
    return "#" + "".join(f"{round(c + (255 - c) * amount):02X}" for c in rgb(colour))


GONE_FILL = lighten(CONSUMED, 0.5)  # the fill of records no tape holds, outlined CONSUMED and dashed in every picture


def text_on(colour: str) -> str:
    """Black or white, whichever reads better on ``colour``."""
    r, g, b = rgb(colour)
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "white"
