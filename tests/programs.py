"""Programs the replaying widgets and pictures are tested on, each a function of a tape factory
(the widgets read a program's source to step through it line by line)."""

import tapekit as tk


def p4(tape):
    """P4 in the order of the seed complaint: zz first, so the merge moves zz's record to x's tape."""
    dev = tk.Cpu()
    x = dev.tensor([1., 2.]).trace(tape())
    y = dev.tensor([4., 5.]).trace(tape())
    zz = y * 2.0
    z = x + y


def p5(tape):
    """P4 in the other order (z first): under UnionTape, the design's P5."""
    dev = tk.Cpu()
    x = dev.tensor([1., 2.]).trace(tape())
    y = dev.tensor([4., 5.]).trace(tape())
    z = x + y
    zz = y * 2.0
