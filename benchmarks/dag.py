"""W3: a wide DAG with many inputs and several outputs, and one backward over all outputs.

The program alternates a binary op (``add`` or ``mul`` of two nodes drawn at random from the
inputs and the ``tanh`` nodes so far) with ``tanh`` of its result, so values stay bounded however
deep it goes. The outputs are the sums of the last ``tanh`` nodes. Every contender returns the
gradients of all inputs (zeros for an input no output depends on).
"""

from __future__ import annotations

import random
import sys
from typing import Any

import numpy as np

import tapekit as tk

from .measure import Contender, compiled, compiled_name, fusions
from .peers import Peer, installed

Step = tuple[str, int, int]  # (op, a, b): node ``len(inputs) + i`` is op(node a, node b)


def program(inputs: int, ops: int, outputs: int, seed: int = 0) -> tuple[list[Step], list[int]]:
    """``ops`` steps over ``inputs`` input nodes, and the nodes whose sums are the outputs."""
    rng = random.Random(seed)
    squashed = list(range(inputs))  # nodes with values in [-1, 1]
    steps: list[Step] = []
    for i in range(ops):
        node = inputs + i
        if i % 2 == 0:
            steps.append((rng.choice(("add", "mul")), rng.choice(squashed), rng.choice(squashed)))
        else:
            steps.append(("tanh", node - 1, node - 1))
            squashed.append(node)
    return steps, squashed[-outputs:]


def values(inputs: int, shape: tuple[int, ...], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(inputs)]


def floor(xs: list[np.ndarray], steps: list[Step], outs: list[int]) -> Contender:
    """Hand-written numpy: run the steps, then run them back from the outputs, skipping nodes that
    no output reached."""

    def run() -> list[np.ndarray]:
        vals = _forward(list(xs), steps, np.tanh)
        grads: list[Any] = [None] * len(vals)
        for o in outs:
            grads[o] = np.ones_like(vals[o])

        def add(node: int, g: np.ndarray) -> None:
            grads[node] = g if grads[node] is None else grads[node] + g

        for i in reversed(range(len(steps))):
            node, (op, a, b) = len(xs) + i, steps[i]
            g = grads[node]
            if g is None:
                continue
            if op == "add":
                add(a, g)
                add(b, g)
            elif op == "mul":
                add(a, g * vals[b])
                add(b, g * vals[a])
            else:
                add(a, g * (1 - vals[node] * vals[node]))
        return [np.zeros_like(x) if g is None else g for x, g in zip(xs, grads)]

    return Contender("numpy floor", run)


def _forward(nodes: list[Any], steps: list[Step], tanh: Any) -> list[Any]:
    for op, a, b in steps:
        nodes.append(nodes[a] + nodes[b] if op == "add" else nodes[a] * nodes[b] if op == "mul" else tanh(nodes[a]))
    return nodes


def _outputs(inputs: Any, steps: list[Step], outs: list[int], tanh: Any) -> list[Any]:
    """The output nodes of the program run on ``inputs``."""
    nodes = _forward(list(inputs), steps, tanh)
    return [nodes[o] for o in outs]


def tapekit(xs: list[np.ndarray], steps: list[Step], outs: list[int], policy: type[tk.Tape]) -> Contender:
    """tapekit under UnionTape (every input traced on its own tape, with itself as its leaf set; the
    tapes and their leaf sets merge as the DAG joins) or GlobalTape (one tape records everything in
    its block, the inputs its leaf set): only the inputs' gradients are kept, as the floor and the
    peers do."""
    dev = tk.Cpu()

    def run() -> list[Any]:
        inputs = [dev.tensor(x) for x in xs]
        if policy is tk.GlobalTape:
            with tk.GlobalTape(leaves=inputs) as tape:
                nodes = _forward(list(inputs), steps, tk.tanh)
                g = tape.backward([nodes[o].sum() for o in outs])
        else:
            traced = [x.trace(policy(leaves=[x])) for x in inputs]
            nodes = _forward(traced, steps, tk.tanh)
            g = tk.backward([nodes[o].sum() for o in outs])
        return [g[x] if x in g else np.zeros_like(v) for x, v in zip(inputs, xs)]

    return Contender(f"tapekit {policy.__name__}", run)


