"""The backward player, driven headlessly: each step's record and gradients against a backward run
by hand, on P4, P5 and a fan-out, under several policies; and the end against ``tk.backward``."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import tapekit as tk
from tapekit.viz.palette import MISSING

from .dot_helpers import nodes
from .programs import fan_out, p4, p5

BackwardPlayer = tk.widgets.BackwardPlayer
E = math.e


def shared_fan_out(tape):
    """The fan-out without retaped(), which a GlobalTape refuses: x meets its own tape three times."""
    dev = tk.Cpu()
    x = dev.tensor([0.5, 1.0]).trace(tape())
    e = x.exp()
    xx = x * x
    s = (e + xx).sum()


def unnumbered(text: str) -> str:
    """``text`` without tape letters and tensor labels: another run of the same program may be shown
    under another policy (``tk.explain`` runs the program directly, not in the player)."""
    return re.sub(r"\b(t\d+|[A-Z]{1,2})\b", "", text)


def run_through(player: BackwardPlayer) -> list[tuple[str | None, dict]]:
    """(name of the record just run, gradients by name) at every step but the end."""
    seen = []
    for k in range(player.step.max):
        player.step.value = k
        seen.append((player.record and player.record.name, player.gradients))
    return seen


def assert_steps(player: BackwardPlayer, expected: list[tuple[str | None, dict]]) -> None:
    got = run_through(player)
    assert [name for name, _ in got] == [name for name, _ in expected]
    for k, ((_, grads), (_, want)) in enumerate(zip(got, expected)):
        assert grads.keys() == want.keys(), f"step {k}"
        for name, value in want.items():
            assert np.allclose(grads[name], value), f"step {k}: g_{name} is {grads[name]}, not {value}"


# -- each step against a backward by hand ------------------------------------------------------

FAN_OUT = [  # newest first: sum, add, mul (x twice), exp
    (None, {"s": 1}),
    ("sum", {"s": 1, "y": [1, 1]}),
    ("add", {"s": 1, "y": [1, 1], "e": [1, 1], "xx": [1, 1]}),
    ("mul", {"s": 1, "y": [1, 1], "e": [1, 1], "xx": [1, 1], "x": [1, 2]}),
    ("exp", {"s": 1, "y": [1, 1], "e": [1, 1], "xx": [1, 1], "x": [1 + E ** 0.5, 2 + E]}),
]


@pytest.mark.parametrize("policy", ["owned", "arc", "union"])
def test_fan_out_steps_match_a_backward_by_hand(policy):
    player = BackwardPlayer(fan_out, policy=policy)
    assert [o.name for o in player.outputs] == ["s"]
    assert_steps(player, FAN_OUT)


@pytest.mark.parametrize("policy", ["arc", "union", "global"])
def test_shared_fan_out_steps_match_a_backward_by_hand(policy):
    def added(player):
        return player.scene.name(next(op.out for op in player.scene.ops if op.name == "add"))

    player = BackwardPlayer(shared_fan_out, policy=policy)
    assert re.fullmatch(r"t\d+", added(player))  # e + xx has no name here: it has a label, the same in every run
    assert added(player) == added(BackwardPlayer(shared_fan_out, policy=policy))
    added = added(player)
    unnamed = [(name, {added if k == "y" else k: v for k, v in grads.items()}) for name, grads in FAN_OUT]
    assert_steps(player, unnamed)


def test_each_contribution_to_a_fan_out_is_shown_as_it_arrives():
    player = BackwardPlayer(fan_out, policy="union", step=3)
    assert "g_x += g_xx * x = [0.5, 1]\ng_x += g_xx * x = [0.5, 1]\n" in player.text
    assert "x is used again: g_x = [0.5, 1] + [0.5, 1] = [1, 2]" in player.text
    sent = re.findall(r'\w+ -> \w+ \[label=" \+(\[[^\]]*\])".* dir=back', player.dot)
    assert sent == ["[0.5, 1]", "[0.5, 1]"]  # both edges from x to x * x carry their share
    player.step.value = 4
    assert "g_x += g_e * exp(x) = [1.649, 2.718]" in player.text
    assert "x is used again: g_x = [1, 2] + [1.649, 2.718] = [2.649, 4.718]" in player.text


def test_the_record_being_run_is_highlighted_and_those_run_are_ticked():
    player = BackwardPlayer(fan_out, policy="owned", step=2)
    labels = {m[1] or m[2]: a for a in nodes(player.dot).values() if (m := re.search(r'label=(?:"([^"]*)"|(\w+))', a))}
    assert "penwidth=3.5" in labels["▶ add"] and "✓ sum" in labels
    assert {"exp", "mul"} <= labels.keys()  # not run yet
    assert player.text.startswith("step 2 of 5: record 2 of 4 (newest first) runs: y = add(e, xx)")
    assert "g_e += g_y = [1, 1]\ng_xx += g_y = [1, 1]" in player.text
    assert labels["x|(2,)|g = —"] and labels["xx|(2,)|g = [1, 1]"]


@pytest.mark.parametrize("policy", ["arc", "union", "global"])
def test_p5_backward_over_both_outputs_steps_newest_first(policy):
    player = BackwardPlayer(p5, policy=policy, output=["z", "zz"])
    assert_steps(player, [  # zz = y * 2 is the newer record: it runs first
        (None, {"z": [1, 1], "zz": [1, 1]}),
        ("mul", {"z": [1, 1], "zz": [1, 1], "y": [2, 2]}),
        ("add", {"z": [1, 1], "zz": [1, 1], "y": [3, 3], "x": [1, 1]}),
    ])
    player.step.value = 1
    assert "g_y += g_zz * 2 = [2, 2]" in player.text
    player.step.value = 2
    assert "g_x += g_z = [1, 1]\ng_y += g_z = [1, 1]\n" in player.text
    assert "    y is used again: g_y = [2, 2] + [1, 1] = [3, 3]" in player.text
    player.step.value = player.step.max
    assert "✓ x = [1, 1]" in player.text and "✓ y = [3, 3]" in player.text and "Warning" not in player.text


def test_p4_under_arc_draws_the_record_backward_cannot_see_and_ends_with_why():
    player = BackwardPlayer(p4, policy="arc", output="zz")
    assert player.step.max == 1 and player.record is None  # zz's tape was left empty: nothing runs
    assert "1 record of its history it cannot see (dashed): zz = mul(y, const)" in player.text
    assert re.search(r'label="mul \(not seen\)".*style="rounded,dashed"', player.dot)
    assert player.gradients.keys() == {"zz"}
    player.step.value = 1
    assert player.text.startswith("step 1 of 1: backward on zz returns")
    end = tk.widgets.Replay(p4, "arc").run(None)  # kept, so that its tapes live on
    why = tk.explain(end.tensors["zz"]).missing["y"]
    assert why.startswith("y has no gradient: the record `zz = mul(y, const)`") and "lives on ArcTape " in why
    assert unnumbered(f"  ✗ {why}") in unnumbered(player.text)  # in the words of tk.explain
    assert "IncompleteTapeWarning: backward on zz cannot see 1 record" in player.text
    holder = re.search(r"lives on ArcTape (\S+), held by z", player.text)[1]
    assert f"tape {holder}: ArcTape" in player.dot  # the message names the tape as the picture does
    assert 'label="y|(2,)|g = ✗"' in player.dot and "fontcolor" in nodes(player.dot)["n1"]


def test_p4_under_arc_on_z_runs_zz_record_too_since_the_merge_moved_it_there():
    player = BackwardPlayer(p4, policy="arc", output="z")
    assert_steps(player, [
        (None, {"z": [1, 1]}),
        ("add", {"z": [1, 1], "x": [1, 1], "y": [1, 1]}),
        ("mul", {"z": [1, 1], "x": [1, 1], "y": [1, 1]}),
    ])
    assert "no gradient reaches zz: it is not on the way to the output" in player.text


def test_p4_under_union_gives_y_a_zero_entry_then_its_gradient():
    player = BackwardPlayer(p4, policy="union", output="zz")
    assert_steps(player, [
        (None, {"zz": [1, 1]}),
        ("add", {"zz": [1, 1], "x": [0, 0], "y": [0, 0]}),
        ("mul", {"zz": [1, 1], "x": [0, 0], "y": [2, 2]}),
    ])
    player.step.value = 1
    assert "no gradient reaches z: it is not on the way to the output; x, y get a zero entry" in player.text


# -- the end is what tk.backward returns --------------------------------------------------------

@pytest.mark.parametrize("program, policy, output", [(fan_out, "owned", "s"), (p5, "union", ["z", "zz"]),
                                                     (p4, "arc", "z"), (shared_fan_out, "global", None)])
def test_the_last_run_step_is_what_backward_returns(program, policy, output):
    player = BackwardPlayer(program, policy=policy, output=output)
    player.step.value = player.step.max - 1
    stepped = player.gradients
    player.step.value = player.step.max
    assert player.record is None
    returned = player.gradients
    assert returned.keys() <= stepped.keys()
    for name, g in returned.items():
        assert np.allclose(g, stepped[name])


def consumed_first(tape):
    dev = tk.Cpu()
    x = dev.tensor([1., 2.]).trace(tape())
    z = x * 3.0
    g = z.sum().backward()


def test_a_backward_that_refuses_runs_no_record_and_says_why():
    player = BackwardPlayer(consumed_first, policy="union", output="z")
    assert player.step.max == 1
    player.step.value = 1
    assert re.search(r"TapeConsumedError: tape \S+ was drained by the backward on \S+, which let go of z's records",
                     player.text), player.text
    assert "Traceback" not in player.text


def with_leaves(tape):
    dev = tk.Cpu()
    x = dev.tensor([1., 2.])
    w = dev.tensor([3., 4.]).trace(tk.UnionTape(leaves=[x]))
    h = x * w
    loss = h.sum()


def test_a_leaf_set_keeps_only_the_leaves_at_the_end():
    player = BackwardPlayer(with_leaves, policy="union")
    player.step.value = player.step.max - 1
    assert player.gradients.keys() == {"loss", "h", "x", "w"}  # every gradient, while it runs
    player.step.value = player.step.max
    assert player.gradients.keys() == {"x"}
    assert "not kept: w has no gradient: it is not in the leaf set of this backward" in player.text
    assert "✗ w" not in player.text  # the mark of a gradient a backward missed


def test_a_gradient_the_leaf_set_leaves_out_is_drawn_not_kept_not_missing():
    """Red ✗ is for a gradient the backward failed to produce; w was left out on purpose."""
    player = BackwardPlayer(with_leaves, policy="union")
    player.step.value = player.step.max
    drawn, key = player.dot.split("legend [label=")
    assert 'label="w|(2,)|g = not kept"' in drawn and "✗" not in drawn and MISSING not in drawn
    assert "not kept: not in the leaf set" in key and "✗ no gradient" not in key
    player.step.value = 0
    assert "not kept" not in player.dot


def broadcast(tape):
    dev = tk.Cpu()
    b = dev.tensor([1., 2.]).trace(tape())
    h = dev.ones((3, 2)) + b
    s = h.sum()


def test_a_broadcast_operand_gets_its_gradient_summed_to_its_shape():
    player = BackwardPlayer(broadcast, policy="union", step=2)
    assert "g_b += g_h, summed to its shape (2,) = [3, 3]" in player.text
    assert np.allclose(player.gradients["b"], [3, 3])


def big(tape):
    dev = tk.Cpu(seed=0)
    x = dev.ones((3, 4)).trace(tape())
    s = (x * 2.0).sum()


def test_a_large_gradient_shows_its_shape_and_norm():
    player = BackwardPlayer(big, policy="union", step=2)
    assert "x    (3, 4) ‖g‖=6.928" in player.text


# -- the widget --------------------------------------------------------------------------------

def test_the_policy_dropdown_replays_and_restarts_at_the_seed():
    player = BackwardPlayer(fan_out, policy="arc", step=3)
    player.policy.value = "owned"
    assert player.step.value == 0 and player.step.max == 5 and player.play.max == 5
    assert "OwnedTape" in player.dot


def test_a_program_error_and_an_unknown_output_show_as_text():
    player = BackwardPlayer(p4, policy="owned", output="zz")
    assert "`z = x + y` raised TapeMovedError" in player.text
    assert [s.record and s.record.name for s in player.steps] == [None, "mul"]  # zz took y's tape
    player = BackwardPlayer(p4, policy="arc", output="w")
    assert player.steps == [] and player.svg == ""
    assert "the program has no tensor 'w' at its end: choose output= among x, y, zz, z" in player.text


def test_the_player_runs_on_a_replay_and_leaves_other_tapes_alone():
    x = tk.Cpu().tensor([0.5, 1.0]).trace(tk.UnionTape())
    s = (x * x).sum()
    BackwardPlayer(fan_out, policy="union", step=4)
    assert len(s.tape) == 2 and np.allclose(s.backward()[x], [1, 2])


def test_the_player_displays_as_a_widget_with_a_static_picture():
    player = BackwardPlayer(fan_out, policy="union", step=3)
    bundle = player._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/html"].count('src="data:image/svg+xml;base64,') == 1  # kept by viewers that strip <svg>
    assert "g_x += g_xx * x" in bundle["text/html"] and bundle["text/plain"] == repr(player)
    assert player.picture.value == player.svg and 'style="display:block;max-width:100%;height:auto"' in player.svg
    assert repr(player) == "BackwardPlayer(fan_out, policy='union', step=3 of 5)"


# -- the layout: text that wraps at spaces, beside the DAG or below it for the whole replay --------

def svg_px(svg: str) -> tuple[float, float]:
    width, height = re.match(r'<svg [^>]*width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups()
    return float(width) * 4 / 3, float(height) * 4 / 3


def px(css: str) -> float:
    return float(re.search(r"([\d.]+)px", css)[1])


def test_the_text_wraps_at_spaces_and_its_column_is_never_squeezed():
    player = BackwardPlayer(p4, policy="arc", output="zz", step=1)
    for html_text in (player.code.value, player.panel.value):
        assert "word-break:normal" in html_text and "break-all" not in html_text  # JupyterLab's <pre> breaks anywhere
    assert px(player.panel.layout.min_width) >= 300 and "100%" in player.panel.layout.min_width  # fits a narrow page
    assert px(player.panel.layout.flex) == px(player.panel.layout.min_width)  # wraps under the DAG, never squeezed


@pytest.mark.parametrize("program, policy, output", [(fan_out, "union", None), (p4, "arc", "zz"), (p5, "union", ["z", "zz"])])
def test_the_dag_keeps_the_size_of_its_largest_step_so_the_layout_never_changes(program, policy, output):
    player = BackwardPlayer(program, policy=policy, output=output)
    boxes, sizes = set(), []
    for k in range(player.step.max + 1):
        player.step.value = k
        boxes.add((player.picture.layout.width, player.picture.layout.min_height))
        sizes.append(svg_px(player.svg))
    assert len(boxes) == 1, boxes  # the text beside the DAG, or below it, at every step
    (width, height), = boxes
    assert px(width) == pytest.approx(max(w for w, _ in sizes), abs=1)
    assert px(height) == pytest.approx(max(h for _, h in sizes), abs=1)
    assert player.picture.layout.max_width == "100%"


# -- the legend: the tapes drawn, as tk.viz.dag names them -------------------------------------

def two_tapes(tape):
    dev = tk.Cpu()
    x = dev.tensor([1., 2.]).trace(tape())
    y = dev.tensor([3., 4.]).trace(tape())
    p = (x * 2.0).sum()
    q = (y * 3.0).sum()


def tape_rows(dot: str) -> list[str]:
    """The legend's rows for tapes and for records no tape holds, as plain text."""
    key = dot.split("legend [label=")[1]
    rows = [" ".join(re.sub(r"<[^>]+>", " ", r.replace("<BR/>", " ")).split())
            for r in re.findall(r"<TR>(.*?)</TR>", key)]
    return [r for r in rows if r.startswith(("tape ", "grey, dashed"))]


