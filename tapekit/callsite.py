"""Where in the user's program something happened, as tapekit's messages name it: a frame's file
and line, or the line of a notebook cell, and the code on that line."""

from __future__ import annotations

import linecache
import re
from types import FrameType

_CELL_FILE = re.compile(r"ipykernel_\d+[/\\]\d+\.py$")  # the temporary file IPython runs a cell's code from


def place(frame: FrameType) -> str:
    """``train.py:12``, or ``line 12 of a notebook cell`` for code a Jupyter cell defined."""
    filename = frame.f_code.co_filename
    if _CELL_FILE.search(filename):
        return f"line {frame.f_lineno} of a notebook cell"
    return f"{filename}:{frame.f_lineno}"


def code_at(frame: FrameType) -> str:
    """The code on the frame's line, stripped (empty when its source cannot be found)."""
    return linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
