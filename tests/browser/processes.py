"""Finding processes and ending them by id, through /proc (the browser tests run on Linux).

A process is known by its id together with its command line, so that an id the system has handed
to a new process meanwhile is never signalled.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def command_line(pid: int) -> bytes | None:
    """The command line of a running process; ``None`` when it has exited (zombies have none)."""
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes() or None
    except OSError:
        return None


def running() -> dict[int, bytes]:
    """Every running process: id -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            line = command_line(int(entry.name))
            if line is not None:
                found[int(entry.name)] = line
    return found


def pids_with(marker: str) -> dict[int, bytes]:
    """The running processes whose command line contains ``marker``."""
    return {pid: line for pid, line in running().items() if marker.encode() in line}


def parent_of(pid: int) -> int | None:
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def family(pid: int) -> dict[int, bytes]:
    """``pid`` and every running process descended from it."""
    processes = running()
    children: dict[int, list[int]] = {}
    for child in processes:
        children.setdefault(parent_of(child), []).append(child)
    found, todo = {}, [pid]
    while todo:
        current = todo.pop()
        if current in processes:
            found[current] = processes[current]
        todo += children.get(current, [])
    return found


def still_running(processes: dict[int, bytes]) -> dict[int, bytes]:
    return {pid: line for pid, line in processes.items() if command_line(pid) == line}


def end(processes: dict[int, bytes], grace_s: float) -> None:
    """Wait up to ``grace_s`` for ``processes`` to exit, then SIGKILL each one still running."""
    deadline = time.monotonic() + grace_s
    while still_running(processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in still_running(processes):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
