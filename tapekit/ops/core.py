"""How an op becomes a tape record: operand checks, un-broadcasting, and ``emit``.

An op is one short forward function with its backward rules beside it, one per operand. The
forward returns its output and what the rules need (``saved``); ``rule(g, *saved)`` maps the
output's gradient ``g`` to its operand's. The decorators here turn such a function into an op on
tensors: they check operands, compute, and hand the result to ``emit``, which records it on the
merged tape of the operands. Rules are plain functions made once, not closures made at every
call, so a record costs one object beside the arrays it saves.

Beside its backward rules (``Jᵀ g``) each op has one forward rule, its JVP (``J t``), which
``tk.jvp`` runs on the operands' tangents (tapekit/forward.py); ``emit`` takes it as ``jvp``:

- ``ELEMENTWISE``: the op acts elementwise on its operands broadcast to the output's shape, so its
  Jacobian is diagonal after the broadcast: each backward rule applied to its operand's tangent,
  broadcast to the output's shape, is that operand's share of the output's tangent. Every op of
  two operands (``binary``) is one; no second copy of the maths.
- ``LINEAR`` (``unary`` only): the op is linear in its operand, so its JVP is the forward itself
  applied to the tangent (reshape, sum, flip...).
- a function ``jvp(tangents, *saved)``: ``tangents`` holds one tangent per operand, ``None`` for
  an operand without one (a number, a constant), never all ``None``; ``saved`` is what the rules
  get. It returns the output's tangent (``None``: zero). ``unary`` takes ``jvp(t, *saved)``.
- ``None``: the op has no forward rule; ``tk.jvp`` through it raises.

Every forward rule uses only the array API of the namespace it is given, as the backward rules do.
"""

from __future__ import annotations

import functools
import inspect
import numbers
from typing import Any, Callable, Sequence

import numpy as np

from .. import anomaly, forward
from ..devices import is_floating
from ..forward import ELEMENTWISE, LINEAR
from ..errors import AxisError, DeviceMismatchError, OperandError, ShapeError, TapekitError
from ..ids import label, next_id
from ..tapes import checkpoint
from ..tapes.checkpoint import OPEN
from ..tapes.base import MOVED, Record
from ..tapes.merge import merge_tapes, operand_tapes
from ..tensor import Tensor


def emit(name: str, out: Any, inputs: Sequence[Any], rules: Sequence[Callable], saved: tuple, device: Any,
         jvp: Any = None, links: int | None = None) -> Tensor:
    """Wrap ``out`` in a tensor and, when an operand carries a tape (or a GlobalTape block is
    active), make the op's record and put it on the operands' merged tape: ``rules[i](g, *saved)``
    is operand ``i``'s gradient. Tapes change only once the record is made: an op that fails leaves
    none merged or moved. Inside ``tk.jvp``, the output also gets its tangent from the forward rule
    ``jvp`` (``forward.carry``). ``links``: which saved values are the output's or an operand's
    own array, as the op declared it (``declared_links``); ``None``: found by identity."""
    made = out  # the forward's own output, which it may have saved (``Record.links``)
    if type(out) is not np.ndarray and isinstance(out, np.generic):  # numpy made a 0-d result a scalar
        out = np.asarray(out)
    if anomaly.on:
        anomaly.check_output(name, out, inputs, device)
    device.count(out)
    tapes = operand_tapes(inputs, name)
    if not tapes:  # no operand carries a tape: inference records nothing
        result = Tensor(out, device)
        return forward.carry(result, name, inputs, rules, saved, jvp) if forward.on else result
    if forward.on:
        forward.refuse_traced_outside(name, inputs)
    rid = next_id()
    result = Tensor(out, device)
    rec = result._record = _make_record(rid, name, inputs, rules, saved, result.id, out, made, links)
    tape = result._tape = tapes[0] if len(tapes) == 1 else merge_tapes(tapes, f"#{rid} {name}")
    tape._record(rec)
    if OPEN[0]:  # a module call or transform is running: it may have to take this record back
        checkpoint.made(rec)
    if tape.moves:  # an OwnedTape: the op took it, so the operands' handles are spent (``x.tape``: a MovedTape)
        for t in inputs:
            if type(t) is Tensor and t._tape is not None and t._tape is not MOVED:  # x * x: moved once
                t._tape, t._moved_by, t._moved_from = MOVED, rec, t._tape._born
    return forward.carry(result, name, inputs, rules, saved, jvp) if forward.on else result


