"""W7's benchmark at tiny sizes, so it never rots: tapekit's Jacobians, both ways, agree with the
floor's, its HVP with central differences of its gradient, a wrong Jacobian or HVP is caught, and
the run prints both tables. (Timings are not asserted.)"""

from __future__ import annotations

import numpy as np

from benchmarks import jacobian
from benchmarks.measure import Contender
from benchmarks.peers import find_peers

TINY = (5, 4, 3, 2)  # an MLP 5-4-3-2


def test_tapekit_jacobians_both_ways_agree_with_the_floor() -> None:
    made = jacobian.contenders(6, find_peers(wanted=False))
    assert [c.name for c in made] == ["numpy floor", "tapekit jacfwd", "tapekit jacobian (rev)"]
    assert made[0].once().shape == (6, 6)
    assert made[2].once().shape == (6, 6)
    assert jacobian.checked(made) == []


def test_a_wrong_jacobian_is_caught() -> None:
    made = jacobian.contenders(4, find_peers(wanted=False))
    wrong = Contender("transposed", lambda: np.asarray(made[0].once()).T)
    assert jacobian.checked([made[0], wrong]) == ["transposed: its Jacobian differs from the floor's"]


def test_tapekit_hvp_agrees_with_central_differences_of_its_gradient() -> None:
    made = jacobian.hvp_contenders(3, TINY, find_peers(wanted=False))
    assert [c.name for c in made] == ["numpy gradient (baseline)", "tapekit hvp"]
    assert made[1].once().shape == (5 * 4 + 4 + 4 * 3 + 3 + 3 * 2 + 2,)
    assert jacobian.hvp_checked(made, 3, TINY) == []


def test_a_wrong_hvp_is_caught() -> None:
    made = jacobian.hvp_contenders(3, TINY, find_peers(wanted=False))
    twice = Contender("twice", lambda: 2 * made[1].once())
    gradient = Contender("the gradient", lambda: jacobian.flat(made[0].once()))
    assert jacobian.hvp_checked([made[0], twice, gradient], 3, TINY) == [
        "twice: its HVP differs from central differences of the gradient",
        "the gradient: its HVP differs from central differences of the gradient"]


def test_the_run_prints_both_tables(capsys) -> None:
    assert jacobian.main(["--n", "5", "--repeats", "1", "--no-peers"]) == 0
    out = capsys.readouterr().out
    assert "numpy floor" in out and "tapekit jacfwd" in out and "R^5 -> R^5" in out
    assert "tapekit jacobian (rev)" in out
    assert "Hessian-vector product" in out and "numpy gradient (baseline)" in out and "tapekit hvp" in out
    assert "CHECK FAILED" not in out
