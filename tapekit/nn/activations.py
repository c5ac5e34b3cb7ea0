"""Activations as modules (no parameters), for use in ``Sequential``."""

from __future__ import annotations

from ..tensor import Tensor
from .module import Module


class ReLU(Module):
    """``max(x, 0)``."""

    def forward(self, x: Tensor) -> Tensor:
        return x.relu()


class Tanh(Module):
    """``tanh(x)``."""

    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(Module):
    """``1 / (1 + exp(-x))``."""

    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()
