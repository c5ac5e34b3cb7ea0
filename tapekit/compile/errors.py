"""The errors of ``tk.compile``: ``fn`` did something a recorded program cannot repeat, or
``fuse=True`` lacks numba; and its warnings, that a tensor's values are frozen, or that it records
again and again. They live in a module of their own so that the recorder, which raises them, and
the package, which exports them, both import it without importing each other."""

from __future__ import annotations

from ..errors import TapekitError


class CompileError(TapekitError):
    """``fn`` did something a recorded program cannot repeat (it read a value while recording)."""


class FrozenTensorWarning(UserWarning):
    """A compiled step uses a tensor made before the call that ``tk.compile`` did not find among its
    inputs: its values are constants of the program, frozen at the first call's."""


class RecompileWarning(UserWarning):
    """A compiled step has recorded many programs: something in its key changes from call to call."""


class FuseUnavailable(CompileError):
    """``tk.compile(fn, fuse=True)`` needs numba, the optional extra ``tapekit[fuse]``."""
