"""One exception hierarchy: every error tapekit raises is a ``TapekitError``.

Each message says what happened and what to do about it.
"""

from __future__ import annotations

import math
import numbers
from typing import Callable


class TapekitError(Exception):
    """Base class of every error raised by tapekit."""


class ShapeError(TapekitError, ValueError):
    """Operand shapes do not fit the op (broadcasting, matmul, reshape, seeds)."""


class AxisError(TapekitError, ValueError, IndexError):
    """An axis argument is out of range or repeated; both a ``ValueError`` and an ``IndexError``, as
    numpy's ``AxisError`` is, so code written for numpy catches it."""


class IndexingError(TapekitError, IndexError):
    """An index is out of range or of a kind tapekit cannot differentiate."""


class DeviceMismatchError(TapekitError, ValueError):
    """Tensors on different devices met in one op."""


class DeviceUnavailableError(TapekitError, RuntimeError):
    """The requested device (CuPy, a GPU, array_api_strict) is not available here."""


class DTypeError(TapekitError, TypeError):
    """A dtype that the op cannot take (for example tracing an integer tensor)."""


class InvalidArgumentError(TapekitError, ValueError):
    """An argument has a value the call cannot use."""


class OperandError(TapekitError, TypeError):
    """An op got an operand of a kind it cannot take (a string, a list where a tensor goes)."""


class TapeError(TapekitError):
    """Base class of the errors about tapes."""


class TapeMovedError(TapeError):
    """A tensor's OwnedTape was moved into another op's output and cannot record again."""


class TapeConsumedError(TapeError):
    """The records a backward needs were consumed by an earlier backward."""


class TapePolicyError(TapeError):
    """Tapes of different policies met, or a policy cannot do what was asked."""


class BackwardError(TapekitError, ValueError):
    """``backward`` cannot start (a non-scalar output without a seed, no outputs, no tape), or a
    backward rule failed; then nothing changed, and the message names the record."""


class SecondOrderError(TapekitError, TypeError):
    """A backward recorded for a second derivative (``create_graph=True``, ``tk.grad`` of
    ``tk.grad``, ``tk.hessian``) met an op whose rule has no recorded form. (A non-scalar ``f`` given
    to ``tk.grad`` raises ``ShapeError``, an integer input ``DTypeError``.)"""


class TracedOutsideError(SecondOrderError):
    """Forward mode (``tk.jvp``, ``jacfwd``) met a function that uses a tensor traced outside it: its
    tangents, computed on arrays, could not depend on that tensor, so a gradient through them would
    be zero. ``tk.hvp`` and ``tk.hessian`` take it as their cue for reverse mode over reverse mode."""


class NonFiniteError(TapekitError, FloatingPointError):
    """Inside ``tk.detect_anomaly()``: an op or a backward rule made a NaN or an infinity. The
    message names the line that made the op, the record and its operands' ranges."""


class MissingGradientError(TapekitError, KeyError):
    """A ``Gradients`` lookup found no entry; the message says why."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnusedParamsError(TapekitError):
    """An optimizer update found parameters with no gradient (the others were updated)."""


class ModelFileError(TapekitError, ValueError):
    """A saved model file does not match the model (names, shapes) or is unsafe to load."""


class IncompleteTapeWarning(UserWarning):
    """A backward cannot see part of its output's history: some gradients will be missing."""


class GradientCheckError(TapekitError, AssertionError):
    """Analytic and numerical gradients disagree (``tk.check_grads``)."""


def checked_number(value: object, name: str, ok: Callable[[float], bool], wanted: str) -> float:
    """``value`` as a float when it is a finite real number (not a bool) that ``ok`` accepts;
    otherwise ``InvalidArgumentError`` saying what ``name`` must be."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or not ok(value):
        raise InvalidArgumentError(f"{name} must be {wanted}, got {value!r}")
    return float(value)


def checked_flag(value: object, name: str) -> bool:
    """``value`` when it is ``True`` or ``False`` (numpy's too); otherwise ``InvalidArgumentError``:
    Python takes any text as true, so ``retain="no"`` would keep the records."""
    if type(value).__name__ not in ("bool", "bool_"):  # numpy calls its bool type bool_ before 2.0
        raise InvalidArgumentError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def checked_function(f: object, what: str) -> Callable:
    """``f`` when it can be called; else ``OperandError`` (``tk.grad(f)``, not ``tk.grad(f(x))``)."""
    if not callable(f):
        raise OperandError(f"{what} takes a function first, got {f!r}: pass the function itself, as in {what}(f) or "
                           f"{what}(lambda x: (x * x).sum(), ...), not its value")
    return f
