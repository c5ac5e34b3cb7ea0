"""Widgets, driven headlessly: set the slider and the dropdowns, press Backward, and check the
SVG, the DOT, the figure and the text they show."""

from __future__ import annotations

import re
import sys

import pytest

import tapekit as tk

from .dot_helpers import BLUE, ORANGE, nodes, op_colours
from .programs import p4

widgets = tk.widgets


def p4_then_backward(tape):
    dev = tk.Cpu()
    x = dev.tensor([1., 2.]).trace(tape())
    y = dev.tensor([4., 5.]).trace(tape())
    z = x + y
    zz = y * 2.0
    g = z.sum().backward()


def broken(tape):
    x = tk.Cpu().tensor([1.]).trace(tape())
    y = x * undefined_name  # noqa: F821


def legend_tapes(dot: str) -> list[str]:
    return re.findall(r"(tape \S+): (\w+), \d+ record", dot)


def tape_of(widget, name: str):
    """The tape the tensor ``name`` carries at the widget's step (a live tape of its last run)."""
    return widget.moment.tensors[name].tape


# -- replay --------------------------------------------------------------------------------------

def test_replay_counts_the_lines_of_the_program_and_finds_the_merge():
    replay = widgets.Replay(p4, "arc")
    assert replay.steps == 5 and replay.merges == [5] and replay.error is None
    moment = replay.run(3)
    assert moment.line == "y = dev.tensor([4., 5.]).trace(tape())"
    assert list(moment.tensors) == ["x", "y"]
    assert [t.name for t in moment.outputs()] == ["x", "y"]
    assert [t.name for t in replay.run(5).outputs()] == ["zz", "z"]
    assert widgets.Replay(p4, "global").merges == []


def test_replay_leaves_no_tracer_behind():
    before = sys.gettrace()
    widgets.Replay(p4, "union").run(2)
    assert sys.gettrace() is before


def test_replay_rejects_an_unknown_policy():
    with pytest.raises(tk.InvalidArgumentError, match="owned, arc, union, global"):
        widgets.Replay(p4, "shared")


# -- TapeExplorer --------------------------------------------------------------------------------

def test_explorer_starts_at_the_last_step_and_the_slider_steps_through_the_program():
    ex = widgets.TapeExplorer(p4)
    assert (ex.step.min, ex.step.max, ex.step.value) == (1, 5, 5)
    assert ex.line == "z = x + y" and ex.picture.value == ex.svg and "<svg" in ex.svg
    assert "step 5 of 5" in ex.code.value and "z = x + y" in ex.code.value
    ex.step.value = 3
    assert ex.line == "y = dev.tensor([4., 5.]).trace(tape())"
    assert re.findall(r'label="(\w+)\|', ex.dot) == ["x", "y"] and "op1" not in ex.dot
    assert len(ex.figure.axes) == 1 and ex.figure.axes[0].get_title().startswith("after step 3: y = ")
    assert ex.plot.value.startswith('<img src="data:image/png;base64,')
    ex.step.value = 1
    assert "no tensors yet" in ex.svg and ex.figure is None and ex.output.options == ()


def test_explorer_policy_dropdown_redraws_one_colour_per_tape():
    ex = widgets.TapeExplorer(p4)
    ex.step.value = 5
    a, b = tape_of(ex, "z"), tape_of(ex, "zz")
    assert legend_tapes(ex.dot) == [(f"tape {a.label}", "ArcTape"), (f"tape {b.label}", "ArcTape")]
    assert 'label="zz|(2,)" color="' + b.colour in ex.dot  # zz carries tape B, its mul moved to tape A
    ex.policy.value = "union"
    union = tape_of(ex, "z")
    assert ex.step.value == 5 and legend_tapes(ex.dot) == [(f"tape {union.label}", "UnionTape")]
    assert op_colours(ex.dot) == {union.colour}
    assert not set(union.label.split("∪")) & {a.label, b.label}  # another policy's run: other tapes, other names
    ex.policy.value = "global"
    assert legend_tapes(ex.dot) == [(f"tape {tape_of(ex, 'z').label}", "GlobalTape")]
    ex.step.value = 3
    ex.policy.value = "owned"
    assert ex.step.value == 3 and legend_tapes(ex.dot) == [(f"tape {tape_of(ex, 'x').label}", "OwnedTape"),
                                                           (f"tape {tape_of(ex, 'y').label}", "OwnedTape")]


