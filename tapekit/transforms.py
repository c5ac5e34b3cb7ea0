"""Function transforms, composable: ``grad``, ``vjp``, ``jacobian``, ``hessian``, ``hvp``.

Each takes a function of tensors and gives another. Inputs that carry no tape are traced on a fresh
``UnionTape``; inputs that already carry one (inside another transform, or traced by hand) enter
``f`` through an identity op on them, as tensors of its own, and then the backward is recorded
(``create_graph=True``) so that the result can be differentiated again: ``tk.grad(tk.grad(f))``
is the second derivative, and the outermost transform alone runs a plain backward. So does one
whose ``f`` uses a tensor traced outside it (a parameter traced by hand): its result depends on
that tensor. Results of the outermost transform carry no tape. As in JAX, a transform
differentiates ``f`` with respect to its own inputs alone: what was computed from them outside
``f`` is a constant of ``f``.

JAX and ``torch.func`` name the same things: ``jax.grad`` / ``torch.func.grad``, ``jax.vjp`` /
``torch.func.vjp``, ``jax.jacrev`` and ``jax.jacfwd`` / ``torch.func.jacrev`` and ``jacfwd``
(``mode="rev"`` and ``"fwd"`` here), ``jax.hessian`` / ``torch.func.hessian``.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from . import forward
from .backward import gradients_for
from .devices import dtype_name, is_floating
from .errors import (DTypeError, InvalidArgumentError, OperandError, ShapeError, TapePolicyError, TracedOutsideError,
                     checked_function)
from .forward import holds_older_tape, jacfwd, jvp, tangent_of
from .ids import _births
from .ops import reshape, stack
from .tapes import UnionTape
from .tapes.checkpoint import all_or_nothing
from .tapes.global_ import _active
from .tensor import Tensor

__all__ = ["grad", "vjp", "jacobian", "hessian", "hvp"]


def grad(f: Callable[..., Tensor], argnums: int | Sequence[int] = 0) -> Callable[..., Any]:
    """The gradient of ``f``, a function of tensors with one value, as a function: ``tk.grad(f)(x)``
    is ``df/dx`` at ``x``, a tensor of ``x``'s shape; with a tuple ``argnums``, a tuple of them.
    ``tk.grad(tk.grad(f))`` is the second derivative of a function of one number."""
    checked_function(f, "tk.grad")

    def grad_f(*args: Any) -> Any:
        picked = _argnums(argnums, len(args), "grad")
        with all_or_nothing(args):  # f ran on the arguments' tapes (nested) before its output is refused
            args, out, nested = _applied(f, args, picked, "grad")
            if not isinstance(out, Tensor) or out.size != 1:
                shape = out.shape if isinstance(out, Tensor) else type(out).__name__
                raise ShapeError(f"tk.grad needs f to return one value, but it returned {shape}. For the gradient "
                                 f"of every output use tk.jacobian(f, x); for one number, reduce it in f (f(x).sum()).")
            _refuse_integral(out, "grad")
            grads = _pulled_back(out, None, [args[i] for i in picked], nested)
        return grads[0] if isinstance(argnums, int) else tuple(grads)

    grad_f.__name__ = f"grad_{getattr(f, '__name__', 'f')}"
    return grad_f


def vjp(f: Callable[..., Tensor], *primals: Tensor) -> tuple[Tensor, Callable[[Any], tuple]]:
    """``f(*primals)`` and its vector-Jacobian product: ``vjp_fn(u)`` is the tuple of ``uᵀ J``, one
    tensor per primal (``u`` of the output's shape). ``vjp_fn`` can be called many times."""
    checked_function(f, "tk.vjp")
    with all_or_nothing(primals):
        args, out, nested = _applied(f, primals, range(len(primals)), "vjp")
        if not isinstance(out, Tensor):
            raise OperandError(f"tk.vjp needs f to return a tensor, got {type(out).__name__}")
        _refuse_integral(out, "vjp")

    def vjp_fn(cotangent: Any) -> tuple:
        """``uᵀ J``: recorded where ``u`` is traced, so that a gradient reaches ``u`` too."""
        traced = isinstance(cotangent, Tensor) and cotangent.tape is not None
        return tuple(_pulled_back(out, cotangent, args, nested or traced, retain=True))

    return (out if nested else out.split_tape()[0]), vjp_fn


def jacobian(f: Callable[[Tensor], Tensor], x: Tensor, mode: str = "rev") -> Tensor:
    """The Jacobian of ``f`` at ``x``: a tensor of shape ``f(x).shape + x.shape``. ``mode="rev"``
    builds it a row at a time, one backward per output value (``jax.jacrev``); ``mode="fwd"`` a
    column at a time, one forward-mode pass per input value (``jax.jacfwd``). Its dtype is ``x``'s
    in mode ``"rev"`` (a gradient has its tensor's dtype) and ``f(x)``'s in mode ``"fwd"`` (a tangent
    has its output's), as in JAX: they differ only where ``f`` changes the dtype."""
    checked_function(f, "tk.jacobian")
    _checked((x,), (0,), "jacobian")
    if mode == "rev":
        out, pull = vjp(f, x)
        rows = [pull(_unit(out, i))[0] for i in range(out.size)]
        return _assembled(rows, out.shape + x.shape, x)
    if mode == "fwd":
        return jacfwd(f, x)
    raise InvalidArgumentError(f"jacobian: mode must be 'rev' (a backward per output value) or 'fwd' (a forward "
                               f"pass per input value), got {mode!r}")


def hessian(f: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """The Hessian of ``f`` (one value) at ``x``: the Jacobian of its gradient, of shape
    ``x.shape + x.shape``, a column per forward pass through the recorded backward (forward mode
    over reverse mode, as ``jax.hessian``). Inside another transform (``x`` carries a tape, or ``f``
    uses a tensor traced outside), where forward mode cannot pass a tangent back, row by row:
    reverse mode over reverse mode."""
    checked_function(f, "tk.hessian")
    _checked((x,), (0,), "hessian")
    if x.tape is None:
        try:
            return jacobian(grad(f), x, mode="fwd")
        except TracedOutsideError:  # f used a tensor traced outside: its dependence needs reverse mode
            pass
    return jacobian(grad(f), x, mode="rev")


def hvp(f: Callable[[Tensor], Tensor], x: Tensor, v: Tensor) -> Tensor:
    """The Hessian of ``f`` at ``x`` times ``v`` (``x``'s shape), without building the Hessian: the
    derivative of ``grad(f)`` along ``v``, one forward pass through the recorded backward (forward
    mode over reverse mode). Inside another transform (``x`` carries a tape, or ``f`` uses a tensor
    traced outside), the gradient of ``grad(f) · v``."""
    checked_function(f, "tk.hvp")
    v = _direction(x, v)
    if x.tape is None and v.tape is None:
        try:
            return jvp(grad(f), (x,), (v,))[1]
        except TracedOutsideError:  # f used a tensor traced outside: its dependence needs reverse mode
            pass
    return grad(lambda y: (grad(f)(y) * v).sum())(x)


def _direction(x: Tensor, v: Any) -> Tensor:
    """``hvp``'s ``v``, checked as a tangent is: of ``x``'s shape, cast to its dtype. A traced ``v``
    (a gradient is wanted through it: reverse over reverse) is kept as it is, so its dtype must be x's."""
    _checked((x,), (0,), "hvp")
    if isinstance(v, Tensor) and v.tape is not None:
        if v.shape != x.shape:
            raise ShapeError(f"hvp: v has shape {v.shape} but x has {x.shape}; v is a direction in x's space, "
                             f"of its shape")
        if v.dtype != x.dtype:
            raise DTypeError(f"hvp: v is traced with dtype {dtype_name(v.dtype)}, but x has {dtype_name(x.dtype)}; "
                             f"trace v in x's dtype, as no cast keeps its tape")
        return v
    return Tensor(tangent_of(x, v, "hvp: v"), x.device)


# -- helpers -----------------------------------------------------------------------------------------
def _argnums(argnums: Any, n: int, what: str) -> tuple[int, ...]:
    picked = (argnums,) if isinstance(argnums, int) else tuple(argnums) if isinstance(argnums, (tuple, list)) else ()
    if not picked or any(not isinstance(i, int) or not -n <= i < n for i in picked):
        raise InvalidArgumentError(f"tk.{what}: argnums={argnums!r} does not name arguments of a call with {n}; "
                                   f"give an int from 0 to {n - 1} or a tuple of them")
    return tuple(i % n for i in picked)


def _applied(f: Callable[..., Any], args: Sequence[Any], picked: Sequence[int], what: str) -> tuple[list, Any, bool]:
    """``f`` on the arguments, those differentiated traced (``_traced``); its value; and whether the
    backward is to be recorded: inside another transform or ``tk.jvp``, or where ``f`` used a tensor
    traced outside it (a parameter traced by hand), on which its result then depends."""
    first = next(_births)  # tapes born from now on are this transform's and f's own
    args, nested = _traced(args, picked, what)
    out = f(*args)
    return args, out, nested or holds_older_tape(out, first)


def _traced(args: Sequence[Any], picked: Sequence[int], what: str) -> tuple[list[Any], bool]:
    """The arguments with those differentiated given to ``f`` as its own (``_own_inputs``), and
    whether this transform runs inside another (one carries a tape, or inside ``tk.jvp``)."""
    if _active.get():
        raise TapePolicyError(
            f"tk.{what} runs inside a `with tk.GlobalTape()` block, whose tape takes every op, so the transform "
            f"cannot trace its inputs on a tape of its own. Call tk.{what} outside the block (tk.jvp and "
            f"tk.jacobian(f, x, mode='fwd') work inside it), or differentiate with the block's own backward "
            f"(loss.backward()).")
    _checked(args, picked, what)
    args = list(args)
    traced = any(args[i].tape is not None for i in picked)
    _own_inputs(args, picked, what)
    return args, traced or forward._tangents.get() is not None  # inside tk.jvp, the backward is recorded too


def _checked(args: Sequence[Any], picked: Sequence[int], what: str) -> None:
    """``OperandError`` or ``DTypeError`` unless each differentiated argument is a float tensor."""
    for i in picked:
        t = args[i]
        if not isinstance(t, Tensor):
            raise OperandError(f"tk.{what} differentiates tensors, but argument {i} is a {type(t).__name__}; make it "
                               f"one with dev.tensor(value, dtype='float64')")
        if not is_floating(t.dtype):
            raise DTypeError(f"tk.{what}: argument {i} has dtype {dtype_name(t.dtype)}, which has no derivative; "
                             f"pass a float tensor, e.g. dev.tensor(values, dtype='float64')")


def _own_inputs(args: list[Any], picked: Sequence[int], what: str) -> None:
    """Give each differentiated argument to ``f`` as a tensor of its own, as JAX gives each nested
    transform its own inputs, so that the gradient, keyed by id, is of ``f`` with respect to that
    argument alone: an identity op (a reshape to its own shape) on it, traced first on a fresh
    UnionTape if it carries none. The same tensor closed over by ``f``, or given again, is then a
    constant of ``f`` (as is what was computed from it outside ``f``: ``c = x * x``), and an outer
    transform, or ``tk.jvp``'s tangent, still flows through the identity op."""
    tape = None
    for i in picked:
        t = args[i]
        if t.tape is None:
            tape = tape or _own_tape(what)
            t = t.trace(tape)
        args[i] = reshape(t, t.shape)


def _refuse_integral(out: Tensor, what: str) -> None:
    """``DTypeError`` for an output that is not floating: it has no derivative (its gradient would be zeros)."""
    if not is_floating(out.dtype):
        raise DTypeError(f"tk.{what}: f returned {dtype_name(out.dtype)} values (indices such as argmax's, or truth "
                         f"values from comparisons, any and all), which have no derivative; return a floating tensor")


def _own_tape(what: str) -> UnionTape:
    """The UnionTape a transform traces its arguments on, which says whose it is in a policy error."""
    tape = UnionTape()
    tape._transform = f"tk.{what}"
    return tape


def _pulled_back(out: Tensor, seed: Any, wrt: Sequence[Tensor], nested: bool, retain: bool = False) -> list[Tensor]:
    """The gradients of ``out`` (from ``seed``) for each of ``wrt``: traced tensors when nested,
    else tensors on no tape; zeros for an input ``out`` does not depend on."""
    if out.tape is None:
        return [_zeros_like(t) for t in wrt]
    found = gradients_for(wrt, [out], None if seed is None else [seed], retain=retain or nested, create_graph=nested)
    if nested:
        return [_zeros_like(t) if g is None else g for g, t in zip(found, wrt)]
    return [_zeros_like(t) if g is None else Tensor(g, t.device) for g, t in zip(found, wrt)]


def _zeros_like(t: Tensor) -> Tensor:
    return Tensor(t.device.count(t.device.xp.zeros_like(t.data)), t.device)


def _unit(t: Tensor, i: int) -> Tensor:
    """A tensor of ``t``'s shape and dtype: 1 at flat index ``i``, 0 elsewhere."""
    e = np.zeros(t.size)
    e[i] = 1.0
    return t.device.tensor(e.reshape(t.shape), dtype=dtype_name(t.dtype))


def _assembled(parts: list[Tensor], shape: tuple, x: Tensor) -> Tensor:
    """Rows (or columns) stacked into one tensor of ``shape``."""
    if not parts:
        return Tensor(x.device.xp.zeros(shape, dtype=x.dtype, **x.device._placement()), x.device)
    return reshape(stack(parts), shape)
