"""The tutorial pages: notebooks/*.ipynb, copied into docs/tutorials/ (which git ignores) when
the build starts, each with a line under its title that runs it on Binder (the README's badge, for
each tutorial) or downloads it.

A copy, not a link: Sphinx resolves links between notebooks through the file's real path, which
for a symbolic link lies outside the site.
"""

from __future__ import annotations

import os
from html import escape
from pathlib import Path, PurePosixPath

from docutils import nodes

BINDER = "https://mybinder.org/v2/gh/tapekit/tapekit/main?urlpath=lab/tree/notebooks/{file}"


def copy_tutorials(source: Path, target: Path) -> None:
    """Mirror ``source``'s notebooks in ``target``, rewriting only those that changed (so a second
    build reads only what changed) and dropping those that are gone."""
    target.mkdir(exist_ok=True)
    wanted = {path.name: path.read_bytes() for path in source.glob("*.ipynb")}
    for stale in target.glob("*.ipynb"):
        if stale.name not in wanted:
            stale.unlink()
    for name, data in wanted.items():
        copy = target / name
        if not copy.exists() or copy.read_bytes() != data:
            partial = copy.with_name(f".{name}.{os.getpid()}.partial")
            partial.write_bytes(data)
            os.replace(partial, copy)


def launch_line(file: str) -> str:
    binder = escape(BINDER.format(file=file))
    source = escape(f"../_sources/tutorials/{file}")  # Sphinx keeps each page's source there
    return (f'<p class="tapekit-launch"><a class="reference external" href="{binder}">Run this tutorial on '
            f'Binder</a> (JupyterLab in the browser, nothing to install), or download '
            f'<a class="reference download" href="{source}" download="{escape(file)}"><code>{escape(file)}</code></a> '
            f"for your own Jupyter.</p>")


def add_launch_line(app, doctree: nodes.document) -> None:
    docname = app.env.docname
    if not docname.startswith("tutorials/"):
        return
    file = PurePosixPath(app.env.doc2path(docname)).name
    title = next(iter(doctree.findall(nodes.title)), None)
    if title is not None:
        title.parent.insert(title.parent.index(title) + 1, nodes.raw("", launch_line(file), format="html"))


def copy_at_start(app, config) -> None:
    copy_tutorials(Path(app.srcdir).parent / "notebooks", Path(app.srcdir) / "tutorials")


def setup(app):
    app.connect("config-inited", copy_at_start)
    app.connect("doctree-read", add_launch_line)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
