"""Activations as modules (no parameters), for use in ``Sequential``."""

from __future__ import annotations

from ..tensor import Tensor
from .module import Module


class ReLU(Module):
    """``max(x, 0)``."""

    takes_tensor = True

    def forward(self, x: Tensor) -> Tensor:
        return x.relu()


class Tanh(Module):
    """``tanh(x)``."""

    takes_tensor = True

    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(Module):
    """``1 / (1 + exp(-x))``."""

    takes_tensor = True

    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()
