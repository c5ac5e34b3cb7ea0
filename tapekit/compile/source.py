"""The source: a recording written out as Python and compiled. Steps whose results nothing uses are
dropped; every slot gets a variable name (a tensor's name where it has one); each step becomes one
line, under a heading for its phase (forward, backward, update) with a comment naming its op or
rule; big arrays are let go after their last use; and a long program is cut into parts, one
function each, called in turn (parts of one shape are compiled once: ``parts.py``)."""

from __future__ import annotations

import builtins
import functools
import keyword
import math
import re
from itertools import chain
from typing import Any, Callable, Iterator

import numpy as np

from ..ids import label, name_of
from ..tensor import Tensor
from .inputs import Inputs, in_words
from .parts import Part, compile_parts, named
from .recorder import Recorder, Ref, Step, slots_in
from .tracer import is_array


_IDENT = re.compile(r"[^0-9a-zA-Z_]+")
_RESERVED = {"np", "xp", "asarray", "copy_of"}


class Source:
    """A program's text, written the first time it is read and then kept (what it was written from
    is let go): a long program's text costs more to write than compiling it from its steps does."""

    __slots__ = ("_write", "_text")

    def __init__(self, write: Callable[[], str]) -> None:
        self._write: Callable[[], str] | None = write
        self._text: str | None = None

    def read(self) -> str:
        if self._text is None:
            self._text, self._write = self._write(), None
        return self._text


class Built:
    """What ``generate`` makes: the program's source, its compiled function, its number of array
    calls, and, fused, the same three for the fused program and its runs."""

    def __init__(self, text: Source, run: Callable, steps: int) -> None:
        self.text, self.run, self.steps = text, run, steps
        self.fused: Any = None  # a ``fuse.Fused`` where the step is compiled with fuse=True

    @property
    def source(self) -> str:
        return self.text.read()


def generate(rec: Recorder, tracers: list, needed: list, fn_name: str, inputs: Inputs, number: int,
             fuse: bool = False) -> Built:
    """The program as Python source, compiled: ``run(*inputs) -> (needed values...)``; and fused
    (``fuse=True``), the same with its runs of elementwise calls as compiled loops."""
    kept, live = _live_steps(rec.steps, needed)
    writer = Writer(rec, inputs, tracers, needed, fn_name, number)
    writer.prelude, writer.copied = _constants(rec, kept, live, writer.names)
    built = Built(*writer.write(kept, len(kept)), len(kept))
    if fuse:
        from .fuse import fuse_program
        built.fused = fuse_program(writer, kept, built)
    return built


def _live_steps(steps: list[Step], needed: list) -> tuple[list[Step], set]:
    """The steps whose results are used or that change something, in order, and the slots they read."""
    live = set(needed)
    kept = []
    for step in reversed(steps):
        if step.effect or step.out in live:
            kept.append(step)
            live.update(step.slots)
            if step.effect and step.out is not None:
                live.add(step.out)
    kept.reverse()
    return kept, live


def _constants(rec: Recorder, kept: list[Step], live: set, names: dict) -> tuple[list[str], list[int]]:
    """The program's constants as globals; the lines that copy those it writes into, and their slots."""
    consts = sorted(s for s in live if rec.kinds[s] == "const")
    if not consts:  # nothing to copy, so no need to find what the program writes into
        return [], []
    effects = [s for s in kept if s.effect]
    mutated = {s.out for s in effects if s.out is not None} | {
        s.args[0].slot for s in effects if s.args and type(s.args[0]) is Ref}
    for step in reversed(kept):  # what a written array may be a view of may be written too (a copy too many is harmless)
        if not step.effect and step.out in mutated and step.kind not in _NEW_ARRAYS:
            mutated.update(slots_in(step.args))
    lines, copied = [], []
    for s in consts:
        rec.globals[f"_{names[s]}"] = rec.values[s]
        if s in mutated:
            lines.append(f"{names[s]} = copy_of(_{names[s]})  # a constant this program writes into: a fresh copy")
            copied.append(s)
        else:
            rec.globals[names[s]] = rec.values[s]
    return lines, copied


_NEW_ARRAYS = ("binop", "unop")  # an operator's result is a new array, never a view of an operand


# A function's body, before it is written: a list of entries, each an int (the index of an item:
# its line), a str (a heading, or a blank line) or a tuple of slots (``del`` of their arrays).
Entries = list


