"""Every differentiable op. Each is one short function whose backward rules sit beside its forward."""

from .arithmetic import add, div, maximum, minimum, mul, pow, sub
from .elementwise import abs, clip, cos, exp, log, neg, power, relu, sigmoid, sin, sqrt, tanh
from .linalg import matmul
from .reduce import log_softmax, logsumexp, max, mean, softmax, sum
from .shape import broadcast_to, concat, getitem, permute, reshape, stack, transpose, where

__all__ = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "neg", "power", "abs", "exp", "log", "sqrt",
           "tanh", "sigmoid", "relu", "sin", "cos", "clip", "sum", "mean", "max", "logsumexp", "softmax",
           "log_softmax", "matmul", "reshape", "permute", "transpose", "broadcast_to", "concat", "stack", "where",
           "getitem"]
