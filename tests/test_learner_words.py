"""The words a learner reads agree across pictures, printouts and errors (`tapekit.ids`): a record
dropped with its tape is not said to be let go by a backward; a spent tape handle names its tape;
a backward says it drained a shared tape and consumed an OwnedTape; a missing gradient tells an
untraced tensor from one the output does not depend on."""

from __future__ import annotations

import gc

import matplotlib
import pytest

import tapekit as tk

from .conftest import POLICIES

matplotlib.use("Agg")
DEV = tk.Cpu()


def legend(fig) -> list[str]:
    return [t.get_text() for t in fig.legends[0].get_texts()]


def _dropped() -> tk.Tensor:
    """An output whose history holds a record dropped with its tape: no tensor held the tape."""
    x = DEV.tensor([1.0, 2.0], name="x").trace(tk.ArcTape())
    y = x * 2.0
    y2 = y.retaped()  # its history keeps y's record, on x's tape
    del x, y
    gc.collect()  # nothing holds x's tape any more: the record is dropped with it
    return y2 * 3.0


def _let_go() -> tk.Tensor:
    """An output whose history holds a record a backward let go."""
    x = DEV.tensor([1.0, 2.0], name="x").trace(tk.ArcTape())
    y = x * 2.0
    y2 = y.retaped()
    (y * 1.0).sum().backward()  # lets go of y's record
    return y2 * 3.0


# -- 1: the partition plot's legend says what happened to a record no tape holds ----------------
def test_partition_legend_says_a_record_was_dropped_with_its_tape():
    words = legend(tk.viz.plot_partition(tk.viz.snapshot(_dropped())))
    assert any("dropped with its tape" in w for w in words), words
    assert not any("let go by a backward" in w for w in words), words


def test_partition_legend_says_a_record_was_let_go_by_a_backward():
    words = legend(tk.viz.plot_partition(tk.viz.snapshot(_let_go())))
    assert any("let go by a backward" in w for w in words), words
    assert not any("dropped" in w for w in words), words


def test_partition_plot_draws_records_no_tape_holds_grey_and_dashed_as_the_dag_does():
    """Not hatched: the hatch is for history on another tape the output does not hold."""
    from matplotlib.colors import to_hex
    from tapekit.viz.palette import GONE_FILL
    fig = tk.viz.plot_partition(tk.viz.snapshot(_let_go()))
    grey = [p for ax in fig.axes for p in ax.patches if to_hex(p.get_facecolor()) == GONE_FILL.lower()]
    swatch = [h for h in fig.legends[0].get_patches() if "let go" in h.get_label()]
    assert grey and swatch, "a bar and a legend swatch for the let-go record"
    for patch in grey + swatch:
        assert patch.get_hatch() in (None, ""), patch
    assert all(p.get_linestyle() in ("--", "dashed") for p in grey)
    assert all(p._unscaled_dash_pattern[1] for p in swatch)  # a legend's copy keeps the dashes, not the style's name
    assert not any("does not hold" in w for w in legend(fig)), "no hatched share, so no hatch in the legend"


# -- 2: a spent handle names the tape it stood for -------------------------------------------
def test_moved_and_consumed_handles_name_their_tape():
    x = DEV.tensor([1.0, 2.0], name="x").trace()
    y = DEV.tensor([4.0, 5.0], name="y").trace()
    tape_x, tape_y = x.tape, y.tape
    z = x + y
    assert repr(x.tape).startswith(f"<MovedTape of OwnedTape {tape_x.label}: ")
    assert repr(y.tape).startswith(f"<MovedTape of OwnedTape {tape_y.label}: ")
    assert "was moved into the output of" in repr(x.tape)
    loss = z.sum()
    loss.backward()
    assert repr(loss.tape).startswith(f"<consumed OwnedTape {tape_x.label}: ")
    assert "SpentTape" not in repr(loss.tape) and "SpentTape" not in repr(loss)
    assert "were consumed by the backward on" in repr(loss.tape)
    assert str(loss.tape) == repr(loss.tape)


