"""The partition of the gradient itself: what each live tape's backward would deliver of each
leaf's true gradient (``tk.viz.gradient_split``), its plot, and ``Tape.same_as``."""

from __future__ import annotations

import warnings

import matplotlib
import numpy as np
import pytest

import tapekit as tk

from .programs import p4_run as p4

matplotlib.use("Agg")
viz = tk.viz


def parts(split, leaf):
    """A leaf's parts as lists, tapes named by their labels."""
    return {key: part.tolist() for key, part in split.parts[leaf].items()}


def test_p4_z_first_splits_y_between_the_two_arc_tapes():
    x, y, z, zz = p4(zz_first=False)
    split = viz.gradient_split(z, zz)
    a, b = z.tape.label, zz.tape.label
    assert split.true["y"].tolist() == [3, 3] and split.true["x"].tolist() == [1, 1]
    assert parts(split, "y") == {a: [1, 1], b: [2, 2], "missing": [0, 0]}
    assert parts(split, "x") == {a: [1, 1], "missing": [0, 0]}
    assert split.shares("y") == pytest.approx({a: 1 / 3, b: 2 / 3, "missing": 0})
    assert list(split.tapes) == [a, b]
    assert f"y: [3, 3] = [1, 1] on tape {a} + [2, 2] on tape {b}" in str(split)


def test_p4_zz_first_loses_the_part_that_moved_to_the_tape_zz_does_not_hold():
    x, y, z, zz = p4(zz_first=True)
    split = viz.gradient_split(z, zz)
    a = z.tape.label
    assert parts(split, "y") == {a: [1, 1], "missing": [2, 2]}  # zz's tape B is empty: its backward gives y nothing
    assert split.shares("y") == pytest.approx({a: 1 / 3, "missing": 2 / 3})
    assert "[2, 2] missing" in str(split)


@pytest.mark.parametrize("zz_first", [False, True])
def test_p5_union_tape_delivers_the_whole_gradient_in_one_part(zz_first):
    x, y, z, zz = p4(tk.UnionTape, zz_first)
    split = viz.gradient_split(z, zz)
    assert parts(split, "y") == {z.tape.label: [3, 3], "missing": [0, 0]}
    assert parts(split, "x") == {z.tape.label: [1, 1], "missing": [0, 0]}


def test_worse_than_missing_a_partial_part_and_the_rest_missing():
    """Tutorial 4: after a backward on zz.sum(), loss2 = (zz + y).sum() reaches y through zz (on A) and directly."""
    x, y, z, zz = p4(zz_first=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tk.IncompleteTapeWarning)
        zz.sum().backward()
    loss2 = (zz + y).sum()
    split = viz.gradient_split(loss2)
    assert parts(split, "y") == {loss2.tape.label: [1, 1], "missing": [2, 2]}
    assert list(split.true) == ["y"]  # zz is made by a record, not a leaf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tk.IncompleteTapeWarning)
        assert loss2.backward()[y].tolist() == [1, 1]  # what the real backward gives is the part


def test_each_part_is_what_that_tapes_real_backward_then_gives():
    x, y, z, zz = p4(zz_first=False)
    split = viz.gradient_split(z, zz)
    a, b = z.tape.label, zz.tape.label
    assert np.allclose(z.sum().backward()[y], split.parts["y"][a])
    assert np.allclose(zz.sum().backward()[y], split.parts["y"][b])


def state(*tensors):
    """Everything a split must leave alone: each live tape's records (and their rules and saved
    arrays) and gradient entries (values, and which are zeroed buffers), and each handle."""
    out = []
    for t in tensors:
        tape = t.tape
        out.append((t, tape, tape.label, [(r, r.rules, r.saved, r.home) for r in tape.records],
                    {tid: np.array(a) for tid, a in tape.grads._arrays.items()}, set(tape.grads._clean),
                    tape.grads.leaves, tape._spent))
    return out


def same_state(before, after):
    for b, a in zip(before, after):
        assert b[:4] == a[:4] and b[5:] == a[5:]
        assert b[4].keys() == a[4].keys() and all(np.array_equal(b[4][k], a[4][k]) for k in b[4])


@pytest.mark.parametrize("policy", [tk.ArcTape, tk.UnionTape])
def test_the_users_tapes_are_unchanged(policy):
    x, y, z, zz = p4(policy, zz_first=True)
    before = state(x, y, z, zz)
    viz.gradient_split(z, zz)
    same_state(before, state(x, y, z, zz))
    assert tk.backward([z.sum(), zz.sum()])[y].tolist() == [3, 3]  # nothing consumed


