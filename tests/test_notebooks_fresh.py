"""The committed tutorials carry outputs made from their current code, run top to bottom in one go.

nbval (``pytest --nbval notebooks``) checks that the outputs are still what the code produces; this
file checks that they were produced by the code as it reads now: every code cell's source hash
matches the stamp ``tools/run_notebooks.py`` wrote when it ran the notebook.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["00_tour", "01_tensors_and_tapes", "02_watch_backward_run", "03_owned_tape", "04_partition_problem",
         "05_the_fixes", "06_modules", "07_train_an_mlp", "08_gpu", "09_check_your_understanding",
         "10_from_tape_to_program", "11_forward_reverse_twice"]
PICTURES = {"image/png", "image/svg+xml", "image/jpeg", "application/vnd.jupyter.widget-view+json"}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def _runner():
    spec = importlib.util.spec_from_file_location("run_notebooks", ROOT / "tools" / "run_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


runner = _runner()


def _code_cells(name: str) -> tuple[nbformat.NotebookNode, list]:
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    return nb, [c for c in nb.cells if c.cell_type == "code"]


def test_the_numbered_notebooks_are_the_ones_the_readme_links():
    assert [p.stem for p in runner.numbered_notebooks()] == NAMES


def stale(cells: list) -> list[int]:
    """The numbers (from 1) of the code cells whose source differs from the one that made their outputs."""
    return [i for i, c in enumerate(cells, 1)
            if c.metadata.get(runner.STAMP, {}).get("source_sha") != runner.source_sha(c.source)]


@pytest.mark.parametrize("name", NAMES)
def test_every_code_cell_ran_from_its_current_source(name):
    _, cells = _code_cells(name)
    assert not stale(cells), (f"{name}: code cells {stale(cells)} changed since their outputs were made; "
                       f"run .venv/bin/python tools/run_notebooks.py notebooks/{name}.ipynb")


@pytest.mark.parametrize("name", NAMES)
def test_cells_ran_top_to_bottom_in_one_go(name):
    _, cells = _code_cells(name)
    counts = [c.execution_count for c in cells]
    assert counts == list(range(1, len(cells) + 1)), f"{name}: execution counts {counts} are not 1..{len(cells)}"


@pytest.mark.parametrize("name", NAMES)
def test_outputs_are_committed(name):
    _, cells = _code_cells(name)
    assert any(c.outputs for c in cells), f"{name} was saved without outputs"
    errors = [i for i, c in enumerate(cells, 1) if any(o.output_type == "error" for o in c.outputs)]
    assert not errors, f"{name}: code cells {errors} raised when the notebook ran"


@pytest.mark.parametrize("name", NAMES)
def test_pictures_and_widgets_are_left_out_of_the_comparison(name):
    _, cells = _code_cells(name)
    untagged = [i for i, c in enumerate(cells, 1)
                if any(PICTURES & set(o.get("data", {})) for o in c.outputs)
                and "nbval-ignore-output" not in c.metadata.get("tags", [])]
    assert not untagged, f"{name}: code cells {untagged} show a picture or widget but are not tagged nbval-ignore-output"


@pytest.mark.parametrize("name", NAMES)
def test_widgets_keep_their_state_so_they_render_on_open(name):
    nb, cells = _code_cells(name)
    shown = {o.data[WIDGET_VIEW]["model_id"] for c in cells for o in c.outputs if WIDGET_VIEW in o.get("data", {})}
    saved = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    assert shown <= set(saved), f"{name}: widget views {sorted(shown - set(saved))} have no saved state"


@pytest.mark.parametrize("edit", [lambda s: s + "\n", lambda s: s.replace("(", "( ", 1), lambda s: ""])
def test_an_edited_cell_is_caught(edit):
    _, cells = _code_cells(NAMES[1])
    assert not stale(cells)
    cells[1].source = edit(cells[1].source)
    assert stale(cells) == [2]
