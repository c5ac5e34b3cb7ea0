"""The other autodiff libraries measured beside tapekit, when installed (``pip install -e '.[bench]'``).

A peer that is not installed, or fails to import, is reported as absent with the reason; no figure
is ever guessed for it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from typing import Any

PEERS = {
    "torch": "PyTorch eager (CPU)",
    "autograd": "HIPS autograd",
    "mygrad": "MyGrad",
}


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


def find_peers(wanted: bool = True, threads: int = 0) -> dict[str, Peer]:
    """Every peer, imported where possible (``wanted=False``: all reported as not requested).
    ``threads``: how many threads PyTorch computes with (0: its default)."""
    peers = {}
    for key, title in PEERS.items():
        peer = Peer(key, title)
        if not wanted:
            peer.absent = "not requested (--no-peers)"
        else:
            try:
                peer.module = importlib.import_module(key)
                peer.version = importlib.metadata.version(key)
            except Exception as err:  # ImportError, or a broken install
                peer.absent = f"absent ({type(err).__name__}: {str(err).splitlines()[0][:60]})"
        if key == "torch" and peer.present and threads:
            peer.module.set_num_threads(threads)
        peers[key] = peer
    return peers
