"""The benchmark page includes benchmarks/README.md and benchmarks/results.md; a checkout without
the README builds the page from the results alone (an included file that is absent is left out,
with a note in the build's log, rather than failing the build)."""

from __future__ import annotations

import re
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)
INCLUDE = re.compile(r"^```\{include\} (\S+)\n(?::.*\n)*```\n", re.MULTILINE)


def drop_absent_includes(app, docname: str, source: list[str]) -> None:
    folder = Path(app.env.doc2path(docname)).parent

    def kept(match: re.Match) -> str:
        if (folder / match[1]).exists():
            return match[0]
        logger.info(f"{docname}: {match[1]} is absent, so the page goes without it")
        return ""

    source[0] = INCLUDE.sub(kept, source[0])


def setup(app):
    app.connect("source-read", drop_absent_includes)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
