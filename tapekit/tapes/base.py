"""What every tape policy shares: the record of one op, the tape interface, and spent handles.

A policy is a ``Tape`` subclass that decides three things: how two tapes merge when their
tensors meet in an op (``_merge``), what ``clone()``/``retaped()`` give (``_shared``/``_fresh``),
and what is left after a backward (``_after_backward``). Nothing outside ``tapes/`` asks which
policy it holds.
"""

from __future__ import annotations

import operator
import threading
import weakref
from typing import Any, Callable, Iterable, Sequence

from ..devices import array_nbytes
from ..errors import OperandError, TapeConsumedError, TapeError, TapeMovedError
from ..gradients import Gradients, leaf_ids
from ..ids import Later, _births, label, label_all, letter_all, tape_colour, tape_list, tape_name

LOCK = threading.Lock()  # guards every change to a tape that several holders share (never taken twice)


class Record:
    """One recorded op: its id, name, operand ids and shapes, output, and backward rules.

    ``rules[i](g, *saved)`` maps the output's gradient ``g`` to operand ``i``'s (``None`` for
    constants); ``saved`` holds what the forward kept for them. ``shapes`` arrives as the pair
    (operand shapes, output shape) that ``emit`` shares among records of the same shapes, and is
    kept as ``shapes`` and ``out_shape``.
    ``parents`` are the records that made the operands, so an output's history can be walked
    whichever tape holds it. ``home`` is a weak reference to the tape that holds the record,
    ``None`` once a backward consumed it (then ``consumed_by`` says which).
    ``links`` says which saved values are the op's output's array or an operand's own, so a
    backward recorded for a second derivative hands the rules those tensors instead of constants
    and flows on through them: ``link(j)`` reads it (see ``ops.core.saved_links``).

    Most ops have at most one operand that another op made (a chain, ``x @ W + b``), so a record
    keeps the first operand's parent itself and a tuple only for the other operands' parents, when
    one of them has any (``other_parents``, else ``None``): one object per record rather than two,
    which halves what Python's garbage collector walks over a long tape.
    """

    __slots__ = ("id", "name", "inputs", "shapes", "out", "out_shape", "dtype", "rules", "saved",
                 "first_parent", "other_parents", "home", "consumed_by", "links")

    def __init__(self, rid: int, name: str, inputs: tuple, shapes: tuple, out: int, dtype: Any,
                 rules: Sequence[Callable | None], saved: tuple, first_parent: "Record | None",
                 other_parents: "tuple | None", links: int = 0) -> None:
        self.id = rid
        self.name = name
        self.inputs = inputs
        self.shapes, self.out_shape = shapes
        self.out = out
        self.dtype = dtype
        self.rules = rules
        self.saved = saved
        self.first_parent = first_parent
        self.other_parents = other_parents
        self.home: weakref.ref | None = None
        self.consumed_by: Later | None = None  # the backward that let it go, named when read
        self.links = links

    @property
    def parents(self) -> tuple:
        """The record that made each operand (``None`` for a constant or a tensor no op made)."""
        return (self.first_parent,) + (self.other_parents or (None,) * (len(self.inputs) - 1))

    def link(self, j: int) -> int | None:
        """What ``saved[j]`` is: operand ``k``'s own array (``k``), the output's (-1), or neither (``None``)."""
        digit = self.links // (len(self.inputs) + 2) ** j % (len(self.inputs) + 2)
        return None if digit == 0 else digit - 2

    @property
    def saved_bytes(self) -> int:
        """Bytes of the arrays this record keeps alive for its backward rules."""
        arrays = {id(v): array_nbytes(v) for v in self.saved or ()}  # x * x saves one array twice
        return sum(n for n in arrays.values() if n is not None)

    def line(self) -> str:
        """The recorded op as a line of a program: ``t3 = mul(x, y)`` (tensors named as in
        `tapekit.ids`; ``const`` for an operand no tensor gave)."""
        label_all((*self.inputs, self.out))
        args = ", ".join("const" if i is None else label(i) for i in self.inputs)
        return f"{label(self.out)} = {self.name}({args})"

    def __repr__(self) -> str:
        return f"Record({self.line()})"


