"""The source: a recording written out as Python and compiled. Steps whose results nothing uses are
dropped; every slot gets a variable name (a tensor's name where it has one); each step becomes one
line, under a heading for its phase (forward, backward, update) with a comment naming its op or
rule; big arrays are let go after their last use; and a long program is cut into parts, one
function each, called in turn (parts of one shape are compiled once: ``parts.py``)."""

from __future__ import annotations

import builtins
import keyword
import math
import re
from typing import Any, Callable

import numpy as np

from ..ids import label, name_of
from ..tensor import Tensor
from .inputs import Inputs, in_words
from .parts import compile_parts
from .recorder import Recorder, Ref, Step, slots_in
from .tracer import is_array


_IDENT = re.compile(r"[^0-9a-zA-Z_]+")
_RESERVED = {"np", "xp", "asarray", "copy_of"}


class Built:
    """What ``generate`` makes: the program's source, its compiled function, its number of array
    calls, and, fused, the same three for the fused program and its runs."""

    def __init__(self, source: str, run: Callable, steps: int) -> None:
        self.source, self.run, self.steps = source, run, steps
        self.fused: Any = None  # a ``fuse.Fused`` where the step is compiled with fuse=True


def generate(rec: Recorder, tracers: list, needed: list, fn_name: str, inputs: Inputs, number: int,
             fuse: bool = False) -> Built:
    """The program as Python source, compiled: ``run(*inputs) -> (needed values...)``; and fused
    (``fuse=True``), the same with its runs of elementwise calls as compiled loops."""
    kept, live = _live_steps(rec.steps, needed)
    writer = Writer(rec, inputs, tracers, needed, fn_name, number)
    writer.prelude = _constants(rec, kept, live, writer.names)
    built = Built(*writer.write(kept), len(kept))
    if fuse:
        from .fuse import fuse_program
        built.fused = fuse_program(writer, kept, (built.source, built.run))
    return built


def _live_steps(steps: list[Step], needed: list) -> tuple[list[Step], set]:
    """The steps whose results are used or that change something, in order, and the slots they read."""
    live = set(needed)
    kept = []
    for step in reversed(steps):
        if step.effect or step.out in live:
            kept.append(step)
            live.update(step.reads())
            if step.effect and step.out is not None:
                live.add(step.out)
    kept.reverse()
    return kept, live


def _constants(rec: Recorder, kept: list[Step], live: set, names: dict) -> list[str]:
    """The program's constants as globals; the lines that copy those it writes into."""
    consts = [s for s in sorted(live) if rec.kinds[s] == "const"]
    mutated = {s.out for s in kept if s.effect and s.out is not None} | {
        s.args[0].slot for s in kept if s.effect and s.args and type(s.args[0]) is Ref}
    for step in reversed(kept):  # what a written array may be a view of may be written too (a copy too many is harmless)
        if not step.effect and step.out in mutated:
            mutated.update(slots_in(step.args))
    lines = []
    for s in consts:
        rec.globals[f"_{names[s]}"] = rec.values[s]
        if s in mutated:
            lines.append(f"{names[s]} = copy_of(_{names[s]})  # a constant this program writes into: a fresh copy")
        else:
            rec.globals[names[s]] = rec.values[s]
    return lines


