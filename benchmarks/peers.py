"""The other autodiff libraries measured beside tapekit, when installed (``pip install -e '.[bench]'``).

A peer that is not installed, or fails to import, is reported as absent with the reason; no figure
is ever guessed for it. Two peers are compilers (JAX's ``jit`` and ``torch.compile``): their first
call traces and compiles, and is reported apart, as tapekit's compiled step's is. A compiler is not
run on programs longer than it can compile here (``COMPILED_OPS_MAX``); the report says why.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.metadata
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Collection

from .measure import Contender, first_line

PEERS = {
    "torch": "PyTorch eager (CPU)",
    "torch_compile": "torch.compile (CPU)",
    "jax": "JAX jit (CPU)",
    "autograd": "HIPS autograd",
    "mygrad": "MyGrad",
}
MODULES = {"torch_compile": "torch"}  # a peer's module, where its key is not the module's name
# The longest program each compiler is run on, and why (measured on the 2-core, 24 GiB machine of
# benchmarks/results.md: W1's chain of 1,000 ops, W4's of 10,000).
COMPILED_OPS_MAX = {
    "torch_compile": (1_000, "its first call took 38 to 44 s at 1,000 ops, in three runs"),
    "jax": (1_000, "at 10,000 its first call ran out of the machine's 24 GiB"),
}
XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


@dataclass
class Peer:
    """An importable peer library, or why it is absent."""

    key: str
    title: str
    module: Any = None
    version: str = ""
    absent: str = ""

    @property
    def present(self) -> bool:
        return self.module is not None

    def too_long(self, ops: int) -> Contender | None:
        """A contender that says why this peer is not run on a program of ``ops`` ops, or ``None``
        when it is run."""
        most, why = COMPILED_OPS_MAX.get(self.key, (ops, ""))
        return None if ops <= most else Contender(self.title, run=None, skipped=f"not run above {most:,} ops: {why}")


def find_peers(wanted: bool = True, threads: int = 0, only: Collection[str] | None = None) -> dict[str, Peer]:
    """Every peer, imported where possible (``wanted=False``: all reported as not requested;
    ``only``: those not named are reported as not requested).
    ``threads``: how many threads PyTorch computes with (0: its default; XLA is told to use one
    thread when it is 1, before JAX loads). PyTorch's inductor gets an empty cache folder of its
    own, so its first calls compile from scratch, as tk.compile's do, rather than reuse what an
    earlier run left on disk (JAX keeps no such cache unless asked)."""
    if threads == 1 and "jax" not in sys.modules:
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {XLA_ONE_THREAD}".strip()
    if wanted and "torch" not in sys.modules:
        cache = os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="tapekit-bench-inductor-")
        atexit.register(shutil.rmtree, cache, True)
    peers = {}
    for key, title in PEERS.items():
        peer = Peer(key, title)
        name = MODULES.get(key, key)
        if not wanted:
            peer.absent = "not requested (--no-peers)"
        elif only is not None and key not in only:
            peer.absent = "not requested (--peers)"
        else:
            try:
                peer.module = importlib.import_module(name)
                peer.version = importlib.metadata.version(name)
            except Exception as err:  # ImportError, or a broken install
                peer.absent = f"absent ({first_line(err, 60)})"
        if name == "torch" and peer.present and threads:
            peer.module.set_num_threads(threads)
        peers[key] = peer
    return peers


def installed(module: ModuleType, peers: dict[str, Peer], *args: Any) -> list[Contender]:
    """The contenders of every installed peer for one case, in the order of ``PEERS``: each workload
    module has a function per peer, named by its key, that takes the case's arguments and the peer."""
    return [getattr(module, key)(*args, peers[key]) for key in PEERS if peers[key].present]
