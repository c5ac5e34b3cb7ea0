"""Compiling a run's loops with numba, and keeping what it compiled.

numba keeps compiled machine code across processes (``cache=True``) only for functions it can find
in a source file, beside which it writes the code. So each run's loops are written to a file named
after their source's hash, in a cache folder: ``TAPEKIT_CACHE_DIR`` if set, else
``$XDG_CACHE_HOME/tapekit`` (``~/.cache/tapekit``), else a folder in the system's temporary
directory. A second process (a notebook re-run, the next test session) that fuses the same run
loads its loops instead of compiling them. Where no folder is writable (a read-only CI image), the
loops are compiled in memory, every time.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import keyword
import os
import sys
import tempfile
import time
import tokenize
from pathlib import Path
from typing import Any

import numpy as np

from .errors import FuseUnavailable
from .loops import Loops

HEADER = "import numpy as np\nfrom numba import njit\n\n"
DECORATOR = '@njit(error_model="numpy", cache={cache})'  # numpy's error model: 1 / 0 is inf, as in numpy


def require_numba() -> None:
    """Raise ``FuseUnavailable`` unless numba can be imported."""
    if importlib.util.find_spec("numba") is None:
        raise FuseUnavailable("tk.compile(fn, fuse=True) compiles its loops with numba, which is not installed: "
                              "pip install 'tapekit[fuse]' (or pip install numba), or compile without fuse=True")


def loops_module_source(loops: Loops, cache: bool) -> str:
    """The file of a run's loops: each loop under numba's decorator."""
    decorator = DECORATOR.format(cache=cache)
    return HEADER + "\n\n\n".join(f"{decorator}\n{text}" for text in loops.loop_sources) + "\n"


def compile_loops(loops: Loops, made: dict) -> tuple[dict[str, Any], float]:
    """The run's wrapper, its loops compiled on arrays like its inputs (``made``: the earlier runs'
    buffers, to which this run's are added): name -> function, and the seconds it took."""
    start = time.perf_counter()
    folder = cache_folder()
    decorator = DECORATOR.format(cache=folder is not None)
    found = {}
    for name, text in zip(loops.loop_names, loops.loop_sources):  # a file each: loops of one source share it
        source, renamed = canonical(f"{HEADER}{decorator}\n{text}\n")
        found[name] = _load(source, folder)[renamed[name]]
    wrapper_space = {"np": np, **found}
    exec(compile(loops.wrapper_source(), f"<tk.compile fused run {loops.run.number}>", "exec"), wrapper_space)
    outs = wrapper_space[loops.wrapper](*loops.dummies(made))  # numba compiles each loop on its first call
    made.update(zip(loops.handed(), outs))
    return {loops.wrapper: wrapper_space[loops.wrapper]}, time.perf_counter() - start


_KEPT = {"numpy", "numba", "np", "njit", "range", "abs", "error_model", "cache", "True", "False", "None"}


def canonical(text: str) -> tuple[str, dict[str, str]]:
    """``text`` without its comments and with its names numbered in order (``v0``, ``v1``, ...),
    and the renaming: loops of one structure get one source, whatever their program called its
    values, so numba's cache serves them all."""
    renamed: dict[str, str] = {}
    out, before = [], ""
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            continue
        string = tok.string
        if tok.type == tokenize.NAME and string not in _KEPT and not keyword.iskeyword(string) and before != ".":
            string = renamed.setdefault(string, f"v{len(renamed)}")
        out.append((tok.type, string))
        before = string
    return tokenize.untokenize(out), renamed


def _load(source: str, folder: Path | None) -> dict[str, Any]:
    """The module of ``source``: from a file in ``folder`` (numba caches beside it), or in memory."""
    if folder is None:
        space: dict[str, Any] = {}
        exec(compile(source, "<tk.compile fused loops>", "exec"), space)
        return space
    digest = hashlib.sha1(source.encode()).hexdigest()[:20]
    path = folder / f"loops_{digest}.py"
    if not path.exists():
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(source, encoding="utf-8")
        os.replace(partial, path)  # whole or not at all: another process may be loading it
    name = f"tapekit_fused_{digest}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return vars(module)


def cache_folder() -> Path | None:
    """The first writable one of the cache folders (see the module's docstring), or None."""
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    candidates = [os.environ.get("TAPEKIT_CACHE_DIR"), os.path.join(home, "tapekit"),
                  os.path.join(tempfile.gettempdir(), f"tapekit-{os.getuid() if hasattr(os, 'getuid') else 'user'}")]
    for base in filter(None, candidates):
        folder = Path(base) / "fused"
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(folder, os.W_OK):
            return folder
    return None
