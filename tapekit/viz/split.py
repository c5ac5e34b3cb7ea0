"""How each leaf's gradient is split across tapes at one moment (``gradient_split``), and a plot of
one or more such moments (``plot_gradient_split``), in the DAG's tape colours.

The record-count view (``snapshot``, ``plot_partition``) says where the records are; this one says
what that does to the numbers: for each leaf, which part of its true gradient each live tape's
backward would deliver, and which part no backward would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ..backward import Planned, _run, _seeds
from ..errors import InvalidArgumentError
from ..history import history, live_store, plural
from ..inspect import tapes as live_tapes
from ..tapes.base import Record, _by_id
from .palette import MISSING, TapeLook, look_of, text_on
from .partition import _figure_class
from .scene import capture, tensors_given

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MISSING_KEY = "missing"
NAMED_SHARE = 0.3  # a part at least this wide carries its tape's name


@dataclass(frozen=True)
class GradientSplit:
    """Each leaf's gradient at one moment, and who would deliver which part of it.

    ``true[leaf]`` is the reference: the gradient of the sum of all the outputs, as one tape holding
    the whole history would give it. ``parts[leaf][tape name]`` is what a backward of that tape
    (seeded at the outputs that hold it) would give the leaf, and ``parts[leaf]["missing"]`` the rest
    of ``true[leaf]``, which no tape's backward delivers. ``tapes`` maps the name of every live
    tape behind the outputs (``A``, ``A∪B``: `tapekit.ids`) to its name and colour, oldest first.
    """

    label: str
    true: dict[str, np.ndarray]
    parts: dict[str, dict[str, np.ndarray]]
    tapes: dict[str, TapeLook]

    def shares(self, leaf: str) -> dict[str, float]:
        """Each part's share of the leaf's gradient, by size: ``|part| / (sum of every |part|)``,
        the L2 norm over the leaf's elements when it has several. The shares add up to 1; when the
        parts point the way the true gradient does (always, for a one-value leaf whose parts share
        a sign), each is ``|part| / |true|``."""
        sizes = {key: float(np.linalg.norm(part)) for key, part in self.parts[leaf].items()}
        whole = sum(sizes.values())
        return {key: size / whole if whole else 0.0 for key, size in sizes.items()}

    def __str__(self) -> str:
        """Each leaf's true gradient and its parts; a part of zeros (a tape holding records no
        output reaches) is left out, as the figure leaves it out, unless it is the only one."""
        lines = [f"{self.label}:"]
        for leaf, parts in self.parts.items():
            terms = {f"{fmt(part)} on tape {key}": part for key, part in parts.items() if key != MISSING_KEY}
            shown = [term for term, part in terms.items() if part.any()]
            if parts[MISSING_KEY].any():
                shown.append(f"{fmt(parts[MISSING_KEY])} missing")
            lines.append(f"  {leaf}: {fmt(self.true[leaf])} = {' + '.join(shown or terms) or 'nothing'}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def gradient_split(*outputs: Any, label: str = "gradient split",
                   names: Mapping[str, Any] | None = None) -> GradientSplit:
    """Freeze, now, for each leaf of the outputs' history, its true gradient and the part of it that
    each live tape's backward would deliver (each output seeded with ones, as if summed).

    Read only: the backward rules run on the records where they are, as ``backward`` runs them
    before it changes anything, and no tape, record or gradient entry changes. Entries a tape
    already holds (zeroed buffers from ``alloc_grads``) are not counted. ``names`` (e.g.
    ``locals()``) names tensors the way ``tk.viz.dag`` does.
    """
    outputs = tensors_given(outputs, "tk.viz.gradient_split")
    records = sorted(history(outputs), key=_by_id)
    _check_rules(records)
    scene = capture(outputs, names=names)  # names the tensors and tapes first, in the order they were made
    seeds = _seeds(outputs, [np.ones(out.shape) for out in outputs])
    holders = _holders(outputs)
    true = _gradients(records, outputs, seeds)
    delivered = {store.label: _gradients(sorted(store._all_records(), key=_by_id), [outputs[i] for i in held],
                                         [seeds[i] for i in held])
                 for store, held in holders.items()}
    keep = Planned([store.grads for store in holders]).leaves  # the united leaf set, if any tape has one
    leaves, parts = _leaves(records, true, keep), {}
    for tid in leaves:
        got = {key: grads[tid] for key, grads in delivered.items() if tid in grads}
        parts[scene.name(tid)] = {**got, MISSING_KEY: true[tid] - sum(got.values(), np.zeros_like(true[tid]))}
    tapes = {info.label: look_of(info.tape) for info in sorted(live_tapes(*outputs), key=lambda i: i.tape._born)}
    return GradientSplit(label, {scene.name(tid): true[tid] for tid in leaves}, parts, tapes)


def _check_rules(records: list[Record]) -> None:
    """``InvalidArgumentError`` when a backward let go of some records' rules: no true gradient then."""
    consumed = [rec for rec in records if rec.rules is None]
    if consumed:
        raise InvalidArgumentError(
            f"tk.viz.gradient_split cannot compute the true gradient: {plural(len(consumed), 'record')} of the "
            f"outputs' history {'was' if len(consumed) == 1 else 'were'} let go by {consumed[0].consumed_by}, "
            f"which let go of their rules. Take the split before that backward, or run it with retain=True.")


