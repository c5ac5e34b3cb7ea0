"""The tour in JupyterLab with Graphviz's dot hidden from the server and its kernels: every DAG is
drawn as SVG by graphviz-pure (installed with tapekit), never shown as DOT text. This server has no
user settings of its own, so it also shows that JupyterLab as `make lab` leaves it asks nothing
about news."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from unittest import mock

import pytest

import lab_server
from lab_server import LabServer
from notebook_page import NotebookPage

pytestmark = pytest.mark.xdist_group("browser")

REPO = Path(__file__).parent.parent.parent
TUTORIAL = "notebooks/00_tour.ipynb"
# Only what the page reader needs: every cell in the DOM (no news setting: the venv's config decides).
SETTINGS = {"@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"}}


def path_without_dot(path: str, shadows: Path) -> str:
    """``path`` with each folder that holds ``dot`` replaced by a folder of links to all else in it."""
    folders = []
    for number, folder in enumerate(path.split(os.pathsep)):
        if (Path(folder) / "dot").exists():
            shadow = shadows / str(number)
            shadow.mkdir(parents=True)
            for entry in Path(folder).iterdir():
                if entry.name != "dot":
                    (shadow / entry.name).symlink_to(entry)
            folder = str(shadow)
        folders.append(folder)
    return os.pathsep.join(folders)


class LabWithoutDot(LabServer):
    """A LabServer whose PATH finds no ``dot`` and that writes no news settings."""

    def environment(self) -> dict[str, str]:
        env = super().environment()
        env["PATH"] = path_without_dot(env.get("PATH", ""), self.home / "path")
        return env

    def start(self) -> "LabWithoutDot":
        with mock.patch.dict(lab_server.LAB_SETTINGS, SETTINGS, clear=True):
            return super().start()


@pytest.fixture(scope="module")
def lab(chromium):
    """Overrides the suite's server for this module (the ``page`` fixture then uses this one)."""
    with LabWithoutDot({"notebooks": REPO / "notebooks"}) as server:
        yield server


def test_the_server_finds_no_dot_and_all_else_on_path():
    server = LabWithoutDot({})
    try:
        path = server.environment()["PATH"]
        assert shutil.which("dot", path=path) is None
        assert shutil.which("ls", path=path)  # all else is still found
    finally:
        server.stop()


def test_the_tour_draws_its_dag_as_svg_with_dot_hidden(page, lab):
    notebook = NotebookPage(page, lab, TUTORIAL).open()
    model = notebook.run_all()
    problems = notebook.problems(model)  # among them: a picture shown as DOT source instead of SVG
    assert not problems, f"{TUTORIAL} with dot hidden:\n" + "\n".join(problems)
    drawn = [out.data["image/svg+xml"] for cell in model.cells if cell.cell_type == "code"
             for out in cell.outputs if "image/svg+xml" in out.get("data", {})]
    assert drawn and all("(graphviz-pure)" in svg for svg in drawn)
    shown = sum(out["svgs"] for cell in notebook.rendered_cells() for out in cell["outputs"])
    assert shown >= len(drawn)
    asked = [t for t in page.locator(".Toastify__toast").all_inner_texts() if "news" in t.lower()]
    assert not asked, f"JupyterLab asks about news (make's QUIET_LAB step did not run in this venv): {asked}"