def test_preallocated_buffers_stay_zero_and_are_not_counted():
    dev = tk.Cpu(seed=0)
    model = tk.nn.Linear(3, 2, device=dev)
    grads = model.alloc_grads()
    loss = tk.mse_loss(model.trace(tk.UnionTape(grads))(dev.randn((4, 3))), dev.zeros((4, 2)))
    allocations = dev.allocations
    before = state(loss)
    split = viz.gradient_split(loss, names={"weight": model.weight, "bias": model.bias})
    same_state(before, state(loss))
    assert dev.allocations == allocations
    assert set(split.true) == {"weight", "bias"}  # the leaf set: the input batch is not shown
    g = loss.backward()
    assert np.allclose(g[model.weight], split.true["weight"]) and np.allclose(g[model.bias], split.true["bias"])


def test_a_consumed_history_has_no_true_gradient_to_split():
    x, y, z, zz = p4(tk.UnionTape, zz_first=False)
    tk.backward([z.sum(), zz.sum()])
    with pytest.raises(tk.InvalidArgumentError, match="let go by the backward"):
        viz.gradient_split(z, zz)


def test_p3_one_value_leaf_under_owned_tape():
    dev = tk.Cpu()
    x = dev.tensor([0.5], name="x")
    a, b = x.trace(), x.trace()
    a1 = a.exp()
    out = (a1 * a1 + b.sin()).sum()
    split = viz.gradient_split(out)
    assert np.allclose(split.true["x"], [2 * np.e + np.cos(0.5)])
    assert split.shares("x") == pytest.approx({out.tape.label: 1.0, "missing": 0.0})


def test_shares_add_up_to_one_when_the_parts_point_elsewhere_than_the_truth():
    """Notebook 5's program under ArcTape: y's true gradient [2.5, 3] is [2, 4] on tape A plus [0.5, -1] missing."""
    dev = tk.Cpu()
    x, y, w = (dev.tensor(v, name=n).trace(tk.ArcTape()) for v, n in (([1., 2.], "x"), ([4., 5.], "y"),
                                                                       ([0.5, -1.], "w")))
    b = (y * w).sum()
    h = x * y
    a, c = h.sum(), (h + w).sum()
    split = viz.gradient_split(a, b, c)
    assert parts(split, "y") == {a.tape.label: [2, 4], "missing": [0.5, -1]}
    norm = np.hypot(2, 4) + np.hypot(0.5, 1)
    assert split.shares("y") == pytest.approx({a.tape.label: np.hypot(2, 4) / norm, "missing": np.hypot(.5, 1) / norm})


# -- the plot -------------------------------------------------------------------------------------

def texts(fig):
    return [t for ax in fig.axes for t in ax.texts]


def test_the_plot_has_one_bar_group_per_leaf_with_a_bar_per_moment():
    x, y, z, zz = p4(zz_first=False)
    first = viz.gradient_split(z, zz, label="arc, z first")
    union = viz.gradient_split(*p4(tk.UnionTape, zz_first=False)[2:], label="union")
    fig = viz.plot_gradient_split(first, union)
    assert [ax.get_title(loc="left") for ax in fig.axes] == ["x: true gradient [1, 1]", "y: true gradient [3, 3]"]
    for ax in fig.axes:
        assert [t.get_text() for t in ax.get_yticklabels()] == ["arc, z first", "union"]
    y_axis = fig.axes[1]
    bars = [(round(p.get_x(), 3), round(p.get_width(), 3)) for p in y_axis.patches]
    assert bars == [(0, 0.333), (0.333, 0.667), (0, 1)]
    texts = [t.get_text() for t in y_axis.texts]  # each part wide enough says whose backward delivers it
    assert texts == [f"tape {z.tape.label}: [1, 1]", f"tape {zz.tape.label}: [2, 2]", "[3, 3]"][:2] + texts[2:]
    assert texts[2].endswith(": [3, 3]") and "∪" in texts[2]
    assert "L2 norm" in fig.axes[-1].get_xlabel()


def test_the_missing_share_is_hatched_and_labelled_by_its_value():
    fig = viz.plot_gradient_split(viz.gradient_split(*p4(zz_first=True)[2:], label="zz first"))
    y_axis = fig.axes[1]
    missing = [p for p in y_axis.patches if p.get_hatch()]
    assert len(missing) == 1 and missing[0].get_width() == pytest.approx(2 / 3)
    assert "missing [2, 2]" in [t.get_text() for t in y_axis.texts]
    assert any("missing" in t.get_text() for t in fig.legends[0].get_texts())


