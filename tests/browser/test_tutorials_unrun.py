"""Every tutorial reads well before anyone runs it: opened in JupyterLab without running a cell (so
untrusted, as a cloned or downloaded notebook is, where JupyterLab leaves ``image/svg+xml`` out),
each committed picture is drawn (no ``<tapekit... at 0x...>`` in its place), and the notebook is not
marked changed: JupyterLab would save it as it is."""

from __future__ import annotations

import json
import platform
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from notebook_page import WIDGET_VIEW, NotebookPage

pytestmark = pytest.mark.xdist_group("browser")

REPO = Path(__file__).parent.parent.parent
TUTORIALS = sorted(f"notebooks/{path.name}" for path in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SETTLE_S = 2.0  # after the kernel is idle: JupyterLab writes the kernel's metadata then

# Per output of each cell's own output area: how many pictures it draws (an <img> that loaded, or
# inline SVG) and its text.
OUTPUTS_JS = """() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].map(cell => {
    const area = cell.querySelector('.jp-Cell-outputArea');
    const children = area ? [...area.children].filter(c => c.classList.contains('jp-OutputArea-child')) : [];
    return children.map(child => ({
        drawn: [...child.querySelectorAll('img')].filter(i => i.complete && i.naturalWidth > 0).length
               + [...child.querySelectorAll('svg')].filter(s => !s.parentElement.closest('svg')).length,
        text: child.innerText,
    }));
})"""

DIRTY_JS = "() => [...document.querySelectorAll('.lm-TabBar-tab.jp-mod-dirty')].map(t => t.innerText)"


def pictures_in(output: nbformat.NotebookNode) -> bool:
    """Whether a committed output holds a picture: SVG, PNG, or HTML with an image (a widget's static view)."""
    data = output.get("data", {})
    return "image/svg+xml" in data or "image/png" in data or "<img" in data.get("text/html", "")


def as_this_kernel_reports(path: Path) -> None:
    """The served copy's Python version set to this kernel's: JupyterLab writes the running kernel's
    version into ``language_info`` on open, so a notebook made on another Python is marked changed
    by that field alone, which nothing in the file can prevent (tools/run_notebooks.py writes the
    version of the Python that ran it)."""
    nb = json.loads(path.read_text())
    nb["metadata"]["language_info"]["version"] = platform.python_version()
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def test_there_are_tutorials():
    assert TUTORIALS, "no notebooks/[0-9][0-9]_*.ipynb to open"


@pytest.mark.parametrize("path", TUTORIALS)
def test_a_tutorial_opened_unrun_draws_its_pictures_and_is_unchanged(page, lab, path):
    served = lab.root / path
    shutil.copyfile(REPO / path, served)  # as committed: another test may have run and saved the served copy
    as_this_kernel_reports(served)
    committed = nbformat.read(served, as_version=4)
    notebook = NotebookPage(page, lab, path).open()
    time.sleep(SETTLE_S)
    problems = []
    for number, (cell, shown) in enumerate(zip(committed.cells, page.evaluate(OUTPUTS_JS)), 1):
        outputs = cell.get("outputs", [])
        if len(shown) != len(outputs):
            problems.append(f"cell {number}: the page shows {len(shown)} outputs, the notebook holds {len(outputs)}")
            continue
        for out, view in zip(outputs, shown):
            if pictures_in(out) and not view["drawn"]:
                problems.append(f"cell {number}: a committed picture is not drawn; the page shows {view['text'][:120]!r}")
            if WIDGET_VIEW in out.get("data", {}) and "text/html" not in out["data"]:
                problems.append(f"cell {number}: a widget has no static view; the page shows {view['text'][:120]!r}")
            if " object at 0x" in view["text"] or "<tapekit." in view["text"]:
                problems.append(f"cell {number}: shows a bare repr: {view['text'][:120]!r}")
    assert not problems, f"{path} opened without running it:\n" + "\n".join(problems)
    assert page.evaluate(DIRTY_JS) == [], f"{path} is marked changed, though nothing was run or edited"
    saved = notebook.save()
    assert saved == committed, f"JupyterLab would save {path} differently from the committed file"
