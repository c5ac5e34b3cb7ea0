"""Results: what ``fn`` returned, kept as a template and rebuilt on each replay. The template is
the result's structure (tuples, lists, dicts, tensors, gradients) with a slot for each of its
arrays; a replay fills the slots with the program's outputs and makes fresh tensors and
gradients, keyed by the new tensors' ids. The first call's own result gets its real arrays back."""

from __future__ import annotations

import re
from typing import Any, Callable

from ..gradients import Gradients
from ..ids import label
from ..tapes.base import is_spent
from ..tensor import Tensor
from .errors import CompileError
from .tracer import Tracer


def result_template(value: Any, arg_tensors: list, fn_name: str, first_birth: int) -> tuple[Any, list[int]]:
    """The structure of ``fn``'s result with its arrays as slots, and the slots it needs. A tensor
    whose record is on a tape made before the call (``first_birth``: the first tape born in it) is
    refused: the caller's tape would hold the recording's records, and a replay makes none."""
    outputs: list[int] = []

    def walk(v: Any) -> Any:
        if type(v) is Tracer:
            outputs.append(v.slot)
            return ("slot", v.slot)
        if isinstance(v, Tensor):
            if any(v is t for t in arg_tensors):
                return ("arg", next(i for i, t in enumerate(arg_tensors) if t is v))
            data = v.data
            if type(data) is not Tracer:
                return ("value", v)
            if v._record is not None and v._record.rules is not None and _older_tape(v, first_birth):
                raise CompileError(
                    f"{fn_name} returns {v.label}, recorded on a tape made before the call (a traced argument, or "
                    f"a GlobalTape block around it); but a replay of {fn_name} is array calls alone, and records "
                    f"nothing there. Trace the inputs inside {fn_name} and run the backward there, or pass "
                    f"x.detach().")
            outputs.append(data.slot)
            return ("tensor", data.slot, v.id, v.device, v.name)
        if isinstance(v, Gradients):
            entries = []
            for tid, arr in v._arrays.items():
                if type(arr) is Tracer:
                    outputs.append(arr.slot)
                    entries.append((tid, ("slot", arr.slot)))
                else:
                    entries.append((tid, ("value", arr)))
            return ("grads", entries, v.leaves, {tid: str(why) for tid, why in v._why.items()}, set(v._partial))
        if isinstance(v, (list, tuple)):
            return ("seq", type(v), [walk(x) for x in v])
        if isinstance(v, dict):
            return ("dict", [(k, walk(x)) for k, x in v.items()])
        return ("value", v)

    return walk(value), outputs


def _older_tape(t: Tensor, first_birth: int) -> bool:
    """Whether ``t``'s tape has a part made before the call (whose first tape was ``first_birth``)."""
    tape = t._tape
    return tape is not None and not is_spent(tape) and min(tape._store()._parts()) < first_birth


def renumber(template: Any, slot_of: dict) -> Any:
    kind = template[0]
    if kind == "slot":
        return ("slot", slot_of[template[1]])
    if kind == "tensor":
        return ("tensor", slot_of[template[1]]) + template[2:]
    if kind == "grads":
        entries = [(tid, renumber(e, slot_of)) for tid, e in template[1]]
        return ("grads", entries) + template[2:]
    if kind == "seq":
        return ("seq", template[1], [renumber(t, slot_of) for t in template[2]])
    if kind == "dict":
        return ("dict", [(k, renumber(t, slot_of)) for k, t in template[1]])
    return template


def build_result(template: Any, outs: tuple, recorded_ids: list, arg_tensors: list) -> Any:
    """The result of a replayed call from its template: fresh tensors and gradients for its arrays
    (``recorded_ids``: the ids the argument tensors had when the call was recorded, which key its
    gradients: mapped to the new ones only where the result holds gradients). With a sequence's
    arrays taken without a call each, and that map made only where needed, W3's result (a list of
    100 arrays) is built in about 45 us, not 90 (measured, with the caches as cold as in the suite)."""
    made: dict[int, int] = {}
    todo: list = []

    def walk(t: Any) -> Any:
        kind = t[0]
        if kind == "slot":
            return outs[t[1]]
        if kind == "arg":
            return arg_tensors[t[1]]
        if kind == "tensor":
            tensor = Tensor(outs[t[1]], t[3], name=t[4])
            made[t[2]] = tensor.id
            return tensor
        if kind == "seq":  # its arrays taken at once, without a call each
            items = [outs[x[1]] if x[0] == "slot" else walk(x) for x in t[2]]
            return t[1](items) if t[1] in (list, tuple) else t[1](*items)
        if kind == "dict":
            return {k: walk(x) for k, x in t[1]}
        if kind == "grads":
            g = Gradients()
            todo.append((g, t))
            return g
        return t[1]

    result = walk(template)
    if todo:  # after the tensors: their new ids key the entries
        ids = dict(zip(recorded_ids, (t.id for t in arg_tensors)))
        for g, (_, entries, leaves, why, partial) in todo:
            why = {tid: _relabelled(text, ids) for tid, text in why.items()}
            _fill(g, entries, leaves, why, partial, outs, lambda tid: ids.get(tid, made.get(tid, tid)))
    return result


def _relabelled(text: str, ids: dict[int, int]) -> str:
    """A recorded message about the recording's argument tensors, about this call's instead."""
    for old, new in ids.items():
        text = re.sub(rf"(?<!\w){re.escape(label(old))}(?!\w)", label(new), text)
    return text


def _fill(g: Gradients, entries: list, leaves: Any, why: dict, partial: set, outs: tuple,
          key: Callable[[int], int]) -> None:
    """A replayed result's gradients, as recorded, with this call's arrays and tensor ids (``key``)."""
    g._arrays = {key(tid): outs[e[1]] if e[0] == "slot" else e[1] for tid, e in entries}
    g._owned = set(g._arrays)
    g.leaves = None if leaves is None else frozenset(key(tid) for tid in leaves)
    g._why = {key(tid): text for tid, text in why.items()}
    g._partial = {key(tid) for tid in partial}


def unwrap_result(value: Any) -> Any:
    """The first call's result, with the real arrays in place of tracers, and its tensors without
    the tapes made in the call, as a replay's (whose records hold tracers, and a replay records nothing)."""
    if type(value) is Tracer:
        return value.a
    if isinstance(value, Tensor):
        if type(value.data) is Tracer:
            value.data = value.data.a
            value._tape = value._record = value._moved_by = None
        return value
    if isinstance(value, Gradients):
        for tid, arr in list(value._arrays.items()):
            if type(arr) is Tracer:
                value._arrays[tid] = arr.a
        return value
    if isinstance(value, (list, tuple)):
        items = [unwrap_result(v) for v in value]
        return type(value)(items) if type(value) in (list, tuple) else type(value)(*items)
    if isinstance(value, dict):
        return {k: unwrap_result(v) for k, v in value.items()}
    return value
