"""How the records of a program are split across tapes at one moment (``snapshot``), and a plot of
one or more such moments side by side (``plot_partition``), in the DAG's tape colours."""

from __future__ import annotations

import functools
import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..errors import InvalidArgumentError
from ..history import coverage, home_of, live_store, plural
from ..inspect import tapes as live_tapes
from .palette import CONSUMED, GONE_FILL, TapeLook, TapeLooks, look_of
from .render import checked_dpi
from .scene import Scene, capture, tensors_given

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class TapeShare:
    """One live tape at the moment of a snapshot: its name and colour (``look``), its class
    (``policy``), what it holds, and what merges and backwards did to it (``state``)."""

    birth: int
    look: TapeLook
    policy: str
    records: int
    grad_entries: int
    nbytes: int
    state: str = ""


@dataclass(frozen=True)
class OutputShare:
    """Where one output's history lives, and how much of it the tape the output holds can see.

    ``split`` maps the birth of each tape holding records of the history (``None``: no tape any
    more) to how many it holds; ``leaves`` counts the history's leaves (those of the leaf set of the
    tape the output holds, if it has one); ``reachable`` those whose whole gradient a backward on
    the output alone would produce (not those it would miss, nor those it would get only in part);
    ``dropped`` counts the records no tape holds that no backward let go: they were dropped with
    their tape (no tensor held it)."""

    name: str
    carries: int | None
    split: dict[int | None, int]
    leaves: int
    reachable: int
    dropped: int = 0

    @property
    def let_go(self) -> int:
        """The records no tape holds because a backward let them go."""
        return self.split.get(None, 0) - self.dropped

    @property
    def records(self) -> int:
        return sum(self.split.values())

    @property
    def own_records(self) -> int:
        return 0 if self.carries is None else self.split.get(self.carries, 0)

    @property
    def record_share(self) -> float | None:
        """The part of the history on the output's own tape (``None``: no history)."""
        return self.own_records / self.records if self.records else None

    @property
    def leaf_share(self) -> float | None:
        """The part of the history's leaves whose whole gradient the output's tape reaches."""
        return self.reachable / self.leaves if self.leaves else None

    def summary(self, colours: TapeLooks, sep: str = ": ") -> str:
        """``z (holds tape A): its backward sees 1/2 records, 1/2 leaves``."""
        where = "no live tape" if self.carries is None else colours.name(self.carries)
        if not self.records:
            return f"{self.name}'s history (holds {where}){sep}no ops yet"
        return (f"{self.name}'s history (holds {where}){sep}its backward sees {self.own_records}/{self.records} "
                f"records, {self.reachable}/{self.leaves} leaves")


@dataclass(frozen=True)
class Snapshot:
    """The live tapes behind some tensors, and each tensor's share of its history, at one moment."""

    label: str
    tapes: tuple[TapeShare, ...]
    outputs: tuple[OutputShare, ...]

    @property
    def colours(self) -> TapeLooks:
        """The name and colour of each tape, as `tapekit.ids` gave them."""
        return TapeLooks({t.birth: t.look for t in self.tapes})

    def __str__(self) -> str:
        colours = self.colours
        lines = [f"{self.label}:"]
        lines += [f"  {colours.name(t.birth)} ({t.policy}{'; ' + t.state if t.state else ''}): "
                  f"{plural(t.records, 'record')}, {plural(t.grad_entries, 'gradient entry', 'gradient entries')}, "
                  f"{t.nbytes:,} bytes" for t in self.tapes]
        lines += ["  " + out.summary(colours) for out in self.outputs]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def snapshot(*tensors: Any, label: str = "snapshot", names: Mapping[str, Any] | None = None) -> Snapshot:
    """Freeze, now, each live tape behind ``tensors`` (records, gradient entries, bytes) and, for
    each tensor, the share of its history that lives on the tape it holds.

    ``names`` (e.g. ``locals()``) names tensors the way ``tk.viz.dag`` does.
    """
    tensors = tensors_given(tensors, "tk.viz.snapshot")
    return _snapshot(tensors, capture(tensors, names=names), label)


