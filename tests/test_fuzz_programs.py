"""Random programs: hypothesis draws DAGs of ops over broadcastable shapes, with values reused by
several ops and several outputs; each runs under every tape policy, ``tk.backward`` over all its
outputs gives every input's gradient, and they match central finite differences in float64."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from hypothesis import HealthCheck, example, given, settings, strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import tapekit as tk

from .conftest import POLICIES

DEV = tk.Cpu(seed=0)

# smooth ops only: a kink (abs, relu, max) between x - eps and x + eps would fool finite differences
UNARY: dict[str, Callable[[tk.Tensor], tk.Tensor]] = {
    "neg": lambda a: -a,
    "tanh": tk.tanh,
    "sigmoid": tk.sigmoid,
    "sin": tk.sin,
    "cos": tk.cos,
    "square": lambda a: a ** 2,
    "scale": lambda a: 0.5 * a - 1.0,
    "reciprocal": lambda a: 1.0 / (a * a + 1.0),
}
BINARY: dict[str, Callable[[tk.Tensor, tk.Tensor], tk.Tensor]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b * b + 1.0),
    "where": lambda a, b: tk.where(a > 0.1, a, b),
    "join": lambda a, b: tk.concat([a.reshape(-1), b.reshape(-1)]),
}
REDUCE = ("sum", "mean", "logsumexp", "softmax", "log_softmax")
SHAPE = ("transpose", "flatten", "slice", "pick")


@dataclass(frozen=True)
class Step:
    """One op of a program: its kind, the nodes it reads, and an axis choice for reductions."""

    kind: str
    name: str
    args: tuple[int, ...]
    axis: int = 0
    keepdims: bool = False


@dataclass
class Program:
    """Inputs (shapes and values), ops over earlier nodes, and the nodes that are outputs."""

    shapes: list[tuple[int, ...]]
    values: list[np.ndarray]
    steps: list[Step]
    outputs: list[int] = field(default_factory=list)

    def uses(self) -> list[int]:
        """How many times each node is read (by ops and as an output)."""
        counts = [0] * (len(self.shapes) + len(self.steps))
        for step in self.steps:
            for k in step.args:
                counts[k] += 1
        for k in self.outputs:
            counts[k] += 1
        return counts

    def __repr__(self) -> str:
        lines = [f"inputs {self.shapes}"]
        lines += [f"  n{len(self.shapes) + i} = {s.kind}.{s.name}{tuple(f'n{k}' for k in s.args)}"
                  f"{f' axis={s.axis} keepdims={s.keepdims}' if s.kind == 'reduce' else ''}"
                  for i, s in enumerate(self.steps)]
        return "\n".join(lines + [f"outputs {[f'n{k}' for k in self.outputs]}"])


def apply(step: Step, args: list[tk.Tensor]) -> tk.Tensor:
    """Run one step. Binary ops whose operands do not broadcast reduce the right one to a number."""
    if step.kind == "unary":
        return UNARY[step.name](args[0])
    if step.kind == "binary":
        a, b = args
        try:
            np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            b = b.sum()
        return BINARY[step.name](a, b)
    if step.kind == "matmul":
        a, b = args
        if a.ndim >= 1 and b.ndim >= 1 and a.shape[-1] == (b.shape[-2] if b.ndim > 1 else b.shape[0]):
            try:
                np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
                return a @ b
            except ValueError:
                pass
        return a * b.mean()
    (a,) = args
    if step.kind == "reduce":
        if a.ndim == 0:
            return a * 1.5
        axis = step.axis % a.ndim
        if step.name in ("softmax", "log_softmax"):
            return getattr(a, step.name)(axis)
        return getattr(a, step.name)(axis=axis, keepdims=step.keepdims)
    if step.name == "transpose":
        return a.transpose() if a.ndim >= 2 else -a
    if step.name == "flatten":
        return a.reshape(-1)
    if step.name == "pick":  # an integer-array index with repeats: its backward adds them up
        return a[[0, -1, 0]] if a.ndim >= 1 else 2.0 * a
    return a[..., :1] if a.ndim >= 1 else a + 0.25


@st.composite
def programs(draw: Any) -> Program:
    n_inputs = draw(st.integers(1, 3))
    shapes = list(draw(mutually_broadcastable_shapes(num_shapes=n_inputs, min_dims=0, max_dims=3,
                                                     min_side=1, max_side=3)).input_shapes)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = [rng.uniform(-1.0, 1.0, size=s) for s in shapes]
    steps = []
    for i in range(draw(st.integers(1, 14))):
        nodes = n_inputs + i
        kind = draw(st.sampled_from(["unary", "binary", "binary", "matmul", "reduce", "shape"]))
        pick = st.integers(0, nodes - 1)
        if kind == "unary":
            steps.append(Step(kind, draw(st.sampled_from(sorted(UNARY))), (draw(pick),)))
        elif kind == "binary":
            steps.append(Step(kind, draw(st.sampled_from(sorted(BINARY))), (draw(pick), draw(pick))))
        elif kind == "matmul":
            steps.append(Step(kind, "matmul", (draw(pick), draw(pick))))
        elif kind == "reduce":
            steps.append(Step(kind, draw(st.sampled_from(REDUCE)), (draw(pick),), draw(st.integers(0, 2)),
                              draw(st.booleans())))
        else:
            steps.append(Step(kind, draw(st.sampled_from(SHAPE)), (draw(pick),)))
    program = Program(shapes, values, steps)
    read = {k for step in steps for k in step.args}
    sinks = [k for k in range(n_inputs + len(steps)) if k not in read]  # every record reaches an output
    extra = draw(st.lists(st.integers(0, n_inputs + len(steps) - 1), min_size=1, max_size=2))
    program.outputs = sorted(set(sinks) | set(extra))
    return program


def run(program: Program, leaves: list[tk.Tensor], fresh_handles: Callable[[tk.Tensor, int], list]) -> list:
    """The program's outputs. ``fresh_handles(t, n)`` gives the ``n`` handles the reads of ``t`` use."""
    uses = program.uses()
    handles = [fresh_handles(t, uses[k]) for k, t in enumerate(leaves)]
    for step in program.steps:
        out = apply(step, [handles[k].pop() for k in step.args])
        handles.append(fresh_handles(out, uses[len(handles)]))
    return [handles[k].pop() for k in program.outputs]