def _make_record(rid: int, name: str, inputs: Sequence[Any], rules: Sequence[Callable], saved: tuple, out_id: int,
                 out: Any, made: Any, links: int | None) -> Record:
    """The record of op ``rid``: its operands' ids and shapes, its output, its rules and what they
    need, the records that made its operands, and which saved arrays are theirs or the output's
    (``links`` as declared, else found: ``made``, ``saved_links``). One tensor or two, the common
    cases, are read here: through ``_operands_of_many``, which also takes numbers and more
    operands, the forward of a chain of small ops (the benchmarks' W1) takes twice as long."""
    if len(inputs) == 1:
        (a,) = inputs
        ids, shapes, first, others = (a.id,), (a.data.shape,), a._record, None
    elif len(inputs) == 2 and type(inputs[0]) is Tensor and type(inputs[1]) is Tensor:
        a, b = inputs
        ids, shapes, first = (a.id, b.id), (a.data.shape, b.data.shape), a._record
        others = None if b._record is None else (b._record,)
        if a.data.dtype is not b.data.dtype:  # float32 beside float64 (operands of one dtype give it)
            rules = _cast_back(rules, inputs, out.dtype)
    else:
        ids, shapes, first, others, rules = _operands_of_many(inputs, rules, out.dtype)
        links = None  # a declared link may name a number here: find them
    if links is None:
        links = saved_links(saved, (made, *(t.data if isinstance(t, Tensor) else None for t in inputs))) if saved else 0
    key = (shapes, out.shape)
    rec = Record(rid, name, ids, _shared.get(key) or shared(key), out_id, out.dtype, rules, saved, first, others, links)
    if anomaly.on:
        anomaly.remember(rec)
    return rec


def saved_links(saved: tuple, arrays: tuple) -> int:
    """``Record.links``: which of ``saved`` are the arrays of ``arrays`` (the output's, then each
    operand's, ``None`` for a number) themselves. One digit per saved value, the first saved
    value's lowest, in base ``len(arrays) + 1``: 0 for none of them, else 1 + its place in
    ``arrays``. A small number, which Python keeps once for all records: a tuple per record would
    add 3.7 MB to the benchmarks' W4 tape of 100,000 records."""
    base, code, scale = len(arrays) + 1, 0, 1
    for v in saved:
        digit = 1
        for a in arrays:
            if v is a:
                code += digit * scale
                break
            digit += 1
        scale *= base
    return code


def declared_links(saves: Sequence[str], operands: Sequence[str]) -> int:
    """``Record.links`` of an op that saves the values named ``saves``, in order: ``"out"`` its
    output, a name of ``operands`` (its forward's parameters: ``("x",)``, ``("x", "y")``) that
    operand's own array, any other name a value that is neither. An op that declares this once,
    when it is made, spares each call ``saved_links``' search by identity: 4% of the time of the
    benchmarks' W1 (a chain of add, mul and tanh), measured. The op factory checks every
    declaration against the search."""
    base, code = len(operands) + 2, 0
    for place, name in enumerate(saves):
        digit = 1 if name == "out" else 2 + operands.index(name) if name in operands else 0
        code += digit * base ** place
    return code


_shared: dict[tuple, tuple] = {}  # every (operand shapes, output shape) seen, kept once