def _snapshot(tensors: Sequence[Any], scene: Scene, label: str) -> Snapshot:
    """The snapshot of ``tensors``, named as in ``scene`` (a scene captured of them just now)."""
    shares = tuple(TapeShare(info.tape._born, look_of(info.tape), type(info.tape).__name__, info.records,
                             info.grad_entries, info.nbytes, info.state)
                   for info in live_tapes(*tensors))
    return Snapshot(label, tuple(sorted(shares, key=lambda t: t.look.order)),
                    tuple(_output_share(t, scene) for t in tensors))


def _output_share(tensor: Any, scene: Scene) -> OutputShare:
    """Where ``tensor``'s history lives now, and what a backward on it alone would see (the
    records dropped with their tape counted as ``scene`` tells each record's fate)."""
    store = live_store(tensor)
    cov = coverage([tensor], set() if store is None else {store})
    records = cov.records
    split: dict[int | None, int] = {}
    for rec in records:
        home = home_of(rec)
        key = None if home is None else home._born
        split[key] = split.get(key, 0) + 1
    made = {rec.out for rec in records}
    dropped = sum(op.out in made and op.fate == "dropped" for op in scene.ops)
    leaves = {tid for rec in records for tid in rec.inputs if tid is not None and tid not in made}
    if store is not None and store.leaves is not None:  # its backward keeps only the leaf set's gradients
        leaves &= store.leaves
    return OutputShare(scene.name(tensor.id), None if store is None else store._born, split, len(leaves),
                       len(leaves - cov.missed.keys() - cov.incomplete), dropped)


# Sizes, in inches and points. Figures are shown at 96 dpi, where a matplotlib point is a CSS point:
# text drawn at 10 pt reads as 10 pt at 100% zoom. Two panels to a row at most, so the widest figure
# (8.4 in, 806 px) fits a notebook cell of a 1280 px wide JupyterLab with its left sidebar open.
DPI = 96
COLUMNS = 2
PANEL_IN = 4.2
ROW_IN = 0.72
TEXT_PT = 10
TITLE_PT = 11
HEADING_PT = 12
LETTER_PT = 0.6 * TEXT_PT  # about the width of a letter of DejaVu Sans


def plot_partition(*snapshots: Snapshot) -> "Figure":
    """One panel per snapshot, two to a row: a bar per tape (its records, in its DAG colour) and,
    for each output, where the records of its history live and how much its own tape sees. Each
    panel names the tapes as its snapshot prints them."""
    from matplotlib.ticker import MaxNLocator

    if not snapshots or not all(isinstance(s, Snapshot) for s in snapshots):
        raise InvalidArgumentError("tk.viz.plot_partition takes snapshots: tk.viz.snapshot(z, zz, label='after')")
    columns = min(len(snapshots), COLUMNS)
    lines = -(-len(snapshots) // columns)
    rows = max(len(s.tapes) + len(s.outputs) for s in snapshots)
    width = PANEL_IN * columns + (0.4 if columns == 1 else 0.0)
    fig = _figure_class()(figsize=(width, lines * (1.0 + ROW_IN * rows) + 0.9), layout="constrained")
    axes = fig.subplots(lines, columns, squeeze=False).ravel()
    for ax, snap in zip(axes, snapshots):
        _panel(ax, snap)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes[len(snapshots):]:
        fig.delaxes(ax)  # an odd number of panels leaves the last row's second place empty
    handles = _legend_handles(snapshots)
    if handles:
        widest = max(len(h.get_label()) for h in handles) * LETTER_PT + 3 * TEXT_PT  # points, swatch included
        fits = max(1, int(width * 72 * 0.95 // widest))
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), fits), frameon=False,
                   fontsize=TEXT_PT)
    title = "Records per tape, and where each output's history lives"
    fig.suptitle(title.replace(" and ", "\nand ", 1) if columns == 1 else title, fontsize=HEADING_PT)
    return fig


def _legend_handles(snapshots: Sequence[Snapshot]) -> list:
    """One swatch per tape of the snapshots, in the order of its first letter, then the marks they use."""
    from matplotlib.patches import Patch

    looks = {t.look.name: t.look for s in snapshots for t in s.tapes}
    handles = [Patch(color=look.colour, label=f"tape {look.name}") for look in sorted(looks.values(),
                                                                                   key=lambda k: k.order)]
    gone = _gone_text([o for s in snapshots for o in s.outputs])
    if gone:
        handles.append(Patch(facecolor=GONE_FILL, edgecolor=CONSUMED, linestyle="--", label=gone))
    if any(set(o.split) - {o.carries, None} for s in snapshots for o in s.outputs):  # None: no tape, dashed
        handles.append(Patch(facecolor="white", edgecolor="#555555", hatch="//",
                             label="history on a tape the output does not hold"))
    return handles


