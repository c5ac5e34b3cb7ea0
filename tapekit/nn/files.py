"""Model files: parameters as named arrays in an ``.npz`` archive, read without pickle.

A checkpoint is a model file that also holds an optimizer's kind, settings and state (momentum,
Adam's moments and step counts), under names that start with ``optimizer/`` (no parameter name
holds a ``/``): ``optimizer/kind``, ``optimizer/settings/lr``, ``optimizer/state/<parameter>/m``.

A file is written whole or not at all: into a temporary file beside it, flushed to disk, then
renamed over the old one, so a save that fails (a full disk, an interrupt) leaves the old file."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
import zipfile
from typing import IO, TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from ..devices import dtype_name
from ..errors import InvalidArgumentError, ModelFileError
from ..tensor import Tensor

if TYPE_CHECKING:
    from ..optim import Optimizer

OPTIMIZER = "optimizer/"  # where a checkpoint's optimizer arrays are named


def save(named: Sequence[tuple[str, Tensor]], path: str | os.PathLike, optimizer: "Optimizer | None" = None) -> None:
    """Write each parameter under its name (the file is written at ``path`` exactly), and the
    optimizer's kind, settings and state of each parameter when one is given."""
    path = _checked(path, optimizer, "save to")
    folder = os.path.dirname(os.path.realpath(path))
    if os.path.isdir(path) or not os.path.isdir(folder):
        why = "is a folder" if os.path.isdir(path) else f"is in {folder}, which is not a folder that exists"
        raise ModelFileError(f"cannot save to {os.fspath(path)}: it {why}. Give the path of a file in a folder that "
                             f"exists, e.g. model.save('model.npz')")
    arrays = {name: p.numpy() for name, p in named}
    if optimizer is not None:
        arrays.update(_optimizer_arrays(named, optimizer))
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
            with contextlib.suppress(FileNotFoundError):  # the new file keeps the old one's permissions
                shutil.copymode(target, temp)
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


def load(named: Sequence[tuple[str, Tensor]], path: str | os.PathLike, optimizer: "Optimizer | None" = None) -> None:
    """Replace each parameter's values with the file's array of the same name, and the optimizer's
    state of each with the file's, after checking that every name, shape and dtype fits and that
    the file's optimizer is of the same kind and settings; on any mismatch nothing changes."""
    arrays = _read(_checked(path, optimizer, "load from"))
    params = dict(named)
    problems = _parameter_problems(params, {n: a for n, a in arrays.items() if not n.startswith(OPTIMIZER)})
    if optimizer is not None:
        problems += _optimizer_problems(params, arrays, optimizer)
    if problems:
        fits = "this model and optimizer" if optimizer is not None else "this model"
        raise ModelFileError(f"{os.fspath(path)} does not fit {fits}: {'; '.join(problems)}. Nothing was "
                             f"loaded. Load a file saved from a model of the same architecture"
                             f"{' and the same optimizer' if optimizer is not None else ''}.")
    for name, p in params.items():
        p.data = p.device.from_numpy(arrays[name].astype(dtype_name(p.dtype)))
    if optimizer is not None:
        for name, p in params.items():
            template = optimizer._state_of(p)
            optimizer._restore(p, {key: _state_value(p, template[key], arrays[_state_name(name, key)])
                                   for key in template})


def _parameter_problems(params: dict[str, Tensor], arrays: dict[str, Any]) -> list[str]:
    """Missing, unexpected and misshapen parameters, in words, in the model's order."""
    problems = []
    missing = [n for n in params if n not in arrays]
    unexpected = [n for n in arrays if n not in params]
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    if unexpected:
        problems.append(f"unexpected {', '.join(unexpected)}")
    for name, p in params.items():
        arr = arrays.get(name)
        if arr is not None and arr.shape != p.shape:
            problems.append(f"{name} has shape {arr.shape} in the file but {p.shape} in the model")
        elif arr is not None and arr.dtype.kind != "f":
            problems.append(f"{name} has dtype {arr.dtype} in the file; parameters are floating")
    return problems


def _state_name(param: str, key: str) -> str:
    return f"{OPTIMIZER}state/{param}/{key}"


def _optimizer_arrays(named: Sequence[tuple[str, Tensor]], optimizer: "Optimizer") -> dict[str, np.ndarray]:
    """The optimizer's kind, settings and each parameter's state (what it would start from, for a
    parameter it has not seen yet) as host arrays under their checkpoint names."""
    arrays = {OPTIMIZER + "kind": np.array(type(optimizer).__name__)}
    arrays.update({f"{OPTIMIZER}settings/{k}": np.asarray(v) for k, v in optimizer._settings().items()})
    for name, p in named:
        for key, value in optimizer._state_of(p).items():
            arrays[_state_name(name, key)] = p.device.to_numpy(value) if hasattr(value, "shape") else np.asarray(value)
    return arrays


