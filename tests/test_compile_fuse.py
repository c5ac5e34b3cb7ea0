"""``tk.compile(fn, fuse=True)``: the fused step gives what the unfused one gives, to float64 rounding
(numba's ``tanh``, ``exp`` and ``log`` may differ from numpy's in the last bit), under every policy,
over every op, the fuzzed programs and 50 training steps; it keeps the unfused program's guards; it
shows its loops and says what it fused. numba compiles slowly: the programs are small, the hypothesis
draws few and fixed (so numba's cache serves later sessions), and compiled steps are shared."""

from __future__ import annotations

import contextlib
import re
import importlib
import importlib.util

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tapekit as tk

from .conftest import host
from .op_specs import SPECS
from .test_compile import POLICY_NAMES, TAPES, chain, digits_losses, fuzzed_gradients, op_step
from .test_fuzz_programs import programs

import numba  # noqa: E402,F401  (the `fuse` extra, which the unit tests install: a missing numba fails here)
runs = importlib.import_module("tapekit.compile.runs")
loops_module = importlib.import_module("tapekit.compile.loops")

FEW = settings(max_examples=1, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors])


def close(a, b) -> bool:
    """Equal to rounding: the same shape and dtype, values within a few ulps (NaNs where NaNs are)."""
    a, b = np.asarray(host(a)), np.asarray(host(b))
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind not in "fc":
        return np.array_equal(a, b)
    tol = 1e-12 if a.dtype == np.float64 else 1e-5
    return np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True)


def all_close(got, want) -> bool:
    if isinstance(want, (list, tuple)):
        return len(got) == len(want) and all(all_close(g, w) for g, w in zip(got, want))
    if want is None:
        return got is None
    return close(got, want)


# -- one small step, shared ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fused_chain():
    dev = tk.Cpu(default_dtype="float64")
    step = tk.compile(lambda x, w: chain(x, w, tk.OwnedTape), fuse=True)
    w = dev.tensor([0.5, -1.0, 2.0], name="w")
    return dev, step, w


def test_a_fused_step_equals_the_unfused_one_to_rounding_and_replays(fused_chain) -> None:
    dev, step, w = fused_chain
    unfused = tk.compile(lambda x, w: chain(x, w, tk.OwnedTape))
    for values in ([1.0, 2.0, 3.0], [3.0, -2.0, 0.25], [0.0, 1.0, -1.0]):
        x = dev.tensor(values, name="x")
        assert all_close(step(x, w), unfused(x, w))
    assert step.history[0].calls >= 2 and len(step.history) == 1


def test_the_fused_source_shows_the_loops_with_their_records_beside_the_source(fused_chain) -> None:
    dev, step, w = fused_chain
    step(dev.tensor([1.0, 2.0, 3.0], name="x"), w)
    text = step.fused_source
    assert "@njit" in text and "for i0 in range(n0):" in text
    assert "h = x_ * w_  # #" in text and "mul(x, w) -> h" in text  # each statement names its record
    assert "fused_run_1(" in text and "xp.sum(" in text  # the reduction stays numpy's, between the runs
    assert "njit" not in step.source  # step.source is the unfused program
    shown = repr(step)
    assert "fused" in shown and "fused run 1: " in shown and "compiled in" in shown and " s" in shown


def test_a_new_shape_records_and_fuses_again_and_a_read_still_raises(fused_chain) -> None:
    dev, step, w = fused_chain
    step(dev.tensor([1.0, 2.0, 3.0]), w)  # a program of shape (3,) exists, whichever tests ran before
    before = len(step.history)
    x4, w4 = dev.tensor([1.0, 2.0, 3.0, 4.0]), dev.tensor([1.0, 1.0, 1.0, 1.0])
    assert all_close(step(x4, w4), chain(x4, w4, tk.OwnedTape))
    assert len(step.history) == before + 1 and "changed" in step.history[-1].why
    reads = tk.compile(lambda x: float((x * 2.0).tanh().sum()), fuse=True)
    with pytest.raises(tk.CompileError, match="float"):
        reads(dev.tensor([1.0, 2.0]))


