"""``TensorNamespace``: the array API the backward rules call, as tapekit ops over tensors. Each
function gives the device namespace's values; those with a derivative record on the operands'
tape, constants and masks on none; a function with no op says so."""

from __future__ import annotations

import numpy as np
import pytest

import tapekit as tk
from tapekit.namespace import TensorNamespace

from .conftest import host

X = np.array([[0.5, -1.0, 2.0], [0.25, 1.5, -0.75]])

RECORDED = {  # name: call on (namespace, tensor)
    "exp": lambda ns, t: ns.exp(t), "log": lambda ns, t: ns.log(ns.abs(t)), "sqrt": lambda ns, t: ns.sqrt(ns.abs(t)),
    "sin": lambda ns, t: ns.sin(t), "cos": lambda ns, t: ns.cos(t), "tanh": lambda ns, t: ns.tanh(t),
    "sinh": lambda ns, t: ns.sinh(t), "cosh": lambda ns, t: ns.cosh(t), "expm1": lambda ns, t: ns.expm1(t),
    "sum": lambda ns, t: ns.sum(t, axis=(0,), keepdims=True), "mean": lambda ns, t: ns.mean(t, axis=1),
    "max": lambda ns, t: ns.max(t, axis=1, keepdims=True), "min": lambda ns, t: ns.min(t, axis=0),
    "reshape": lambda ns, t: ns.reshape(t, (3, 2)), "broadcast_to": lambda ns, t: ns.broadcast_to(t, (4, 2, 3)),
    "permute_dims": lambda ns, t: ns.permute_dims(t, (1, 0)), "matrix_transpose": lambda ns, t: ns.matrix_transpose(t),
    "matmul": lambda ns, t: ns.matmul(t, ns.matrix_transpose(t)), "expand_dims": lambda ns, t: ns.expand_dims(t, -1),
    "flip": lambda ns, t: ns.flip(t, axis=1), "roll": lambda ns, t: ns.roll(t, 1, axis=1),
    "cumulative_sum": lambda ns, t: ns.cumulative_sum(t, axis=1), "tril": lambda ns, t: ns.tril(t),
    "where": lambda ns, t: ns.where(t > 0, t, ns.zeros_like(t)), "multiply": lambda ns, t: ns.multiply(t, t),
    "maximum": lambda ns, t: ns.maximum(t, 0.0), "logaddexp": lambda ns, t: ns.logaddexp(t, 0.0),
    "moveaxis": lambda ns, t: ns.moveaxis(t, 0, 1), "concat": lambda ns, t: ns.concat([t, t], axis=0),
    "stack": lambda ns, t: ns.stack([t, t], axis=1), "astype": lambda ns, t: ns.astype(t, np.float32),
}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_each_function_equals_the_namespaces_and_records_on_the_operands_tape(name, cpu):
    ns = TensorNamespace(cpu)
    t = cpu.tensor(X, dtype="float64").trace(tk.UnionTape())
    got = RECORDED[name](ns, t)
    want = RECORDED[name](np, X) if name != "astype" else X.astype(np.float32)
    assert isinstance(got, tk.Tensor) and got.tape is not None and got.tape.same_as(t.tape)
    np.testing.assert_allclose(host(got), want, rtol=1e-6)


def test_constants_and_masks_carry_no_tape(dev):
    ns = TensorNamespace(dev)
    t = dev.tensor(X, dtype="float64").trace(tk.UnionTape())
    for made in (ns.zeros_like(t), ns.ones_like(t), ns.full_like(t, 2.0), ns.zeros((2,), dtype=t.dtype),
                 ns.eye(3, dtype=t.dtype), ns.isnan(t), ns.isfinite(t), (t > 0) & (t < 1), (t > 0) | ~(t < 1)):
        assert isinstance(made, tk.Tensor) and made.tape is None
    np.testing.assert_array_equal(host((t > 0) & (t < 1)), (X > 0) & (X < 1))
    np.testing.assert_array_equal(host(~(t > 0)), ~(X > 0))


def test_a_function_without_an_op_says_which_and_what_to_do(cpu):
    with pytest.raises(tk.SecondOrderError, match="xp.exp2 has no tapekit op"):
        TensorNamespace(cpu).exp2
