"""``Module``: a model is an object whose tensor attributes are its parameters.

Parameters are found by attribute, in the order they were set, through nested modules and lists
(or tuples) of modules and tensors; attributes whose names start with ``_`` are private and not
searched. Two ways to tag a training step:

- input tagging (dfdx): ``model(x.trace(tk.OwnedTape(model.alloc_grads())))``: the input's tape
  travels through the model and picks up every op;
- parameter tagging: ``model.trace(tape)(x)``: a view of the model whose parameters carry ``tape``
  (a ``UnionTape``, ``ArcTape`` or ``GlobalTape``), so only ops that touch a parameter record.

Copies and pickles: ``copy.deepcopy(model)`` is a model of its own: new parameter tensors (new
ids, copied values) on the same devices, so a copy and its original used in one program never share
a gradient entry. A pickle round trip keeps the structure, values and names (new ids too).
``copy.copy(model)`` is a new module object holding the same parameters: training one trains both.
A traced view refuses all three: a tape is not a value.
"""

from __future__ import annotations

import itertools
import os
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..devices import Cpu, Device, checked_device
from ..errors import InvalidArgumentError, OperandError, TapeError, TapePolicyError, checked_flag
from ..gradients import Gradients
from ..tapes.checkpoint import all_or_nothing, inside_all_or_nothing
from ..tensor import Tensor
from . import files

if TYPE_CHECKING:
    from ..optim import Optimizer

_default_device: Device | None = None


def device_or_default(device: Device | None) -> Device:
    """``device``, or the device layers share when none is given (``tk.Cpu(seed=0)``, made once)."""
    global _default_device
    if device is not None:
        return checked_device(device, "a layer's device")
    if _default_device is None:
        _default_device = Cpu(seed=0)
    return _default_device


def branch(x: Tensor) -> Tensor:
    """``x`` ready for a second use in a module. An OwnedTape has one owner, so the first op on ``x``
    takes its tape: the second use gets ``x.retaped()``, whose fresh tape merges back into ``x``'s
    when the branches meet (keep ``x`` on the left there). Other tapes are shared: ``x`` itself."""
    tape = x.tape
    return x.retaped() if tape is not None and tape.moves else x


