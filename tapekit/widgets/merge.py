"""``MergeViewer``: the same program just before and just after an op that met two tapes, side by
side, with the partition of both moments in one plot."""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any, Callable

import ipywidgets as w

from .replay import Moment
from .stepper import ReplayWidget
from ..viz.picture import save
from .views import View, code_html, figure_html, figure_of, row, static_html, svg_img


class MergeViewer(ReplayWidget):
    """Before and after a merge, side by side: ``before_picture`` and ``after_picture`` (DAGs in
    the same colours) and ``plot`` (the partition of both moments). The merge step is the first
    step running an op on tensors of the program's variables that held two different tapes under
    the chosen ``policy``; the ``step`` slider picks another. What is shown is kept as text:
    ``before_svg``, ``after_svg``, ``before_dot``, ``after_dot``, ``figure``, ``line``, ``note``.
    """

    step_description = "after step"

    def __init__(self, program: Callable[[Callable[[], Any]], Any], policy: str = "arc",
                 step: int | None = None) -> None:
        super().__init__(program, policy)
        self.code, self.before_picture, self.after_picture, self.plot = w.HTML(), w.HTML(), w.HTML(), w.HTML()
        self.before_svg = self.after_svg = self.before_dot = self.after_dot = self.line = self.note = ""
        self.figure = None
        column = w.Layout(width="50%", min_width="0")  # each DAG narrows to its half of the cell
        self.widget = w.VBox([w.HBox([self.policy, self.step], layout=w.Layout(flex_flow="row wrap")), self.code,
                              w.HBox([w.VBox([w.HTML("<b>before</b>"), self.before_picture], layout=column),
                                      w.VBox([w.HTML("<b>after</b>"), self.after_picture], layout=column)],
                                     layout=w.Layout(max_width="100%")),
                              self.plot], layout=w.Layout(max_width="100%"))
        self._start(step)

    def _default_step(self, last: int) -> int:
        """The first merge, else the last step."""
        return self.replay.merges[0] if self.replay.merges else last

    def _step_after_policy_change(self) -> int | None:
        return None  # the merge moves with the policy

    def redraw(self) -> None:
        """One fresh run, frozen just before and just after the chosen step."""
        after_step = self.step.value
        views: dict[int, View] = {}

        line = self.replay.line(self.replay.lines[after_step - 1]) if self.replay.steps else ""

        def visit(moment: Moment) -> None:
            if moment.step in (after_step - 1, after_step):
                when = "after" if moment.step == after_step else "before"
                views[moment.step] = View.of(moment, f"{when} step {after_step}: {line}")

        moment = self.replay.run(after_step, visit)
        before, after = views.get(after_step - 1, View.EMPTY), views.get(after_step, View.EMPTY)
        self.line = line
        self.note = self._note(after_step)
        self.code.value = code_html(moment, self.replay.steps) + f"<div>{html.escape(self.note)}</div>"
        self.before_dot, self.before_svg = before.render()
        self.after_dot, self.after_svg = after.render()
        self.before_picture.value, self.after_picture.value = self.before_svg, self.after_svg
        self.figure = figure_of([before, after])
        self.plot.value = figure_html(self.figure)

    def static_html(self) -> str:
        half = '<div style="flex:1 1 0;min-width:0"><b>{}</b><br/>{}</div>'
        pictures = (f'<div style="display:flex;gap:16px;align-items:flex-start">'
                    f'{half.format("before", svg_img(self.before_svg))}{half.format("after", svg_img(self.after_svg))}'
                    f'</div>')
        return static_html(f"{type(self).__name__}: policy {self.policy.value!r}, after step {self.step.value} of "
                           f"{self.step.max}", self.code.value, pictures, self.plot.value)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """The two DAGs shown now side by side, the partition plot under them, into one ``.svg`` or
        ``.png`` file."""
        return save([[self.before_dot, self.after_dot], [self.figure]], path)

    def _note(self, step: int) -> str:
        merges = self.replay.merges
        if step in merges:
            return f"this line ran an op on two different tapes: under {self.policy.value!r} they merged"
        if not merges:
            return f"no op in this program met two different tapes under {self.policy.value!r}"
        return f"no op on this line met two different tapes (merges at step {', '.join(map(str, merges))})"
