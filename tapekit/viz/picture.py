"""``Picture``: a ``graphviz.Digraph`` that never shows a traceback. Jupyter displays it as SVG,
drawn by graphviz-pure (installed with tapekit) or Graphviz's ``dot`` (see `tapekit.viz.render`);
without either it shows the DOT source and one line on what to install."""

from __future__ import annotations

import html
from typing import Any, Iterable

import graphviz

from . import render
from .render import GraphvizFailedError, GraphvizNotFoundError

_RENDER_ERRORS = (GraphvizNotFoundError, GraphvizFailedError)


class Picture(graphviz.Digraph):
    """A DOT graph built by tapekit. ``str(picture)`` / ``picture.source`` is the DOT text.

    Jupyter shows it as SVG and `svg()` gives that SVG inline, both drawn by `tapekit.viz.render`;
    the ``graphviz`` package's own ``pipe()`` and ``render()`` still need Graphviz's ``dot``.
    """

    def _repr_mimebundle_(self, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None,
                          **kwargs: Any) -> dict[str, Any]:
        try:
            return {"image/svg+xml": render.svg(self.source)}
        except _RENDER_ERRORS as err:
            return {"text/html": fallback_html(self.source, err), "text/plain": fallback_text(self.source, err)}

    def svg(self) -> str:
        """The picture as inline SVG markup, or the escaped DOT source after the line on what to do."""
        try:
            text = render.svg(self.source)
        except _RENDER_ERRORS as err:
            return fallback_html(self.source, err)
        return text[text.index("<svg"):]


def _reason(err: Exception) -> str:
    """The one line shown above the DOT source."""
    return f"{err}; the DOT source follows."


def fallback_text(source: str, err: Exception) -> str:
    return f"{_reason(err)}\n{source}"


def fallback_html(source: str, err: Exception) -> str:
    return f"<p>{html.escape(_reason(err))}</p><pre>{html.escape(source)}</pre>"
