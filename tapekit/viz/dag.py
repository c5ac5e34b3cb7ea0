"""``tk.viz.dag``: the ops behind some tensors as a graph, coloured by the tape holding each record.

Tensors are record nodes ``name | shape | grad ✓/✗``, ops are small boxes, edges follow the data.
An op and its output take the colour of the tape that holds the op's record (grey and dashed once a
backward let it go); leaves are white, outlined in the colour of the tape of the first op that
reads them; the tensors drawn (outputs) are bold, with a thick outline in the colour of the tape
they carry; a missing gradient is red, and one the leaf set left out on purpose "not kept". Tensors
and tapes are named as `tapekit.ids` says, as every printout and picture names them; the legend
says all this in words, with swatches that hold no tensor name.
"""

from __future__ import annotations

import html
import re
import textwrap
from typing import Any, Iterable, Mapping

from ..history import plural
from .palette import CONSUMED, GONE_FILL, INK, MISSING, TapeLooks, lighten, text_on
from .picture import Picture
from .scene import OpView, Scene, TensorView, capture, tensors_given

FONT = "Helvetica"
LEGEND_WIDTH = 36  # characters to a line of the legend: the key is seldom wider than the DAG
# The root <svg> element Graphviz writes keeps its drawn size (text of 10 pt and more at 100% zoom),
# and a style lets it shrink, never grow, when it is shown inline in a narrower container (a widget
# column, nbviewer). JupyterLab shows an image/svg+xml output as an <img> of its drawn size, where
# the style does nothing: a DAG wider than the cell scrolls there rather than shrinking its text.
_SVG_ROOT = re.compile(r"<svg\b(?![^>]*\bstyle=)")
FIT = 'style="max-width:100%;height:auto"'


def fit(svg: str) -> str:
    """``svg`` (a document or inline markup) with its root element allowed to shrink to its container."""
    return _SVG_ROOT.sub(f"<svg {FIT}", svg, count=1)


