"""Each API entry's ``[source]`` link: the lines that define it, on the code host (sphinx.ext.linkcode
calls `linkcode_resolve`)."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
SOURCE = "https://github.com/tapekit/tapekit/blob/main/{path}#L{first}-L{last}"


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
