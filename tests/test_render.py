"""Drawing DOT as SVG (tapekit.viz.render): graphviz-pure first, found without PATH; Graphviz's dot
when graphviz-pure is missing; errors that say what to do; the DOT source when nothing can draw."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tapekit as tk
from tapekit.viz import render
from tapekit.viz.render import GraphvizFailedError, GraphvizNotFoundError

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def p4_picture():
    """P4 under ArcTape after a backward on zz: two tapes, a missing gradient, the whole legend."""
    dev = tk.Cpu()
    x = dev.tensor([1., 2.], name="x").trace(tk.ArcTape())
    y = dev.tensor([4., 5.], name="y").trace(tk.ArcTape())
    zz = y * 2.0
    z = x + y
    z.name, zz.name = "z", "zz"  # named before the backward's warning shows them
    with pytest.warns(tk.IncompleteTapeWarning):
        g = zz.backward(seed=np.ones(2))
    return tk.viz.dag(z, zz, grads=g)


def texts(svg: str) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


def points(svg: str) -> tuple[float, float]:
    width, height = re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups()
    return float(width), float(height)


@pytest.fixture
def no_path(monkeypatch, tmp_path):
    """A PATH with no program on it (so no dot)."""
    monkeypatch.setenv("PATH", str(tmp_path))


@pytest.fixture
def no_bundled(monkeypatch):
    monkeypatch.setattr(render, "bundled", lambda: None)


def test_graphviz_pure_is_installed_with_tapekit_and_tried_first():
    assert render.bundled() is not None, "graphviz-pure is a dependency of tapekit: pip install -e ."
    assert render.programs()[0] == render.bundled()


def test_graphviz_pure_draws_without_dot_or_anything_on_path(no_path):
    assert render.programs() == [render.bundled()] and render.programs("png") == [render.bundled()]
    svg = render.svg(p4_picture().source)
    assert svg.startswith("<?xml") and "(graphviz-pure)" in svg


def test_the_legend_table_and_every_label_are_drawn(no_path):
    shown = texts(render.svg(p4_picture().source))
    for label in ("zz", "(2,)", "grad ✓", "grad ✗", "mul", "add", "legend", "grad ✗: gradient missing"):
        assert label in shown, (label, shown)
    for line in (r"tape [A-Z]+: ArcTape, 2 records", r"tape [A-Z]+: ArcTape, 0 records"):
        assert any(re.fullmatch(line, text) for text in shown), (line, shown)


def test_jupyter_shows_svg_drawn_without_dot(no_path):
    from IPython.core.formatters import DisplayFormatter
    data, _ = DisplayFormatter().format(p4_picture())
    assert data["image/svg+xml"].startswith("<?xml") and "<svg" in data["image/svg+xml"]
    assert p4_picture().svg().startswith("<svg")


@needs_dot
def test_dot_draws_when_graphviz_pure_is_missing(no_bundled):
    assert render.programs() == [shutil.which("dot")]
    svg = render.svg(p4_picture().source)
    assert "<svg" in svg and "(graphviz-pure)" not in svg
    assert any(re.fullmatch(r"tape [A-Z]+: ArcTape, 2 records", text) for text in texts(svg))


@needs_dot
def test_dot_draws_a_png_where_it_is_installed(monkeypatch):
    """graphviz-pure's PNG fonts lack ∪, ✓ and ✗ (a UnionTape named A∪B would read A□B): dot,
    which takes each glyph from an installed font, draws PNGs; graphviz-pure still draws SVGs."""
    ran = []
    real = render.run
    monkeypatch.setattr(render, "run", lambda program, *args: ran.append(program) or real(program, *args))
    source = p4_picture().source
    assert render.png(source).startswith(b"\x89PNG")
    assert render.svg(source).startswith("<?xml")
    assert ran == [shutil.which("dot"), render.bundled()]


@needs_dot
def test_graphviz_pure_and_dot_draw_the_same_picture(monkeypatch):
    """Not the same bytes (another Graphviz version, estimated font metrics), but the same text
    and about the same size."""
    source = p4_picture().source
    pure = render.svg(source)
    dot = render.run(shutil.which("dot"), source).decode("utf-8")
    assert sorted(texts(pure)) == sorted(texts(dot))
    for a, b in zip(points(pure), points(dot)):
        assert 0.75 < a / b < 1.25, (points(pure), points(dot))
    assert pure.count('class="node"') == dot.count('class="node"')
    assert pure.count('class="edge"') == dot.count('class="edge"')


def test_without_any_graphviz_the_error_says_what_to_install(no_path, no_bundled):
    assert render.programs() == []
    with pytest.raises(GraphvizNotFoundError, match=r"pip install graphviz-pure .*apt-get install graphviz"):
        render.svg("digraph { a -> b }")


def test_without_any_graphviz_jupyter_shows_one_line_and_the_dot_source(no_path, no_bundled):
    from IPython.core.formatters import DisplayFormatter
    picture = p4_picture()
    data, _ = DisplayFormatter().format(picture)
    assert "image/svg+xml" not in data
    first = data["text/plain"].splitlines()[0]
    assert first.startswith("No Graphviz program was found to draw the picture: pip install graphviz-pure")
    assert first.endswith("; the DOT source follows.") and data["text/plain"] == f"{first}\n{picture.source}"
    assert "<pre>digraph tapekit {" in data["text/html"] and "label=&quot;zz|(2,)|grad ✓&quot;" in data["text/html"]
    assert picture.svg() == data["text/html"]


def test_dot_text_graphviz_cannot_read_is_an_error_naming_the_program(no_path):
    with pytest.raises(GraphvizFailedError, match=r"graphviz-pure could not draw the graph \(exit status \d+"):
        render.svg("digraph { a -> }")
    picture = tk.viz.Picture("broken", body=["\ta -> \n"])
    assert picture.svg().startswith("<p>graphviz-pure could not draw the graph")
    assert "<pre>digraph broken {" in picture.svg()


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for a stuck program")
def test_a_stuck_or_broken_program_is_an_error_not_a_hang(monkeypatch, tmp_path, no_path):
    stuck = tmp_path / "graphviz-pure"
    stuck.write_text("#!/bin/sh\nexec /bin/sleep 10\n")
    stuck.chmod(0o755)
    monkeypatch.setattr(render, "bundled", lambda: str(stuck))
    monkeypatch.setattr(render, "TIMEOUT_S", 0.3)
    with pytest.raises(GraphvizFailedError, match="took over 0.3 s to draw the graph: draw fewer tensors"):
        render.svg("digraph { a }")
    stuck.chmod(0o644)  # no longer executable
    with pytest.raises(GraphvizFailedError, match=r"graphviz-pure could not be run \(.*\): reinstall it"):
        render.svg("digraph { a }")


def test_importing_the_pictures_starts_no_program_and_looks_nothing_up():
    code = ("import tapekit, tapekit.viz, tapekit.widgets; from tapekit.viz import render; "
            "print(render.bundled.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0"
