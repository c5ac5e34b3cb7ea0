"""One global clock, and the one naming scheme of tapekit: one name for each tensor and one name
and colour for each tape object, for its whole life, in every printout (``print(tape)``, ``repr``),
error and warning message, picture (``tk.viz``) and widget (``tk.widgets``).

The scheme
----------
* **Tensors.** A tensor is called by its ``name=`` (or ``t.name = ...``; the widgets name a replayed
  program's tensors after its variables). A tensor without one gets a label ``t1``, ``t2``, ... the
  first time anything shows it, kept for life and never given to another tensor; tensors first
  shown together are numbered in the order they were made.
* **Tapes.** A tape object gets a letter ``A``, ``B``, ... ``Z``, ``AA``, ... the first time anything
  shows it, never reused; tapes first shown together are lettered in the order they were made. So
  letters follow the program, and stay small however many tapes a training loop makes unseen.
* **Colour.** A tape's colour follows from its letter: ``TAPE_COLOURS[letter number % 6]``, the
  Okabe-Ito colours that colour-blind readers can tell apart (red is kept for a missing gradient,
  grey for records a backward let go).
* **Merges say what they made.** UnionTape: when A meets B both become one tape, called ``A∪B``
  by every holder, in A's colour (its first letter). OwnedTape and ArcTape: the left tape A
  *absorbed* B and keeps its name; B was *moved* (OwnedTape: its holder can no longer record) or
  *emptied* (ArcTape: it stays alive, empty, for its holders to record on again).
* **After a backward** without ``retain``: a shared tape (ArcTape, UnionTape, GlobalTape) is
  *drained*: it keeps its name, holds no records and records again. An OwnedTape is *consumed*: it
  cannot record any more. Either way the records the backward ran are let go, drawn grey and
  dashed in every picture.
* **Replayed programs** (``tk.widgets.Replay``, behind every widget) run a program afresh for each
  picture. Their tapes and unnamed tensors are named by their place in the run (the program's first
  tape, its third unnamed tensor), once for each program and policy: every run, step and widget of
  one program under one policy names them alike, and nothing else takes those names.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import string
from typing import Any, Hashable, Iterable, Iterator, Sequence

next_id = itertools.count().__next__
_births = itertools.count()  # creation order of tapes: ``tape._born``

# Okabe-Ito, without vermillion: red is kept for missing gradients.
#: The tapes' colours, by letter number modulo 6 (A, G, M, ... share the first).
TAPE_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#F0E442")
NAMED_PARTS = 3  # a merged tape names at most this many of the tapes it is made of, then counts the rest

_given: dict[int, str] = {}  # tensor id -> the name it was given
_labels: dict[int, str] = {}  # tensor id -> the label handed out to it
_letters: dict[int, int] = {}  # tape birth -> its letter number
_tensor_count = itertools.count(1)
_letter_count = itertools.count()


class _Runs:
    """The replayed runs, oldest first (they never overlap): where each starts and ends on the two
    clocks, and the program it replays; with the names handed out to each program's tapes and tensors."""

    def __init__(self) -> None:
        self.births: list[int] = []  # first tape birth of each run
        self.ids: list[int] = []  # first id of each run
        self.ends: list[tuple[float, float]] = []  # (birth, id) after each run; infinity while it runs
        self.keys: list[Hashable] = []
        self.letters: dict[tuple[Hashable, int], int] = {}  # (program, place) -> letter number
        self.labels: dict[tuple[Hashable, int], str] = {}  # (program, offset) -> tensor label

    def of(self, value: int, starts: list[int], end: int) -> tuple[Hashable, int] | None:
        """(program, place in its run) of a tape birth or tensor id, ``None`` outside every run."""
        i = bisect.bisect(starts, value) - 1
        if i < 0 or value >= self.ends[i][end]:
            return None
        return self.keys[i], value - starts[i]


_runs = _Runs()


@contextlib.contextmanager
def replayed(program: Hashable) -> Iterator[None]:
    """Name the tapes and unnamed tensors made inside the block as those of every other run of
    ``program`` (e.g. a function's code and a policy)."""
    _runs.births.append(next(_births))
    _runs.ids.append(next_id())
    _runs.ends.append((float("inf"), float("inf")))
    _runs.keys.append(program)
    try:
        yield
    finally:
        _runs.ends[-1] = (next(_births), next_id())


# -- tensors -----------------------------------------------------------------------------------
def set_name(tid: int, name: str) -> None:
    _given[tid] = str(name)


def name_of(tid: int) -> str | None:
    """The name given to the tensor with this id, ``None`` when it has none."""
    return _given.get(tid)


def label(tid: int | None) -> str:
    """What every printout, message and picture calls the tensor with this id: its name, else its
    label (``t7``), handed out now if it has none yet."""
    if tid is None:
        return "a constant"
    name = _given.get(tid) or _labels.get(tid)
    if name is not None:
        return name
    run = _runs.of(tid, _runs.ids, 1)
    if run is None:
        name = _labels[tid] = f"t{next(_tensor_count)}"
    else:
        name = _runs.labels.get(run)
        if name is None:
            name = _runs.labels[run] = f"t{next(_tensor_count)}"
    return name


