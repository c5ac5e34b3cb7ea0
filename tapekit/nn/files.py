"""Model files: parameters as named arrays in an ``.npz`` archive, read without pickle."""

from __future__ import annotations

import os
import zipfile
from typing import Any, Sequence

import numpy as np

from ..devices import dtype_name
from ..errors import ModelFileError
from ..tensor import Tensor


def save(named: Sequence[tuple[str, Tensor]], path: str | os.PathLike) -> None:
    """Write each parameter under its name (the file is written at ``path`` exactly)."""
    with open(path, "wb") as f:
        np.savez(f, **{name: p.numpy() for name, p in named})


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
