"""Links to tapekit's source go to the code host: each API entry's ``[source]`` link (the lines that
define it; sphinx.ext.linkcode calls `linkcode_resolve`), and a page's link to a file of the
repository outside the site, such as ``[core.py](../tapekit/ops/core.py)``, which Sphinx would
otherwise make a download."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

from docutils import nodes
from sphinx import addnodes

REPO = Path(__file__).resolve().parent.parent.parent
FILE = "https://github.com/tapekit/tapekit/blob/main/{path}"
SOURCE = FILE + "#L{first}-L{last}"


def defining_object(module: str, fullname: str) -> object:
    obj = importlib.import_module(module)
    for part in fullname.split("."):
        obj = getattr(obj, part, None)
    if isinstance(obj, property):
        obj = obj.fget
    return inspect.unwrap(obj) if callable(obj) else obj


def linkcode_resolve(domain: str, info: dict) -> str | None:
    if domain != "py" or not info.get("module"):
        return None
    obj = defining_object(info["module"], info["fullname"])
    try:
        path = Path(inspect.getsourcefile(obj)).resolve().relative_to(REPO)
        lines, first = inspect.getsourcelines(obj)
    except (TypeError, OSError, ValueError):  # a value, a builtin, or code outside the repository
        return None
    return SOURCE.format(path=path.as_posix(), first=first, last=first + len(lines) - 1)


def link_source_files(app, doctree: nodes.document) -> None:
    """Each download link to a file of the repository outside the site, as a link to that file."""
    folder = Path(app.env.doc2path(app.env.docname)).parent
    site = Path(app.srcdir).resolve()
    for download in list(doctree.findall(addnodes.download_reference)):
        path = (folder / download["reftarget"]).resolve()
        if path.is_relative_to(REPO) and not path.is_relative_to(site):
            where = FILE.format(path=path.relative_to(REPO).as_posix())
            download.replace_self(nodes.reference("", "", *download.children, refuri=where))


def setup(app):
    app.connect("doctree-read", link_source_files, priority=400)  # before Sphinx collects the downloads
    return {"parallel_read_safe": True, "parallel_write_safe": True}
