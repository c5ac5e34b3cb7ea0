"""``MergeViewer``: the same program just before and just after an op that met two tapes, side by
side, with the partition of both moments in one plot."""

from __future__ import annotations

import html
from typing import Any, Callable

import ipywidgets as w

from .replay import POLICIES, Moment, Replay
from .views import View, code_html, figure_html, figure_of


class MergeViewer:
    """Before and after a merge, side by side: ``before_picture`` and ``after_picture`` (DAGs in
    the same colours) and ``plot`` (the partition of both moments). The merge step is the first
    step running an op on tensors of the program's variables that held two different tapes under
    the chosen ``policy``; the ``step`` slider picks another. What is shown is kept as text: ``before_svg``, ``after_svg``, ``before_dot``,
    ``after_dot``, ``figure``, ``line``, ``note``.
    """

    def __init__(self, program: Callable[[Callable[[], Any]], Any], policy: str = "arc",
                 step: int | None = None) -> None:
        self.program = program
        self.policy = w.Dropdown(options=POLICIES, value=policy, description="policy")
        self.step = w.IntSlider(min=1, max=1, value=1, description="after step", continuous_update=False)
        self.code, self.before_picture, self.after_picture, self.plot = w.HTML(), w.HTML(), w.HTML(), w.HTML()
        self.before_svg = self.after_svg = self.before_dot = self.after_dot = self.line = self.note = ""
        self.figure = None
        column = w.Layout(width="50%")
        self.widget = w.VBox([w.HBox([self.policy, self.step]), self.code,
                              w.HBox([w.VBox([w.HTML("<b>before</b>"), self.before_picture], layout=column),
                                      w.VBox([w.HTML("<b>after</b>"), self.after_picture], layout=column)]),
                              self.plot])
        self._load(step)
        self.policy.observe(lambda _: self._load(None), "value")
        self.step.observe(lambda _: self.redraw(), "value")

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        return (f"MergeViewer({getattr(self.program, '__name__', 'program')}, policy={self.policy.value!r}, "
                f"step={self.step.value})")

    def _load(self, step: int | None) -> None:
        """Replay under the chosen policy; show ``step`` (default: the first merge, else the last step)."""
        self.replay = Replay(self.program, self.policy.value)
        last = max(self.replay.steps, 1)
        default = self.replay.merges[0] if self.replay.merges else last
        with self.step.hold_trait_notifications():
            self.step.max = last
            self.step.value = default if step is None else min(max(step, 1), last)
        self.redraw()

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
        before, after = views.get(after_step - 1, View(None, None)), views.get(after_step, View(None, None))
        colours = self.replay.colours(moment)
        self.line = moment.line
        self.note = self._note(after_step)
        self.code.value = code_html(moment, self.replay.steps) + f"<div>{html.escape(self.note)}</div>"
        self.before_dot, self.before_svg = before.dot(colours), before.svg(colours)
        self.after_dot, self.after_svg = after.dot(colours), after.svg(colours)
        self.before_picture.value, self.after_picture.value = self.before_svg, self.after_svg
        self.figure = figure_of([before, after], colours)
        self.plot.value = figure_html(self.figure)

    def _note(self, step: int) -> str:
        merges = self.replay.merges
        if step in merges:
            return f"this line ran an op on two different tapes: under {self.policy.value!r} they merged"
        if not merges:
            return f"no op in this program met two different tapes under {self.policy.value!r}"
        return f"no op on this line met two different tapes (merges at step {', '.join(map(str, merges))})"