def _holders(outputs: Sequence[Any]) -> dict[Any, list[int]]:
    """Each live tape the outputs hold -> which outputs hold it."""
    holders: dict[Any, list[int]] = {}
    for i, out in enumerate(outputs):
        store = live_store(out)
        if store is not None:
            holders.setdefault(store, []).append(i)
    return holders


def _leaves(records: list[Record], true: Mapping[int, Any], keep: Any) -> list[int]:
    """The leaves of the history that have a true gradient (and are in the leaf set, if any), by id."""
    made = {rec.out for rec in records}
    return [tid for tid in sorted({t for rec in records for t in rec.inputs if t is not None})
            if tid not in made and tid in true and (keep is None or tid in keep)]


def _gradients(records: list[Record], outputs: Sequence[Any], seeds: Sequence[Any]) -> dict[int, np.ndarray]:
    """What a backward over ``records`` from ``outputs`` finds, as host copies: the engine's own
    run, on no held entries, so nothing it could write into belongs to a tape."""
    if not outputs:
        return {}
    device = outputs[0].device
    found = _run(records, Planned([]), outputs, seeds)
    return {tid: np.array(device.to_numpy(arr), dtype=np.float64) for tid, arr in found.arrays.items()}


def fmt(array: np.ndarray) -> str:
    """A gradient in few characters: ``3``, ``[1, 1]``, or its norm when it has over four values."""
    values = np.asarray(array, dtype=np.float64).ravel()
    if values.size == 1:
        return f"{values[0]:.3g}"
    if values.size <= 4:
        return "[" + ", ".join(f"{v:.3g}" for v in values) + "]"
    return f"|{np.linalg.norm(values):.3g}|"


def plot_gradient_split(*splits: GradientSplit) -> "Figure":
    """One panel per leaf, a bar per moment: the share of the leaf's true gradient that each tape's
    backward delivers, in that tape's colour, and the missing share hatched, each labelled by its
    value (``GradientSplit.shares``). Leaves with several elements are measured by norm, and the
    axis says so. Each bar names the tapes as its split prints them."""
    if not splits or not all(isinstance(s, GradientSplit) for s in splits):
        raise InvalidArgumentError("tk.viz.plot_gradient_split takes gradient splits: "
                                   "tk.viz.gradient_split(z, zz, label='after')")
    leaves = list(dict.fromkeys(leaf for s in sorted(splits, key=lambda s: -len(s.parts)) for leaf in s.parts))
    if not leaves:
        raise InvalidArgumentError("tk.viz.plot_gradient_split: these splits have no leaves (nothing was recorded)")
    bars = [[s for s in splits if leaf in s.parts] for leaf in leaves]
    fig = _figure_class()(figsize=(8.5, 1.2 + sum(0.5 + 0.5 * len(b) for b in bars)), layout="constrained",
                          facecolor="white")
    axes = fig.subplots(len(leaves), 1, squeeze=False, sharex=True,
                        gridspec_kw={"height_ratios": [len(b) for b in bars]})[:, 0]
    for ax, leaf, shown in zip(axes, leaves, bars):
        _leaf_panel(ax, leaf, shown)
    _share_axis(axes[-1], splits)
    handles = _legend_handles(splits)
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 3), frameon=False, fontsize=10)
    fig.suptitle("Who delivers each leaf's gradient", fontsize=12)
    return fig


