"""tapekit's benchmark suite: ``python -m benchmarks`` (or ``make bench``).

Six workloads (W1-W6), each timed against hand-written numpy code that computes the same forward
and backward (the floor), in the same run, beside PyTorch, HIPS autograd and MyGrad when they are
installed. It prints a table and writes ``results.md`` and ``results.png`` beside this file.
"""
