"""One hierarchy: every error class is raised by a real bad call, with a message that helps."""

from __future__ import annotations

import numpy as np
import pytest

import tapekit as tk


def calls():
    dev = tk.Cpu()
    x = dev.tensor([1.0, 2.0], name="x")

    def moved():
        t = dev.tensor([1.0], name="t").trace()
        t * 2.0
        t + 1.0

    def consumed():
        out = (dev.tensor([1.0]).trace() * 2.0).sum()
        out.backward()
        out.backward()

    def missing():
        g = (x.trace() * 2.0).sum().backward()
        g[dev.tensor([0.0], name="w")]

    return {
        tk.ShapeError: (lambda: x + dev.ones(3), "do not broadcast"),
        tk.AxisError: (lambda: x.sum(axis=2), "out of range"),
        tk.IndexingError: (lambda: x[[0, 5]], "out of bounds for axis 0"),
        tk.DeviceMismatchError: (lambda: tk.Cpu(backend="strict", where="device1").tensor([1.0])
                                 + tk.Cpu(backend="strict", where="device2").tensor([1.0]), "Move one"),
        tk.DeviceUnavailableError: (lambda: tk.Cuda(device_id=99), "GPU|CuPy"),
        tk.DTypeError: (lambda: dev.tensor(np.array([1, 2])).trace(), "not floating"),
        tk.InvalidArgumentError: (lambda: tk.Cpu(backend="torch"), "unknown backend"),
        tk.OperandError: (lambda: x * "2", "unsupported operand of type str"),
        tk.TapeMovedError: (moved, "moved into the output of `"),
        tk.TapeConsumedError: (consumed, "consumed"),
        tk.TapePolicyError: (lambda: x.trace(tk.ArcTape()) + x.trace(tk.UnionTape()), "mix tape policies"),
        tk.BackwardError: (lambda: (x.trace() * 2.0).backward(), "needs a seed"),
        tk.NonFiniteError: (lambda: _with_anomaly_detection(lambda: (x.trace() - 5.0).log()), "log made nan"),
        tk.MissingGradientError: (missing, "w has no gradient"),
    }


@pytest.mark.parametrize("error", list(calls()), ids=lambda e: e.__name__)
def test_each_error_comes_from_a_real_call(error):
    call, message = calls()[error]
    with pytest.raises(error, match=message) as info:
        call()
    assert isinstance(info.value, tk.TapekitError)
    assert len(str(info.value)) > 30


def test_errors_are_also_the_builtin_kinds_users_catch():
    assert issubclass(tk.ShapeError, ValueError) and issubclass(tk.IndexingError, IndexError)
    assert issubclass(tk.MissingGradientError, KeyError) and issubclass(tk.DTypeError, TypeError)
    assert issubclass(tk.OperandError, TypeError)
    assert issubclass(tk.IncompleteTapeWarning, UserWarning)


def _with_anomaly_detection(call):
    with tk.detect_anomaly():
        return call()
