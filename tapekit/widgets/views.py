"""What the widgets show of one moment of a replay: its DAG as SVG and its partition as a PNG,
frozen when taken so that later lines of the program cannot change them."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..viz.dag import NOT_KEPT, draw
from ..viz.partition import Snapshot, _snapshot, plot_partition, png
from ..viz.scene import Scene, capture, left_out
from .replay import Moment

if TYPE_CHECKING:
    from matplotlib.figure import Figure

NOTHING_YET = "<p><i>no tensors yet: step further to see the ops</i></p>"
SHRINK = "max-width:100%;height:auto"  # a picture narrows to fit its column, never grows
# Theme colours where JupyterLab defines them (readable in its light and dark themes), else these.
ERROR_INK = "var(--jp-error-color1, #D00000)"
WARN_INK = "var(--jp-warn-color0, #a06000)"


@dataclass(frozen=True)
class View:
    """A moment's scene (for the DAG) and snapshot (for the plot); both ``None`` before any tensor."""

    scene: Scene | None
    snapshot: Snapshot | None
    EMPTY: ClassVar["View"]  # before any tensor

    @classmethod
    def of(cls, moment: Moment, label: str, grads: Any = None) -> "View":
        outputs = moment.outputs()
        if not outputs:
            return cls.EMPTY
        scene = capture(outputs, grads, moment.tensors)
        return cls(scene, _snapshot(outputs, scene, label))

    def render(self) -> tuple[str, str]:
        """The DAG's DOT source and its SVG, from one drawing (``""`` and a note before any tensor)."""
        if self.scene is None:
            return "", NOTHING_YET
        picture = draw(self.scene)
        return picture.source, picture.svg()


View.EMPTY = View(None, None)


def figure_of(views: list[View]) -> "Figure | None":
    snaps = [v.snapshot for v in views if v.snapshot is not None]
    return plot_partition(*snaps) if snaps else None


def figure_html(fig: "Figure | None") -> str:
    """The figure as an inline PNG ``<img>`` (empty before any tensor)."""
    if fig is None:
        return ""
    data = base64.b64encode(png(fig)).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="partition plot" style="{SHRINK}"/>'


def svg_img(svg: str) -> str:
    """A picture's inline SVG as an ``<img>`` of an SVG document, which viewers that strip inline
    SVG from HTML (GitHub's notebook view, sanitizers) still show; other HTML (a note before any
    tensor, the DOT source without Graphviz) is kept as it is."""
    if not svg.startswith("<svg"):
        return svg
    if "xmlns=" not in svg[:svg.index(">")]:
        svg = svg.replace("<svg", '<svg xmlns="http://www.w3.org/2000/svg"', 1)
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f'<img src="data:image/svg+xml;base64,{data}" alt="op DAG" style="{SHRINK}"/>'


def row(*parts: str) -> str:
    """HTML parts side by side while the width allows, each wrapped under the last when it does not."""
    cells = "".join(f'<div style="max-width:100%;min-width:0">{p}</div>' for p in parts)
    return f'<div style="display:flex;flex-wrap:wrap;gap:8px 16px;align-items:flex-start">{cells}</div>'


def static_html(title: str, *parts: str) -> str:
    """What a notebook read without running (GitHub, nbviewer without widgets) shows of a widget:
    its ``title`` line and its pictures as they were when the notebook was saved."""
    head = (f"<p><b>{html.escape(title)}</b> <i>(a saved picture: run the notebook to move the slider, "
            f"change the policy and run backward)</i></p>")
    return f'<div class="tapekit-static" style="max-width:100%;overflow:hidden">{head}{"".join(parts)}</div>'


def code_html(moment: Moment, steps: int) -> str:
    """The step, its line of code, and what the program raised or warned, as HTML."""
    parts = [f"<b>step {moment.step} of {steps}</b>: <code>{html.escape(moment.line)}</code>"]
    parts += [f'<div style="color:{ERROR_INK}">{html.escape(moment.error)}</div>'] if moment.error else []
    parts += [f'<div style="color:{WARN_INK}">warning: {html.escape(w)}</div>' for w in moment.warnings]
    return "".join(parts)


def pre(text: str) -> str:
    return f'<pre style="white-space:pre-wrap">{html.escape(text)}</pre>'


def no_gradient_line(grads: Any, tid: int) -> str:
    """A listing's line for a tensor without a gradient: ``✗`` and why, or ``not kept`` where the
    leaf set left it out on purpose, as the pictures mark the two."""
    return f"  {NOT_KEPT + ':' if left_out(grads, tid) else '✗'} {grads.why_missing(tid, recorded=True)}"
