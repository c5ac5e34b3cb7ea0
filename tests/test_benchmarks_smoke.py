"""The benchmark suite at tiny sizes, so it never rots: every workload runs, each floor's gradients
agree with tapekit's, and the report and plot are written. (Timings are not asserted.)"""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest

import tapekit as tk
from benchmarks import machine, merges, plot, report, suite
from benchmarks.measure import Contender
from benchmarks.peers import PEERS as PEER_TITLES
from benchmarks.peers import Peer, find_peers

PEERS = find_peers(wanted=False)


@pytest.fixture(scope="module")
def done():
    sizes = dataclasses.replace(suite.SMOKE, repeats=2)
    return suite.run(sizes, PEERS, log=lambda line: None)


def test_every_workload_runs_with_tapekit_beside_its_floor(done) -> None:
    assert [case.workload for case, _ in done] == ["W1", "W2", "W3", "W4", "W4", "W5", "W6", "W6"]
    for case, results in done:
        names = [r.contender for r in results]
        assert names[0] == "numpy floor" and any(n.startswith("tapekit") for n in names), case.name
        for r in results:
            assert not r.note, f"{case.name}: {r.contender}: {r.note}"
            assert r.ratio is not None and r.ratio.median > 0
            if case.time:
                assert 0 < r.seconds.low <= r.seconds.median <= r.seconds.high
    floor = [r for case, results in done for r in results if r.contender == "numpy floor"]
    assert all(r.ratio.median == 1.0 for r in floor)


def test_w1_to_w4_have_a_compiled_contender_whose_first_call_is_reported(done) -> None:
    for case, results in done:
        compiled = [r for r in results if r.contender == "tapekit compiled"]
        if case.workload in ("W1", "W2", "W3", "W4"):
            assert compiled, case.name
            if case.time:
                assert compiled[0].extra["first_call"] > 0
    wanted = [t.wanted for t in report.targets(done)]
    assert "compiled, 12 ops: at most 1.3x the floor" in wanted and "compiled: linear in the chain length" in wanted
    assert "compiled, 90 ops: first call at most 20 µs per op" in wanted
    assert "tapekit compiled" in "\n".join(report.summary(done))
    first = report.first_calls(done)
    assert first[0].startswith("| workload | case | tapekit compiled |") and len(first) == 2 + 5  # W1, W2, W3, W4 twice


def test_w1_to_w4_have_a_fused_contender_whose_first_call_and_targets_are_reported(done) -> None:
    import numba  # noqa: F401  (installed with the unit tests: a missing numba fails)
    for case, results in done:
        fused = [r for r in results if r.contender == "tapekit fused"]
        if case.workload in ("W1", "W2", "W3", "W4") and case.time:
            assert fused and fused[0].extra["first_call"] > 0 and not fused[0].note, case.name
    wanted = [t.wanted for t in report.targets(done)]
    assert "fused, 12 ops: at most 0.1x the floor" in wanted and "fused, 12 ops: faster than JAX jit" in wanted
    assert any(w.startswith("fused, 90 ops: no slower than unfused") for w in wanted)
    assert report.first_calls(done)[0] == "| workload | case | tapekit compiled | tapekit fused |"


def test_w6_merges_in_both_orders_under_each_policy(done) -> None:
    policies = ("OwnedTape", "ArcTape", "UnionTape")
    for case, results in [item for item in done if item[0].workload == "W6"]:
        names = [r.contender for r in results]
        assert names == ["numpy floor"] + [f"tapekit {p}" for p in policies] + \
            [f"tapekit {p}, small left" for p in policies], case.name
    summary = "\n".join(report.summary(done))
    for k in suite.SMOKE.merges:
        assert f"| W6 | k = {k}, pairwise | " in summary and f"| W6 | k = {k}, small left | " in summary
    wanted = [t.wanted for t in report.targets(done)]
    assert "UnionTape merge cost flat in k, small left" in wanted


def test_w6_small_left_puts_a_one_op_tape_left_of_everything_merged_so_far(monkeypatch) -> None:
    """The small-left order: under OwnedTape each merge's left tape holds one op (its exp)
    and the right one all the records before, so an absorb moves O(k) records."""
    sizes = []
    merge = tk.OwnedTape._merge

    def spy(self, other, op):
        sizes.append((len(self._records), len(other._records)))
        return merge(self, other, op)

    monkeypatch.setattr(tk.OwnedTape, "_merge", spy)
    k = 16
    merges.tapekit(merges.values(k), tk.OwnedTape, merges.SMALL_LEFT).once()
    assert sizes == [(1, 1)] + [(1, 2 * j + 1) for j in range(1, k - 1)]
    sizes.clear()
    merges.tapekit(merges.values(k), tk.OwnedTape).once()  # pairwise: equal sizes
    assert len(sizes) == k - 1 and all(left == right for left, right in sizes)


