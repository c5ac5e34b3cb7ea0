"""The tape explorer in a real browser: the step slider moved with the keyboard, the policy changed
with the select box and the Backward button clicked once its label names the chosen output, and
after each the DAG the page shows is the one the explorer draws for that step and policy (node
count, tape colours) and the partition plot is redrawn. Program: acceptance program P4, whose two
ArcTapes a merge leaves partitioned."""

from __future__ import annotations

import re
import runpy
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from notebook_page import NotebookPage, graph_state, wait_for

pytestmark = pytest.mark.xdist_group("browser")

program = runpy.run_path(str(Path(__file__).parent / "fixtures" / "explorer_program.py"))["program"]

SVG = "{http://www.w3.org/2000/svg}"


def expected_graph(policy: str, step: int) -> dict:
    """What the explorer draws for ``step`` under ``policy``, read from its SVG as `graph_state` reads the page."""
    from tapekit.widgets import TapeExplorer

    svg = ET.fromstring(TapeExplorer(program, policy=policy, step=step).svg)
    nodes = [g for g in svg.iter(f"{SVG}g") if g.get("class") == "node"]
    fills = {shape.get("fill", "").lower() for g in nodes for shape in g.iter()
             if shape.tag in (f"{SVG}polygon", f"{SVG}ellipse", f"{SVG}path")}
    fills -= {"", "none", "white", "#ffffff", "transparent"}
    return {"nodes": len(nodes), "fills": sorted(fills)}


def tape_colours(graph: dict) -> list[str]:
    from tapekit.viz import TAPE_COLOURS

    return [fill for fill in graph["fills"] if fill in {c.lower() for c in TAPE_COLOURS}]


def control(explorer, kind: str, label: str):
    """The ``kind`` control (``.widget-slider``, ``.widget-dropdown``) of the explorer labelled ``label``."""
    page = explorer.page
    return explorer.locator(f".widget-{kind}", has=page.locator("label", has_text=re.compile(f"^{label}$")))


def test_explorer_follows_slider_policy_and_backward(page, lab):
    notebook = NotebookPage(page, lab, "fixtures/explorer.ipynb").open()
    problems = notebook.problems(notebook.run_all())
    assert not problems, "\n".join(problems)
    explorer = page.locator(".jp-Cell-outputArea .widget-vbox").first
    dag = explorer.locator(".widget-html svg").first
    plot = explorer.locator('.widget-html img[src^="data:image/png"]').first
    slider = control(explorer, "slider", "step")
    last = int(slider.locator("[role=slider]").get_attribute("aria-valuemax").split(".")[0])

    def shows(policy: str, step: int) -> dict:
        want = expected_graph(policy, step)
        return wait_for(lambda: graph_state(dag), lambda g: g == want, what=f"the DAG of {policy} step {step}")

    def redrawn(before: str) -> str:
        return wait_for(lambda: plot.get_attribute("src"), lambda src: src != before, what="the plot to be redrawn")

    arc_end = shows("arc", last)
    assert len(tape_colours(arc_end)) == 2  # the merge left the program's records on two tapes
    drawn = plot.get_attribute("src")

    slider.locator("[role=slider]").focus()
    page.keyboard.press("ArrowLeft")
    assert shows("arc", last - 1)["nodes"] < arc_end["nodes"]
    assert slider.locator(".widget-readout").inner_text() == str(last - 1)
    drawn = redrawn(drawn)
    page.keyboard.press("End")
    shows("arc", last)
    drawn = redrawn(drawn)

    control(explorer, "dropdown", "policy").locator("select").select_option("union")
    union_end = shows("union", last)
    assert len(tape_colours(union_end)) == 1  # one tape for every holder
    assert union_end["nodes"] == arc_end["nodes"]
    drawn = redrawn(drawn)

    control(explorer, "dropdown", "output").locator("select").select_option("zz")
    # The page may hold the dropdown's new value back while the click goes out at once; the kernel
    # relabels the button once it has the value, so a click after that runs on zz
    button = explorer.locator("button", has_text="Backward on")
    wait_for(lambda: button.inner_text().strip(), lambda text: text == "Backward on zz",
             what="the button to name zz")
    before = dag.inner_html()
    button.click()
    report = explorer.locator(".widget-html pre")
    wait_for(lambda: report.all_inner_texts(), lambda texts: any("backward on zz" in t for t in texts),
             what="the backward report")
    wait_for(lambda: dag.inner_html(), lambda svg: svg != before, what="the DAG to show gradients")
    redrawn(drawn)
