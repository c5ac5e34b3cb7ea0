"""A catalogue of bad calls. Each must raise its exact tapekit error class, with a message that
names the problem and the fix, and leave every tape and tensor it touched exactly as it was:
records, gradient entries, values, which tape each handle carries."""

from __future__ import annotations

import contextlib
import copy
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import tapekit as tk
from tapekit.tapes.global_ import active_global

from .conftest import POLICIES, host
from .programs import p4

DEV = tk.Cpu(seed=0)


# -- the state a bad call must not change ------------------------------------------------------
def _array(a: Any) -> tuple:
    a = host(a)
    return (a.shape, str(a.dtype), a.tobytes())


def _grads_state(g: tk.Gradients) -> tuple:
    return (sorted((tid, _array(arr)) for tid, arr in g.items()), g.leaves)


def _tape_state(tape: Any) -> Any:
    if tape is None:
        return None
    if tape._spent is not None:
        return ("spent", type(tape._spent), tape._spent.args)
    records = tape.records
    return (id(tape), id(tape._store()), len(tape), [r.id for r in records],
            [(r.rules is None, r.consumed_by) for r in records], len(tape.grads), _grads_state(tape.grads),
            getattr(tape, "_held", None))


def snapshot(thing: Any) -> Any:
    """Everything observable about a tensor, tape, Gradients, module or optimizer, as plain data."""
    if isinstance(thing, tk.Tensor):
        return ("tensor", thing.id, _array(thing.numpy()), id(thing._tape), id(thing._record),
                _tape_state(thing._tape))
    if isinstance(thing, tk.Tape):
        return ("tape", _tape_state(thing))
    if isinstance(thing, tk.Gradients):
        return ("grads", _grads_state(thing))
    if isinstance(thing, tk.nn.Module):
        return ("module", [(name, snapshot(p)) for name, p in thing.named_parameters()])
    return ("object", type(thing), _plain(vars(thing)))