def test_w6_leaves_the_quadratic_absorbs_out_above_their_largest_k() -> None:
    top = merges.SMALL_LEFT_ABSORB_MAX_K
    at = [c.name for c in merges.contenders(top)]
    above = [c.name for c in merges.contenders(top + 1)]
    assert "tapekit OwnedTape, small left" in at and "tapekit ArcTape, small left" in at
    assert [n for n in above if n.endswith("small left")] == ["tapekit UnionTape, small left"]
    assert merges.split("tapekit ArcTape, small left") == ("tapekit ArcTape", "small left")
    assert merges.split("PyTorch eager (CPU)") == ("PyTorch eager (CPU)", "pairwise")


def test_w4_measures_peak_memory_of_the_longest_chain(done) -> None:
    longest = [results for case, results in done if case.workload == "W4"][-1]
    for r in longest:
        assert r.extra["memory"].extra["peak_bytes"] > 0


@pytest.mark.parametrize("case", list(suite.cases(suite.SMOKE, PEERS)), ids=lambda c: f"{c.workload}-{c.short}")
def test_a_wrong_gradient_is_caught(case) -> None:
    """The check compares the gradients themselves: one that is off by a little fails it."""
    floor, tapekit = case.contenders[0], case.contenders[1]

    def off() -> list[np.ndarray]:
        grads = [np.array(a, dtype=np.float64) for a in tapekit.once()]
        grads[-1].flat[0] = grads[-1].flat[0] * 1.01 + 0.01
        return grads

    wrong = dataclasses.replace(case, contenders=[floor, Contender(tapekit.name, off)])
    with pytest.raises(AssertionError, match="disagrees with the numpy floor"):
        suite.check(wrong)


def test_report_and_plot_are_written(done, tmp_path) -> None:
    text = report.markdown(done, ["CPU: test", "Python x, numpy y"], 2, "results.png")
    for workload in ("W1", "W2", "W3", "W4", "W5", "W6"):
        assert f"## {workload}" in text
    assert "## Summary" in text and "| W1 | 12 ops | " in text
    wanted = [t.wanted for t in report.targets(done)]
    assert "at most 3x the numpy floor" in wanted and "UnionTape merge cost flat in k" in wanted
    assert "peak memory at most 1.3x the floor" in wanted
    path = tmp_path / "results.png"
    plot.figure(done, str(path), "CPU: test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_peer_that_cannot_be_imported_is_reported_absent(monkeypatch) -> None:
    real = importlib.import_module

    def without_torch(name: str, *args):
        if name == "torch":
            raise ImportError("No module named 'torch'")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without_torch)
    torch = find_peers()["torch"]
    assert not torch.present and torch.absent == "absent (ImportError: No module named 'torch')"
    assert "PyTorch eager (CPU): absent (ImportError" in "\n".join(machine.describe({"torch": torch}))


def test_the_command_writes_its_report_only_where_told(tmp_path, capsys) -> None:
    from benchmarks.__main__ import main

    assert main(["--smoke", "--no-peers", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "results.png").exists()
    assert "## Targets" in (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "## W6" in capsys.readouterr().out


def test_the_command_runs_only_the_workloads_and_peers_asked_for(tmp_path, capsys) -> None:
    from benchmarks.__main__ import main

    assert main(["--smoke", "--only", "W3", "--peers", "torch", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "## W3" in text and "## W1" not in text and "## W6" not in text
    assert "JAX jit (CPU): not requested (--peers)" in text
    assert "W1: " not in capsys.readouterr().out


def test_a_partial_run_writes_no_report_unless_told_where(tmp_path, monkeypatch) -> None:
    from benchmarks import __main__ as command

    monkeypatch.setattr(command, "HERE", tmp_path)
    assert command.main(["--only", "W3", "--no-peers", "--repeats", "1"]) == 0  # the full W3: about a second
    assert not (tmp_path / "results.md").exists()


def test_an_unknown_workload_or_peer_is_refused(capsys) -> None:
    from benchmarks.__main__ import main

    for args in (["--only", "W9"], ["--peers", "tensorflow"]):
        with pytest.raises(SystemExit):
            main(["--smoke", *args])
        assert "choose from" in capsys.readouterr().err


def test_a_compiler_is_not_run_above_its_longest_program_and_the_report_says_why() -> None:
    jax = Peer("jax", PEER_TITLES["jax"], module=object())
    assert jax.too_long(1_000) is None
    skipped = jax.too_long(10_000)
    assert skipped.skipped.startswith("not run above 1,000 ops: ") and "24 GiB" in skipped.skipped
    case = list(suite.cases(suite.SMOKE, PEERS))[0]
    case.contenders.append(skipped)
    done = suite.run_case(case, suite.SMOKE)
    assert done[-1].contender == "JAX jit (CPU)" and done[-1].note == skipped.skipped and done[-1].seconds is None
