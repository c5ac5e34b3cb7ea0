"""The source: a recording written out as Python and compiled. Steps whose results nothing uses are
dropped; every slot gets a variable name (a tensor's name where it has one); each step becomes one
line, under a heading for its phase (forward, backward, update) with a comment naming its op or
rule; big arrays are let go after their last use; and a long program is cut into parts, one
function each, called in turn."""

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
from .recorder import Recorder, Ref, Step, slots_in
from .tracer import is_array


_IDENT = re.compile(r"[^0-9a-zA-Z_]+")
_RESERVED = {"np", "xp", "asarray", "copy_of"}


def generate(rec: Recorder, tracers: list, needed: list, fn_name: str, inputs: Inputs, number: int) -> tuple:
    """The program as Python source, compiled: ``run(*inputs) -> (needed values...)``."""
    # keep the steps whose results are used (or that change something); drop the rest
    live = set(needed)
    kept = []
    for step in reversed(rec.steps):
        if step.effect or step.out in live:
            kept.append(step)
            live.update(slots_in(step.args))
            live.update(slots_in(step.kwargs))
            if step.effect and step.out is not None:
                live.add(step.out)
    kept.reverse()
    names = _names_of(rec, inputs, tracers)
    lines = []
    params = list(dict.fromkeys(names[t.slot] for t in tracers))
    consts = [s for s in sorted(live) if rec.kinds[s] == "const"]
    mutated = {s.out for s in kept if s.effect and s.out is not None} | {
        s.args[0].slot for s in kept if s.effect and s.args and type(s.args[0]) is Ref}
    for step in reversed(kept):  # what a written array may be a view of may be written too (a copy too many is harmless)
        if not step.effect and step.out in mutated:
            mutated.update(slots_in(step.args))
    for s in consts:
        rec.globals[f"_{names[s]}"] = rec.values[s]
        if s in mutated:
            lines.append(f"{names[s]} = copy_of(_{names[s]})  # a constant this program writes into: a fresh copy")
        else:
            rec.globals[names[s]] = rec.values[s]
    tensors = {info[3]: names[slot] for slot, info in rec.info.items()}
    for cell, t in zip(inputs.cells, tracers):
        if isinstance(cell.obj, Tensor):
            tensors.setdefault(cell.obj.id, names[t.slot])
    body = _body(kept, rec, names, tensors)
    big = {names[slot] for slot, value in enumerate(rec.values) if is_array(value)
           and getattr(value, "size", 0) * getattr(value.dtype, "itemsize", 8) >= BIG}
    outs = [names[s] for s in dict.fromkeys(needed)]
    main = f"{_ident(fn_name)}_program_{number}"
    devices = ", ".join(f"{name} = {rec.globals[name]!r}" for name in rec.globals if name.startswith("dev"))
    text = [f"# {fn_name}, recorded by tk.compile: {len(kept)} array calls; {devices}"]
    if len(kept) <= PART:
        text += _function(main, params, lines + _freeing(body, kept, names, big, set(outs)), outs)
    else:  # a long program in parts: Python's tools (tracebacks, tracemalloc) slow down on huge functions
        text += _parts(main, params, lines, body, kept, names, outs, big)
    source = "\n".join(text) + "\n"
    space = dict(rec.globals)
    exec(builtins.compile(source, f"<tk.compile {fn_name} #{number}>", "exec"), space)
    return source, space[main], len(kept)


BIG = 1 << 16  # bytes from which an array is let go (``del``) right after its last use, as eager code would


def _freeing(entries: list, kept: list[Step], names: dict, big: set, keep: set) -> list[str]:
    """The lines of ``entries``, each big array let go after the last line that uses it: a program
    that held every intermediate to its end would need more memory than the eager step it replays,
    and fresh memory is slow (the operating system hands it out page by page)."""
    last: dict[str, int] = {}
    for j, (i, _) in enumerate(entries):
        if i is not None:
            step = kept[i]
            for slot in [*slots_in(step.args), *slots_in(step.kwargs), step.out]:
                if slot is not None and names[slot] in big:
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


