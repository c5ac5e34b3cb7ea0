"""One letter and one colour per tape, the same in every picture of a program: printed snapshots
and gradient splits, the figures of several of them, the DAG and its legend, and the widgets."""

from __future__ import annotations

import re

import matplotlib
import pytest

import tapekit as tk
from tapekit.viz.palette import LEAF, TAPE_COLOURS

from .dot_helpers import nodes
from .programs import p4, p4_run, three_outputs

viz = tk.viz
OUTPUTS = ("a", "b", "c")  # three_outputs' outputs


def letter_of(colour: str) -> str:
    """The letter of the tape drawn in ``colour`` (the first six tapes of a program)."""
    return "ABCDEF"[TAPE_COLOURS.index(colour.upper())]


def printed(picture) -> dict[str, str]:
    """Tape label -> letter, as a printed snapshot (``tape B (T3, arc)``) or split (``on tape B (T3)``) says."""
    return {label: letter for letter, label in re.findall(r"tape ([A-Z]+) \((T\d+)", str(picture))}


def held(text: str) -> dict[str, str]:
    """Output -> the letter of the tape it holds, as ``b's history (holds tape B)`` says."""
    return dict(re.findall(r"(\w+)'s history \(holds tape ([A-Z]+)\)", text))


def ticks(ax) -> str:
    return "\n".join(t.get_text() for t in ax.get_yticklabels())


def outline(dot: str, name: str) -> str:
    """The letter of the tape whose colour outlines tensor ``name`` in a DAG."""
    attrs = [a for a in nodes(dot).values() if re.search(rf'label="{name}\|', a)]
    assert len(attrs) == 1, (name, dot)
    return letter_of(re.search(r'\bcolor="(#\w+)"', attrs[0])[1])


def legend_letters(dot: str) -> list[str]:
    return re.findall(r"tape ([A-Z]+): \w+Tape", dot)


def bar_colours(fig, leaf: str) -> list[list[str]]:
    """For each bar of ``leaf``'s panel of a gradient-split figure, top down: the colours of its tape parts."""
    ax = next(ax for ax in fig.axes if ax.get_title(loc="left").startswith(leaf))
    bars: dict[float, list[str]] = {}
    for patch in ax.patches:
        colour = matplotlib.colors.to_hex(patch.get_facecolor()).upper()
        if colour != "#FFFFFF":  # the missing part is white, hatched
            bars.setdefault(patch.get_y() + patch.get_height() / 2, []).append(colour)
    return [bars.get(float(y), []) for y in range(len(ax.get_yticks()))]


def test_a_printed_split_and_a_figure_of_several_splits_name_and_colour_a_tape_alike():
    """Tutorial 4: both orders of P4, and loss2 of the second, in one figure; loss2's part is on y's
    tape, B, both where the split is printed and in the figure."""
    x, y, z, zz = p4_run(zz_first=False)
    z_first = viz.gradient_split(z, zz, label="z first")
    x, y, z, zz = p4_run(zz_first=True)
    zz_first = viz.gradient_split(z, zz, label="zz first")
    loss2 = (zz + y).sum()
    worse = viz.gradient_split(loss2, label="loss2")
    assert printed(worse) == {zz.tape.label: "B"}  # loss2 holds y's tape, which zz holds too
    fig = viz.plot_gradient_split(z_first, zz_first, worse)
    for split, colours in zip((z_first, zz_first, worse), bar_colours(fig, "y")):
        names = printed(split)
        assert [letter_of(c) for c in colours] == [names[key] for key in split.parts["y"] if key != "missing"]
    legend = {t.get_text(): matplotlib.colors.to_hex(p.get_facecolor()).upper()
              for t, p in zip(fig.legends[0].get_texts(), fig.legends[0].get_patches())}
    assert {text: letter_of(c) for text, c in legend.items() if text.startswith("tape")} == {
        "tape A's backward": "A", "tape B's backward": "B"}


