"""The README's quickstart runs as written and prints what its comments say."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def test_quickstart_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the quickstart saves its picture
    text = README.read_text()
    code = re.search(r"## Quickstart\s+```python\n(.*?)```", text, re.S).group(1)
    assert len(code.strip().splitlines()) <= 10
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README quickstart", "exec"), {})
    printed = out.getvalue()
    assert re.search(r"t\d+ = mul\(x, y\) +# \(3,\)", printed)
    assert "[4. 5. 6.] [1. 2. 3.]" in printed
    assert (tmp_path / "loss.svg").read_text().startswith("<?xml")


def test_the_front_page_and_the_pages_it_links_to_link_to_files_that_exist():
    pages = [README, README.parent / "benchmarks" / "README.md", README.parent / "docs" / "reading-guide.md"]
    for page in pages:
        for target in re.findall(r"\]\(([^)#]+)\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.name} links to {target}, which is missing"
    assert "](benchmarks/README.md)" in README.read_text()


def test_the_reading_guide_shows_the_backward_loop_as_it_is():
    import inspect
    import sys
    import textwrap

    import tapekit  # noqa: F401  (loads tapekit.backward)

    guide = (README.parent / "docs" / "reading-guide.md").read_text()
    loop = re.search(r"```python\n(for rec in reversed\(records\).*?)```", guide, re.S).group(1)
    source = textwrap.dedent(inspect.getsource(sys.modules["tapekit.backward"].chain_rule))
    assert textwrap.indent(loop, "        ") in source
