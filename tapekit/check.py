"""``check_grads``: compare tapekit's gradients with central finite differences in float64."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .backward import backward
from .errors import GradientCheckError, OperandError, checked_number
from .tapes import UnionTape
from .tensor import Tensor


@dataclass(frozen=True)
class GradCheck:
    """The worst mismatch between backward's gradient and finite differences."""

    ok: bool
    input: int
    index: tuple[int, ...]
    analytic: float
    numeric: float
    error: float

    def __str__(self) -> str:
        verdict = "gradients match" if self.ok else "GRADIENTS DIFFER"
        return (f"{verdict}: worst at input {self.input}, index {self.index}: backward {self.analytic:.8g}, "
                f"finite differences {self.numeric:.8g} (error {self.error:.3g})")


def check_grads(f: Callable[..., Tensor], *inputs: Tensor, eps: float = 1e-6, atol: float = 1e-6,
                rtol: float = 1e-5, raise_on_failure: bool = True) -> GradCheck:
    """Check ``f``'s gradients at ``inputs`` against central finite differences, in float64.

    A one-value output is used as is; a larger one is projected on fixed random weights. Returns the worst
    mismatch; raises ``GradientCheckError`` when it is beyond ``atol + rtol * |numeric|``. A value that is
    not finite (a NaN gradient, a NaN or infinite difference) is a mismatch: nothing can vouch for it.
    """
    eps, atol, rtol = _checked(f, inputs, eps, atol, rtol)
    device = inputs[0].device
    points = [t.numpy().astype(np.float64) for t in inputs]
    consts = [device.tensor(p, dtype="float64") for p in points]
    tape = UnionTape()
    out = _output(f, [c.trace(tape) for c in consts])
    weights = np.ones(out.shape) if out.size == 1 else np.random.default_rng(0).standard_normal(out.shape)
    grads = backward([out], [device.tensor(weights, dtype="float64")])

    def value(i: int, point: np.ndarray) -> float:
        args = [device.tensor(point, dtype="float64") if j == i else c for j, c in enumerate(consts)]
        return float(np.sum(_output(f, args).numpy() * weights))

    worst = GradCheck(True, 0, (), 0.0, 0.0, -1.0)
    for i, (c, p) in enumerate(zip(consts, points)):
        got = grads.get(c)
        analytic = np.zeros_like(p) if got is None else device.to_numpy(got).astype(np.float64)
        for index in np.ndindex(*p.shape):
            up, down = p.copy(), p.copy()
            up[index] += eps
            down[index] -= eps
            numeric = (value(i, up) - value(i, down)) / (2 * eps)
            err = abs(analytic[index] - numeric)
            bad = not err <= atol + rtol * abs(numeric)  # a NaN is bad
            if (bad and worst.ok) or (bad == (not worst.ok) and _rank(err) > _rank(worst.error)):
                worst = GradCheck(not bad, i, tuple(int(k) for k in index), float(analytic[index]), numeric, err)
    if not worst.ok and raise_on_failure:
        raise GradientCheckError(str(worst))
    return worst


def _rank(err: float) -> float:
    """How bad an error is: a NaN worst of all."""
    return math.inf if math.isnan(err) else err


def _checked(f: Callable, inputs: tuple, eps: float, atol: float, rtol: float) -> tuple[float, float, float]:
    """``check_grads``' arguments, refused with a tapekit error unless they can be used."""
    if not callable(f):
        raise OperandError(f"check_grads takes a function of tensors first, got a {type(f).__name__}")
    if not inputs or not all(isinstance(t, Tensor) for t in inputs):
        got = ", ".join(type(t).__name__ for t in inputs) or "none"
        raise OperandError(f"check_grads checks f at tensors: pass them after f (check_grads(f, x, y)), got {got}")
    return (checked_number(eps, "eps", lambda v: v > 0, "a small positive number (the finite-difference step)"),
            checked_number(atol, "atol", lambda v: v >= 0, "a number >= 0"),
            checked_number(rtol, "rtol", lambda v: v >= 0, "a number >= 0"))


def _output(f: Callable, args: list) -> Tensor:
    out = f(*args)
    if not isinstance(out, Tensor):
        raise OperandError(f"check_grads needs f to return a tensor, got {type(out).__name__}")
    return out
