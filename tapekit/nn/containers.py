"""Modules made of modules: ``Sequential`` (one after another) and ``Residual`` (``x + f(x)``)."""

from __future__ import annotations

from typing import Iterator

from ..errors import InvalidArgumentError, ShapeError
from ..tensor import Tensor
from .module import Module, branch


class Sequential(Module):
    """Apply ``layers`` in order; its parameters are named ``layers.0.weight``, ``layers.1.bias``, ..."""

    def __init__(self, *layers: Module) -> None:
        for i, layer in enumerate(layers):
            if not isinstance(layer, Module):
                raise InvalidArgumentError(f"Sequential takes modules; argument {i} is a {type(layer).__name__}")
        self.layers = list(layers)

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, i: int) -> Module:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[Module]:
        return iter(self.layers)


class Residual(Module):
    """``x + module(x)``: the module's output must have the input's shape."""

    takes_tensor = True

    def __init__(self, module: Module) -> None:
        if not isinstance(module, Module):
            raise InvalidArgumentError(f"Residual wraps a module, got a {type(module).__name__}")
        self.module = module

    def forward(self, x: Tensor) -> Tensor:
        y = self.module(branch(x))
        if y.shape != x.shape:  # x + y would broadcast into another shape
            raise ShapeError(f"Residual: its module made shape {y.shape} from an input of shape {x.shape}; x + "
                             f"module(x) needs the input's shape back")
        return x + y