class Tape:
    """Base class of the recording policies. Make one with ``grads`` (a ``Gradients`` to record
    into, e.g. from ``model.alloc_grads()``) and/or ``leaves`` (the tensors whose gradients to keep).

    When two tapes merge, under every policy, their leaf sets unite as in dfdx: a tape without a
    leaf set (leaky, keeps all) adds nothing to keep, so a leaky tape that absorbs one with
    ``leaves=[b]`` keeps ``b``'s gradient only.
    """

    policy = "tape"
    moves = False  # True when an op takes its operands' tapes away from them (OwnedTape)
    allows_partial = False  # True: a backward that cannot see all its history warns instead of raising
    __slots__ = ("_records", "_foreign", "_grads", "_took", "_into", "_drained", "_ref", "_spent", "_born",
                 "_transform", "__weakref__")

    def __init__(self, grads: Gradients | None = None, leaves: Iterable[Any] | None = None) -> None:
        if grads is None:
            grads = Gradients(leaves=leaves)
        elif not isinstance(grads, Gradients):
            raise OperandError(f"a tape's grads is a Gradients to record into (model.alloc_grads()), got "
                               f"{type(grads).__name__}; for a leaf set pass leaves=[...]")
        elif leaves is not None:
            grads.leaves = leaf_ids(leaves)
        self._records: list[Record] = []
        self._foreign: list[Record] = []  # parents of this tape's records that lived elsewhere when recorded
        self._grads = grads
        self._took: list[int] | None = None  # births of the tapes this one absorbed (their names)
        self._into: int | None = None  # birth of the tape that absorbed this one
        self._drained: str | None = None  # the backward that last drained this tape
        self._ref = weakref.ref(self)
        self._spent: Exception | None = None  # set once this object can no longer record
        self._born = next(_births)
        self._transform: str | None = None  # the transform (tk.grad, tk.vjp) that made this tape for its arguments

    # -- the interface the ops and backward use ----------------------------------------------
    def _live(self) -> "Tape":
        """This tape, or the error it stands for once it was moved away or consumed."""
        if self._spent is not None:
            raise_spent(self)
        return self

    def _store(self) -> "Tape":
        """The object that holds the records (itself, except for merged UnionTapes)."""
        return self

    def _record(self, rec: Record) -> None:
        home = rec.home = self._ref
        self._records.append(rec)
        first = rec.first_parent
        if first is not None and first.home is not home:
            self._foreign.append(first)
        for parent in rec.other_parents or ():
            if parent is not None and parent.home is not home:
                self._foreign.append(parent)

    def _merge(self, other: "Tape", op: str) -> "Tape":
        """The tape of an op's output when this tape (left) meets ``other`` (right)."""
        raise NotImplementedError

    def _shared(self) -> "Tape":
        """What ``clone()`` of a tensor holding this tape carries."""
        return self

    def _fresh(self) -> "Tape":
        """What ``retaped()`` carries: a new empty tape of the same policy and leaf set."""
        return type(self)(leaves=self._store()._grads.leaves)

    def _take(self, retain: bool, ran: list[Record]) -> Gradients:
        """The gradients for a backward that ran the records ``ran``, which are let go unless
        ``retain``; records made since (by another thread) stay for a later backward."""
        with LOCK:
            store = self._store()
            grads = store._grads
            store._grads = Gradients(leaves=grads.leaves if retain else None)
            if not retain:
                store._drain(ran)
        return grads

    def _all_records(self) -> list[Record]:
        """A new list of the records this tape holds, in no particular order."""
        return list(self._store()._records)

    def _drain(self, ran: list[Record]) -> None:
        """Let go of the records in ``ran`` (called on the store)."""
        left = _left_after(self._all_records(), ran)
        self._records = left
        self._foreign = self._foreign if left else []

    def _after_backward(self, outputs: Sequence[Any], by: str) -> None:
        """Leave the tape as the policy says after a backward without ``retain``: a shared tape
        is drained, and records again."""
        self._store()._drained = by

    def _absorb(self, other: "Tape") -> None:
        """Move ``other``'s records, gradient entries and leaf set into this tape, which names it
        among the tapes it absorbed (``_state``)."""
        self._take_in(other)
        took = self._took = self._took or []
        took.append(other._born)
        took.extend(other._took or ())
        other._into = self._born

    def _take_in(self, other: "Tape") -> None:
        """Move ``other``'s records, gradient entries and leaf set into this tape, noting nothing:
        ``other`` was no tape of the program (a recorded backward's scratch tape)."""
        if other._records:
            ref = self._ref
            for rec in other._records:
                rec.home = ref
            self._records.extend(other._records)
            self._foreign.extend(other._foreign)
            other._records, other._foreign = [], []
        self._grads._absorb(other._grads)

    # -- copies and pickles ------------------------------------------------------------------
    def _refuse(self, action: str) -> None:
        raise TapeError(f"cannot {action} this {type(self).__name__}: a tape is not a value, it records "
                        f"what this process computes. Copy or pickle values instead: tensors without tapes "
                        f"(x.detach()), Gradients, modules and optimizers.")

    def __copy__(self) -> "Tape":
        self._refuse("copy")

    def __deepcopy__(self, memo: dict) -> "Tape":
        self._refuse("deepcopy")

    def __reduce__(self) -> tuple:
        self._refuse("pickle")

    # -- inspection ---------------------------------------------------------------------------
    @property
    def label(self) -> str:
        """This tape's name, the same in every printout and picture (`tapekit.ids`): ``A``, given
        the first time a tape is shown; ``A∪B`` for UnionTapes A and B merged into one."""
        return tape_name(self._store()._parts())

    @property
    def colour(self) -> str:
        """This tape's colour in every picture, which follows from its name (`tapekit.ids`)."""
        return tape_colour(self._store()._parts())

    def _parts(self) -> Sequence[int]:
        """The births of the tapes this one is made of (called on the store)."""
        return (self._born,)

    def _named(self) -> list[int]:
        """The births of the tapes this one's name and state name (called on the store): its parts,
        those it absorbed and the one it was emptied into. What shows it letters them all at once,
        so that they are lettered in the order they were made (`tapekit.ids`)."""
        return [*self._parts(), *(self._took or ()), *([self._into] if self._into is not None else [])]

    def _state(self) -> str:
        """What merges and backwards did to this tape, in words: ``absorbed B``, ``emptied into A``,
        ``drained by the backward on loss, records again`` (empty when nothing did)."""
        store = self._store()
        letter_all(store._named())
        words = []
        if store._into is not None:
            words.append(f"emptied into {tape_name([store._into])}")
        if store._took:
            words.append(f"absorbed {tape_list(store._took)}")
        if store._drained is not None and not len(self):
            words.append(f"drained by {store._drained}, records again")
        return "; ".join(words)

    def same_as(self, other: "Tape") -> bool:
        """Whether this handle and ``other`` record into one tape: after a UnionTape merge each
        holder keeps its own handle (``z.tape is zz.tape`` is False), yet both lead to one tape
        holding all the records. A spent handle raises its error."""
        return self._live()._store() is other._live()._store()

    @property
    def records(self) -> tuple[Record, ...]:
        return tuple(sorted(self._all_records(), key=_by_id))

    @property
    def grads(self) -> Gradients:
        return self._store()._grads

    @property
    def leaves(self) -> frozenset[int] | None:
        return self._store()._grads.leaves

    @property
    def nbytes(self) -> int:
        """Bytes this tape keeps alive: saved arrays of its records plus its gradient entries."""
        return sum(r.saved_bytes for r in self._all_records()) + self.grads.nbytes

    def __len__(self) -> int:
        return len(self._all_records())

    def _leaves_text(self) -> str:
        leaves = self.leaves
        return "all" if leaves is None else "{" + ", ".join(label(t) for t in sorted(leaves)) + "}"

    def _heading(self) -> str:
        """``ArcTape A (absorbed B): 2 records``: the first line of its printout."""
        state = self._state()
        return (f"{type(self).__name__} {self.label}{f' ({state})' if state else ''}: "
                f"{plural(len(self), 'record')}")

    def __repr__(self) -> str:
        if self._spent is not None:
            name = f" {self.label}" if getattr(self, "_born", None) is not None else ""
            return f"<{type(self).__name__}{name}: {self._spent}>"
        return (f"<{self._heading()}, {plural(len(self.grads), 'gradient entry', 'gradient entries')}, "
                f"leaves={self._leaves_text()}>")

    def __str__(self) -> str:
        """The recorded program, one op a line, oldest first: ``z = add(x, y)  # (2,)``."""
        if self._spent is not None:
            return repr(self)
        records = self.records
        label_all(tid for rec in records for tid in (*rec.inputs, rec.out))
        lines = [f"{self._heading()}, leaves={self._leaves_text()}"]
        code = [rec.line() for rec in records]
        width = max(map(len, code), default=0)
        lines += [f"  {line:<{width}}  # {_shape_text(rec.out_shape)}" for line, rec in zip(code, records)]
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``1 record``, ``2 records`` (``many``: the plural when it is not ``noun + "s"``)."""
    return f"{n} {noun if n == 1 else many or noun + 's'}"


def _shape_text(shape: Sequence[int]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


_by_id = operator.attrgetter("id")  # the sort key of records: creation order


def _left_after(records: list[Record], ran: list[Record]) -> list[Record]:
    """The records of ``records`` that are not in ``ran`` (none, unless another thread recorded
    while a backward ran)."""
    if len(records) == len(ran):
        return []
    gone = {id(rec) for rec in ran}
    return [rec for rec in records if id(rec) not in gone]


class SpentTape(Tape):
    """What a tensor carries after its tape was moved away or consumed: using it raises.

    It holds no records and no gradients. Its error is written only when asked for
    (``make(*args)``): under OwnedTape every op spends its operands' handles, and most of them are
    never touched again. ``of`` is the birth of the OwnedTape it stood for, which its printout names
    (`tapekit.ids`).
    """

    policy = "spent"
    __slots__ = ("_make", "_args", "_of")

    def __init__(self, make: Callable[..., Exception], *args: Any, of: int | None = None) -> None:
        self._make = make
        self._args = args
        self._of = of

    @property
    def _spent(self) -> Exception:  # type: ignore[override]  # computed here, a slot on live tapes
        return self._make(*self._args)

    def _store(self) -> "Tape":
        raise_spent(self)
        return self

    def __repr__(self) -> str:
        """``<consumed OwnedTape A: ...>`` (``<MovedTape of OwnedTape A: ...>``): what became of the
        tape the handle stood for, and why it cannot record."""
        if type(self) is SpentTape and self._make is consumed_of:  # a MovedTape keeps no ``_make``
            return f"<consumed OwnedTape {tape_name([self._of])}: {self._spent}>"
        of = "" if self._of is None else f" of OwnedTape {tape_name([self._of])}"
        return f"<{type(self).__name__}{of}: {self._spent}>"


class MovedTape(SpentTape):
    """What an operand (tensor ``tid``) shows after op ``rec`` moved its OwnedTape into its output
    (``x.tape``). The tensor itself keeps only the mark ``MOVED``, the record (``_moved_by``) and the
    birth of the tape it held (``_moved_from``), and this handle, which explains and names that tape,
    is made when asked for: most operands are never looked at
    again, and making one for each op was 3% of the time of a chain of small ops (the benchmarks'
    W1 under OwnedTape, measured)."""

    __slots__ = ("_tid", "_by")

    def __init__(self, tid: int, rec: Record, of: int) -> None:
        self._tid = tid
        self._by = rec
        self._of = of

    @property
    def _spent(self) -> Exception:  # type: ignore[override]
        return moved_into(self._tid, self._by)


def is_spent(tape: Tape) -> bool:
    """Whether a tape handle can no longer record, without writing its error (which names tensors)."""
    return isinstance(tape, SpentTape) or tape._spent is not None


def raise_spent(tape: Tape) -> None:
    """Raise a fresh copy of the error a spent tape stands for."""
    err = tape._spent
    raise type(err)(*err.args)


def moved_into(tid: int, rec: Record) -> TapeMovedError:
    """The error of a handle (tensor ``tid``) whose OwnedTape the op of ``rec`` moved into its output."""
    label_all([tid, *rec.inputs, rec.out])  # named together: labelled in the order they were made
    return moved_error(f"{label(tid)}'s OwnedTape", f"`{rec.line()}`")  # the line names the output


def moved_error(who: str, op: str, into: str = "") -> TapeMovedError:
    return TapeMovedError(
        f"{who} was moved into the output of {op}{into}: an OwnedTape has one owner, "
        f"and the op took it. Use the op's output instead, call .retaped() before the op for a second "
        f"branch, or share one tape with ArcTape or UnionTape.")


MOVED = SpentTape(moved_error, "this OwnedTape", "an op")  # what an operand keeps: see MovedTape


def consumed_of(tid: int, by: str) -> TapeConsumedError:
    """The error of using the output (tensor ``tid``) whose OwnedTape ``by`` consumed."""
    return consumed_error(f"{label(tid)}'s OwnedTape", by)


def consumed_error(who: str, by: str) -> TapeConsumedError:
    """The error of using ``who`` (``this OwnedTape``, ``loss's OwnedTape``) once the backward ``by``
    consumed it. (A backward only drains a shared tape, which records again: ``backward._let_go_error``
    says so in those words.)"""
    return TapeConsumedError(Later(lambda: f"the records of {who} were consumed by {by}. {KEEP_RECORDS}"))


KEEP_RECORDS = ("Call backward(retain=True) to keep the records for another backward, or run tk.backward([...]) "
                "over all outputs at once.")
