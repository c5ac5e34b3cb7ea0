"""The program and the compiled step. ``Compiled`` finds a call's inputs and looks up the program
recorded for its key: it records one (tracers in the cells, the patches on, ``fn`` run eagerly,
then the source generated) when there is none, and otherwise runs it on the new arrays, puts
written arrays and gradient buffers back in their cells and builds the result. A ``Program`` is
one such recording: the compiled function, what it writes, the template of its result, and why it
was recorded."""

from __future__ import annotations

import contextlib
import copy
import gc
import threading
import time
import warnings
from typing import Any, Callable, Iterator

import numpy as np

from ..devices import dtype_name
from ..gradients import Gradients
from .errors import RecompileWarning
from .guards import drawn, module_constants, refuse_draws, refuse_rebound, warn_frozen
from .inputs import MODULE, OPTIMIZER, Inputs, Reach, in_words, settings_changed
from .patches import RECORDING, Patches
from .recorder import Recorder, copy_array
from .results import build_result, renumber, result_template, unwrap_result
from .source import Built, generate
from .tracer import Tracer, is_array


_THREAD = threading.local()  # ``recording``: whether this thread is recording a compiled call
RECORDINGS_BEFORE_WARNING = 8  # as torch.compile's recompile limit: a step past it warns, once


class Program:
    """One recorded call: a Python function of the input arrays, and how to put its results back."""

    def __init__(self, key: tuple, why: str, built: Built, writes: list, results: Any, warned: list,
                 first_seconds: float) -> None:
        self.key, self.why, self.built, self.steps = key, why, built, built.steps
        self.fused = built.fused  # a ``Fused`` where the step fuses, else None
        self.run = built.run if self.fused is None else self.fused.run
        self.writes, self.results, self.warned = writes, results, warned
        self.first_seconds = first_seconds
        self.calls = 0
        self.takes: list[int] = []
        self.grads: list = []
        self.held: list = []  # the objects its key names by id (an array argument), alive while it is

    @property
    def source(self) -> str:
        """The program's Python source (a long one is written when first asked for)."""
        return self.built.source