class Module:
    """Base class of models and layers: subclasses set parameters (tensors) and sub-modules as
    attributes and define ``forward(x)``; ``model(x)`` calls it."""

    training: bool = True
    takes_tensor: bool = False  # True: a call with anything but a tensor is refused (tapekit's own layers)
    _traced_from: "Module | None" = None

    def forward(self, x: Any) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} must define forward(x)")

    def __call__(self, x: Any) -> Tensor:
        """``forward(x)``, all or nothing: if it raises (a later layer does not fit), the tapes of
        ``x`` and of the parameters are as they were before the call, and ``x`` keeps its tape."""
        if self.takes_tensor and not isinstance(x, Tensor):
            raise OperandError(f"{type(self).__name__} takes a tensor, got a {type(x).__name__}; make one with "
                               f"dev.tensor(values)")
        if inside_all_or_nothing():  # a call inside another: the outer one puts everything back
            return self.forward(x)
        with all_or_nothing(itertools.chain(_given(x), held_tensors(self))):
            return self.forward(x)

    # -- parameters -------------------------------------------------------------------------
    def named_parameters(self) -> list[tuple[str, Tensor]]:
        """``(name, tensor)`` for every parameter, in attribute order; a shared tensor appears once."""
        seen: set[int] = set()
        named = []
        for name, p in _walk(self, ""):
            if p.id not in seen:
                seen.add(p.id)
                named.append((name, p))
        return named

    def parameters(self) -> list[Tensor]:
        return [p for _, p in self.named_parameters()]

    def alloc_grads(self) -> Gradients:
        """Zeroed gradient buffers for every parameter, with the parameters as the leaf set. A
        backward accumulates into them in place (on numpy and CuPy it writes matmul and bias
        gradients straight into them), so a training loop that reuses them allocates less."""
        params = self.parameters()
        grads = Gradients(leaves=params)
        for p in params:
            grads.alloc(p)
        return grads

    def zero_grads(self, grads: Gradients) -> Gradients:
        """Zero ``grads`` in place for the next step (buffers of missing parameters are allocated)."""
        if not isinstance(grads, Gradients):
            raise OperandError(f"zero_grads takes the Gradients model.alloc_grads() made, got {type(grads).__name__}")
        outside = [name for name, p in self.named_parameters() if grads.leaves is not None and p.id not in grads.leaves]
        if outside:
            raise InvalidArgumentError(f"zero_grads: these Gradients are another model's: their leaf set leaves out "
                                       f"{', '.join(outside[:3])}; zero this model's own (model.alloc_grads())")
        grads.zero_()
        for p in self.parameters():
            if p not in grads:
                grads.alloc(p)
        return grads

    # -- tagging ----------------------------------------------------------------------------
    def trace(self, tape: Any) -> "Module":
        """A view of this model whose parameters carry ``tape`` (same ids, same storage).

        The tape must be one several tensors can hold: ``tk.UnionTape()``, ``tk.ArcTape()`` or a
        ``tk.GlobalTape()``. Optimizers and ``load`` called with the view act on this model."""
        if tape is None or getattr(tape, "moves", False):
            raise TapePolicyError(
                "model.trace(tape) puts one tape on every parameter, but an OwnedTape has one owner. Use "
                "model.trace(tk.UnionTape(model.alloc_grads())), or tag the input instead: "
                "model(x.trace(tk.OwnedTape(model.alloc_grads()))).")
        return self._view(lambda p: p.trace(tape))

    def _view(self, swap: Callable[[Tensor], Tensor]) -> "Module":
        """A shallow copy of this model with every parameter replaced by ``swap(parameter)``."""
        view = object.__new__(type(self))
        vars(view).update(vars(self), _traced_from=self._origin())
        for name, value in _public(self):
            setattr(view, name, _swapped(value, swap))
        return view

    def _origin(self) -> "Module":
        """The model a traced view was made from (the model itself when it is not a view)."""
        return self._traced_from or self

    # -- copies and pickles -----------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        """The attributes, for ``copy`` and ``pickle``; a traced view refuses."""
        if self._traced_from is not None:
            raise TapeError(f"cannot copy or pickle this {type(self).__name__}: it is a view made by "
                            f"model.trace(tape), whose parameters carry the tape, and a tape is not a value. "
                            f"Copy or pickle the model itself.")
        return vars(self)

    # -- modes ------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Training mode (dropout active) for this module and every sub-module."""
        mode = checked_flag(mode, "train's mode")
        for module in _modules(self):
            module.training = mode
        return self

    def eval(self) -> "Module":
        """Evaluation mode (dropout off) for this module and every sub-module."""
        return self.train(False)

    # -- files ------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike, optimizer: "Optimizer | None" = None) -> None:
        """Write the parameters to ``path`` as an ``.npz`` file, one array per parameter name; with
        ``optimizer``, a checkpoint: its kind, settings and state (momentum, Adam's moments and step
        counts) too. The file is replaced only once the new one is complete and on disk: a save
        that fails (a full disk, an interrupt) leaves the old file as it was."""
        files.save(self._origin().named_parameters(), path, optimizer)

    def load(self, path: str | os.PathLike, optimizer: "Optimizer | None" = None) -> "Module":
        """Read parameters saved by ``save``, and with ``optimizer`` its state from a checkpoint, so
        that training goes on as if it had not stopped (the optimizer must be of the same kind and
        settings; change ``opt.lr`` after loading to go on with another). A file whose names, shapes
        or dtypes do not match, whose optimizer differs, or that holds pickled objects, raises
        ``ModelFileError`` and leaves the model and the optimizer unchanged. Without ``optimizer``,
        a checkpoint's parameters alone are read."""
        files.load(self._origin().named_parameters(), path, optimizer)
        return self

    # -- description ------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The arguments shown inside this module's repr."""
        return ""

    def __repr__(self) -> str:
        head = f"{type(self).__name__}({self.extra_repr()}"
        children = [(name, m) for name, m in _members(self) if isinstance(m, Module)]
        if not children:
            return head + ")"
        lines = [f"  ({name}): " + repr(m).replace("\n", "\n  ") for name, m in children]
        return "\n".join([head, *lines, ")"])


def _public(module: Module) -> Iterator[tuple[str, Any]]:
    return ((name, value) for name, value in vars(module).items() if not name.startswith("_"))


def _given(x: Any) -> Iterator[Any]:
    """The tensors of a module's input: itself, or those in the tuples, lists and dicts it is made of."""
    if isinstance(x, (tuple, list)):
        for item in x:
            yield from _given(item)
    elif isinstance(x, dict):
        for item in x.values():
            yield from _given(item)
    else:
        yield x


def held_tensors(module: Module) -> Iterator[Tensor]:
    """Every tensor ``module`` and the modules inside it hold (a shared one as often as it is
    held), without the names ``_walk`` makes: what a call's ``all_or_nothing`` notes (4 us for an
    MLP of two layers, against 10 for ``parameters()``: measured)."""
    for _, value in _public(module):
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if type(item) is Tensor:
                yield item
            elif isinstance(item, Module):
                yield from held_tensors(item)


def _members(module: Module) -> Iterator[tuple[str, Any]]:
    """Public attributes, lists and tuples unrolled as ``name.0``, ``name.1``, ..."""
    for name, value in _public(module):
        if isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                yield f"{name}.{i}", item
        else:
            yield name, value


def _walk(module: Module, prefix: str) -> Iterator[tuple[str, Tensor]]:
    for name, value in _members(module):
        if isinstance(value, Tensor):
            yield prefix + name, value
        elif isinstance(value, Module):
            yield from _walk(value, f"{prefix}{name}.")


def _modules(module: Module) -> Iterator[Module]:
    yield module
    for _, value in _members(module):
        if isinstance(value, Module):
            yield from _modules(value)


def _swapped(value: Any, swap: Callable[[Tensor], Tensor]) -> Any:
    if isinstance(value, Tensor):
        return swap(value)
    if isinstance(value, Module):
        return value._view(swap)
    if isinstance(value, (list, tuple)):
        return type(value)(_swapped(item, swap) for item in value)
    return value