@pytest.mark.parametrize("policy", ["arc", "owned", "union"])
def test_the_legend_lists_the_tapes_it_draws_as_the_dag_of_the_output_does(policy):
    """p's tape was listed though nothing of p was drawn; at the end the legend kept p's tape and,
    under OwnedTape, had no row for the records the backward consumed."""
    player = BackwardPlayer(two_tapes, policy=policy, output="q")
    before = tk.widgets.Replay(two_tapes, policy).run(None)
    want = tape_rows(tk.viz.dag(before.tensors["q"], names=before.tensors).source)
    for k in range(player.step.max):
        player.step.value = k
        assert tape_rows(player.dot) == want, (k, tape_rows(player.dot))
    after = tk.widgets.Replay(two_tapes, policy).run(None)
    after.tensors["q"].backward()
    player.step.value = player.step.max
    assert tape_rows(player.dot) == tape_rows(tk.viz.dag(after.tensors["q"], names=after.tensors).source)


def test_the_player_fills_a_tape_s_ops_and_tensors_as_the_dag_does():
    player = BackwardPlayer(two_tapes, policy="arc", output="q")
    moment = tk.widgets.Replay(two_tapes, "arc").run(None)
    dag = tk.viz.dag(moment.tensors["q"], names=moment.tensors).source

    def fills(dot):
        return sorted(re.search(r'fillcolor="?(#\w+)', a)[1] for a in nodes(dot).values()
                      if "fillcolor" in a and "white" not in a)

    assert fills(player.dot) == fills(dag)
