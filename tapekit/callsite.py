"""Where in the user's program something happened, as tapekit's messages name it: a frame's file
and line, or the line of a notebook cell, and the code on that line."""

from __future__ import annotations

import linecache
import re
import sys
import warnings
from types import FrameType

# What numpy says of a float error (log(0), 0/0, exp(1000)), whatever the function.
NUMPY_FLOAT_WARNING = r"(divide by zero|overflow|underflow|invalid value) encountered"
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


def silenced(category: type[Warning], stacklevel: int) -> bool:
    """Whether ``warnings.warn(text, category, stacklevel)`` from the caller would ignore the
    warning whatever its text: the first filter that matches it without reading the text says
    ``ignore``. A warning's text names tapes and tensors, which hands out letters and labels for
    life (`tapekit.ids`); a silenced one is not written, so that it names nothing nobody sees."""
    frame = sys._getframe(stacklevel)
    module, lineno = frame.f_globals.get("__name__", "<string>"), frame.f_lineno
    for action, text, kind, where, line in warnings.filters:
        if issubclass(category, kind) and (where is None or where.match(module)) and line in (0, lineno):
            return action == "ignore" and text is None
    return False


def hide_numpy_warnings_inside_tapekit() -> None:
    """numpy warns of a float error at the line that called it, which for an op or a backward rule
    is a line of tapekit's source: a learner would be sent to a file of tapekit's. Those warnings
    are not shown (``tk.detect_anomaly`` names the learner's line that made a NaN or infinity, and
    ``np.errstate(all="raise")`` still raises); numpy's warnings at the learner's own lines are
    shown as ever."""
    warnings.filterwarnings("ignore", NUMPY_FLOAT_WARNING, RuntimeWarning, r"tapekit\.")
