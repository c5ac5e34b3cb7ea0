"""What one training step's tape holds under input tagging and under parameter tagging."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..errors import InvalidArgumentError, OperandError
from ..tapes import OwnedTape, UnionTape
from ..tensor import Tensor
from .module import Module

TAGGINGS = ("input", "parameters")


@dataclass(frozen=True)
class StepFootprint:
    """The tape of one step just before backward: how many records it holds, which ops they are
    (oldest first), and its bytes (arrays the records keep for backward plus gradient buffers)."""

    tagging: str
    records: int
    nbytes: int
    ops: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.tagging} tagging: {self.records} records, {self.nbytes:,} bytes ({', '.join(self.ops)})"


def step_footprint(model: Module, x: Tensor, loss: Callable[[Tensor], Tensor],
                   tagging: str = "parameters") -> StepFootprint:
    """Run one forward step of ``model`` on ``x`` and ``loss`` (a function of the model's output)
    and measure its tape, without running backward.

    ``tagging="input"`` traces ``x`` with ``tk.OwnedTape(model.alloc_grads())``, so every op from
    the input on records; ``"parameters"`` traces the model with ``tk.UnionTape(model.alloc_grads())``,
    so ops that touch no parameter (on the input before the first layer with parameters) record nothing.
    """
    if tagging not in TAGGINGS:
        raise InvalidArgumentError(f"tagging must be one of {TAGGINGS}, got {tagging!r}")
    if not isinstance(model, Module) or not isinstance(x, Tensor) or not callable(loss):
        raise OperandError("step_footprint takes a model, an input tensor and a loss: a function of the model's "
                           "output, such as lambda out: out.sum()")
    x = x.detach()  # a traced x would merge the caller's tape into the one measured, and keep it
    grads = model.alloc_grads()
    if tagging == "input":
        out: Any = loss(model(x.trace(OwnedTape(grads))))
    else:
        out = loss(model.trace(UnionTape(grads))(x))
    tape = getattr(out, "tape", None)
    if tape is None:
        raise OperandError(f"step_footprint: the loss returned {type(out).__name__} with no tape; compute it from "
                           f"the model's output, with tapekit's ops")
    return StepFootprint(tagging, len(tape), tape.nbytes, tuple(rec.name for rec in tape.records))