def _leaf_panel(ax: Any, leaf: str, shown: Sequence[GradientSplit]) -> None:
    """One leaf's panel: a bar per split, titled with its true gradient when all agree."""
    for y, split in enumerate(shown):
        _bar(ax, y, split, leaf)
    truths = {fmt(s.true[leaf]) for s in shown}
    one = truths.pop() if len(truths) == 1 else None
    ax.set_yticks(range(len(shown)), [s.label if one else f"{s.label}\ntrue {fmt(s.true[leaf])}" for s in shown],
                  fontsize=10)
    ax.invert_yaxis()
    ax.set_title(f"{leaf}: true gradient {one}" if one else leaf, fontsize=11, loc="left")
    ax.set_facecolor("white")


def _share_axis(ax: Any, splits: Sequence[GradientSplit]) -> None:
    """The shared x axis under the last panel, saying how a leaf of several values is measured."""
    ax.set_xlim(0, 1)
    several = any(s.true[leaf].size > 1 for s in splits for leaf in s.true)
    ax.set_xlabel("share of the leaf's gradient" + (" (by L2 norm: |part| / sum of the parts' norms)"
                                                     if several else ""), fontsize=10)
    ax.tick_params(labelsize=10)


def _legend_handles(splits: Sequence[GradientSplit]) -> list:
    """A swatch per tape whose backward delivers a part, in the order of its first letter; then missing."""
    from matplotlib.patches import Patch

    looks = {key: s.tapes[key] for s in splits for p in s.parts.values() for key in p if key != MISSING_KEY}
    handles = [Patch(color=look.colour, label=f"backward of tape {look.name}")
               for look in sorted(looks.values(), key=lambda k: k.order)]
    if any(p[MISSING_KEY].any() for s in splits for p in s.parts.values()):
        handles.append(Patch(facecolor="white", edgecolor=MISSING, hatch="//",
                             label="missing: no backward delivers it"))
    return handles


def _bar(ax: Any, y: int, split: GradientSplit, leaf: str) -> None:
    """Draw one moment's stacked bar for ``leaf``."""
    shares, parts, left = split.shares(leaf), split.parts[leaf], 0.0
    order = sorted((k for k in parts if k != MISSING_KEY), key=lambda k: split.tapes[k].order)
    for key in order + [MISSING_KEY]:
        width = shares[key]
        if not width:
            continue
        if key == MISSING_KEY:
            ax.barh(y, width, left=left, height=0.6, facecolor="white", edgecolor=MISSING, hatch="//")
            text, colour = f"missing {fmt(parts[key])}", MISSING
        else:
            fill = split.tapes[key].colour
            ax.barh(y, width, left=left, height=0.6, color=fill)
            text, colour = fmt(parts[key]), text_on(fill)
            if width >= NAMED_SHARE:  # the tape's name on its part: two tapes may share a colour
                text = f"tape {key}: {text}"
        ax.text(left + width / 2, y, text, ha="center", va="center", fontsize=10, color=colour,
                fontweight="bold", bbox={"facecolor": "white", "edgecolor": "none", "pad": 1}
                if key == MISSING_KEY else None)
        left += width
