"""The README's quickstart runs as written and prints what its comments say."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def test_quickstart_runs_as_written():
    text = README.read_text()
    code = re.search(r"## Quickstart\s+```python\n(.*?)```", text, re.S).group(1)
    assert len(code.strip().splitlines()) <= 10
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README quickstart", "exec"), {})
    printed = out.getvalue()
    assert re.search(r"t\d+ = mul\(x, y\) +# \(3,\)", printed)
    assert "[4. 5. 6.] [1. 2. 3.]" in printed
