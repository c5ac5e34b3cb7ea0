"""A float warning names the learner's line, or there is none: numpy's warnings about a log(0) or a
0/0 inside an op or a backward rule (which would name a line of tapekit's source) are not shown;
numpy's warnings at the learner's own lines are, and ``np.errstate(all="raise")`` still raises."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import numpy as np
import tapekit as tk
dev = tk.Cpu()
x = dev.tensor([0.0, 1.0], name="x").trace(tk.UnionTape())
y = x.log()                                    # log(0): -inf, in the forward
g = (x.sqrt() * 1.0).sum().backward()          # 1 / (2 sqrt(0)): inf, in the backward
z = dev.tensor([0.0]) / dev.tensor([0.0])      # 0 / 0
np.log(np.zeros(1))                            # the learner's own numpy call: line 9
with np.errstate(divide="raise"):
    try:
        x.log()
    except FloatingPointError as err:
        print("raised:", err)
"""


def test_no_warning_names_a_line_of_tapekit_and_the_learners_own_numpy_still_warns():
    done = subprocess.run([sys.executable, "-W", "default", "-c", PROGRAM], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "tapekit" not in done.stderr, done.stderr
    assert done.stderr.count("RuntimeWarning") == 1
    assert "<string>:9: RuntimeWarning: divide by zero encountered in log" in done.stderr
    assert done.stdout == "raised: divide by zero encountered in log\n"