def _share_style(birth: int | None, carries: int | None, colours: TapeLooks) -> dict[str, Any]:
    """An output's share of its history on one tape: in that tape's colour, hatched where the output
    does not hold the tape; grey and dashed where no tape holds it any more, as the DAG draws it."""
    if birth is None:
        return {"facecolor": GONE_FILL, "edgecolor": CONSUMED, "linestyle": "--", "linewidth": 1.2}
    return {"color": colours.colour(birth), "hatch": "" if birth == carries else "//", "edgecolor": "white"}


def _gone_text(outputs: Sequence[OutputShare]) -> str:
    """The legend's words for the grey records no tape holds, as the DAG and ``tk.explain`` say
    what happened to them: let go by a backward, or dropped with their tape (empty: there are none)."""
    fates = [words for words, count in (("let go by a backward", sum(o.let_go for o in outputs)),
                                        ("dropped with its tape (no tensor held it)", sum(o.dropped for o in outputs)))
             if count]
    return "no tape: " + ", or ".join(fates) if fates else ""


def _panel(ax: Any, snap: Snapshot) -> None:
    colours, labels = snap.colours, []
    y = 0
    for tape in snap.tapes:
        colour = colours.colour(tape.birth)
        ax.barh(y, tape.records, color=colour, edgecolor=colour, linewidth=2, height=0.6)
        state = "".join(f"\n{part}" for part in tape.state.split("; ") if part)
        labels.append(f"{colours.name(tape.birth)} ({tape.policy}){state}\n{plural(tape.records, 'record')}, "
                      f"{plural(tape.grad_entries, 'grad entry', 'grad entries')}, {tape.nbytes:,} B")
        y += 1
    for out in snap.outputs:
        left = 0
        for birth, count in sorted(out.split.items(), key=lambda kv: colours.order(kv[0])):
            ax.barh(y, count, left=left, height=0.6, **_share_style(birth, out.carries, colours))
            left += count
        labels.append(_output_label(out, colours))
        y += 1
    ax.set_yticks(range(y), labels, fontsize=TEXT_PT)
    ax.tick_params(axis="x", labelsize=TEXT_PT)
    ax.invert_yaxis()
    if snap.tapes and snap.outputs:
        ax.axhline(len(snap.tapes) - 0.5, color="#cccccc", linewidth=0.8)
    ax.set_xlabel("records", fontsize=TEXT_PT)
    ax.set_xlim(0, max([1] + [t.records for t in snap.tapes] + [o.records for o in snap.outputs]) * 1.05)
    ax.set_title(snap.label, fontsize=TITLE_PT, wrap=True)


def _output_label(out: OutputShare, colours: TapeLooks) -> str:
    """``out.summary`` in three short lines, so that two panels fit side by side."""
    head, _, rest = out.summary(colours, sep="\n").partition("\n")
    if rest.startswith("its backward sees "):
        rest = "its backward sees\n" + rest[len("its backward sees "):]
    return f"{head}\n{rest}"


@functools.cache
def _figure_class() -> type:
    """A matplotlib ``Figure`` that Jupyter shows as a PNG without pyplot (so pyplot's inline
    backend never draws a second copy). Made on first use: matplotlib loads only for plots."""
    from matplotlib.figure import Figure

    from .picture import save

    class PartitionFigure(Figure):
        """A plot of tapekit (``plot_partition``, ``plot_gradient_split``): a matplotlib ``Figure``
        that Jupyter shows as a PNG; ``fig.save("plot.svg")`` (or ``.png``) writes it to a file."""

        def _repr_png_(self) -> bytes:
            return png(self)

        def save(self, path: Any) -> Any:
            """Write the plot to an ``.svg`` or ``.png`` file (see `tapekit.viz.save`); the path written."""
            return save(self, path)

    return PartitionFigure


def png(fig: "Figure", dpi: int = DPI) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=checked_dpi(dpi))
    return buf.getvalue()
