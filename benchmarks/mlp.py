"""W2 and W5: one training step of an MLP (784-256-256-10, tanh, softmax cross-entropy, float32):
forward, backward and a plain SGD update of the parameter arrays.

Every contender starts from the same parameters (its own copy, since it updates them) and returns
the gradients of the step, in the order W1, b1, W2, b2, W3, b3.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

import tapekit as tk

from .measure import Contender, compiled, compiled_name, fusions
from .peers import Peer, installed

LR = 0.01


def problem(batch: int, dims: tuple[int, ...], seed: int = 0) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Initial parameters, a batch of inputs and its one-hot labels."""
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(dims[:-1], dims[1:]):
        params.append((rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32))
        params.append(np.zeros(fan_out, dtype=np.float32))
    x = rng.standard_normal((batch, dims[0])).astype(np.float32)
    onehot = np.eye(dims[-1], dtype=np.float32)[rng.integers(0, dims[-1], batch)]
    return params, x, onehot


def gradients(params: list[np.ndarray], x: np.ndarray, onehot: np.ndarray) -> list[np.ndarray]:
    """The loss's forward and backward in hand-written numpy, with the usual fused gradient of
    softmax cross-entropy: the gradients, in the order of ``params``."""
    W1, b1, W2, b2, W3, b3 = params
    h1 = np.tanh(x @ W1 + b1)
    h2 = np.tanh(h1 @ W2 + b2)
    logits = h2 @ W3 + b3
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    -(logp * onehot).sum() / x.shape[0]  # the loss, computed as the others do
    d3 = (np.exp(logp) - onehot) / x.shape[0]
    d2 = (d3 @ W3.T) * (1 - h2 * h2)
    d1 = (d2 @ W2.T) * (1 - h1 * h1)
    return [x.T @ d1, d1.sum(axis=0), h1.T @ d2, d2.sum(axis=0), h2.T @ d3, d3.sum(axis=0)]


def floor(params: list[np.ndarray], x: np.ndarray, onehot: np.ndarray) -> Contender:
    """Hand-written numpy: ``gradients``, then the update."""
    params = [p.copy() for p in params]

    def run() -> list[np.ndarray]:
        grads = gradients(params, x, onehot)
        for p, g in zip(params, grads):
            p -= LR * g
        return grads

    return Contender("numpy floor", run)


def tapekit(params: list[np.ndarray], x: np.ndarray, onehot: np.ndarray) -> Contender:
    """tapekit ops written out (matmul, +, tanh) and ``tk.cross_entropy`` of the one-hot targets the
    floor takes; the input carries an OwnedTape whose leaf set is the parameters, dfdx's style."""
    step, xs, targets = _tapekit_step(params, x, onehot)
    return Contender("tapekit OwnedTape", lambda: step(xs, targets))


def tapekit_compiled(params: list[np.ndarray], x: np.ndarray, onehot: np.ndarray, fuse: bool = False) -> Contender:
    """The ``tapekit`` step under ``tk.compile``: the parameters (in the closure) are inputs, and the
    in-place update of their storage is part of the program (``fuse``: elementwise runs as loops)."""
    step, xs, targets = _tapekit_step(params, x, onehot)
    program = tk.compile(step, fuse=fuse)
    return compiled(compiled_name(fuse), lambda: program(xs, targets))


def _tapekit_step(params: list[np.ndarray], x: np.ndarray, onehot: np.ndarray) -> tuple:
    """One SGD step of the MLP in tapekit, on copies of ``params``, with its batch and targets."""
    dev = tk.Cpu()
    ps = [dev.tensor(p.copy()) for p in params]

    def step(h: tk.Tensor, targets: tk.Tensor) -> list[Any]:
        W1, b1, W2, b2, W3, b3 = ps
        h = h.trace(tk.OwnedTape(leaves=ps))
        h1 = (h @ W1 + b1).tanh()
        h2 = (h1 @ W2 + b2).tanh()
        g = tk.cross_entropy(h2 @ W3 + b3, targets).backward()
        grads = [g[p] for p in ps]
        for p, gp in zip(ps, grads):
            p.data -= LR * gp
        return grads

    return step, dev.tensor(x), dev.tensor(onehot)


def torch(params: list[np.ndarray], x: np.ndarray, onehot: np.ndarray, peer: Peer) -> Contender:
    return Contender(peer.title, _torch_step(peer.module, params, x, onehot, compile=False), memory=False)


def torch_compile(params: list[np.ndarray], x: np.ndarray, onehot: np.ndarray, peer: Peer) -> Contender:
    """``torch``'s step with its forward and loss under ``torch.compile`` (static shapes;
    AOTAutograd compiles the backward), and the same eager SGD update."""
    return compiled(peer.title, _torch_step(peer.module, params, x, onehot, compile=True), memory=False)


