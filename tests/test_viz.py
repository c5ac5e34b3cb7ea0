"""Pictures: the op DAG as DOT text (stable, coloured by tape, with a legend), its fallback when
no Graphviz program is found, and the partition snapshots and plot."""

from __future__ import annotations

import html
import re

import matplotlib
import numpy as np
import pytest

import tapekit as tk
from tapekit.viz import render
from tapekit.viz.palette import CONSUMED, MISSING, TAPE_COLOURS, lighten

from .dot_helpers import BLUE, ORANGE, nodes, op_colours
from .programs import p4_run as p4

viz = tk.viz
needs_graphviz = pytest.mark.skipif(not render.programs(), reason="neither graphviz-pure nor Graphviz's dot is installed")


def node_of(dot: str, name: str) -> str:
    """The attributes of the tensor node labelled ``name``."""
    found = [attrs for attrs in nodes(dot).values() if re.search(rf'label="{re.escape(name)}\|', attrs)]
    assert len(found) == 1, (name, dot)
    return found[0]


# -- the DAG ------------------------------------------------------------------------------------

def test_dag_is_a_digraph_with_record_tensors_small_ops_and_data_edges():
    x, y, z, zz = p4()
    g = viz.dag(z, zz, names={"x": x, "y": y, "z": z, "zz": zz})
    import graphviz
    assert isinstance(g, graphviz.Digraph)
    src = g.source
    assert 'label="x|(2,)"' in src and 'label="zz|(2,)"' in src
    ops = {k: v for k, v in nodes(src).items() if k.startswith("op")}
    assert sorted(re.search(r"label=(\w+)", v)[1] for v in ops.values()) == ["add", "mul"]
    assert all("shape=box" in v for v in ops.values())
    ids = {re.search(r'label="(\w+)\|', v)[1]: k for k, v in nodes(src).items() if re.fullmatch(r"n\d+", k)}
    edges = set(re.findall(r"^\s*(\w+) -> (\w+)", src, re.M))
    mul, add = (next(k for k, v in ops.items() if f"label={n}" in v) for n in ("mul", "add"))
    assert {(ids["y"], mul), (mul, ids["zz"]), (ids["x"], add), (ids["y"], add), (add, ids["z"])} == edges


def test_dot_text_is_byte_stable_whatever_ran_before():
    """The same tensors drawn again, and any run of a replayed program, give the same DOT text."""
    from .programs import p4 as program

    def picture():
        end = tk.widgets.Replay(program, "arc").run(None)
        return viz.dag(*end.outputs(), names=end.tensors).source

    x, y, z, zz = p4()
    first, replayed = viz.dag(z, zz).source, picture()
    for _ in range(3):  # other work in between: tensors, tapes, labels, backward passes
        dev = tk.Cpu()
        a = dev.tensor([1., 2., 3.]).trace(tk.UnionTape())
        (a.exp() * a).sum().backward()
        tk.tapes(*p4(tk.ArcTape)[2:])
    assert viz.dag(z, zz).source == first and picture() == replayed
    assert re.findall(r'label="(\w+)\|', first) == ["y", "zz", "x", "z"]
    assert re.search(r"\bT\d", first) is None  # no T-numbers: the tapes' letters
    assert re.findall(r"tape (\w+): ArcTape", first) == [z.tape.label, zz.tape.label]


def test_unnamed_tensors_are_labelled_in_the_order_they_were_made_and_keep_their_label():
    dev = tk.Cpu()
    a = dev.tensor([1., 2.]).trace()
    out = (a.exp() * 2.0).sum()
    src = viz.dag(out).source
    labels = re.findall(r'label="(\w+)\|', src)
    numbers = [int(name[1:]) for name in labels]
    assert all(name.startswith("t") for name in labels) and numbers == list(range(numbers[0], numbers[0] + 4))
    assert labels[0] == a.label and labels[-1] == out.label
    assert f"{labels[-1]} = sum({labels[2]})" in str(out.tape)  # print(tape) calls them the same
    assert re.findall(r'label="(\w+)\|', viz.dag(out).source) == labels