class DagPicture(Picture):
    """The picture `dag` and `draw` make: a `Picture` whose SVG fits the width of its container."""

    def _repr_mimebundle_(self, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None,
                          **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(include, exclude, **kwargs)
        if "image/svg+xml" in bundle:
            bundle["image/svg+xml"] = fit(bundle["image/svg+xml"])
        return bundle

    def svg(self) -> str:
        return fit(super().svg())


def dag(*tensors: Any, grads: Any = None, names: Mapping[str, Any] | None = None) -> Picture:
    """The op DAG behind ``tensors`` as a ``graphviz.Digraph`` (SVG in Jupyter), its tapes named
    and coloured as a snapshot of the same tensors names them.

    ``grads``: a ``Gradients``; each tensor then shows ``grad ✓``, in red ``grad ✗``, or ``not kept``
    when the leaf set of the backward left it out.
    ``names``: a mapping such as ``locals()`` naming tensors that have no ``name=``.
    """
    return draw(capture(tensors_given(tensors, "tk.viz.dag"), grads, names))


def draw(scene: Scene) -> Picture:
    """The picture of a captured scene."""
    colours = scene.colours
    count = len(scene.tensors) + len(scene.ops)
    side = f"{max(12.0, 1.3 * count):g}"  # inches: room enough that dot need not shrink the text
    graph = DagPicture("tapekit", graph_attr={"rankdir": "TB", "size": f"{side},{side}", "fontname": FONT,
                                              "nodesep": "0.25", "ranksep": "0.35"},
                       node_attr={"fontname": FONT, "fontsize": "11"}, edge_attr={"arrowsize": "0.7"})
    ids = node_ids(scene)
    for tid, view in scene.tensors.items():
        graph.node(ids[tid], _tensor_label(view), **tensor_style(view, colours))
    for i, op in enumerate(scene.ops, 1):
        node = f"op{i}"
        colour = colours.colour(op.tape)
        graph.node(node, op.name, **op_style(op, colour))
        for tid in op.inputs:
            if tid is not None:
                graph.edge(ids[tid], node, color="#555555")
        graph.edge(node, ids[op.out], color=colour, penwidth="1.5")
    with graph.subgraph(name="key") as key:  # the key alone on the last rank: under the DAG
        key.attr(rank="sink")
        key.node("legend", _legend(scene, colours), shape="plaintext", fontsize="10", margin="0")
    return graph


def node_ids(scene: Scene) -> dict[int, str]:
    """The DOT node of each tensor (``n1``, ``n2``, ...: never shown, so never taken for a name)."""
    return {tid: f"n{i}" for i, tid in enumerate(scene.tensors, 1)}


def _escape(text: str) -> str:
    """Text safe inside a DOT record label."""
    for ch in "\\{}|<>\"":
        text = text.replace(ch, "\\" + ch)
    return text


def _shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _tensor_label(view: TensorView) -> str:
    fields = [_escape(view.name), _shape_text(view.shape)]
    mark = _grad_mark(view)
    if mark is not None:
        fields.append(mark)
    return "|".join(fields)


NOT_KEPT = "not kept"  # a gradient the leaf set left out on purpose: no mark of a missing one
NOT_KEPT_TEXT = "not kept: not in the leaf set, so the backward dropped its gradient"


def _grad_mark(view: TensorView) -> str | None:
    """``grad ✓``, ``grad ✗`` (missing) or ``not kept`` (left out by the leaf set); ``None``: no gradients given."""
    if view.grad is None:
        return None
    return "grad ✓" if view.grad else NOT_KEPT if view.not_kept else "grad ✗"


def tensor_style(view: TensorView, colours: TapeLooks) -> dict[str, str]:
    """How every picture draws a tensor: a leaf white, outlined in the colour of the tape of the
    first op that reads it (grey once that op's record is gone; no op yet: the tape it carries); a
    tensor an op made filled in its tape's colour and, when it is drawn as an output, bold with a
    thick outline in the colour of the tape it carries; a missing gradient red (not one the leaf set
    left out)."""
    red = {"fontcolor": MISSING} if view.grad is False and not view.not_kept else {}
    if view.leaf:
        tape = view.outline if view.outline is not None else view.carries
        outline = CONSUMED if view.reader_gone else INK if tape is None else colours.colour(tape)
        return {"shape": "record", "style": "filled", "fillcolor": "white", "penwidth": "1.5", "color": outline, **red}
    colour = colours.colour(view.made_on)
    style = {"shape": "record", "style": "filled", "fillcolor": lighten(colour), "color": colour, **red}
    if view.output:
        style.update(penwidth="3", fontname=f"{FONT}-Bold")
        if view.carries is not None:
            style["color"] = colours.colour(view.carries)
    return style


LET_GO = {"style": "rounded,filled,dashed", "fillcolor": GONE_FILL, "color": CONSUMED}  # no tape holds it


def op_style(op: OpView, colour: str) -> dict[str, str]:
    """How every picture draws an op: filled in the colour of its tape, grey and dashed once no tape holds it."""
    style = {"shape": "box", "style": "rounded,filled", "fillcolor": colour, "color": colour, "fontsize": "10",
             "height": "0.25", "margin": "0.06,0.03", "fontcolor": text_on(colour)}
    if op.tape is None:
        style.update(LET_GO)
    return style


def fate_text(op: OpView, scene: Scene) -> str:
    """Why no tape holds an op's record, in the words every picture uses."""
    if op.fate == "dropped":
        return "grey, dashed: dropped with its tape (no tensor held it)"
    drained = [t for t in scene.tapes.values() if f"drained by {op.by}," in t.state]
    if op.fate == "drained" and drained:
        names = " and ".join(f"tape {t.look.name}" for t in drained)
        return f"grey, dashed: run by {op.by} and let go; it drained {names}, which records again"
    if op.fate == "consumed":
        return f"grey, dashed: run by {op.by} and let go; it consumed the OwnedTape, which cannot record"
    return f"grey, dashed: run by {op.by} and let go"


def tape_text(tape: Any) -> str:
    """``tape A: ArcTape, 2 records`` and, a line each, what merges and backwards did to it
    (``absorbed B``): a tape's entry in every legend."""
    lines = [f"tape {tape.look.name}: {tape.policy}, {plural(tape.records, 'record')}"]
    return "\n".join(lines + [part for part in tape.state.split("; ") if part])


def _legend(scene: Scene, colours: TapeLooks) -> str:
    """A small key under the picture (an HTML-like label): a swatch per tape, then only the marks
    the picture uses, each in words, on swatches that hold no tensor name."""
    rows = [_row(_cell('<B>legend</B>: colour = the tape<BR/>holding the op\'s record', span=2))]
    for birth in colours.sorted(scene.tapes):
        rows.append(_row(_swatch(colours.colour(birth)), _text(tape_text(scene.tapes[birth]))))
    for text in dict.fromkeys(fate_text(op, scene) for op in scene.ops if op.tape is None):
        rows.append(_row(_swatch(GONE_FILL), _text(text)))
    rows += [_row(_swatch("white"), _text(text)) for text in marks(scene)]
    marked = {_grad_mark(v) for v in scene.tensors.values()}  # only the marks the picture uses
    if "grad ✓" in marked:
        rows.append(_row(_swatch("white", "✓"), _text("grad ✓: has a gradient")))
    if NOT_KEPT in marked:
        rows.append(_row(_swatch("white"), _text(NOT_KEPT_TEXT)))
    if "grad ✗" in marked:
        rows.append(_row(_swatch("white", f'<FONT COLOR="{MISSING}">✗</FONT>'),
                         _text("grad ✗: gradient missing", ink=MISSING)))
    return f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="2" CELLPADDING="1">{"".join(rows)}</TABLE>>'


def marks(scene: Scene) -> list[str]:
    """The words for the tensor styles the scene uses, the same in every picture."""
    views = scene.tensors.values()
    words = []
    if any(v.leaf for v in views):
        gone = "; grey: that op's record is gone" if any(v.leaf and v.reader_gone for v in views) else ""
        words.append("white: a leaf (no op made it), outlined in the colour of the tape of the first op "
                     f"reading it (none yet: the tape it carries{gone})")
    if any(not v.leaf for v in views):
        words.append("filled: made by an op, in its tape's colour")
    if any(v.output and not v.leaf for v in views):
        words.append("bold, thick outline: a tensor drawn here, outlined in the colour of the tape it carries")
    return words


def _row(*cells: str) -> str:
    return f"<TR>{''.join(cells)}</TR>"


def _cell(content: str, span: int = 1) -> str:
    columns = f' COLSPAN="{span}"' if span > 1 else ""
    return f'<TD ALIGN="LEFT" BALIGN="LEFT"{columns}>{content}</TD>'


def _swatch(fill: str, sample: str = "") -> str:
    """A small square of ``fill`` holding ``sample`` (HTML: a glyph, never a tensor name)."""
    return (f'<TD BGCOLOR="{fill}" BORDER="1" COLOR="{INK}" WIDTH="16" HEIGHT="14" FIXEDSIZE="TRUE">'
            f'{sample}</TD>')


def wrapped(text: str, width: int = LEGEND_WIDTH) -> str:
    """``text`` for an HTML-like label, escaped, its lines (split at ``\\n``) wrapped at ``width`` characters."""
    return "<BR/>".join(html.escape(part) for line in text.split("\n") for part in textwrap.wrap(line, width))


def _text(text: str, ink: str | None = None) -> str:
    """An explanation cell, in ``ink`` if given: its lines wrapped to a narrow key."""
    lines = wrapped(text)
    return _cell(lines if ink is None else f'<FONT COLOR="{ink}">{lines}</FONT>')