def _optimizer_problems(params: dict[str, Tensor], arrays: dict[str, Any], optimizer: "Optimizer") -> list[str]:
    """What keeps the file's optimizer part from loading into ``optimizer``, in words."""
    kind, saved = arrays.get(OPTIMIZER + "kind"), type(optimizer).__name__
    if kind is None:
        return ["it holds no optimizer state (it was saved by model.save(path), without optimizer=)"]
    if str(kind) != saved:
        return [f"it holds the state of {kind}, not of {saved}"]
    problems = []
    for key, value in optimizer._settings().items():
        in_file = arrays.get(f"{OPTIMIZER}settings/{key}")
        if in_file is None or in_file.shape != np.shape(value) or not np.array_equal(in_file, value):
            problems.append(f"{key} is {'missing' if in_file is None else in_file.tolist()!r} in the file but "
                            f"{value!r} here")
    return problems + _state_problems(params, arrays, optimizer)


def _state_problems(params: dict[str, Tensor], arrays: dict[str, Any], optimizer: "Optimizer") -> list[str]:
    """Missing, unexpected and misshapen state arrays (not those of a parameter whose shape differs:
    that is said once, of the parameter)."""
    fit = {name: p for name, p in params.items() if arrays.get(name, p).shape == p.shape}
    wanted = {_state_name(name, key): value for name, p in fit.items()
              for key, value in optimizer._state_of(p).items()}
    misfit = tuple(_state_name(name, "") for name in params.keys() - fit.keys())
    held = {n for n in arrays if n.startswith(OPTIMIZER + "state/") and not n.startswith(misfit)}
    problems = [f"{what} optimizer state {', '.join(sorted(names))}"
                for what, names in (("missing", wanted.keys() - held), ("unexpected", held - wanted.keys())) if names]
    for name in sorted(wanted.keys() & held):
        value, arr = wanted[name], arrays[name]
        floating = hasattr(value, "shape")
        if arr.shape != np.shape(value):
            problems.append(f"{name} has shape {arr.shape} in the file but {np.shape(value)} here")
        elif arr.dtype.kind != ("f" if floating else "i"):
            kind = "floating" if floating else "an integer"
            problems.append(f"{name} has dtype {arr.dtype} in the file; it is {kind}")
        else:
            problems += _odd_values(name, arr, optimizer)
    return problems


def _odd_values(name: str, arr: np.ndarray, optimizer: "Optimizer") -> list[str]:
    """What no run of ``optimizer`` could have saved under ``name`` (whose first step would then give
    NaN): a value that is not finite, a negative step count, and what the optimizer itself refuses."""
    if not np.all(np.isfinite(arr)):
        return [f"{name} holds NaN or infinite values"]
    if arr.dtype.kind == "i" and np.any(arr < 0):
        return [f"{name} is {arr.tolist()} in the file; a step count is 0 or more"]
    odd = optimizer._odd_state(name.rsplit("/", 1)[-1], arr)
    return [f"{name} {odd}"] if odd else []


def _state_value(p: Tensor, template: Any, arr: np.ndarray) -> Any:
    """A state value from the file: an array on ``p``'s device (of the dtype it was saved in, so a
    resumed run is the same to the bit), or a number where the optimizer keeps one (a step count)."""
    return p.device.from_numpy(arr) if hasattr(template, "shape") else int(arr)


def _checked(path: Any, optimizer: Any, doing: str) -> str | os.PathLike:
    """``path`` when it names a file and ``optimizer`` is one (or ``None``); else a tapekit error."""
    from ..optim import Optimizer  # here: optim imports the modules, which import this one
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidArgumentError(f"cannot {doing} {path!r}: give a file's path, e.g. 'model.npz'")
    if optimizer is not None and not isinstance(optimizer, Optimizer):
        raise InvalidArgumentError(f"optimizer must be the model's optimizer (tk.optim.Sgd or Adam), got {optimizer!r}")
    return path


def _read(path: str | os.PathLike) -> dict[str, Any]:
    try:
        f = open(path, "rb")
    except OSError as err:
        raise ModelFileError(f"cannot load from {os.fspath(path)}: {err.strerror.lower()}. Give the path of a file "
                             f"written by model.save(path)") from None
    with f:
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
