"""Model files: parameters as named arrays in an ``.npz`` archive, read without pickle.

A file is written whole or not at all: into a temporary file beside it, flushed to disk, then
renamed over the old one, so a save that fails (a full disk, an interrupt) leaves the old file."""

from __future__ import annotations

import contextlib
import os
import uuid
import zipfile
from typing import IO, Any, Iterator, Sequence

import numpy as np

from ..devices import dtype_name
from ..errors import ModelFileError
from ..tensor import Tensor


def save(named: Sequence[tuple[str, Tensor]], path: str | os.PathLike) -> None:
    """Write each parameter under its name (the file is written at ``path`` exactly)."""
    arrays = {name: p.numpy() for name, p in named}
    with replacing(path) as f:
        np.savez(f, **arrays)


@contextlib.contextmanager
def replacing(path: str | os.PathLike) -> Iterator[IO[bytes]]:
    """A new file to write in the block, which replaces ``path`` once the block is done and the file
    is on disk; if anything fails (an interrupt too), ``path`` is as it was and the new file is gone."""
    target = os.path.realpath(path)  # a link stays a link: the file it points to is replaced
    folder, name = os.path.split(target)
    temp = os.path.join(folder, f".{name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(temp, "xb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    _sync_folder(folder)


def _sync_folder(folder: str) -> None:
    """Put the rename itself on disk (POSIX); where a folder cannot be opened (Windows), skip it."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def load(named: Sequence[tuple[str, Tensor]], path: str | os.PathLike) -> None:
    """Replace each parameter's values with the file's array of the same name, after checking
    that every name, shape and dtype fits; on any mismatch nothing changes."""
    arrays = _read(path)
    params = dict(named)
    problems = []
    missing = [n for n in params if n not in arrays]
    unexpected = [n for n in arrays if n not in params]
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    if unexpected:
        problems.append(f"unexpected {', '.join(unexpected)}")
    for name in params.keys() & arrays.keys():
        arr, p = arrays[name], params[name]
        if arr.shape != p.shape:
            problems.append(f"{name} has shape {arr.shape} in the file but {p.shape} in the model")
        elif arr.dtype.kind != "f":
            problems.append(f"{name} has dtype {arr.dtype} in the file; parameters are floating")
    if problems:
        raise ModelFileError(f"{os.fspath(path)} does not fit this model: {'; '.join(problems)}. Nothing was "
                             f"loaded. Load a file saved from a model of the same architecture.")
    for name, p in params.items():
        p.data = p.device.from_numpy(arrays[name].astype(dtype_name(p.dtype)))


def _read(path: str | os.PathLike) -> dict[str, Any]:
    with open(path, "rb") as f:
        try:
            archive = np.load(f, allow_pickle=False)
            if not isinstance(archive, np.lib.npyio.NpzFile):
                raise ValueError("it holds one array, not named parameters")
            with archive:
                return {name: archive[name] for name in archive.files}
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
            raise ModelFileError(f"{os.fspath(path)} is not a model file tapekit can read safely ({err}). Model "
                                 f"files are .npz archives of plain arrays written by model.save(path); "
                                 f"pickled objects are refused.") from None
