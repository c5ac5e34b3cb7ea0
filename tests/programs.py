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


def three_outputs(tape):
    """Tutorial 5's program: three outputs that share their inputs, so an ArcTape run partitions them."""
    dev = tk.Cpu()
    x = dev.tensor([1.0, 2.0]).trace(tape())
    y = dev.tensor([4.0, 5.0]).trace(tape())
    w = dev.tensor([0.5, -1.0]).trace(tape())
    b = (y * w).sum()
    h = x * y
    a = h.sum()
    c = (h + w).sum()