def shared(key: tuple) -> tuple:
    """``key``, (operand shapes, output shape), as the one copy that all records of those shapes
    share (``_make_record`` looks in ``_shared`` first: a call per record is 1% of W1 in
    instructions): a long tape of same-shaped ops keeps no shape tuples of its own (the benchmarks'
    W4 tape of 100,000 records holds 365 bytes a record instead of 547)."""
    got = _shared.get(key)
    if got is None:
        if len(_shared) >= 4096:  # a program of ever-new shapes: start over rather than grow
            _shared.clear()
        got = _shared[key] = key
    return got


def _cast_back(rules: Sequence[Callable | None], inputs: Sequence[Any], dtype: Any) -> tuple:
    """The rules, each casting its gradient to its operand's float dtype where that is not the
    output's (float32 beside float64: a float32 gradient, as in PyTorch and JAX)."""
    return tuple(CastBack(rule, t.data.dtype) if rule is not None and isinstance(t, Tensor) and
                 t.data.dtype != dtype and is_floating(t.data.dtype) else rule for rule, t in zip(rules, inputs))


class CastBack:
    """A rule whose gradient is cast to its operand's dtype: by the array's namespace, or, in a
    recorded backward, by tapekit's ``astype`` op, whose own rule casts back."""

    __slots__ = ("rule", "dtype")

    def __init__(self, rule: Callable, dtype: Any) -> None:
        self.rule, self.dtype = rule, dtype

    def __call__(self, g: Any, *saved: Any) -> Any:
        part = self.rule(g, *saved)
        if part.dtype == self.dtype:
            return part
        if isinstance(part, Tensor):  # a recorded backward's: cast by the namespace its rules compute with
            from ..namespace import TensorNamespace  # (which imports the ops)
            return TensorNamespace(part.device).astype(part, self.dtype)
        astype = getattr(part, "astype", None)  # numpy's, CuPy's and a tk.compile tracer's method
        return astype(self.dtype) if astype is not None else part.__array_namespace__().astype(part, self.dtype)


def _operands_of_many(inputs: Sequence[Any], rules: Sequence[Callable], dtype: Any) -> tuple:
    """Ids, shapes, first parent, other parents and rules of an op with numbers among its operands,
    or more than two operands (a number's id, shape and rule: None, (), None; rules cast back to
    their operand's dtype where tensors of several meet: ``_cast_back``)."""
    tensors = [t if isinstance(t, Tensor) else None for t in inputs]
    if len(inputs) > 2 and len({t.data.dtype for t in tensors if t is not None}) > 1:  # a number takes the tensor's
        rules = _cast_back(rules, inputs, dtype)
    parents = tuple(None if t is None else t._record for t in tensors)
    return (tuple(None if t is None else t.id for t in tensors),
            tuple(() if t is None else t.data.shape for t in tensors), parents[0],
            parents[1:] if any(p is not None for p in parents[1:]) else None,
            tuple(None if t is None else rule for t, rule in zip(tensors, rules)))


def unbroadcast(xp: Any, grad: Any, shape: tuple[int, ...], out: Any = None) -> Any:
    """Sum ``grad`` over the axes that broadcasting added or stretched, back to ``shape``.

    ``out`` (numpy and CuPy only) is an array of ``shape`` to write the sum into instead of a new one.
    """
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and grad.shape[lead + i] != 1)
    if out is not None:
        xp.sum(grad, axis=axes, keepdims=True, out=out[(None,) * lead])
        return out
    if axes:
        grad = xp.sum(grad, axis=axes)
    return xp.reshape(grad, shape)


def fills(rule: Callable) -> Callable:
    """Mark a backward rule that can write its gradient into a zeroed buffer: ``rule(g, *saved,
    out=buf)``. The engine passes ``out`` only on devices whose namespace takes it (numpy, CuPy)."""
    rule.fills = True
    return rule


def linear(transpose: Callable) -> Callable[[Callable], Callable]:
    """Mark a rule that is linear in ``g`` and computes with the device itself (a scatter):
    a recorded backward (``create_graph=True``) records it whole, as one op whose own rule is
    ``transpose(gg, *saved, g_shape)``, the rule's transpose back to ``g``'s shape."""
    def mark(rule: Callable) -> Callable:
        rule.transpose = transpose
        return rule
    return mark


