"""Fixtures for the browser tests: one JupyterLab server and one headless Chromium for the whole run,
a fresh page per test, and on failure a screenshot, the page text and the server log under
``test-artifacts/``. Server and browser are always stopped by their process ids."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from chromium import Chromium, missing_reason, require
from lab_server import LabServer

HERE = Path(__file__).parent
REPO = HERE.parent.parent
ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture(scope="session")
def chromium():
    require(missing_reason())
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver, Chromium(driver) as browser:
        yield browser


@pytest.fixture(scope="session")
def lab(chromium):
    """JupyterLab serving the tutorials and the fixtures (started after the browser, so a skip costs nothing)."""
    sources = {"fixtures": HERE / "fixtures"}
    if (REPO / "notebooks").is_dir():
        sources["notebooks"] = REPO / "notebooks"
    with LabServer(sources) as server:
        yield server


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.stash[CALL_FAILED] = report.failed
    return report


CALL_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def page(request, chromium, lab):
    """A fresh browser page; its kernels are shut down afterwards."""
    tab = chromium.new_page()
    try:
        yield tab
    finally:
        try:
            if request.node.stash.get(CALL_FAILED, False):
                save_artifacts(request.node.nodeid, tab, lab)
        finally:
            tab.close()
            shut_down_kernels(lab)


def save_artifacts(nodeid: str, tab, lab: LabServer) -> None:
    """A screenshot, the page text and the server log, under test-artifacts/<test id>/."""
    folder = ARTIFACTS / re.sub(r"[^\w.-]+", "_", nodeid).strip("_")
    folder.mkdir(parents=True, exist_ok=True)
    try:
        tab.screenshot(path=str(folder / "screenshot.png"), full_page=True)
        (folder / "page.txt").write_text(tab.inner_text("body"))
    finally:
        (folder / "server.log").write_text(lab.log(tail=None))


def shut_down_kernels(lab: LabServer) -> None:
    with urllib.request.urlopen(lab.url("api/kernels"), timeout=10) as reply:
        kernels = json.load(reply)
    for kernel in kernels:
        request = urllib.request.Request(lab.url(f"api/kernels/{kernel['id']}"), method="DELETE")
        urllib.request.urlopen(request, timeout=30).close()
