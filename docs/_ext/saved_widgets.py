"""How the site reads a tutorial: each widget shows the static view saved beside it.

tapekit's widgets save a static HTML view (their pictures and state) next to the live view, and
the site prefers it (``nb_mime_priority_overrides`` in conf.py): a live view needs a kernel.
ipywidgets' own progress bar saves no static view; it gets one here, drawn from the widget state
the notebook saved, instead of its ``IntProgress(value=0, ...)`` text. The saved widget state
itself stays out of the page: nothing on the site could draw from it.
"""

from __future__ import annotations

from html import escape

import nbformat

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PROGRESS_MODELS = ("IntProgressModel", "FloatProgressModel")


def progress_view(model: dict) -> str | None:
    """A saved progress bar as HTML, or ``None`` for any other widget."""
    if model.get("model_name") not in PROGRESS_MODELS:
        return None
    state = model["state"]
    value, top = state.get("value", 0), state.get("max", 100)
    label = escape(state.get("description", ""))
    return (f'<div class="tapekit-progress">{label} <progress value="{value}" max="{top}"></progress> '
            f"{value} of {top}</div>")


def read_notebook(text: str) -> nbformat.NotebookNode:
    """The notebook, with a static view added to each saved progress bar that has none, and
    without its saved widget state."""
    notebook = nbformat.reads(text, as_version=4)
    saved = notebook.metadata.pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data and "text/html" not in data:
                view = progress_view(saved.get(data[WIDGET_VIEW]["model_id"], {}))
                if view is not None:
                    data["text/html"] = view
    return notebook