class Writer:
    """Writes a list of steps (and fused runs) as the program's source, and compiles it."""

    def __init__(self, rec: Recorder, inputs: Inputs, tracers: list, needed: list, fn_name: str, number: int) -> None:
        self.rec, self.fn_name, self.number, self.needed = rec, fn_name, number, needed
        self.names = _names_of(rec, inputs, tracers)
        self.params = list(dict.fromkeys(t.slot for t in tracers))
        self.outs = list(dict.fromkeys(needed))
        self.tensors = _tensor_names(rec, inputs, tracers, self.names)
        self.big = _big(rec)
        self.prelude: list[str] = []
        self.copied: list[int] = []  # the constants the program writes into, copied by the prelude
        self.main = f"{_ident(fn_name)}_program_{number}"

    def called(self, tid: int) -> str:
        """A tensor's name in the program's comments."""
        return _called(self.tensors, tid)

    def comment(self, step: Step) -> str:
        """The comment of a step's line: the op or rule it belongs to."""
        return _comment(step.group, self.called)

    def write(self, items: list, calls: int, space: dict | None = None, heading: str = "") -> tuple[Source, Callable]:
        """The source of ``items`` (``calls`` array calls) and its compiled function (``space``: more
        globals it names)."""
        rec = self.rec
        devices = ", ".join(f"{name} = {rec.globals[name]!r}" for name in rec.globals if name.startswith("dev"))
        header = f"# {self.fn_name}, recorded by tk.compile: {calls} array calls; {devices}{heading}"
        chunks = _entries(items, PART)
        if len(chunks) == 1:
            body = self.prelude + self.lines(_freeing(chunks[0], items, self.big, set(self.outs)), items)
            source = "\n".join([header] + _function(self.main, self._named(self.params), body,
                                                     self._named(self.outs))) + "\n"
            space = dict(rec.globals) | (space or {})
            exec(builtins.compile(source, self._filename(), "exec"), space)
            return Source(lambda: source), space[self.main]
        return self._write_parts(header, chunks, items, space or {})

    def _write_parts(self, header: str, chunks: list[Entries], items: list, space: dict) -> tuple[Source, Callable]:
        """A long program: its parts compiled once a shape (``parts.py``) from their entries, and the
        function that calls them; its text is written only when asked for. (W4's chain of 30,000
        ops: writing the whole text took 7 us an op and compiling the parts from it 11, of a first
        call of 52 us an op; measured.)"""
        parts, calls, returned = _parts(self.main, self.params, self.copied, chunks, items, self.names, self.outs,
                                        self.big)
        main = _function(self.main, self._named(self.params), self.prelude + calls, returned)
        extra, space = space, {}
        first = header.count("\n") + 2  # the first part's def: right after the header
        shaped, end = compile_parts(parts, lambda part, names: "\n".join(self._part(part, items, names, full=False)),
                                    first, self._filename(), space, items, self.names)
        space |= self.rec.globals | extra  # the parts' globals, with those bound while their shapes were written
        exec(builtins.compile("\n" * (end - 1) + "\n".join(main), self._filename(), "exec"), space)
        notes = [[None] * len(part.takes) + _notes(part.entries, items) for part in parts]
        called = functools.partial(_called, self.tensors)
        part_names = [part.name for part in parts]
        return Source(lambda: _long_text(header, part_names, shaped, notes, main, called)), space[self.main]

    def _part(self, part: Part, items: list, names: dict, full: bool = True) -> list[str]:
        """A part's function, with ``names`` for its slots: it takes the values it reads from earlier
        parts' tuples, then runs its entries."""
        takes = [f"{names[slot]} = {names[handed]}[{i}]" for slot, handed, i in part.takes]
        return _function(part.name, [names[s] for s in part.params],
                         takes + self.lines(part.entries, items, names, full), [names[s] for s in part.results])

    def lines(self, entries: Entries, items: list, names: dict | None = None, full: bool = True) -> list[str]:
        """The lines of ``entries``, with ``names`` for the slots (the program's own by default);
        not ``full``: without headings and comments (a part's shape, ``parts.py``)."""
        names = self.names if names is None else names
        out = []
        for e, note in zip(entries, _notes(entries, items) if full else [None] * len(entries)):
            t = type(e)
            if t is int:
                item = items[e]
                # a fused run's line is one call of its loops
                line = _line(item, self.rec, names) if type(item) is Step else item.line
                out.append(line if note is None else line + _comment(note, self.called))
            elif t is str:
                out.append(e if full else "")
            else:
                out.append(f"del {', '.join(sorted(names[s] for s in e))}")
        return out

    def _named(self, slots: list[int]) -> list[str]:
        return [self.names[s] for s in slots]

    def _filename(self) -> str:
        return f"<tk.compile {self.fn_name} #{self.number}>"


