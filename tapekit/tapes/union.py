"""``UnionTape``: merged tapes become one tape for every holder, past and future (union-find)."""

from __future__ import annotations

import weakref

from .arc import SharedTape
from .base import LOCK, Record, Tape, _left_after
from ..gradients import Gradients


class Home:
    """Where the records a UnionTape recorded live: that tape, or once it merged, its union's root.
    Records keep this rather than a weak reference to the tape, because a merged tape may lose its
    last holder while its records live on in the union. Like the tapes, homes form a tree that
    points only up, so no reference cycle keeps anything alive."""

    __slots__ = ("tape", "up")

    def __init__(self, tape: "UnionTape") -> None:
        self.tape = weakref.ref(tape)
        self.up: Home | None = None  # the home of the tape this one merged into

    def __call__(self) -> "UnionTape | None":
        home = self
        while home.up is not None:
            home = home.up
        return home.tape()


class UnionTape(SharedTape):
    """The fix asked of dfdx: when two UnionTapes meet, both become one tape for every tensor that
    holds either. Union by size with path compression; the merged record lists are linked, not
    copied or sorted, so a merge costs near O(1) whatever the tapes hold."""

    policy = "union"
    __slots__ = ("_parent", "_size", "_others", "_union")

    def __init__(self, grads: Gradients | None = None, leaves=None) -> None:
        super().__init__(grads, leaves)
        self._parent: UnionTape | None = None  # None at a root (not itself: no reference cycle)
        self._size = 1
        self._others: list[list[Record]] = []  # record lists of the tapes merged into this root
        self._union: list[int] | None = None  # at a root: births of the tapes merged into it (its name)
        self._ref = Home(self)

    def _store(self) -> "UnionTape":
        root = self
        while root._parent is not None:
            root = root._parent
        node = self
        while node._parent is not None and node._parent is not root:  # path compression
            node._parent, node = root, node._parent
        return root

    def _merge(self, other: Tape, op: str) -> Tape:
        with LOCK:
            left, right = self._store(), other._store()
            if left is right:
                return left
            big, small = (left, right) if left._size >= right._size else (right, left)
            small._parent = big
            small._ref.up = big._ref
            big._size += small._size
            big._others.append(small._records)
            big._others.extend(small._others)
            big._foreign.extend(small._foreign)
            small._records, small._others, small._foreign = [], [], []
            big._grads._absorb(small._grads, other_wins=small is right)
            big._union = big._union or [big._born]
            big._union.extend(small._union or [small._born])
            small._union = None
            return big

    def _parts(self) -> list[int] | tuple[int]:
        return self._union or (self._born,)

    def _all_records(self) -> list[Record]:
        root = self._store()
        records = list(root._records)
        for chunk in root._others:
            records.extend(chunk)
        return records

    def _drain(self, ran: list[Record]) -> None:
        left = _left_after(self._all_records(), ran)
        self._records, self._others, self._foreign = left, [], self._foreign if left else []
