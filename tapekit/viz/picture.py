"""``Picture``, the DOT graph every DAG of tapekit is, and `save`, which writes any picture
tapekit shows (a DAG, a plot, a widget's current view) to an SVG or PNG file.

Jupyter shows a ``Picture`` as SVG drawn by graphviz-pure (installed with tapekit) or Graphviz's
``dot`` (see `tapekit.viz.render`); without either it shows the DOT source and one line on what to
install. Nothing here ever runs a system ``dot`` that `tapekit.viz.render` did not choose.
"""

from __future__ import annotations

import base64
import html
import io
import os
import re
from pathlib import Path
from typing import Any, Iterable, Sequence

import graphviz

from ..errors import InvalidArgumentError
from . import render
from .render import GraphvizFailedError, GraphvizNotFoundError

_RENDER_ERRORS = (GraphvizNotFoundError, GraphvizFailedError)
FORMATS = ("svg", "png")
GAP_PT = 12.0  # between the pictures of a saved widget view
_ROOT = re.compile(r"<svg\b[^>]*>")
_NODE = re.compile(r"\t+(?!(?:graph|node|edge) )[^\s\[{}]+ \[")  # a node's line of DOT, not an edge's or defaults'


class Picture(graphviz.Digraph):
    """A picture tapekit builds as DOT text (``picture.source``), drawn by tapekit's own renderer.

    - In Jupyter it shows as SVG. Its display bundle also holds the same SVG as an HTML ``<img>``:
      JupyterLab shows that even in a notebook it does not trust (one just cloned or downloaded),
      where it leaves ``image/svg+xml`` out.
    - ``picture.save("dag.svg")`` or ``picture.save("dag.png")`` writes it to a file, by the suffix
      (`save`); `svg` and `png` give the drawing itself.
    - ``graphviz``'s ``pipe(format)`` and ``render(filename, format=...)`` draw with the same
      renderer, so no system ``dot`` is needed for them either.
    """

    def _repr_mimebundle_(self, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None,
                          **kwargs: Any) -> dict[str, Any]:
        try:
            document = render.svg(self.source)
        except _RENDER_ERRORS as err:
            return {"text/html": fallback_html(self.source, err), "text/plain": fallback_text(self.source, err)}
        return {"image/svg+xml": document, "text/html": img_html(document), "text/plain": repr(self)}

    def svg(self) -> str:
        """The picture as inline SVG markup, or the escaped DOT source after the line on what to do."""
        try:
            text = render.svg(self.source)
        except _RENDER_ERRORS as err:
            return fallback_html(self.source, err)
        return text[text.index("<svg"):]

    def png(self, dpi: float = render.PNG_DPI) -> bytes:
        """The picture as a PNG image at ``dpi`` (raises ``GraphvizNotFoundError`` with no renderer)."""
        return render.png(self.source, dpi)

    def save(self, path: str | os.PathLike[str]) -> Path:  # type: ignore[override]
        """Draw the picture into ``path``, an ``.svg`` or ``.png`` file (see `save`); the path written.
        (graphviz's own ``save`` wrote the DOT source whatever the suffix: that is ``picture.source``.)"""
        return save(self, path)

    def pipe(self, format: str | None = None, *, encoding: str | None = None) -> bytes | str:  # type: ignore[override]
        """The picture drawn as ``format`` (``"svg"`` unless given) by tapekit's renderer."""
        drawn = render.draw(self.source, format or "svg")
        return drawn.decode(encoding) if encoding else drawn

    def render(self, filename: str | None = None, directory: str | os.PathLike[str] | None = None,  # type: ignore[override]
               format: str = "svg") -> str:
        """Draw the picture into ``<directory>/<filename>.<format>`` (SVG or PNG), as graphviz names it;
        the path written. No DOT file is kept beside it."""
        folder = Path(directory if directory is not None else self.directory or "")
        return str(save(self, folder / f"{filename or self.filename}.{format}"))

    def __repr__(self) -> str:
        edges = sum(" -> " in line for line in self.body)
        nodes = sum(bool(_NODE.match(line)) and " -> " not in line for line in self.body)
        return (f"<{type(self).__name__}: {nodes} nodes, {edges} edges; Jupyter draws it, "
                f".save('name.svg') writes it to a file>")


