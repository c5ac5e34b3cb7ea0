"""Indexing and the shape ops, case by case, on every device: the forward equals numpy's, and the
gradient of ``t[key]`` is numpy's ``np.add.at`` (values picked twice get their gradient twice).
Drawn cases of every shape op are in tests/op_specs/shape.py."""

from __future__ import annotations

import numpy as np
import pytest

import tapekit as tk

from .conftest import host

MASK = np.array([[True, False, True, True], [False, False, False, False], [True, True, False, True]])
KEYS = {
    "repeated rows, then a slice": ((3, 2), ([0, 0, 1], slice(None))),
    "repeated rows, then an int": ((3, 2), ([0, 0, 1], 0)),
    "repeated, alone": ((3,), [0, 0, 2, 0]),
    "negative, repeated": ((4, 3), ([-1, -1, 0], [2, -3, 2])),
    "a 2-d index array": ((4, 3), np.array([[0, 3], [3, 3]])),
    "arrays apart (their axis moves first)": ((2, 3, 4), ([0, 1, 1], slice(None), [3, 3, 0])),
    "arrays side by side after a slice": ((2, 3, 4), (slice(None), [2, 2], [0, 0])),
    "arrays that broadcast": ((3, 4), (np.array([[0], [2], [2]]), np.array([1, 1, 3]))),
    "None, ... and an array": ((2, 3, 4), (None, ..., [1, 1], None)),
    "a full mask": ((3, 4), MASK),
    "a mask in a tuple": ((3, 4), (np.array([True, False, True]), slice(1, None))),
    "a mask with an array": ((3, 4), (np.array([True, False, True]), [1, 1])),
    "a 0-d array and a list": ((3, 4), (np.array(2), [0, 0])),
    "a 0-d array alone": ((3, 4), np.array(-1)),
    "an empty list": ((3, 4), ([], slice(None))),
    "an empty int array": ((3, 4), np.array([], dtype=np.int64)),
    "an empty axis": ((3, 0, 2), ([1, 1], slice(None), 0)),
    "True": ((2, 3), True),
    "a 0-d tensor, None": ((), None),
    "a 0-d tensor, a 0-d mask": ((), np.array(True)),
    "slices beyond the ends": ((3, 4), (slice(-10, 10), slice(5, None))),
    "negative steps": ((3, 4), (slice(None, None, -2), slice(10, -10, -1))),
    "an empty negative-step slice": ((3, 4), (slice(-10, None, -1),)),
    "ints, None and ...": ((2, 3, 4), (1, None, ..., -1)),
    "a numpy int": ((2, 3), np.int64(-2)),
}


def truth(shape, key, seed):
    """numpy's forward, and the gradient of ``sum(x[key] * seed)``: seed added where values came from."""
    grad = np.zeros(shape)
    np.add.at(grad, key, seed)
    return grad


@pytest.mark.parametrize("name", KEYS)
def test_index_matches_numpy_and_adds_repeats(dev, name):
    shape, key = KEYS[name]
    a = np.random.default_rng(0).uniform(-2, 2, size=shape)
    x = dev.tensor(a, dtype="float64")
    out = x.trace()[key]
    want = a[key]
    assert out.shape == want.shape
    np.testing.assert_array_equal(host(out), want)
    seed = np.random.default_rng(1).uniform(1, 2, size=want.shape)
    g = out.backward(seed=dev.tensor(seed, dtype="float64"))
    np.testing.assert_allclose(host(g[x]), truth(shape, key, seed))


def test_the_reported_case(dev):
    x = dev.tensor(np.ones((3, 2)))
    np.testing.assert_array_equal(host(x.trace()[[0, 0, 1], :].sum().backward()[x]), [[2, 2], [1, 1], [0, 0]])
    np.testing.assert_array_equal(host(x.trace()[[0, 0, 1], 0].sum().backward()[x]), [[2, 0], [1, 0], [0, 0]])


