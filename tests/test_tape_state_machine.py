"""A state machine traces, runs ops, merges and runs backward under each policy, and checks the
tapes and the gradients against a naive reference model of the design's semantics."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

import tapekit as tk

DEV = tk.Cpu()


class Handle:
    """A tensor handle and its key in the reference model."""

    def __init__(self, tensor, key):
        self.t, self.key = tensor, key


class Reference:
    """The design's semantics, written out naively: tapes are plain sets of record ids."""

    def __init__(self, policy):
        self.policy = policy
        self.tape_of = {}     # handle key -> model tape id, or None once moved/consumed
        self.records = {}     # model tape id -> set of record ids
        self.parent = {}      # union-find over model tapes (UnionTape only)
        self.ops = {}         # record id -> (input tensor ids, output id, partial derivatives)
        self.producer = {}    # tensor id -> record id
        self.consumed = set()
        self.keys = 0

    def find(self, tape):
        while self.parent.get(tape, tape) != tape:
            tape = self.parent[tape]
        return tape

    def new_tape(self):
        tape = len(self.records)
        self.records[tape] = set()
        return tape

    def new_handle(self, tape):
        self.keys += 1
        self.tape_of[self.keys] = tape
        return self.keys

    def tape(self, key):
        tape = self.tape_of[key]
        return None if tape is None else self.find(tape)

    def record(self, keys, rid, inputs, out, partials):
        tapes = [self.tape(k) for k in keys]
        left = tapes[0]
        for right in tapes[1:]:
            if right == left:
                continue
            if self.policy == "union":
                self.parent[right] = left
            self.records[left] |= self.records[right]
            self.records[right] = set()
        self.records[left].add(rid)
        self.ops[rid] = (inputs, out, partials)
        self.producer[out] = rid
        if self.policy == "owned":
            for k in keys:
                self.tape_of[k] = None
        return self.new_handle(left)

    def history(self, tid):
        seen, stack = set(), [tid]
        while stack:
            rid = self.producer.get(stack.pop())
            if rid is not None and rid not in seen:
                seen.add(rid)
                stack.extend(self.ops[rid][0])
        return seen

    def tainted(self, out, visible):
        """Tensors with a way to ``out`` through a record that ``visible`` lacks: their gradient is
        incomplete (or missing) in a backward that runs only ``visible``."""
        tainted = set()
        for r in sorted(self.history(out), reverse=True):  # a record's consumers come before it
            inputs, o, _ = self.ops[r]
            if r not in visible or o in tainted:
                tainted.update(inputs)
        return tainted

    def backward(self, key, out):
        """'error', 'partial' or 'complete', the expected gradients, and the tensors whose gradient
        is not whole."""
        tape = self.tape(key)
        rid = self.producer.get(out)
        if tape is None or rid in self.consumed:
            return "error", None, None
        visible = self.records[tape]
        partial = not self.history(out) <= visible
        if partial and self.policy == "union":
            return "error", None, None
        grads = {out: 1.0}
        for r in sorted(visible, reverse=True):
            inputs, o, partials = self.ops[r]
            if o not in grads:
                for i in inputs:
                    grads.setdefault(i, 0.0)
                continue
            for i, d in zip(inputs, partials):
                grads[i] = grads.get(i, 0.0) + grads[o] * d
        self.consumed |= visible
        self.records[tape] = set()
        if self.policy == "owned":
            self.tape_of[key] = None
        return ("partial" if partial else "complete"), grads, self.tainted(out, visible)


class TapeMachine(RuleBasedStateMachine):
    policy = "arc"
    handles = Bundle("handles")

    @initialize()
    def start(self):
        self.ref = Reference(self.policy)
        self.live = []
        self.values = {}

    def make_tape(self):
        return {"owned": tk.OwnedTape, "arc": tk.ArcTape, "union": tk.UnionTape}[self.policy]()

    def add(self, tensor, key):
        h = Handle(tensor, key)
        self.live.append(h)
        self.values[tensor.id] = float(tensor.numpy()[0])
        return h

    @rule(target=handles, value=st.floats(-2, 2))
    def leaf(self, value):
        t = DEV.tensor([value], dtype="float64").trace(self.make_tape())
        return self.add(t, self.ref.new_handle(self.ref.new_tape()))

    @rule(target=handles, h=handles, c=st.sampled_from([0.5, 1.5, 2.0]))
    def scale(self, h, c):
        return self.apply([h], lambda a: a * c, lambda a: [c])

    @rule(target=handles, a=handles, b=handles, op=st.sampled_from(["add", "mul"]))
    def combine(self, a, b, op):
        if op == "add":
            return self.apply([a, b], lambda x, y: x + y, lambda x, y: [1.0, 1.0])
        return self.apply([a, b], lambda x, y: x * y, lambda x, y: [y, x])

    def apply(self, hs, f, partials):
        if any(self.ref.tape(h.key) is None for h in hs):
            with pytest.raises(tk.TapeError):
                f(*[h.t for h in hs])
            return self.add(DEV.tensor([0.0], dtype="float64").trace(self.make_tape()),
                            self.ref.new_handle(self.ref.new_tape()))
        out = f(*[h.t for h in hs])
        vals = [self.values[h.t.id] for h in hs]
        key = self.ref.record([h.key for h in hs], out._record.id, [h.t.id for h in hs], out.id, partials(*vals))
        return self.add(out, key)

    @rule(target=handles, h=handles)
    def clone(self, h):
        if self.policy == "owned" or self.ref.tape(h.key) is None:
            with pytest.raises(tk.TapeError):
                h.t.clone()
            return h
        return self.add(h.t.clone(), self.ref.new_handle(self.ref.tape(h.key)))

    @rule(target=handles, h=handles)
    def retaped(self, h):
        if self.ref.tape(h.key) is None:
            with pytest.raises(tk.TapeError):
                h.t.retaped()
            return h
        return self.add(h.t.retaped(), self.ref.new_handle(self.ref.new_tape()))

    @rule(h=handles)
    def backward(self, h):
        verdict, expected, tainted = self.ref.backward(h.key, h.t.id)
        if verdict == "error":
            with pytest.raises(tk.TapeError):
                h.t.backward()
            return
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            g = h.t.backward()
        warned = any(issubclass(w.category, tk.IncompleteTapeWarning) for w in caught)
        assert warned == (verdict == "partial")
        assert set(g) == set(expected)
        for tid, value in expected.items():
            assert np.allclose(g[tid], [value]), (tid, g[tid], value)
            assert g.is_complete(tid) is (tid not in tainted), tid

    @invariant()
    def tapes_hold_what_the_model_says(self):
        for h in self.live:
            tape = self.ref.tape(h.key)
            if tape is None:  # only an OwnedTape handle loses its tape: moved into an op, or consumed
                assert self.policy == "owned" and h.t.tape._spent is not None
                continue
            assert {r.id for r in h.t.tape.records} == self.ref.records[tape]


def machine(policy):
    cls = type(f"{policy.title()}TapeMachine", (TapeMachine,), {"policy": policy})
    cls.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
    return cls.TestCase


TestOwned = machine("owned")
TestArc = machine("arc")
TestUnion = machine("union")
