"""``Gradients``: a map from tensor id to gradient array, with an optional leaf set."""

from __future__ import annotations

import copy
from typing import Any, Iterable, Iterator

import numpy as np

from .devices import array_nbytes
from .errors import MissingGradientError, OperandError
from .ids import label, label_all


def updatable(array: Any) -> Any:
    """``array``, made a 0-d array if numpy turned it into a scalar (as it does with 0-d sums):
    an owned entry is updated in place, and ``+=`` on a scalar would make a new one instead."""
    return np.asarray(array) if isinstance(array, np.generic) else array


def united_leaves(a: frozenset[int] | None, b: frozenset[int] | None) -> frozenset[int] | None:
    """The leaf set of two merged tapes, as in dfdx: the sets unite, and a leaky side (``None``,
    keep all) adds nothing to keep, so leaky with ``{b}`` is ``{b}``."""
    return a if b is None else b if a is None else a | b


def tensor_id(key: Any) -> int:
    """The id behind a tensor or an int id."""
    tid = getattr(key, "id", key)
    if not isinstance(tid, int) or isinstance(tid, bool):
        raise OperandError(f"Gradients are keyed by tensors or tensor ids, not {type(key).__name__}: g[x] for a "
                           f"tensor x")
    return tid


def leaf_ids(leaves: Iterable[Any] | None) -> frozenset[int] | None:
    """The ids of a leaf set given as tensors or ids (``None``: no leaf set, keep all)."""
    if leaves is None:
        return None
    if isinstance(leaves, (str, bytes)) or not hasattr(leaves, "__iter__"):
        raise OperandError(f"leaves takes a list of tensors (leaves=[w, b]), got {type(leaves).__name__}")
    return frozenset(map(tensor_id, leaves))


