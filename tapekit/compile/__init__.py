"""``tk.compile``: the tape becomes a program.

``step = tk.compile(fn)`` runs ``fn`` eagerly on its first call (forward, backward, an optimizer
update if ``fn`` makes one) while it records every array call the run makes through the device's
array namespace: the ops' forwards, the backward rules in the order the engine runs them, the
engine's sums of gradients, the optimizer's arithmetic. Later calls whose inputs have the same
shapes, dtypes and devices run that recording, a plain Python function of arrays, without making
a Tensor, a record or a Gradients object for anything in between. ``print(step.source)`` shows it.

How it records. For the first call every input array (the arguments' tensors, the parameters of
the modules ``fn`` uses, the optimizer's state) is swapped for a ``Tracer``: an object that looks
like an array (shape, dtype, operators) and, for each operation on it, computes the result on the
real arrays and notes one line of the program. The device's namespace ``xp`` and its random
generator are swapped for proxies that do the same. tapekit's own code runs unchanged on top:
the ops, the tapes, the backward engine and the optimizers never know they are being recorded.
The program is then written out as Python source (``step.source``) and compiled: a replay is a call
of that function, so it costs what numpy's own calls cost. A long program is compiled in parts of
200 array calls, each shape of part once, from its steps; each part hands the values later parts
read on as one tuple; its text is written when first asked for.

What is fixed at record time and what is not (the guards). Shapes, dtypes, devices, tape policies,
Python numbers (passed as arguments, or read by name, by the step or a function it calls: a global,
a closure's variable, and up to three levels inside what it names, an attribute it names of an
object, a class or a module of the user's, a dict's value under a key it names (every value of a
dict of at most 32 whose items or values it iterates), an item of a list or tuple of at most 32; a
helper's counter too, so read it outside the step), the
Enum members, ranges and sets, the functions and classes it reads by name (by identity: a loss
swapped, a cell defining it run again; and a function's code, which autoreload edits in place),
modules' training modes and public settings (two levels inside a config object, a dict or a short
list they hold too) and optimizers' settings are part of a program's key: a
call that differs in any of them records a new program. A step's eighth program warns
(``tk.RecompileWarning``), naming why it was recorded. The step's inputs are found in its arguments
(and the lists, tuples, dicts and dataclasses among them) and their defaults, a
``functools.partial``'s arguments, its closure, the globals it names, up to three levels inside them
as above (a list of tensors or models whatever its length), and the same in the functions it calls
in turn, three calls deep (a loss defined apart, a model's forward, a model or a function passed to
it, a compiled step it calls; not a library's). A tensor found nowhere there is a constant of the
program, its values frozen, and the recording warns of it (``tk.FrozenTensorWarning``), except of a module's own
tensors that are not parameters (a mask); an optimizer update of parameters that are not inputs
raises a ``CompileError``, since a replay could not put them back. A numpy array the step reads by
name, or is passed, is a constant too, copied when it is recorded: another array records again, but
writing into the array is not seen. Make it a tensor, an argument or one the step reaches by name,
to have each call read it. Values are not part of the key: Python that reads a value while recording
(``float(t)``, ``t.item()``, ``if t > 0:``) raises a ``CompileError`` that names the line, and so
does an op that computes with a tensor's values on the host (``t[i]`` with a tensor or mask ``i``:
index with a numpy array or a list instead; ``nn.Embedding`` finds its rows on the device and
compiles). tapekit's check that labels and indices are in range is a line of the program, run at
every call; its other checks of values (``tk.detect_anomaly``, no negative integer power) run on the
first call's values only. A result recorded on a tape made before the call (a traced argument, a
GlobalTape block around it) is refused: trace and run the backward inside the step. The tensors it
returns carry no tape, on the first call as on a replay (which records nothing): a backward after
the call has nothing to run. Random draws (Dropout's masks) are calls of the device's generator in
the program, so every call draws afresh; a draw from numpy's own generators (its global functions, a
generator the step names, is passed or a module holds, or one's method it names, as ``from
numpy.random import rand`` binds it; not the device's own, under any name) is refused with a
CompileError, since a replay would reuse it (a generator made inside the step is not seen: its
draws are frozen). So is a name the step binds to a tensor it made (a global, a module's
attribute set in ``forward``, an item of a list it appends to): a replay binds no name.
"""

from __future__ import annotations

from typing import Callable

from .errors import CompileError, FrozenTensorWarning, FuseUnavailable, RecompileWarning
from ..errors import checked_flag
from .jit import require_numba
from .program import Compiled

__all__ = ["compile", "Compiled", "CompileError", "FrozenTensorWarning", "RecompileWarning", "FuseUnavailable"]


def compile(fn: Callable, fuse: bool = False) -> Compiled:  # noqa: A001  (as jax.jit and torch.compile are named: tk.compile)
    """``fn`` as a compiled step: the first call runs it eagerly and records its array calls (the
    forward, the backward rules in the order they ran, an optimizer's update); later calls with
    inputs of the same shapes, dtypes and devices run the recorded program on the new arrays,
    without Tensors, records or Gradients for anything in between. Inputs are the tensors among
    the arguments and the parameters and optimizer state that ``fn`` reaches through its
    arguments, its closure or the globals it names. ``step.source`` is the program;
    ``repr(step)`` says how many programs it holds and why each was recorded. Compiled calls run
    one at a time, in any thread; while one records, eager code in other threads must leave its
    inputs alone (they hold tracers until the call ends). A compiled step called while another
    records runs within that recording, its calls the outer program's own (as ``jax.jit`` inside
    ``jit``). A first call refused while it records (a ``CompileError``) puts back what it changed:
    the inputs' arrays and values, the optimizers' state, the gradient buffers."""
    if not callable(fn):
        raise CompileError(f"tk.compile takes a function, got a {type(fn).__name__}")
    if checked_flag(fuse, "tk.compile's fuse"):
        require_numba()
    return Compiled(fn, fuse=fuse)
