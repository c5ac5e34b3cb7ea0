"""Reads of values that only check them.

While ``tk.compile`` records a step, a value that Python reads is frozen into the program at the
first call's value. tapekit's own code reads values in two kinds of places: checks, whose result
only decides whether to raise (labels in range, no negative integer power, anomaly mode); and ops
that compute with what they read (the positions an index tensor or a mask picks, repeat counts),
which a fixed program cannot do. ``tk.compile`` refuses the second with a ``CompileError``. Of the
checks, ``each_call`` marks those a compiled step runs at every call (a label out of range would
otherwise give a wrong loss without a word), and ``only_checks`` those that may run on the first
call's values alone.
"""

from __future__ import annotations

import functools
from types import CodeType
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable)

CHECKS: set[CodeType] = set()  # the code of the functions marked ``only_checks``


def only_checks(fn: F) -> F:
    """Mark ``fn`` as reading values only to check them: what it reads decides whether it raises
    (or warns), never what is computed."""
    CHECKS.add(fn.__code__)
    return fn


def each_call(check: F) -> F:
    """Mark ``check`` (a function that reads values only to raise, returning None) as one that a
    compiled step runs at every call: while ``tk.compile`` records, a call of it with an array being
    recorded (which names its recorder: ``recorded_in``) becomes a line of the program. Called with
    none (constants of the program: a list of labels), it runs once, as ``only_checks``' do."""
    only_checks(check)

    @functools.wraps(check)
    def checked(*args: Any) -> None:
        for a in args:
            recorder = getattr(a, "recorded_in", None)
            if recorder is not None:
                return recorder.call("call", recorder.bind(check, check.__name__), check, args, {})
        return check(*args)

    return checked  # type: ignore[return-value]