# -- 3: a second backward says what the first did to the tape, and names it ------------------------
@pytest.mark.parametrize("policy", ["arc", "union", "global"])
def test_second_backward_on_a_shared_tape_says_drained_and_names_the_tape(policy):
    tape = POLICIES[policy]()
    x = DEV.tensor([1.0, 2.0], name="x").trace(tape)
    loss = (x * x).sum()
    loss.name = "loss"
    loss.backward()
    with pytest.raises(tk.TapeConsumedError) as err:
        loss.backward()
    text = str(err.value)
    assert f"tape {loss.tape.label} was drained by the backward on loss" in text, text
    assert "consumed" not in text and "loss's tape" not in text, text
    assert "backward(retain=True)" in text


def test_second_backward_on_an_owned_tape_still_says_consumed():
    loss = (DEV.tensor([1.0, 2.0], name="x").trace() * 2.0).sum()
    loss.name = "loss"
    loss.backward()
    with pytest.raises(tk.TapeConsumedError, match="were consumed by the backward on loss"):
        loss.backward()


# -- 4: a missing gradient tells untraced from not on the way to the output ----------------------
def _traced_but_unused():
    x = DEV.tensor([1.0, 2.0], name="x").trace(tk.UnionTape())
    y = DEV.tensor([4.0, 5.0], name="y").trace(tk.UnionTape())
    z = x + y
    zz = y * 2.0
    zz.name = "zz"
    return z.sum().backward(), zz


def _untraced():
    w = DEV.tensor([3.0, 4.0], name="w")
    return (DEV.tensor([1.0, 2.0]).trace() * 2.0).sum().backward(), w


@pytest.mark.parametrize("make, said, not_said", [
    (_traced_but_unused, ["no output of this backward depends on zz", "would be zero"], "Trace it"),
    (_untraced, ["w has no gradient: it is not traced", "Trace it (x.trace())"], "depends on")])
def test_a_missing_gradient_tells_untraced_from_not_on_the_way_to_the_output(make, said, not_said):
    g, tensor = make()
    with pytest.raises(tk.MissingGradientError) as err:
        g[tensor]
    text = str(err.value)
    assert all(words in text for words in said) and not_said not in text, text


def test_a_record_dropped_with_its_tape_is_not_advised_retain():
    """A record whose tape no tensor held is gone with it: no backward let it go, so keeping the
    records with retain=True cannot help; tk.explain says to keep a tensor that holds the tape."""
    text = str(tk.explain(_dropped()))
    assert "retain=True" not in text and "Keep a tensor that holds its tape" in text, text
    assert "their tape" not in text  # one record


# -- the player's last step shows what the backward left, as the explorer does ----------------
def _z_and_zz(tape):
    x = DEV.tensor([1., 2.]).trace(tape())
    y = DEV.tensor([4., 5.]).trace(tape())
    z = x + y  # noqa: F841
    zz = y * 2.0  # noqa: F841


@pytest.mark.parametrize("policy", ["union", "arc"])
def test_the_players_last_step_draws_the_records_a_backward_let_go_as_the_explorer_does(policy):
    import re
    from tapekit.widgets import BackwardPlayer, TapeExplorer

    def styles(dot):
        ops = re.findall(r"^\s*op\d+ \[(.*)\]$", dot, re.M)
        return sorted((re.search(r'label="?(?:✓ )?(\w+)', a)[1], re.search(r'style="?([\w,]+)', a)[1]) for a in ops)

    def tapes(dot):
        return [" ".join(re.sub(r"<[^>]+>", " ", r.replace("<BR/>", " ")).split())
                for r in re.findall(r"<TR>(.*?)</TR>", dot) if "tape" in r and "BGCOLOR" in r]

    explorer = TapeExplorer(_z_and_zz, policy=policy)
    explorer.output.value = "z"
    explorer.run_backward()
    player = BackwardPlayer(_z_and_zz, policy=policy, output="z")
    player.step.value = player.step.max
    assert "dashed" in dict(styles(player.dot))["add"]
    assert [s for s in styles(player.dot)] == [s for s in styles(explorer.dot) if s[0] in dict(styles(player.dot))]
    assert tapes(player.dot)[0] == tapes(explorer.dot)[0]
    assert all(row in tapes(explorer.dot) for row in tapes(player.dot))  # zz's tape: not drawn by the player


