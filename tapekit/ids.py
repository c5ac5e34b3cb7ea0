"""One global clock: tensors and recorded ops draw their ids from it, so ids order events.

Names given to tensors are kept by id, so messages and pictures can say ``y`` instead of ``#7``.
"""

from __future__ import annotations

import itertools

next_id = itertools.count().__next__
_names: dict[int, str] = {}


def set_name(tid: int, name: str) -> None:
    _names[tid] = str(name)


def name_of(tid: int) -> str | None:
    """The name given to the tensor with this id, ``None`` when it has none."""
    return _names.get(tid)


def label(tid: int | None) -> str:
    """``name`` when the tensor with this id was named, else ``#id``."""
    if tid is None:
        return "a constant"
    name = name_of(tid)
    return name if name is not None else f"#{tid}"