def save(picture: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``picture`` to ``path`` as SVG or PNG, chosen by the suffix of ``path``; the path written.

    ``picture`` is what tapekit shows: a DAG (``tk.viz.dag``, or any ``Picture``), a plot (a
    matplotlib figure, such as ``tk.viz.plot_partition`` gives), DOT text, or rows of them,
    ``[[dag, plot], [plot]]``, laid out row under row as one picture (a widget's ``save`` passes the
    pictures it shows now). DAGs are drawn by tapekit's renderer, plots by matplotlib; a PNG is
    drawn at twice a screen's resolution. Nothing is written unless the whole picture was drawn.
    """
    path = Path(path)
    format = path.suffix.lower().lstrip(".")
    if format not in FORMATS:
        raise InvalidArgumentError(f"cannot save a picture as {path.name!r}: the file's suffix says what to draw, "
                                   f"and it is .svg or .png (for the DOT text, write picture.source)")
    rows = [[part for part in row if _drawn(part)] for row in _rows(picture)]
    rows = [row for row in rows if row]
    if not rows:
        raise InvalidArgumentError("there is no picture to save yet: run a step that makes a tensor first")
    drawn = [[_draw(part, format) for part in row] for row in rows]
    data = drawn[0][0] if len(drawn) == 1 and len(drawn[0]) == 1 else _compose(drawn, format)
    path.write_bytes(data)
    return path


def _rows(picture: Any) -> list[list[Any]]:
    """``picture`` as rows of pictures: one picture is one row of one."""
    if isinstance(picture, (list, tuple)):
        return [list(row) if isinstance(row, (list, tuple)) else [row] for row in picture]
    return [[picture]]


def _drawn(part: Any) -> bool:
    """Whether ``part`` holds a picture (a widget before its first tensor shows none)."""
    return part is not None and not (isinstance(part, str) and not part)


def _draw(part: Any, format: str) -> bytes:
    """One picture as SVG or PNG bytes."""
    if hasattr(part, "savefig"):  # a matplotlib figure
        buf = io.BytesIO()
        part.savefig(buf, format=format, dpi=render.PNG_DPI)
        return buf.getvalue()
    source = part if isinstance(part, str) else getattr(part, "source", None)
    if not isinstance(source, str):
        raise InvalidArgumentError(f"cannot save a {type(part).__name__}: save takes a DAG, a plot, DOT text, "
                                   f"or rows of them")
    return render.svg(source).encode("utf-8") if format == "svg" else render.png(source)


def _compose(rows: Sequence[Sequence[bytes]], format: str) -> bytes:
    return _compose_svg(rows) if format == "svg" else _compose_png(rows)


def _compose_svg(rows: Sequence[Sequence[bytes]]) -> bytes:
    """SVG documents side by side in rows, as one SVG document (sizes in points)."""
    parts, y, width = [], 0.0, 0.0
    for row in rows:
        x, height = 0.0, 0.0
        for document in row:
            text = document.decode("utf-8")
            w, h = _size_pt(text)
            parts.append(_placed(text, len(parts), x, y, w, h))
            x, height = x + w + GAP_PT, max(height, h)
        width, y = max(width, x - GAP_PT), y + height + GAP_PT
    height = y - GAP_PT
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" '
            f'xmlns:xlink="http://www.w3.org/1999/xlink" width="{width:g}pt" height="{height:g}pt" '
            f'viewBox="0 0 {width:g} {height:g}">\n<rect width="100%" height="100%" fill="white"/>\n'
            + "\n".join(parts) + "\n</svg>\n").encode("utf-8")


def _size_pt(document: str) -> tuple[float, float]:
    """The width and height an SVG document's root element asks for, in points."""
    root = _ROOT.search(document)[0]
    return tuple(_points(re.search(rf'\b{side}="([\d.]+)(pt|px)?"', root)) for side in ("width", "height"))


def _points(found: re.Match[str]) -> float:
    return float(found[1]) * (0.75 if found[2] == "px" else 1.0)


def _placed(document: str, number: int, x: float, y: float, width: float, height: float) -> str:
    """An SVG document's root element moved to ``(x, y)``, its ids made its own (two DAGs both
    have a ``node1``)."""
    body = document[document.index("<svg"):]
    body = re.sub(r'\bid="', f'id="p{number}-', body)
    body = re.sub(r'(href="#|url\(#)', rf'\g<1>p{number}-', body)
    root = _ROOT.search(body)[0]
    sized = re.sub(r'\s(width|height|x|y)="[^"]*"', "", root[:-1])
    return body.replace(root, f'{sized} x="{x:g}" y="{y:g}" width="{width:g}" height="{height:g}">', 1)


def _compose_png(rows: Sequence[Sequence[bytes]]) -> bytes:
    """PNG images side by side in rows, on white, as one PNG image."""
    from PIL import Image  # matplotlib's own dependency: here only to lay out a widget's pictures

    images = [[Image.open(io.BytesIO(data)).convert("RGBA") for data in row] for row in rows]
    gap = round(GAP_PT / 72 * render.PNG_DPI)
    width = max(sum(i.width for i in row) + gap * (len(row) - 1) for row in images)
    height = sum(max(i.height for i in row) for row in images) + gap * (len(images) - 1)
    canvas = Image.new("RGBA", (width, height), "white")
    y = 0
    for row in images:
        x = 0
        for image in row:
            canvas.alpha_composite(image, (x, y))
            x += image.width + gap
        y += max(i.height for i in row) + gap
    buf = io.BytesIO()
    canvas.convert("RGB").save(buf, format="png")
    return buf.getvalue()


def img_html(document: str, alt: str = "op DAG") -> str:
    """An SVG document as an HTML ``<img>`` of it, which every notebook viewer shows, trusted or not
    (JupyterLab, GitHub, nbviewer), at the size it was drawn: one wider than its container scrolls
    in its own box rather than shrinking its text below 10 pt, as an SVG output does in JupyterLab."""
    data = base64.b64encode(document.encode("utf-8")).decode("ascii")
    return (f'<div style="overflow-x:auto"><img src="data:image/svg+xml;base64,{data}" '
            f'alt="{html.escape(alt)}" style="max-width:none"/></div>')  # JupyterLab's CSS would shrink it


def _reason(err: Exception) -> str:
    """The one line shown above the DOT source."""
    return f"{err}; the DOT source follows."


def fallback_text(source: str, err: Exception) -> str:
    return f"{_reason(err)}\n{source}"


def fallback_html(source: str, err: Exception) -> str:
    return f"<p>{html.escape(_reason(err))}</p><pre>{html.escape(source)}</pre>"
