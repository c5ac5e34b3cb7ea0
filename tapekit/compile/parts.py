"""Compiling a long program's parts: once per shape, not once per part.

A long program is written as functions of at most ``PART`` array calls each (``source.py``), and
most of them repeat: a chain's forward parts are one pattern with other names, its backward parts
another. CPython's ``compile()`` costs about 16 us a line, the largest share of a long program's
first call (W4's chain of 10,000 ops: 34,000 lines, 0.56 s of 2 s). So each part's text is
reduced to its shape: its local names numbered in order (``v0``, ``v1``, ...), its comments
dropped. A shape is compiled once; each part with that shape gets the same bytecode with its own
names, name and first line (``CodeType.replace``), so a traceback still names its line of
``step.source``. W4's 10,000-op chain has 167 parts of 13 shapes: writing and compiling its
program took about 75 us an op, not 105 (measured, on a busy machine).
"""

from __future__ import annotations

import re
import sys
import types
from typing import Any

def _qualname(name: str) -> dict[str, str]:
    """A code object's own qualified name, which CPython keeps from 3.11 on (3.10 takes the function's)."""
    return {"co_qualname": name} if sys.version_info >= (3, 11) else {}


# one token of a program line: a string, a comment, an attribute, a keyword argument's name, a
# number, or a name (only names are renamed: the others are kept as they are, comments dropped)
_TOKEN = re.compile(r"""('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|#[^\n]*|\.\s*[A-Za-z_]\w*"""
                    r"""|[A-Za-z_]\w*=(?!=)|\d[\w.]*|[A-Za-z_]\w*)""")


def shape_of(lines: list[str], local: set[str]) -> tuple[str, list[str]]:
    """A part's text reduced to its shape (its def named ``part``, its names in ``local`` numbered
    in order, its comments dropped), and its names in that order."""
    head = lines[0]
    text = "\n".join(["def part" + head[head.index("("):]] + lines[1:])
    pieces = _TOKEN.split(text)
    tokens = pieces[1::2]
    names = list(dict.fromkeys(token for token in tokens if token in local))
    number = {name: f"v{k}" for k, name in enumerate(names)}
    pieces[1::2] = [number.get(token) or ("" if token[0] == "#" else token) for token in tokens]
    return "".join(pieces), names


def compile_parts(functions: list[list[str]], first_line: int, filename: str, space: dict[str, Any],
                  local: set[str]) -> None:
    """Define the parts (each a function's lines, in the program's order, the first on line
    ``first_line`` of the source, one blank line between them) in ``space``: one compile per shape.
    Every local name of a part is in ``local`` (the slots' names), and no line holds a lambda or a
    comprehension, whose own code would keep the shape's names."""
    shapes: dict[str, types.CodeType] = {}
    line = first_line
    for lines in functions:
        text, names = shape_of(lines, local)
        code = shapes.get(text)
        if code is None:
            module = compile(text, filename, "exec")
            code = shapes[text] = next(c for c in module.co_consts if isinstance(c, types.CodeType))
        name = lines[0][4:lines[0].index("(")]
        numbered = {f"v{k}": n for k, n in enumerate(names)}
        own = tuple(numbered.get(v, v) for v in code.co_varnames)
        renamed = code.replace(co_name=name, co_firstlineno=line, co_varnames=own, **_qualname(name))
        space[name] = types.FunctionType(renamed, space, name)
        line += len(lines) + 1