class Compiled:
    """A step function that records itself once per kind of input and then replays. See ``tk.compile``."""

    def __init__(self, fn: Callable, fuse: bool = False) -> None:
        self.fn, self.fuse = fn, fuse
        self.__wrapped__ = fn  # as functools.wraps says it: what a step that calls this one reads is followed
        self.reach = Reach(fn)
        self.__name__ = getattr(fn, "__name__", "step")
        self.__doc__ = getattr(fn, "__doc__", None)
        self.programs: dict[tuple, Program] = {}
        self.history: list[Program] = []
        self.last: Program | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with RECORDING:  # one compiled call at a time: no other sees the tracers a recording swaps in
            if getattr(_THREAD, "recording", False):  # inside another step's recording: its calls are that program's
                return self.fn(*args, **kwargs)
            return self._call(args, kwargs)

    def _call(self, args: tuple, kwargs: dict) -> Any:
        inputs = Inputs(self.reach, args, kwargs)
        if inputs.new_code or inputs.unfollowed:  # another function under a name, a model passed: follow its code
            self.reach = Reach(self.fn, (*self.reach.passed, *inputs.unfollowed))
            inputs = Inputs(self.reach, args, kwargs)
        program = self.programs.get(inputs.frozen)
        if program is None:
            return self._record(inputs, args, kwargs)
        self.last = program
        program.calls += 1
        cells = inputs.cells
        outs = program.run(*[cells[i].get() for i in program.takes])
        for i, slot in program.writes:
            cells[i].set(outs[slot])
        for g, (entries, slots, meta) in zip(inputs.grads, program.grads):
            _refill(g, entries, iter(slots), meta, outs)
        for message, category in program.warned:
            warnings.warn(message, category, stacklevel=3)  # at the caller's line: _call, __call__
        return build_result(program.results[0], outs, program.results[1], inputs.arg_tensors)

    # -- recording -------------------------------------------------------------------------------------
    def _record(self, inputs: Inputs, args: tuple, kwargs: dict) -> Any:
        # A recording makes many small objects and frees most of them when it ends: the collector, left
        # on, would walk them all, again and again (W4's chain of 30,000 ops: 3 us of 38 an op, measured).
        undo = _Undo(inputs)
        with _collector_paused():
            _THREAD.recording = True
            try:
                return self._recorded(inputs, args, kwargs)
            except BaseException:  # refused: a call that returns nothing changes nothing
                undo()
                raise
            finally:
                _THREAD.recording = False

    def _recorded(self, inputs: Inputs, args: tuple, kwargs: dict) -> Any:
        start = time.perf_counter()
        rec = Recorder(self.__name__)
        tracers = _swap_in_tracers(rec, inputs)
        generators = drawn(self.reach, inputs)
        rec.frozen = dict.fromkeys(module_constants(inputs))
        result, ends, grads_after, warned = self._run_traced(rec, inputs, args, kwargs)
        refuse_rebound(self.reach, inputs, lambda a: type(a) is Tracer and a.rec is rec, self.__name__)
        refuse_draws(generators, self.__name__, rec.global_draws_elsewhere)
        warn_frozen(rec.frozen, self.__name__)
        for message, category in warned:
            warnings.warn(message, category, stacklevel=5)  # at the caller's line: _recorded, _record, _call, __call__
        writes = [(i, end.slot) for i, (t, end) in enumerate(zip(tracers, ends))
                  if type(end) is Tracer and end is not t]
        template, outputs = result_template(result, inputs.arg_tensors, self.__name__, rec.first_birth)
        needed = [slot for _, slot in writes] + outputs + [slot for state in grads_after for slot in state[1]]
        built = generate(rec, tracers, needed, self.__name__, inputs, len(self.history) + 1, self.fuse)
        slot_of = {slot: n for n, slot in enumerate(dict.fromkeys(needed))}
        program = Program(inputs.frozen, self._why(inputs.frozen), built, [(i, slot_of[s]) for i, s in writes],
                          (renumber(template, slot_of), [t.id for t in inputs.arg_tensors]), warned,
                          time.perf_counter() - start)
        program.takes = [i for i, a in enumerate(inputs.alias) if a == i]
        program.held = inputs.held
        program.grads = [(entries, [slot_of[s] for s in slots], meta) for entries, slots, meta in grads_after]
        self.programs[inputs.frozen] = program
        self.history.append(program)
        self.last = program
        if len(self.history) == RECORDINGS_BEFORE_WARNING:
            warnings.warn(
                f"{self.__name__} has recorded {len(self.history)} programs, the last because of {program.why}. Each "
                f"recording runs {self.__name__} eagerly and builds a program "
                f"({program.first_seconds * 1e3:.1f} ms this time): something in its key changes from call to call. "
                f"repr({self.__name__}) says why each was recorded: keep that fixed between calls, or make it a tensor "
                f"argument (its values are not part of the key).", RecompileWarning, stacklevel=5)
        return unwrap_result(result)

    def _run_traced(self, rec: Recorder, inputs: Inputs, args: tuple, kwargs: dict) -> tuple:
        """Run ``fn`` on the tracers with the patches on; put the real arrays back however it ends.
        Its result, what each cell ends holding, the gradient buffers' state, the warnings."""
        cells = inputs.cells
        try:
            with warnings.catch_warnings(record=True) as caught, Patches(rec, inputs):
                warnings.simplefilter("always")
                result = self.fn(*args, **kwargs)
            warned = [(str(w.message), w.category) for w in caught]
        finally:
            ends = [cell.get() for cell in cells]
            for cell, end in zip(cells, ends):
                cell.set(end.a if type(end) is Tracer else end)
            grads_after = [_grads_state(g) for g in inputs.grads]
            _release_state(inputs)
        return result, ends, grads_after, warned

    def _why(self, key: tuple) -> str:
        if not self.history:
            return "the first call"
        before = dict((k[0], k[1:]) for k in self.history[-1].key)
        now = dict((k[0], k[1:]) for k in key)
        for name, value in now.items():
            if name not in before:
                return f"{in_words(name)} is new"
            if before[name] != value:
                if value[0] in (MODULE, OPTIMIZER):
                    return f"{in_words(name)} changed: {settings_changed(before[name][1:], value[1:])}"
                return f"{in_words(name)} changed: {_short(before[name])} -> {_short(value)}"
        gone = [in_words(name) for name in before if name not in now]
        return f"{gone[0]} is gone" if gone else "its inputs changed"

    # -- what it holds ----------------------------------------------------------------------------------
    @property
    def source(self) -> str:
        """The Python source of the program the last call ran (or recorded), unfused."""
        if self.last is None:
            return f"# {self.__name__} has not been called yet: the first call records its program"
        return self.last.source

    @property
    def fused_source(self) -> str:
        """The fused program the last call ran (or recorded): its loops, each statement's comment
        naming its record, their wrappers, and the program that calls them between numpy's calls."""
        if not self.fuse:
            return f"# {self.__name__} is compiled without fuse=True: its program is step.source"
        if self.last is None:
            return f"# {self.__name__} has not been called yet: the first call records and fuses its program"
        return self.last.fused.source

    def __repr__(self) -> str:
        n = len(self.history)
        fused = ", fused" if self.fuse else ""
        lines = [f"<tk.compile of {self.__name__}{fused}: {n} program{'s' if n != 1 else ''}"]
        for i, p in enumerate(self.history, 1):
            compiled = "" if p.fused is None else f", of which compiling loops {p.fused.seconds:.2f} s"
            lines.append(f"  #{i}: {p.steps} array calls, recorded because of {p.why} "
                         f"(record + build {p.first_seconds * 1e3:.1f} ms{compiled}), "
                         f"replayed {p.calls} time{'s' if p.calls != 1 else ''}")
            lines += [f"      {line}" for line in ([] if p.fused is None else p.fused.summary())]
        return "\n".join(lines) + ">"


