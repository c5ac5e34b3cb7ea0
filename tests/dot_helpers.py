"""What the picture tests share: a headless matplotlib, the first two tape colours, and a reader
for the DOT text that ``tk.viz.dag`` and the widgets show."""

from __future__ import annotations

import re

import matplotlib

from tapekit.viz.palette import TAPE_COLOURS

matplotlib.use("Agg")
BLUE, ORANGE = TAPE_COLOURS[:2]


def nodes(dot: str) -> dict[str, str]:
    """DOT node id -> its attribute text."""
    return {m[1]: m[2] for m in re.finditer(r"^\s*(\w+) \[(.*)\]$", dot, re.M) if "->" not in m[0]}


def op_colours(dot: str) -> set[str]:
    """The fill colours of the op nodes."""
    return {re.search(r'fillcolor="([^"]+)"', attrs)[1] for key, attrs in nodes(dot).items() if key.startswith("op")}
