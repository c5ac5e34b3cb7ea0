"""Tape policies side by side: merges, clone, retaped, backward on several outputs, retain,
GlobalTape contexts, thread safety, and the messages that explain partitioned gradients."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest

import tapekit as tk

from .conftest import DEVICE_KINDS, host, make_device

RECORDING = [tk.OwnedTape, tk.ArcTape, tk.UnionTape]


# -- OwnedTape ----------------------------------------------------------------------------------
def test_owned_left_absorbs_right_and_right_entry_wins(cpu):
    a, b = cpu.tensor([1.0, 2.0], name="a"), cpu.tensor([3.0, 4.0], name="b")
    left, right = tk.Gradients(), tk.Gradients()
    left.alloc(a)[...] = 10.0
    right.alloc(a)[...] = 20.0
    ta = a.trace(tk.OwnedTape(left, leaves=[a]))
    tb = b.trace(tk.OwnedTape(right, leaves=[b]))
    left_tape, right_tape = ta.tape, tb.tape
    ea, eb = ta.exp(), tb.exp()
    out = ea * eb
    assert out.tape is left_tape and len(left_tape) == 3
    assert left_tape.leaves == frozenset({a.id, b.id})
    assert np.allclose(left_tape.grads[a], 20.0)  # the right tape's entry won
    with pytest.raises(tk.TapeMovedError):
        tb.exp()  # its tape was moved long ago
    assert "moved" in repr(right_tape)


def test_owned_moved_handle_names_the_op(cpu):
    x = cpu.tensor([1.0], name="x").trace()
    y = x * 2.0
    with pytest.raises(tk.TapeMovedError, match=rf"x's OwnedTape was moved into the output of `{y.label} = mul\(x, const\)`"):
        x + 1.0
    assert len(y.tape) == 1


def test_owned_clone_is_an_error_and_retaped_is_a_fresh_tape(cpu):
    x = cpu.tensor([1.0]).trace()
    with pytest.raises(tk.TapePolicyError, match="one owner"):
        x.clone()
    r = x.retaped()
    assert r.id == x.id and r.data is x.data
    assert isinstance(r.tape, tk.OwnedTape) and r.tape is not x.tape and len(r.tape) == 0


def test_owned_tape_has_one_owner(cpu):
    tape = tk.OwnedTape()
    cpu.tensor([1.0]).trace(tape)
    with pytest.raises(tk.TapePolicyError, match="one owner"):
        cpu.tensor([2.0]).trace(tape)


def test_untaped_left_operand_takes_the_right_tape(cpu):
    x = cpu.tensor([2.0])
    y = cpu.tensor([3.0]).trace()
    g = (x * y).sum().backward()
    assert np.allclose(g[y], [2.0]) and np.allclose(g[x], [3.0])


# -- ArcTape -----------------------------------------------------------------------------------
def test_arc_merge_leaves_right_tape_alive_and_empty(cpu):
    x = cpu.tensor([1.0, 2.0]).trace(tk.ArcTape())
    y = cpu.tensor([4.0, 5.0]).trace(tk.ArcTape())
    y2 = y.exp()
    z = x + y2
    assert z.tape is x.tape and len(x.tape) == 2 and len(y.tape) == 0
    zz = y * 2.0  # y's holder keeps recording into its (now empty) tape
    assert zz.tape is y.tape and len(y.tape) == 1


def test_arc_after_backward_tape_is_empty_and_leaky(cpu):
    x = cpu.tensor([1.0, 2.0]).trace(tk.ArcTape(leaves=[]))
    y = x * 3.0
    y.sum().backward()
    assert len(x.tape) == 0 and x.tape.leaves is None
    g = (x * 2.0).sum().backward()  # other holders keep recording
    assert np.allclose(g[x], [2.0, 2.0])


def test_arc_clone_shares_and_retaped_is_new(cpu):
    x = cpu.tensor([1.0]).trace(tk.ArcTape())
    assert x.clone().tape is x.tape and x.clone().id == x.id
    assert x.retaped().tape is not x.tape and isinstance(x.retaped().tape, tk.ArcTape)


# -- UnionTape ---------------------------------------------------------------------------------
def test_union_merges_become_one_tape_for_every_holder(cpu):
    ts = [cpu.tensor([float(i)]).trace(tk.UnionTape()) for i in range(4)]
    ab = ts[0] * ts[1]
    cd = ts[2] + ts[3]
    out = ab + cd
    stores = {t.tape._store() for t in ts + [ab, cd, out]}
    assert len(stores) == 1 and len(out.tape) == 3
    later = ts[3].exp()  # a past holder records onto the merged tape
    assert len(out.tape) == 4
    g = tk.backward([out.sum(), later.sum()])
    assert np.allclose(g[ts[0]], [1.0]) and np.allclose(g[ts[3]], [1.0 + np.exp(3.0)])


def test_union_records_run_in_global_op_order_across_merges(cpu):
    x = cpu.tensor([0.5])
    a, b = x.trace(tk.UnionTape()), x.trace(tk.UnionTape())
    b1 = b.sin()           # recorded on b's tape first
    a1 = a.exp()
    a2 = a1 * a1
    out = (a2 + b1).sum()  # merges a's (bigger) tape with b's
    assert [r.id for r in out.tape.records] == sorted(r.id for r in out.tape.records)
    assert np.allclose(out.backward()[x], [2 * np.e + np.cos(0.5)])


def test_union_second_backward_on_another_output_raises(cpu):
    x = cpu.tensor([1.0, 2.0], name="x").trace(tk.UnionTape())
    a = x * 2.0
    b = a + 1.0
    c = a * 3.0
    b.sum().backward()  # consumes every record, c's too
    with pytest.raises(tk.TapeConsumedError, match="let go by the backward on "):
        c.sum().backward()


def test_arc_second_backward_on_another_output_warns_and_is_partial(cpu):
    x = cpu.tensor([1.0, 2.0], name="x").trace(tk.ArcTape())
    a = x * 2.0
    b = a + 1.0
    c = a * 3.0
    c.name = "c"
    b.sum().backward()
    with pytest.warns(tk.IncompleteTapeWarning, match="gradients of .*x.* will be missing"):
        g = c.sum().backward()
    assert np.allclose(g[c], [1.0, 1.0])
    with pytest.raises(tk.MissingGradientError, match="was let go by the backward on "):
        g[x]


# -- backward on several outputs, retain ---------------------------------------------------
def dag_program(dev, make_tape):
    """Three inputs, five ops, three outputs that share history; each input on its own tape."""
    x = dev.tensor([0.3, -0.2]).trace(make_tape())
    y = dev.tensor([1.5, 0.7]).trace(make_tape())
    w = dev.tensor([2.0, -1.0]).trace(make_tape())
    h = (x * y).tanh()
    o1 = (h + w).sum()
    o2 = (h * y).sum()
    o3 = (w.exp() - y).sum()
    return (x, y, w), (o1, o2, o3)


def reference_grads(dev):
    """The same program on one shared tape, differentiated as one summed loss."""
    tape = tk.UnionTape()
    (x, y, w), outs = dag_program(dev, lambda: tape)
    g = (outs[0] + outs[1] + outs[2]).backward()
    return [np.asarray(g[t]) for t in (x, y, w)]


@pytest.mark.parametrize("policy", [tk.ArcTape, tk.UnionTape])
def test_backward_over_all_outputs_equals_one_tape(cpu, policy):
    (x, y, w), outs = dag_program(cpu, policy)
    g = tk.backward(list(outs))
    for t, ref in zip((x, y, w), reference_grads(cpu)):
        assert np.allclose(g[t], ref)


def test_backward_over_all_outputs_under_global_tape(cpu):
    with tk.GlobalTape() as tape:
        (x, y, w), outs = dag_program(cpu, lambda: tape)
    g = tape.backward(list(outs))
    for t, ref in zip((x, y, w), reference_grads(cpu)):
        assert np.allclose(g[t], ref)


@pytest.mark.parametrize("leaf_set", [False, True])
def test_every_operand_of_a_recorded_op_gets_an_entry(cpu, leaf_set):
    """Operands of records no output reaches get zero entries; an operand that an output also
    reaches (through an older record) keeps its whole gradient."""
    x, y, w = cpu.tensor([1.0, 2.0]), cpu.tensor([3.0, 4.0]), cpu.tensor([5.0, 6.0])
    with tk.GlobalTape(leaves=[x, y, w] if leaf_set else None) as tape:
        unreached_before = x * w
        out = (y * 2.0).sum()
        unreached_after = y * x
    g = tape.backward(out)
    assert np.array_equal(g[y], [2.0, 2.0])
    assert np.array_equal(g[x], [0.0, 0.0]) and np.array_equal(g[w], [0.0, 0.0])
    assert unreached_before.id not in g and unreached_after.id not in g  # outputs, not operands


def test_each_output_alone_under_arc_gets_only_part(cpu):
    (x, y, w), (o1, o2, o3) = dag_program(cpu, tk.ArcTape)
    ref = reference_grads(cpu)
    got = {}
    for out in (o3, o2, o1):
        try:
            g = out.backward()
        except tk.TapeConsumedError:
            continue
        got[out.id] = g
    assert len(got) >= 1
    total_y = sum(np.asarray(g.get(y, 0.0)) for g in got.values())
    assert not np.allclose(total_y, ref[1])  # the partition loses part of y's gradient


def test_seeds_for_non_scalar_outputs(cpu):
    x = cpu.tensor([1.0, 2.0]).trace(tk.UnionTape())
    a, b = x * 2.0, x * x
    g = tk.backward([a, b], seeds=[[1.0, 0.0], [0.0, 1.0]])
    assert np.allclose(g[x], [2.0, 4.0])


@pytest.mark.parametrize("policy", RECORDING)
def test_retain_allows_backward_again(cpu, policy):
    x = cpu.tensor([1.0, 2.0]).trace(policy())
    out = (x * x).sum()
    g1 = out.backward(retain=True)
    g2 = out.backward(retain=True)
    assert np.allclose(g1[x], [2.0, 4.0]) and np.allclose(g2[x], [2.0, 4.0])
    out.backward()
    with pytest.raises(tk.TapeConsumedError, match="consumed" if policy is tk.OwnedTape else "drained"):
        out.backward()


def test_second_backward_without_retain_raises_under_global(cpu):
    with tk.GlobalTape() as tape:
        x = cpu.tensor([1.0, 2.0])
        out = (x * x).sum()
    tape.backward(out)
    with pytest.raises(tk.TapeConsumedError):
        tape.backward(out)


# -- GlobalTape ---------------------------------------------------------------------------------
def test_global_tape_records_every_op_in_its_block(cpu):
    x, y = cpu.tensor([1.0, 2.0]), cpu.tensor([3.0, 4.0])
    with tk.GlobalTape() as tape:
        z = (x * y).sum()
    w = x * y  # outside the block: nothing recorded
    assert len(tape) == 2 and w.tape is None and z.tape is tape
    g = tape.backward(z)
    assert np.allclose(g[x], [3.0, 4.0]) and np.allclose(g[y], [1.0, 2.0]) and len(tape) == 0


def test_global_tape_nesting_innermost_is_active(cpu):
    x = cpu.tensor([1.0])
    with tk.GlobalTape() as outer:
        a = x * 2.0
        with tk.GlobalTape() as inner:
            b = x * 3.0
        c = x * 4.0
    assert (len(outer), len(inner)) == (2, 1)
    assert a.tape is outer and b.tape is inner and c.tape is outer


def test_an_outer_blocks_tensor_used_in_an_inner_block_is_recorded_there(cpu):
    x = cpu.tensor([1.0, 2.0], name="x")
    with tk.GlobalTape() as outer:
        a = x * 2.0
        with tk.GlobalTape() as inner:
            b = a * a + x  # a carries the outer tape, x none: the op goes to the inner one
    assert b.tape is inner and [r.name for r in inner.records] == ["mul", "add"] and len(outer) == 1
    with pytest.raises(tk.TapePolicyError, match="gradients of x will be incomplete"):  # live on outer: not consumed
        inner.backward(b.sum())  # x's way through a runs through a record on the outer tape
    assert len(inner) == 3


def test_global_tape_mixed_with_another_policy_is_an_error(cpu):
    x = cpu.tensor([1.0]).trace(tk.UnionTape())
    with tk.GlobalTape() as tape:
        with pytest.raises(tk.TapePolicyError, match="mix tape policies"):
            x * 2.0
    assert len(tape) == 0 and len(x.tape) == 0


def test_global_tapes_are_context_local_between_threads(cpu):
    results = {}
    barrier = threading.Barrier(2)

    def worker(name, n):
        with tk.GlobalTape() as tape:
            barrier.wait()
            x = cpu.tensor([1.0])
            for _ in range(n):
                x = x * 1.0
            barrier.wait()
        results[name] = len(tape)

    threads = [threading.Thread(target=worker, args=(k, n)) for k, n in (("a", 50), ("b", 70))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"a": 50, "b": 70}


@pytest.mark.parametrize("policy", ["arc", "union", "global"])
def test_threads_recording_onto_one_shared_tape_lose_nothing(cpu, policy):
    n_threads, n_ops = 8, 10_000
    tape = {"arc": tk.ArcTape, "union": tk.UnionTape, "global": tk.GlobalTape}[policy]()
    starts = [cpu.tensor([1.0 + i / 10]) for i in range(n_threads)]
    outs = [None] * n_threads

    def chain(x):
        for k in range(n_ops // 2):
            x = x * 0.9999
            x = x + 0.001
        return x

    def worker(i):
        if policy == "global":
            with tape:
                outs[i] = chain(starts[i])
        else:
            outs[i] = chain(starts[i].trace(tape))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(tape) == n_threads * n_ops
    g = tk.backward([o.sum() for o in outs])
    expected = 0.9999 ** (n_ops // 2)
    for s in starts:
        assert np.allclose(g[s], [expected], rtol=1e-4)


# -- mixing, inspection --------------------------------------------------------------------------
def test_mixing_policies_in_one_op_is_an_error_that_changes_nothing(cpu):
    x = cpu.tensor([1.0], name="x").trace(tk.ArcTape())
    y = cpu.tensor([2.0], name="y").trace(tk.UnionTape())
    a, b = x.exp(), y.exp()
    with pytest.raises(tk.TapePolicyError, match="ArcTape.*UnionTape"):
        a + b
    assert len(x.tape) == 1 and len(y.tape) == 1


def test_print_tape_shows_the_recorded_program(cpu):
    x = cpu.tensor([1.0, 2.0], name="x").trace(tk.ArcTape())
    y = (x * 2.0).sum()
    text = str(x.tape)
    lines = text.splitlines()
    assert lines[0] == f"ArcTape {x.tape.label}: 2 records, leaves=all"
    doubled = lines[1].split(" = ")[0].strip()
    assert lines[1] == f"  {doubled} = mul(x, const)  # (2,)"  # a line of a program, and the shape it made
    assert re.fullmatch(rf"  {y.label} = sum\({doubled}\) +# \(\)", lines[2])
    assert lines[1].index("#") == lines[2].index("#")
    assert re.fullmatch(r"t\d+", doubled) and "#" not in text.replace("  # ", "")


def test_print_tape_says_what_a_merge_and_a_backward_did(cpu):
    x = cpu.tensor([1.0, 2.0], name="x").trace(tk.ArcTape())
    y = cpu.tensor([4.0, 5.0], name="y").trace(tk.ArcTape())
    z = x + y
    a, b = x.tape.label, y.tape.label
    assert str(z.tape).splitlines()[0] == f"ArcTape {a} (absorbed {b}): 1 record, leaves=all"
    assert str(y.tape).splitlines()[0] == f"ArcTape {b} (emptied into {a}): 0 records, leaves=all"
    z.name = "z"
    z.backward(seed=[1.0, 1.0])
    assert str(z.tape).splitlines()[0] == (f"ArcTape {a} (absorbed {b}; drained by the backward on z, records again): "
                                           f"0 records, leaves=all")
    u, v = cpu.tensor([1.0]).trace(tk.UnionTape()), cpu.tensor([2.0]).trace(tk.UnionTape())
    w = u * v
    assert u.tape.label == v.tape.label == w.tape.label and "∪" in w.tape.label
    o = cpu.tensor([1.0]).trace(tk.OwnedTape())
    loss = (o * 2.0).sum()
    loss.backward()
    assert "consumed" in repr(loss.tape) and "OwnedTape" in repr(loss.tape)


def test_tapes_lists_the_partition(cpu):
    x = cpu.tensor([1., 2.], name="x").trace(tk.ArcTape())
    y = cpu.tensor([4., 5.], name="y").trace(tk.ArcTape())
    zz = y * 2.0
    z = x + y
    table = tk.tapes(zz, z)
    assert [(i.policy, i.records) for i in table] == [("ArcTape", 0), ("ArcTape", 2)]
    assert "tape" in str(table) and "<table>" in table._repr_html_()


def test_explain_names_missing_gradients_and_where_they_went(cpu):
    x = cpu.tensor([1., 2.], name="x").trace(tk.ArcTape())
    y = cpu.tensor([4., 5.], name="y").trace(tk.ArcTape())
    zz = y * 2.0
    z = x + y
    z.name = "z"
    report = tk.explain(zz.sum())
    assert not report.complete and list(report.missing) == ["y"]
    assert "held by z" in report.missing["y"]
    assert tk.explain(z.sum()).complete


def test_a_gradient_that_arrives_only_in_part_is_called_incomplete(cpu):
    x = cpu.tensor([1., 2.], name="x").trace(tk.ArcTape())
    y = cpu.tensor([4., 5.], name="y").trace(tk.ArcTape())
    zz = y * 2.0
    x + y  # x's tape takes zz's record; y's tape stays, empty
    out = (zz + y).sum()  # y reaches out directly, and through zz, whose record is now elsewhere
    report = tk.explain(out)
    assert report.missing == {} and report.incomplete == ["y"]
    assert "Incomplete gradients" in str(report) and "(none)" in str(report)
    with pytest.warns(tk.IncompleteTapeWarning, match="gradients of y will be incomplete"):
        g = out.backward()
    assert np.allclose(g[y], [1.0, 1.0])  # the direct way only: the full gradient is 3
    assert not g.is_complete(y) and g.is_complete(zz) and "y: (2,) (incomplete)" in repr(g)
    with pytest.raises(tk.MissingGradientError):
        g.is_complete(x)
    g.zero_()
    assert g.is_complete(y)


def test_missing_and_incomplete_gradients_are_named_together(cpu):
    x = cpu.tensor([1., 2.], name="x").trace(tk.ArcTape())
    y = cpu.tensor([4., 5.], name="y").trace(tk.ArcTape())
    w = cpu.tensor([0.5, 0.5], name="w")
    zz = y * w  # w's only way to the output below runs through this record
    x + y
    out = (zz + y).sum()
    report = tk.explain(out)
    assert list(report.missing) == ["w"] and report.incomplete == ["y"]
    with pytest.warns(tk.IncompleteTapeWarning, match="gradients of w will be missing and those of y incomplete"):
        out.backward()


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_tapes_count_the_bytes_records_keep_alive_on_every_device(kind):
    dev = make_device(kind)
    x = dev.tensor([[1.0, 2.0], [3.0, 4.0]]).trace(tk.ArcTape())
    y = dev.tensor([[5.0, 6.0], [7.0, 8.0]])
    (x * y).sum()  # mul keeps both operands (2 x 16 bytes); sum keeps only a shape
    (info,) = tk.tapes(x)
    assert (info.records, info.nbytes) == (2, 32), kind


@pytest.mark.parametrize("direct", [True, False])
def test_incomplete_tape_warning_names_the_callers_line(cpu, direct):
    x = cpu.tensor([1.0]).trace(tk.ArcTape())
    y = cpu.tensor([2.0]).trace(tk.ArcTape())
    yy = y * 2.0
    x + y  # moves yy's record onto x's tape
    with pytest.warns(tk.IncompleteTapeWarning) as caught:
        tk.backward([yy.sum()]) if direct else yy.sum().backward()
    assert caught[0].filename == __file__


# -- leaf sets unite as in dfdx: a leaky tape that absorbs a leaf set keeps only that set ------
@pytest.mark.parametrize("policy", RECORDING)
@pytest.mark.parametrize("leafy_side", ["left", "right"])
def test_a_leaky_tape_that_absorbs_a_leaf_set_is_no_longer_leaky(cpu, policy, leafy_side):
    a, b = cpu.tensor([1.0, 2.0], name="a"), cpu.tensor([3.0, 4.0], name="b")
    leafy = a if leafy_side == "left" else b
    ta = a.trace(policy(leaves=[a]) if leafy_side == "left" else policy())
    tb = b.trace(policy(leaves=[b]) if leafy_side == "right" else policy())
    g = (ta * tb).sum().backward()
    assert g.leaves == frozenset({leafy.id})
    other = b if leafy is a else a
    assert np.allclose(g[leafy], other.numpy())
    with pytest.raises(tk.MissingGradientError, match="not in the leaf set"):
        g[other]


def test_backward_on_several_outputs_unites_leaf_sets_as_merges_do(cpu):
    a, b = cpu.tensor([1.0, 2.0]), cpu.tensor([3.0, 4.0])
    ya, yb = (a.trace(tk.ArcTape()) * 2.0).sum(), (b.trace(tk.ArcTape(leaves=[b])) * 3.0).sum()
    g = tk.backward([ya, yb])
    assert g.leaves == frozenset({b.id}) and np.allclose(g[b], 3.0)


# -- detach() is a stop-gradient; split_tape() is dfdx's same-id handle -------------------------
def test_detach_stops_the_gradient_as_in_pytorch(dev):
    x = dev.tensor([1.0, 2.0, 3.0]).trace()
    d = x.detach()
    assert d.id != x.id and d.tape is None and d.data is x.data
    g = (d * x).sum().backward()
    np.testing.assert_allclose(host(g[x]), [1.0, 2.0, 3.0])


def test_split_tape_keeps_the_id_so_its_gradient_still_collects(cpu):
    x = cpu.tensor([1.0, 2.0, 3.0]).trace()
    same, tape = x.split_tape()
    assert same.id == x.id and same.tape is None and tape is x.tape
    g = (same * x).sum().backward()
    np.testing.assert_allclose(g[x], [2.0, 4.0, 6.0])  # both operands are keyed by x's id
