"""``ArcTape``: dfdx's ``Arc<Mutex<OwnedTape>>``, shared by reference between holders."""

from __future__ import annotations

from .base import LOCK, Record, Tape


class SharedTape(Tape):
    """A tape several tensors hold at once; changes to it are made under one lock, on the tape
    that holds the records (a merged UnionTape's root)."""

    __slots__ = ()

    def _record(self, rec: Record) -> None:
        with LOCK:
            Tape._record(self._store(), rec)


class ArcTape(SharedTape):
    """Clones share the tape. Two different ArcTapes meeting in an op: the left absorbs the right,
    and the right stays alive, **empty**, for its other holders, who keep recording into it. This
    is how dfdx partitions the gradients of a DAG with several outputs."""

    policy = "arc"
    allows_partial = True
    __slots__ = ()

    def _merge(self, other: Tape, op: str) -> Tape:
        with LOCK:
            self._absorb(other)
        return self