def shared(t: tk.Tensor, n: int) -> list[tk.Tensor]:
    return [t] * n


def owned(t: tk.Tensor, n: int) -> list[tk.Tensor]:
    """An OwnedTape has one owner: every read but one gets a retaped handle, made before any op
    takes the tensor's tape (the branches merge back when they meet)."""
    return [t.retaped() for _ in range(n - 1)] + [t] if n else []


def objective(program: Program, seeds: list[np.ndarray]) -> Callable[[list[np.ndarray]], float]:
    """What ``tk.backward(outputs, seeds)`` differentiates: sum over outputs of <seed, output>."""
    def value(points: list[np.ndarray]) -> float:
        outs = run(program, [DEV.tensor(p, dtype="float64") for p in points], shared)
        return float(sum(np.sum(s * o.numpy()) for s, o in zip(seeds, outs)))
    return value


def finite_differences(f: Callable[[list[np.ndarray]], float], points: list[np.ndarray],
                       eps: float = 1e-6) -> list[np.ndarray]:
    grads = []
    for i, p in enumerate(points):
        g = np.zeros_like(p)
        for index in np.ndindex(*p.shape):
            up = [q.copy() for q in points]
            down = [q.copy() for q in points]
            up[i][index] += eps
            down[i][index] -= eps
            g[index] = (f(up) - f(down)) / (2 * eps)
        grads.append(g)
    return grads


def outputs_under(policy: str, program: Program, leaves: list[tk.Tensor], preallocated: bool) -> list[tk.Tensor]:
    """The program's outputs with each input traced on its own tape of ``policy`` (one GlobalTape
    for all under ``global``). ``preallocated``: the tapes record into zeroed buffers for the inputs
    (what ``model.alloc_grads()`` gives), which backward writes into in place."""

    def grads_for(*tensors: tk.Tensor) -> tk.Gradients | None:
        if not preallocated:
            return None
        grads = tk.Gradients()
        for t in tensors:
            grads.alloc(t)
        return grads

    block = tk.GlobalTape(grads=grads_for(*leaves)) if policy == "global" else contextlib.nullcontext()
    with block as active:
        traced = [x.trace(active if policy == "global" else POLICIES[policy](grads=grads_for(x))) for x in leaves]
        return run(program, traced, owned if policy == "owned" else shared)


def backward_under(policy: str, program: Program, seeds: list[np.ndarray], preallocated: bool) -> list[np.ndarray]:
    """The gradient of every input from one ``tk.backward`` over all outputs (``outputs_under``)."""
    leaves = [DEV.tensor(v, dtype="float64") for v in program.values]
    outs = outputs_under(policy, program, leaves, preallocated)
    grads = tk.backward(outs, [DEV.tensor(s, dtype="float64") for s in seeds])
    return [DEV.to_numpy(grads[x]) for x in leaves]


# found by this test: a 0-d gradient summed three times lost the third term (numpy's 0-d sums
# are scalars, and += on a scalar entry made a new one instead of updating it)
THREE_READS_OF_A_NUMBER = Program([()], [np.array(0.27)], [Step("binary", "add", (0, 0))], [0, 1])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.booleans())
@example(THREE_READS_OF_A_NUMBER, False)
def test_random_programs_match_finite_differences(program: Program, preallocated: bool) -> None:
    outs = run(program, [DEV.tensor(v, dtype="float64") for v in program.values], shared)
    rng = np.random.default_rng(1)
    seeds = [rng.standard_normal(o.shape) for o in outs]
    expected = finite_differences(objective(program, seeds), program.values)
    for policy in POLICIES:
        got = backward_under(policy, program, seeds, preallocated)
        for i, (g, e) in enumerate(zip(got, expected)):
            assert g.shape == e.shape, f"{policy}: input {i} gradient has shape {g.shape}, expected {e.shape}"
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{policy}, preallocated={preallocated}: gradient of input {i}\n"
                                               f"{program!r}")