def _torch_step(torch: Any, params: list[np.ndarray], x: np.ndarray, onehot: np.ndarray, compile: bool) -> Any:
    """One SGD step of the MLP in PyTorch, on copies of ``params``: the loss (compiled or not),
    backward, and the update under ``no_grad``."""
    ps = [torch.tensor(p.copy(), requires_grad=True) for p in params]
    xs, labels = torch.tensor(x), torch.tensor(onehot.argmax(axis=1))

    def forward(W1: Any, b1: Any, W2: Any, b2: Any, W3: Any, b3: Any) -> Any:
        h1 = torch.tanh(xs @ W1 + b1)
        h2 = torch.tanh(h1 @ W2 + b2)
        return torch.nn.functional.cross_entropy(h2 @ W3 + b3, labels)

    loss = torch.compile(forward, dynamic=False) if compile else forward

    def run() -> list[np.ndarray]:
        for p in ps:
            p.grad = None
        loss(*ps).backward()
        with torch.no_grad():
            for p in ps:
                p -= LR * p.grad
        return [p.grad.numpy() for p in ps]

    return run


def jax(params: list[np.ndarray], x: np.ndarray, onehot: np.ndarray, peer: Peer) -> Contender:
    """``jax.jit`` of the whole step, gradients and the SGD update: it returns new parameters, which
    the next step takes (JAX's arrays are immutable)."""
    jax = peer.module
    jnp = jax.numpy
    batch = x.shape[0]

    def loss(p: list, xs: Any, targets: Any) -> Any:
        W1, b1, W2, b2, W3, b3 = p
        h1 = jnp.tanh(xs @ W1 + b1)
        h2 = jnp.tanh(h1 @ W2 + b2)
        logits = h2 @ W3 + b3
        return -jnp.sum(jax.nn.log_softmax(logits, axis=1) * targets) / batch

    @jax.jit
    def step(p: list, xs: Any, targets: Any) -> tuple[list, list]:
        grads = jax.grad(loss)(p, xs, targets)
        return [q - LR * g for q, g in zip(p, grads)], grads

    state, xs, targets = [jnp.asarray(p) for p in params], jnp.asarray(x), jnp.asarray(onehot)

    def run() -> list[np.ndarray]:
        state[:], grads = step(state, xs, targets)
        return [np.asarray(g) for g in grads]

    return compiled(peer.title, run, memory=False)


def autograd(params: list[np.ndarray], x: np.ndarray, onehot: np.ndarray, peer: Peer) -> Contender:
    import autograd.numpy as anp
    from autograd.scipy.special import logsumexp

    ps = [p.copy() for p in params]
    batch = x.shape[0]

    def loss(p: list) -> Any:
        W1, b1, W2, b2, W3, b3 = p
        h1 = anp.tanh(anp.dot(x, W1) + b1)
        h2 = anp.tanh(anp.dot(h1, W2) + b2)
        logits = anp.dot(h2, W3) + b3
        logp = logits - logsumexp(logits, axis=1, keepdims=True)
        return -anp.sum(logp * onehot) / batch

    gradient = peer.module.grad(loss)

    def run() -> list[np.ndarray]:
        grads = gradient(ps)
        for p, g in zip(ps, grads):
            p -= LR * g
        return list(grads)

    return Contender(peer.title, run)


def mygrad(params: list[np.ndarray], x: np.ndarray, onehot: np.ndarray, peer: Peer) -> Contender:
    mg = peer.module
    from mygrad.nnet.activations import logsoftmax

    ps = [mg.tensor(p.copy()) for p in params]
    batch = x.shape[0]

    def run() -> list[np.ndarray]:
        W1, b1, W2, b2, W3, b3 = ps
        h1 = mg.tanh(mg.matmul(x, W1) + b1)
        h2 = mg.tanh(mg.matmul(h1, W2) + b2)
        loss = -mg.sum(logsoftmax(mg.matmul(h2, W3) + b3, axis=1) * onehot) / batch
        loss.backward()
        grads = [p.grad for p in ps]
        for p in ps:
            p.data -= LR * p.grad
        return grads

    return Contender(peer.title, run)


def contenders(batch: int, dims: tuple[int, ...], peers: dict[str, Peer]) -> list[Contender]:
    """The floor first, then tapekit, then every installed peer."""
    params, x, onehot = problem(batch, dims)
    found = [floor(params, x, onehot), tapekit(params, x, onehot)]
    found += [tapekit_compiled(params, x, onehot, fuse=fuse) for fuse in fusions()]
    return found + installed(sys.modules[__name__], peers, params, x, onehot)
