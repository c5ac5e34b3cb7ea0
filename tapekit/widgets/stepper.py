"""What both widgets share: a program replayed under the policy a dropdown picks, shown one step
at a time by a slider."""

from __future__ import annotations

from typing import Any, Callable

import ipywidgets as w

from .replay import POLICIES, Replay, checked_controls


class ReplayWidget:
    """Base of the widgets: ``policy`` (dropdown) and ``step`` (slider) over a replay of
    ``program``. A subclass lays out ``widget``, calls ``_start`` and draws a step in ``redraw``."""

    step_description = "step"

    def __init__(self, program: Callable[[Callable[[], Any]], Any], policy: str) -> None:
        checked_controls(policy, None)
        self.program = program
        self.policy = w.Dropdown(options=POLICIES, value=policy, description="policy")
        self.step = w.IntSlider(min=1, max=1, value=1, description=self.step_description,
                                continuous_update=False)
        self.widget: w.Widget | None = None

    def _start(self, step: int | None) -> None:
        """Show ``step`` (``None``: the default step), then follow the controls."""
        checked_controls(self.policy.value, step)
        self._load(step)
        self.policy.observe(lambda _: self._load(self._step_after_policy_change()), "value")
        self.step.observe(lambda _: self.redraw(), "value")

    def _load(self, step: int | None) -> None:
        """Replay the program under the chosen policy and show ``step``, kept within this
        policy's run (which may stop early on an error)."""
        self.replay = Replay(self.program, self.policy.value)
        last = max(self.replay.steps, 1)
        with self.step.hold_trait_notifications():
            self.step.max = last
            self.step.value = self._default_step(last) if step is None else min(max(step, 1), last)
        self.redraw()

    def _default_step(self, last: int) -> int:
        return last

    def _step_after_policy_change(self) -> int | None:
        return self.step.value

    def redraw(self) -> None:
        raise NotImplementedError

    def static_html(self) -> str:
        """The widget's current pictures as plain HTML, for viewers that cannot run it."""
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The widget view, and beside it a static view of what it shows now (``text/html``) and its
        ``repr``: a notebook read without running (GitHub, nbviewer) shows the picture, not ``VBox(...)``.
        Front ends that run widgets prefer the widget view."""
        bundle = dict(self.widget._repr_mimebundle_(**kwargs))
        bundle["text/plain"] = repr(self)
        try:
            bundle["text/html"] = self.static_html()
        except NotImplementedError:
            pass
        return bundle

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({getattr(self.program, '__name__', 'program')}, "
                f"policy={self.policy.value!r}, step={self.step.value} of {self.step.max})")
