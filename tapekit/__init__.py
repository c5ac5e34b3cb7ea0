"""tapekit: reverse-mode autodiff whose gradient tape is a first-class, swappable, visible object."""

from .anomaly import detect_anomaly
from .backward import backward
from .callsite import hide_numpy_warnings_inside_tapekit as _hide_numpy_warnings
from .check import GradCheck, check_grads
from .devices import Cpu, Cuda, Device
from .errors import (AxisError, BackwardError, DeviceMismatchError, DeviceUnavailableError, DTypeError,
                     GradientCheckError, IncompleteTapeWarning, IndexingError, InvalidArgumentError,
                     MissingGradientError, ModelFileError, NonFiniteError, OperandError, SecondOrderError, ShapeError,
                     TapeConsumedError, TapeError, TapekitError, TapeMovedError, TapePolicyError, TracedOutsideError,
                     UnusedParamsError)
from .forward import jacfwd, jvp
from .gradients import Gradients
from .inspect import explain, tapes
from .losses import *  # noqa: F401,F403  (each module's __all__ names its public functions)
from .ops import *  # noqa: F401,F403
from . import losses as _losses, ops as _ops
from .tapes import ArcTape, GlobalTape, NoneTape, OwnedTape, Tape, UnionTape
from .tensor import Tensor
from .transforms import grad, hessian, hvp, jacobian, vjp
from . import nn, optim
from .compile import CompileError, FrozenTensorWarning, RecompileWarning
from .compile import compile  # noqa: A004  (tk.compile shadows the builtin only as tk.compile)

__version__ = "0.1.0"

_hide_numpy_warnings()


def __getattr__(name: str):
    """``tk.viz`` and ``tk.widgets`` load on first use: they import graphviz, matplotlib and ipywidgets."""
    if name in ("viz", "widgets"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tapekit' has no attribute {name!r}")


__all__ = [
    "Cpu", "Cuda", "Device", "Tensor", "Gradients", "backward", "detect_anomaly", "check_grads", "GradCheck",
    "explain", "tapes", "nn", "optim", "compile", "CompileError",
    "jvp", "jacfwd", "grad", "vjp", "jacobian", "hessian", "hvp",
    "Tape", "NoneTape", "OwnedTape", "ArcTape", "UnionTape", "GlobalTape",
    "TapekitError", "ShapeError", "AxisError", "IndexingError", "DeviceMismatchError", "DeviceUnavailableError",
    "DTypeError", "InvalidArgumentError", "OperandError", "TapeError", "TapeMovedError", "TapeConsumedError",
    "TapePolicyError", "BackwardError", "SecondOrderError", "TracedOutsideError", "NonFiniteError",
    "MissingGradientError",
    "UnusedParamsError", "ModelFileError", "GradientCheckError", "IncompleteTapeWarning",
    "FrozenTensorWarning", "RecompileWarning",
] + _losses.__all__ + _ops.__all__