def tapekit_compiled(xs: list[np.ndarray], steps: list[Step], outs: list[int], fuse: bool = False) -> Contender:
    """The UnionTape step under ``tk.compile``: the inputs are its arguments (``fuse``: elementwise runs as loops)."""
    dev = tk.Cpu()

    def step(*inputs: tk.Tensor) -> list[Any]:
        traced = [x.trace(tk.UnionTape(leaves=[x])) for x in inputs]
        nodes = _forward(traced, steps, tk.tanh)
        g = tk.backward([nodes[o].sum() for o in outs])
        return [g[x] if x in g else np.zeros_like(v) for x, v in zip(inputs, xs)]

    program = tk.compile(step, fuse=fuse)
    return compiled(compiled_name(fuse), lambda: program(*[dev.tensor(x) for x in xs]))


def torch(xs: list[np.ndarray], steps: list[Step], outs: list[int], peer: Peer) -> Contender:
    torch = peer.module

    def run() -> list[np.ndarray]:
        inputs = [torch.tensor(x, requires_grad=True) for x in xs]
        nodes = _forward(list(inputs), steps, torch.tanh)
        torch.autograd.backward([nodes[o].sum() for o in outs])
        return [np.zeros_like(v) if x.grad is None else x.grad.numpy() for x, v in zip(inputs, xs)]

    return Contender(peer.title, run, memory=False)


def torch_compile(xs: list[np.ndarray], steps: list[Step], outs: list[int], peer: Peer) -> Contender:
    """The DAG's forward under ``torch.compile`` (static shapes); AOTAutograd compiles its backward."""
    torch = peer.module
    sums = torch.compile(lambda *inputs: [n.sum() for n in _outputs(inputs, steps, outs, torch.tanh)], dynamic=False)

    def run() -> list[np.ndarray]:
        inputs = [torch.tensor(x, requires_grad=True) for x in xs]
        torch.autograd.backward(sums(*inputs))
        return [np.zeros_like(v) if x.grad is None else x.grad.numpy() for x, v in zip(inputs, xs)]

    return peer.too_long(len(steps)) or compiled(peer.title, run, memory=False)


def jax(xs: list[np.ndarray], steps: list[Step], outs: list[int], peer: Peer) -> Contender:
    """``jax.jit`` of the gradient of the outputs' total: one XLA program (an input no output
    reaches gets zeros, as the floor gives)."""
    jnp = peer.module.numpy

    def total(inputs: list) -> Any:
        return sum(jnp.sum(n) for n in _outputs(inputs, steps, outs, jnp.tanh))

    gradient = peer.module.jit(peer.module.grad(total))
    return peer.too_long(len(steps)) or compiled(peer.title, lambda: [np.asarray(g) for g in gradient(list(xs))],
                                                 memory=False)


def autograd(xs: list[np.ndarray], steps: list[Step], outs: list[int], peer: Peer) -> Contender:
    import autograd.numpy as anp

    def total(inputs: list) -> Any:
        nodes = _forward(list(inputs), steps, anp.tanh)
        return sum(anp.sum(nodes[o]) for o in outs)

    gradient = peer.module.grad(total)
    return Contender(peer.title, lambda: list(gradient(list(xs))))


def mygrad(xs: list[np.ndarray], steps: list[Step], outs: list[int], peer: Peer) -> Contender:
    mg = peer.module

    def run() -> list[np.ndarray]:
        inputs = [mg.tensor(x) for x in xs]
        nodes = _forward(list(inputs), steps, mg.tanh)
        sum(nodes[o].sum() for o in outs).backward()
        return [np.zeros_like(v) if x.grad is None else x.grad for x, v in zip(inputs, xs)]

    return Contender(peer.title, run)


def contenders(inputs: int, ops: int, outputs: int, shape: tuple[int, ...], peers: dict[str, Peer]) -> list[Contender]:
    """The floor first, then tapekit under UnionTape and GlobalTape, then every installed peer."""
    steps, outs = program(inputs, ops, outputs)
    xs = values(inputs, shape)
    found = [floor(xs, steps, outs)] + [tapekit(xs, steps, outs, p) for p in (tk.UnionTape, tk.GlobalTape)]
    found += [tapekit_compiled(xs, steps, outs, fuse=fuse) for fuse in fusions()]
    return found + installed(sys.modules[__name__], peers, xs, steps, outs)
