"""Math as MathML, made at build time by latex2mathml: browsers draw it natively, so a page needs no
MathJax and no network. ``html_math_renderer = "mathml"`` selects it."""

from __future__ import annotations

from docutils import nodes
from latex2mathml.converter import convert


def visit_math(self, node: nodes.math) -> None:
    self.body.append(f'<span class="math">{convert(node.astext())}</span>')
    raise nodes.SkipNode


def visit_math_block(self, node: nodes.math_block) -> None:
    self.body.append(f'<div class="math">{convert(node.astext(), display="block")}</div>')
    raise nodes.SkipNode


def setup(app):
    app.add_html_math_renderer("mathml", (visit_math, None), (visit_math_block, None))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
