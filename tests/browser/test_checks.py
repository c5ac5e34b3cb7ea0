"""The checks of the notebook tests can fail: a notebook broken on purpose is reported fault by fault,
so is one whose outputs are too wide, too small or unreadable, and the server and the browser leave
no process behind."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from chromium import Chromium, missing_reason, require
from lab_server import LabServer
from notebook_page import NotebookPage, fit_problems, readability_problems
from processes import family, pids_with, still_running

pytestmark = pytest.mark.xdist_group("browser")


def test_a_missing_browser_skips_outside_ci_and_fails_under_ci(monkeypatch, tmp_path):
    reason = missing_reason(tmp_path / "chromium")
    assert reason == f"{tmp_path / 'chromium'} is missing: install Debian's chromium (make test does it when run as root)"
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="is missing"):
        require(reason)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"\(CI=true: the browser tests must run\)"):
        require(reason)
    require(None)


def test_a_broken_notebook_is_reported_fault_by_fault(page, lab):
    notebook = NotebookPage(page, lab, "fixtures/broken.ipynb").open()
    problems = notebook.problems(notebook.run_all())
    assert len(problems) == 6, problems
    assert problems[0] == 'the page shows "Error displaying widget"'
    assert problems[1].startswith("cell 2: a widget is not rendered; the page shows 'Error displaying widget")
    assert problems[2].startswith("cell 3: an SVG picture is not rendered")
    assert problems[3].startswith("cell 4: a picture is shown as DOT source instead of SVG: 'digraph tapekit {")
    assert problems[4] == "cell 6: raised ZeroDivisionError: division by zero"
    assert problems[5] == "cell 7: did not run (prompt '[ ]:')"


def test_stopping_the_server_ends_it_and_its_kernels():
    server = LabServer({"fixtures": Path(__file__).parent / "fixtures"}).start()
    try:
        request = urllib.request.Request(server.url("api/kernels"), data=b"{}", method="POST")
        with urllib.request.urlopen(request, timeout=60) as reply:
            assert json.load(reply)["name"] == "python3"
        processes = family(server.process.pid)
        assert any(b"ipykernel" in line for line in processes.values())
    finally:
        server.stop()
    assert still_running(processes) == {}
    assert not server.home.exists()


def test_stopping_the_browser_ends_every_chromium_process(chromium):
    browser = Chromium(chromium.playwright).start()
    try:
        assert browser.new_page().evaluate("1 + 1") == 2
        processes = pids_with(browser.marker)
        assert len(processes) >= 2  # the browser and its helpers (zygotes, renderers, ...)
    finally:
        browser.stop()
    assert still_running(processes) == {}
    assert pids_with(browser.marker) == {}
    assert not browser.profile.exists()


def test_outputs_too_wide_too_small_or_unreadable_are_reported(page, lab):
    notebook = NotebookPage(page, lab, "fixtures/too_wide.ipynb").open()
    notebook.run_all()
    wide = fit_problems(page)
    assert [p.split(":")[0] for p in wide] == ["cell 3", "cell 3", "cell 4", "cell 5", "cell 6"], wide
    assert wide[0].startswith("cell 3: an output scrolls: div.lm-Widget.jp-RenderedHTMLCommon")
    assert wide[1].startswith("cell 3: 1 elements reach past the cell's right edge")
    assert wide[2].startswith("cell 4: ") and "elements reach past the cell's right edge" in wide[2]
    assert wide[3].startswith("cell 5: an image drawn ") and wide[3].endswith("of 1600, so its text is shrunk")
    assert wide[4].startswith("cell 6: a picture's text is drawn at 8.0 px, under 10 pt")
    unreadable = readability_problems(page)
    assert len(unreadable) == 3, unreadable
    assert unreadable[0].startswith('cell 7: "pale grey text" has contrast 1.9:1 (rgb(187, 187, 187) on rgb(255, 255, 255))')
    assert unreadable[1:] == ["cell 8: a PNG has a transparent background", "cell 9: a DAG has no white card (none)"]
