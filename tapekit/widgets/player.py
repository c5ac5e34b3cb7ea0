"""``BackwardPlayer``: watch one backward run, record by record, newest first.

The program is replayed (as the ``TapeExplorer`` does: the user's own tapes are never touched) and a
backward on its chosen output(s) is stepped through. Step 0 is the seed; step ``k`` is the state
after the engine ran the ``k`` newest records, computed by the engine itself (``backward._run`` over
those records, with tapekit's own rules); the last step is what ``tk.backward`` returns, with the
gradients it missed and why, in tapekit's own words.
"""

from __future__ import annotations

import dataclasses
import html
import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import ipywidgets as w
import numpy as np

from ..backward import Planned, _run, backward
from ..errors import InvalidArgumentError, TapekitError
from ..gradients import Gradients
from ..history import coverage, history, live_store, plural
from ..ops.core import unbroadcast
from ..tapes.base import Record, Tape
from ..tensor import Tensor
from ..viz.dag import (LET_GO, NOT_KEPT, NOT_KEPT_TEXT, fate_text, marks, node_ids, op_style, tape_text,
                       tensor_style, wrapped)
from ..viz.palette import GONE_FILL, MISSING
from ..viz.picture import Picture
from ..viz.scene import OpView, Scene, TensorView, capture, first_readers
from .replay import POLICIES, Moment, Replay, checked_controls
from .views import ERROR_INK, SHRINK, no_gradient_line, row, static_html, svg_img

SMALL = 6  # a gradient of at most this many values is shown in full, a larger one by its shape and norm
RUNNING = "#000000"  # outline of the record running now, and of the gradients it sends
FONT = "Helvetica"
TEXT_MIN_PX = 360  # the gradients' column: about 43 characters; narrower, it goes below the DAG

# The vector-Jacobian product each rule computes, one per operand: {g} is the gradient of the output
# {out}, {0} and {1} are the operands. An op not listed here is written g_out · ∂out/∂x.
MATHS = {
    "add": ("{g}", "{g}"),
    "sub": ("{g}", "-{g}"),
    "mul": ("{g} * {1}", "{g} * {0}"),
    "div": ("{g} / {1}", "-{g} * {0} / {1}²"),
    "neg": ("-{g}",),
    "exp": ("{g} * exp({0})",),
    "log": ("{g} / {0}",),
    "sin": ("{g} * cos({0})",),
    "cos": ("-{g} * sin({0})",),
    "tanh": ("{g} * (1 - {out}²)",),
    "sigmoid": ("{g} * {out} * (1 - {out})",),
    "relu": ("{g} * ({0} > 0)",),
    "square": ("2 * {g} * {0}",),
    "sqrt": ("{g} / (2 * {out})",),
    "sum": ("{g}, copied to every element of {0}",),
    "mean": ("{g} / n, copied to every element of {0}",),
    "matmul": ("{g} @ {1}ᵀ", "{0}ᵀ @ {g}"),
    "reshape": ("{g}, reshaped to {0}'s shape",),
}


@dataclass(frozen=True)
class Step:
    """The backward after ``record`` ran (``None``: only the seed so far): every gradient found so
    far (tensor id -> array), what the record sent to each of its operands (aligned with
    ``record.inputs``; ``None`` for a constant, or when no gradient reached the record's output),
    and the maths of it, one line an operand."""

    record: Record | None
    grads: dict[int, np.ndarray]
    arrived: tuple[np.ndarray | None, ...] = ()
    maths: tuple[str, ...] = ()


