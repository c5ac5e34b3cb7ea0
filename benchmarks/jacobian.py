"""W7: derivatives past the gradient, in two cases, beside the peers' transforms where installed
(JAX's under ``jit``, ``torch.func``'s in eager mode).

The Jacobian of a map from R^n to R^n (n = 100: ``tanh(W2 tanh(W1 x + b1) + b2)``, float32) both
ways: forward mode (``tk.jacfwd``, one JVP per input direction; the peers' ``jacfwd``) and reverse
mode (``tk.jacobian(f, x, mode="rev")``, one backward per output value; the peers' ``jacrev``),
against the hand-written numpy Jacobian (the floor). Every contender's Jacobian is checked against
the floor's.

The Hessian-vector product of W2's MLP loss (784-256-256-10, tanh, softmax cross-entropy, float32,
a batch of 64) with respect to all its parameters, flattened into one vector θ of 269,322 values
(W1, b1, W2, b2, W3, b3, each row-major), along a fixed random direction v: ``tk.hvp`` (forward
mode over the recorded backward), ``jax.jvp`` of ``jax.grad``, ``torch.func.jvp`` of
``torch.func.grad``. There is no hand-written numpy HVP: the baseline is numpy's forward and
backward of the same loss (one gradient, W2's floor without its update), so a ratio says how many
gradients one HVP costs. Every contender's HVP is checked against central differences of tapekit's
float64 gradient along v.

``python -m benchmarks.jacobian`` checks the contenders, times those of each case interleaved
(ratios to the floor or baseline of the same repeat) and prints a table per case.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any, Callable

from .measure import Contender, Result, compiled, time_interleaved  # (no numpy: BLAS's thread variables come first)
from .peers import Peer, find_peers

N = 100
BATCH = 64
DIMS = (784, 256, 256, 10)
HVP_TOLERANCE = 1e-3  # |got - want| / |want|, float32 against float64 central differences
PEER_KEYS = ("jax", "torch")


# -- the Jacobian of a map R^n -> R^n -----------------------------------------------------------------
def problem(n: int = N, seed: int = 0) -> tuple[list[Any], Any]:
    """The map's parameters (W1, b1, W2, b2) and the point x, as float32 numpy arrays."""
    import numpy as np

    rng = np.random.default_rng(seed)
    params = [rng.standard_normal((n, n)) / np.sqrt(n), rng.standard_normal(n) * 0.1,
              rng.standard_normal((n, n)) / np.sqrt(n), rng.standard_normal(n) * 0.1]
    return [p.astype(np.float32) for p in params], rng.standard_normal(n).astype(np.float32)


def floor(params: list[Any], x: Any) -> Contender:
    """The Jacobian written out: ``diag(1 - y²) W2 diag(1 - h²) W1``."""
    import numpy as np

    W1, b1, W2, b2 = params

    def run() -> Any:
        h = np.tanh(W1 @ x + b1)
        y = np.tanh(W2 @ h + b2)
        return (1 - y * y)[:, None] * W2 @ ((1 - h * h)[:, None] * W1)

    return Contender("numpy floor", run)


def tapekit(params: list[Any], x: Any) -> list[Contender]:
    """``tk.jacfwd`` (one ``tk.jvp`` pass per input direction, no tape) and ``tk.jacobian`` in
    reverse mode (one recorded forward, then one backward per output value)."""
    import tapekit as tk

    dev = tk.Cpu()
    W1, b1, W2, b2 = (dev.tensor(p) for p in params)
    point = dev.tensor(x)

    def f(t: Any) -> Any:
        return tk.tanh(W2 @ tk.tanh(W1 @ t + b1) + b2)

    return [Contender("tapekit jacfwd", lambda: tk.jacfwd(f, point).numpy()),
            Contender("tapekit jacobian (rev)", lambda: tk.jacobian(f, point, mode="rev").numpy())]


