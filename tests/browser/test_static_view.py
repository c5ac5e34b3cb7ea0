"""A notebook read without running shows each widget's pictures, not ``VBox(...)``: a notebook holding
a TapeExplorer's and a MergeViewer's outputs, as a run saves them, is opened in JupyterLab without
running it (untrusted, as a downloaded notebook is), and each output shows its saved pictures,
within the cell's width."""

from __future__ import annotations

import runpy
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from notebook_page import NotebookPage, fit_problems

pytestmark = pytest.mark.xdist_group("browser")

FIXTURES = Path(__file__).parent / "fixtures"


def saved_notebook() -> nbformat.NotebookNode:
    """Two widget cells with the outputs a run would save (widget view, static HTML, repr)."""
    from tapekit.widgets import MergeViewer, TapeExplorer

    program = runpy.run_path(str(FIXTURES / "explorer_program.py"))["program"]
    cells = []
    for number, widget in enumerate((TapeExplorer(program, policy="arc"), MergeViewer(program, policy="arc")), 1):
        cell = new_code_cell(f"tk.widgets.{type(widget).__name__}(program, policy='arc')", execution_count=number)
        cell.outputs = [new_output("execute_result", data=widget._repr_mimebundle_(), execution_count=number)]
        cells.append(cell)
    return new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                              "language": "python"}})


def test_saved_widgets_show_their_pictures_without_running(page, lab):
    nbformat.write(saved_notebook(), lab.root / "fixtures" / "saved_widgets.ipynb")
    NotebookPage(page, lab, "fixtures/saved_widgets.ipynb").open()
    areas = page.locator(".jp-Cell-outputArea")
    assert areas.count() == 2
    for area, pictures in zip(areas.all(), (2, 3)):  # explorer: DAG and plot; merge viewer: two DAGs and plot
        area.locator(".tapekit-static").wait_for()
        assert "VBox(" not in area.inner_text()
        shown = area.locator("img").evaluate_all("imgs => imgs.filter(i => i.naturalWidth > 0).length")
        assert shown == pictures
    assert "TapeExplorer: policy 'arc', step 5 of 5" in areas.first.inner_text()
    too_wide = fit_problems(page)
    assert not too_wide, "\n".join(too_wide)
