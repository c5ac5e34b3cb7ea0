"""W7's forward-mode Jacobian benchmark at a tiny size, so it never rots: tapekit's Jacobian agrees
with the floor's, a wrong one is caught, and the run prints its table. (Timings are not asserted.)"""

from __future__ import annotations

import numpy as np

from benchmarks import jacobian
from benchmarks.measure import Contender
from benchmarks.peers import find_peers


def test_tapekit_jacfwd_agrees_with_the_floor() -> None:
    made = jacobian.contenders(6, find_peers(wanted=False))
    assert [c.name for c in made] == ["numpy floor", "tapekit jacfwd"]
    assert made[0].once().shape == (6, 6)
    assert jacobian.checked(made) == []


def test_a_wrong_jacobian_is_caught() -> None:
    made = jacobian.contenders(4, find_peers(wanted=False))
    wrong = Contender("transposed", lambda: np.asarray(made[0].once()).T)
    assert jacobian.checked([made[0], wrong]) == ["transposed: its Jacobian differs from the floor's"]


def test_the_run_prints_every_contender(capsys) -> None:
    assert jacobian.main(["--n", "5", "--repeats", "1", "--no-peers"]) == 0
    out = capsys.readouterr().out
    assert "numpy floor" in out and "tapekit jacfwd" in out and "R^5 -> R^5" in out
