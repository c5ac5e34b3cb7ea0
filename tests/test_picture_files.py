"""Pictures as files and in untrusted notebooks: ``save(path)`` draws a DAG, a plot or a widget's
current view as SVG or PNG by the file's suffix with tapekit's own renderer (no ``dot`` on PATH),
graphviz's ``pipe`` and ``render`` do too, every picture class is public and documented, and the
display bundle of a DAG holds a view JupyterLab shows in a notebook it does not trust."""

from __future__ import annotations

import base64
import pydoc
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import tapekit as tk
from tapekit.viz import render
from tapekit.viz.render import GraphvizNotFoundError

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def no_path(monkeypatch, tmp_path):
    """A PATH with no program on it: no Graphviz ``dot`` to fall back on."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))


def program(tape):
    """P4: two tapes, a merge, two outputs."""
    dev = tk.Cpu()
    x = dev.tensor([1., 2.], name="x").trace(tape())
    y = dev.tensor([4., 5.], name="y").trace(tape())
    zz = y * 2.0
    z = x + y
    return z, zz


def p4_picture():
    z, zz = program(tk.ArcTape)
    return tk.viz.dag(z, zz, names={"z": z, "zz": zz})


def p4_plot():
    z, zz = program(tk.ArcTape)
    return tk.viz.plot_partition(tk.viz.snapshot(z, zz, names={"z": z, "zz": zz}))


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_a_dag_saves_as_svg_or_png_by_the_suffix_without_dot(tmp_path):
    picture = p4_picture()
    assert render.programs() == [render.bundled()]
    assert picture.save(tmp_path / "loss.svg") == tmp_path / "loss.svg"
    svg = (tmp_path / "loss.svg").read_text()
    assert svg.startswith("<?xml") and "digraph" not in svg  # graphviz's own save wrote the DOT source here
    assert svg[svg.index("<svg"):] == picture.svg()[picture.svg().index("<svg"):].replace(
        'style="max-width:100%;height:auto" ', "")
    tk.viz.save(picture, str(tmp_path / "LOSS.PNG"))
    width, height = png_size((tmp_path / "LOSS.PNG").read_bytes())
    points = [float(v) for v in re.search(r'width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups()]
    assert (width, height) == pytest.approx((points[0] / 72 * 192, points[1] / 72 * 192), abs=3)  # twice 96 dpi


def test_another_suffix_is_refused_and_nothing_is_written(tmp_path):
    picture = p4_picture()
    for name in ("loss.dot", "loss.pdf", "loss"):
        with pytest.raises(tk.InvalidArgumentError, match=r"the file's suffix says what to draw, and it is "
                                                          r"\.svg or \.png \(for the DOT text, write picture\.source\)"):
            picture.save(tmp_path / name)
        assert not (tmp_path / name).exists()


def test_without_a_renderer_save_raises_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(render, "bundled", lambda: None)
    with pytest.raises(GraphvizNotFoundError, match="pip install graphviz-pure"):
        p4_picture().save(tmp_path / "loss.svg")
    assert list(tmp_path.iterdir()) == []


def test_graphviz_pipe_and_render_draw_with_tapekits_renderer(tmp_path):
    picture = p4_picture()
    assert picture.pipe().startswith(b"<?xml") and "(graphviz-pure)" in picture.pipe(encoding="utf-8")
    assert picture.pipe("png")[:8] == PNG
    written = picture.render("dag", directory=tmp_path, format="png")
    assert written == str(tmp_path / "dag.png") and (tmp_path / "dag.png").read_bytes()[:8] == PNG
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dag.png"]


def test_a_plot_saves_as_svg_or_png(tmp_path):
    fig = p4_plot()
    fig.save(tmp_path / "plot.svg")
    tk.viz.save(fig, tmp_path / "plot.png")
    assert "<svg" in (tmp_path / "plot.svg").read_text()
    assert png_size((tmp_path / "plot.png").read_bytes())[0] == pytest.approx(fig.get_figwidth() * 192, abs=2)


def svg_parts(path) -> list[ET.Element]:
    """The pictures a saved view holds: the nested <svg> elements of its document (which must parse)."""
    root = ET.parse(path).getroot()
    ids = [e.get("id") for e in root.iter() if e.get("id")]
    assert len(ids) == len(set(ids)), "two pictures of one file share an id"
    return root.findall("{http://www.w3.org/2000/svg}svg")


@pytest.mark.parametrize("widget, pictures", [("TapeExplorer", 2), ("MergeViewer", 3), ("BackwardPlayer", 1)])
def test_a_widget_saves_what_it_shows_now(tmp_path, widget, pictures):
    shown = getattr(tk.widgets, widget)(program, policy="arc")
    shown.save(tmp_path / "view.svg")
    shown.save(tmp_path / "view.png")
    parts = svg_parts(tmp_path / "view.svg") if pictures > 1 else [ET.parse(tmp_path / "view.svg").getroot()]
    assert len(parts) == pictures
    assert png_size((tmp_path / "view.png").read_bytes())[0] > 300


def test_a_merge_viewers_plot_sits_under_its_two_dags(tmp_path):
    tk.widgets.MergeViewer(program, policy="arc").save(tmp_path / "merge.svg")
    before, after, plot = svg_parts(tmp_path / "merge.svg")
    assert float(before.get("y")) == float(after.get("y")) == 0 and float(after.get("x")) > 0
    assert float(plot.get("y")) >= max(float(before.get("height")), float(after.get("height")))


def test_rows_of_pictures_save_as_one_and_empty_rows_are_refused(tmp_path):
    tk.viz.save([[p4_picture(), p4_plot()], [p4_picture().source]], tmp_path / "all.png")
    one = png_size(p4_picture().png())
    both = png_size((tmp_path / "all.png").read_bytes())
    assert both[0] > one[0] and both[1] > 2 * one[1]
    with pytest.raises(tk.InvalidArgumentError, match="there is no picture to save yet"):
        tk.viz.save([["", None]], tmp_path / "none.svg")
    with pytest.raises(tk.InvalidArgumentError, match="cannot save a ndarray"):
        tk.viz.save(np.zeros(3), tmp_path / "array.svg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all.png"]


def test_every_picture_class_is_public_and_documented():
    fig = p4_plot()
    classes = [tk.viz.Picture, tk.viz.DagPicture, tk.viz.PartitionFigure, tk.widgets.TapeExplorer,
               tk.widgets.MergeViewer, tk.widgets.BackwardPlayer]
    assert type(p4_picture()) is tk.viz.DagPicture and type(fig) is tk.viz.PartitionFigure
    for cls in classes:
        assert cls.__doc__ and cls.__name__ in pydoc.render_doc(cls), cls
        assert "save" in vars(cls) or any("save" in vars(base) for base in cls.__mro__[1:2]), cls
    assert "PartitionFigure" in tk.viz.__all__ and "DagPicture" in tk.viz.__all__ and "save" in tk.viz.__all__
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        tk.viz.Nothing


def test_jupyter_gets_a_view_an_untrusted_notebook_shows():
    """JupyterLab leaves image/svg+xml out of a notebook it does not trust; text/html it shows,
    sanitized, and an <img> of an SVG document survives that."""
    from IPython.core.formatters import DisplayFormatter
    z, zz = program(tk.ArcTape)
    data, _ = DisplayFormatter().format(tk.viz.dag(z, zz, names={"z": z, "zz": zz}))
    img = re.fullmatch(r'<div style="overflow-x:auto"><img src="data:image/svg\+xml;base64,([^"]+)" '
                       r'alt="op DAG" style="max-width:none"/></div>', data["text/html"])
    document = base64.b64decode(img[1]).decode("utf-8")
    assert document.startswith("<?xml") and f"tape {z.tape.label}: ArcTape, 2 records" in document
    assert re.fullmatch(r"<DagPicture: 7 nodes, 5 edges; Jupyter draws it, \.save\('name\.svg'\) writes it "
                        r"to a file>", data["text/plain"])
