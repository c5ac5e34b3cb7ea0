"""A tutorial in JupyterLab's dark theme: it runs and renders, fits a 1280 px window as in the light
theme, every text in its outputs reads on what is behind it (contrast of 4.5:1 at least) and every
picture brings its own light background (a DAG on its white card, an opaque PNG), so its dark lines
and labels stay readable. The tutorial shows both widgets, DAGs and partition plots."""

from __future__ import annotations

import json
import urllib.request

import pytest

from notebook_page import NotebookPage, fit_problems, readability_problems

pytestmark = pytest.mark.xdist_group("browser")

TUTORIAL = "notebooks/04_partition_problem.ipynb"
THEMES = "lab/api/settings/@jupyterlab/apputils-extension:themes"


def set_theme(lab, theme: str) -> None:
    """Choose JupyterLab's theme in the server's user settings (a page opened afterwards uses it)."""
    body = json.dumps({"raw": json.dumps({"theme": theme})}).encode()
    request = urllib.request.Request(lab.url(THEMES), data=body, method="PUT",
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=30).close()


@pytest.fixture
def dark(lab):
    set_theme(lab, "JupyterLab Dark")
    try:
        yield
    finally:
        set_theme(lab, "JupyterLab Light")  # the other tests see the default theme


def test_a_tutorial_reads_in_the_dark_theme(dark, page, lab):
    notebook = NotebookPage(page, lab, TUTORIAL).open()
    assert page.get_attribute("body", "data-jp-theme-light") == "false", "the dark theme is not on"
    model = notebook.run_all()
    problems = notebook.problems(model) + fit_problems(page) + readability_problems(page)
    assert not problems, f"{TUTORIAL} in the dark theme:\n" + "\n".join(problems)
    assert page.locator(".jp-Cell-outputArea .widget-html svg").count() >= 3  # the widgets' DAGs were checked
