"""Optimizers: ``Sgd`` and ``Adam``. ``opt.update(model, grads)`` moves every parameter that has a
gradient one step, replacing its storage (tensors stay immutable; ids stay the same, so a reused
``Gradients`` keeps working).

A parameter missing from ``grads`` does not stop the others from updating; the call then raises
``UnusedParamsError`` naming it. An entry of zeros is a gradient like any other: a parameter the
step did not use, whose entry ``model.alloc_grads()`` made, still moves under momentum, Adam's
moments or weight decay (as after PyTorch's ``zero_grad(set_to_none=False)``). Gradients of the
wrong shape raise ``ShapeError`` before any change.

An optimizer keeps each parameter's state (momentum, Adam's moments and step count) beside the
parameter itself, so copies and pickles carry the parameters along: ``copy.deepcopy((model, opt))``
or a pickle of ``(model, opt)`` gives an optimizer whose state belongs to the copied model's
parameters (new ids), in whichever order the two appear. A deep copy or pickle of the optimizer
alone carries copies of the parameters that no model holds, so copy it with its model. A shallow
``copy.copy(opt)`` keeps the same parameters, with state of its own.

``model.save(path, optimizer=opt)`` writes a checkpoint: the parameters and the optimizer's kind,
settings and state, in one file; ``model.load(path, optimizer=opt)`` into a fresh model and an
optimizer made with the same settings resumes training as if it had not stopped (to the bit).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .devices import dtype_name, is_floating
from .errors import (DeviceMismatchError, DTypeError, InvalidArgumentError, ShapeError, UnusedParamsError,
                     checked_flag, checked_number)
from .gradients import Gradients
from .nn.module import Module
from .tensor import Tensor


class Optimizer:
    """Base class: checks and weight decay here, the update rule in ``_step``."""

    def __init__(self, model: Module, lr: float, weight_decay: float) -> None:
        if not isinstance(model, Module):
            raise InvalidArgumentError(f"an optimizer takes the model to train, got a {type(model).__name__}")
        self.lr, self.weight_decay = lr, weight_decay
        self._check_settings()
        # id: (parameter, state), made now for the model's parameters (so a compiled step's first call
        # already sees the state it will update) and at the first update for any other
        self._state: dict[int, tuple[Tensor, dict[str, Any]]] = {
            p.id: (p, self._init_state(p)) for p in model._origin().parameters()}

    def _check_settings(self) -> None:
        """The settings, checked when the optimizer is made and before each update (they may be set
        in between: ``opt.lr = 1e-4``)."""
        self.lr = checked_number(self.lr, "lr", lambda v: v > 0, "a positive number")
        self.weight_decay = checked_number(self.weight_decay, "weight_decay", lambda v: v >= 0, "a number, 0 or more")

    def update(self, model: Module, grads: Gradients) -> None:
        """One step for every parameter of ``model`` that has an entry in ``grads``."""
        self._check_settings()
        if not isinstance(model, Module):
            raise InvalidArgumentError(f"update takes the Module whose parameters to step, got a "
                                       f"{type(model).__name__}")
        if not isinstance(grads, Gradients):
            raise InvalidArgumentError(f"update takes the Gradients a backward returned, got a {type(grads).__name__}")
        ready, missing = [], []
        for name, p in model._origin().named_parameters():
            g = grads.get(p)
            if isinstance(g, Tensor):  # a recorded backward's gradient (create_graph=True): its values
                g = g.data
            if g is None:
                missing.append(name)
            else:
                ready.append((p, _usable(name, p, g)))
        if missing and not ready:
            raise UnusedParamsError(
                f"none of the model's {len(missing)} parameters has an entry in these Gradients; nothing was updated. "
                f"Pass the Gradients of a backward of this model's output (traced with model.trace(tape), or its "
                f"input with tk.OwnedTape(model.alloc_grads())), not another model's.")
        for p, g in ready:
            if self.weight_decay:
                g = g + self.weight_decay * p.data
            if p.id not in self._state:
                self._state[p.id] = (p, self._init_state(p))
            new = self._step(p.device.xp, p.data, g, self._state[p.id][1])
            p.data = new if new.dtype == p.dtype else p.device.xp.astype(new, p.dtype)
        if missing:
            raise UnusedParamsError(
                f"no gradient for {len(missing)} parameter(s): {', '.join(missing)}; the other parameters were "
                f"updated. The backward did not reach them: trace the parameters with model.trace(tape), or "
                f"the input with tk.OwnedTape(model.alloc_grads()), which holds an entry for every parameter.")

    def _init_state(self, p: Tensor) -> dict[str, Any]:
        return {}

    def _odd_state(self, key: str, values: np.ndarray) -> str:
        """Why a checkpoint's state ``key`` of these ``values`` could come from no run ('' if it could)."""
        return ""

    def _step(self, xp: Any, w: Any, g: Any, state: dict[str, Any]) -> Any:
        """The parameter's new values from its values ``w``, gradient ``g`` and its state, whose
        arrays it replaces (never writes into), so a shallow copy's state stays its own."""
        raise NotImplementedError

    # -- checkpoints (model.save(path, optimizer=opt), model.load(path, optimizer=opt)) --------
    def _settings(self) -> dict[str, Any]:
        """The settings a checkpoint records and a load checks: the public attributes."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def _state_of(self, p: Tensor) -> dict[str, Any]:
        """``p``'s state: what this optimizer keeps for it, or would start from at its first update."""
        held = self._state.get(p.id)
        return dict(held[1]) if held is not None else self._init_state(p)

    def _restore(self, p: Tensor, state: dict[str, Any]) -> None:
        """Make ``state`` ``p``'s, in the dict that holds it (a compiled step reads the state there)."""
        self._state.setdefault(p.id, (p, {}))[1].update(state)

    # -- copies and pickles -----------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        """The settings, and a list of (parameter, its state): the ids are made again from the
        parameters on the way back, since copied and unpickled tensors have new ones."""
        return {**vars(self), "_state": [(p, dict(state)) for p, state in self._state.values()]}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        self._state = {p.id: (p, s) for p, s in state["_state"]}


def _usable(name: str, p: Tensor, g: Any) -> Any:
    """``g``, checked before any parameter changes: the parameter's shape, floating, on its device."""
    if tuple(g.shape) != p.shape:
        raise ShapeError(f"the gradient for {name} has shape {tuple(g.shape)} but the parameter has {p.shape}; "
                         f"nothing was updated. Pass the Gradients of this model's backward.")
    if not is_floating(g.dtype):
        raise DTypeError(f"the gradient for {name} has dtype {dtype_name(g.dtype)}, not a floating one; nothing was "
                         f"updated. Pass the Gradients of this model's backward.")
    recording = getattr(g, "recorded_in", None) or getattr(p.data, "recorded_in", None)  # tk.compile's tracers
    if not recording and isinstance(g, (np.ndarray, np.generic)) != isinstance(p.data, (np.ndarray, np.generic)):
        raise DeviceMismatchError(f"the gradient for {name} is a {type(g).__name__}, but the parameter is on "
                                  f"{p.device!r}; nothing was updated. Move it with .to(device) first.")
    return g