def test_names_come_from_name_or_from_locals_and_name_wins():
    dev = tk.Cpu()
    x = dev.tensor([1.], name="input").trace()
    _hidden = y = x * 3.0
    src = viz.dag(y, names=locals()).source
    assert 'label="input|(1,)"' in src and 'label="y|(1,)"' in src and "_hidden" not in src
    assert y.label == "y" and "y = mul(input, const)" in str(y.tape)  # named for good, in every printout


def test_names_do_not_rename_a_tensor_already_shown():
    dev = tk.Cpu()
    x = dev.tensor([1.], name="x").trace()
    y = x * 3.0
    shown = y.label
    assert 'label="' + shown + '|(1,)"' in viz.dag(y, names=locals()).source


def test_each_tape_has_its_own_colour_for_its_ops_and_their_outputs():
    x, y, z, zz = p4(zz_first=False)  # add on x's tape (A), then mul on y's emptied tape (B)
    src = viz.dag(z, zz, names=locals()).source
    a, b = z.tape, zz.tape
    assert op_colours(src) == {a.colour, b.colour} and a.colour != b.colour
    assert f'color="{a.colour}"' in node_of(src, "z") and f'color="{b.colour}"' in node_of(src, "zz")
    assert f"tape {a.label}: ArcTape, 1 record<BR/>absorbed {b.label}" in src
    assert f"tape {b.label}: ArcTape, 1 record<BR/>emptied into {a.label}" in src
    assert TAPE_COLOURS.index(b.colour) == (TAPE_COLOURS.index(a.colour) + 1) % 6  # lettered in creation order


def test_the_arc_pitfall_shows_an_output_carrying_a_tape_that_does_not_hold_its_record():
    x, y, z, zz = p4(zz_first=True)  # zz's mul moved into x's tape when z was made
    src = viz.dag(z, zz, names=locals()).source
    a, b = z.tape, zz.tape
    assert op_colours(src) == {a.colour}
    zz_node = node_of(src, "zz")
    assert f'fillcolor="{lighten(a.colour)}"' in zz_node  # filled: made on tape A (lightened)
    assert f'color="{b.colour}"' in zz_node and "penwidth=3" in zz_node  # bold outline: carries tape B
    assert f"tape {b.label}: ArcTape, 0 records<BR/>emptied into {a.label}" in src


def test_union_tape_gives_one_colour_and_a_name_that_says_what_it_is_made_of():
    x, y, z, zz = p4(tk.UnionTape)
    src = viz.dag(z, zz, names=locals()).source
    union = z.tape.label
    assert re.fullmatch(r"[A-Z]+∪[A-Z]+", union) and zz.tape.label == x.tape.label == y.tape.label == union
    assert op_colours(src) == {z.tape.colour}
    assert f"tape {union}: UnionTape, 2 records" in src and len(re.findall(r"tape \S+: ", src)) == 1


def test_leaves_are_outlined_and_outputs_bold():
    x, y, z, zz = p4()
    src = viz.dag(z, zz, names=locals()).source
    for leaf in ("x", "y"):
        assert "fillcolor=white" in node_of(src, leaf) and "penwidth=1.5" in node_of(src, leaf)
        assert f'color="{z.tape.colour}"' in node_of(src, leaf)  # the tape of the op first reading it
    for out in ("z", "zz"):
        assert "penwidth=3" in node_of(src, out) and "Helvetica-Bold" in node_of(src, out)


def test_gradients_show_as_check_marks_and_a_missing_one_in_red():
    x, y, z, zz = p4(zz_first=True)
    with pytest.warns(tk.IncompleteTapeWarning):
        g = zz.backward(seed=np.ones(2))
    src = viz.dag(z, zz, grads=g, names=locals()).source
    assert 'label="zz|(2,)|grad ✓"' in src
    assert 'label="y|(2,)|grad ✗"' in src and f'fontcolor="{MISSING}"' in node_of(src, "y")
    assert "fontcolor" not in node_of(src, "zz")
    assert "grad ✗: gradient missing" in src


