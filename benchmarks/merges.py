"""W6: k tapes merged pairwise.

Each of ``k`` inputs is traced on its own tape and records one op (``exp``); then neighbours are
added level by level, as in a tournament, until one tensor is left: ``k - 1`` adds, each merging
two tapes of growing size. Under OwnedTape and ArcTape a merge moves the right tape's records into
the left one, so its cost grows with the tapes; under UnionTape it links them, at a cost that must
not grow with ``k``. Every contender returns the final value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tapekit as tk

from .measure import Contender


def values(k: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return list(rng.uniform(-1, 1, (k, 1)).astype(np.float32))


def _tournament(nodes: list[Any]) -> Any:
    while len(nodes) > 1:
        paired = [a + b for a, b in zip(nodes[::2], nodes[1::2])]
        nodes = paired + nodes[len(paired) * 2:]
    return nodes[0]


def floor(xs: list[np.ndarray]) -> Contender:
    """numpy alone: the same ops, with nothing recorded."""
    return Contender("numpy floor", lambda: [_tournament([np.exp(x) for x in xs])])


def tapekit(xs: list[np.ndarray], policy: type[tk.Tape]) -> Contender:
    """The inputs are traced on fresh tapes before the clock starts; the ops and merges are timed."""
    dev = tk.Cpu()

    def setup() -> list[tk.Tensor]:
        return [dev.tensor(x).trace(policy()) for x in xs]

    def run(inputs: list[tk.Tensor]) -> list[Any]:
        return [_tournament([t.exp() for t in inputs]).numpy()]

    return Contender(f"tapekit {policy.__name__}", run, setup=setup)


def contenders(k: int) -> list[Contender]:
    """The floor first, then tapekit under each merging policy."""
    xs = values(k)
    return [floor(xs)] + [tapekit(xs, p) for p in (tk.OwnedTape, tk.ArcTape, tk.UnionTape)]
