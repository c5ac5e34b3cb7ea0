"""The acceptance programs of the design, verbatim (P8 lives with the modules' tests); each runs
on conftest's `cpu` fixture under the name `dev` the programs use."""

from __future__ import annotations

import numpy as np
import pytest

import tapekit as tk


def test_p1_leaky_trace_gives_every_operand_a_gradient(cpu):
    dev = cpu
    x, y = dev.tensor([1., 2., 3.]), dev.tensor([4., 5., 6.])
    g = (x.trace() * y).sum().backward()
    assert np.allclose(g[x], [4, 5, 6]) and np.allclose(g[y], [1, 2, 3])


def test_p2_a_leaf_set_keeps_only_the_leaves(cpu):
    dev = cpu
    x, y = dev.tensor([1., 2., 3.]), dev.tensor([4., 5., 6.])
    g = (x.trace(tk.OwnedTape(leaves=[x])) * y).sum().backward()
    assert np.allclose(g[x], [4, 5, 6])
    with pytest.raises(tk.MissingGradientError, match="not in the leaf set"):
        g[y]


def test_p3_merged_tapes_run_in_global_creation_order(cpu):
    dev = cpu
    x = dev.tensor([0.5]); a, b = x.trace(), x.trace()
    a1 = a.exp(); b1 = b.sin(); a2 = a1 * a1
    assert np.allclose((a2 + b1).sum().backward()[x], [6.314146218808464])  # 2 * e + cos(0.5)


def test_p4_arc_tape_partitions_gradients(cpu):
    dev = cpu
    x = dev.tensor([1., 2.]).trace(tk.ArcTape()); y = dev.tensor([4., 5.]).trace(tk.ArcTape())
    z = x + y; zz = y * 2.0
    g = z.sum().backward()
    assert np.allclose(g[x], [1, 1]) and np.allclose(g[y], [1, 1]) and zz not in g
    g = zz.sum().backward()
    assert np.allclose(g[y], [2, 2]) and x not in g


def test_p4_other_order_misses_y_and_says_so(cpu):
    dev = cpu
    x = dev.tensor([1., 2.]).trace(tk.ArcTape()); y = dev.tensor([4., 5.], name="y").trace(tk.ArcTape())
    zz = y * 2.0; z = x + y
    with pytest.warns(tk.IncompleteTapeWarning, match="gradients of y will be missing"):
        g = zz.sum().backward()
    assert np.allclose(g[zz], [1, 1])
    with pytest.raises(tk.MissingGradientError, match="y has no gradient.*lives on ArcTape"):
        g[y]


def test_p5_union_tape_is_one_tape_for_all_holders(cpu):
    dev = cpu
    x = dev.tensor([1., 2.]).trace(tk.UnionTape()); y = dev.tensor([4., 5.]).trace(tk.UnionTape())
    z = x + y; zz = y * 2.0
    g = tk.backward([z.sum(), zz.sum()])
    assert np.allclose(g[x], [1, 1]) and np.allclose(g[y], [3, 3])


def test_p6_the_same_tensor_on_both_sides(cpu):
    dev = cpu
    x = dev.tensor(3.0); xt = x.trace(); assert (xt * xt).backward()[x] == 6.0
    xt = x.trace(); assert (xt + xt).backward()[x] == 2.0


def test_p7_residual_branch_with_retaped(cpu):
    dev = cpu
    x = dev.tensor([0.5]).trace(); y = x.retaped().exp() + x
    assert np.allclose(y.sum().backward()[x], [2.648721270700128])  # exp(0.5) + 1