def test_a_drained_record_is_grey_and_the_legend_says_its_tape_records_again():
    x, y, z, zz = p4(zz_first=False)
    z.backward(seed=np.ones(2))
    src = viz.dag(z, zz, names=locals()).source
    assert op_colours(src) == {"#CCCCCC", zz.tape.colour}  # add let go; mul still on tape B
    assert f'color="{CONSUMED}"' in src and "style=\"rounded,filled,dashed\"" in src
    legend = re.sub(r"<BR/>", " ", nodes(src)["legend"])
    drained = f"it drained tape {z.tape.label}, which records again"
    assert f"grey, dashed: run by the backward on z and let go; {drained}" in legend
    assert (f"tape {z.tape.label}: ArcTape, 0 records absorbed {zz.tape.label} drained by the backward on z, "
            f"records again") in legend


def _consumed_loss_dag() -> tuple[str, str]:
    """The DAG of ``loss = (x * 3).sum()`` after its backward consumed its OwnedTape, and its legend's words."""
    x = tk.Cpu().tensor([1., 2.], name="x").trace(tk.OwnedTape())
    loss = (x * 3.0).sum()
    loss.name = "loss"
    loss.backward()
    src = viz.dag(loss).source
    return src, html.unescape(re.sub(r"<BR/>", " ", nodes(src)["legend"]))


def test_a_record_of_a_consumed_owned_tape_is_grey_and_the_legend_says_it_cannot_record():
    src, legend = _consumed_loss_dag()
    assert op_colours(src) == {"#CCCCCC"}
    assert "run by the backward on loss and let go; it consumed the OwnedTape, which cannot record" in legend
    assert "drained" not in src


def test_the_legend_is_on_the_picture():
    x, y, z, zz = p4()
    src = viz.dag(z, zz, names=locals()).source
    legend = nodes(src)["legend"].replace("<BR/>", " ")
    for entry in ("legend", f"tape {z.tape.label}", f"tape {zz.tape.label}", "white: a leaf",
                  "bold, thick outline: a tensor drawn here"):
        assert entry in legend
    assert "grad ✓" not in legend  # only what the picture uses
    for name in ("x", "y", "z", "zz"):  # no sample node that reads as one of the program's tensors
        assert not re.search(rf">(<B>)?{name}(</B>)?</TD>", legend)


def test_the_legend_is_a_small_key_under_the_dag():
    x, y, z, zz = p4()
    src = viz.dag(z, zz, names=locals()).source
    assert re.search(r"subgraph key \{\s*rank=sink\s*legend \[", src)  # alone on the last rank: under the DAG
    lines = re.findall(r">([^<>]+)</TD>", nodes(src)["legend"])
    lines = [part for line in lines for part in line.split("<BR/>")]
    assert max(len(line) for line in lines) <= 36  # short lines