@pytest.mark.parametrize("policy", tk.widgets.POLICIES)
def test_a_replayed_program_names_each_tape_alike_in_every_picture_and_widget(policy):
    """Tutorial 5: the explorer and the player call the tape each output holds what the printed
    snapshot, its plot and the DAG of the same program call it."""
    end = tk.widgets.Replay(three_outputs, policy).run(None)
    outputs = [end.tensors[o] for o in OUTPUTS if o in end.tensors]
    snap = viz.snapshot(*outputs, names=end.tensors)
    letters = held(str(snap))
    assert letters and letters == held(ticks(viz.plot_partition(snap).axes[0]))
    dot = viz.dag(*outputs, names=end.tensors).source
    assert {name: outline(dot, name) for name in letters} == letters
    split = viz.gradient_split(*outputs, names=end.tensors)
    assert set(printed(split).items()) <= set(printed(snap).items())

    explorer = tk.widgets.TapeExplorer(three_outputs, policy=policy)
    assert {name: outline(explorer.dot, name) for name in letters} == letters
    assert held(ticks(explorer.figure.axes[0])).items() >= letters.items()
    player = tk.widgets.BackwardPlayer(three_outputs, policy=policy, output="b")
    assert outline(player.dot, "b") == letters["b"]


def test_a_figure_of_several_replays_names_each_tape_as_its_snapshot_prints_it():
    """Tutorial 5's figure: the program under each policy, one panel each."""
    snaps = []
    for policy in tk.widgets.POLICIES:
        end = tk.widgets.Replay(three_outputs, policy).run(None)
        snaps.append(viz.snapshot(*(end.tensors[o] for o in OUTPUTS if o in end.tensors), label=policy))
    fig = viz.plot_partition(*snaps)
    for snap, ax in zip(snaps, fig.axes):
        assert held(ticks(ax)) == held(str(snap))
        rows = [t.get_text() for t in ax.get_yticklabels()][:len(snap.tapes)]
        assert [r.split(" (")[0] for r in rows] == [f"tape {printed(snap)[t.label]}" for t in snap.tapes]
        assert [letter_of(matplotlib.colors.to_hex(p.get_facecolor())) for p in ax.patches[:len(snap.tapes)]] == [
            printed(snap)[t.label] for t in snap.tapes]
    assert held(str(snaps[1])) == {"a": "A", "b": "B", "c": "A"}  # arc: x's tape holds it all, b holds y's


def test_a_tape_alone_in_a_picture_keeps_the_letter_it_has_in_its_program():
    moment = tk.widgets.Replay(p4, "arc").run(3)  # x and y traced, nothing recorded yet
    x, y = moment.tensors["x"], moment.tensors["y"]
    assert held(str(viz.snapshot(y, names=moment.tensors))) == {"y": "B"}
    assert outline(viz.dag(y, names=moment.tensors).source, "y") == "B"
    assert legend_letters(viz.dag(y).source) == ["B"]


def test_a_replayed_program_gets_the_same_letters_whatever_ran_before_it():
    first = str(viz.snapshot(*tk.widgets.Replay(p4, "arc").run(None).outputs()))
    for _ in range(3):
        tk.Cpu().tensor([1.]).trace(tk.ArcTape())
    again = str(viz.snapshot(*tk.widgets.Replay(p4, "arc").run(None).outputs()))
    assert re.sub(r"T\d+", "", first) == re.sub(r"T\d+", "", again)
    assert held(first) == {"zz": "B", "z": "A"}


def test_the_explorer_legend_lists_the_tapes_its_plot_shows():
    """Under ArcTape, w's tape is left empty and no output holds it: neither picture lists it."""
    explorer = tk.widgets.TapeExplorer(three_outputs, policy="arc")
    plotted = re.findall(r"^tape ([A-Z]+) \(", ticks(explorer.figure.axes[0]), re.M)
    assert legend_letters(explorer.dot) == plotted == ["A", "B"]


def test_leaves_are_outlined_alike_in_every_dag():
    x, y, z, zz = p4_run(zz_first=True)
    explorer = tk.widgets.TapeExplorer(p4, policy="arc")
    for dot in (viz.dag(z, zz).source, viz.dag(z, zz, names=locals()).source, explorer.dot):
        for leaf in ("x", "y"):
            attrs = next(a for a in nodes(dot).values() if re.search(rf'label="{leaf}\|', a))
            assert f'color="{LEAF}"' in attrs, (leaf, attrs)
