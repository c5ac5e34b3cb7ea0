"""The backward player in a real browser at 1280×800: it renders, fits its output area without a
horizontal scroll, its text is at least 10 pt, and the arrow keys and the Play button step it; and
its tutorial runs in JupyterLab's dark theme with every player readable."""

from __future__ import annotations

import inspect
import json
import urllib.request
from pathlib import Path

import nbformat
import pytest

from tests.programs import fan_out

from notebook_page import NotebookPage, fit_problems, readability_problems, wait_for

pytestmark = pytest.mark.xdist_group("browser")

VIEWPORT = {"width": 1280, "height": 800}
REPO = Path(__file__).parent.parent.parent
TUTORIAL = next((REPO / "notebooks").glob("*watch_backward_run.ipynb"))  # its number may change
THEMES = "lab/api/settings/@jupyterlab/apputils-extension:themes"
SOURCE = f"""import tapekit as tk


{inspect.getsource(fan_out)}

tk.widgets.BackwardPlayer(fan_out, policy="union")"""

# The smallest text the player shows in HTML (its heading, maths and gradients), in CSS pixels; the
# text of its DAG is measured by `fit_problems`.
HTML_TEXT_JS = """box => Math.min(...[...box.querySelectorAll('.widget-html pre, .widget-html b')]
    .map(e => parseFloat(getComputedStyle(e).fontSize)))"""
TEN_PT_PX = 10 * 96 / 72


def write_fixture(lab) -> str:
    """A one-cell notebook showing the player, in the server's throwaway copy of the fixtures."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SOURCE)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, lab.root / "fixtures" / "player.ipynb")
    return "fixtures/player.ipynb"


def test_player_fits_1280_and_steps_with_the_keyboard_and_play(page, lab):
    page.set_viewport_size(VIEWPORT)
    notebook = NotebookPage(page, lab, write_fixture(lab)).open()
    problems = notebook.problems(notebook.run_all())
    assert not problems, "\n".join(problems)
    player = page.locator(".jp-Cell-outputArea .widget-vbox").first
    dag = player.locator(".widget-html svg").first
    heading = player.locator(".widget-html b").first
    slider = player.locator(".widget-slider [role=slider]")
    readout = player.locator(".widget-slider .widget-readout")
    wait_for(lambda: heading.inner_text(), lambda t: t.startswith("step 0 of 5: the seed"), what="the seed step")

    area = page.locator(".jp-Cell-outputArea").first
    assert area.evaluate("a => a.scrollWidth <= a.clientWidth"), "the player scrolls sideways"
    assert not fit_problems(page), fit_problems(page)  # nothing clipped, picture text at least 10 pt
    assert player.evaluate(HTML_TEXT_JS) >= TEN_PT_PX

    # The kernel redraws a step as separate widget messages (heading and maths, gradients, DAG), so
    # the page may show the new heading while the DAG and the gradients are still the last step's:
    # each is waited for on its own
    slider.focus()
    page.keyboard.press("ArrowRight")
    wait_for(lambda: heading.inner_text(), lambda t: t.startswith("step 1 of 5: record 1 of 4"), what="step 1")
    assert readout.inner_text() == "1"
    wait_for(lambda: dag.inner_html(), lambda svg: "▶ sum" in svg, what="the DAG of step 1 to mark sum")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    wait_for(lambda: heading.inner_text(), lambda t: t.startswith("step 3 of 5"), what="step 3")
    wait_for(lambda: dag.inner_html(), lambda svg: "▶ mul" in svg and "+[0.5, 1]" in svg,
             what="the DAG of step 3 to mark mul and show +[0.5, 1]")
    page.keyboard.press("ArrowLeft")
    wait_for(lambda: heading.inner_text(), lambda t: t.startswith("step 2 of 5"), what="back to step 2")
    wait_for(lambda: dag.inner_html(), lambda svg: "▶ add" in svg, what="the DAG of step 2 to mark add")

    player.locator(".widget-play button").first.click()  # play: one step every 1.5 s, to the end
    wait_for(lambda: heading.inner_text(), lambda t: t.startswith("step 5 of 5: backward on s returns"),
             timeout_s=30, what="Play to reach the end")
    wait_for(lambda: player.inner_text(), lambda text: "✓ x = [2.649, 4.718]" in text,
             what="the gradients of the last step to show x's")


def set_theme(lab, theme: str) -> None:
    """Choose JupyterLab's theme in the server's user settings (a page opened afterwards uses it)."""
    body = json.dumps({"raw": json.dumps({"theme": theme})}).encode()
    request = urllib.request.Request(lab.url(THEMES), data=body, method="PUT",
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=30).close()


def test_the_tutorial_runs_fits_and_reads_in_the_dark_theme(page, lab):
    set_theme(lab, "JupyterLab Dark")
    try:
        page.set_viewport_size(VIEWPORT)
        notebook = NotebookPage(page, lab, f"notebooks/{TUTORIAL.name}").open()
        assert page.get_attribute("body", "data-jp-theme-light") == "false", "the dark theme is not on"
        model = notebook.run_all()
        problems = notebook.problems(model) + fit_problems(page) + readability_problems(page)
        assert not problems, f"{TUTORIAL.name} in the dark theme:\n" + "\n".join(problems)
        assert page.locator(".jp-Cell-outputArea .widget-html svg").count() == 4  # every player's DAG was checked
    finally:
        set_theme(lab, "JupyterLab Light")  # the other tests see the default theme


# Where the gradients' column sits (beside the DAG: true), how tall the DAG's box is, and how far
# below the player's top it starts (the heading and maths above it).
LAYOUT_JS = """player => { const [dag, text] = player.querySelector(':scope > .widget-box:last-child').children;
    const d = dag.getBoundingClientRect(), t = text.getBoundingClientRect();
    return {beside: t.left >= d.right, dag: Math.round(d.height),
            top: Math.round(d.top - player.getBoundingClientRect().top)}; }"""


def test_stepping_keeps_the_gradients_and_the_dag_where_they_are(page, lab):
    page.set_viewport_size(VIEWPORT)
    notebook = NotebookPage(page, lab, write_fixture(lab)).open()
    notebook.run_all()
    player = page.locator(".jp-Cell-outputArea .widget-vbox").first
    heading = player.locator(".widget-html b").first
    dag = player.locator(".widget-html svg").first
    gradients = player.locator(".widget-html pre").last
    player.locator(".widget-slider [role=slider]").focus()
    layouts = []
    for k in range(6):
        wait_for(lambda: heading.inner_text(), lambda t: t.startswith(f"step {k} of 5"), what=f"step {k}")
        if k:  # the heading may arrive before the DAG and the gradients; each step changes both
            wait_for(lambda: dag.inner_html(), lambda svg: svg != before[0], what=f"the DAG of step {k}")
            wait_for(lambda: gradients.inner_text(), lambda t: t != before[1], what=f"the gradients of step {k}")
        layouts.append(player.evaluate(LAYOUT_JS))
        before = dag.inner_html(), gradients.inner_text()
        page.keyboard.press("ArrowRight")
    assert all(layout == layouts[0] for layout in layouts), layouts
    assert page.locator(".jp-Cell-outputArea").first.evaluate("a => a.scrollWidth <= a.clientWidth")
