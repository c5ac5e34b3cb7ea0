"""Reads of values that only check them.

While ``tk.compile`` records a step, a value that Python reads is frozen into the program at the
first call's value. tapekit's own code reads values in two kinds of places: checks, whose result
only decides whether to raise (labels in range, no negative integer power, anomaly mode), which
may run on the first call's values; and ops that compute with what they read (the positions an
index tensor or a mask picks, repeat counts), which a fixed program cannot do. ``only_checks``
marks the first kind; ``tk.compile`` refuses the second with a ``CompileError``.
"""

from __future__ import annotations

from types import CodeType
from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)

CHECKS: set[CodeType] = set()  # the code of the functions marked ``only_checks``


def only_checks(fn: F) -> F:
    """Mark ``fn`` as reading values only to check them: what it reads decides whether it raises
    (or warns), never what is computed."""
    CHECKS.add(fn.__code__)
    return fn