def same(g: Any, *saved: Any) -> Any:
    """The rule of an operand that passes the gradient through unchanged."""
    return g


def zero(g: Any, xp: Any, *saved: Any) -> Any:
    """The rule of an operand whose gradient is 0 everywhere (a step function, such as floor)."""
    return xp.zeros_like(g)


def where_true(g: Any, xp: Any, mask: Any) -> Any:
    """The rule of an operand whose gradient passes where ``mask`` holds."""
    return xp.where(mask, g, xp.zeros_like(g))


def where_false(g: Any, xp: Any, mask: Any) -> Any:
    """The rule of an operand whose gradient passes where ``mask`` does not hold."""
    return xp.where(mask, xp.zeros_like(g), g)


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...], op: str) -> tuple[int, ...]:
    """The numpy broadcast of two shapes, or ``ShapeError`` naming both."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        m = a[-i] if i <= len(a) else 1
        n = b[-i] if i <= len(b) else 1
        if m != n and m != 1 and n != 1:
            raise ShapeError(f"{op}: shapes {a} and {b} do not broadcast (axis {-i}: {m} vs {n}). "
                             f"Reshape one operand, or insert an axis of size 1 to broadcast over.")
        out.append(max(m, n) if m != 1 and n != 1 else m * n)
    return tuple(reversed(out))


def check_devices(tensors: Sequence[Tensor], op: str) -> None:
    first = tensors[0].device
    for t in tensors[1:]:
        if t.device is not first and t.device.place != first.place:
            raise DeviceMismatchError(f"{op}: {label(tensors[0].id)} is on {first!r} but {label(t.id)} is on "
                                      f"{t.device!r}. Move one with t.to(device) first.")


def scalar(value: Any, op: str, beside: Tensor) -> Any:
    """A constant operand of an op whose other operand is ``beside``: a Python number, or on the
    numpy device a numpy array (``host_constant``)."""
    if isinstance(value, np.ndarray):
        return host_constant(value, op, beside)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise OperandError(f"{op}: unsupported operand of type {type(value).__name__}; use a tensor or a number")
    return value.item() if isinstance(value, np.generic) else value


def host_constant(array: np.ndarray, op: str, beside: Tensor) -> np.ndarray:
    """A numpy array as a constant operand, as a number is one: it gets no gradient, later writes to
    ``array`` change nothing (this is a copy), and float values take ``beside``'s float dtype (the
    device's default beside integers). Only the numpy device computes on numpy arrays: elsewhere
    ``DeviceMismatchError`` says to make the array a tensor there."""
    device = beside.device
    if device.place != ("cpu",):  # the numpy device's place (xp may be tk.compile's stand-in for numpy)
        raise DeviceMismatchError(f"{op}: a numpy array cannot meet {beside.label} on {device!r}, which does not "
                                  f"compute with numpy. Make it a tensor there first: dev.tensor(array) (untraced, "
                                  f"it gets no gradient).")
    if array.dtype.kind not in "biuf":
        raise OperandError(f"{op}: unsupported operand, a numpy array of dtype {array.dtype}; use numbers")
    if array.dtype.kind != "f":
        return array.copy()
    return array.astype(beside.dtype if is_floating(beside.dtype) else device.dtype(None))


def normalize_axes(axis: Any, ndim: int, op: str) -> tuple[int, ...] | None:
    """``axis`` (None, an int, or a sequence) as a sorted tuple of non-negative axes.

    A 0-d tensor takes axis 0 or -1, as in PyTorch: it is reduced over no axis, so this gives ``()``."""
    if axis is None:
        return None
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for ax in axes:
        if not isinstance(ax, (int, np.integer)) or isinstance(ax, bool):
            raise AxisError(f"{op}: axis {ax!r} is not an integer; pass an int from {-max(ndim, 1)} to "
                            f"{max(ndim, 1) - 1}, a tuple of them, or None for all axes")
        if not -max(ndim, 1) <= ax < max(ndim, 1):
            valid = "0 or -1 (a 0-d tensor, as in PyTorch)" if ndim == 0 else f"{-ndim} to {ndim - 1}"
            raise AxisError(f"{op}: axis {ax!r} is out of range for a tensor with {ndim} dimensions "
                            f"(valid: {valid}, or None for all axes)")
        out.append(int(ax) % max(ndim, 1))
    if len(set(out)) != len(out):
        raise AxisError(f"{op}: axis {axis!r} repeats an axis; name each axis once")
    return () if ndim == 0 else tuple(sorted(out))


def float_operands(device: Any, operands: Sequence[Any]) -> tuple | None:
    """The operands with integer (and boolean) arrays cast to the float dtype PyTorch gives their
    op, or None when none of them is one: integers beside a float array take its dtype (int64 *
    float32 is float32, where numpy gives float64); integers alone, or beside a Python float, take
    the device's default float (int32 / 2 is float32, where numpy gives float64)."""
    arrays = [v for v in operands if hasattr(v, "dtype")]
    if all(is_floating(v.dtype) for v in arrays):
        return None
    floats = [v.dtype for v in arrays if is_floating(v.dtype)]
    want = device.xp.result_type(*floats) if floats else device.dtype(None)
    xp = device.xp
    return tuple(xp.astype(v, want) if hasattr(v, "dtype") and not is_floating(v.dtype) else v for v in operands)


