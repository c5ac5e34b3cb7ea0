"""What code written for numpy expects of tapekit: errors it catches by numpy's classes."""

from __future__ import annotations

import numpy as np
import pytest

import tapekit as tk


def test_an_axis_error_is_caught_as_numpy_code_catches_numpy_s(cpu):
    assert issubclass(np.exceptions.AxisError, ValueError) and issubclass(np.exceptions.AxisError, IndexError)
    for numpy_catches in (ValueError, IndexError):
        with pytest.raises(numpy_catches, match="out of range"):
            cpu.tensor([1.0, 2.0]).sum(axis=3)