def test_the_plot_fits_a_notebook_reads_in_a_dark_theme_and_uses_the_tape_colours():
    x, y, z, zz = p4(zz_first=False)
    fig = viz.plot_gradient_split(viz.gradient_split(z, zz))
    assert fig.get_figwidth() <= 9
    assert matplotlib.colors.to_hex(fig.get_facecolor()) == "#ffffff"
    sizes = [t.get_fontsize() for t in texts(fig) + list(fig.legends[0].get_texts())]
    sizes += [t.get_fontsize() for ax in fig.axes for t in ax.get_yticklabels() + ax.get_xticklabels()]
    assert min(sizes) >= 10
    fills = {matplotlib.colors.to_hex(p.get_facecolor()) for p in fig.axes[1].patches}
    assert fills == {z.tape.colour.lower(), zz.tape.colour.lower()} and len(fills) == 2
    assert fig._repr_png_().startswith(b"\x89PNG")


def test_one_value_leaves_say_nothing_of_norms():
    dev = tk.Cpu()
    x = dev.tensor(3.0, name="x").trace()
    fig = viz.plot_gradient_split(viz.gradient_split(x * x))
    assert "norm" not in fig.axes[-1].get_xlabel()


def test_plot_takes_splits_only():
    x, y, z, zz = p4(zz_first=False)
    with pytest.raises(tk.InvalidArgumentError, match="gradient_split"):
        viz.plot_gradient_split(viz.snapshot(z))


# -- which handles lead to one tape ----------------------------------------------------------------

def test_same_as_tells_one_tape_from_one_handle():
    x, y, z, zz = p4(tk.UnionTape, zz_first=True)
    assert z.tape is not zz.tape and z.tape.same_as(zz.tape) and x.tape.same_as(y.tape)
    x, y, z, zz = p4(tk.ArcTape, zz_first=True)
    assert z.tape.same_as(x.tape) and not z.tape.same_as(zz.tape)
    tapes = {z.tape, zz.tape, z.tape}  # tapes stay hashable by identity
    assert len(tapes) == 2


def test_same_as_on_a_spent_handle_raises_its_error():
    dev = tk.Cpu()
    x = dev.tensor([1.0]).trace()
    y = x * 2.0
    with pytest.raises(tk.TapeMovedError):
        x.tape.same_as(y.tape)


def test_the_figure_lists_missing_in_its_legend_only_when_a_part_is_missing():
    legend = lambda fig: [t.get_text() for t in fig.legends[0].get_texts()]  # noqa: E731
    x, y, z, zz = p4(zz_first=False)
    whole = viz.plot_gradient_split(viz.gradient_split(z, zz, label="z first"))
    assert legend(whole) == [f"backward of tape {z.tape.label}", f"backward of tape {zz.tape.label}"]
    partial = viz.plot_gradient_split(viz.gradient_split(*p4(zz_first=True)[2:], label="zz first"))
    assert legend(partial)[-1] == "missing: no backward delivers it"


def test_the_text_leaves_out_a_zero_part_as_the_figure_does():
    """u = x + w is never used, but its record sits on tape A: the zero entry it gives w is no part
    of w's gradient (the text said '[0, 0] on tape A + [3, 3] on tape B', the figure drew B only)."""
    dev = tk.Cpu()
    x = dev.tensor([1., 2.], name="x").trace(tk.ArcTape())
    w = dev.tensor([3., 4.], name="w").trace(tk.ArcTape())
    u = x + w  # noqa: F841
    p, r = (x * 2.0).sum(), (w * 3.0).sum()
    cut = viz.gradient_split(p, r)
    assert f"  w: [3, 3] = [3, 3] on tape {r.tape.label}\n" in str(cut) + "\n", str(cut)
    texts = [t.get_text() for t in viz.plot_gradient_split(cut).axes[1].texts]
    assert texts == [f"tape {r.tape.label}: [3, 3]"]


def test_a_zero_gradient_keeps_its_one_part_in_the_text():
    x = tk.Cpu().tensor([1., 2.], name="x").trace(tk.ArcTape())
    s = (x * 0.0).sum()
    assert f"x: [0, 0] = [0, 0] on tape {s.tape.label}" in str(viz.gradient_split(s))


def test_the_legend_names_a_big_union_s_backward_in_plain_english():
    dev = tk.Cpu()
    xs = [dev.tensor([1., 2.], name=f"x{i}").trace(tk.UnionTape()) for i in range(5)]
    s = sum(xs[1:], xs[0]).sum()
    words = [t.get_text() for t in viz.plot_gradient_split(viz.gradient_split(s)).legends[0].get_texts()]
    assert words == [f"backward of tape {s.tape.label}"] and "tapes's" not in words[0]