def _short(value: Any) -> str:
    if isinstance(value, tuple) and len(value) == 1 and isinstance(value[0], frozenset):
        return f"{len(value[0])} of them"
    if isinstance(value, tuple) and value[:1] == ("array",):  # a tensor: its shape, dtype, tape and device
        _, shape, dtype, *rest = value
        tape = "no" if not rest or rest[0] is type(None) else rest[0].__name__
        more = "" if not rest else f", {tape} tape, on {'/'.join(map(str, rest[1]))}"
        return f"{dtype_name(dtype)} {tuple(shape)}{more}"
    if isinstance(value, tuple) and len(value) == 1 and isinstance(value[0], tuple) and value[0][:1] == ("array",):
        _, shape, dtype = value[0]
        return f"{dtype_name(dtype)} {tuple(shape)}"
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):  # a number, or an object's id
        text = f"{value[0]} {hex(value[1]) if value[0].endswith(' at') else repr(value[1])}"
        return text if len(text) <= 80 else text[:77] + "..."
    text = repr(value[0] if isinstance(value, tuple) and len(value) == 1 else value)
    return text if len(text) <= 80 else text[:77] + "..."


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class _Undo:
    """What a recording may change, kept to put back when its call is refused: each input's array
    (and a copy of its values, which an in-place step may write), the optimizers' state and the
    gradient buffers' entries. It costs a copy of the inputs' arrays for each recording."""

    def __init__(self, inputs: Inputs) -> None:
        self.cells = [(cell, value, copy_array(value) if is_array(value) else None)
                      for cell, value in ((cell, cell.get()) for cell in inputs.cells)]
        self.tables = [(opt._state, dict(opt._state)) for opt in inputs.optimizers]
        self.states = [(state, dict(state)) for opt in inputs.optimizers for _, state in opt._state.values()]
        self.grads = [(g, [(name, copy.copy(getattr(g, name))) for name in Gradients.__slots__]) for g in inputs.grads]

    def __call__(self) -> None:
        for cell, value, values in self.cells:
            cell.set(value)
            if values is not None:
                _write_back(value, values)
        for saved in self.tables + self.states:
            saved[0].clear()
            saved[0].update(saved[1])
        for g, fields in self.grads:
            for name, value in fields:
                setattr(g, name, value)


def _write_back(array: Any, values: Any) -> None:
    """Put ``values`` back into ``array``, which an in-place step may have written (not a read-only one)."""
    if isinstance(array, np.ndarray):
        if array.flags.writeable:
            np.copyto(array, values)
    elif not isinstance(array, np.generic):
        array[...] = values


def _swap_in_tracers(rec: Recorder, inputs: Inputs) -> list[Tracer]:
    """Put a tracer in every input cell (one per array: cells that hold the same array share it)."""
    first: dict[int, Tracer] = {}
    tracers = []
    for i, cell in enumerate(inputs.cells):
        value = cell.get()
        t = first.get(inputs.alias[i])
        if t is None:
            t = first[i] = rec.slot(value, "input")
        tracers.append(t)
        cell.set(t)
    return tracers


def _refill(g: Gradients, entries: list, slots: Iterator[int], meta: tuple, outs: tuple) -> None:
    """A gradient buffer made outside the step, as the recording left it, with this replay's arrays."""
    g._arrays = {tid: outs[next(slots)] if value is None else value for tid, value in entries}
    g.leaves, g._owned, g._clean, g._partial, g._why = meta[0], set(meta[1]), set(meta[2]), set(meta[3]), dict(meta[4])
    g._ran = None


def _grads_state(g: Gradients) -> tuple:
    """What a recording left in gradient buffers made outside it, with their real arrays put back:
    the entries (tid, None for a slot, or the value), their slots, and the bookkeeping."""
    entries, slots = [], []
    for tid, value in list(g._arrays.items()):
        if type(value) is Tracer:
            entries.append((tid, None))
            slots.append(value.slot)
            g._arrays[tid] = value.a
        else:
            entries.append((tid, value))
    return entries, slots, (g.leaves, frozenset(g._owned), frozenset(g._clean), frozenset(g._partial), dict(g._why))


def _release_state(inputs: Inputs) -> None:
    """Optimizer state made while recording holds tracers: give it its real arrays."""
    for opt in inputs.optimizers:
        for p, state in opt._state.values():
            if type(p.data) is Tracer:
                p.data = p.data.a
            for k, v in list(state.items()):
                if type(v) is Tracer:
                    state[k] = v.a