def jax(params: list[Any], x: Any, peer: Peer) -> list[Contender]:
    """``jax.jit(jax.jacfwd(f))`` and ``jax.jit(jax.jacrev(f))``: JAX pushes (or pulls) all n
    directions at once (``vmap``), compiled."""
    jax, jnp = peer.module, peer.module.numpy
    W1, b1, W2, b2 = (jnp.asarray(p) for p in params)
    point = jnp.asarray(x)

    def f(t: Any) -> Any:
        return jnp.tanh(W2 @ jnp.tanh(W1 @ t + b1) + b2)

    def made(mode: str) -> Contender:
        jac = jax.jit(getattr(jax, mode)(f))
        return compiled(f"{peer.title}: {mode}", lambda: jax.device_get(jac(point)), memory=False)

    return [made("jacfwd"), made("jacrev")]


def torch(params: list[Any], x: Any, peer: Peer) -> list[Contender]:
    """``torch.func.jacfwd`` and ``torch.func.jacrev`` in eager mode (each batches its directions
    with ``vmap``)."""
    torch = peer.module
    W1, b1, W2, b2 = (torch.tensor(p) for p in params)
    point = torch.tensor(x)

    def f(t: Any) -> Any:
        return torch.tanh(W2 @ torch.tanh(W1 @ t + b1) + b2)

    def made(mode: str) -> Contender:
        jac = getattr(torch.func, mode)(f)
        return Contender(f"{peer.title}: torch.func.{mode}", lambda: jac(point).numpy(), memory=False)

    return [made("jacfwd"), made("jacrev")]


def contenders(n: int, peers: dict[str, Peer]) -> list[Contender]:
    """The floor, tapekit's two Jacobians, then each installed peer's two."""
    params, x = problem(n)
    made = [floor(params, x), *tapekit(params, x)]
    for key, maker in zip(PEER_KEYS, (jax, torch)):
        if key in peers and peers[key].present:
            made += maker(params, x, peers[key])
    return made


def checked(made: list[Contender]) -> list[str]:
    """Each contender's Jacobian against the floor's (float32: to 1e-4): what disagrees, in words."""
    import numpy as np

    want = made[0].once()

    def agrees(got: Any) -> bool:
        return got.shape == want.shape and bool(np.allclose(got, want, rtol=1e-4, atol=1e-5))

    return _disagreements(made[1:], agrees, "its Jacobian differs from the floor's")


# -- the Hessian-vector product of W2's MLP loss ------------------------------------------------------
def hvp_problem(batch: int = BATCH, dims: tuple[int, ...] = DIMS, seed: int = 0) -> tuple[list[Any], Any, Any, Any]:
    """W2's parameters, batch and one-hot labels (``mlp.problem``), and the direction v: one
    standard normal value per parameter, float32, in the order of the flattened θ."""
    import numpy as np

    from . import mlp

    params, x, onehot = mlp.problem(batch, dims, seed)
    v = np.random.default_rng(seed + 1).standard_normal(sum(p.size for p in params)).astype(np.float32)
    return params, x, onehot, v


def flat(params: list[Any]) -> Any:
    """The parameters as one vector θ, each row-major, in order."""
    import numpy as np

    return np.concatenate([p.reshape(-1) for p in params])


def logits(theta: Any, x: Any, shapes: list[tuple[int, ...]], tanh: Callable[[Any], Any]) -> Any:
    """The MLP's logits for the batch ``x``, its parameters cut out of θ (a tapekit tensor, a JAX
    or a PyTorch array: the same slices and reshapes)."""
    ends = [0]
    for shape in shapes:
        ends.append(ends[-1] + math.prod(shape))
    W1, b1, W2, b2, W3, b3 = (theta[a:b].reshape(s) for a, b, s in zip(ends, ends[1:], shapes))
    h1 = tanh(x @ W1 + b1)
    h2 = tanh(h1 @ W2 + b2)
    return h2 @ W3 + b3