def test_a_program_without_an_elementwise_run_fuses_to_the_unfused_one() -> None:
    dev = tk.Cpu(default_dtype="float64")
    step = tk.compile(lambda a, b: (a @ b).sum(), fuse=True)
    a, b = dev.tensor(np.arange(6.0).reshape(2, 3)), dev.tensor(np.ones((3, 2)))
    assert close(step(a, b), (a @ b).sum())
    body = lambda text: [line for line in text.splitlines() if not line.startswith("#")]  # noqa: E731
    assert body(step.fused_source) == body(step.source)
    assert "no run of elementwise calls to fuse" in repr(step)


def test_without_numba_fuse_raises_a_tapekit_error_naming_the_extra(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "numba" else real(name, *a))
    with pytest.raises(importlib.import_module("tapekit.compile").FuseUnavailable, match=r"tapekit\[fuse\]"):
        tk.compile(lambda x: x, fuse=True)


def test_past_the_limit_a_program_fuses_in_part_and_says_so(monkeypatch) -> None:
    monkeypatch.setattr(runs, "LIMIT", 3)
    dev = tk.Cpu(default_dtype="float64")

    def f(x):
        a = (x * 2.0 + 1.0).tanh()  # a run of three
        return (a.sum() * a + x).exp().sum()  # and one of three more, past the limit

    step = tk.compile(f, fuse=True)
    x = dev.tensor([0.1, 0.2, 0.3])
    assert close(step(x), f(x)) and close(step(x), f(x))
    assert "stay unfused: past the limit" in repr(step)


def test_a_fused_program_in_parts_runs_its_runs_and_each_part_keeps_its_lines(monkeypatch) -> None:
    """Parts with a fused run have no shared shape (the run's line names its values itself): each is
    compiled on its own, beside parts that share theirs, and keeps its lines of the source."""
    monkeypatch.setattr(importlib.import_module("tapekit.compile.source"), "PART", 3)
    dev = tk.Cpu(default_dtype="float64")

    def f(x):
        a = (x * 2.0 + 1.0).tanh()  # a run
        b = (a.sum() * a + x).exp()  # a sum, then a run
        return ((b * 0.5 - a).tanh() * b.sum()).sum() + (x * x).sum() + (a * a).sum()

    step = tk.compile(f, fuse=True)
    x = dev.tensor([0.1, 0.2, 0.3])
    assert close(step(x), f(x)) and close(step(x), f(x))
    program = step.fused_source[step.fused_source.index("# f, recorded by tk.compile"):]
    lines = program.splitlines()
    parts = [fn for name, fn in step.history[0].run.__globals__.items() if "_part" in name and callable(fn)]
    assert len(parts) > 2 and any("fused run" in line for line in lines)
    for p in parts:
        code = p.__code__
        assert lines[code.co_firstlineno - 1].startswith(f"def {p.__name__}(")
        covered = {line for _, _, line in code.co_lines() if line is not None} - {code.co_firstlineno}
        assert all(lines[i - 1].strip() and not lines[i - 1].lstrip().startswith("#") for i in covered)


def test_a_run_numba_cannot_compile_stays_unfused_and_says_so(monkeypatch) -> None:
    fuse = importlib.import_module("tapekit.compile.fuse")

    def refuse(loops, made):
        raise TypeError("no such loop")

    monkeypatch.setattr(fuse, "compile_loops", refuse)
    dev = tk.Cpu(default_dtype="float64")
    step = tk.compile(lambda x: (x * 2.0 + 1.0).tanh().sum(), fuse=True)
    x = dev.tensor([0.1, 0.2])
    assert close(step(x), (x * 2.0 + 1.0).tanh().sum())
    assert "stays unfused: numba could not compile it (TypeError: no such loop)" in repr(step)


# -- every policy, every op, the fuzzed programs ----------------------------------------------------------
@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_every_policy_fuses_to_the_unfused_gradients(policy) -> None:
    dev = tk.Cpu(default_dtype="float64")

    def f(x, y):
        with (tk.GlobalTape() if policy == "global" else contextlib.nullcontext()) as tape:
            a = x.trace(tape) if policy == "global" else x.trace(TAPES[policy]())
            b = y.trace(tape) if policy == "global" else y.trace(TAPES[policy]())
            b1, b2 = (b.retaped(), b.retaped()) if policy == "owned" else (b, b)
            z = a.exp() * b + b1.sin()
            zz = (b2 * 2.0).tanh()
            g = tape.backward([z.sum(), zz.sum()]) if policy == "global" else tk.backward([z.sum(), zz.sum()])
        return g[x], g[y]

    step, unfused = tk.compile(f, fuse=True), tk.compile(f)
    for seed in range(2):
        rng = np.random.default_rng(seed)
        x, y = dev.tensor(rng.uniform(-1, 1, 3)), dev.tensor(rng.uniform(-1, 1, 3))
        assert all_close(step(x, y), unfused(x, y))
    assert "fused run 1" in repr(step)