def test_index_tensors_are_keys(dev):
    a = np.arange(12.0).reshape(3, 4) - 5
    x = dev.tensor(a, dtype="float64")
    rows = dev.tensor(np.array([2, 0, 2]))
    for key, np_key in [(rows, [2, 0, 2]), ((rows, 1), ([2, 0, 2], 1)), ((slice(None), rows), (slice(None), [2, 0, 2])),
                        (x > 0, a > 0),
                        ((dev.tensor(np.array([True, False, True])), dev.tensor(np.array([3, 3]))), ([0, 2], [3, 3]))]:
        seed = np.random.default_rng(2).uniform(size=a[np_key].shape)
        out = x.trace()[key]
        np.testing.assert_array_equal(host(out), a[np_key])
        np.testing.assert_allclose(host(out.backward(seed=dev.tensor(seed, dtype="float64"))[x]),
                                   truth(a.shape, np_key, seed))


@pytest.mark.parametrize("key", [5, (0, 0, 0), [0, 7], np.array([0.5]), "x", (..., ...), np.array([True]),
                                 (slice(0.5),), [[0, 1], slice(None)]])
def test_invalid_keys_say_what_works(dev, key):
    x = dev.tensor(np.zeros((2, 3))).trace()
    tape = x.tape
    with pytest.raises(tk.IndexingError, match="Use ints, slices, None, ..., integer arrays"):
        x[key]
    assert len(tape) == 0


def test_take_along_axis(dev):
    a = np.random.default_rng(3).uniform(-2, 2, size=(3, 4))
    x = dev.tensor(a, dtype="float64")
    for index, axis in [(np.array([[0, 0, 3], [1, 1, 1], [2, 3, 0]]), 1), (np.array([[2, 2, 0, -1]]), 0),
                        (np.array([[1], [1], [0]]), -1), (np.array([5, 5, 0]), None)]:
        out = tk.take_along_axis(x.trace(), index, axis)
        want = np.take_along_axis(a, index, axis)
        np.testing.assert_array_equal(host(out), want)
        grad = np.zeros(a.size if axis is None else a.shape)
        np.add.at(grad, (index,) if axis is None else tuple(
            index if d == axis % 2 else np.arange(n).reshape([-1 if e == d else 1 for e in range(2)])
            for d, n in enumerate(a.shape)), 1.0)
        np.testing.assert_allclose(host(out.sum().backward()[x]), grad.reshape(a.shape))
    with pytest.raises(tk.ShapeError, match="one index axis per tensor axis"):
        tk.take_along_axis(x, np.array([0, 1]), 1)
    with pytest.raises(tk.IndexingError, match="out of bounds"):
        tk.take_along_axis(x, np.array([[4]]), 1)


# -- the shape ops -------------------------------------------------------------------------------
def test_methods_match_the_functions(dev):
    a = np.arange(24.0).reshape(2, 1, 3, 4)
    x = dev.tensor(a)
    for method, want in [(x.squeeze(), np.squeeze(a)), (x.squeeze(1), np.squeeze(a, 1)), (x.flatten(), a.flatten()),
                         (x.flip(), np.flip(a)), (x.flip((0, 3)), np.flip(a, (0, 3))), (x.roll(2), np.roll(a, 2)),
                         (x.roll((1, -1), (3, 0)), np.roll(a, (1, -1), (3, 0))), (x.tile((2, 1)), np.tile(a, (2, 1))),
                         (x.repeat(2), np.repeat(a, 2)), (x.repeat([1, 0, 2], axis=2), np.repeat(a, [1, 0, 2], 2)),
                         (x.tril(), np.tril(a)), (x.triu(-1), np.triu(a, -1)),
                         (x.moveaxis(0, -1), np.moveaxis(a, 0, -1)),
                         (x.moveaxis((0, 1), (3, 0)), np.moveaxis(a, (0, 1), (3, 0)))]:
        np.testing.assert_array_equal(host(method), want)
    for fn, want in [(tk.expand_dims(x, (0, -1)), np.expand_dims(a, (0, -1))), (tk.flatten(x), a.flatten())]:
        np.testing.assert_array_equal(host(fn), want)


