"""The benchmark page: benchmarks/README.md (how the benchmarks run and what they say), then every
case of benchmarks/results.md, which `make bench` writes.

The README's links are written for the code host, relative to benchmarks/; on the site a tutorial
goes to its page, results.md to its section below, and any other file of the repository to its
source. A checkout without the README builds the page from the results alone.
"""

from __future__ import annotations

import re
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parent.parent.parent
SOURCE = "https://github.com/tapekit/tapekit/blob/main/{path}"
RESULTS_SECTION = "#every-case"  # the heading docs/benchmarks.md gives results.md
README_INCLUDE = re.compile(r"^```\{include\} \.\./benchmarks/README\.md\n(?::.*\n)*```\n", re.MULTILINE)
LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)#\s:]+)(#[^)\s]*)?\)")  # no images, URLs or in-page anchors


def site_target(target: str) -> str:
    """Where a link of benchmarks/README.md to ``target`` leads on the site."""
    path = (REPO / "benchmarks" / target).resolve()
    if path == REPO / "benchmarks" / "results.md":
        return RESULTS_SECTION
    if path.parent == REPO / "notebooks" and path.suffix == ".ipynb":
        return f"tutorials/{path.name}"
    return SOURCE.format(path=path.relative_to(REPO).as_posix())


def relink(match: re.Match) -> str:
    target = site_target(match[2])
    anchor = "" if target.startswith("#") else match[3] or ""
    return f"[{match[1]}]({target}{anchor})"


def relink_readme(app, relative_path: Path, parent_docname: str, content: list[str]) -> None:
    if parent_docname == "benchmarks" and relative_path.name == "README.md":
        content[0] = LINK.sub(relink, content[0])


def title_without_readme(app, docname: str, source: list[str]) -> None:
    if docname == "benchmarks" and not (REPO / "benchmarks" / "README.md").exists():
        logger.info("benchmarks/README.md is absent: the benchmark page shows the results alone")
        source[0] = README_INCLUDE.sub("# Benchmarks\n", source[0])


def setup(app):
    app.connect("source-read", title_without_readme)
    app.connect("include-read", relink_readme)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
