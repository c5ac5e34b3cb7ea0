"""W1 and W4: a chain of elementwise ops (add, mul, tanh in turn) and its backward.

``h`` starts at ``x``; op ``i`` is ``h + w``, ``h * w`` or ``tanh(h)`` as ``i % 3`` is 0, 1 or 2;
the loss is ``h.sum()``. Every contender returns the gradients of ``x`` and ``w``.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

import tapekit as tk

from .measure import Contender, compiled, compiled_name, fusions
from .peers import Peer, installed


def inputs(shape: tuple[int, ...], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return tuple(rng.uniform(-0.5, 0.5, shape).astype(np.float32) for _ in range(2))


def forward(x: Any, w: Any, n: int, tanh: Any) -> Any:
    """The chain itself, for any library whose values support ``+`` and ``*``."""
    h = x
    for i in range(n):
        op = i % 3
        h = h + w if op == 0 else h * w if op == 1 else tanh(h)
    return h


def floor(x0: np.ndarray, w0: np.ndarray, n: int) -> Contender:
    """Hand-written numpy: the forward keeps what the backward needs, the backward runs it back."""

    def run() -> list[np.ndarray]:
        h, saved = x0, []
        for i in range(n):
            op = i % 3
            if op == 0:
                h = h + w0
            elif op == 1:
                saved.append(h)
                h = h * w0
            else:
                h = np.tanh(h)
                saved.append(h)
        g, gw = np.ones_like(h), np.zeros_like(w0)
        for i in reversed(range(n)):
            op = i % 3
            if op == 0:
                gw += g
            elif op == 1:
                gw += g * saved.pop()
                g = g * w0
            else:
                y = saved.pop()
                g = g * (1 - y * y)
        return [g, gw]

    return Contender("numpy floor", run)


def tapekit(x0: np.ndarray, w0: np.ndarray, n: int, policy: type[tk.Tape]) -> Contender:
    """tapekit under ``policy``, keeping the gradients of ``x`` and ``w`` (the leaf set), as the
    floor and the peers do. Only ``x`` carries the tape, in dfdx's style: ``w`` is a plain tensor
    that still gets its gradient, since every operand of a recorded op does."""
    dev = tk.Cpu()

    def run() -> list[Any]:
        x, w = dev.tensor(x0), dev.tensor(w0)
        x = x.trace(policy(leaves=[x, w]))
        g = forward(x, w, n, lambda t: t.tanh()).sum().backward()
        return [g[x], g[w]]

    return Contender(f"tapekit {policy.__name__}", run)


def tapekit_compiled(x0: np.ndarray, w0: np.ndarray, n: int, policy: type[tk.Tape] = tk.OwnedTape,
                     fuse: bool = False) -> Contender:
    """The same step as ``tapekit`` under ``tk.compile``: the first run records it, the others replay
    the recorded array calls (``fuse``: with its elementwise runs as compiled loops)."""
    dev = tk.Cpu()

    def step(x: tk.Tensor, w: tk.Tensor) -> list[Any]:
        g = forward(x.trace(policy(leaves=[x, w])), w, n, lambda t: t.tanh()).sum().backward()
        return [g[x], g[w]]

    program = tk.compile(step, fuse=fuse)
    return compiled(compiled_name(fuse), lambda: program(dev.tensor(x0), dev.tensor(w0)))


def torch(x0: np.ndarray, w0: np.ndarray, n: int, peer: Peer) -> Contender:
    torch = peer.module

    def run() -> list[np.ndarray]:
        x = torch.tensor(x0, requires_grad=True)
        w = torch.tensor(w0, requires_grad=True)
        forward(x, w, n, torch.tanh).sum().backward()
        return [x.grad.numpy(), w.grad.numpy()]

    return Contender(peer.title, run, memory=False)


def torch_compile(x0: np.ndarray, w0: np.ndarray, n: int, peer: Peer) -> Contender:
    """The chain's forward under ``torch.compile`` (static shapes); AOTAutograd compiles its backward."""
    torch = peer.module
    loss = torch.compile(lambda x, w: forward(x, w, n, torch.tanh).sum(), dynamic=False)

    def run() -> list[np.ndarray]:
        x = torch.tensor(x0, requires_grad=True)
        w = torch.tensor(w0, requires_grad=True)
        loss(x, w).backward()
        return [x.grad.numpy(), w.grad.numpy()]

    return peer.too_long(n) or compiled(peer.title, run, memory=False)


def jax(x0: np.ndarray, w0: np.ndarray, n: int, peer: Peer) -> Contender:
    """``jax.jit`` of the chain's gradient: one XLA program for the forward and the backward."""
    jnp = peer.module.numpy
    gradient = peer.module.jit(peer.module.grad(lambda x, w: jnp.sum(forward(x, w, n, jnp.tanh)), argnums=(0, 1)))
    return peer.too_long(n) or compiled(peer.title, lambda: [np.asarray(g) for g in gradient(x0, w0)], memory=False)


def autograd(x0: np.ndarray, w0: np.ndarray, n: int, peer: Peer) -> Contender:
    import autograd.numpy as anp

    def loss(params: tuple) -> Any:
        return anp.sum(forward(*params, n, anp.tanh))

    gradient = peer.module.grad(loss)
    return Contender(peer.title, lambda: list(gradient((x0, w0))))


def mygrad(x0: np.ndarray, w0: np.ndarray, n: int, peer: Peer) -> Contender:
    mg = peer.module

    def run() -> list[np.ndarray]:
        x, w = mg.tensor(x0), mg.tensor(w0)
        forward(x, w, n, mg.tanh).sum().backward()
        return [x.grad, w.grad]

    return Contender(peer.title, run)


def contenders(n: int, shape: tuple[int, ...], peers: dict[str, Peer],
               policies: tuple[type[tk.Tape], ...] = (tk.OwnedTape, tk.UnionTape)) -> list[Contender]:
    """The floor first, then tapekit under each policy, then every installed peer."""
    x0, w0 = inputs(shape)
    found = [floor(x0, w0, n)] + [tapekit(x0, w0, n, p) for p in policies]
    found += [tapekit_compiled(x0, w0, n, fuse=fuse) for fuse in fusions()]
    return found + installed(sys.modules[__name__], peers, x0, w0, n)