NOT_ELEMENTWISE = {"all", "any", "argmax", "argmin", "broadcast_to", "concat", "cumsum", "expand_dims", "flatten",
                   "flip", "getitem", "matmul", "moveaxis", "pad", "permute", "repeat", "reshape", "roll", "squeeze",
                   "stack", "sum", "take_along_axis", "tile", "transpose", "tril", "triu", "round"}
NOT_FUSED = {"floor_divide", "floordiv_scalar", "rfloordiv_scalar", "mod_scalar"}  # numba's // and % on floats differ at the edges


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_op_fused_equals_unfused(name, monkeypatch) -> None:
    spec = SPECS[name]
    dev = tk.Cpu(default_dtype="float64")
    monkeypatch.setattr(runs, "SHORTEST", 1)  # a run of one call is fused too: each op's own statement is checked
    fuses = name not in NOT_ELEMENTWISE | NOT_FUSED and not name.startswith("einsum")

    @FEW
    @given(data=st.data())
    def check(data):
        drawn, kwargs = spec.draw(data)
        arrays = [np.asarray(a, dtype=float) for a in drawn]
        f = op_step(spec, kwargs)
        step, unfused = tk.compile(f, fuse=True), tk.compile(f)
        for shift in (0.0, 0.01):
            tensors = [dev.tensor(a + shift, dtype="float64") for a in arrays]
            assert all_close(step(*tensors), unfused(*tensors)), f"{name}, shift {shift}"
        assert not fuses or "fused run 1" in repr(step), f"{name}: nothing was fused"

    check()


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.sampled_from(POLICY_NAMES), st.booleans())
def test_fuzzed_programs_fuse_to_the_unfused_gradients(program, policy, preallocated) -> None:
    dev = tk.Cpu(default_dtype="float64")
    f = fuzzed_gradients(dev, program, policy, preallocated)
    step, unfused = tk.compile(f, fuse=True), tk.compile(f)
    for shift in (0.0, 0.125):
        leaves = [dev.tensor(v + shift) for v in program.values]
        assert all_close(step(*leaves), unfused(*leaves)), repr(program)


# -- training ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("optimizer", [tk.optim.Sgd, tk.optim.Adam], ids=["Sgd", "Adam"])
def test_digits_training_fused_gives_the_unfused_losses(optimizer, monkeypatch) -> None:
    real = tk.compile
    monkeypatch.setattr(tk, "compile", lambda fn: real(fn, fuse=True))
    fused, model, step = digits_losses(True, optimizer, "parameters")
    monkeypatch.setattr(tk, "compile", real)
    unfused, unfused_model, _ = digits_losses(True, optimizer, "parameters")
    assert np.allclose(fused, unfused, rtol=1e-4, atol=1e-6) and fused[-1] < fused[0]
    for p, q in zip(model.parameters(), unfused_model.parameters()):
        assert np.allclose(p.numpy(), q.numpy(), rtol=1e-3, atol=1e-5)
    assert "fused run" in repr(step)


# -- the runs and their loops -------------------------------------------------------------------------------
def test_a_run_is_cut_into_loops_of_at_most_a_piece(monkeypatch) -> None:
    monkeypatch.setattr(loops_module, "PIECE", 4)
    dev = tk.Cpu(default_dtype="float64")

    def f(x):
        h = x
        for _ in range(5):
            h = (h * 0.5 + 0.25).tanh()
        return h.sum()

    step = tk.compile(f, fuse=True)
    x = dev.tensor([0.1, -0.2, 0.3])
    assert close(step(x), f(x))
    assert step.fused_source.count("@njit") >= 4 and "loops, compiled in" in repr(step)


