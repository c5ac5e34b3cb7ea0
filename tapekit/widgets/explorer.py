"""``TapeExplorer``: replay a small program step by step under a chosen tape policy, see its DAG
and partition after each line, and run backward on one output to see which gradients it gets."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Callable

import ipywidgets as w
import numpy as np

from ..backward import backward
from ..errors import TapekitError
from ..gradients import Gradients
from ..tensor import Tensor
from ..viz.picture import save
from .replay import Moment
from .stepper import ReplayWidget
from .views import View, code_html, figure_html, figure_of, no_gradient_line, pre, row, static_html, svg_img


class TapeExplorer(ReplayWidget):
    """A program replayed step by step: ``step`` (slider) and ``policy`` (dropdown) redraw the DAG
    (``picture``) and the partition plot (``plot``) and show the line of code just run (``code``);
    ``output`` and ``backward_button`` (labelled with the chosen output) run backward on one output
    of the current step (on a fresh run) and list in ``report`` which gradients exist, which are
    missing and why, and which arrived only in part.

    ``program`` is a plain function of a tape factory (see ``tapekit.widgets.replay``). What is shown
    is kept as text: ``svg``, ``dot``, ``figure``, ``line``, ``report_text``.
    """

    def __init__(self, program: Callable[[Callable[[], Any]], Any], policy: str = "arc",
                 step: int | None = None) -> None:
        super().__init__(program, policy)
        self.output = w.Dropdown(options=[], description="output")
        self.backward_button = w.Button(description="Backward", icon="play",
                                        tooltip="run backward on the chosen output (seeded with ones)")
        self.code, self.picture, self.plot, self.report = w.HTML(), w.HTML(), w.HTML(), w.HTML()
        self.svg = self.dot = self.line = self.report_text = ""
        self.figure = None
        self.moment: Moment | None = None
        # DAG and plot side by side while the cell is wide enough, the plot under the DAG when it is not
        pictures = w.HBox([self.picture, self.plot], layout=w.Layout(flex_flow="row wrap", align_items="flex-start",
                                                                     grid_gap="8px 16px", max_width="100%"))
        self.widget = w.VBox([w.HBox([self.policy, self.step], layout=w.Layout(flex_flow="row wrap")), self.code,
                              pictures, w.HBox([self.output, self.backward_button],
                                               layout=w.Layout(flex_flow="row wrap")), self.report],
                             layout=w.Layout(max_width="100%"))
        self.output.observe(lambda _: self._name_output_on_button(), names="value")
        self._start(step)
        self.backward_button.on_click(lambda _: self.run_backward())

    def _name_output_on_button(self) -> None:
        """Label the button with the chosen output (``Backward on zz``), or ``Backward`` when none is.

        The kernel sets the label when it receives the choice, so the button says what a click runs on.
        """
        name = self.output.value
        self.backward_button.description = "Backward" if name is None else f"Backward on {name}"

    def redraw(self) -> None:
        """Show the current step: its line, DAG and partition; forget the last backward."""
        moment = self.replay.run(self.step.value)
        self.moment, self.line = moment, moment.line
        self.code.value = code_html(moment, self.replay.steps)
        self._offer_outputs(moment)
        raised = " (raised)" if moment.error else ""
        self._show(View.of(moment, f"after step {moment.step}: {moment.line}{raised}"))
        self.report_text, self.report.value = "", ""

    def _offer_outputs(self, moment: Moment) -> None:
        """The step's tensors as the output choices, keeping the chosen one where it still exists.

        Sent in one message, and before the pictures: a choice made once the new pictures show is
        not overwritten by a late update of the choices.
        """
        names = list(moment.tensors)
        outputs = [moment.name(t) for t in moment.outputs()]
        keep = self.output.value if self.output.value in names else (outputs[-1] if outputs else None)
        with self.output.hold_sync():
            self.output.options = names
            self.output.value = keep

    def run_backward(self) -> Gradients | None:
        """Backward on the chosen output at the current step (a fresh run), shown in ``report``."""
        name = self.output.value
        moment = self.moment = self.replay.run(self.step.value)
        if name not in moment.tensors:
            self._report(f"there is no tensor {name!r} at step {moment.step}: pick an output first")
            return None
        grads, lines = _backward(moment.tensors[name], name)
        after = View.of(moment, f"after backward on {name}", grads)
        if grads is not None and after.scene is not None:
            lines.append("gradients:")
            lines += [_gradient_line(grads, tid, v.name, name) for tid, v in after.scene.tensors.items()]
        self._show(after)
        self._report("\n".join(lines))
        return grads

    def static_html(self) -> str:
        return static_html(f"{type(self).__name__}: policy {self.policy.value!r}, step {self.step.value} of "
                           f"{self.step.max}", self.code.value, row(svg_img(self.svg), self.plot.value),
                           self.report.value)

    def _show(self, view: View) -> None:
        self.dot, self.svg = view.render()
        self.picture.value = self.svg
        self.figure = figure_of([view])
        self.plot.value = figure_html(self.figure)

    def _report(self, text: str) -> None:
        self.report_text = text
        self.report.value = pre(text)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """The DAG and the partition plot shown now, side by side, into one ``.svg`` or ``.png`` file."""
        return save([[self.dot, self.figure]], path)


def _gradient_line(grads: Gradients, tid: int, tensor: str, output: str) -> str:
    """``✓ x`` (a whole gradient), ``½ x: ...`` (only part of it) or why there is none."""
    if tid not in grads:
        return no_gradient_line(grads, tid)
    if grads.is_complete(tid):
        return f"  ✓ {tensor}"
    return f"  ½ {tensor}: incomplete, not all of its ways to {output} ran"


def _backward(out: Tensor, name: str) -> tuple[Gradients | None, list[str]]:
    """Run backward on ``out`` seeded with ones; the lines that say what happened."""
    seeded = "" if out.size == 1 else f" (seeded with ones, as {name}.sum() would be)"
    lines = [f"backward on {name}{seeded}:"]
    grads = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            grads = backward([out], seeds=[None if out.size == 1 else np.ones(out.shape)])
        except TapekitError as err:
            lines.append(f"{type(err).__name__}: {err}")
    lines += [f"{m.category.__name__}: {m.message}" for m in caught]
    return grads, lines