def test_an_unnamed_tensors_repr_shows_the_label_every_printout_calls_it():
    dev = tk.Cpu()
    x = dev.tensor([1.0, 2.0]).trace(tk.UnionTape())
    y = (x * 3).tanh()
    grads = y.sum().backward()
    shown = repr(grads)  # labels the tensors it shows: x, the product, y and the sum
    for t in (x, y):
        assert f"label={t.label!r}" in repr(t) and f"{t.label}: " in shown
    assert "label=" not in repr(dev.tensor([1.0], name="w"))  # a named tensor shows its name= only


def _p4(tape):
    x = DEV.tensor([1., 2.]).trace(tape())
    y = DEV.tensor([4., 5.]).trace(tape())
    zz = y * 2.0  # noqa: F841
    z = x + y  # noqa: F841


def test_the_players_missing_gradient_is_the_traced_case_as_gradients_says_it():
    """Every tensor a widget shows is made or read by a recorded op: its missing gradient is one no
    output depends on (as ``Gradients`` says given the tensor), never 'if not, trace it'."""
    from tapekit.widgets import BackwardPlayer
    player = BackwardPlayer(_p4, policy="arc")
    player.step.value = player.step.max
    missing = [line for line in player._result_listing() if "✗" in line]
    assert missing and all("no output of this backward depends on zz" in line and "trace it" not in line.lower()
                           for line in missing), missing


def test_the_dag_legend_shows_grad_marks_only_as_the_picture_uses_them():
    a = DEV.tensor([1.0, 2.0], name="a").trace(tk.ArcTape())
    loss = (a * a).sum()
    loss.name = "loss"
    legend = tk.viz.dag(loss, grads=loss.backward()).source.split('legend [label=')[1]
    assert "grad ✓: has a gradient" in legend and "gradient missing" not in legend


def test_a_dropped_record_is_worded_alike_in_the_dag_and_the_partition_plot():
    out = _dropped()
    assert "dropped with its tape (no tensor held it)" in tk.viz.dag(out).source.replace("<BR/>", " ")


def test_tk_tapes_names_policies_as_every_printout_does():
    x = DEV.tensor([1.0, 2.0], name="x").trace(tk.ArcTape())
    text = str(tk.tapes(x * 2.0))
    assert "ArcTape" in text and " arc " not in f" {text} ".replace("\n", " ")


def _refused(tape):
    x = DEV.tensor([1., 2.]).trace(tape())
    y = DEV.tensor([4., 5.]).trace(tape())
    zz = y * 2.0
    z = x + y
    g = z.sum().backward()  # noqa: F841
    loss = zz.sum()  # noqa: F841


def _legend_rows(dot: str) -> str:
    return dot.split("legend [label=")[1]


def test_the_players_marks_and_legend_rows_are_those_its_picture_draws():
    """A refused backward ticked every record '✓ already run'; the legend listed ▶, ✓ and ✗ at
    every step, drawn or not; a let-go record it cannot see was white, its legend swatch grey."""
    from tapekit.viz.palette import GONE_FILL
    from tapekit.widgets import BackwardPlayer
    player = BackwardPlayer(_refused, policy="union", output="loss")
    player.step.value = player.step.max
    assert player.result is None and "✓ " not in player.dot.split("legend [label=")[0]
    for policy in ("union", "arc"):
        player = BackwardPlayer(_refused, policy=policy, output="loss")
        for k in range(player.step.max + 1):
            player.step.value = k
            drawn, legend = player.dot.split("legend [label=")
            for mark, row in (("▶ ", "▶ running now"), ("✓ ", "✓ already run"), ("✗", "✗ no gradient")):
                assert (mark in drawn) == (row in legend), (policy, k, mark)
    player = BackwardPlayer(_refused, policy="arc", output="loss")
    unseen = [line for line in player.dot.splitlines() if "(not seen)" in line and line.lstrip().startswith("op")]
    assert unseen and all(f'fillcolor="{GONE_FILL}"' in line for line in unseen), unseen


