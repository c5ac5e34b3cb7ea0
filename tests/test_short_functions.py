"""Learners read tapekit's code: no function in the package runs past 40 lines (its decorators not
counted, its docstring counted), so each one fits a screen beside the idea it implements."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tapekit"
MOST_LINES = 40


def long_functions(root: Path) -> list[str]:
    """``path:line name (n lines)`` for every function under ``root`` longer than ``MOST_LINES``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MOST_LINES:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_in_tapekit_is_longer_than_40_lines():
    assert not long_functions(PACKAGE), "split these into named helpers:\n" + "\n".join(long_functions(PACKAGE))


def test_the_check_finds_a_long_function(tmp_path):
    (tmp_path / "pkg").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MOST_LINES))
    (tmp_path / "pkg" / "m.py").write_text(f"def long():\n{body}\n\n\ndef short():\n    return 1\n")
    assert long_functions(tmp_path / "pkg") == [f"pkg/m.py:1 long ({MOST_LINES + 1} lines)"]
