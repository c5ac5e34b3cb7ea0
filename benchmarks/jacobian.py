"""W7, forward mode: the Jacobian of a map from R^n to R^n (n = 100: ``tanh(W2 tanh(W1 x + b1) + b2)``,
float32) by forward mode, one JVP per input direction, against the hand-written numpy Jacobian
(the floor) and the peers' ``jacfwd`` where installed (JAX's under ``jit``, ``torch.func``'s).

``python -m benchmarks.jacobian`` checks every contender's Jacobian against the floor's, times
them interleaved (ratios to the floor of the same repeat) and prints a table.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .measure import Contender, compiled, time_interleaved  # (no numpy: BLAS's thread variables come first)
from .peers import Peer, find_peers

N = 100


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


def tapekit(params: list[Any], x: Any) -> Contender:
    """``tk.jacfwd``: one ``tk.jvp`` pass per input direction, no tape."""
    import tapekit as tk

    dev = tk.Cpu()
    W1, b1, W2, b2 = (dev.tensor(p) for p in params)
    point = dev.tensor(x)

    def f(t: Any) -> Any:
        return tk.tanh(W2 @ tk.tanh(W1 @ t + b1) + b2)

    return Contender("tapekit jacfwd", lambda: tk.jacfwd(f, point).numpy())


def jax(params: list[Any], x: Any, peer: Peer) -> Contender:
    """``jax.jit(jax.jacfwd(f))``: JAX pushes all n directions at once (``vmap``), compiled."""
    jax, jnp = peer.module, peer.module.numpy
    W1, b1, W2, b2 = (jnp.asarray(p) for p in params)
    point = jnp.asarray(x)
    jac = jax.jit(jax.jacfwd(lambda t: jnp.tanh(W2 @ jnp.tanh(W1 @ t + b1) + b2)))
    return compiled(f"{peer.title}: jacfwd", lambda: jax.device_get(jac(point)), memory=False)


def torch(params: list[Any], x: Any, peer: Peer) -> Contender:
    """``torch.func.jacfwd`` in eager mode (it batches the directions with ``vmap``)."""
    torch = peer.module
    W1, b1, W2, b2 = (torch.tensor(p) for p in params)
    point = torch.tensor(x)
    jac = torch.func.jacfwd(lambda t: torch.tanh(W2 @ torch.tanh(W1 @ t + b1) + b2))
    return Contender(f"{peer.title}: torch.func.jacfwd", lambda: jac(point).numpy(), memory=False)


def contenders(n: int, peers: dict[str, Peer]) -> list[Contender]:
    """The floor, tapekit, then each installed peer that has a ``jacfwd``."""
    params, x = problem(n)
    made = [floor(params, x), tapekit(params, x)]
    return made + [maker(params, x, peers[key]) for key, maker in (("jax", jax), ("torch", torch))
                   if key in peers and peers[key].present]


def checked(made: list[Contender]) -> list[str]:
    """Each contender's Jacobian against the floor's (float32: to 1e-4): what disagrees, in words."""
    import numpy as np

    want = made[0].once()
    wrong = []
    for c in made[1:]:
        try:
            got = np.asarray(c.once())
        except Exception as err:  # reported by the timing as well
            wrong.append(f"{c.name}: failed ({type(err).__name__}: {err})")
            continue
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            wrong.append(f"{c.name}: its Jacobian differs from the floor's")
    return wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.jacobian", description=__doc__)
    parser.add_argument("--n", type=int, default=N, help=f"the map's size, R^n -> R^n (default {N})")
    parser.add_argument("--repeats", type=int, default=11, help="timed repeats (default 11)")
    parser.add_argument("--threads", type=int, default=1, help="threads for BLAS, PyTorch and XLA (default 1)")
    parser.add_argument("--no-peers", action="store_true", help="the floor and tapekit only")
    args = parser.parse_args(argv)
    if args.threads and "numpy" not in sys.modules:  # BLAS reads these when numpy loads
        os.environ.update({name: str(args.threads) for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                                 "MKL_NUM_THREADS")})
    peers = find_peers(wanted=not args.no_peers, threads=args.threads, only={"jax", "torch"})
    made = contenders(args.n, peers)
    wrong = checked(made)
    for line in wrong:
        print("CHECK FAILED:", line)
    results = time_interleaved("W7 jacfwd", made, args.repeats)
    print(f"W7, forward mode: Jacobian of R^{args.n} -> R^{args.n}, float32, median of {args.repeats} "
          f"(ratio to the floor of the same repeat: median, min - max)")
    for r in results:
        if r.seconds is None:
            print(f"  {r.contender:<42} {r.note}")
            continue
        first = r.extra.get("first_call")
        compile_note = f"  (first call {first * 1e3:,.0f} ms)" if first is not None else ""
        print(f"  {r.contender:<42} {r.seconds.median * 1e3:9.3f} ms  {r.ratio.median:8.2f}x "
              f"({r.ratio.low:.2f} - {r.ratio.high:.2f}){compile_note}")
    for key, peer in sorted(peers.items()):
        if key in ("jax", "torch") and not peer.present:
            print(f"  {peer.title}: {peer.absent}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