def test_an_operand_of_another_shape_broadcasts_into_a_loop_nest() -> None:
    dev = tk.Cpu(default_dtype="float64")

    def f(x, b):
        return ((x + b) * 2.0).tanh().sum()

    x, b = dev.tensor(np.linspace(-1, 1, 6).reshape(2, 3)), dev.tensor([0.1, 0.2, 0.3])
    step = tk.compile(f, fuse=True)
    assert close(step(x, b), f(x, b))
    # read where broadcasting puts it, not broadcast by a numpy call first
    assert "b[i1]" in step.fused_source and "for i1 in range(n1):" in step.fused_source
    assert "broadcast_to" not in step.fused_source


@pytest.mark.parametrize("shape", [(2, 1), (1, 3), (1, 1), ()])
def test_an_operand_with_axes_of_length_one_is_read_at_zero_on_them(shape) -> None:
    dev = tk.Cpu(default_dtype="float64")
    x, b = dev.tensor(np.linspace(-1, 1, 6).reshape(2, 3)), dev.tensor(np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape))
    step = tk.compile(lambda x, b: ((x + b) * x).exp(), fuse=True)
    assert close(step(x, b), ((x + b) * x).exp())
    index = {(2, 1): "b[i0, 0]", (1, 3): "b[0, i1]", (1, 1): "b[0, 0]", (): "b[()]"}[shape]
    assert index in step.fused_source


def test_the_gradient_of_a_sum_broadcasts_inside_the_loops() -> None:
    """``sum``'s rule broadcasts the output's gradient back: in a fused backward that is the loop
    reading the 0-d seed at every element, not a numpy call making a broadcast view first."""
    dev = tk.Cpu(default_dtype="float64")

    def f(x, w):
        g = ((x.trace() * w).tanh() * w).sum().backward()
        return g[x]

    x, w = dev.tensor([0.5, -1.0, 2.0]), dev.tensor([1.5, 0.5, -0.25])
    step = tk.compile(f, fuse=True)
    assert close(step(x, w), f(x, w))
    assert "xp.broadcast_to(" in step.source and "broadcast_to" not in step.fused_source
    assert re.search(r"^ +\w+ = \w+_  # #\d+ sum\(", step.fused_source, re.M)  # the broadcast, one statement


def test_a_numpy_scalar_operand_is_made_an_array_for_the_loops() -> None:
    dev = tk.Cpu(default_dtype="float64")
    w = np.float64(3.0)

    def f(x):
        return tk.exp(x * w + x)

    x = dev.tensor([0.5, -1.0, 2.0])
    step = tk.compile(f, fuse=True)
    assert close(step(x), f(x))
    assert close(step(x), f(x))


# -- CuPy: the kernel a run becomes on a CUDA device, read as text (no GPU here) ------------------------------
class FakeCupy:
    """Stands in for CuPy: keeps the kernels it is asked to build."""

    float64 = np.float64

    def __init__(self) -> None:
        self.kernels = []

    def ElementwiseKernel(self, in_params, out_params, operation, name):  # noqa: N802  (CuPy's name)
        self.kernels.append((in_params, out_params, operation, name))
        return lambda *args: None


def test_on_a_cuda_device_a_run_becomes_a_cupy_elementwise_kernel(monkeypatch) -> None:
    fuse = importlib.import_module("tapekit.compile.fuse")
    fake = FakeCupy()
    monkeypatch.setattr(fuse, "_cupy", lambda: fake)
    monkeypatch.setattr(runs, "array_kind", lambda a: "cupy" if type(a) is np.ndarray else None)  # as if on the GPU
    dev = tk.Cpu(default_dtype="float64")
    step = tk.compile(lambda x, w: chain(x, w, tk.OwnedTape), fuse=True)
    step(dev.tensor([1.0, 2.0, 3.0], name="x"), dev.tensor([0.5, -1.0, 2.0], name="w"))
    (ins, outs, body, name), *rest = fake.kernels
    assert ins == "double x, double w" and name == "fused_run_1" and outs.startswith("double ")
    assert "double h = (double)((x * w));  // #" in body and "mul(x, w) -> h" in body  # a temporary, declared
    assert re.search(r"\n    t\d+ = \(double\)\(tanh\(h\)\);  // #", body)  # an output: a parameter of the kernel
    assert rest and "(1 - " in rest[0][2]  # the backward's run: tanh's rule
    assert "cupy.ElementwiseKernel(" in step.fused_source and "in one CuPy kernel" in step.fused_source
    assert "cupy.empty((3,), cupy.float64)" in step.fused_source