def _long_text(header: str, parts: list[str], shaped: list[tuple[str, list]], notes: list[list], main: list[str],
               called: Callable[[int], str]) -> str:
    """The source of a long program, from its parts' shapes: each line named, its heading or its comment added."""
    out = [header]
    for name, (shape, own), part_notes in zip(parts, shaped, notes):
        lines = shape.split("\n")
        out.append(f"def {name}{named(lines[0][lines[0].index('('):], own)}")
        for line, note in zip(lines[1:], part_notes):
            if type(note) is str:
                out.append(note and "    " + note)
            else:
                line = named(line, own)
                out.append(line if note is None else line + _comment(note, called))
        out += [named(lines[-1], own), ""]
    return "\n".join(out + main) + "\n"


def _notes(entries: Entries, items: list) -> list:
    """What a part's lines show beyond its shape: a heading's text, or the group whose comment ends
    the line (``None``: nothing: a del, a fused run's line, whose comment is its own, or a line
    within an op)."""
    notes = []
    last = len(items) - 1
    for e in entries:
        t = type(e)
        if t is int:
            item = items[e]
            group = item.group
            closes = e == last or items[e + 1].group is not group  # the last line of its op or rule
            notes.append(group if closes and type(item) is Step else None)
        else:
            notes.append(e if t is str else None)
    return notes


def _called(tensors: dict[int, str], tid: int) -> str:
    """A tensor's name in the program's comments: its variable's, else its label."""
    return tensors.get(tid) or label(tid)


def _tensor_names(rec: Recorder, inputs: Inputs, tracers: list, names: dict) -> dict[int, str]:
    """Tensor id -> the name of its variable in the program, for the comments."""
    tensors = {info[3]: names[slot] for slot, info in rec.info.items()}
    for cell, t in zip(inputs.cells, tracers):
        if isinstance(cell.obj, Tensor):
            tensors.setdefault(cell.obj.id, names[t.slot])
    return tensors


BIG = 1 << 16  # bytes from which an array is let go (``del``) right after its last use, as eager code would


def _big(rec: Recorder) -> set[int]:
    """The slots of the recording's big intermediates (not its constants: globals of the program)."""
    kinds = rec.kinds
    return {slot for slot, value in enumerate(rec.values) if kinds[slot] != "const" and
            (value.nbytes if type(value) is np.ndarray else _bytes(value)) >= BIG}  # an ndarray's without a call


def _bytes(value: Any) -> int:
    """The bytes of a value that is not an ndarray (``_big`` reads an ndarray's itself): a CuPy or
    array-API array's, 0 for anything else."""
    return getattr(value, "size", 0) * getattr(value.dtype, "itemsize", 8) if is_array(value) else 0


def _freeing(entries: Entries, items: list, big: set, keep: set) -> Entries:
    """``entries`` with each big array (an intermediate: a constant is a global of the program) let
    go after the last entry that uses it: a program that held every intermediate to its end would
    need more memory than the eager step it replays, and fresh memory is slow (the operating system
    hands it out page by page)."""
    if not big:
        return entries
    last: dict[int, int] = {}
    for j, e in enumerate(entries):
        if type(e) is int:
            item = items[e]
            for slot in [*item.reads(), *item.writes()]:
                if slot in big:
                    last[slot] = j
    ends: dict[int, list[int]] = {}
    for slot, j in last.items():
        if slot not in keep:
            ends.setdefault(j, []).append(slot)
    out: Entries = []
    for j, e in enumerate(entries):
        out.append(e)
        if j in ends:
            out.append(tuple(ends[j]))
    return out


PART = 200  # array calls per function of a long program (Python looks up line numbers from a function's start)


def _function(name: str, params: list[str], lines: list[str], outs: list[str]) -> list[str]:
    ret = f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})"
    return [f"def {name}({', '.join(params)}):"] + ["    " + line if line else "" for line in lines] + [ret]


