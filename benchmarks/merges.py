"""W6: k tapes merged, in two orders.

Each of ``k`` inputs is traced on its own tape and records one op (``exp``); then the ``k`` tensors
are added into one, ``k - 1`` adds, each merging two tapes. Under OwnedTape and ArcTape a merge moves
the right tape's records into the left one, so it costs O(size of the right tape); under UnionTape it
links the two (union by size), at a cost that must not grow with ``k``. Two orders of the same adds:

- ``pairwise``: neighbours are added level by level, as in a tournament. The two tapes of a merge are
  of equal size, so the records a merge moves are about log2(k) on average: absorbing is cheap.
- ``small left``: ``x0 + (x1 + (x2 + ...))``, from the right. The left tape of every merge holds one
  op and the right one everything merged so far, so under OwnedTape and ArcTape the j-th merge from
  the end moves about 2j records: O(k) a merge, O(k^2) in all. UnionTape makes the small tape point at
  the large one whichever side it is on.

Both orders run the same numpy ops, and are timed against one floor (the pairwise one). The small-left
order of OwnedTape and ArcTape is left out above ``SMALL_LEFT_ABSORB_MAX_K``: at k = 100,000 one run
would take about 100 times as long as at k = 10,000 (some two minutes), and the suite runs each
contender 9 times. Every contender returns the final value.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

import tapekit as tk

from .measure import Contender

PAIRWISE = "pairwise"
SMALL_LEFT = "small left"  # a one-op left tape absorbs (or, under UnionTape, joins) a large right one
ORDERS = (PAIRWISE, SMALL_LEFT)
SMALL_LEFT_ABSORB_MAX_K = 10_000  # the largest k at which OwnedTape and ArcTape run the small-left order


def values(k: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return list(rng.uniform(-1, 1, (k, 1)).astype(np.float32))


def _tournament(nodes: list[Any]) -> Any:
    while len(nodes) > 1:
        paired = [a + b for a, b in zip(nodes[::2], nodes[1::2])]
        nodes = paired + nodes[len(paired) * 2:]
    return nodes[0]


def _from_the_right(nodes: list[Any]) -> Any:
    acc = nodes[-1]
    for node in reversed(nodes[:-1]):
        acc = node + acc  # the left operand's tape holds one op; the right's, all merged so far
    return acc


COMBINE: dict[str, Callable[[list[Any]], Any]] = {PAIRWISE: _tournament, SMALL_LEFT: _from_the_right}


def named(name: str, order: str) -> str:
    """A contender's name in ``order``: the pairwise order keeps the plain name."""
    return name if order == PAIRWISE else f"{name}, {order}"


def split(name: str) -> tuple[str, str]:
    """A contender's name and the order it merges in: ``named``'s inverse (``PAIRWISE`` for names of
    other workloads)."""
    for order in ORDERS[1:]:
        if name.endswith(f", {order}"):
            return name[: -len(order) - 2], order
    return name, PAIRWISE


def floor(xs: list[np.ndarray]) -> Contender:
    """numpy alone: the same ops, with nothing recorded."""
    return Contender("numpy floor", lambda: [_tournament([np.exp(x) for x in xs])])


def tapekit(xs: list[np.ndarray], policy: type[tk.Tape], order: str = PAIRWISE) -> Contender:
    """The inputs are traced on fresh tapes before the clock starts; the ops and merges are timed."""
    dev = tk.Cpu()
    combine = COMBINE[order]

    def setup() -> list[tk.Tensor]:
        return [dev.tensor(x).trace(policy()) for x in xs]

    def run(inputs: list[tk.Tensor]) -> list[Any]:
        return [combine([t.exp() for t in inputs]).numpy()]

    return Contender(named(f"tapekit {policy.__name__}", order), run, setup=setup)


def contenders(k: int) -> list[Contender]:
    """The floor first, then tapekit under each merging policy: pairwise, then small left (OwnedTape
    and ArcTape only up to ``SMALL_LEFT_ABSORB_MAX_K``)."""
    xs = values(k)
    policies = (tk.OwnedTape, tk.ArcTape, tk.UnionTape)
    small_left = [p for p in policies if p is tk.UnionTape or k <= SMALL_LEFT_ABSORB_MAX_K]
    return ([floor(xs)] + [tapekit(xs, p) for p in policies]
            + [tapekit(xs, p, SMALL_LEFT) for p in small_left])
