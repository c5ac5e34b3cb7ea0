"""Debian's Chromium, headless, driven by Playwright through ``executable_path``.

Playwright's own browser downloads are never used. The browser gets a profile directory of its
own; every Chromium process started for it carries that directory on its command line, which is how
`stop()` finds their process ids and ends any that outlive a normal close.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from processes import end, pids_with

EXECUTABLE = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1280, "height": 800}  # the narrowest window the tutorials are made for
STOP_TIMEOUT_S = 10.0


def missing_reason(executable: Path = EXECUTABLE) -> str | None:
    """Why the browser tests cannot run here, or ``None`` when they can."""
    if not executable.exists():
        return f"{executable} is missing: install Debian's chromium (make test does it when run as root)"
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is missing: pip install -e '.[test]'"
    return None


def require(reason: str | None) -> None:
    """Skip with ``reason`` (when there is one); under CI=true that is a failure, never a skip."""
    import pytest

    if reason is None:
        return
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"{reason} (CI=true: the browser tests must run)", pytrace=False)
    pytest.skip(reason)


class Chromium:
    """One headless Chromium with one browser context, launched by a running ``sync_playwright()``;
    `new_page()` opens a tab, `stop()` ends the browser."""

    def __init__(self, playwright, executable: Path = EXECUTABLE):
        self.playwright = playwright
        self.executable = executable
        self.profile = Path(tempfile.mkdtemp(prefix="tapekit-chromium-"))
        self.marker = f"--user-data-dir={self.profile}"
        self.context = None

    def start(self) -> "Chromium":
        try:
            self.context = self.playwright.chromium.launch_persistent_context(
                self.profile, executable_path=str(self.executable), headless=True, args=ARGS, viewport=VIEWPORT)
        except BaseException:
            self.stop()
            raise
        return self

    def new_page(self):
        return self.context.new_page()

    def stop(self) -> None:
        """Close the browser, then end by id every one of its processes still running."""
        processes = pids_with(self.marker)
        try:
            if self.context is not None:
                self.context.close()
        finally:
            end(processes, STOP_TIMEOUT_S)
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Chromium":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

