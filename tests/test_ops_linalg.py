"""einsum, outer and tensordot beyond the op factory's draws (tests/op_specs/linalg.py): each
backward is an einsum one can read, each op is one record under its own name, the same tensor
may come twice, and every bad argument is refused before anything is recorded."""

from __future__ import annotations

import numpy as np
import pytest

import tapekit as tk
from tapekit.ops.linalg import einsum_grad_subscripts

from .conftest import host

RNG = np.random.default_rng(0)


def _tensors(dev, *shapes):
    return [dev.tensor(RNG.standard_normal(shape), dtype="float64") for shape in shapes]


@pytest.mark.parametrize("spec, k, grad_spec", [
    ("ij,jk->ik", 0, "ik,jk->ij"),  # g @ b.T
    ("ij,jk->ik", 1, "ik,ij->jk"),  # a.T @ g
    ("ij->ji", 0, "ji->ij"),
    ("ij->i", 0, "i->i"),           # j was summed away: the gradient is broadcast back along it
    ("ij,ij->i", 0, "i,ij->ij"),    # 'ii->i' in plain form, with an identity: g on the diagonal
])
def test_the_gradient_of_an_einsum_is_an_einsum(spec, k, grad_spec):
    assert einsum_grad_subscripts(spec, k) == grad_spec


def test_the_gradients_of_a_matrix_product_by_einsum_are_those_of_matmul(dev):
    a, b = _tensors(dev, (2, 3), (3, 4))
    seed = RNG.standard_normal((2, 4))
    tape = tk.UnionTape()
    out = tk.einsum("ij,jk->ik", a.trace(tape), b.trace(tape))
    g = tk.backward([out], [dev.tensor(seed, dtype="float64")])
    np.testing.assert_allclose(host(g[a]), seed @ host(b).T, atol=1e-12)
    np.testing.assert_allclose(host(g[b]), host(a).T @ seed, atol=1e-12)


def test_a_trace_and_a_diagonal_send_their_gradient_to_the_diagonal(dev):
    (x,) = _tensors(dev, (3, 3))
    np.testing.assert_allclose(host(tk.einsum("ii", x.trace()).backward()[x]), np.eye(3))
    seed = np.array([1.0, 2.0, 3.0])
    g = tk.backward([tk.einsum("ii->i", x.trace())], [dev.tensor(seed, dtype="float64")])
    np.testing.assert_allclose(host(g[x]), np.diag(seed))


@pytest.mark.parametrize("subscripts, shapes", [
    ("ij, jk -> ik", [(2, 3), (3, 2)]),   # spaces, as numpy allows
    ("aB", [(2, 3)]),                     # implicit output in ASCII order: 'Ba'
    ("ij...,j", [(2, 3, 4), (3,)]),       # implicit: '...' first, then the letters used once
    ("i->...i", [(3,)]),                  # a '...' of no axes
    ("ij,ij->ij", [(1, 3), (2, 3)]),      # a size-1 axis broadcasts, as numpy's einsum allows
])
def test_einsum_reads_subscripts_as_numpy_does(dev, subscripts, shapes):
    tensors = _tensors(dev, *shapes)
    want = np.einsum(subscripts, *[host(t) for t in tensors])
    got = tk.einsum(subscripts, *tensors)
    assert got.shape == want.shape
    np.testing.assert_allclose(host(got), want, atol=1e-12)
    tk.check_grads(lambda *ts: tk.einsum(subscripts, *ts), *tensors)


def test_each_op_is_one_record_under_its_own_name(dev):
    a, b = _tensors(dev, (2, 3), (3, 2))
    tape = tk.UnionTape()
    tk.einsum("ij,jk->ik", a.trace(tape), b.trace(tape))
    tk.tensordot(a.trace(tape), b.trace(tape), axes=1)
    tk.outer(a.trace(tape)[0], b.trace(tape)[:, 0])
    names = [r.name for r in tape.records]
    assert names[0] == "einsum" and names[1] == "tensordot" and names[-1] == "outer"


def test_tensordot_takes_numpys_pair_of_ints_and_of_sequences(dev):
    a, b = _tensors(dev, (2, 3, 4), (4, 3))
    for axes in ((2, 0), ([1, 2], [1, 0]), ((-1,), (0,))):
        np.testing.assert_allclose(host(tk.tensordot(a, b, axes)), np.tensordot(host(a), host(b), axes), atol=1e-12)


