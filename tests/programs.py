"""Programs the replaying widgets and pictures are tested on, each a function of a tape factory
(the widgets read a program's source to step through it line by line), and P4 run directly."""

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


def fan_out(tape):
    """x reaches s three ways: twice through x * x, once through exp (on a tape of its own)."""
    dev = tk.Cpu()
    x = dev.tensor([0.5, 1.0]).trace(tape())
    e = x.retaped().exp()
    xx = x * x
    y = e + xx
    s = y.sum()


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


def p4_run(policy=tk.ArcTape, zz_first=True):
    """P4 run directly, not replayed (as tutorial 4 runs it): z = x + y and zz = y * 2.0, each
    input on its own tape (P5 under UnionTape with z first). Returns x, y, z, zz, all named."""
    dev = tk.Cpu()
    x = dev.tensor([1., 2.], name="x").trace(policy())
    y = dev.tensor([4., 5.], name="y").trace(policy())
    if zz_first:
        zz = y * 2.0
        z = x + y
    else:
        z = x + y
        zz = y * 2.0
    z.name, zz.name = "z", "zz"
    return x, y, z, zz