def tapekit_loss(params: list[Any], x: Any, onehot: Any, dtype: str = "float32") -> tuple[Callable[[Any], Any], Any]:
    """The loss as a tapekit function of θ (``tk.cross_entropy`` of the one-hot labels), and θ
    itself, both in ``dtype``."""
    import tapekit as tk

    dev = tk.Cpu()
    xs, targets, shapes = dev.tensor(x, dtype=dtype), dev.tensor(onehot, dtype=dtype), [p.shape for p in params]

    def loss(theta: Any) -> Any:
        return tk.cross_entropy(logits(theta, xs, shapes, tk.tanh), targets)

    return loss, dev.tensor(flat(params), dtype=dtype)


def hvp_floor(params: list[Any], x: Any, onehot: Any) -> Contender:
    """The baseline, not an HVP: numpy's forward and backward of the loss (``mlp.gradients``)."""
    from . import mlp

    return Contender("numpy gradient (baseline)", lambda: mlp.gradients(params, x, onehot))


def hvp_tapekit(params: list[Any], x: Any, onehot: Any, v: Any) -> Contender:
    """``tk.hvp(loss, θ, v)``: one forward-mode pass through the recorded forward and backward."""
    import tapekit as tk

    loss, theta = tapekit_loss(params, x, onehot)
    direction = theta.device.tensor(v)
    return Contender("tapekit hvp", lambda: tk.hvp(loss, theta, direction).numpy())


def hvp_jax(params: list[Any], x: Any, onehot: Any, v: Any, peer: Peer) -> Contender:
    """``jax.jvp`` of ``jax.grad`` of the loss (log-softmax against the one-hot labels), under ``jit``."""
    jax, jnp = peer.module, peer.module.numpy
    xs, targets, shapes = jnp.asarray(x), jnp.asarray(onehot), [p.shape for p in params]
    theta, direction = jnp.asarray(flat(params)), jnp.asarray(v)

    def loss(th: Any) -> Any:
        return -jnp.sum(jax.nn.log_softmax(logits(th, xs, shapes, jnp.tanh), axis=1) * targets) / x.shape[0]

    hvp = jax.jit(lambda th, u: jax.jvp(jax.grad(loss), (th,), (u,))[1])
    return compiled(f"{peer.title}: jvp of grad", lambda: jax.device_get(hvp(theta, direction)), memory=False)


def hvp_torch(params: list[Any], x: Any, onehot: Any, v: Any, peer: Peer) -> Contender:
    """``torch.func.jvp`` of ``torch.func.grad`` of the loss (``cross_entropy`` of the labels), eager."""
    torch = peer.module
    xs, labels, shapes = torch.tensor(x), torch.tensor(onehot.argmax(axis=1)), [p.shape for p in params]
    theta, direction = torch.tensor(flat(params)), torch.tensor(v)

    def loss(th: Any) -> Any:
        return torch.nn.functional.cross_entropy(logits(th, xs, shapes, torch.tanh), labels)

    def run() -> Any:
        return torch.func.jvp(torch.func.grad(loss), (theta,), (direction,))[1].numpy()

    return Contender(f"{peer.title}: torch.func jvp of grad", run, memory=False)


def hvp_contenders(batch: int, dims: tuple[int, ...], peers: dict[str, Peer]) -> list[Contender]:
    """The baseline, tapekit's HVP, then each installed peer's."""
    params, x, onehot, v = hvp_problem(batch, dims)
    made = [hvp_floor(params, x, onehot), hvp_tapekit(params, x, onehot, v)]
    return made + [maker(params, x, onehot, v, peers[key]) for key, maker in zip(PEER_KEYS, (hvp_jax, hvp_torch))
                   if key in peers and peers[key].present]


def hvp_reference(params: list[Any], x: Any, onehot: Any, v: Any, eps: float = 1e-4) -> Any:
    """The HVP by central differences of tapekit's float64 gradient: ``(g(θ + εv) - g(θ - εv)) / 2ε``."""
    import numpy as np

    import tapekit as tk

    loss, theta = tapekit_loss(params, x, onehot, "float64")
    point, direction = theta.numpy(), np.asarray(v, dtype=np.float64)

    def gradient(step: float) -> Any:
        return tk.grad(loss)(theta.device.tensor(point + step * direction, dtype="float64")).numpy()

    return (gradient(eps) - gradient(-eps)) / (2 * eps)