class Writer:
    """Writes a list of steps (and fused runs) as the program's source, and compiles it."""

    def __init__(self, rec: Recorder, inputs: Inputs, tracers: list, needed: list, fn_name: str, number: int) -> None:
        self.rec, self.fn_name, self.number, self.needed = rec, fn_name, number, needed
        self.names = _names_of(rec, inputs, tracers)
        self.params = list(dict.fromkeys(self.names[t.slot] for t in tracers))
        self.outs = [self.names[s] for s in dict.fromkeys(needed)]
        self.tensors = _tensor_names(rec, inputs, tracers, self.names)
        self.big = {self.names[slot] for slot, value in enumerate(rec.values) if is_array(value)
                    and getattr(value, "size", 0) * getattr(value.dtype, "itemsize", 8) >= BIG}
        self.prelude: list[str] = []
        self.main = f"{_ident(fn_name)}_program_{number}"

    def called(self, tid: int) -> str:
        """A tensor's name in the program's comments."""
        return self.tensors.get(tid) or label(tid)

    def comment(self, step: Step) -> str:
        """The comment of a step's line: the op or rule it belongs to."""
        return _comment(step.group, self.called)

    def write(self, items: list, space: dict | None = None, heading: str = "") -> tuple[str, Callable]:
        """The source of ``items`` and its compiled function (``space``: more globals it names)."""
        rec = self.rec
        body = _body(items, rec, self.names, self.called)
        devices = ", ".join(f"{name} = {rec.globals[name]!r}" for name in rec.globals if name.startswith("dev"))
        text = [f"# {self.fn_name}, recorded by tk.compile: {_count(items)} array calls; {devices}{heading}"]
        parts: list[list[str]] = []
        if len(items) <= PART:
            text += _function(self.main, self.params, self.prelude + _freeing(body, items, self.names, self.big,
                                                                               set(self.outs)), self.outs)
        else:  # a long program in parts: Python's tools (tracebacks, tracemalloc) slow down on huge functions
            parts, main = _parts(self.main, self.params, self.prelude, body, items, self.names, self.outs, self.big)
            text += [line for lines in parts for line in lines + [""]] + main
        source = "\n".join(text) + "\n"
        globals_ = dict(rec.globals) | (space or {})
        self._define(source, parts, globals_)
        return source, globals_[self.main]

    def _define(self, source: str, parts: list[list[str]], space: dict) -> None:
        """Compile ``source`` into ``space``; a program in parts compiles each shape of part once
        (``parts.py``), then the function that calls them."""
        filename = f"<tk.compile {self.fn_name} #{self.number}>"
        if not parts:
            exec(builtins.compile(source, filename, "exec"), space)
            return
        lines = source.split("\n")
        first = lines.index(parts[0][0]) + 1
        compile_parts(parts, first, filename, space, set(self.names.values()) - set(space))
        start = first - 1 + sum(len(p) + 1 for p in parts)  # the calling function's first line, counted from 0
        exec(builtins.compile("\n" * start + "\n".join(lines[start:]), filename, "exec"), space)


def _count(items: list) -> int:
    return sum(1 if type(item) is Step else len(item.steps) for item in items)


def _tensor_names(rec: Recorder, inputs: Inputs, tracers: list, names: dict) -> dict[int, str]:
    """Tensor id -> the name of its variable in the program, for the comments."""
    tensors = {info[3]: names[slot] for slot, info in rec.info.items()}
    for cell, t in zip(inputs.cells, tracers):
        if isinstance(cell.obj, Tensor):
            tensors.setdefault(cell.obj.id, names[t.slot])
    return tensors


BIG = 1 << 16  # bytes from which an array is let go (``del``) right after its last use, as eager code would


def _freeing(entries: list, items: list, names: dict, big: set, keep: set) -> list[str]:
    """The lines of ``entries``, each big array let go after the last line that uses it: a program
    that held every intermediate to its end would need more memory than the eager step it replays,
    and fresh memory is slow (the operating system hands it out page by page)."""
    last: dict[str, int] = {}
    for j, (i, _) in enumerate(entries):
        if i is not None:
            for slot in [*items[i].reads(), *items[i].writes()]:
                if names[slot] in big:
                    last[names[slot]] = j
    ends: dict[int, list[str]] = {}
    for name, j in last.items():
        if name not in keep:
            ends.setdefault(j, []).append(name)
    lines = []
    for j, (_, line) in enumerate(entries):
        lines.append(line)
        if j in ends:
            lines.append(f"del {', '.join(sorted(ends[j]))}")
    return lines


PART = 200  # array calls per function of a long program (Python looks up line numbers from a function's start)


def _function(name: str, params: list[str], lines: list[str], outs: list[str]) -> list[str]:
    ret = f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})"
    return [f"def {name}({', '.join(params)}):"] + ["    " + line if line else "" for line in lines] + [ret]


