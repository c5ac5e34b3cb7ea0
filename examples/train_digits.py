"""Train a small MLP on scikit-learn's handwritten digits (8x8 images, 10 classes, shipped with
scikit-learn: no download) and report held-out accuracy.

    python -m examples.train_digits        (from the repository root)

The loop is the allocation-saving one: gradient buffers from ``model.alloc_grads()`` are zeroed
and reused every step, and each step's tape carries them (parameter tagging with a ``UnionTape``,
or input tagging with an ``OwnedTape``, dfdx style).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

import tapekit as tk


@dataclass(frozen=True)
class DigitsResult:
    """What one training run gave: held-out accuracy, wall time (loading, training and testing) and
    the mean loss of each epoch."""

    accuracy: float
    seconds: float
    epoch_losses: tuple[float, ...]
    test_size: int

    def __str__(self) -> str:
        return (f"held-out accuracy {self.accuracy:.1%} on {self.test_size} images after "
                f"{len(self.epoch_losses)} epochs in {self.seconds:.2f} s (last epoch loss "
                f"{self.epoch_losses[-1]:.4f})")


def load_split(seed: int = 0, test_fraction: float = 0.25) -> tuple[np.ndarray, ...]:
    """Digits scaled to [0, 1], split into train and held-out sets with the same class mix:
    ``x_train, x_test, y_train, y_test``."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    x, y = (digits.data / 16.0).astype(np.float32), digits.target
    rng = np.random.default_rng(seed)
    held_out = np.zeros(len(y), dtype=bool)
    for label in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == label))
        held_out[members[:round(len(members) * test_fraction)]] = True
    return x[~held_out], x[held_out], y[~held_out], y[held_out]


def make_model(device: tk.Device, hidden: int = 64) -> tk.nn.Module:
    return tk.nn.Sequential(tk.nn.Linear(64, hidden, device=device), tk.nn.ReLU(),
                            tk.nn.Linear(hidden, 10, device=device))


def train_digits(epochs: int = 30, batch_size: int = 64, lr: float = 1e-2, tagging: str = "parameters",
                 seed: int = 0, device: tk.Device | None = None) -> DigitsResult:
    """Train with Adam and mini-batches; return the accuracy on the held-out quarter of the data."""
    if tagging not in ("parameters", "input"):
        raise tk.InvalidArgumentError(f"tagging must be 'parameters' or 'input', got {tagging!r}")
    start = time.perf_counter()
    dev = device or tk.Cpu(seed=seed)
    x_train, x_test, y_train, y_test = load_split(seed)
    model = make_model(dev)
    opt = tk.optim.Adam(model, lr=lr)
    grads = model.alloc_grads()
    order = np.random.default_rng(seed)
    losses = []
    for _ in range(epochs):
        total = 0.0
        perm = order.permutation(len(x_train))
        for lo in range(0, len(perm), batch_size):
            idx = perm[lo:lo + batch_size]
            x, y = dev.tensor(x_train[idx]), y_train[idx]
            model.zero_grads(grads)
            if tagging == "parameters":
                loss = tk.cross_entropy(model.trace(tk.UnionTape(grads))(x), y)
            else:
                loss = tk.cross_entropy(model(x.trace(tk.OwnedTape(grads))), y)
            total += loss.item() * len(idx)
            grads = loss.backward()
            opt.update(model, grads)
        losses.append(total / len(x_train))
    predicted = model(dev.tensor(x_test)).argmax(axis=-1).numpy()
    seconds = time.perf_counter() - start
    return DigitsResult(float(np.mean(predicted == y_test)), seconds, tuple(losses), len(y_test))


if __name__ == "__main__":
    print(train_digits())