def test_colours_stay_with_their_tape_from_step_to_step():
    ex = widgets.TapeExplorer(p4, policy="arc", step=4)
    a, b = tape_of(ex, "x"), tape_of(ex, "y")
    assert op_colours(ex.dot) == {b.colour} and a.colour != b.colour  # zz's mul, on y's tape B
    ex.step.value = 5  # a fresh run: other tape objects, the same names and colours
    assert (tape_of(ex, "x").label, tape_of(ex, "y").label) == (a.label, b.label)
    assert op_colours(ex.dot) == {a.colour}  # the merge moved it to x's tape A


def test_backward_on_zz_under_arc_reports_y_missing_and_why():
    ex = widgets.TapeExplorer(p4, policy="arc")
    ex.output.value = "zz"
    ex.backward_button.click()
    text = ex.report_text
    assert text.startswith("backward on zz (seeded with ones, as zz.sum() would be):")
    assert "IncompleteTapeWarning: backward on zz cannot see 1 record of the 1 in its history" in text
    assert "  ✓ zz" in text
    found = re.search(r"  ✗ y has no gradient: the record `zz = mul\(y, const\)` on its way to "
                      r"the output lives on ArcTape (\S+), held by z", text)
    assert found and found[1] == tape_of(ex, "z").label and f"tape {found[1]}: ArcTape" in ex.dot
    assert "in tapekit's messages" not in text  # the messages name the tapes as the pictures do
    assert 'label="y|(2,)|grad ✗"' in ex.dot and 'label="zz|(2,)|grad ✓"' in ex.dot
    assert ex.report.value.startswith("<pre") and "✗ y has no gradient" in ex.report.value


def test_the_backward_button_names_the_output_it_runs_on():
    ex = widgets.TapeExplorer(p4, policy="arc")
    assert (ex.output.value, ex.backward_button.description) == ("z", "Backward on z")
    ex.output.value = "zz"
    assert ex.backward_button.description == "Backward on zz"
    ex.backward_button.click()
    assert ex.report_text.startswith("backward on zz ")
    ex.step.value = 1  # no tensors yet, nothing to choose
    assert ex.output.value is None and ex.backward_button.description == "Backward"


def test_backward_on_zz_under_union_gets_every_gradient():
    ex = widgets.TapeExplorer(p4, policy="union")
    ex.output.value = "zz"
    grads = ex.run_backward()
    assert "  ✓ y" in ex.report_text and "  ✓ x" in ex.report_text and "Warning" not in ex.report_text
    assert grads[ex.moment.tensors["y"]].tolist() == [2.0, 2.0]
    legend = ex.dot.replace("<BR/>", " ")
    assert f"it drained tape {tape_of(ex, 'zz').label}, which records again" in legend


def test_backward_errors_show_as_text():
    ex = widgets.TapeExplorer(p4_then_backward, policy="union")
    assert ex.step.max == 6 and ex.code.value.count("warning") == 0
    ex.output.value = "zz"
    ex.backward_button.click()
    assert re.search(r"TapeConsumedError: tape \S+ was drained by the backward on \S+, which let go of zz's records",
                     ex.report_text), ex.report_text
    assert "Traceback" not in ex.report_text and "gradients:" not in ex.report_text