def refused_integers(err: TypeError, device: Any, operands: Sequence[Any]) -> tuple:
    """The operands as floats, when the namespace refused integers with ``err`` (array_api_strict's
    ``exp`` takes floats only, and ``int_array + 0.5`` mixes kinds); ``err`` again otherwise."""
    floats = None if isinstance(err, TapekitError) else float_operands(device, operands)
    if floats is None:
        raise err
    return floats


def binary(rule_x: Callable, rule_y: Callable, saves: Sequence[str] | None = None
           ) -> Callable[[Callable], Callable[[Any, Any], Tensor]]:
    """An elementwise op of two operands (its forward rule: ``ELEMENTWISE``) from ``fn(xp, x, y) ->
    (out, saved)`` and the rules ``rule(g, *saved)`` of ``x`` and ``y``. Either operand may be a
    Python number; shapes broadcast as in numpy. ``saves`` names what ``fn`` saves
    (``declared_links``)."""
    rules = (rule_x, rule_y)
    declared = None if saves is None else declared_links(saves, ("x", "y"))

    def decorate(fn: Callable) -> Callable[[Any, Any], Tensor]:
        name = fn.__name__

        @forward_of(fn)
        def op(a: Any, b: Any) -> Tensor:
            device, x, y = _two_operands(a, b, name)
            links = declared
            try:
                out, saved = fn(device.xp, x, y)
            except ValueError:
                if hasattr(x, "shape") and hasattr(y, "shape"):
                    broadcast_shape(x.shape, y.shape, name)  # a ShapeError that names both shapes
                raise
            except TypeError as err:
                out, saved = fn(device.xp, *refused_integers(err, device, (x, y)))
                links = None  # it saved the float copies: not the operands' arrays
            else:
                if out.dtype is not getattr(x, "dtype", None) and out.dtype is not getattr(y, "dtype", None):
                    out, saved = _as_pytorch_float(fn, device, out, saved, (x, y))
                    links = None
            return emit(name, out, (a, b), rules, saved, device, ELEMENTWISE, links)

        return _with_forward_rule(op, "each operand's tangent, broadcast to the output, times its gradient, summed")

    return decorate


def _two_operands(a: Any, b: Any, name: str) -> tuple:
    """The device of op ``name``'s operands and their arrays (a number stays a number), checked:
    at least one tensor, both on one device."""
    if isinstance(a, Tensor):
        if isinstance(b, Tensor):
            if b.device is not a.device:
                check_devices((a, b), name)
            return a.device, a.data, b.data
        return a.device, a.data, scalar(b, name, a)
    if not isinstance(b, Tensor):
        raise OperandError(f"{name} needs at least one tensor operand, got two numbers; make one a "
                           f"tensor with dev.tensor(value)")
    return b.device, scalar(a, name, b), b.data


