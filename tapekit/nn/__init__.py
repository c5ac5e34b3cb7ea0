"""Modules: models whose parameters are found by attribute, layers, and step footprints."""

from .activations import ReLU, Sigmoid, Tanh
from .containers import Residual, Sequential
from .footprint import StepFootprint, step_footprint
from .layers import Constant, Dropout, Embedding, LayerNorm, Linear
from .module import Module

__all__ = ["Module", "Linear", "ReLU", "Tanh", "Sigmoid", "Sequential", "Dropout", "Embedding", "LayerNorm",
           "Residual", "Constant", "StepFootprint", "step_footprint"]