class BackwardPlayer:
    """One backward of ``program`` (a function of a tape factory, as for ``TapeExplorer``) under
    ``policy``, step by step: ``step`` (a slider, which the arrow keys move; ``play`` runs it) shows
    the record being run highlighted on the DAG, every tensor's gradient so far, and the rule that
    just ran as a line of maths. Records the backward cannot see (another tape holds them, or an
    earlier backward consumed them) are drawn dashed; the last step is what backward returns, with
    every missing gradient and why.

    ``output``: the name of the program's tensor to run backward on, or a list of names for one
    ``tk.backward([...])`` over all of them (default: the last tensor no op read). An output of more
    than one value is seeded with ones, as its ``.sum()`` would be. Gradients are shown for every
    tensor, even those a leaf set drops at the end (the last step says which are kept).

    What is shown is kept as text: ``svg``, ``dot``, ``text``; ``steps`` holds every step's gradients.
    Meant for the small programs of a lesson: step ``k`` reruns the ``k`` newest records.
    """

    def __init__(self, program: Callable[[Callable[[], Any]], Any], policy: str = "arc",
                 output: str | Sequence[str] | None = None, step: int = 0) -> None:
        checked_controls(policy, step)
        if output is not None and not isinstance(output, str) and not (
                isinstance(output, (list, tuple)) and all(isinstance(o, str) for o in output)):
            raise InvalidArgumentError(f"output names the program's outputs by their variables (a name or a list of "
                                       f"them, such as output='loss'), got {output!r}")
        self.program = program
        self.output = output
        self.policy = w.Dropdown(options=POLICIES, value=policy, description="policy",
                                 layout=w.Layout(width="180px"))
        self.play = w.Play(interval=1500, tooltip="run the steps one by one")
        self.step = w.IntSlider(description="step", continuous_update=False, layout=w.Layout(width="420px"))
        w.jslink((self.play, "value"), (self.step, "value"))
        self.code, self.picture = w.HTML(), w.HTML(layout=w.Layout(flex="0 1 auto", min_width="0", max_width="100%"))
        self.panel = w.HTML(layout=w.Layout(flex=f"1 1 {TEXT_MIN_PX}px", min_width=f"min({TEXT_MIN_PX}px, 100%)"))
        self.svg = self.dot = self.text = ""
        self.steps: list[Step] = []
        self.drawn: list[tuple[str, str]] = []  # every step's DOT and SVG
        side_by_side = w.Layout(display="flex", flex_flow="row wrap", align_items="flex-start")  # when they fit
        self.widget = w.VBox([w.HBox([self.policy, self.play, self.step]), self.code,
                              w.Box([self.picture, self.panel], layout=side_by_side)])
        self._load(step)
        self.policy.observe(lambda _: self._load(0), "value")
        self.step.observe(lambda _: self.redraw(), "value")

    # -- running the backward ----------------------------------------------------------------
    def _load(self, step: int) -> None:
        """Replay the program under the chosen policy, run its backward step by step, then for real."""
        self.replay = Replay(self.program, self.policy.value)
        moment = self.replay.run(None)
        self.problem = moment.error or ""
        self.outputs = self._outputs(moment)
        self.scene: Scene | None = None
        self.after: Scene | None = None  # the scene once the real backward returned (the last step's)
        self.steps, self.records, self.hidden = [], [], set()
        self.result, self.returned, self.result_lines = None, {}, []
        if self.outputs:  # the tapes backward runs, and their records, oldest first
            stores = list({id(s): s for s in map(live_store, self.outputs) if s is not None}.values())
            self.records = sorted({rec.id: rec for s in stores for rec in s.records}.values(), key=lambda r: r.id)
            self.scene = self._scene(moment)
            self.colours = self.scene.colours
            self._run(stores)
            self.after = self._scene(moment, self.result)  # what the backward left: records let go, tapes drained
        self._draw_every_step()
        with self.step.hold_trait_notifications(), self.play.hold_trait_notifications():
            self.step.max = self.play.max = len(self.steps)
            self.step.value = min(max(step, 0), len(self.steps))
        self.redraw()

    def _draw_every_step(self) -> None:
        """Draw the DAG at every step, and size its box to the largest, and the maths above it to the
        most lines any step has: the gradients' column then stays beside the DAG (or below it) for the
        whole replay, and stepping does not move the page."""
        self.drawn, self.maths_lines = [], 0
        if self.scene is not None:
            for k in range(len(self.steps) + 1):
                picture = self._picture(k)
                svg = picture.svg().replace("<svg ", f'<svg style="display:block;{SHRINK}" ', 1)  # no gap below it
                self.drawn.append((picture.source, svg))
                self.maths_lines = max(self.maths_lines, len(self._words(k)[1]))
        sizes = [_size_px(svg) for _, svg in self.drawn] or [(0, 0)]
        width, height = max(w for w, _ in sizes), max(h for _, h in sizes)
        self.picture.layout.width = f"{width:.0f}px" if width else None
        self.picture.layout.min_height = f"{height:.0f}px" if height else None

    def _scene(self, moment: Moment, grads: Gradients | None = None) -> Scene:
        """What the DAG shows: the outputs' history and every record their tapes hold (the backward
        runs them all), with the tensors those records read and make, drawn as ``tk.viz.dag`` of the
        outputs draws them: leaves outlined by the first op drawn reading them, and in the legend the
        tapes of the ops and outputs drawn, no others. ``grads``: what the backward returned."""
        whole = capture(self.outputs + moment.outputs(), grads, names=moment.tensors)
        shown = {rec.out for rec in history(self.outputs) + self.records}
        ops = tuple(op for op in whole.ops if op.out in shown)
        outputs = {o.id for o in self.outputs}
        used = {tid for op in ops for tid in (*op.inputs, op.out)} | outputs
        readers = first_readers(ops)
        tensors = {tid: _as_drawn(v, tid in outputs, readers, tid) for tid, v in whole.tensors.items() if tid in used}
        drawn = {op.tape for op in ops} | {b for v in tensors.values() for b in (v.made_on, v.carries)}
        return Scene(ops, tensors, {b: t for b, t in whole.tapes.items() if b in drawn})

    def _outputs(self, moment: Moment) -> list[Tensor]:
        """The tensors to run backward on, by name; none (and a note in ``problem``) if one is unknown."""
        ends = moment.outputs()
        wanted = self.output if self.output is not None else [moment.name(ends[-1])] if ends else []
        names = [wanted] if isinstance(wanted, str) else list(wanted)
        unknown = [n for n in names if n not in moment.tensors]
        if unknown or not names:
            self.problem += (f"\nthe program has no tensor {', '.join(map(repr, unknown))} at its end: "
                             f"choose output= among {', '.join(moment.tensors) or 'none'}").lstrip("\n")
            return []
        return [moment.tensors[n] for n in names]

    def _run(self, stores: list[Tape]) -> None:
        """The steps (each from the engine's own run of the newest records of ``stores``), then the
        real backward."""
        outputs, records = self.outputs, self.records
        self.hidden = {rec.out for rec in coverage(outputs, stores).hidden}
        planned = Planned([s.grads for s in stores])
        planned.leaves, planned.clean = None, set()  # show every gradient; write into no tape's buffers
        seeds = [out.device.xp.ones_like(out.data) for out in outputs]
        device = outputs[0].device
        try:
            for k in range(len(records) + 1):
                ran = records[len(records) - k:]
                found = _run(ran, planned, outputs, seeds)
                grads = {tid: np.array(device.to_numpy(a)) for tid, a in found.arrays.items()}
                rec = ran[0] if ran else None
                arrived, maths = self._sent(rec, device) if rec is not None else ((), [])
                self.steps.append(Step(rec, grads, arrived, tuple(maths)))
        except TapekitError:
            pass  # a rule raised: the steps stop before it, and the real backward below says so
        self.result, self.result_lines = _real_backward(outputs, seeds)
        if self.result is None and len(self.steps) == len(records) + 1:
            del self.steps[1:]  # backward refused before running any rule
        elif self.result is not None:
            self.returned = {tid: np.array(device.to_numpy(g)) for tid, g in self.result.items()}

    def _sent(self, rec: Record, device: Any) -> tuple[tuple[np.ndarray | None, ...], list[str]]:
        """What ``rec``'s rules send to each operand, from its output's gradient one step before,
        and the maths of it: ``g_x += g_z * y = [4, 5]``, and the sum when ``x`` already had some."""
        before, name = self.steps[-1].grads, self.scene.name
        if rec.out not in before:
            zeros = [name(t) for t in dict.fromkeys(rec.inputs) if t is not None and t not in before]
            return (None,) * len(rec.inputs), [f"no gradient reaches {name(rec.out)}: it is not on the way to the "
                                               f"output" + (f"; {', '.join(zeros)} get a zero entry" if zeros else "")]
        g, xp = device.from_numpy(before[rec.out]), device.xp
        forms = MATHS.get(rec.name)
        operands = [_operand(rec, i, name) for i in range(len(rec.inputs))]
        sent, lines, so_far = [], [], dict(before)
        for i, (tid, shape, rule) in enumerate(zip(rec.inputs, rec.shapes, rec.rules)):
            if tid is None or rule is None:
                sent.append(None)
                continue
            gi = rule(g, *rec.saved)
            summed = f", summed to its shape {shape}" if gi.shape != shape else ""  # it was broadcast
            gi = np.array(device.to_numpy(unbroadcast(xp, gi, shape) if summed else gi))
            sent.append(gi)
            form = forms[i] if forms else "{g} · ∂{out}/∂" + operands[i]
            lines.append(f"g_{name(tid)} += {form.format(*operands, g=f'g_{name(rec.out)}', out=name(rec.out))}"
                         f"{summed} = {_value(gi)}")
            if tid in so_far:
                lines.append(f"    {name(tid)} is used again: g_{name(tid)} = {_value(so_far[tid])} + {_value(gi)}"
                             f" = {_value(so_far[tid] + gi)}")
                so_far[tid] = so_far[tid] + gi
            else:
                so_far[tid] = gi
        return tuple(sent), lines

    # -- showing a step ----------------------------------------------------------------------
    @property
    def at_end(self) -> bool:
        """Whether the slider shows the end: what backward returns."""
        return self.step.value == len(self.steps)

    @property
    def record(self) -> Record | None:
        """The record that just ran at the current step (``None`` at the seed and at the end)."""
        return None if self.at_end else self.steps[self.step.value].record

    @property
    def gradients(self) -> dict[str, np.ndarray]:
        """The gradients shown at the current step, by tensor name."""
        return self.grads_at(self.step.value)

    def grads_at(self, k: int) -> dict[str, np.ndarray]:
        """The gradients at step ``k``, by tensor name; at the end, those backward returned."""
        if self.scene is None:
            return {}
        got = self.returned if k == len(self.steps) else self.steps[k].grads
        return {self.scene.name(tid): g for tid, g in got.items() if tid in self.scene.tensors}

    def redraw(self) -> None:
        """Show the current step: its heading and maths, the DAG and the gradients."""
        if self.scene is None:
            self.text, self.dot, self.svg = self.problem, "", ""
            self.code.value, self.picture.value, self.panel.value = _pre(self.problem), "", ""
            return
        heading, maths, listing = self._words(self.step.value)
        self.text = "\n".join([self.problem, heading, *maths, *listing]).lstrip("\n")
        problem = f'<div style="color:{ERROR_INK}">{html.escape(self.problem)}</div>' if self.problem else ""
        self.code.value = (f'<div style="font-size:14px">{problem}<b>{html.escape(heading)}</b></div>'
                           + _pre("\n".join(maths), lines=self.maths_lines))
        self.panel.value = _pre("\n".join(listing))
        self.dot, self.svg = self.drawn[self.step.value]
        self.picture.value = self.svg

    def _words(self, k: int) -> tuple[str, list[str], list[str]]:
        """Step ``k``'s heading, the maths of the rule just run, and the list of gradients."""
        name, n = self.scene.name, len(self.records)
        outs = ", ".join(name(o.id) for o in self.outputs)
        if k == len(self.steps):
            return f"step {k} of {len(self.steps)}: backward on {outs} returns", [], self._result_listing()
        listing = ["gradients so far:"] + [f"  {v.name:<4} {_value(self.steps[k].grads[tid])}"
                                           if tid in self.steps[k].grads else f"  {v.name:<4} —"
                                           for tid, v in self.scene.tensors.items()]
        if k == 0:
            seeded = [f"g_{name(o.id)} = {_value(self.steps[0].grads[o.id])}"
                      + ("" if o.size == 1 else f"  (seeded with ones, as {name(o.id)}.sum() would be)")
                      for o in self.outputs] if self.steps else []
            runs = (f"backward on {outs} will run the {plural(n, 'record')} of its tapes, newest first"
                    if len(self.steps) > 1 else f"backward on {outs} runs no record")
            unseen = ([f"{plural(len(self.hidden), 'record')} of its history it cannot see (dashed): "
                       + ", ".join(r.line() for r in history(self.outputs) if r.out in self.hidden)]
                      if self.hidden else [])
            return f"step 0 of {len(self.steps)}: the seed", [*seeded, runs, *unseen], listing
        step = self.steps[k]
        return (f"step {k} of {len(self.steps)}: record {k} of {n} (newest first) runs: {step.record.line()}",
                step.maths, listing)

    def _result_listing(self) -> list[str]:
        """What backward returned for every tensor, or why it has no gradient; its errors and warnings."""
        lines = []
        if self.result is not None:
            for tid, view in self.scene.tensors.items():
                if tid not in self.result:
                    lines.append(no_gradient_line(self.result, tid))
                elif self.result.is_complete(tid):
                    lines.append(f"  ✓ {view.name} = {_value(self.returned[tid])}")
                else:
                    lines.append(f"  ½ {view.name} = {_value(self.returned[tid])}: incomplete, "
                                 f"not all of its ways to the output ran")
        return lines + self.result_lines

    def _picture(self, k: int) -> Picture:
        """The DAG at step ``k``: the running record outlined, gradients in the tensors, unseen records dashed."""
        step = None if k == len(self.steps) else self.steps[k]
        graph = Picture("backward", graph_attr={"rankdir": "TB", "fontname": FONT, "nodesep": "0.3",
                                                "ranksep": "0.3", "size": "8.5,20"},
                        node_attr={"fontname": FONT, "fontsize": "12"},
                        edge_attr={"arrowsize": "0.7", "fontname": FONT})
        scene = self.scene if step is not None else self.after  # the last step: as the backward left it
        ids = node_ids(scene)
        grads = self.returned if step is None else step.grads
        for tid, view in scene.tensors.items():
            graph.node(ids[tid], **self._tensor_node(view, grads.get(tid), end=step is None))
        ran = {rec.out for rec in (self.records[len(self.records) - k:] if step else
                                   self.records if self.result is not None else ())}  # refused: none ran
        marked = set()  # the marks drawn (▶, ✓), for the legend
        for i, op in enumerate(scene.ops, 1):
            running = step is not None and step.record is not None and op.out == step.record.out
            node = self._op_node(op, running, op.out in ran)
            marked.add(node["label"][:1])
            graph.node(f"op{i}", **node)
            for tid, sent in zip(op.inputs, step.arrived if running else (None,) * len(op.inputs)):
                if tid is None:
                    continue
                edge = {"color": "#555555"} if sent is None else {  # a gradient arriving: against the data
                    "color": RUNNING, "penwidth": "2.5", "dir": "back", "fontsize": "11", "label": f" +{_value(sent)}"}
                graph.edge(ids[tid], f"op{i}", **edge)
            graph.edge(f"op{i}", ids[op.out], color=self.colours.colour(op.tape), penwidth="1.5")
        unset = [v for tid, v in scene.tensors.items() if grads.get(tid) is None] if step is None else []
        graph.node("legend", self._legend(scene, "▶" in marked, "✓" in marked, unset), shape="plaintext",
                   fontsize="11")
        graph.body.append("{rank=sink; legend}")  # below the DAG, so it does not widen it
        return graph

    def _tensor_node(self, view: TensorView, grad: np.ndarray | None, end: bool) -> dict[str, str]:
        """A tensor as ``name | shape | g = ...``: its gradient so far, ``—`` for none yet or, once
        backward is done (``end``), a red ``✗`` (``not kept`` when the leaf set left it out); drawn as
        every picture draws it (an output of this backward bold, outlined in the colour of the tape it
        carries: the one backward runs)."""
        text = _value(grad) if grad is not None else "—" if not end else NOT_KEPT if view.not_kept else "✗"
        node = tensor_style(dataclasses.replace(view, grad=None), self.colours)
        node["label"] = "|".join(map(_escape, (view.name, str(view.shape), f"g = {text}")))
        if text == "✗":
            node["fontcolor"] = MISSING
        return node

    def _op_node(self, op: OpView, running: bool, ran: bool) -> dict[str, str]:
        """An op: ``▶`` and a thick outline while it runs, ``✓`` once run, dashed if backward cannot see it."""
        colour = self.colours.colour(op.tape)
        node = {**op_style(op, colour), "label": op.name, "fontsize": "11", "height": "0.3", "margin": "0.08,0.04"}
        unfilled = {"fillcolor": "white", "fontcolor": "black"}
        if op.out in self.hidden:
            node.update(label=f"{op.name} (not seen)", style="rounded,dashed", color=colour, **unfilled)
            if op.tape is None:  # let go by an earlier backward: grey and dashed, as in every picture
                node.update(LET_GO)
        elif running:
            node.update(label=f"▶ {op.name}", color=RUNNING, penwidth="3.5", fontname=f"{FONT}-Bold")
        elif ran:
            node.update(label=f"✓ {op.name}", **unfilled)
            if op.tape is None:  # and let go: grey and dashed, as in every picture
                node.update(LET_GO)
        return node

    def _legend(self, scene: Scene, running: bool, ran: bool, unset: list[TensorView]) -> str:
        """An HTML-like table: one colour per tape, and the marks this step's picture draws (a record
        ``running``, records that ``ran``, the tensors left without a gradient at the end: ``unset``),
        in the words of every picture (`tapekit.viz.dag`)."""
        tapes = scene.tapes
        rows = [_row(self.colours.colour(b), tape_text(tapes[b])) for b in self.colours.sorted(tapes)]
        rows += [_row(GONE_FILL, text) for text in
                 dict.fromkeys(fate_text(op, scene) for op in scene.ops if op.tape is None)]
        rows += [_row("white", text) for text in marks(scene)]
        rows += [_row("white", "▶ running now, sending gradients (thick arrows) to its operands")] if running else []
        rows += [_row("white", "✓ already run")] if ran else []
        rows.append(_row("white", "g = the gradient so far (— none yet)"))
        if self.hidden:
            rows.append(_row("white", "(not seen), dashed: in the history, but not on a tape this backward runs"))
        if any(v.not_kept for v in unset):
            rows.append(_row("white", NOT_KEPT_TEXT))
        if not all(v.not_kept for v in unset):
            rows.append(_row("white", "✗ no gradient (the last step says why)", MISSING))
        return f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">{"".join(rows)}</TABLE>>'

    # -- display -----------------------------------------------------------------------------
    def static_html(self) -> str:
        """The current step as plain HTML, for viewers that cannot run the widget."""
        return static_html(f"{type(self).__name__}: policy {self.policy.value!r}, step {self.step.value} of "
                           f"{self.step.max}", self.code.value, row(svg_img(self.svg), self.panel.value))

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The widget view, and the current step as HTML for readers without a kernel (GitHub, nbviewer)."""
        return {**self.widget._repr_mimebundle_(**kwargs), "text/plain": repr(self), "text/html": self.static_html()}

    def __repr__(self) -> str:
        return (f"BackwardPlayer({getattr(self.program, '__name__', 'program')}, policy={self.policy.value!r}, "
                f"step={self.step.value} of {self.step.max})")

    def save(self, path: Any) -> Any:
        """The DAG of the step shown now into an ``.svg`` or ``.png`` file (see `tapekit.viz.save`);
        the path written."""
        from ..viz.picture import save  # the player's one use of it
        return save(self.dot, path)


def _real_backward(outputs: list[Tensor], seeds: list[Any]) -> tuple[Gradients | None, list[str]]:
    """``tk.backward`` on the replay's outputs: its gradients (``None`` if it raised), and the lines
    saying what it raised or warned."""
    lines = []
    grads = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            grads = backward(outputs, seeds=seeds)
        except TapekitError as err:
            lines.append(f"{type(err).__name__}: {err}")
    return grads, lines + [f"{m.category.__name__}: {m.message}" for m in caught]


def _as_drawn(view: TensorView, output: bool, readers: dict[int, int | None], tid: int) -> TensorView:
    """A tensor as the player draws it: bold only if it is an ``output`` of this backward, a leaf
    outlined by the first op drawn reading it (``readers``)."""
    return dataclasses.replace(view, output=output, carries=view.carries if output else None,
                               outline=readers.get(tid), reader_gone=tid in readers and readers[tid] is None)


def _operand(rec: Record, i: int, name: Callable[[int], str]) -> str:
    """Operand ``i`` of ``rec`` in maths: its name, or a constant's value when the rules saved it."""
    tid = rec.inputs[i]
    if tid is not None:
        return name(tid)
    value = rec.saved[i] if len(rec.saved) == len(rec.inputs) else None
    return f"{value:g}" if isinstance(value, (int, float)) else "c"


