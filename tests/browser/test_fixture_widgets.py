"""The browser machinery proved on a small fixture notebook that needs nothing from tapekit: a slider,
a dropdown, a Graphviz DAG as SVG inside an HTML widget and a matplotlib plot in an Output widget."""

from __future__ import annotations

import pytest

from notebook_page import NotebookPage, graph_state, wait_for

pytestmark = pytest.mark.xdist_group("browser")

FIXTURE = "fixtures/widgets.ipynb"
OWNED, UNION = "#1f77b4", "#d62728"


def test_fixture_widgets_respond_to_keyboard_and_select(page, lab):
    notebook = NotebookPage(page, lab, FIXTURE).open()
    problems = notebook.problems(notebook.run_all())
    assert not problems, "\n".join(problems)
    box = page.locator(".widget-vbox").first
    dag = box.locator(".widget-html svg")
    plot = box.locator(".widget-output img").last  # while the Output widget redraws, old and new may both be there
    assert graph_state(dag) == {"nodes": 2, "fills": [OWNED]}
    first_plot = plot.get_attribute("src")

    box.locator(".widget-slider [role=slider]").focus()
    page.keyboard.press("ArrowRight")
    wait_for(lambda: graph_state(dag), lambda g: g["nodes"] == 3, what="the DAG to grow to 3 nodes")
    page.keyboard.press("End")
    assert wait_for(lambda: graph_state(dag), lambda g: g["nodes"] == 5) == {"nodes": 5, "fills": [OWNED]}
    assert box.locator(".widget-slider .widget-readout").inner_text() == "4"

    box.locator(".widget-dropdown select").select_option("union")
    assert wait_for(lambda: graph_state(dag), lambda g: g["fills"] == [UNION]) == {"nodes": 5, "fills": [UNION]}
    wait_for(lambda: plot.get_attribute("src"), lambda src: src != first_plot, what="the plot to be redrawn")
