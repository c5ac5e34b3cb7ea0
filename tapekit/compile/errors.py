"""The errors of ``tk.compile``: ``fn`` did something a recorded program cannot repeat, or
``fuse=True`` lacks numba. They live in a module of their own so that the recorder, which raises
them, and the package, which exports them, both import it without importing each other."""

from __future__ import annotations

from ..errors import TapekitError


class CompileError(TapekitError):
    """``fn`` did something a recorded program cannot repeat (it read a value while recording)."""


class FuseUnavailable(CompileError):
    """``tk.compile(fn, fuse=True)`` needs numba, the optional extra ``tapekit[fuse]``."""
