"""DOT text to an SVG document or a PNG image, for every picture tapekit draws.

Two programs can draw it; `svg` and `png` use the first that `programs` finds:

1. ``graphviz-pure``, Graphviz 16.1.0 ported to Rust as one program, which pip installs with
   tapekit (wheels for Linux, macOS and Windows). It is found through the files pip recorded for
   it, so a kernel whose PATH lacks the environment's ``bin/`` finds it too. It comes first: it
   draws the same picture on every machine, HTML-like labels included, in a few milliseconds.
2. Graphviz's own ``dot`` on PATH, for a machine where graphviz-pure has no wheel.

A PNG is the exception: ``dot`` draws it where it is installed. graphviz-pure draws a PNG's text
with a few fonts of its own, which lack ``∪``, ``✓``, ``✗`` and ``▶``: a tape named ``A∪B`` would
read ``A□B`` in the PNG and ``A∪B`` everywhere else. ``dot`` takes each glyph from any installed
font. Without ``dot``, graphviz-pure draws the PNG, with those gaps; an SVG has none.

A render runs the program once, on the DOT text; importing this module starts nothing.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

from ..errors import TapekitError, checked_number

TIMEOUT_S = 60.0
PNG_DPI = 192  # twice a screen's 96 dpi: a saved PNG stays sharp on a laptop's high-density display
INSTALL_HINT = ("pip install graphviz-pure (tapekit installs it on Linux, macOS and Windows), or install "
                "Graphviz (apt-get install graphviz, brew install graphviz or conda install graphviz)")


class GraphvizNotFoundError(TapekitError, RuntimeError):
    """Neither graphviz-pure nor Graphviz's ``dot`` is installed."""


class GraphvizFailedError(TapekitError, RuntimeError):
    """A Graphviz program could not draw the graph (or could not be run)."""


@functools.cache
def bundled() -> str | None:
    """The graphviz-pure program installed in this Python environment, or ``None``."""
    import importlib.metadata  # here, not at import: it costs tens of milliseconds

    try:
        files = importlib.metadata.distribution("graphviz-pure").files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name in ("graphviz-pure", "graphviz-pure.exe"):
            path = Path(file.locate()).resolve()
            if path.is_file():
                return str(path)
    return None


def programs(format: str = "svg") -> list[str]:
    """The Graphviz programs found here, in the order `draw` tries them for ``format`` (for a PNG,
    ``dot`` first: see the module's docstring)."""
    pure, dot = bundled(), shutil.which("dot")
    return [program for program in ((dot, pure) if format == "png" else (pure, dot)) if program]


def svg(source: str) -> str:
    """``source`` drawn as an SVG document (``<?xml ...>`` and all) by the first program that can.

    Raises ``GraphvizNotFoundError`` when no program is found, ``GraphvizFailedError`` when none
    of them could draw ``source``.
    """
    return draw(source, "svg").decode("utf-8")


def png(source: str, dpi: float = PNG_DPI) -> bytes:
    """``source`` drawn as a PNG image at ``dpi`` dots per inch, by the first program that can
    (raising as `svg` does)."""
    return draw(source, "png", f"-Gdpi={checked_dpi(dpi):g}")


def checked_dpi(dpi: object) -> float:
    """``dpi`` when it is a size a PNG can be drawn at (Graphviz draws a negative one at its largest)."""
    return checked_number(dpi, "dpi", lambda v: 0 < v <= 2400,
                          f"a number of dots per inch, above 0 ({PNG_DPI} is sharp)")


def draw(source: str, format: str, *options: str) -> bytes:
    """What the first program that can writes for ``program -T<format> <options>``."""
    found = programs(format)
    if not found:
        raise GraphvizNotFoundError(f"No Graphviz program was found to draw the picture: {INSTALL_HINT}")
    failures = []
    for program in found:
        try:
            return run(program, source, format, *options)
        except GraphvizFailedError as err:
            failures.append(str(err))
    raise GraphvizFailedError("; ".join(failures))


def run(program: str, source: str, format: str = "svg", *options: str) -> bytes:
    """What ``program -T<format>`` (graphviz-pure or dot) writes for ``source``."""
    name = Path(program).stem
    try:
        done = subprocess.run([program, f"-T{format}", *options], input=source.encode("utf-8"), capture_output=True,
                              timeout=TIMEOUT_S, creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
    except subprocess.TimeoutExpired:
        raise GraphvizFailedError(f"{name} took over {TIMEOUT_S:g} s to draw the graph: draw fewer tensors "
                                  "(pass only the outputs you want to see)") from None
    except OSError as err:
        raise GraphvizFailedError(f"{name} could not be run ({err}): reinstall it, or {INSTALL_HINT}") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GraphvizFailedError(f"{name} could not draw the graph (exit status {done.returncode}"
                                  f"{': ' + said[-1] if said else ''})")
    return done.stdout
