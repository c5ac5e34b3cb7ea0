"""Every tutorial runs in JupyterLab in a real browser: opened with ?reset, all cells run from the Run
menu, and then no error output, no "Error displaying widget", every widget control rendered and every
DAG drawn as SVG. (The same checks on a fixture notebook, without tapekit, are in test_fixture_widgets.)

The browser window is 1280 x 800 with the left sidebar open, the narrowest the tutorials are made for:
every output area, widget and figure fits its cell (nothing scrolls or is cut off on the right) and
the text of the pictures is at least 10 pt. The dark theme's checks are in test_dark_theme."""

from __future__ import annotations

from pathlib import Path

import pytest

from chromium import VIEWPORT
from notebook_page import NotebookPage, fit_problems, sidebar_width

pytestmark = pytest.mark.xdist_group("browser")

REPO = Path(__file__).parent.parent.parent
TUTORIALS = sorted(f"notebooks/{path.name}" for path in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_there_are_tutorials():
    assert TUTORIALS, "no notebooks/[0-9][0-9]_*.ipynb to run"


@pytest.mark.parametrize("path", TUTORIALS)
def test_tutorial_runs_renders_and_fits_in_jupyterlab(page, lab, path):
    notebook = NotebookPage(page, lab, path).open()
    model = notebook.run_all()
    problems = notebook.problems(model)
    assert not problems, f"{path} in JupyterLab:\n" + "\n".join(problems)
    assert page.viewport_size == VIEWPORT == {"width": 1280, "height": 800}
    assert sidebar_width(page) > 150, "the left sidebar is not open: the cells are wider than a reader's"
    too_wide = fit_problems(page)
    assert not too_wide, f"{path} in a 1280 px wide JupyterLab:\n" + "\n".join(too_wide)