def test_split(dev):
    a = np.arange(10.0).reshape(5, 2)
    x = dev.tensor(a, dtype="float64")
    for sections, axis in [(5, 0), ([3, 10], 0), ([3, 1], 0), (2, -1), ([], 1)]:
        pieces = tk.split(x, sections, axis)
        want = np.split(a, sections, axis)
        assert len(pieces) == len(want)
        for got, w in zip(pieces, want):
            np.testing.assert_array_equal(host(got), w)
    first, second = tk.split(x.trace(tk.UnionTape()), [2], 0)
    g = tk.backward([(first * 2).sum(), (second * 3).sum()])
    np.testing.assert_array_equal(host(g[x]), [[2, 2], [2, 2], [3, 3], [3, 3], [3, 3]])
    with pytest.raises(tk.ShapeError, match="does not divide into 2 equal sections"):
        tk.split(x, 2)
    with pytest.raises(tk.ShapeError, match="a 0-d tensor has no axis to cut"):
        tk.split(dev.tensor(1.0), 1)


@pytest.mark.parametrize("pad_width", [1, (2,), (1, 2), ((0, 1), (2, 0)), ((1, 1),)])
def test_pad(dev, pad_width):
    a = np.arange(6.0).reshape(2, 3)
    x = dev.tensor(a, dtype="float64")
    out = tk.pad(x.trace(), pad_width, constant_values=-1.5)
    np.testing.assert_array_equal(host(out), np.pad(a, pad_width, constant_values=-1.5))
    np.testing.assert_array_equal(host((out * out).sum().backward()[x]), 2 * a)


def test_pad_refuses_what_it_cannot_do(dev):
    x = dev.tensor(np.zeros((2, 3)))
    with pytest.raises(tk.InvalidArgumentError, match="only mode='constant'"):
        tk.pad(x, 1, mode="reflect")
    with pytest.raises(tk.InvalidArgumentError, match="pad widths must be"):
        tk.pad(x, -1)
    with pytest.raises(tk.InvalidArgumentError, match="pad widths must be"):
        tk.pad(x, ((1, 2), (3, 4), (5, 6)))
    with pytest.raises(tk.InvalidArgumentError, match="constant_values must be one number"):
        tk.pad(x, 1, constant_values=(1, 2))


def test_shape_op_errors(dev):
    x = dev.tensor(np.zeros((2, 1, 3)))
    with pytest.raises(tk.ShapeError, match="squeeze: axis 0 has size 2"):
        x.squeeze(0)
    with pytest.raises(tk.ShapeError, match="tril takes a matrix"):
        dev.tensor([1.0, 2.0]).tril()
    with pytest.raises(tk.AxisError, match="moveaxis: give as many destinations"):
        x.moveaxis((0, 1), 2)
    with pytest.raises(tk.InvalidArgumentError, match="repeat:"):
        x.repeat([1, 2, 3], axis=0)
    with pytest.raises(tk.InvalidArgumentError, match="tile:"):
        x.tile(-1)


def test_concat_of_0d_tensors_says_to_stack(dev):
    with pytest.raises(tk.ShapeError, match=r"0-d tensors have no axis to join; use tk.stack"):
        tk.concat([dev.tensor(1.0), dev.tensor(2.0)])


def test_where_of_numbers(dev):
    x = dev.tensor([-1.0, 2.0, 0.5])
    np.testing.assert_array_equal(host(tk.where(x > 0, 1, 3)), [3.0, 1.0, 1.0])
    xt = x.trace()
    out = tk.where(xt > 0, xt, 0.0)
    np.testing.assert_array_equal(host(out), [0.0, 2.0, 0.5])
    np.testing.assert_array_equal(host(out.sum().backward()[x]), [0.0, 1.0, 1.0])
    with pytest.raises(tk.OperandError, match="needs a tensor among the condition and the values"):
        tk.where(np.array([True]), 1.0, 0.0)