def svg_size(svg: str) -> tuple[float, float]:
    width, height = re.search(r'<svg[^>]* width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups()
    return float(width), float(height)


def test_the_p4_picture_with_its_key_fits_half_a_notebook_cell():
    """Half of a 1280 px JupyterLab's cell (the merge viewer's column) is about 420 px: 315 pt."""
    x, y, z, zz = p4(zz_first=True)
    with pytest.warns(tk.IncompleteTapeWarning):
        g = zz.backward(seed=np.ones(2))
    svg = viz.dag(z, zz, grads=g, names=locals()).svg()  # the longest key: two tapes, both grad marks
    assert svg_size(svg)[0] <= 315


def test_the_svg_shrinks_to_its_container_and_keeps_its_drawn_size():
    from IPython.core.formatters import DisplayFormatter

    g = viz.dag(p4()[2])
    data, _ = DisplayFormatter().format(g)
    for svg in (g.svg(), data["image/svg+xml"]):
        root = re.search(r"<svg[^>]*>", svg)[0]
        assert 'style="max-width:100%;height:auto"' in root and re.search(r'width="[\d.]+pt"', root)
        assert svg.count("max-width") == 1
    assert isinstance(g, viz.Picture)


def test_dag_text_is_at_least_10_pt():
    x, y, z, zz = p4()
    svg = viz.dag(z, zz, names=locals()).svg()
    sizes = {float(s) for s in re.findall(r'font-size="([\d.]+)"', svg)}
    assert sizes and min(sizes) >= 10


def chain(n):
    x = tk.Cpu().tensor([1.0]).trace(tk.UnionTape())
    for _ in range(n):
        x = x.sin()
    return x


def fan_in(n):
    dev = tk.Cpu()
    return tk.stack([dev.tensor([1.0]).trace(tk.UnionTape()) for _ in range(n)]).sum()


def size(src: str) -> float:
    return float(re.search(r'size="([\d.]+),', src)[1])


def test_picture_size_scales_with_the_node_count():
    assert size(viz.dag(chain(100)).source) > 5 * size(viz.dag(chain(5)).source)


@needs_graphviz
@pytest.mark.parametrize("make,n", [(chain, 100), (fan_in, 196)], ids=["deep", "wide"])
def test_two_hundred_nodes_are_drawn_without_shrinking_the_text(make, n):
    g = viz.dag(make(n))
    assert len([k for k in nodes(g.source) if re.fullmatch(r"(n|op)\d+", k)]) >= 200
    scale = float(re.search(r"scale\(([\d.]+)", g.svg())[1])
    assert scale >= 0.95


def test_dag_takes_tensors_only():
    with pytest.raises(tk.InvalidArgumentError, match="at least one tensor"):
        viz.dag()
    with pytest.raises(tk.InvalidArgumentError, match="takes tensors"):
        viz.dag(3.0)
    with pytest.raises(tk.InvalidArgumentError, match="such as locals()"):
        viz.dag(p4()[2], names=["z"])


# -- display in Jupyter, with and without Graphviz ------------------------------------------------

@needs_graphviz
def test_jupyter_shows_svg():
    from IPython.core.formatters import DisplayFormatter
    data, _ = DisplayFormatter().format(viz.dag(p4()[2]))
    assert data["image/svg+xml"].lstrip().startswith("<?xml") and "<svg" in data["image/svg+xml"]


def test_without_graphviz_jupyter_shows_the_source_and_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without dot
    monkeypatch.setattr(render, "bundled", lambda: None)  # and no graphviz-pure
    x, y, z, zz = p4()
    g = viz.dag(z, zz, names=locals())
    from IPython.core.formatters import DisplayFormatter
    data, _ = DisplayFormatter().format(g)
    assert "image/svg+xml" not in data
    assert "pip install graphviz-pure" in data["text/html"] and "install Graphviz (apt-get install graphviz" in data["text/html"]
    assert "digraph tapekit {" in data["text/html"] and "label=&quot;zz|(2,)&quot;" in data["text/html"]
    assert data["text/plain"].splitlines()[0].startswith("No Graphviz program was found to draw the picture")
    assert "<pre>digraph tapekit" in g.svg()


# -- snapshots -----------------------------------------------------------------------------------

def shares(snap):
    return {o.name: (o.own_records, o.records, o.reachable, o.leaves) for o in snap.outputs}


def test_snapshot_of_p4_before_and_after_the_merge_under_arc():
    dev = tk.Cpu()
    gx = tk.Gradients()
    x = dev.tensor([1., 2.]).trace(tk.ArcTape(grads=gx))
    gx.alloc(x)  # one gradient entry of 8 bytes on x's tape
    y = dev.tensor([4., 5.]).trace(tk.ArcTape())
    before = viz.snapshot(x, y, label="before", names=locals())
    zz = y * 2.0
    z = x + y
    after = viz.snapshot(z, zz, label="after", names=locals())
    assert before.label == "before" and after.label == "after"
    tapes = [(t.policy, t.records, t.grad_entries, t.nbytes) for t in before.tapes]
    assert tapes == [("ArcTape", 0, 1, 8), ("ArcTape", 0, 0, 0)]
    assert [(t.records, t.grad_entries) for t in after.tapes] == [(2, 1), (0, 0)]
    assert shares(before) == {"x": (0, 0, 0, 0), "y": (0, 0, 0, 0)}
    assert shares(after) == {"z": (1, 1, 2, 2), "zz": (0, 1, 0, 1)}
    zz_share = after.outputs[1]
    assert zz_share.record_share == 0.0 and zz_share.leaf_share == 0.0 and before.outputs[0].record_share is None
    assert f"zz's history (holds tape {zz.tape.label}): its backward sees 0/1 records, 0/1 leaves" in str(after)
    assert [t.look.name for t in before.tapes] == [t.look.name for t in after.tapes] == [x.tape.label, y.tape.label]


def test_snapshot_of_p4_under_union_is_one_tape_that_sees_everything():
    x, y, z, zz = p4(tk.UnionTape)
    after = viz.snapshot(z, zz, label="after", names=locals())
    assert [(t.policy, t.records) for t in after.tapes] == [("UnionTape", 2)]
    assert shares(after) == {"z": (1, 1, 2, 2), "zz": (1, 1, 1, 1)}


def test_a_leaf_whose_gradient_would_arrive_only_in_part_is_not_counted_as_reached():
    x, y, z, zz = p4(tk.ArcTape)
    out = zz + y  # y reaches out directly, and through zz, whose record is on z's tape
    snap = viz.snapshot(out, names=locals())
    assert shares(snap) == {"out": (1, 2, 0, 1)}
    assert "its backward sees 1/2 records, 0/1 leaves" in str(snap)


def test_snapshot_counts_consumed_records_as_on_no_tape():
    x, y, z, zz = p4(zz_first=False)
    z.backward(seed=np.ones(2))
    snap = viz.snapshot(z, zz, names=locals())
    assert snap.outputs[0].split == {None: 1} and snap.outputs[0].own_records == 0


# -- the partition plot --------------------------------------------------------------------------

def test_plot_partition_has_one_panel_per_snapshot_in_the_dag_colours():
    from matplotlib.figure import Figure
    dev = tk.Cpu()
    x = dev.tensor([1., 2.]).trace(tk.ArcTape())
    y = dev.tensor([4., 5.]).trace(tk.ArcTape())
    before = viz.snapshot(x, y, label="before the merge", names=locals())
    zz = y * 2.0
    z = x + y
    after = viz.snapshot(z, zz, label="after the merge", names=locals())
    fig = viz.plot_partition(before, after)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert [ax.get_title() for ax in fig.axes] == ["before the merge", "after the merge"]
    a, b = z.tape, zz.tape
    ticks = [t.get_text() for t in fig.axes[1].get_yticklabels()]
    assert ticks[0].startswith(f"tape {a.label} (ArcTape)\nabsorbed {b.label}\n2 records")
    assert ticks[1].startswith(f"tape {b.label} (ArcTape)\nemptied into {a.label}\n0 records")
    assert ticks[3] == f"zz's history (holds tape {b.label})\nits backward sees\n0/1 records, 0/1 leaves"
    colours = [matplotlib.colors.to_hex(p.get_facecolor()).upper() for p in fig.axes[1].patches]
    assert colours[:2] == [a.colour, b.colour]  # the tape bars, in the DAG's colours
    src = viz.dag(z, zz, names=locals()).source
    assert f"fillcolor=\"{a.colour}\"" in src and f"tape {a.label}: ArcTape" in src
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[:2] == [f"tape {a.label}", f"tape {b.label}"]


def test_jupyter_shows_the_partition_plot_as_png_without_pyplot():
    from IPython.core.formatters import DisplayFormatter
    x, y, z, zz = p4()
    data, _ = DisplayFormatter().format(viz.plot_partition(viz.snapshot(z, zz)))
    assert data["image/png"][:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_partition_fits_a_notebook_cell_with_text_of_at_least_10_pt():
    """At most two panels to a row; at the 96 dpi it is shown at, 8.5 in is 816 px, narrower than a
    notebook cell of a 1280 px wide JupyterLab with its left sidebar open (about 850 px)."""
    from tapekit.viz.partition import DPI, png
    x, y, z, zz = p4()
    snaps = [viz.snapshot(z, zz, label=f"moment {i}") for i in range(4)]
    for count in (1, 2, 3, 4):
        fig = viz.plot_partition(*snaps[:count])
        assert len(fig.axes) == count
        assert fig.get_figwidth() * DPI <= 816
        import io
        from PIL import Image
        assert Image.open(io.BytesIO(png(fig))).size[0] <= 816
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        FigureCanvasAgg(fig).draw()
        texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_text() and t.get_visible()]
        assert texts and min(t.get_fontsize() for t in texts) >= 10
        drawn = fig.get_tightbbox(fig.canvas.get_renderer())  # inches: all that is drawn, nothing cut off
        assert drawn.x0 >= -0.01 and drawn.x1 <= fig.get_figwidth() + 0.01, (count, drawn)


def two_tapes_met(tape):
    dev = tk.Cpu()
    x = dev.tensor([1.]).trace(tape())
    y = dev.tensor([2.]).trace(tape())
    z = x * y


def test_plot_partition_keeps_a_tapes_colour_across_panels_of_a_replayed_program():
    replay = tk.widgets.Replay(two_tapes_met, "union")
    first = viz.snapshot(replay.run(3).tensors["y"], label="y alone")  # the program's second tape: B
    second = viz.snapshot(replay.run(4).tensors["z"], label="merged")
    fig = viz.plot_partition(first, second)
    alone = replay.run(3).tensors["y"].tape  # y's tape in another run: the same name and colour
    union = replay.run(None).tensors["x"].tape
    assert alone.label in union.label.split("∪") and len(union.label.split("∪")) == 2
    bar = [matplotlib.colors.to_hex(p.get_facecolor()).upper() for p in fig.axes[0].patches][0]
    assert bar == alone.colour  # y's tape keeps its colour in a panel of its own
    assert fig.axes[0].get_yticklabels()[0].get_text().startswith(f"tape {alone.label} ")
    assert fig.axes[1].get_yticklabels()[0].get_text().startswith(f"tape {union.label} ")  # the union


def test_plot_partition_names_the_tapes_of_each_panel_as_its_snapshot_prints_them():
    dev = tk.Cpu()
    x = dev.tensor([1.]).trace(tk.ArcTape())
    y = dev.tensor([2.]).trace(tk.ArcTape())
    first = viz.snapshot(y, label="y alone")  # y's tape is shown first: it gets its letter first
    second = viz.snapshot(x * y, y, label="merged")
    fig = viz.plot_partition(first, second)
    b, a = y.tape.label, x.tape.label
    assert f"tape {b} (" in str(first) and fig.axes[0].get_yticklabels()[0].get_text().startswith(f"tape {b} ")
    assert [t.get_text().split(" (")[0] for t in fig.axes[1].get_yticklabels()[:2]] == [f"tape {b}", f"tape {a}"]


def test_plot_partition_takes_snapshots_only():
    with pytest.raises(tk.InvalidArgumentError, match="takes snapshots"):
        viz.plot_partition()
    with pytest.raises(tk.InvalidArgumentError, match="takes snapshots"):
        viz.plot_partition(p4()[2])


def test_import_tapekit_does_not_import_the_picture_libraries():
    import subprocess
    import sys
    code = "import sys, tapekit; print(sorted(m for m in ('graphviz', 'matplotlib', 'ipywidgets') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_leaf_whose_first_reader_was_let_go_is_outlined_grey_and_the_legend_says_so():
    """Not in an unexplained dark grey: in the grey of the let-go record that read it."""
    src, legend = _consumed_loss_dag()
    assert f'color="{CONSUMED}"' in node_of(src, "x")
    assert "grey: that op's record is gone" in legend
    y = tk.Cpu().tensor([1., 2.], name="y").trace(tk.OwnedTape())
    assert "record is gone" not in viz.dag((y * 3.0).sum()).source  # said only where a leaf is drawn so


# -- a leaf set: the gradients it leaves out on purpose are not drawn as missing ------------------

def _leaf_set():
    dev = tk.Cpu()
    x0, y0 = dev.tensor([1., 2.], name="x"), dev.tensor([3., 4.], name="y")
    x, y = x0.trace(tk.UnionTape(leaves=[x0])), y0.trace(tk.UnionTape())
    s = (x * y).sum()
    s.name = "s"
    return x, y, s


def test_gradients_a_leaf_set_leaves_out_are_marked_not_kept_in_grey_not_missing_in_red():
    x, y, s = _leaf_set()
    src = viz.dag(s, grads=s.backward()).source
    drawn, key = src.split("legend [label=")
    assert 'label="x|(2,)|grad ✓"' in drawn
    assert 'label="y|(2,)|not kept"' in drawn and 'label="s|()|not kept"' in drawn
    assert MISSING not in drawn and "grad ✗" not in src and "gradient missing" not in key
    assert "not kept: not in the leaf set" in key.replace("<BR/>", " ")


def test_the_not_kept_row_is_in_the_legend_only_when_a_tensor_is_drawn_not_kept():
    x, y, z, zz = p4(zz_first=True)
    with pytest.warns(tk.IncompleteTapeWarning):
        g = zz.backward(seed=np.ones(2))
    assert "not kept" not in viz.dag(z, zz, grads=g).source


def test_the_explorer_draws_a_gradient_the_leaf_set_leaves_out_as_not_kept():
    def program(tape):
        dev = tk.Cpu()
        x = dev.tensor([1., 2.])
        w = dev.tensor([3., 4.]).trace(tk.UnionTape(leaves=[x]))
        loss = (x * w).sum()

    explorer = tk.widgets.TapeExplorer(program, policy="union")
    explorer.output.value = "loss"
    explorer.run_backward()
    assert 'label="w|(2,)|not kept"' in explorer.dot and MISSING not in explorer.dot.split("legend [label=")[0]


def test_the_snapshot_counts_the_leaves_of_the_leaf_set_as_gradient_split_does():
    x, y, s = _leaf_set()
    assert "its backward sees 2/2 records, 1/1 leaves" in str(viz.snapshot(s))
    assert list(viz.gradient_split(s).parts) == ["x"]


def test_the_snapshot_of_a_model_with_alloc_grads_counts_its_parameters_not_its_input():
    dev = tk.Cpu(seed=1)
    model = tk.nn.Sequential(tk.nn.Linear(3, 2, device=dev), tk.nn.Tanh(), tk.nn.Linear(2, 1, device=dev))
    xb = dev.tensor(np.ones((2, 3)), name="xb")
    loss = (model(xb.trace(tk.OwnedTape(model.alloc_grads()))) ** 2).mean()
    assert "4/4 leaves" in str(viz.snapshot(loss)) and len(viz.gradient_split(loss).parts) == 4


@pytest.mark.parametrize("dpi", [-1, 0, float("nan"), "a", 10**6])
def test_a_png_at_a_dpi_that_is_not_a_size_is_refused(dpi):
    """dpi=-1 drew a 32767 x 32766 image; 0 and nan were ignored silently."""
    x = tk.Cpu().tensor([1.0, 2.0], name="x").trace(tk.UnionTape())
    with pytest.raises(tk.InvalidArgumentError, match="dpi must be"):
        tk.viz.dag((x * 2.0).sum()).png(dpi=dpi)
