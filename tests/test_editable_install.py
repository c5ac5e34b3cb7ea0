"""tapekit as ``make lab`` and ``make test`` install it (editable), cloned into a folder named
``tapekit`` (git's default) and used from that folder's parent, as a learner who clones into ``~``
and runs Python from ``~`` does: ``import tapekit`` must find the package, not the clone's folder
(which Python would take for an empty namespace package)."""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from .test_wheel_install import REPO, pip

MAKEFILE = (REPO / "Makefile").read_text(encoding="utf-8")
MODE = re.search(r"^EDITABLE\s*:=\s*(.*)$", MAKEFILE, re.M)
EDITABLE = MODE.group(1).split() if MODE else []  # pip's arguments for the mode the Makefile installs in

USE = "import tapekit; print(tapekit.__file__); print(tapekit.Cpu(seed=0).tensor([1.0, 2.0]).sum().item())"


def test_every_editable_install_in_the_makefile_uses_the_mode_that_cannot_be_shadowed():
    installs = [line for line in MAKEFILE.splitlines() if re.search(r"pip install .*-e ", line)]
    assert len(installs) >= 3, installs  # lab, test, test-versions (and gpu-check)
    for line in installs:
        assert "$(EDITABLE)" in line, f"an editable install without $(EDITABLE): {line.strip()}"


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> tuple[Path, Path]:
    """A copy of this tree in a folder named tapekit, installed as the Makefile installs it into a
    fresh virtual environment (whose dependencies are this environment's); its python."""
    home = tmp_path_factory.mktemp("home")
    clone = home / "tapekit"
    shutil.copytree(REPO / "tapekit", clone / "tapekit", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, clone / name)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home / "env")], check=True)
    python = home / "env" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
    pip("--python", str(python), "install", "-q", "--no-deps", *EDITABLE, "-e", str(clone))
    return clone, python


@pytest.mark.parametrize("how", ["python -c", "a script"])
def test_the_editable_install_is_found_from_the_clone_s_parent_folder(clone, how):
    clone, python = clone
    home = clone.parent
    (home / "use.py").write_text(USE + "\n", encoding="utf-8")
    command = [str(python), "-c", USE] if how == "python -c" else [str(python), "use.py"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    done = subprocess.run(command, cwd=home, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    file, total = done.stdout.split()
    assert Path(file).resolve() == (clone / "tapekit" / "__init__.py").resolve()
    assert total == "3.0"
