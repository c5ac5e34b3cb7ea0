"""Every tutorial runs in JupyterLab in a real browser: opened with ?reset, all cells run from the Run
menu, and then no error output, no "Error displaying widget", every widget control rendered and every
DAG drawn as SVG. (The same checks on a fixture notebook, without tapekit, are in test_fixture_widgets.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from notebook_page import NotebookPage

pytestmark = pytest.mark.xdist_group("browser")

REPO = Path(__file__).parent.parent.parent
TUTORIALS = sorted(f"notebooks/{path.name}" for path in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_there_are_tutorials():
    assert TUTORIALS, "no notebooks/[0-9][0-9]_*.ipynb to run"


@pytest.mark.parametrize("path", TUTORIALS)
def test_tutorial_runs_and_renders_in_jupyterlab(page, lab, path):
    notebook = NotebookPage(page, lab, path).open()
    model = notebook.run_all()
    problems = notebook.problems(model)
    assert not problems, f"{path} in JupyterLab:\n" + "\n".join(problems)
