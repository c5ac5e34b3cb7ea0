"""The one error of ``tk.compile``: ``fn`` did something a recorded program cannot repeat. It lives
in a module of its own so that the recorder, which raises it, and the package, which exports it,
both import it without importing each other."""

from __future__ import annotations

from ..errors import TapekitError


class CompileError(TapekitError):
    """``fn`` did something a recorded program cannot repeat (it read a value while recording)."""


class FuseUnavailable(CompileError):
    """``tk.compile(fn, fuse=True)`` needs numba, the optional extra ``tapekit[fuse]``."""
