"""What the widgets show of one moment of a replay: its DAG as SVG and its partition as a PNG,
frozen when taken so that later lines of the program cannot change them."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..viz.dag import draw
from ..viz.palette import TapeColours
from ..viz.partition import Snapshot, _snapshot, plot_partition, png
from ..viz.scene import Scene, capture
from .replay import Moment

if TYPE_CHECKING:
    from matplotlib.figure import Figure

NOTHING_YET = "<p><i>no tensors yet: step further to see the ops</i></p>"


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

    def render(self, colours: TapeColours) -> tuple[str, str]:
        """The DAG's DOT source and its SVG, from one drawing (``""`` and a note before any tensor)."""
        if self.scene is None:
            return "", NOTHING_YET
        picture = draw(self.scene, colours)
        return picture.source, picture.svg()


View.EMPTY = View(None, None)


def figure_of(views: list[View], colours: TapeColours) -> "Figure | None":
    snaps = [v.snapshot for v in views if v.snapshot is not None]
    return plot_partition(*snaps, colours=colours) if snaps else None


def figure_html(fig: "Figure | None") -> str:
    """The figure as an inline PNG ``<img>`` (empty before any tensor)."""
    if fig is None:
        return ""
    data = base64.b64encode(png(fig)).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="partition plot"/>'


def code_html(moment: Moment, steps: int) -> str:
    """The step, its line of code, and what the program raised or warned, as HTML."""
    parts = [f"<b>step {moment.step} of {steps}</b>: <code>{html.escape(moment.line)}</code>"]
    parts += [f'<div style="color:#D00000">{html.escape(moment.error)}</div>'] if moment.error else []
    parts += [f'<div style="color:#a06000">warning: {html.escape(w)}</div>' for w in moment.warnings]
    return "".join(parts)


def pre(text: str) -> str:
    return f'<pre style="white-space:pre-wrap">{html.escape(text)}</pre>'