class Sgd(Optimizer):
    """Stochastic gradient descent, with optional momentum (PyTorch's and dfdx's form):
    ``v = momentum·v + g``; ``w -= lr·v``, or ``w -= lr·(g + momentum·v)`` with Nesterov.
    ``weight_decay`` adds ``weight_decay·w`` to ``g`` first."""

    def __init__(self, model: Module, lr: float, momentum: float = 0.0, nesterov: bool = False,
                 weight_decay: float = 0.0) -> None:
        self.momentum, self.nesterov = momentum, nesterov
        super().__init__(model, lr, weight_decay)

    def _check_settings(self) -> None:
        super()._check_settings()
        self.momentum = checked_number(self.momentum, "momentum", lambda v: v >= 0, "a number, 0 or more")
        self.nesterov = checked_flag(self.nesterov, "nesterov")
        if self.nesterov and not self.momentum:
            raise InvalidArgumentError("nesterov=True needs a positive momentum")

    def _init_state(self, p: Tensor) -> dict[str, Any]:
        return {"velocity": p.device.xp.zeros_like(p.data)} if self.momentum else {}

    def _step(self, xp: Any, w: Any, g: Any, state: dict[str, Any]) -> Any:
        if self.momentum:
            v = state["velocity"] = self.momentum * state.get("velocity", 0.0) + g  # 0: momentum set since
            g = g + self.momentum * v if self.nesterov else v
        return w - self.lr * g

    def __repr__(self) -> str:
        return (f"Sgd(lr={self.lr}, momentum={self.momentum}, nesterov={self.nesterov}, "
                f"weight_decay={self.weight_decay})")


class Adam(Optimizer):
    """Adam (Kingma & Ba): ``m = β₁m + (1-β₁)g``, ``v = β₂v + (1-β₂)g²``, then
    ``w -= lr·m̂/(√v̂ + eps)`` with ``m̂ = m/(1-β₁ᵗ)``, ``v̂ = v/(1-β₂ᵗ)``, ``t`` counting each
    parameter's steps. ``weight_decay`` adds ``weight_decay·w`` to ``g`` first (L2, as PyTorch's Adam)."""

    def __init__(self, model: Module, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        self.betas, self.eps = betas, eps
        super().__init__(model, lr, weight_decay)

    def _check_settings(self) -> None:
        super()._check_settings()
        betas = self.betas
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise InvalidArgumentError(f"betas must be two numbers, as a tuple (0.9, 0.999), got {betas!r}")
        self.betas = tuple(checked_number(b, "betas", lambda v: 0 <= v < 1, "a number in [0, 1)") for b in betas)
        self.eps = checked_number(self.eps, "eps", lambda v: v > 0, "a positive number")

    def _init_state(self, p: Tensor) -> dict[str, Any]:
        xp = p.device.xp
        return {"t": 0, "m": xp.zeros_like(p.data), "v": xp.zeros_like(p.data)}

    def _odd_state(self, key: str, values: np.ndarray) -> str:
        return "holds negative values; v is a mean of squares" if key == "v" and np.any(values < 0) else ""

    def _step(self, xp: Any, w: Any, g: Any, state: dict[str, Any]) -> Any:
        b1, b2 = self.betas
        state["t"] = t = state["t"] + 1
        m = state["m"] = b1 * state["m"] + (1 - b1) * g
        v = state["v"] = b2 * state["v"] + (1 - b2) * g * g
        m_hat = m / (1 - b1 ** t)
        v_hat = v / (1 - b2 ** t)
        return w - self.lr * m_hat / (xp.sqrt(v_hat) + self.eps)

    def __repr__(self) -> str:
        return f"Adam(lr={self.lr}, betas={self.betas}, eps={self.eps}, weight_decay={self.weight_decay})"