def _value(g: np.ndarray) -> str:
    """A gradient in a few characters: its values when it is small, else its shape and norm."""
    if g.size > SMALL:
        return f"{tuple(g.shape)} ‖g‖={float(np.linalg.norm(g)):.4g}"
    return np.array2string(g, separator=", ", formatter={"float_kind": "{:.4g}".format}).replace("\n", "")


def _escape(text: str) -> str:
    """Text safe inside a DOT record label."""
    for ch in "\\{}|<>\"":
        text = text.replace(ch, "\\" + ch)
    return text


ROW_WIDTH = 64  # characters to a line of the legend: as wide as the program's picture, not wider


def _row(swatch: str, text: str, ink: str | None = None) -> str:
    text = wrapped(text, ROW_WIDTH)
    text = text if ink is None else f'<FONT COLOR="{ink}">{text}</FONT>'
    return f'<TR><TD BGCOLOR="{swatch}" WIDTH="18"></TD><TD ALIGN="LEFT" BALIGN="LEFT">{text}</TD></TR>'


def _size_px(svg: str) -> tuple[float, float]:
    """The width and height Graphviz drew ``svg`` at, in CSS px; ``(0, 0)`` for the DOT source shown instead."""
    size = re.match(r'<svg [^>]*width="([\d.]+)pt" height="([\d.]+)pt"', svg)
    return (float(size[1]) * 4 / 3, float(size[2]) * 4 / 3) if size else (0, 0)


def _pre(text: str, lines: int = 0) -> str:
    """Text that wraps at spaces (JupyterLab's own style for <pre> in outputs breaks words anywhere),
    at least ``lines`` lines high."""
    return (f'<pre style="white-space:pre-wrap;word-break:normal;overflow-wrap:break-word;font-size:14px;'
            f'line-height:1.4;min-height:{1.4 * lines:g}em;margin:4px 0">{html.escape(text)}</pre>')
