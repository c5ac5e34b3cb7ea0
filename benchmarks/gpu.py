"""``python -m benchmarks.gpu``: one MLP training step on the CPU and on the GPU at a large batch,
eager and under ``tk.compile``.

Both devices start from the same seed, so they train the same parameters; the step (forward,
backward, SGD update) is timed as the median of 7 runs after a warm-up (which, compiled, records
the program), with the GPU synchronised before each clock reading. Prints the times and the speed
ratio of each. Without CuPy or a GPU it says so and exits with status 1.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Callable

import numpy as np

import tapekit as tk


def mlp(device: tk.Device, dims: tuple[int, ...]) -> tk.nn.Sequential:
    layers: list[tk.nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(dims[:-1], dims[1:])):
        layers.append(tk.nn.Linear(n_in, n_out, device=device))
        if i < len(dims) - 2:
            layers.append(tk.nn.Tanh())
    return tk.nn.Sequential(*layers)


def step_timer(device: tk.Device, batch: int, dims: tuple[int, ...], sync: Callable[[], None],
               compiled: bool = False) -> Callable[[], float]:
    """A function that runs one training step (under ``tk.compile`` with ``compiled=True``) and
    returns its loss."""
    model = mlp(device, dims)
    opt = tk.optim.Sgd(model, lr=0.01)
    grads = model.alloc_grads()
    rng = np.random.default_rng(0)
    x = device.tensor(rng.standard_normal((batch, dims[0])))
    labels = device.tensor(rng.integers(0, dims[-1], batch))

    def train(x: tk.Tensor, labels: tk.Tensor) -> tk.Tensor:
        model.zero_grads(grads)
        loss = tk.cross_entropy(model.trace(tk.UnionTape(grads))(x), labels)
        opt.update(model, loss.backward())
        return loss

    run = tk.compile(train) if compiled else train

    def step() -> float:
        loss = run(x, labels)
        sync()
        return loss.item()

    return step


def median_seconds(step: Callable[[], float], repeats: int = 7) -> float:
    step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--dims", type=int, nargs="+", default=[784, 1024, 1024, 10])
    args = parser.parse_args(argv)
    try:
        gpu = tk.Cuda(seed=0)
    except tk.DeviceUnavailableError as err:
        print(f"no GPU here: {err}")
        return 1
    dims = tuple(args.dims)
    sync = gpu.cupy.cuda.Device(gpu.device_id).synchronize
    print(f"MLP {'-'.join(map(str, dims))}, batch {args.batch}, float32, one training step (median of 7):")
    for how, compiled in (("eager", False), ("compiled", True)):
        cpu_step = step_timer(tk.Cpu(seed=0), args.batch, dims, lambda: None, compiled)
        gpu_step = step_timer(gpu, args.batch, dims, sync, compiled)
        cpu_loss, gpu_loss = cpu_step(), gpu_step()
        cpu_s, gpu_s = median_seconds(cpu_step), median_seconds(gpu_step)
        print(f"{how:>8}: CPU {cpu_s * 1e3:.1f} ms, GPU {gpu_s * 1e3:.2f} ms, GPU is {cpu_s / gpu_s:.1f}x faster "
              f"(first-step loss CPU {cpu_loss:.5f}, GPU {gpu_loss:.5f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