def pitfall(tape):
    """P4 with zz first, an output that reaches y two ways, then a backward that warns."""
    dev = tk.Cpu()
    x = dev.tensor([1., 2.]).trace(tape())
    y = dev.tensor([4., 5.]).trace(tape())
    zz = y * 2.0
    z = x + y
    out = zz + y
    g = zz.sum().backward()


def test_a_warning_the_program_itself_raises_shows_as_text():
    ex = widgets.TapeExplorer(pitfall, policy="arc")
    assert re.search(r"warning: backward on t\d+ cannot see 1 record of the 2 in its history .*gradients of y "
                     r"will be missing", ex.code.value)
    ex.step.value = 5
    assert "warning" not in ex.code.value


def test_an_incomplete_gradient_is_marked_in_the_report():
    ex = widgets.TapeExplorer(pitfall, policy="arc")
    ex.step.value = 6  # out = zz + y, before the program's own backward
    ex.output.value = "out"
    ex.backward_button.click()
    assert "gradients of y will be incomplete" in ex.report_text
    assert "½ y: incomplete, not all of its ways to out ran" in ex.report_text
    assert "✓ out" in ex.report_text and "✓ zz" in ex.report_text
    ex.policy.value = "union"
    ex.backward_button.click()
    assert "✓ y" in ex.report_text and "incomplete" not in ex.report_text


def test_a_program_error_shows_as_text_at_its_step():
    ex = widgets.TapeExplorer(p4, policy="owned")
    assert ex.step.max == 5
    assert "`z = x + y` raised TapeMovedError: y&#x27;s OwnedTape was moved" in ex.code.value
    assert ex.figure.axes[0].get_title().endswith("(raised)")
    ex2 = widgets.TapeExplorer(broken)
    assert "raised NameError" in ex2.code.value and ex2.step.max == 2


def test_changing_step_clears_the_last_backward():
    ex = widgets.TapeExplorer(p4)
    ex.output.value = "z"
    ex.backward_button.click()
    assert ex.report_text
    ex.step.value = 4
    assert ex.report_text == "" and ex.report.value == "" and "grad" not in ex.dot