def _parts(main: str, params: list[str], prelude: list[str], body: list, items: list, names: dict,
           outs: list[str], big: set) -> tuple[list[list[str]], list[str]]:
    """A long program as functions of at most ``PART`` array calls each (the lines of each), and
    one that calls them in turn, passing on the values that later parts read (its lines)."""
    chunks = _chunks(body)
    reads, writes = _reads_and_writes(chunks, items, names)
    available = set(params) | {line.split(" = ")[0] for line in prelude}
    last_read = dict.fromkeys(outs, len(chunks))  # the last part that reads each value (the end for results)
    for k, r in enumerate(reads):
        for name in r:
            if last_read.get(name, -1) < k:
                last_read[name] = k
    functions: list[list[str]] = []
    calls: list[str] = []
    for k, chunk in enumerate(chunks):
        args = [name for name in reads[k] | writes[k] if name in available]
        results = [name for name in writes[k] if last_read.get(name, -1) > k]
        functions.append(_function(f"{main}_part{k + 1}", args, _freeing(chunk, items, names, big, set(results)),
                                   results))
        call = f"{main}_part{k + 1}({', '.join(args)})"
        calls.append(f"{', '.join(results)}{',' if len(results) == 1 else ''} = {call}" if results else call)
        available.update(writes[k])
    return functions, _function(main, params, prelude + calls, outs)


def _chunks(body: list) -> list[list]:
    """The body's lines cut into parts of at most ``PART`` array calls."""
    chunks: list[list] = [[]]
    count = 0
    for entry in body:
        if entry[0] is not None:
            if count == PART:
                chunks.append([])
                count = 0
            count += 1
        chunks[-1].append(entry)
    return chunks


def _reads_and_writes(chunks: list[list], items: list, names: dict) -> tuple[list[dict], list[dict]]:
    """The names each part reads, and those it assigns, each in the order of their first use (dicts
    as ordered sets): parts of one pattern then have one shape, compiled once (``parts.py``)."""
    reads: list[dict] = []
    writes: list[dict] = []
    for chunk in chunks:
        found = [items[i] for i, _ in chunk if i is not None]
        reads.append(dict.fromkeys(names[s] for item in found for s in item.reads()))
        writes.append(dict.fromkeys(names[s] for item in found for s in item.writes()))
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

    def give(slot: int, wanted: str) -> None:
        if slot in names:
            return
        name, n = _ident(wanted), 1
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
        give(slot, given or f"t{info[3]}")
    for slot, tid in rec.grad_of.items():
        given = name_of(tid) or inputs.param_names.get(tid)
        give(slot, f"grad_{given}" if given else f"grad_t{tid}")
    for slot, kind in enumerate(rec.kinds):
        give(slot, ("c" if kind == "const" else "a") + str(slot))
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


def _phases(steps: list) -> list[str]:
    """forward, backward or update for each step: a step of no op, rule or update (the engine's sums,
    the seed) belongs with the grouped step before it, or with the backward that follows the forward."""
    kinds = {"op": "forward", "rule": "backward", "update": "update"}
    grouped = [kinds[s.group[0]] if s.group else None for s in steps]
    after, nxt = [None] * len(grouped), None
    for i in range(len(grouped) - 1, -1, -1):  # the phase of the next grouped step, for each step
        after[i] = nxt
        nxt = grouped[i] or nxt
    out, before = [], "forward"
    for i, phase in enumerate(grouped):
        if phase is None:
            phase = "backward" if before == "forward" and after[i] == "backward" else before
        out.append(phase)
        before = phase
    return out


_TITLES = {"forward": "forward: the ops, in the order they ran",
           "backward": "backward: the rules, newest record first, and the sums of gradients",
           "update": "update: the optimizer's step"}


def _body(items: list, rec: Recorder, names: dict, called: Callable[[int], str]) -> list[tuple[int | None, str]]:
    """The lines of the program: (the index of the item, or None for a heading, the line)."""
    lines: list[tuple[int | None, str]] = []
    phase = None
    for i, (item, now) in enumerate(zip(items, _phases(items))):
        if now != phase:
            lines += ([(None, "")] if lines else []) + [(None, f"# {_TITLES[now]}")]
            phase = now
        if type(item) is not Step:  # a fused run: one call of its loops
            lines.append((i, item.line))
            continue
        nxt = items[i + 1].group if i + 1 < len(items) else None
        comment = "" if nxt is item.group else _comment(item.group, called)  # one per op or rule, on its last line
        lines.append((i, _line(item, rec, names) + comment))
    return lines


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