def _plain(value: Any) -> Any:
    """``value`` (an optimizer's settings and state, say) with arrays turned into comparable data."""
    if isinstance(value, dict):
        return sorted((repr(k), _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return _array(value)
    return value


# -- the catalogue ------------------------------------------------------------------------------
@dataclass
class Bad:
    """A bad call: ``build(new_tape, tmp)`` makes the objects (tapes from ``new_tape()``, files in
    the folder ``tmp``) and returns ``(call, involved)``."""

    build: Callable[[Callable[[], Any], Path], tuple[Callable[[], Any], list]]
    error: type
    problem: tuple[str, ...]  # substrings naming what went wrong
    fix: tuple[str, ...]  # substrings naming what to do
    per_policy: bool = False  # run once under each tape policy


CATALOGUE: dict[str, Bad] = {}


def bad(error: type, problem: str | tuple[str, ...], fix: str | tuple[str, ...], per_policy: bool = False):
    def register(build):
        CATALOGUE[build.__name__] = Bad(build, error, _tuple(problem), _tuple(fix), per_policy)
        return build
    return register


def _tuple(text: str | tuple[str, ...]) -> tuple[str, ...]:
    return (text,) if isinstance(text, str) else text


def operand(new_tape: Callable[[], Any], shape: tuple[int, ...], dev: tk.Device = DEV) -> tk.Tensor:
    """A float64 tensor made by one op recorded on a fresh tape that already holds a gradient entry."""
    x = dev.randn(shape, dtype="float64")
    tape = new_tape()
    if not isinstance(tape, tk.GlobalTape):
        tape.grads.alloc(x)
    return x.trace(tape) * 1.5


# binary op families: incompatible shapes
def _binary(fn):
    def build(new_tape, tmp):
        a, b = operand(new_tape, (2, 3)), operand(new_tape, (4,))
        return (lambda: fn(a, b)), [a, b]
    return build


for _name, _fn in {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
                   "div": lambda a, b: a / b, "pow": lambda a, b: a ** b, "maximum": tk.maximum,
                   "minimum": tk.minimum}.items():
    _build = _binary(_fn)
    _build.__name__ = f"{_name}_shapes"
    bad(tk.ShapeError, (f"{_name}: shapes (2, 3) and (4,) do not broadcast", "axis -1: 3 vs 4"),
        "Reshape one operand", per_policy=True)(_build)


@bad(tk.ShapeError, "where: shapes (3,) and (2,) do not broadcast", "Reshape one operand", per_policy=True)
def where_shapes(new_tape, tmp):
    a, b = operand(new_tape, (3,)), operand(new_tape, (2,))
    return (lambda: tk.where(DEV.tensor(np.array([True, False, True])), a, b)), [a, b]


@bad(tk.ShapeError, ("matmul: (2, 3) @ (4,)", "left (3)", "right (4)"), "Transpose or reshape", per_policy=True)
def matmul_vector(new_tape, tmp):
    a, b = operand(new_tape, (2, 3)), operand(new_tape, (4,))
    return (lambda: a @ b), [a, b]


@bad(tk.ShapeError, ("matmul: (2, 3) @ (2, 3)", "second-to-last"), "Transpose or reshape", per_policy=True)
def matmul_matrices(new_tape, tmp):
    a, b = operand(new_tape, (2, 3)), operand(new_tape, (2, 3))
    return (lambda: a @ b), [a, b]


@bad(tk.ShapeError, ("matmul (batch axes): shapes (2,) and (5,)",), "Reshape one operand", per_policy=True)
def matmul_batch(new_tape, tmp):
    a, b = operand(new_tape, (2, 3, 4)), operand(new_tape, (5, 4, 2))
    return (lambda: a @ b), [a, b]


@bad(tk.ShapeError, "matmul: operands need at least 1 dimension", "use * for scalars", per_policy=True)
def matmul_scalar(new_tape, tmp):
    a, b = operand(new_tape, (2, 3)), operand(new_tape, ())
    return (lambda: a @ b), [a, b]


@bad(tk.ShapeError, "reshape: cannot reshape (2, 3) (6 values) to (5,)", "the sizes must match", per_policy=True)
def reshape_size(new_tape, tmp):
    a = operand(new_tape, (2, 3))
    return (lambda: a.reshape(5)), [a]


@bad(tk.ShapeError, "broadcast_to: shapes (2, 3) and (3, 3) do not broadcast", "insert an axis of size 1",
     per_policy=True)
def broadcast_to_shape(new_tape, tmp):
    a = operand(new_tape, (2, 3))
    return (lambda: a.broadcast_to((3, 3))), [a]


@bad(tk.ShapeError, ("concat:", "has shape (4, 2)"), "all shapes must match except along axis 1",
     per_policy=True)
def concat_shapes(new_tape, tmp):
    a, b = operand(new_tape, (2, 3)), operand(new_tape, (4, 2))
    return (lambda: tk.concat([a, b], axis=1)), [a, b]


@bad(tk.ShapeError, ("stack:", "has shape (3,)"), "stacked tensors must have one shape", per_policy=True)
def stack_shapes(new_tape, tmp):
    a, b = operand(new_tape, (2,)), operand(new_tape, (3,))
    return (lambda: tk.stack([a, b])), [a, b]


# bad axes
def _axis_case(name, call, problem, fix="valid: -2 to 1"):
    def build(new_tape, tmp):
        a = operand(new_tape, (2, 3))
        return (lambda: call(a)), [a]
    build.__name__ = name
    bad(tk.AxisError, problem, fix, per_policy=True)(build)


_axis_case("sum_axis", lambda a: a.sum(axis=2), "sum: axis 2 is out of range for a tensor with 2 dimensions")
_axis_case("mean_repeated_axis", lambda a: a.mean(axis=(1, -1)), "mean: axis (1, -1) repeats an axis",
           "name each axis once")
_axis_case("max_axis", lambda a: a.max(axis=-3), "max: axis -3 is out of range")
_axis_case("logsumexp_axis", lambda a: a.logsumexp(axis=7), "logsumexp: axis 7 is out of range")
_axis_case("softmax_axis", lambda a: a.softmax(axis=2), "softmax: axis 2 is out of range")
_axis_case("log_softmax_axis", lambda a: tk.log_softmax(a, axis=-5), "log_softmax: axis -5 is out of range")
_axis_case("transpose_axis", lambda a: a.transpose(0, 4), "transpose: axis 4 is out of range")
_axis_case("permute_repeated", lambda a: a.permute(0, 0), "permute: axis (0, 0) repeats an axis",
           "name each axis once")
_axis_case("concat_axis", lambda a: tk.concat([a, a], axis=3), "concat: axis 3 is out of range")
_axis_case("sum_axis_type", lambda a: a.sum(axis=0.5), "sum: axis 0.5 is not an integer",
           "pass an int from -2 to 1")


# bad indices
def _index_case(name, key, problem, fix):
    def build(new_tape, tmp):
        a = operand(new_tape, (2, 3))
        return (lambda: a[key]), [a]
    build.__name__ = name
    bad(tk.IndexingError, problem, fix, per_policy=True)(build)


_index_case("index_int", 5, ("t[5] is not a valid index for shape (2, 3)", "out of bounds"), "Use ints, slices")
_index_case("index_array_range", [0, 7], ("t[[0, 7]] is not a valid index", "index 7 is out of bounds for axis 0"),
            "integer arrays (lists, arrays, integer tensors)")
_index_case("index_float_array", np.array([0.5]), "arrays used as indices must be of integer (or boolean) type",
            "Use ints, slices, None, ..., integer arrays")
_index_case("index_arrays_mismatch", ([0, 1, 0], [0, 1]), "could not be broadcast together", "alone or in a tuple")
_index_case("index_bool_mask", np.array([True]), "boolean index did not match", "or boolean masks")
_index_case("index_string", "x", "t['x'] is not a valid index", "Use ints, slices, None, ...")


@bad(tk.DTypeError, "where: the condition must be boolean, got float", "compare first", per_policy=True)
def where_condition_dtype(new_tape, tmp):
    a, b = operand(new_tape, (2,)), operand(new_tape, (2,))
    return (lambda: tk.where(DEV.tensor([1.0, 0.0]), a, b)), [a, b]


# operands of a kind no op takes
@bad(tk.OperandError, "add: unsupported operand of type str", "use a tensor or a number", per_policy=True)
def operand_string(new_tape, tmp):
    a = operand(new_tape, (2,))
    return (lambda: a + "1"), [a]


@bad(tk.OperandError, "mul needs at least one tensor operand", "make one a tensor with dev.tensor(value)")
def operand_two_numbers(new_tape, tmp):
    return (lambda: tk.ops.mul(2.0, 3.0)), []


@bad(tk.OperandError, "where needs a tensor among the condition and the values", "make the condition a tensor")
def operand_where_numbers(new_tape, tmp):
    return (lambda: tk.where(np.array([True]), 1.0, 0.0)), []


@bad(tk.OperandError, "matmul takes two tensors, got Tensor @ list", "make an array a tensor with dev.tensor",
     per_policy=True)
def operand_matmul_list(new_tape, tmp):
    a = operand(new_tape, (2, 2))
    return (lambda: tk.matmul(a, [[1.0, 0.0], [0.0, 1.0]])), [a]


@bad(tk.DeviceMismatchError, ("mul: a numpy array cannot meet", "backend='strict'"),
     "Make it a tensor there first: dev.tensor(array)", per_policy=True)
def operand_array_off_the_numpy_device(new_tape, tmp):
    a = operand(new_tape, (2,), tk.Cpu(backend="strict"))
    return (lambda: np.ones(2) * a), [a]


@bad(tk.OperandError, "add: unsupported operand, a numpy array of dtype object", "use numbers", per_policy=True)
def operand_array_of_objects(new_tape, tmp):
    a = operand(new_tape, (2,))
    return (lambda: a + np.array([1, "x"], dtype=object)), [a]


@bad(tk.ShapeError, "sub: shapes (3,) and (2,) do not broadcast", "Reshape one operand", per_policy=True)
def operand_array_shapes(new_tape, tmp):
    a = operand(new_tape, (2,))
    return (lambda: np.ones(3) - a), [a]


@bad(tk.OperandError, "concat takes a non-empty sequence of tensors, got a sequence of Tensor, float",
     "tk.concat([a, b])", per_policy=True)
def operand_concat_number(new_tape, tmp):
    a = operand(new_tape, (2,))
    return (lambda: tk.concat([a, 1.0])), [a]


@bad(tk.OperandError, "stack takes a non-empty sequence of tensors, got an empty sequence", "tk.stack([a, b])")
def operand_stack_empty(new_tape, tmp):
    return (lambda: tk.stack([])), []


# devices mixed
def _two_devices(new_tape, shape=(3,)):
    d1 = tk.Cpu(backend="strict", where="device1")
    d2 = tk.Cpu(backend="strict", where="device2")
    return operand(new_tape, shape, d1), operand(new_tape, shape, d2)


@bad(tk.DeviceMismatchError, ("add:", "where='device1'", "where='device2'"), "Move one with t.to(device)",
     per_policy=True)
def devices_add(new_tape, tmp):
    a, b = _two_devices(new_tape)
    return (lambda: a + b), [a, b]


@bad(tk.DeviceMismatchError, ("matmul:", "where='device2'"), "Move one with t.to(device)", per_policy=True)
def devices_matmul(new_tape, tmp):
    a, b = _two_devices(new_tape, (2, 2))
    return (lambda: a @ b), [a, b]


@bad(tk.DeviceMismatchError, ("concat:", "where='device2'"), "Move one with t.to(device)", per_policy=True)
def devices_concat(new_tape, tmp):
    a, b = _two_devices(new_tape)
    return (lambda: tk.concat([a, b])), [a, b]


@bad(tk.DeviceMismatchError, ("the seed for", "is on", "where='device2'"), "make the seed on the output's device")
def devices_seed(new_tape, tmp):
    a, _ = _two_devices(new_tape)
    out = a * a
    seed = tk.Cpu(backend="strict", where="device2").ones((3,))
    return (lambda: out.backward(seed=seed)), [a, out, seed]


# dtypes that cannot be differentiated
@bad(tk.DTypeError, ("cannot trace", "dtype int64 is not floating"), "Make it with dtype='float32' or 'float64'",
     per_policy=True)
def trace_integer(new_tape, tmp):
    tape = new_tape()
    labels = DEV.tensor(np.array([1, 2, 3]))
    return (lambda: labels.trace(tape)), [labels, tape]


@bad(tk.DTypeError, "dtype bool is not floating", "Make it with dtype='float32' or 'float64'", per_policy=True)
def trace_bool(new_tape, tmp):
    tape = new_tape()
    mask = DEV.tensor([1.0, -1.0]) > 0
    return (lambda: mask.trace(tape)), [mask, tape]


@bad(tk.DTypeError, "has dtype int64, which has no gradient", "backward needs a floating output")
def backward_integer_output(new_tape, tmp):
    counts = DEV.tensor(np.array([1, 2])).sum()
    return (lambda: counts.backward()), [counts]


@bad(tk.DTypeError, ("the seed for", "must be numbers"), "a tensor, an array or nested lists")
def backward_seed_not_numbers(new_tape, tmp):
    out = operand(new_tape, (2,))
    return (lambda: out.backward(seed="ones")), [out]


@bad(tk.DTypeError, ("the seed for", "must be numbers", "datetime64"), "a tensor, an array or nested lists")
def backward_seed_of_dates(new_tape, tmp):
    """numpy turns dates into day counts: a seed of 36524s."""
    out = operand(new_tape, (2,))
    return (lambda: out.backward(seed=np.array(["2020-01-01"] * 2, dtype="datetime64[D]"))), [out]


@bad(tk.DTypeError, ("the seed for", "must be numbers", "object"), "a tensor, an array or nested lists")
def backward_seed_of_objects(new_tape, tmp):
    """numpy turns None into NaN."""
    out = operand(new_tape, (2,))
    return (lambda: out.backward(seed=np.array([1.0, None], dtype=object))), [out]


@bad(tk.InvalidArgumentError, ("the seed for", "a NaN or an infinity"), "finite numbers", per_policy=True)
def backward_seed_nan(new_tape, tmp):
    out = operand(new_tape, (2,))
    return (lambda: out.backward(seed=[np.nan, 1.0])), [out]


@bad(tk.BackwardError, "seeds takes one seed per output, as a list", "seeds=[seed]")
def backward_seeds_not_a_list(new_tape, tmp):
    out = operand(new_tape, ())
    return (lambda: tk.backward([out], seeds=1.0)), [out]


@bad(tk.InvalidArgumentError, ("must be numbers", "object"), "a tensor, an array or nested lists")
def jvp_tangent_of_objects(new_tape, tmp):
    x = DEV.tensor([1.0, 2.0])
    return (lambda: tk.jvp(lambda t: t * 2.0, x, np.array([1.0, None], dtype=object))), [x]


@bad(tk.InvalidArgumentError, "repeat: repeats must be an int or a sequence of ints, got 1.5", "an int",
     per_policy=True)
def repeat_count_not_int(new_tape, tmp):
    """np.repeat truncated 1.5 to 1; and axis=None flattened (a record) before the count was checked."""
    x = operand(new_tape, (2, 3))
    return (lambda: x.repeat(1.5)), [x]


@bad(tk.InvalidArgumentError, "repeat: negative dimensions", "an int >= 0", per_policy=True)
def repeat_negative_flattened(new_tape, tmp):
    x = operand(new_tape, (2, 3))
    return (lambda: x.repeat(-1)), [x]


@bad(tk.InvalidArgumentError, "tril: k, the diagonal, must be an int", "0 the main one", per_policy=True)
def tril_diagonal_not_int(new_tape, tmp):
    x = operand(new_tape, (3, 3))
    return (lambda: x.tril(1.5)), [x]


@bad(tk.IndexingError, ("take_along_axis: an index is out of range", "read flattened (axis=None)"), "6 values",
     per_policy=True)
def take_along_axis_flattened_out_of_range(new_tape, tmp):
    x = operand(new_tape, (2, 3))
    return (lambda: tk.take_along_axis(x, np.array([0, 9]), axis=None)), [x]


@bad(tk.OperandError, "concat takes a non-empty sequence of tensors, got a Tensor", "tk.concat([a, b])",
     per_policy=True)
def concat_of_one_tensor(new_tape, tmp):
    """Iterating the tensor recorded an index op per row (and moved an OwnedTape) before the error."""
    x = operand(new_tape, (2, 3))
    return (lambda: tk.concat(x)), [x]


@bad(tk.InvalidArgumentError, "retain must be True or False, got 'no'", "True or False", per_policy=True)
def backward_retain_text(new_tape, tmp):
    """Python takes any text as true: retain="no" kept the records."""
    out = operand(new_tape, ())
    return (lambda: out.backward(retain="no")), [out]


@bad(tk.InvalidArgumentError, "softplus: beta must not be 0", "1 is the plain softplus", per_policy=True)
def softplus_beta_zero(new_tape, tmp):
    x = operand(new_tape, (3,))
    return (lambda: tk.softplus(x, 0)), [x]


@bad(tk.InvalidArgumentError, "leaky_relu: negative_slope must be finite, got nan", "finite", per_policy=True)
def leaky_relu_slope_nan(new_tape, tmp):
    x = operand(new_tape, (3,))
    return (lambda: tk.leaky_relu(x, float("nan"))), [x]


@bad(tk.InvalidArgumentError, ("clip: low must be a number or an array, got the tensor", "not differentiated"),
     "tk.maximum(x, t)", per_policy=True)
def clip_bound_tensor(new_tape, tmp):
    """It said np.bitwise_and, a function the learner never called."""
    x = operand(new_tape, (3,))
    return (lambda: x.clip(DEV.zeros((3,)), 1.0)), [x]


# backward that cannot start
@bad(tk.BackwardError, "has shape (2, 3), not one value, so backward needs a seed",
     ("out.backward(seed=dev.ones((2, 3)))", "reduce it first with out.sum()"), per_policy=True)
def backward_no_seed(new_tape, tmp):
    out = operand(new_tape, (2, 3))
    return (lambda: out.backward()), [out]


@bad(tk.ShapeError, "the seed for", ("has shape (3, 2) but the output has shape (2, 3)",
                                     "give a seed of the output's shape"), per_policy=True)
def backward_seed_shape(new_tape, tmp):
    out = operand(new_tape, (2, 3))
    return (lambda: out.backward(seed=np.ones((3, 2)))), [out]


@bad(tk.BackwardError, "tk.backward([]) got no outputs", "pass the tensors to differentiate")
def backward_empty(new_tape, tmp):
    return (lambda: tk.backward([])), []


@bad(tk.BackwardError, "got 2 seeds for 1 outputs", "give one per output", per_policy=True)
def backward_seed_count(new_tape, tmp):
    out = operand(new_tape, ()).sum()
    return (lambda: tk.backward([out], seeds=[None, None])), [out]


@bad(tk.BackwardError, "carries no tape, so nothing was recorded for it", "Trace an input first")
def backward_untaped(new_tape, tmp):
    out = DEV.randn((3,)).sum()
    return (lambda: out.backward()), [out]


@bad(tk.BackwardError, "backward takes tensors, got float", "backward takes tensors")
def backward_not_tensor(new_tape, tmp):
    return (lambda: tk.backward([1.0])), []


# moved and consumed tapes
@bad(tk.TapeMovedError, ("OwnedTape was moved into the output of `", "add("),
     ("Use the op's output instead", ".retaped() before the op"))
def moved_operand(new_tape, tmp):
    x, y = DEV.randn((3,)).trace(), DEV.randn((3,)).trace()
    z = x + y
    return (lambda: y * 2), [x, y, z]


@bad(tk.TapeMovedError, "OwnedTape was moved into the output of `", "call .retaped() before the op")
def moved_retaped(new_tape, tmp):
    x = DEV.randn((3,)).trace()
    z = x.exp()
    return (lambda: x.retaped()), [x, z]


@bad(tk.TapeConsumedError, "by the backward on", "Call backward(retain=True)", per_policy=True)  # consumed or drained
def consumed_second_backward(new_tape, tmp):
    out = operand(new_tape, (3,)).sum()
    out.backward()
    return (lambda: out.backward()), [out]


@bad(tk.TapeConsumedError, "were consumed by the backward on", "run tk.backward([...]) over all outputs")
def consumed_op_after_backward(new_tape, tmp):
    out = DEV.randn((3,)).trace().sum()
    out.backward()
    return (lambda: out * 2), [out]


@bad(tk.TapeConsumedError, "was drained by the backward on", "run tk.backward([...]) over all outputs at once")
def consumed_union_other_output(new_tape, tmp):
    u = DEV.randn((3,)).trace(tk.UnionTape()) * 2
    first, second = u.sum(), (u * 3).sum()
    first.backward()
    return (lambda: second.backward()), [u, first, second]


# policies mixed
@bad(tk.TapePolicyError, ("carries an OwnedTape", "a UnionTape", "cannot mix tape policies"),
     "Trace both with the same policy")
def policies_mixed_op(new_tape, tmp):
    a, b = operand(tk.OwnedTape, (3,)), operand(tk.UnionTape, (3,))
    return (lambda: a + b), [a, b]


@bad(tk.TapePolicyError, ("tk.backward:", "carries an ArcTape", "cannot mix tape policies"),
     "Trace both with the same policy")
def policies_mixed_backward(new_tape, tmp):
    a, b = operand(tk.ArcTape, (3,)).sum(), operand(tk.UnionTape, (3,)).sum()
    return (lambda: tk.backward([a, b])), [a, b]


@bad(tk.TapePolicyError, ("runs inside a GlobalTape block", "carries an OwnedTape"), ".detach() inside the block")
def policies_mixed_global_block(new_tape, tmp):
    a = operand(tk.OwnedTape, (3,))
    gt = tk.GlobalTape()

    def call():
        with gt:
            a.exp()
    return call, [a, gt]


@bad(tk.TapePolicyError, "met two different GlobalTapes", "run the op inside one `with tape:` block")
def policies_two_global_tapes(new_tape, tmp):
    with tk.GlobalTape() as g1:
        a = DEV.randn((3,)).trace(g1) * 2
    with tk.GlobalTape() as g2:
        b = DEV.randn((3,)).trace(g2) * 2
    return (lambda: a + b), [a, b, g1, g2]


@bad(tk.TapePolicyError, "was not recorded on", "call backward on the GlobalTape it was recorded on")
def global_backward_wrong_tape(new_tape, tmp):
    with tk.GlobalTape() as g1:
        a = (DEV.randn((3,)).trace(g1) * 2).sum()
    g2 = tk.GlobalTape()
    return (lambda: g2.backward(a)), [a, g1, g2]


@bad(tk.TapePolicyError, "retaped() has no meaning under a GlobalTape", "Use OwnedTape, ArcTape or UnionTape")
def global_retaped(new_tape, tmp):
    with tk.GlobalTape() as g:
        a = DEV.randn((3,)).trace(g) * 2
    return (lambda: a.retaped()), [a, g]


@bad(tk.TapePolicyError, "clone() of a tensor with an OwnedTape", "Use .retaped()")
def owned_clone(new_tape, tmp):
    a = operand(tk.OwnedTape, (3,))
    return (lambda: a.clone()), [a]


@bad(tk.TapePolicyError, "this OwnedTape already belongs to a tensor", "Trace with a fresh tk.OwnedTape()")
def owned_traced_twice(new_tape, tmp):
    tape = tk.OwnedTape()
    a = DEV.randn((3,)).trace(tape)
    b = DEV.randn((3,))
    return (lambda: b.trace(tape)), [a, b, tape]


# missing gradients
@bad(tk.MissingGradientError, "not in the leaf set of this backward", "Add it to leaves=[...]")
def missing_not_a_leaf(new_tape, tmp):
    x, w = DEV.tensor([1.0, 2.0]), DEV.tensor([3.0, 4.0])
    g = (x.trace(tk.OwnedTape(leaves=[x])) * w).sum().backward()
    return (lambda: g[w]), [x, w, g]


@bad(tk.MissingGradientError, "no op recorded on the tape this backward ran", "Trace it (x.trace())")
def missing_never_an_operand(new_tape, tmp):
    x, w = DEV.tensor([1.0, 2.0]), DEV.tensor([3.0, 4.0])
    g = (x.trace() * 2).sum().backward()
    return (lambda: g[w]), [x, w, g]


@bad(tk.MissingGradientError, ("on its way to the output", "lives on ArcTape"),
     "Run tk.backward([...]) over all outputs at once")
def missing_partitioned(new_tape, tmp):
    x = DEV.tensor([1.0, 2.0]).trace(tk.ArcTape())
    y = DEV.tensor([4.0, 5.0]).trace(tk.ArcTape())
    zz = y * 2.0
    z = x + y
    with pytest.warns(tk.IncompleteTapeWarning):
        g = zz.sum().backward()
    return (lambda: g[y]), [x, y, z, zz, g]


@bad(tk.InvalidArgumentError, "trace takes a tape object, got the class UnionTape", "x.trace(tk.UnionTape())")
def trace_tape_class(new_tape, tmp):
    x = operand(new_tape, (3,))
    return (lambda: x.trace(tk.UnionTape)), [x]


@bad(tk.InvalidArgumentError, "trace takes a tape object, got a str", "Make one first")
def trace_not_a_tape(new_tape, tmp):
    x = DEV.randn((3,))
    return (lambda: x.trace("union")), [x]


# arguments a device cannot use
@bad(tk.InvalidArgumentError, ("shape must be an int or a sequence of ints, none negative", "got (2, -1)"),
     "for example dev.zeros((2, 3))")
def device_negative_shape(new_tape, tmp):
    return (lambda: DEV.zeros((2, -1))), []


@bad(tk.InvalidArgumentError, "got 'ab'", "for example dev.zeros((2, 3))")
def device_shape_string(new_tape, tmp):
    return (lambda: DEV.randn("ab")), []


@bad(tk.InvalidArgumentError, "unknown backend 'jax'", "use 'numpy' or 'strict'")
def device_backend(new_tape, tmp):
    return (lambda: tk.Cpu(backend="jax")), []


@bad(tk.DTypeError, "unknown dtype 'complex64'", "use one of float32, float64")
def device_dtype(new_tape, tmp):
    return (lambda: DEV.tensor([1.0], dtype="complex64")), []


@bad(tk.ShapeError, ("ragged data [[1, 2], [3]]", "every row must have the same length"), "Pad the short rows")
def device_ragged_data(new_tape, tmp):
    return (lambda: DEV.tensor([[1, 2], [3]])), []


@bad(tk.DTypeError, "integers to a negative integer power are not integers", "make the base a float first")
def integer_to_negative_power(new_tape, tmp):
    return (lambda: DEV.tensor(np.array([1, 2, 3])) ** -2), []


@bad(tk.DTypeError, "integers to a negative integer power are not integers", "(t * 1.0) ** -2")
def integer_to_negative_tensor_power(new_tape, tmp):
    return (lambda: 2 ** DEV.tensor(np.array([1, -2]))), []


@bad(tk.InvalidArgumentError, "clip needs a bound", "give low, high or both", per_policy=True)
def clip_without_bounds(new_tape, tmp):
    x = operand(new_tape, (3,))
    return (lambda: x.clip(None, None)), [x]


@bad(tk.DTypeError, "default_dtype must be float32 or float64, got 'int32'", "integer ops that yield floats")
def device_default_dtype(new_tape, tmp):
    return (lambda: tk.Cpu(default_dtype="int32")), []


# losses
def _logits(new_tape):
    return operand(new_tape, (3, 4))


@bad(tk.ShapeError, "cross_entropy: a floating target holds class probabilities and needs the logits' shape (3, 4), "
     "got (3,)", "pass integers of shape (3,)", per_policy=True)
def cross_entropy_float_labels(new_tape, tmp):
    logits = _logits(new_tape)
    return (lambda: tk.cross_entropy(logits, np.array([0.0, 1.0, 2.0]))), [logits]


@bad(tk.DTypeError, "cross_entropy: the target must be integer class indices or floating class probabilities, "
     "got dtype bool", "Make labels integers", per_policy=True)
def cross_entropy_bool_target(new_tape, tmp):
    logits = _logits(new_tape)
    return (lambda: tk.cross_entropy(logits, np.array([True, False, True]))), [logits]


@bad(tk.IndexingError, ("cross_entropy: labels range from 0 to 4", "the logits have 4 classes"),
     "valid labels: 0 to 3", per_policy=True)
def cross_entropy_label_too_big(new_tape, tmp):
    logits = _logits(new_tape)
    labels = DEV.tensor(np.array([0, 4, 1]))
    return (lambda: tk.cross_entropy(logits, labels)), [logits, labels]


@bad(tk.IndexingError, "cross_entropy: labels range from -1 to 2", "valid labels: 0 to 3")
def cross_entropy_negative_label(new_tape, tmp):
    logits = _logits(new_tape)
    return (lambda: tk.cross_entropy(logits, np.array([-1, 2, 0]))), [logits]


@bad(tk.ShapeError, "cross_entropy: labels of shape (4,) do not fit logits of shape (3, 4)",
     "the labels the shape of the other axes", per_policy=True)
def cross_entropy_label_shape(new_tape, tmp):
    logits = _logits(new_tape)
    return (lambda: tk.cross_entropy(logits, np.array([0, 1, 2, 3]))), [logits]


@bad(tk.ShapeError, "mse_loss: the target has shape (3, 1) but the prediction has (3, 4)", "give them one shape",
     per_policy=True)
def mse_shapes(new_tape, tmp):
    pred, target = _logits(new_tape), DEV.randn((3, 1), dtype="float64")
    return (lambda: tk.mse_loss(pred, target)), [pred, target]


@bad(tk.ShapeError, "binary_cross_entropy_with_logits: the targets has shape (4,)", "give them one shape",
     per_policy=True)
def bce_shapes(new_tape, tmp):
    logits = _logits(new_tape)
    return (lambda: tk.binary_cross_entropy_with_logits(logits, np.ones(4))), [logits]


@bad(tk.InvalidArgumentError, "reduction must be 'mean', 'sum' or 'none'", "got 'avg'")
def loss_reduction(new_tape, tmp):
    logits = _logits(new_tape)
    return (lambda: tk.cross_entropy(logits, np.array([0, 1, 2]), reduction="avg")), [logits]


# models and optimizers
def mlp(dtype: str = "float64") -> tk.nn.Module:
    dev = tk.Cpu(seed=0)
    return tk.nn.Sequential(tk.nn.Linear(3, 4, device=dev, dtype=dtype), tk.nn.Tanh(),
                            tk.nn.Linear(4, 2, device=dev, dtype=dtype))


def model_grads(model: tk.nn.Module) -> tk.Gradients:
    x = model.parameters()[0].device.randn((5, 3), dtype="float64")
    return tk.mse_loss(model(x.trace(tk.OwnedTape(model.alloc_grads()))), np.zeros((5, 2))).backward()


@bad(tk.ShapeError, ("matmul: (5, 2) @ (3, 4)", "left (2)", "right (3)"), "Transpose or reshape", per_policy=True)
def model_input_shape(new_tape, tmp):
    model, x = mlp(), operand(new_tape, (5, 2))
    return (lambda: model(x)), [model, x]


@bad(tk.ShapeError, ("matmul: (5, 4) @ (5, 2)", "left (4)", "right (5)"), "Transpose or reshape", per_policy=True)
def model_later_layer_misfit(new_tape, tmp):
    """The first layer runs and records (an OwnedTape moves into its output) before the second fails."""
    dev = tk.Cpu(seed=0)
    model = tk.nn.Sequential(tk.nn.Linear(3, 4, device=dev, dtype="float64"), tk.nn.Tanh(),
                             tk.nn.Linear(5, 2, device=dev, dtype="float64"))
    x = operand(new_tape, (5, 3))
    return (lambda: model(x)), [model, x]


def _grad_of_many_values(policy: str):
    def build(new_tape, tmp):
        """f's ops run on the transform's tape, nested in x's, before its output is found not to be one value
        (inside a GlobalTape block tk.grad is refused before it runs f)."""
        x = operand(POLICIES[policy], (3,))
        return (lambda: tk.grad(lambda v: v * 2.0)(x)), [x]
    return build


for _policy in ("owned", "arc", "union"):
    _build = _grad_of_many_values(_policy)
    _build.__name__ = f"grad_of_many_values_on_{_policy}"
    bad(tk.ShapeError, ("tk.grad", "one value"), "sum")(_build)


@bad(tk.TapePolicyError, "an OwnedTape has one owner", "model.trace(tk.UnionTape(model.alloc_grads()))")
def model_trace_owned(new_tape, tmp):
    model = mlp()
    return (lambda: model.trace(tk.OwnedTape())), [model]


@bad(tk.InvalidArgumentError, "in_features must be a positive integer, got 0", "positive integer")
def linear_no_inputs(new_tape, tmp):
    return (lambda: tk.nn.Linear(0, 3)), []


@bad(tk.InvalidArgumentError, "Sequential takes modules; argument 1 is a function", "takes modules")
def sequential_not_module(new_tape, tmp):
    return (lambda: tk.nn.Sequential(tk.nn.Tanh(), tk.tanh)), []


@bad(tk.InvalidArgumentError, ("lr must be", "got 0"), "positive")
def sgd_zero_lr(new_tape, tmp):
    model = mlp()
    return (lambda: tk.optim.Sgd(model, lr=0)), [model]


@bad(tk.InvalidArgumentError, ("lr must be", "got -0.1"), "positive")
def sgd_negative_lr(new_tape, tmp):
    model = mlp()
    return (lambda: tk.optim.Sgd(model, lr=-0.1)), [model]


@bad(tk.InvalidArgumentError, ("lr must be", "got 0.0"), "positive")
def adam_zero_lr(new_tape, tmp):
    model = mlp()
    return (lambda: tk.optim.Adam(model, lr=0.0)), [model]


@bad(tk.ShapeError, ("the gradient for layers.0.weight has shape (4, 3)", "parameter has (3, 4)",
                     "nothing was updated"), "Pass the Gradients of this model's backward")
def optimizer_gradient_shape(new_tape, tmp):
    model = mlp()
    opt = tk.optim.Adam(model, lr=0.1)
    grads = model_grads(model)
    opt.update(model, grads)  # a first step, so the optimizer holds state
    wrong = tk.Gradients()
    for p in model.parameters():  # every gradient transposed
        wrong.accumulate(p.id, grads[p].T.copy(), p.device)
    return (lambda: opt.update(model, wrong)), [model, opt, wrong]


@bad(tk.InvalidArgumentError, "update takes the Gradients a backward returned, got a dict", "Gradients")
def optimizer_not_gradients(new_tape, tmp):
    model = mlp()
    opt = tk.optim.Sgd(model, lr=0.1)
    return (lambda: opt.update(model, {})), [model, opt]


@bad(tk.ModelFileError, ("does not fit this model", "missing layers.2.bias", "unexpected layers.2.b"),
     ("Nothing was loaded", "Load a file saved from a model of the same architecture"))
def model_file_names(new_tape, tmp):
    model = mlp()
    path = tmp / "renamed.npz"
    arrays = {name: p.numpy() for name, p in model.named_parameters()}
    arrays["layers.2.b"] = arrays.pop("layers.2.bias")
    np.savez(path, **arrays)
    return (lambda: model.load(path)), [model]


@bad(tk.ModelFileError, "layers.0.weight has shape (3, 5) in the file but (3, 4) in the model",
     ("Nothing was loaded", "same architecture"))
def model_file_shapes(new_tape, tmp):
    model = mlp()
    path = tmp / "wider.npz"
    tk.nn.Sequential(tk.nn.Linear(3, 5), tk.nn.Tanh(), tk.nn.Linear(4, 2)).save(path)
    return (lambda: model.load(path)), [model]


@bad(tk.ModelFileError, ("does not fit this model and optimizer", "it holds the state of Sgd, not of Adam"),
     ("Nothing was loaded", "the same optimizer"))
def checkpoint_of_another_optimizer(new_tape, tmp):
    model = mlp()
    sgd, adam = tk.optim.Sgd(model, lr=0.1, momentum=0.9), tk.optim.Adam(model, lr=0.1)
    grads = model_grads(model)
    sgd.update(model, grads)
    adam.update(model, grads)  # both hold state
    model.save(tmp / "sgd.npz", optimizer=sgd)
    return (lambda: model.load(tmp / "sgd.npz", optimizer=adam)), [model, adam]


@bad(tk.ModelFileError, ("missing optimizer state optimizer/state/layers.0.weight/m", "lr is 0.1 in the file but 0.2"),
     ("Nothing was loaded", "the same optimizer"))
def checkpoint_missing_state(new_tape, tmp):
    model = mlp()
    opt = tk.optim.Adam(model, lr=0.1)
    opt.update(model, model_grads(model))
    model.save(tmp / "full.npz", optimizer=opt)
    with np.load(tmp / "full.npz") as archive:
        np.savez(tmp / "cut.npz", **{n: archive[n] for n in archive.files if n != "optimizer/state/layers.0.weight/m"})
    other = tk.optim.Adam(model, lr=0.2)
    other.update(model, model_grads(model))
    return (lambda: model.load(tmp / "cut.npz", optimizer=other)), [model, other]


@bad(tk.ModelFileError, ("is not a model file tapekit can read safely", "pickled"),
     "written by model.save(path)")
def model_file_pickled_arrays(new_tape, tmp):
    model = mlp()
    path = tmp / "objects.npz"
    arrays = {name: p.numpy() for name, p in model.named_parameters()}
    arrays["layers.0.weight"] = np.array([{"weights": 1}, print], dtype=object)
    np.savez(path, **arrays)
    return (lambda: model.load(path)), [model]


@bad(tk.ModelFileError, "is not a model file tapekit can read safely", "pickled objects are refused")
def model_file_pickle(new_tape, tmp):
    model = mlp()
    path = tmp / "model.pkl"
    path.write_bytes(pickle.dumps({name: p.numpy() for name, p in model.named_parameters()}))
    return (lambda: model.load(path)), [model]


@bad(tk.ModelFileError, "is not a model file tapekit can read safely", ".npz archives of plain arrays")
def model_file_text(new_tape, tmp):
    model = mlp()
    path = tmp / "notes.txt"
    path.write_text("weights: 1, 2, 3\n")
    return (lambda: model.load(path)), [model]


# copies and pickles: a tape is not a value
NOT_A_VALUE = "a tape is not a value: detach() first (or x.split_tape()[0] to keep the id)"


def _copying(action: str) -> Callable[[Any], Any]:
    return {"pickle": pickle.dumps, "copy": copy.copy, "deepcopy": copy.deepcopy}[action]


def _traced_copy_case(action: str) -> None:
    def build(new_tape, tmp):
        x = operand(new_tape, (3,))
        return (lambda: _copying(action)(x)), [x]
    build.__name__ = f"{action}_traced"
    bad(tk.TapeError, (f"cannot {action} t", "it carries a tape"), NOT_A_VALUE, per_policy=True)(build)


for _action in ("pickle", "copy", "deepcopy"):
    _traced_copy_case(_action)


@bad(tk.TapeError, ("cannot pickle", "it carries a tape"), NOT_A_VALUE)
def pickle_moved_handle(new_tape, tmp):
    x, y = DEV.randn((3,)).trace(), DEV.randn((3,)).trace()
    z = x + y  # x's OwnedTape moved into z
    return (lambda: pickle.dumps(x)), [x, y, z]


@bad(tk.TapeError, ("cannot deepcopy", "it carries a tape"), NOT_A_VALUE)
def deepcopy_consumed_output(new_tape, tmp):
    out = (DEV.randn((3,)).trace() * 2).sum()
    out.backward()
    return (lambda: _copying("deepcopy")(out)), [out]


@bad(tk.TapeError, ("cannot deepcopy", "it carries a tape"), NOT_A_VALUE)
def deepcopy_list_with_a_traced_tensor(new_tape, tmp):
    x = DEV.randn((3,))
    xt = x.trace(tk.UnionTape())
    return (lambda: _copying("deepcopy")([x, xt])), [x, xt]


@bad(tk.TapeError, ("cannot pickle", "it carries a tape"), NOT_A_VALUE)
def pickle_model_holding_a_traced_tensor(new_tape, tmp):
    model = mlp()
    model.layers[2].bias = model.layers[2].bias.trace(tk.UnionTape())
    return (lambda: pickle.dumps(model)), [model]


def _view_copy_case(action: str) -> None:
    def build(new_tape, tmp):
        model = mlp()
        view = model.trace(tk.UnionTape(model.alloc_grads()))
        return (lambda: _copying(action)(view)), [model, view]
    build.__name__ = f"{action}_model_view"
    bad(tk.TapeError, ("cannot copy or pickle this Sequential", "a view made by model.trace(tape)",
                       "a tape is not a value"), "Copy or pickle the model itself")(build)


for _action in ("pickle", "copy", "deepcopy"):
    _view_copy_case(_action)


@bad(tk.TapeError, "cannot pickle this UnionTape: a tape is not a value", "Copy or pickle values instead")
def pickle_a_tape(new_tape, tmp):
    tape = tk.UnionTape()
    return (lambda: pickle.dumps(tape)), [tape]


@bad(tk.TapeError, "cannot deepcopy this OwnedTape: a tape is not a value", "tensors without tapes (x.detach())")
def deepcopy_a_tape(new_tape, tmp):
    tape = tk.OwnedTape()
    return (lambda: copy.deepcopy(tape)), [tape]


def _failing_rule(g, x):
    raise RuntimeError("a bug in my rule")


@bad(tk.BackwardError, ("the backward rule of", "for its operand", "raised RuntimeError: a bug in my rule"),
     "fix the cause and call backward again", per_policy=True)
def backward_rule_raises(new_tape, tmp):
    x = operand(new_tape, (3,))
    y = tk.ops.core.emit("mine", x.data * 2, (x,), (_failing_rule,), (x.data,), x.device)
    loss = (y * 3.0).sum()
    return (lambda: tk.backward([loss])), [x, y, loss]


@bad(tk.NonFiniteError, ("log made nan", "(x.log() * 2).sum()", "from -1 to 4"), "in its domain", per_policy=True)
def anomaly_in_the_forward(new_tape, tmp):
    x = DEV.tensor([-1.0, 4.0], name="x").trace(new_tape()) * 1.0

    def call():
        with tk.detect_anomaly():
            (x.log() * 2).sum()
    return call, [x]


@bad(tk.NonFiniteError, ("the backward rule of", "sqrt", "made inf"), "Nothing changed", per_policy=True)
def anomaly_in_the_backward(new_tape, tmp):
    x = DEV.tensor([0.0, 4.0], name="x").trace(new_tape()) * 1.0
    loss = x.sqrt().sum()

    def call():
        with tk.detect_anomaly():
            tk.backward([loss])
    return call, [x, loss]


# -- the test --------------------------------------------------------------------------------------
def _params():
    for name, case in CATALOGUE.items():
        for policy in (POLICIES if case.per_policy else ["union"]):
            yield pytest.param(name, policy, id=f"{name}-{policy}" if case.per_policy else name)


@pytest.mark.parametrize("name, policy", list(_params()))
def test_bad_call(name: str, policy: str, tmp_path: Path) -> None:
    case = CATALOGUE[name]
    block = tk.GlobalTape() if policy == "global" else contextlib.nullcontext()
    with block as active:
        new_tape = (lambda: active) if policy == "global" else POLICIES[policy]
        call, involved = case.build(new_tape, tmp_path)
        before = [snapshot(t) for t in involved]
        with pytest.raises(tk.TapekitError) as info:
            call()
    assert type(info.value) is case.error, f"{name}: raised {type(info.value).__name__}: {info.value}"
    message = str(info.value)
    for text in case.problem + case.fix:
        assert text in message, f"{name}: {text!r} not in the message {message!r}"
    assert [snapshot(t) for t in involved] == before, f"{name} changed a tape or tensor it was given"


def test_catalogue_size() -> None:
    assert len(CATALOGUE) >= 40
    assert len(list(_params())) >= 100


@pytest.mark.parametrize("policy", POLICIES)
def test_snapshot_sees_a_successful_op(policy: str) -> None:
    """The check above can fail: an op that succeeds changes what ``snapshot`` records."""
    block = tk.GlobalTape() if policy == "global" else contextlib.nullcontext()
    with block as active:
        new_tape = (lambda: active) if policy == "global" else POLICIES[policy]
        a, b = operand(new_tape, (3,)), operand(new_tape, (3,))
        before = [snapshot(a), snapshot(b)]
        a + b
    assert [snapshot(a), snapshot(b)] != before


@pytest.mark.parametrize("backend", ["numpy", "strict"])
def test_mixed_float_dtypes_are_not_a_crash_in_backward(backend: str) -> None:
    """float32 meeting float64 is allowed (numpy promotes); a preallocated float32 gradient buffer
    then takes float64 gradients on every device, including array API namespaces that refuse
    ``+=`` across dtypes."""
    dev = tk.Cpu(seed=0, backend=backend)
    x, y = dev.tensor([1.0, 2.0], dtype="float32"), dev.tensor([3.0, 4.0], dtype="float64")
    grads = tk.Gradients()
    grads.alloc(x)
    out = (x.trace(tk.UnionTape(grads=grads)) * y).sum()
    got = out.backward()[x]
    np.testing.assert_allclose(host(got), [3.0, 4.0])


def test_update_with_a_missing_gradient_names_it_and_leaves_that_parameter() -> None:
    """The one documented partial call: parameters with gradients take their step, the one without
    keeps its values, and ``UnusedParamsError`` names it with what to do."""
    model = mlp()
    opt = tk.optim.Sgd(model, lr=0.1)
    grads = model_grads(model)
    partial = tk.Gradients()
    named = model.named_parameters()
    for _, p in named[:-1]:
        partial.accumulate(p.id, grads[p], p.device)
    before = [snapshot(p) for _, p in named]
    with pytest.raises(tk.UnusedParamsError) as info:
        opt.update(model, partial)
    message = str(info.value)
    assert "no gradient for 1 parameter(s): layers.2.bias" in message
    assert "the other parameters were updated" in message and "model.alloc_grads()" in message
    after = [snapshot(p) for _, p in named]
    assert after[-1] == before[-1]
    assert all(a != b for a, b in zip(after[:-1], before[:-1]))


def test_a_global_block_closed_out_of_order_closes_the_blocks_opened_inside_it_and_names_them():
    """It raised, and left both blocks active: every later op outside any block was refused or recorded."""
    from tapekit.tapes.global_ import _active
    outer, inner = tk.GlobalTape(), tk.GlobalTape()
    with pytest.raises(tk.TapePolicyError, match=f"{inner.label}.* still open"):
        with outer:
            inner.__enter__()
    assert _active.get() == ()
    x = tk.Cpu().tensor([1.0, 2.0]).trace(tk.UnionTape())
    assert len((x * 2.0).tape) == 1


@pytest.mark.parametrize("policy", [tk.OwnedTape, tk.UnionTape])
def test_layernorm_refuses_an_input_of_another_last_axis_before_it_records(policy):
    """Its first ops ran and recorded before `* weight` failed (an OwnedTape moved: no retry)."""
    x = tk.Cpu().randn((5, 3), dtype="float64").trace(policy())
    before = repr(x.tape)
    with pytest.raises(tk.ShapeError, match=r"LayerNorm\(4\).*\(5, 3\)"):
        tk.nn.LayerNorm(4, dtype="float64")(x)
    assert repr(x.tape) == before


def test_an_update_refuses_gradients_it_cannot_use_before_changing_anything():
    """A non-float gradient failed in numpy after the first parameter moved and Adam counted a step;
    gradients of another model were said to have left 'the other parameters updated'."""
    dev = tk.Cpu(seed=0)
    model = tk.nn.Linear(3, 2, device=dev, dtype="float64")
    opt = tk.optim.Adam(model, lr=0.1)
    before = [p.numpy().copy() for p in model.parameters()]
    g = tk.Gradients()
    g.accumulate(model.weight.id, np.ones((3, 2)), dev)
    g.accumulate(model.bias.id, np.array(["a", "b"]), dev)
    with pytest.raises(tk.DTypeError, match="bias"):
        opt.update(model, g)
    other = tk.nn.Linear(3, 2, device=dev, dtype="float64")
    grads = (other.trace(tk.UnionTape())(dev.randn((4, 3), dtype="float64")) ** 2).sum().backward()
    with pytest.raises(tk.UnusedParamsError, match="nothing was updated") as err:
        opt.update(model, grads)
    assert "other parameters were updated" not in str(err.value)
    assert all(np.array_equal(p.numpy(), b) for p, b in zip(model.parameters(), before))
    assert all(state["t"] == 0 for _, state in opt._state.values())


def test_comparisons_and_masks_of_unfit_operands_raise_tapekit_errors():
    """numpy's ValueError and TypeError leaked: a ShapeError naming both shapes, a DTypeError for a
    mask operator on floats."""
    dev = tk.Cpu()
    a, b = dev.randn((2, 3)), dev.randn((4,))
    with pytest.raises(tk.ShapeError, match=r"\(2, 3\).*\(4,\)"):
        a > b
    for mask in (lambda: a & a, lambda: a | (a > 0), lambda: ~a):
        with pytest.raises(tk.DTypeError, match="truth values"):
            mask()
    m = a > 0
    assert (~m).dtype == m.dtype and (m & (a < 1)).dtype == m.dtype


def test_a_size_that_is_not_an_int_is_refused_not_truncated():
    """reshape(2.7, 3), broadcast_to((2.5, 3)) and dev.zeros((2.5, 3)) gave shape (2, 3); reshape(1.5, 4)
    said it could not reshape to (1, 4), hiding the cause."""
    dev = tk.Cpu()
    a = dev.randn((2, 3))
    for call in (lambda: a.reshape(2.7, 3), lambda: a.reshape(1.5, 4), lambda: a.broadcast_to((2.5, 3)),
                 lambda: dev.zeros((2.5, 3))):
        with pytest.raises(tk.InvalidArgumentError, match="int"):
            call()
    assert a.reshape(np.int64(3), 2).shape == (3, 2)


@pytest.mark.parametrize("shape", [(5,), (1,), (2, 3)])
@pytest.mark.parametrize("policy", [tk.UnionTape, tk.ArcTape, tk.OwnedTape])
def test_a_gradient_entry_of_another_shape_is_refused_before_the_tape_changes(shape, policy):
    """An entry of (5,) raised numpy's ValueError after the backward drained the tape; one of (1,) or
    (2, 3) broadcast into a gradient of the wrong shape."""
    dev = tk.Cpu()
    x = dev.randn((3,), dtype="float64")
    g = tk.Gradients()
    g.accumulate(x.id, np.zeros(shape), dev)
    loss = (x.trace(policy(grads=g)) * 2.0).sum()
    before = repr(loss.tape)
    with pytest.raises(tk.ShapeError, match=r"\(3,\)"):
        loss.backward()
    assert repr(loss.tape) == before


def test_a_tangent_or_a_model_of_the_wrong_kind_is_refused_with_a_tapekit_error():
    dev = tk.Cpu(default_dtype="float64")
    x = dev.tensor([1.0, 2.0])
    with pytest.raises(tk.InvalidArgumentError, match="tangent"):
        tk.jvp(lambda t: t * t, (x,), ("a",))
    with pytest.raises(tk.InvalidArgumentError, match="v"):
        tk.hvp(lambda t: (t * t).sum(), x, "abc")
    model = tk.nn.Linear(2, 1, device=dev, dtype="float64")
    grads = model.trace(tk.UnionTape())(dev.tensor([[1.0, 2.0]])).sum().backward()
    with pytest.raises(tk.InvalidArgumentError, match="Module"):
        tk.optim.Sgd(model, lr=0.1).update("model", grads)


def test_an_ops_number_parameter_that_is_not_a_number_is_refused():
    """numpy's UFuncTypeError or Python's TypeError leaked."""
    dev = tk.Cpu()
    a = dev.randn((2, 3)).trace(tk.UnionTape())
    before = len(a.tape)
    for call in (lambda: a.clip("a", None), lambda: tk.leaky_relu(a, "x"), lambda: tk.elu(a, None),
                 lambda: tk.power(a, "x")):
        with pytest.raises(tk.InvalidArgumentError, match="number"):
            call()
    assert len(a.tape) == before


def test_more_bad_input_raises_tapekit_errors_that_say_what_to_do():
    """Python's and numpy's errors leaked from these (found by an audit)."""
    dev = tk.Cpu()
    a = dev.randn((3, 4))
    with pytest.raises(tk.ShapeError, match="one value"):
        a.item()
    with pytest.raises(tk.OperandError, match="0-d"):  # a TypeError, as len() raises for an unsized object
        len(dev.tensor(1.0))
    with pytest.raises(tk.ShapeError, match="empty"):
        dev.zeros((0, 3)).max(axis=0)
    with pytest.raises(tk.InvalidArgumentError, match="numbers"):
        tk.mse_loss(a, [["a"] * 4] * 3)


@pytest.mark.parametrize("make", [lambda m: tk.compile(lambda a: a, fuse="no"), lambda m: m.train("no"),
                                  lambda m: tk.optim.Sgd(m, 0.1, 0.9, nesterov="no"),
                                  lambda m: tk.optim.Adam(m, betas=5), lambda m: tk.optim.Adam(m, betas=None)],
                         ids=["fuse", "train", "nesterov", "betas=5", "betas=None"])
def test_a_flag_or_setting_of_the_wrong_kind_is_refused_not_taken_as_true(make):
    model = tk.nn.Linear(2, 2)
    with pytest.raises(tk.InvalidArgumentError, match="must be (True or False|two numbers)"):
        make(model)
    assert model.training is True


@pytest.mark.parametrize("call", [
    lambda x: tk.grad(3), lambda x: tk.vjp(3, x), lambda x: tk.jvp(3, x, x), lambda x: tk.hessian(None, x),
    lambda x: tk.jacobian(3, x), lambda x: tk.hvp(3, x, x), lambda x: tk.check_grads(3, x),
    lambda x: tk.hessian(lambda v: v.sum(), [1.0, 2.0]), lambda x: tk.nn.ReLU()([1.0, 2.0]),
    lambda x: tk.nn.LayerNorm(2)(np.ones((1, 2))), lambda x: tk.nn.Residual(tk.nn.Tanh())("x"),
    lambda x: tk.grad(lambda v: v.sum(), argnums=None)(x), lambda x: tk.grad(lambda v: v.sum(), argnums=1.0)(x),
    lambda x: x.to("cpu"), lambda x: tk.nn.Linear(3, 2, device="cpu"),
    lambda x: DEV.randn((3,), dtype="int64"), lambda x: DEV.rand((3,), dtype="bool"),
    lambda x: tk.nn.Linear(3, 2, dtype="int64"), lambda x: tk.nn.Embedding(3, 2, dtype="int64"),
], ids=["grad(3)", "vjp(3)", "jvp(3)", "hessian(None)", "jacobian(3)", "hvp(3)", "check_grads(3)", "hessian(list)",
        "ReLU(list)", "LayerNorm(array)", "Residual(str)", "argnums=None", "argnums=1.0", "to('cpu')",
        "Linear(device='cpu')", "randn(int64)", "rand(bool)", "Linear(int64)", "Embedding(int64)"])
def test_a_call_of_the_wrong_kind_raises_a_tapekit_error_that_says_what_to_pass(call):
    """A raw TypeError or AttributeError from deep inside (or, for integer draws and weights, constant
    values: randn truncated to 0) becomes a tapekit error naming what to pass."""
    with pytest.raises((tk.OperandError, tk.InvalidArgumentError, tk.DTypeError),
                       match="takes|must be|argnums|differentiates|draws real numbers|trained by gradients"):
        call(DEV.tensor([1.0, 2.0], dtype="float64"))


def test_a_global_tape_entered_again_inside_its_own_block_nests():
    """``with g: with g:`` raised two contradicting errors at the inner block's end."""
    g = tk.GlobalTape()
    x = DEV.tensor([1.0, 2.0], dtype="float64")
    with g:
        with g:
            y = (x * 2.0).sum()
        z = (x * 3.0).sum()
        assert active_global() is g
    assert active_global() is None
    assert len(g) == 4 and g.backward([y, z])[x].tolist() == [5.0, 5.0]


@pytest.mark.parametrize("call, error", [
    (lambda t: tk.cross_entropy(t, [[0, 1], [2]]), tk.InvalidArgumentError),
    (lambda t: tk.nll_loss(t, [[0, 1], [2]]), tk.InvalidArgumentError),
    (lambda t: tk.mse_loss(t, np.array([[1.0, None, 2.0], [1.0, 2.0, 3.0]], dtype=object)), tk.InvalidArgumentError),
    (lambda t: tk.binary_cross_entropy_with_logits(t, tk.Cpu(backend="strict").tensor(np.zeros((2, 3)))),
     tk.DeviceMismatchError),
], ids=["ragged labels", "ragged nll labels", "None in a target", "target on another device"])
def test_a_loss_target_that_cannot_be_used_raises_a_tapekit_error(call, error):
    t = DEV.tensor([[1.0, 2.0, 3.0], [0.0, 1.0, 2.0]], dtype="float64").trace(tk.UnionTape())
    with pytest.raises(error):
        call(t)
    assert len(t.tape) == 0


@pytest.mark.parametrize("call", [lambda: tk.Gradients()["a"], lambda: "a" in tk.Gradients(),
                                  lambda: tk.Gradients(leaves=["a"]), lambda: tk.Gradients(leaves=3),
                                  lambda: tk.UnionTape(leaves=3)], ids=["g['a']", "'a' in g", "leaves=['a']",
                                                                        "Gradients(leaves=3)", "UnionTape(leaves=3)"])
def test_gradients_keyed_by_something_else_than_tensors_raise_operand_error(call):
    with pytest.raises(tk.OperandError, match="keyed by tensors|leaves takes a list"):
        call()


@pytest.mark.parametrize("call", [lambda: tk.Cpu(seed=-1), lambda: tk.Cpu(seed=1.5), lambda: tk.Cpu(seed="a"),
                                  lambda: DEV.full((2,), None), lambda: DEV.full((2,), [1, 2])],
                         ids=["seed=-1", "seed=1.5", "seed='a'", "full(None)", "full(list)"])
def test_a_seed_or_fill_value_that_is_not_one_number_is_refused(call):
    """full(None) filled NaN silently; numpy's own errors leaked for the seeds."""
    with pytest.raises(tk.InvalidArgumentError, match="seed must be an int|one number"):
        call()


@pytest.mark.parametrize("call", [
    lambda x: tk.UnionTape(grads="x"), lambda x: tk.tapes("x"), lambda x: tk.explain([x]),
    lambda x: tk.viz.dag(x, grads="x"), lambda x: x.reshape(None), lambda x: tk.concat([x, x], axis=None),
    lambda x: tk.stack([x, x], axis=(0, 1)), lambda x: tk.where(x > 0, x, "a"),
    lambda x: tk.widgets.TapeExplorer(p4, policy="bad"), lambda x: tk.widgets.TapeExplorer(p4, step="a"),
    lambda x: tk.widgets.MergeViewer(p4, policy="bad"), lambda x: tk.widgets.BackwardPlayer(p4, output=3),
], ids=["UnionTape(grads='x')", "tapes('x')", "explain(list)", "dag(grads='x')", "reshape(None)",
        "concat(axis=None)", "stack(axis=tuple)", "where(str)", "explorer policy", "explorer step", "merge policy",
        "player output"])
def test_more_calls_of_the_wrong_kind_raise_tapekit_errors(call):
    """Each leaked a TypeError, AttributeError, ValueError or ipywidgets' TraitError."""
    x = DEV.tensor([1.0, 2.0], dtype="float64").trace(tk.UnionTape())
    with pytest.raises(tk.TapekitError):
        call(x)
    assert len(x.tape) == 0


@pytest.mark.parametrize("call", [
    lambda: tk.nn.Residual(tk.nn.Linear(3, 1))(DEV.tensor(np.ones((4, 3)))),
    lambda: tk.nn.Linear(2, 2).zero_grads(tk.nn.Linear(2, 2).alloc_grads()),
    lambda: tk.nn.Linear(2, 2).zero_grads(None), lambda: tk.Gradients(leaves=[True]),
], ids=["Residual broadcast", "zero_grads of another model", "zero_grads(None)", "leaves=[True]"])
def test_nonsense_a_module_or_gradients_took_silently_is_refused(call):
    """Residual broadcast a (4, 1) output to (4, 3); zero_grads put a model's parameters into another's
    Gradients; a bool was taken as tensor id 1."""
    with pytest.raises(tk.TapekitError):
        call()