def _parts(main: str, params: list[str], prelude: list[str], body: list, kept: list[Step], names: dict,
           outs: list[str], big: set) -> list[str]:
    """A long program as functions of at most ``PART`` array calls each, and one that calls them
    in turn, passing on the values that later parts read."""
    chunks: list[list] = [[]]
    count = 0
    for entry in body:
        if entry[0] is not None:
            if count == PART:
                chunks.append([])
                count = 0
            count += 1
        chunks[-1].append(entry)
    reads: list[set] = []
    writes: list[set] = []
    for chunk in chunks:
        r: set = set()
        w: set = set()
        for i, _ in chunk:
            if i is None:
                continue
            step = kept[i]
            r.update(names[s] for s in slots_in(step.args))
            r.update(names[s] for s in slots_in(step.kwargs))
            if step.out is not None:
                w.add(names[step.out])
        reads.append(r)
        writes.append(w)
    available = set(params) | {line.split(" = ")[0] for line in prelude}
    last_read = dict.fromkeys(outs, len(chunks))  # the last part that reads each value (the end for results)
    for k, r in enumerate(reads):
        for name in r:
            if last_read.get(name, -1) < k:
                last_read[name] = k
    text: list[str] = []
    calls: list[str] = []
    for k, chunk in enumerate(chunks):
        args = sorted((reads[k] | writes[k]) & available)
        results = sorted(name for name in writes[k] if last_read.get(name, -1) > k)
        text += _function(f"{main}_part{k + 1}", args, _freeing(chunk, kept, names, big, set(results)), results)
        text.append("")
        call = f"{main}_part{k + 1}({', '.join(args)})"
        calls.append(f"{', '.join(results)}{',' if len(results) == 1 else ''} = {call}" if results else call)
        available |= writes[k]
    return text + _function(main, params, prelude + calls, outs)


def _ident(text: str) -> str:
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


def _phases(steps: list[Step]) -> list[str]:
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


def _body(steps: list[Step], rec: Recorder, names: dict, tensors: dict) -> list[tuple[int | None, str]]:
    """The lines of the program: (the index of the step, or None for a heading, the line)."""
    lines: list[tuple[int | None, str]] = []

    def called(tid: int) -> str:
        return tensors.get(tid) or label(tid)

    phase = None
    phases = _phases(steps)
    for i, step in enumerate(steps):
        now = phases[i]
        if now != phase:
            title = {"forward": "forward: the ops, in the order they ran",
                     "backward": "backward: the rules, newest record first, and the sums of gradients",
                     "update": "update: the optimizer's step"}[now]
            lines += ([(None, "")] if lines else []) + [(None, f"# {title}")]
            phase = now
        args = [_render(a, rec, names) for a in step.args]
        kwargs = [f"{k}={_render(v, rec, names)}" for k, v in step.kwargs.items()]
        out = names[step.out] if step.out is not None else None
        k = step.kind
        if k == "binop":
            expr = f"{args[0]} {step.head} {args[1]}"
        elif k == "unop":
            expr = f"abs({args[0]})" if step.head == "abs" else f"{step.head}{args[0]}"
        elif k == "iop":
            expr = None
            line = f"{args[0]} {step.head}= {args[1]}"
        elif k == "getitem":
            expr = f"{args[0]}[{_index(step.args[1], rec, names)}]"
        elif k == "setitem":
            expr = None
            line = f"{args[0]}[{_index(step.args[1], rec, names)}] = {args[2]}"
        elif k == "getattr":
            expr = f"{args[0]}.{step.head}"
        elif k == "method":
            expr = f"{args[0]}.{step.head}({', '.join(args[1:] + kwargs)})"
        else:
            expr = f"{step.head}({', '.join(args + kwargs)})"
        if expr is not None:
            if step.asarray:
                expr = f"asarray({expr})"
            line = f"{out} = {expr}" if out is not None else expr
        comment = _comment(step.group, called)
        nxt = steps[i + 1].group if i + 1 < len(steps) else None
        if comment and nxt is step.group:  # one comment per op or rule, on its last line
            comment = ""
        lines.append((i, line + comment))
    return lines