class Gradients:
    """Gradient arrays keyed by tensor id: ``grads[t]`` works for ``t`` and every traced handle
    of it, since they share one id.

    ``leaves`` (tensors or ids) is the set to keep: backward drops every other entry at its end.
    A lookup that finds nothing raises ``MissingGradientError`` saying why the entry is missing;
    ``is_complete(t)`` says whether an entry holds all of its gradient.

    Copies and pickles keep the ids: in this process a copy still maps the same tensors (a copy,
    shallow or deep, copies the arrays, since a backward updates entries in place). Tensors that are
    deep-copied or unpickled get new ids, so gradients do not follow them: run a backward on the
    copies for theirs. An unpickled ``Gradients`` names tensors of the process that pickled it.
    """

    __slots__ = ("_arrays", "_owned", "_clean", "leaves", "_why", "_partial", "_ran")

    def __init__(self, leaves: Iterable[Any] | None = None) -> None:
        self._arrays: dict[int, Any] = {}
        self._owned: set[int] = set()  # entries whose arrays Gradients may update in place
        self._clean: set[int] = set()  # owned entries known to hold zeros: backward may write into them
        self.leaves = leaf_ids(leaves)
        self._why: dict[int, Any] = {}  # tensor id -> why it has no entry (a str, or a ``Later``)
        self._partial: set[int] = set()  # entries a backward filled only in part (it could not see all the history)
        self._ran: Any = None  # a weak reference to the tape whose backward filled these gradients

    # -- mapping ----------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Any:
        tid = tensor_id(key)
        try:
            return self._arrays[tid]
        except KeyError:
            raise MissingGradientError(self.why_missing(key)) from None

    def get(self, key: Any, default: Any = None) -> Any:
        return self._arrays.get(tensor_id(key), default)

    def __contains__(self, key: Any) -> bool:
        return tensor_id(key) in self._arrays

    def __len__(self) -> int:
        return len(self._arrays)

    def __iter__(self) -> Iterator[int]:
        return iter(self._arrays)

    def items(self) -> Iterator[tuple[int, Any]]:
        return iter(self._arrays.items())

    @property
    def nbytes(self) -> int:
        return sum(array_nbytes(a) or 0 for a in self._arrays.values())

    # -- changes ----------------------------------------------------------------------------
    def alloc(self, tensor: Any) -> Any:
        """A zeroed buffer for ``tensor`` that backward accumulates into in place. While it holds
        zeros (after ``alloc`` or ``zero_``), a backward on numpy or CuPy writes a matmul or
        un-broadcast gradient straight into it, allocating nothing."""
        buf = tensor.device.count(tensor.device.xp.zeros(tensor.shape, dtype=tensor.dtype,
                                                          **tensor.device._placement()))
        self._arrays[tensor.id] = buf
        self._owned.add(tensor.id)
        self._clean.add(tensor.id)
        return buf

    def zero_(self) -> "Gradients":
        """Zero every entry in place (owned buffers) or replace it with zeros."""
        for tid, arr in self._arrays.items():
            if tid in self._owned:
                arr[...] = 0
            else:
                self._arrays[tid] = updatable(arr * 0)
                self._owned.add(tid)
        self._clean = set(self._owned)
        self._partial.clear()
        return self

    def drop_non_leaves(self) -> "Gradients":
        """Keep only the entries of the leaf set (no-op without one)."""
        if self.leaves is not None:
            for tid in [t for t in self._arrays if t not in self.leaves]:
                del self._arrays[tid]
                self._owned.discard(tid)
                self._clean.discard(tid)
        return self

    def accumulate(self, tid: int, grad: Any, device: Any) -> None:
        """Add ``grad`` to the entry of ``tid``: stored as is on first arrival (it may alias
        another entry), summed into a new buffer on the second, in place after that."""
        arrays = self._arrays
        old = arrays.get(tid)
        if old is None:
            arrays[tid] = grad
        elif tid in self._owned:
            if grad.dtype != old.dtype:  # an op mixed float32 and float64; array API namespaces
                grad = device.xp.astype(grad, old.dtype)  # refuse += across dtypes
            old += grad
            self._clean.discard(tid)
        else:
            arrays[tid] = device.count(updatable(old + grad))
            self._owned.add(tid)

    def _disown(self, tid: int) -> None:
        """Forget that ``tid`` had a buffer of its own (its entry was dropped)."""
        self._owned.discard(tid)
        self._clean.discard(tid)

    def filled(self, tid: int) -> None:
        """A backward rule wrote the gradient of ``tid`` into its clean buffer."""
        self._clean.discard(tid)

    def _absorb(self, other: "Gradients", other_wins: bool = True) -> None:
        """Take ``other``'s entries and unite the leaf sets; on equal ids ``other``'s entry wins
        unless ``other_wins`` is false. ``other`` is left empty. A leaky side (no leaf set) keeps
        nothing of its own: leaky with ``{b}`` is ``{b}``, as dfdx's merge does."""
        for tid, arr in other._arrays.items():
            if other_wins or tid not in self._arrays:
                self._arrays[tid] = arr
                for flags, theirs in ((self._owned, other._owned), (self._clean, other._clean)):
                    if tid in theirs:
                        flags.add(tid)
                    else:
                        flags.discard(tid)
        self._why.update(other._why)
        self._partial |= other._partial
        self.leaves = united_leaves(self.leaves, other.leaves)
        other._arrays, other._owned, other._clean, other._why, other._partial = {}, set(), set(), {}, set()

    # -- copies and pickles -----------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        """Entries with their flags, the leaf set and the reasons; not the tape that ran (a weak
        reference: a copy only forgets which tape to name in ``why_missing``)."""
        return {name: getattr(self, name) for name in self.__slots__ if name != "_ran"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self._ran = None

    def __copy__(self) -> "Gradients":
        return copy.deepcopy(self)

    # -- explanations -----------------------------------------------------------------------
    def is_complete(self, key: Any) -> bool:
        """Whether the entry of ``key`` holds its whole gradient. ``False`` when a backward that
        could not see all of its outputs' history added to it: some or all of the ways from this
        tensor to the outputs ran through records that backward did not run (its
        ``IncompleteTapeWarning`` named the tensor). ``MissingGradientError`` when there is no entry."""
        tid = tensor_id(key)
        if tid not in self._arrays:
            raise MissingGradientError(self.why_missing(key))
        return tid not in self._partial

    def why_missing(self, key: Any, *, recorded: bool | None = None) -> str:
        """The reason a tensor (or tensor id) ``key`` has no entry, in words, with what to do. Given
        the tensor, it tells one that was never traced from a traced one the outputs do not depend
        on; given only an id, it names both, unless ``recorded`` says whether a recorded op made or
        read that tensor (as for every tensor a picture or widget shows)."""
        tid = tensor_id(key)
        name = label(tid)
        if tid in self._why:
            return str(self._why[tid])
        if self.leaves is not None and tid not in self.leaves:
            return (f"{name} has no gradient: it is not in the leaf set of this backward, so its entry was "
                    f"dropped at the end. Add it to leaves=[...], or trace without a leaf set to keep all.")
        tape = self._ran() if self._ran is not None else None
        if recorded is None and not isinstance(key, int):
            recorded = key._tape is not None or key._record is not None
        return f"{name} has no gradient: {_unreached(recorded, name, tape)}."

    def __repr__(self) -> str:
        shown = _ends(list(self._arrays.items()))
        label_all([*(self.leaves or ()), *(t for t, _ in shown)])  # shown together: labelled in the order made
        leaves = "all" if self.leaves is None else "{" + _summary([label(t) for t in sorted(self.leaves)]) + "}"
        entries = _summary([f"{label(t)}: {tuple(a.shape)}{' (incomplete)' if t in self._partial else ''}"
                            for t, a in shown], len(self))
        noun = "entry" if len(self) == 1 else "entries"
        return f"Gradients({len(self)} {noun}, leaves={leaves}{'; ' + entries if entries else ''})"


SUMMARY_ENDS = 3  # as numpy summarises a long array: this many items at each end, "..." between


def _unreached(recorded: bool | None, name: str, tape: Any) -> str:
    """Why a backward that ran ``tape`` (``None``: not known) reached no op using the tensor ``name``:
    no output depends on it (a tensor in the recorded graph), or it is not traced; both, each with
    what to do, when which is not known (``recorded`` is ``None``)."""
    where = f" ({type(tape).__name__} {tape.label})" if tape is not None else ""
    unused = f"no output of this backward depends on {name}, so its gradient would be zero"
    run = f"run backward on an output computed from {name}"
    how = "(x.trace()) or an input it meets, and check tk.explain(output)"
    reached = f"no op recorded on the tape this backward ran{where} took it as an operand"
    if recorded is None:
        return f"{reached}. If {name} is traced, {unused}: {run}. If not, trace it {how}"
    if recorded:
        return f"{unused}. For its gradient, {run}"
    return f"it is not traced, and {reached}. Trace it {how}"


def _ends(items: list) -> list:
    """The first and last ``SUMMARY_ENDS`` of ``items`` when there are more than twice as many."""
    return items if len(items) <= 2 * SUMMARY_ENDS else items[:SUMMARY_ENDS] + items[-SUMMARY_ENDS:]


def _summary(texts: list[str], total: int | None = None) -> str:
    """``a, b, c, ..., x, y, z`` when ``texts`` (or ``total`` items, of which ``texts`` are the ends)
    is long."""
    total = len(texts) if total is None else total
    if total <= 2 * SUMMARY_ENDS:
        return ", ".join(texts)
    ends = _ends(texts)
    return ", ".join(ends[:SUMMARY_ENDS] + ["..."] + ends[-SUMMARY_ENDS:])