def _parts(main: str, params: list[int], copied: list[int], chunks: list[Entries], items: list, names: dict,
           outs: list[int], big: set) -> tuple[list[Part], list[str], list[str]]:
    """A long program as functions, one for each chunk of its entries; the lines of the one that
    calls them in turn; and what it returns. A part hands on the values later parts read as one
    tuple, ``_part3 = ..._part3(...)``, from which each later part takes those it reads
    (``t12 = _part3[4]``): the calling function names no value, and the parts' lines that do are
    compiled once a shape. (W4's 100,000 ops: a calling function that named each value it handed
    on took 4.2 us an op to compile, of a first call of 44; measured.) A tuple's name is its
    number's, negative, in ``names``, and starts with ``_``, as no value's name does (``_ident``)."""
    reads, writes = _reads_and_writes(chunks, items)
    last_read: dict[int, int] = {}  # the last part that reads each value (the end for results)
    for k, r in enumerate(reads):
        last_read.update(dict.fromkeys(r, k))
    last_read.update(dict.fromkeys(outs, len(chunks)))
    held: dict[int, tuple | None] = dict.fromkeys(params + copied)  # slot -> (its tuple, its place), None: a local
    parts: list[Part] = []
    calls: list[str] = []
    for k, chunk in enumerate(chunks):
        used = [slot for slot in reads[k] | writes[k] if slot in held]
        takes = [(slot, *held[slot]) for slot in used if held[slot] is not None]
        own = [slot for slot in used if held[slot] is None] + list(dict.fromkeys(t for _, t, _ in takes))
        results = [slot for slot in writes[k] if last_read.get(slot, -1) > k]
        part = Part(f"{main}_part{k + 1}", own, takes, _freeing(chunk, items, big, set(results)), results)
        parts.append(part)
        call = f"{part.name}({', '.join(names[s] for s in own)})"
        if results:
            names[-(k + 1)] = f"_part{k + 1}"
            calls.append(f"_part{k + 1} = {call}")
            held.update((slot, (-(k + 1), i)) for i, slot in enumerate(results))
        else:
            calls.append(call)
    returned = [names[s] if held[s] is None else f"{names[held[s][0]]}[{held[s][1]}]" for s in outs]
    return parts, calls, returned


def _reads_and_writes(chunks: list[Entries], items: list) -> tuple[list[dict], list[dict]]:
    """The slots each part reads, and those it assigns, each in the order of their first use (dicts
    as ordered sets)."""
    reads: list[dict] = []
    writes: list[dict] = []
    for chunk in chunks:
        found = [items[e] for e in chunk if type(e) is int]
        # a step's slots read as its attributes, without a call each (the hot path of a long program)
        reads.append(dict.fromkeys(chain.from_iterable([i.slots if type(i) is Step else i.reads() for i in found])))
        writes.append(dict.fromkeys(chain.from_iterable([(i.out,) if type(i) is Step else i.writes() for i in found])))
        writes[-1].pop(None, None)  # a step that writes no slot
    return reads, writes


def _ident(text: str) -> str:
    if type(text) is str and text.isidentifier() and text[0] != "_" and text[-1] != "_" and text.isascii():
        name = text  # most names are made here (t12, a5, grad_x) and are identifiers already: no regex
    else:
        name = _IDENT.sub("_", str(text)).strip("_") or "v"
    if name[0].isdigit():
        name = "v" + name
    return name + "_" if keyword.iskeyword(name) or name in _RESERVED else name


def _names_of(rec: Recorder, inputs: Inputs, tracers: list) -> dict[int, str]:
    """A variable name for every slot: the tensor's name where it has one."""
    taken = set(rec.globals)
    names: dict[int, str] = {}

    def give(slot: int, wanted: str, made: bool = False) -> None:
        """Name ``slot`` ``wanted`` as an identifier (``made``: one already, made here), numbered if taken."""
        if slot in names:
            return
        name, n = wanted if made else _ident(wanted), 1
        base = name
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name)
        names[slot] = name

    for cell, t in zip(inputs.cells, tracers):
        obj = cell.obj
        if isinstance(obj, Tensor):
            given = obj.name
            what = in_words(cell.what)
            if given is None and what.startswith("parameter "):
                given = what[len("parameter "):]
            give(t.slot, given or what.replace("argument ", ""))
        else:
            what = in_words(cell.what)
            if what.startswith("gradient of ") and isinstance(cell.key, int):
                what = "grad_" + inputs.param_names.get(cell.key, label(cell.key))
            give(t.slot, what.replace("'s ", "_").replace(" of ", "_").lower())
    for slot, info in rec.info.items():
        given = name_of(info[3])
        give(slot, given, made=False) if given else give(slot, f"t{info[3]}", made=True)
    for slot, tid in rec.grad_of.items():
        given = name_of(tid) or inputs.param_names.get(tid)
        give(slot, f"grad_{given}") if given else give(slot, f"grad_t{tid}", made=True)
    for slot, kind in enumerate(rec.kinds):
        if slot not in names:
            give(slot, ("c" if kind == "const" else "a") + str(slot), made=True)
    return names


