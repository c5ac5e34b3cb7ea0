"""``Picture``: a ``graphviz.Digraph`` that never shows a traceback. Jupyter displays it as SVG;
without Graphviz's ``dot`` it shows the DOT source and one line on how to install Graphviz."""

from __future__ import annotations

import html
from typing import Any, Iterable

import graphviz

INSTALL_HINT = ("install Graphviz (apt-get install graphviz, brew install graphviz or conda install graphviz) "
                "to see the picture")
_RENDER_ERRORS = (graphviz.ExecutableNotFound, graphviz.CalledProcessError)


class Picture(graphviz.Digraph):
    """A DOT graph built by tapekit. ``str(picture)`` / ``picture.source`` is the DOT text."""

    def _repr_mimebundle_(self, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None,
                          **kwargs: Any) -> dict[str, Any]:
        try:
            return super()._repr_mimebundle_(include, exclude, **kwargs)
        except _RENDER_ERRORS as err:
            return {"text/html": fallback_html(self.source, err), "text/plain": fallback_text(self.source, err)}

    def svg(self) -> str:
        """The picture as inline SVG markup, or the escaped DOT source with the install line."""
        try:
            text = self.pipe(format="svg", encoding="utf-8")
        except _RENDER_ERRORS as err:
            return fallback_html(self.source, err)
        return text[text.index("<svg"):]


def _reason(err: Exception) -> str:
    if isinstance(err, graphviz.ExecutableNotFound):
        return f"Graphviz's dot program was not found: {INSTALL_HINT}."
    return f"Graphviz's dot could not draw this graph ({type(err).__name__}); the DOT source follows."


def fallback_text(source: str, err: Exception) -> str:
    return f"{_reason(err)}\n{source}"


def fallback_html(source: str, err: Exception) -> str:
    return f"<p>{html.escape(_reason(err))}</p><pre>{html.escape(source)}</pre>"
