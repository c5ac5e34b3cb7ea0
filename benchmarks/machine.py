"""What machine and which versions the figures came from."""

from __future__ import annotations

import os
import platform

import numpy as np

from .peers import Peer


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe(peers: dict[str, Peer], threads: int = 0) -> list[str]:
    """One line each: CPU and cores, Python, numpy, threads, and every peer's version or absence."""
    lines = [f"CPU: {cpu_model()}, {os.cpu_count()} cores",
             f"Python {platform.python_version()}, numpy {np.__version__}",
             f"threads: {threads} for numpy's BLAS, PyTorch and XLA" if threads else "threads: each library's default"]
    for peer in peers.values():
        lines.append(f"{peer.title}: {peer.version if peer.present else peer.absent}")
    return lines