def label_all(tids: Iterable[int | None]) -> None:
    """Hand out labels to the tensors about to be shown together, in the order they were made."""
    for tid in sorted({t for t in tids if t is not None}):
        label(tid)


# -- tapes -------------------------------------------------------------------------------------
def letter_number(birth: int) -> int:
    """The letter number of the tape born ``birth`` (0 for ``A``), handed out now if it has none."""
    got = _known_letter(birth)
    if got is not None:
        return got
    run = _runs.of(birth, _runs.births, 0)
    if run is None:
        got = _letters[birth] = next(_letter_count)
    else:
        got = _runs.letters[run] = next(_letter_count)
    return got


def _known_letter(birth: int) -> int | None:
    """The letter number the tape born ``birth`` has been handed, or None."""
    got = _letters.get(birth)
    if got is None:
        run = _runs.of(birth, _runs.births, 0)
        got = None if run is None else _runs.letters.get(run)
    return got


def letter_all(births: Iterable[int]) -> None:
    """Hand out letters to the tapes about to be shown together, in the order they were made."""
    for birth in sorted(set(births)):
        letter_number(birth)


def letters(number: int) -> str:
    """``A`` for 0, ... ``Z``, then ``AA``, ``AB``, ..."""
    text = ""
    while True:
        number, digit = divmod(number, 26)
        text = string.ascii_uppercase[digit] + text
        if number == 0:
            return text
        number -= 1


def tape_name(parts: Sequence[int]) -> str:
    """The name of the tape made of the tapes born ``parts``: ``A``, or for a union ``A∪B``
    (``A∪B∪C∪… 7 tapes`` when it has more than ``NAMED_PARTS + 1``)."""
    shown = _shown(parts)
    text = "∪".join(letters(n) for n in sorted(map(letter_number, shown)))
    return text if len(shown) == len(parts) else f"{text}∪… {len(parts)} tapes"


def tape_colour(parts: Sequence[int]) -> str:
    """The colour of the tape made of the tapes born ``parts``: that of its first letter."""
    return TAPE_COLOURS[min(map(letter_number, _shown(parts))) % len(TAPE_COLOURS)]


def _shown(parts: Sequence[int]) -> list[int]:
    """The parts a tape's name shows, lettered: all of them, or the ``NAMED_PARTS`` with the first
    letters, those not lettered yet after the others in the order they were made. A union that
    grows keeps its first letter, so its name and colour (when one of those letters was handed
    out late, ordering by birth dropped it from the name, and the colour changed mid-life)."""
    if len(parts) <= NAMED_PARTS + 1:
        shown = sorted(parts)
    else:
        shown = sorted(parts, key=_by_letter)[:NAMED_PARTS]
    letter_all(shown)
    return shown


def _by_letter(birth: int) -> tuple:
    """Where a part sorts in a union's name: lettered parts by letter, then the others by birth."""
    got = _known_letter(birth)
    return got is None, got or 0, birth


def tape_list(births: Sequence[int]) -> str:
    """``B``, ``B and C``, ``B, C, D and 4 other tapes``: the tapes born ``births``, in words, the
    ones named picked as a union of them picks its name's (``_shown``), in the order of their letters."""
    parts = sorted(set(births))
    shown = _shown(parts)
    words = [letters(n) for n in sorted(map(letter_number, shown))]
    if len(shown) < len(parts):
        words.append(f"{len(parts) - len(shown)} other tapes")
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def of_tape(tape: Any) -> tuple[int, ...]:
    """The births of the tapes a live tape object is made of (several for a merged UnionTape)."""
    return tuple(tape._store()._parts())


def name_unshown(tid: int, name: str) -> None:
    """Name the tensor ``name`` unless it has a name or was shown already (then it keeps its label)."""
    if tid in _given or tid in _labels:
        return
    run = _runs.of(tid, _runs.ids, 1)
    if run is None or run not in _runs.labels:
        set_name(tid, name)


class Later:
    """Text written the first time it is read (``str``), so that a message kept for later (what a
    backward let go, why a tape is spent) hands out tensor labels only if someone reads it."""

    __slots__ = ("_make", "_text", "tids")

    def __init__(self, make: Any, tids: tuple[int, ...] = ()) -> None:
        self._make = make
        self._text: str | None = None
        self.tids = tids  # the tensors it names: what shows it with others labels them together (``label_all``)

    def __str__(self) -> str:
        if self._text is None:
            self._text, self._make = self._make(), None
        return self._text

    def __repr__(self) -> str:
        return repr(str(self))

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (Later, str)) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def after(self, prefix: str) -> "Later":
        """``prefix`` and this text, written when read."""
        return Later(lambda: prefix + str(self), self.tids)


def labels_later(tids: Sequence[int]) -> Later:
    """``x, t3``: the labels of the tensors with these ids, handed out when first read."""
    tids = tuple(tids)
    return Later(lambda: ", ".join(label(t) for t in tids), tids)
