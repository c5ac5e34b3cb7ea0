"""The other autodiff libraries measured beside tapekit, when installed (``pip install -e '.[bench]'``).

A peer that is not installed, or fails to import, is reported as absent with the reason; no figure
is ever guessed for it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .measure import Contender, first_line

PEERS = {
    "torch": "PyTorch eager (CPU)",
    "autograd": "HIPS autograd",
    "mygrad": "MyGrad",
}


@dataclass
class Peer:
    """An importable peer library, or why it is absent."""

    title: str
    module: Any = None
    version: str = ""
    absent: str = ""

    @property
    def present(self) -> bool:
        return self.module is not None


def find_peers(wanted: bool = True, threads: int = 0) -> dict[str, Peer]:
    """Every peer, imported where possible (``wanted=False``: all reported as not requested).
    ``threads``: how many threads PyTorch computes with (0: its default)."""
    peers = {}
    for key, title in PEERS.items():
        peer = Peer(title)
        if not wanted:
            peer.absent = "not requested (--no-peers)"
        else:
            try:
                peer.module = importlib.import_module(key)
                peer.version = importlib.metadata.version(key)
            except Exception as err:  # ImportError, or a broken install
                peer.absent = f"absent ({first_line(err, 60)})"
        if key == "torch" and peer.present and threads:
            peer.module.set_num_threads(threads)
        peers[key] = peer
    return peers


def installed(module: ModuleType, peers: dict[str, Peer], *args: Any) -> list[Contender]:
    """The contenders of every installed peer for one case, in the order of ``PEERS``: each workload
    module has a function per peer, named by its key, that takes the case's arguments and the peer."""
    return [getattr(module, key)(*args, peers[key]) for key in PEERS if peers[key].present]