def _render(v: Any, rec: Recorder, names: dict) -> str:
    t = type(v)
    if t is Ref:
        return names[v.slot]
    if t is tuple:
        inner = ", ".join(_render(x, rec, names) for x in v)
        return f"({inner}{',' if len(v) == 1 else ''})"
    if t is list:
        return "[" + ", ".join(_render(x, rec, names) for x in v) + "]"
    if t is slice:
        return f"slice({_render(v.start, rec, names)}, {_render(v.stop, rec, names)}, {_render(v.step, rec, names)})"
    if v is None or v is Ellipsis or t in (bool, int, str):
        return "..." if v is Ellipsis else repr(v)
    if t is float and math.isfinite(v):
        return repr(v)
    if isinstance(v, type) and getattr(v, "__module__", "") == "numpy":
        return f"np.{v.__name__}"
    if isinstance(v, np.dtype):
        return f"np.{v.name}"
    return rec.bind(v, "k")


def _index(v: Any, rec: Recorder, names: dict) -> str:
    def one(k: Any) -> str:
        if type(k) is slice:
            parts = ["" if p is None else _render(p, rec, names) for p in (k.start, k.stop, k.step)]
            return ":".join(parts[:2]) + (f":{parts[2]}" if parts[2] else "")
        return "None" if k is None else _render(k, rec, names)

    if type(v) is tuple:
        return ", ".join(one(k) for k in v) if v else "()"
    return one(v)


def _comment(group: Any, called: Callable[[int], str]) -> str:
    if group is None:
        return ""
    kind = group[0]
    if kind == "update":
        return f"  # {group[1]} update"
    rid, name, ids, out = group[1]
    record = f"#{rid} " if rid is not None else ""
    args = ", ".join(called(i) if i is not None else "const" for i in ids)
    text = f"{record}{name}({args}) -> {called(out)}"
    if kind == "rule":
        return f"  # {text}: rule for {called(ids[group[2]]) if ids[group[2]] is not None else 'const'}"
    return f"  # {text}"


_PHASES = {"op": "forward", "rule": "backward", "update": "update"}


def _phased(items: list) -> Iterator[tuple[int, str]]:
    """Each item's index, in order, and its phase (forward, backward or update): a step of no op,
    rule or update (the engine's sums, the seed) belongs with the grouped step before it, or with
    the backward that follows the forward."""
    before = "forward"
    waiting = []  # ungrouped items after the forward, until a grouped one says which phase they join
    for i, item in enumerate(items):
        group = item.group
        if group is None:
            if before == "forward":
                waiting.append(i)
            else:
                yield i, before
            continue
        now = _PHASES[group[0]]
        if waiting:
            joined = "backward" if now == "backward" else "forward"
            yield from ((j, joined) for j in waiting)
            waiting = []
        yield i, now
        before = now
    yield from ((j, "forward") for j in waiting)


_TITLES = {"forward": "forward: the ops, in the order they ran",
           "backward": "backward: the rules, newest record first, and the sums of gradients",
           "update": "update: the optimizer's step"}


def _entries(items: list, size: int) -> list[Entries]:
    """The entries of the program's body: each item's, under a heading for each phase, in chunks
    of at most ``size`` items."""
    chunks: list[Entries] = [[]]
    chunk, count, phase = chunks[0], 0, None
    for i, now in _phased(items):
        if count == size:
            chunk, count = [], 0
            chunks.append(chunk)
        if now != phase:
            chunk += ["", f"# {_TITLES[now]}"] if i else [f"# {_TITLES[now]}"]
            phase = now
        chunk.append(i)
        count += 1
    return chunks


def _line(step: Step, rec: Recorder, names: dict) -> str:
    """A step as one line of Python."""
    args = [_render(a, rec, names) for a in step.args]
    k = step.kind
    if k == "iop":
        return f"{args[0]} {step.head}= {args[1]}"
    if k == "setitem":
        return f"{args[0]}[{_index(step.args[1], rec, names)}] = {args[2]}"
    expr = _expression(step, args, rec, names)
    if step.asarray:
        expr = f"asarray({expr})"
    return f"{names[step.out]} = {expr}" if step.out is not None else expr


def _expression(step: Step, args: list[str], rec: Recorder, names: dict) -> str:
    """The expression a step computes, its arguments rendered."""
    k = step.kind
    kwargs = [f"{key}={_render(v, rec, names)}" for key, v in step.kwargs.items()]
    if k == "binop":
        return f"{args[0]} {step.head} {args[1]}"
    if k == "unop":
        return f"abs({args[0]})" if step.head == "abs" else f"{step.head}{args[0]}"
    if k == "getitem":
        return f"{args[0]}[{_index(step.args[1], rec, names)}]"
    if k == "getattr":
        return f"{args[0]}.{step.head}"
    if k == "method":
        return f"{args[0]}.{step.head}({', '.join(args[1:] + kwargs)})"
    return f"{step.head}({', '.join(args + kwargs)})"
