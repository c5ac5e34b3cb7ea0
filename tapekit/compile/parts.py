"""Compiling a long program's parts: once per shape, not once per part, and without writing them.

A long program is written as functions of at most ``PART`` array calls each (``source.py``), and
most of them repeat: a chain's forward parts are one pattern with other names, its backward parts
another. So each part is reduced to its shape, read off its steps: each step's kind, head and
arguments, the part's own values numbered in the order they are first used (``_0``, ``_1``, ...).
A shape is written out and compiled once; each part of that shape gets the same bytecode with its
own names, name and first line (``CodeType.replace``), so a traceback still names its line of
``step.source``, which is written only when asked for. CPython's ``compile()`` costs about 16 us
a line and writing a line about 2 us, and W4's chain of 100,000 ops has 410,000 lines (333,334
array calls, and 70,000 that take a value an earlier part handed on) in 1,667 parts of 13 shapes.
"""

from __future__ import annotations

import math
import re
import sys
import types
from typing import Any, Callable

from .recorder import Ref, Step


class Part:
    """One function of a long program: its name; its parameters (slots, and earlier parts' tuples as
    negative numbers); what it takes from those tuples (slot, tuple, place); its entries; and its
    results (slots)."""

    __slots__ = ("name", "params", "takes", "entries", "results")

    def __init__(self, name: str, params: list[int], takes: list[tuple[int, int, int]], entries: list,
                 results: list[int]) -> None:
        self.name, self.params, self.takes, self.entries, self.results = name, params, takes, entries, results


def _qualname(name: str) -> dict[str, str]:
    """A code object's own qualified name, which CPython keeps from 3.11 on (3.10 takes the function's)."""
    return {"co_qualname": name} if sys.version_info >= (3, 11) else {}


def compile_parts(parts: list[Part], text_of: Callable[[Part, dict], str], first_line: int, filename: str,
                  space: dict[str, Any], items: list, names: dict[int, str]) -> tuple[list[tuple[str, list]], int]:
    """Define ``parts`` in ``space``, the first's ``def`` on line ``first_line`` and one blank line
    after each: one compile per shape. ``text_of(part, names)`` writes a part's function with
    ``names`` for its slots. Returns each part's shape (its text, and its names for the
    placeholders: ``named`` writes its lines with them) and the line after the last part's blank line."""
    shapes: dict[tuple, tuple[str, types.CodeType, list[int]]] = {}
    shaped = []
    line = first_line
    for part in parts:
        key, local = shape_of(part, items, names)
        found = shapes.get(key) if key is not None else None
        if found is None:
            text = text_of(part, _Names(names, {slot: f"_{k}" for slot, k in local.items()}))
            module = compile(text, filename, "exec")
            code = next(c for c in module.co_consts if isinstance(c, types.CodeType))
            if key is None:  # written with its own names
                found = text, code, None
            else:  # its locals are all placeholders: their numbers, in the code's order
                found = shapes[key] = text, code, [int(v[1:]) for v in code.co_varnames]
        text, code, order = found
        own = [""] * len(local)  # placeholder number -> the part's name
        for slot, k in local.items():
            own[k] = names[slot]
        varnames = code.co_varnames if order is None else tuple([own[k] for k in order])
        renamed = code.replace(co_name=part.name, co_firstlineno=line, co_varnames=varnames, **_qualname(part.name))
        space[part.name] = types.FunctionType(renamed, space, part.name)
        shaped.append((text, own))
        line += len(part.takes) + len(part.entries) + 3
    return shaped, line


# one token of a line: a string, a comment, an attribute, a keyword argument's name, a number, or a
# name (only names are placeholders: the others are kept as they are)
_TOKEN = re.compile(r"""('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|#[^\n]*|\.\s*[A-Za-z_]\w*"""
                    r"""|[A-Za-z_]\w*=(?!=)|\d[\w.]*|[A-Za-z_]\w*)""")


def named(line: str, own: list[str]) -> str:
    """A line of a part's shape with its placeholders replaced by the part's names."""
    return _TOKEN.sub(lambda m: _name(m.group(0), own), line)


def _name(token: str, own: list[str]) -> str:
    """The part's name for ``token`` where it is a placeholder (``_12``), else ``token``."""
    return own[int(token[1:])] if token[0] == "_" and token[1:].isdigit() else token


class _Names(dict):
    """The placeholders of a part's own values; any other slot (a constant: a global) by its name."""

    def __init__(self, names: dict[int, str], own: dict[int, str]) -> None:
        super().__init__(own)
        self.names = names

    def __missing__(self, slot: int) -> str:
        return self.names[slot]


def shape_of(part: Part, items: list, names: dict[int, str]) -> tuple[tuple | None, dict[int, int]]:
    """A part's shape, which equal parts share, and its own values (slot -> number in order of first
    use: its parameters, then what it takes from earlier parts' tuples, then what its steps make). A
    slot that is none of these is a constant, a global: it stays in the shape by name. A part with a
    fused run has no shape (``None``): the run's line names its values itself, so the part is
    compiled on its own."""
    local = {slot: k for k, slot in enumerate(part.params)}
    key: list[Any] = [len(part.params)]
    for slot, handed, i in part.takes:
        local[slot] = len(local)
        key.append(("take", local[handed], i))
    for e in part.entries:
        t = type(e)
        if t is int:
            item = items[e]
            if type(item) is not Step:
                return None, {}
            key.append(_step_key(item, local, names))
        elif t is str:
            key.append("")
        else:
            key.append(("del", *sorted(local[s] for s in e)))
    key.append(tuple(local[s] for s in part.results))
    return tuple(key), local


def _step_key(step: Step, local: dict[int, int], names: dict[int, str]) -> tuple:
    """What a step's line depends on, its slots as the part's numbers (a constant's by name)."""
    args = []
    for v in step.args:
        if type(v) is Ref:  # the common case, without a call
            k = local.get(v.slot)
            args.append(names[v.slot] if k is None else k)
        else:
            args.append(_value_key(v, local, names))
    out = step.out
    if out is not None:
        k = local.get(out)
        if k is None:
            k = local[out] = len(local)
        out = k
    kwargs = tuple((name, _value_key(v, local, names)) for name, v in step.kwargs.items()) if step.kwargs else ()
    return step.kind, step.head, step.asarray, out, tuple(args), kwargs


def _value_key(v: Any, local: dict[int, int], names: dict[int, str]) -> Any:
    """What ``source._render`` writes for a template value, as a key: equal keys, equal text."""
    t = type(v)
    if t is Ref:
        k = local.get(v.slot)
        return names[v.slot] if k is None else k
    if t is tuple or t is list:
        return t, tuple(_value_key(x, local, names) for x in v)
    if t is slice:
        return slice, _value_key(v.start, local, names), _value_key(v.stop, local, names), _value_key(v.step, local, names)
    if v is None or v is Ellipsis or t is bool or t is int or t is str:
        return t, v
    if t is float and math.isfinite(v):
        return t, repr(v)  # repr tells -0.0 from 0.0, which compare equal
    return "object", id(v)  # written as the global the recording bound it to: one per object