def hvp_checked(made: list[Contender], batch: int = BATCH, dims: tuple[int, ...] = DIMS) -> list[str]:
    """Each HVP (the contenders after the baseline) against ``hvp_reference``, to a relative error
    of ``HVP_TOLERANCE`` in norm: what disagrees, in words."""
    import numpy as np

    params, x, onehot, v = hvp_problem(batch, dims)
    want = hvp_reference(params, x, onehot, v)

    def agrees(got: Any) -> bool:
        return got.shape == want.shape and np.linalg.norm(got - want) <= HVP_TOLERANCE * np.linalg.norm(want)

    return _disagreements(made[1:], agrees, "its HVP differs from central differences of the gradient")


def _disagreements(made: list[Contender], agrees: Callable[[Any], bool], differs: str) -> list[str]:
    """One line for each contender whose result ``agrees`` rejects (``differs``) or that fails."""
    import numpy as np

    wrong = []
    for c in made:
        try:
            got = np.asarray(c.once())
        except Exception as err:  # reported by the timing as well
            wrong.append(f"{c.name}: failed ({type(err).__name__}: {err})")
            continue
        if not agrees(got):
            wrong.append(f"{c.name}: {differs}")
    return wrong


# -- the run --------------------------------------------------------------------------------------------
def printed(heading: str, results: list[Result]) -> None:
    """A case's table: each contender's median time and its ratio to the first's (median, min - max)."""
    print(heading)
    for r in results:
        if r.seconds is None:
            print(f"  {r.contender:<42} {r.note}")
            continue
        first = r.extra.get("first_call")
        compile_note = f"  (first call {first * 1e3:,.0f} ms)" if first is not None else ""
        print(f"  {r.contender:<42} {r.seconds.median * 1e3:9.3f} ms  {r.ratio.median:8.2f}x "
              f"({r.ratio.low:.2f} - {r.ratio.high:.2f}){compile_note}")


def measured(case: str, made: list[Contender], wrong: list[str], repeats: int) -> list[Result]:
    """The case's checks' failures printed, then its contenders timed."""
    for line in wrong:
        print("CHECK FAILED:", line)
    return time_interleaved(case, made, repeats)


def main(argv: list[str] | None = None) -> int:
    """Both cases checked, timed and printed; 1 if a check failed."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.jacobian", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=N, help=f"the map's size, R^n -> R^n (default {N})")
    parser.add_argument("--repeats", type=int, default=11, help="timed repeats (default 11)")
    parser.add_argument("--threads", type=int, default=1, help="threads for BLAS, PyTorch and XLA (default 1)")
    parser.add_argument("--no-peers", action="store_true", help="the floor and tapekit only")
    args = parser.parse_args(argv)
    if args.threads and "numpy" not in sys.modules:  # BLAS reads these when numpy loads
        os.environ.update({name: str(args.threads) for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                                 "MKL_NUM_THREADS")})
    peers = find_peers(wanted=not args.no_peers, threads=args.threads, only=set(PEER_KEYS))
    made = contenders(args.n, peers)
    wrong = checked(made)
    results = measured("W7 jacobian", made, wrong, args.repeats)
    printed(f"W7, Jacobian of R^{args.n} -> R^{args.n} both ways, float32, median of {args.repeats} "
            f"(ratio to the floor of the same repeat: median, min - max)", results)
    made = hvp_contenders(BATCH, DIMS, peers)
    hvp_wrong = hvp_checked(made, BATCH, DIMS)
    results = measured("W7 hvp", made, hvp_wrong, args.repeats)
    printed(f"W7, Hessian-vector product of W2's MLP loss ({'-'.join(map(str, DIMS))}, batch {BATCH}, "
            f"float32) in all its parameters, median of {args.repeats} (ratio to numpy's forward and backward "
            f"of the loss, one gradient, of the same repeat: median, min - max)", results)
    for key in PEER_KEYS:
        if key in peers and not peers[key].present:
            print(f"  {peers[key].title}: {peers[key].absent}")
    return 1 if wrong or hvp_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
