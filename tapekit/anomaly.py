"""``tk.detect_anomaly()``: find the op whose forward or backward first makes a NaN or infinity.

Inside the block, every op's output and every backward rule's result is checked; the first that
is not finite raises ``NonFiniteError``, naming the line of the user's program that made the op,
the record, and its operands' ranges. The check runs before anything is recorded or accumulated,
so the tapes stay intact. Outside the block, the ops pay one test of a module flag.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Sequence

import numpy as np

from .errors import NonFiniteError
from .ids import label
from .callsite import code_at, place
from .reads import only_checks

on = False  # read by emit and backward: True while any thread is inside a block
_depth = 0
_lock = threading.Lock()
_where: dict[int, str] = {}  # record id -> the user's line that made it, while a block is open


class detect_anomaly:
    """``with tk.detect_anomaly():`` raise ``NonFiniteError`` at the first NaN or infinity an op
    or a backward rule makes (numpy's own warnings about it are silenced inside the block). Like
    PyTorch's ``torch.autograd.detect_anomaly``, it is slow: use it to find a bug, not to train."""

    def __enter__(self) -> "detect_anomaly":
        global on, _depth
        with _lock:
            _depth += 1
            on = True
        self._quiet = np.errstate(all="ignore")
        self._quiet.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        global on, _depth
        self._quiet.__exit__(*exc)
        with _lock:
            _depth -= 1
            if not _depth:
                on = False
                _where.clear()

    def __repr__(self) -> str:
        return "detect_anomaly()"


def user_line() -> str:
    """``file:line (code)`` of the first frame outside tapekit: the line of the user's program
    (``line 4 of a notebook cell (code)`` in a notebook)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("tapekit"):
        frame = frame.f_back
    if frame is None:
        return "an unknown line"
    code = code_at(frame)
    return place(frame) + (f" ({code})" if code else "")


@only_checks
def check_output(name: str, out: Any, inputs: Sequence[Any], device: Any) -> None:
    """``NonFiniteError`` if op ``name`` gave NaN or infinity from finite operands' values."""
    values = device.to_numpy(out)
    if values.dtype.kind != "f" or np.isfinite(values).all():
        return
    raise NonFiniteError(f"{name} made {_what(values)} at {user_line()}: {name}({_operands(inputs)}). "
                         f"Check that its operands are in its domain (log and sqrt need positive values, exp "
                         f"overflows above about 88 in float32).")


def remember(rec: Any) -> None:
    """Keep the user's line that made record ``rec``, for a backward's message."""
    _where[rec.id] = user_line()


@only_checks
def check_rule(rec: Any, tid: int, grad: Any, g: Any, device: Any) -> None:
    """``NonFiniteError`` if the rule of ``rec`` for operand ``tid`` made NaN or infinity."""
    values = device.to_numpy(grad)
    if values.dtype.kind != "f" or np.isfinite(values).all():
        return
    made = _where.get(rec.id, "a line run before detect_anomaly began")
    raise NonFiniteError(f"the backward rule of `{rec.line()}` for its operand {label(tid)} made {_what(values)} "
                         f"(the gradient flowing in {_range(device.to_numpy(g))}). The op was made at {made}. "
                         f"Nothing changed: the tapes and gradients are as they were before this backward.")


def _operands(inputs: Sequence[Any]) -> str:
    return ", ".join(f"{t.label} {_range(t.numpy())}" if hasattr(t, "numpy") else repr(t) for t in inputs)


def _range(values: np.ndarray) -> str:
    if values.size == 0:
        return "(empty)"
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    if finite.size == 0:
        return f"({_what(values)} only)"
    low, high = finite.min(), finite.max()
    extra = "" if finite.size == values.size else f", and {_what(values)}"
    return f"(from {low:.4g} to {high:.4g}{extra})" if low != high else f"(all {low:.4g}{extra})"


def _what(values: np.ndarray) -> str:
    kinds = [word for word, hit in (("nan", np.isnan(values).any()), ("inf", np.isposinf(values).any()),
                                     ("-inf", np.isneginf(values).any())) if hit]
    return " and ".join(kinds)