def test_explorer_falls_back_to_dot_source_without_graphviz(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot
    monkeypatch.setattr(tk.viz.render, "bundled", lambda: None)  # no graphviz-pure
    ex = widgets.TapeExplorer(p4)
    assert "install Graphviz" in ex.picture.value and "<pre>digraph tapekit" in ex.picture.value


def test_explorer_displays_as_a_widget():
    ex = widgets.TapeExplorer(p4)
    bundle = ex._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert repr(ex) == "TapeExplorer(p4, policy='arc', step=5 of 5)"


def images(html_text: str) -> list[str]:
    """The ``data:`` kinds of the images in an HTML text: ``image/svg+xml``, ``image/png``."""
    return re.findall(r'<img src="data:([\w/+]+);base64,', html_text)


def test_explorer_saves_a_static_view_of_its_pictures_beside_the_widget():
    """A notebook read without running (GitHub, nbviewer) shows the pictures, not ``VBox(...)``."""
    import base64
    ex = widgets.TapeExplorer(p4, step=4)
    bundle = ex._repr_mimebundle_()
    assert bundle["text/plain"] == "TapeExplorer(p4, policy='arc', step=4 of 5)"
    page = bundle["text/html"]
    assert "VBox" not in page and "policy &#x27;arc&#x27;, step 4 of 5" in page and "zz = y * 2.0" in page
    assert images(page) == ["image/svg+xml", "image/png"]
    svg = base64.b64decode(re.search(r'data:image/svg\+xml;base64,([^"]+)', page)[1]).decode()
    assert svg.startswith("<svg") and 'label="zz|(2,)"' not in svg and ">zz</text>" in svg
    ex.output.value = "zz"
    ex.backward_button.click()
    assert "backward on zz" in ex._repr_mimebundle_()["text/html"]  # the report, as it is now


def test_pictures_shrink_to_the_widget_and_wrap_under_each_other():
    ex = widgets.TapeExplorer(p4)
    assert 'style="max-width:100%;height:auto"' in ex.svg.split(">", 1)[0]
    assert 'style="max-width:100%;height:auto"' in ex.plot.value
    pictures = ex.widget.children[2]
    assert pictures.children == (ex.picture, ex.plot) and pictures.layout.flex_flow == "row wrap"


def test_messages_use_the_theme_colours_with_a_fallback():
    ex = widgets.TapeExplorer(p4, policy="owned")
    assert 'style="color:var(--jp-error-color1, #D00000)"' in ex.code.value


# -- MergeViewer ---------------------------------------------------------------------------------

def test_merge_viewer_shows_p4_before_and_after_the_merge():
    mv = widgets.MergeViewer(p4)
    assert mv.step.value == 5 and mv.line == "z = x + y" and "they merged" in mv.note
    assert "<svg" in mv.before_svg and "<svg" in mv.after_svg
    end = widgets.Replay(p4, "arc").run(None).tensors
    a, b = end["x"].tape, end["y"].tape
    assert op_colours(mv.before_dot) == {b.colour} and op_colours(mv.after_dot) == {a.colour}  # mul moved tapes
    assert len(mv.figure.axes) == 2
    assert [ax.get_title() for ax in mv.figure.axes] == ["before step 5: z = x + y", "after step 5: z = x + y"]
    before_ticks = [t.get_text() for t in mv.figure.axes[0].get_yticklabels()]
    after_ticks = [t.get_text() for t in mv.figure.axes[1].get_yticklabels()]
    assert before_ticks[1].startswith(f"tape {b.label} (ArcTape)\n1 record,")
    assert after_ticks[0].startswith(f"tape {a.label} (ArcTape)\nabsorbed {b.label}\n2 records")


def test_merge_viewer_outlines_the_leaves_alike_before_and_after():
    mv = widgets.MergeViewer(p4)
    for dot in (mv.before_dot, mv.after_dot):
        for leaf in ("x", "y"):
            attrs = next(a for k, a in nodes(dot).items() if f'label="{leaf}|' in a)
            assert "fillcolor=white" in attrs and "penwidth=1.5" in attrs and "Bold" not in attrs, (leaf, attrs)


def test_merge_viewer_saves_a_static_view_of_both_moments():
    mv = widgets.MergeViewer(p4)
    bundle = mv._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"] == "MergeViewer(p4, policy='arc', step=5 of 5)"
    assert images(bundle["text/html"]) == ["image/svg+xml", "image/svg+xml", "image/png"]
    assert "<b>before</b>" in bundle["text/html"] and "they merged" in bundle["text/html"]
    mv.step.value = 2
    assert "no tensors yet" in mv._repr_mimebundle_()["text/html"]


def test_merge_viewer_under_global_says_there_is_no_merge():
    mv = widgets.MergeViewer(p4, policy="arc")
    mv.policy.value = "global"
    assert mv.step.value == 5 and "no op in this program met two different tapes under 'global'" in mv.note
    mv.step.value = 2
    assert "no tensors yet" in mv.before_svg and len(mv.figure.axes) == 1


def test_a_notebook_read_without_running_shows_the_static_view():
    """nbconvert (as nbviewer runs it) picks the static HTML when the notebook holds no widget state."""
    from nbconvert import HTMLExporter
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    cell = new_code_cell("tk.widgets.TapeExplorer(p4)", execution_count=1)
    cell.outputs = [new_output("execute_result", data=widgets.TapeExplorer(p4)._repr_mimebundle_(), execution_count=1)]
    page, _ = HTMLExporter().from_notebook_node(new_notebook(cells=[cell]))
    assert 'class="tapekit-static"' in page and "VBox(" not in page
    assert page.count('src="data:image/svg+xml;base64,') == 1 and page.count('src="data:image/png;base64,') == 1