def test_explain_lines_up_its_records_as_print_tape_does():
    xs = [DEV.tensor([1., 2.], name=f"x{i}").trace(tk.UnionTape()) for i in range(3)]
    s = (xs[0] + xs[1] + xs[2]).sum()
    rows = [line for line in str(tk.explain(s)).splitlines() if line.startswith("  seen")]
    assert len(rows) == 3 and len({line.index("[") for line in rows}) == 1, rows


def test_explain_of_a_tensor_with_no_history_ends_no_sentence_in_a_colon():
    x = DEV.tensor([1., 2.], name="x").trace(tk.ArcTape())
    text = str(tk.explain(x))
    assert "0 records" not in text and not any(line.endswith(":") for line in text.splitlines()), text
    assert "its history has no records." in text


def test_explain_of_a_tensor_with_no_tape_says_its_backward_raises_as_it_does():
    """It said every gradient would be there; the backward then raised 'carries no tape'."""
    x = tk.Cpu().tensor([1.0, 2.0], name="x")
    y = (x * 3.0).sum()
    said = str(tk.explain(y))
    assert "every gradient it depends on will be there" not in said
    assert "A backward on it raises" in said and "carries no tape" in said
    with pytest.raises(tk.BackwardError, match="carries no tape"):
        y.backward()


def test_a_partial_history_under_a_global_tape_is_refused_as_explain_says_with_advice_that_works():
    """explain predicted a partial backward; the backward raised TapeConsumedError though nothing was
    consumed, and advised tk.backward([...]) and UnionTape, which do not help under GlobalTape."""
    dev = tk.Cpu()
    w = dev.tensor([1.0, 2.0], name="w")
    outer, inner = tk.GlobalTape(), tk.GlobalTape()
    with outer:
        a = w * 3.0
        with inner:
            c = (a * a + w).sum()
    said = str(tk.explain(c))
    assert "A backward on it raises" in said and "will miss" not in said
    with pytest.raises(tk.TapePolicyError) as info:
        inner.backward(c)
    message = str(info.value)
    assert "one `with tk.GlobalTape()` block" in message and "UnionTape" not in message
    assert "consumed" not in message


def test_a_transforms_policy_error_names_the_argument_given_not_its_copy():
    """It named t1, the identity copy tk.grad makes, and a tape B shown nowhere else."""
    dev = tk.Cpu()
    x = dev.tensor([1.0, 2.0], name="x")
    w = dev.tensor([0.5, 1.0], name="w").trace(tk.ArcTape())
    with pytest.raises(tk.TapePolicyError) as info:
        tk.grad(lambda v: (v * w).sum())(x)
    message = str(info.value)
    assert message.startswith("op mul: x is an argument of tk.grad") and "(tape " not in message


def test_the_seed_a_recorded_backward_starts_from_is_named_after_its_output():
    """It showed as an unexplained leaf t3, with a gradient of 15, in print(tape), the DAG and the split."""
    x = tk.Cpu().tensor([1.0, 2.0], name="x").trace(tk.UnionTape())
    y = (x * x * x).sum()
    y.name = "y"
    gx = tk.backward([y], create_graph=True)[x]
    assert "broadcast_to(seed_y)" in str(x.tape)
    assert "seed_y" in tk.viz.dag(y, gx).source