def test_outer_flattens_as_numpy_does_and_the_same_tensor_may_come_twice(dev):
    (x,) = _tensors(dev, (2, 2))
    np.testing.assert_allclose(host(tk.outer(x, x)), np.outer(host(x), host(x)))
    (v,) = _tensors(dev, (3,))
    for policy in (tk.OwnedTape, tk.UnionTape):
        vt = v.trace(policy())
        np.testing.assert_allclose(host(tk.einsum("i,i->", vt, vt).backward()[v]), 2 * host(v), atol=1e-12)


@pytest.mark.parametrize("subscripts, shapes, error, match", [
    ("ij,jk", [(2, 3)], tk.InvalidArgumentError, "has 2 operand terms but 1 operands were given"),
    ("i1", [(2, 3)], tk.InvalidArgumentError, "cannot read 'i1'"),
    ("ij->i->j", [(2, 3)], tk.InvalidArgumentError, "cannot read 'i->j'"),
    ("i", [(2, 3)], tk.ShapeError, "the term 'i' names 1 axes but its operand has 2"),
    ("ijk...", [(2, 3)], tk.ShapeError, "names 3 axes but its operand has 2"),
    ("ij->k", [(2, 3)], tk.InvalidArgumentError, "names 'k' but no operand does"),
    ("ij->ii", [(2, 3)], tk.InvalidArgumentError, "names 'i' twice"),
    ("...i->i", [(2, 3)], tk.InvalidArgumentError, "'...' stands for 1 axes but the output 'i' has no '...'"),
    ("ij,jk", [(2, 3), (4, 2)], tk.ShapeError, "letter 'j' has size 3 in one operand and 4 in another"),
    ("...,...", [(2,), (3,)], tk.ShapeError, "a '...' axis has size 2 in one operand and 3"),
    ("ii", [(2, 3)], tk.ShapeError, "letter 'i' names axes of sizes 2 and 3 in one operand"),
])
def test_einsum_refuses_bad_subscripts_before_recording(dev, subscripts, shapes, error, match):
    tape = tk.OwnedTape()
    tensors = [t.trace(tape) if i == 0 else t for i, t in enumerate(_tensors(dev, *shapes))]
    with pytest.raises(error, match=match.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        tk.einsum(subscripts, *tensors)
    assert len(tensors[0].tape) == 0


def test_einsum_and_outer_refuse_what_is_not_a_tensor(dev):
    (x,) = _tensors(dev, (2,))
    with pytest.raises(tk.OperandError, match="the subscripts come first"):
        tk.einsum(x, x)
    with pytest.raises(tk.OperandError, match="the subscripts come first, as a string"):
        tk.einsum(["i"], x)
    with pytest.raises(tk.OperandError, match="einsum takes tensors, got none"):
        tk.einsum("")
    with pytest.raises(tk.OperandError, match="outer takes tensors, got Tensor, list"):
        tk.outer(x, [1.0, 2.0])


@pytest.mark.parametrize("axes, error, match", [
    (3, tk.AxisError, "axes=3 pairs that many axes of each operand, but they have 2 and 2"),
    (-1, tk.AxisError, "pass 0 to 2"),
    (([0, 1], [0]), tk.AxisError, "names 2 axes of a but 1 of b"),
    (([0], [0]), tk.ShapeError, "axis 0 of a (2, 3) has size 2 but axis 0 of b (3, 4) has 3"),
    (([0, 0], [1, 1]), tk.AxisError, "repeats an axis"),
    (([2], [0]), tk.AxisError, "axis 2 is out of range"),
    ("1", tk.InvalidArgumentError, "axes must be an int or a pair (a_axes, b_axes), got '1'"),
    ((0, 1, 2), tk.InvalidArgumentError, "axes must be an int or a pair"),
])
def test_tensordot_refuses_bad_axes_before_recording(dev, axes, error, match):
    a, b = _tensors(dev, (2, 3), (3, 4))
    a = a.trace(tk.OwnedTape())
    with pytest.raises(error, match=match.replace("(", r"\(").replace(")", r"\)")):
        tk.tensordot(a, b, axes)
    assert len(a.tape) == 0