def _as_pytorch_float(fn: Callable, device: Any, out: Any, saved: tuple, operands: tuple, *params: Any,
                      **kw: Any) -> tuple:
    """``fn``'s result, computed again from float operands where numpy made integer operands a
    float of its own choosing (float64, see ``float_operands``); otherwise as it is."""
    floats = float_operands(device, operands) if is_floating(out.dtype) else None
    return (out, saved) if floats is None else fn(device.xp, *floats, *params, **kw)


def forward_of(fn: Callable) -> Callable[[Callable], Callable]:
    """``functools.wraps`` for an op made from the forward ``fn(xp, x, ...)``: the op takes ``fn``'s
    name and docstring, and ``help`` shows ``fn``'s signature without the namespace ``xp``."""
    signature = inspect.signature(fn)
    bare = signature.replace(parameters=list(signature.parameters.values())[1:])

    def wrap(op: Callable) -> Callable:
        functools.update_wrapper(op, fn)
        op.__signature__ = bare
        return op

    return wrap


def unary(rule: Callable, jvp: Any = None, saves: Sequence[str] | None = None
          ) -> Callable[[Callable], Callable[..., Tensor]]:
    """An op of one tensor from ``fn(xp, x, *params) -> (out, saved)``, its backward rule
    ``rule(g, *saved)`` and its forward rule ``jvp``: ``ELEMENTWISE``, ``LINEAR``, or ``jvp(t, *saved)``.
    ``saves`` names what ``fn`` saves (``declared_links``)."""
    rules = (rule,)
    declared = None if saves is None else declared_links(saves, ("x",))
    if callable(jvp):
        jvp = _of_one(jvp)

    def decorate(fn: Callable) -> Callable[..., Tensor]:
        name = fn.__name__

        def op(a: Tensor, *params: Any, **kw: Any) -> Tensor:
            links = declared
            try:
                out, saved = fn(a.device.xp, a.data, *params, **kw)
            except TypeError as err:
                out, saved = fn(a.device.xp, *refused_integers(err, a.device, (a.data,)), *params, **kw)
                links = None  # it saved the float copy: not the operand's array
            if out.dtype is not a.data.dtype:
                out, saved = _as_pytorch_float(fn, a.device, out, saved, (a.data,), *params, **kw)
                links = None
            tangent_rule = _applied(fn, a.device.xp, params, kw) if jvp is LINEAR and forward.on else jvp
            return emit(name, out, (a,), rules, saved, a.device, tangent_rule, links)

        return _with_forward_rule(forward_of(fn)(op), _SAID.get(jvp) if isinstance(jvp, str) else None)

    return decorate


def _of_one(jvp: Callable) -> Callable:
    """A one-operand forward rule ``jvp(t, *saved)`` as ``emit`` calls it, with a tuple of tangents."""
    return lambda tangents, *saved: jvp(tangents[0], *saved)


def _applied(fn: Callable, xp: Any, params: tuple, kw: dict) -> Callable:
    """The forward rule of a linear op ``fn`` called with ``params``: ``fn`` applied to the tangent."""
    return lambda tangents, *saved: fn(xp, tangents[0], *params, **kw)[0]


_SAID = {ELEMENTWISE: "the tangent times the gradient, elementwise",
         LINEAR: "the op applied to the tangent (it is linear)"}


def _with_forward_rule(op: Callable, said: str | None) -> Callable:
    """``op`` with its docstring ending in what its forward rule is, where it is one of the shared
    kinds (``said``); an op with a forward rule of its own says it in its own words (an op without
    a docstring says nothing)."""
    if said is not None and op.__doc__:
        op.__doc__ = f"{op.__doc__.rstrip()}\n\n    Forward rule (JVP): {said}."
    return op
