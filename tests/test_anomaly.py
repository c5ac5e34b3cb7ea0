"""``tk.detect_anomaly()``: the first NaN or infinity of a forward or a backward is named, with the
user's line, the record and the operands' ranges, and the tapes stay as they were."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapekit as tk

from .conftest import POLICIES
from .test_bad_input import snapshot

THIS_FILE = __file__


def test_a_nan_in_the_forward_names_the_users_line_and_the_operands(cpu):
    x = cpu.tensor([-1.0, 4.0], name="x").trace()
    before = snapshot(x)
    with tk.detect_anomaly(), warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's own RuntimeWarning is silenced inside the block
        with pytest.raises(tk.NonFiniteError) as info:
            (x.log() * 2).sum()
    message = str(info.value)
    assert f"{THIS_FILE}:" in message and "(x.log() * 2).sum()" in message
    assert "log made nan" in message and "log(x (from -1 to 4))" in message
    assert snapshot(x) == before and len(x.tape) == 0  # nothing recorded: x can still record
    assert np.allclose((x.exp() * 1.0).numpy(), np.exp([-1.0, 4.0]))


def test_an_overflowing_exp_is_named(cpu):
    with tk.detect_anomaly(), pytest.raises(tk.NonFiniteError, match=r"exp made inf .*exp\(t\d+ \(all 100\)\)"):
        cpu.tensor([100.0]).trace().exp()


@pytest.mark.parametrize("policy", ["owned", "arc", "union"])
def test_a_nan_in_the_backward_names_the_rule_and_where_its_op_was_made(cpu, policy):
    x = cpu.tensor([0.0, 4.0], name="x").trace(POLICIES[policy]())
    with tk.detect_anomaly():
        y = x.sqrt().sum()  # the line the error names
        before = snapshot(y)
        with pytest.raises(tk.NonFiniteError) as info:
            y.backward()
    message = str(info.value)
    assert "the backward rule of" in message and "= sqrt(x)`" in message and "made inf" in message
    assert "y = x.sqrt().sum()  # the line the error names" in message and "Nothing changed" in message
    assert snapshot(y) == before
    g = y.backward()  # outside the block: the same backward runs, with numpy's inf
    assert np.isinf(g[x][0])


def test_outside_the_block_nothing_is_checked(cpu):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = cpu.tensor([-1.0]).trace().log()
    assert np.isnan(y.numpy()).all()
    assert not tk.anomaly.on


def test_blocks_nest(cpu):
    with tk.detect_anomaly():
        with tk.detect_anomaly():
            pass
        assert tk.anomaly.on
        with pytest.raises(tk.NonFiniteError):
            cpu.tensor([-1.0]).log()
    assert not tk.anomaly.on


def test_a_line_in_a_notebook_cell_is_named_as_one(cpu):
    """IPython runs a cell's code from a temporary file named after the kernel: the message says
    which line of the cell, not the file's path."""
    code = "x = dev.tensor([-1.0], name='x').trace()\ny = x.log()\n"
    cell = compile(code, "/tmp/ipykernel_4102/3848855837.py", "exec")
    with tk.detect_anomaly(), warnings.catch_warnings(), pytest.raises(tk.NonFiniteError) as info:
        warnings.simplefilter("ignore")
        exec(cell, {"dev": cpu})
    assert "log made nan at line 2 of a notebook cell: log(x" in str(info.value)
    assert "ipykernel" not in str(info.value)
