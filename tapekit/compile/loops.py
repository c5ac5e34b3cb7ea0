"""A run written as loops: the source numba compiles, and the wrapper the program calls.

A run of elementwise steps over ``shape`` becomes loops of at most ``PIECE`` statements each. In a
loop every step is one scalar statement on the element at ``i0, i1, ...``; an operand made before
the run is read from its array (broadcast to the run's shape), or from the row of an earlier run's
buffer that holds it; a value a later loop or the rest of the program reads is stored in a row of
the run's buffer (one per dtype). The wrapper returns the buffers, which later runs of the same
shape read as they are, and, as arrays, the rows that numpy's calls read. A step that adds into an
array made before the run (``g += ...``) writes into that array, as numpy would.
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np

from .runs import PIECE, Run, operands, scalar_form
from .recorder import Ref, Step


class Loops:
    """A run's loops: their source, their names, and the wrapper the program calls."""

    def __init__(self, run: Run, names: dict, values: list, comment: Callable[[Step], str], shared: dict) -> None:
        self.run, self.names, self.values, self.comment = run, names, values, comment
        self.shared = shared  # a slot stored by an earlier run -> (its buffer, row, shape)
        self.inherited = {s for s in run.external
                          if s in shared and shared[s][2] == run.shape and run.kind == "numpy"}
        self.passed = [s for s in run.external if s not in self.inherited]
        size = _piece_size(run.steps)
        self.pieces = [run.steps[i:i + size] for i in range(0, len(run.steps), size)]
        self.rows: dict[int, tuple[str, int]] = {}  # a stored slot -> its buffer and row
        self.counts: dict[str, int] = {}  # buffer -> rows
        self._last_piece = {}
        for k, piece in enumerate(self.pieces):
            for step in piece:
                for v in step.args:
                    if type(v) is Ref:
                        self._last_piece[v.slot] = k
        self.wrapper = f"fused_run_{run.number}"
        self.loop_names = [f"{self.wrapper}_loop_{k + 1}" for k in range(len(self.pieces))]
        self.loop_params: list[list[str]] = []
        self.loop_sources = [self._loop(k, piece) for k, piece in enumerate(self.pieces)]
        self.read_buffers = list(dict.fromkeys(shared[s][0] for s in run.external if s in self.inherited))
        for slot, (buffer, row) in self.rows.items():
            if buffer in self.handed():
                shared[slot] = (buffer, row, run.shape)

    # -- one loop ----------------------------------------------------------------------------------
    def _loop(self, k: int, piece: list[Step]) -> str:
        index = ", ".join(f"i{d}" for d in range(len(self.run.shape))) or "()"  # a 0-d array's one element: x[()]
        loads, body, written = self._statements(piece, index)
        stores = self._stores(k, written, index)
        arrays, buffers = self._params(stores + loads)
        text, bases = _relative_rows("\n".join(loads + body + stores), buffers)
        params = arrays + buffers
        self.loop_params.append([str(n) for n in bases.values()] + params)
        sizes = [f"n{d}" for d in range(len(self.run.shape))]  # not in the source: one compiled loop serves every size
        lines = [f"def {self.loop_names[k]}({', '.join(sizes + list(bases) + params)}):"]
        for d in range(len(self.run.shape)):
            lines.append("    " * (d + 1) + f"for i{d} in range(n{d}):")
        pad = "    " * (len(self.run.shape) + 1)
        return "\n".join(lines + [pad + line for line in text.split("\n")])

    def _statements(self, piece: list[Step], index: str) -> tuple[list[str], list[str], list[int]]:
        """The loads of what the loop reads from outside it, its statements, the slots it writes."""
        loads, body, here, written = [], [], set(), []
        for step in piece:
            scalars = []
            for v in operands(step):
                if type(v) is not Ref:
                    scalars.append(_literal(v))
                    continue
                if v.slot not in here:
                    loads.append(f"{self._scalar(v.slot)} = {self._array_at(v.slot, index)}")
                    here.add(v.slot)
                scalars.append(self._scalar(v.slot))
            here.add(step.out)
            written.append(step.out)
            expr = scalar_form(step).format(*scalars)
            body.append(f"{self._scalar(step.out)} = {self._cast(step, expr)}{self.comment(step)}")
        return loads, body, list(dict.fromkeys(written))

    def _stores(self, k: int, written: list[int], index: str) -> list[str]:
        stores = []
        for slot in written:
            if slot in self.run.targets:
                stores.append(f"{self._array_at(slot, index)} = {self._scalar(slot)}")
            elif slot in self.run.outputs or self._last_piece.get(slot, -1) > k:
                stores.append(f"{self._row_at(slot, index)} = {self._scalar(slot)}")
        return stores

    def _params(self, lines: list[str]) -> tuple[list[str], list[str]]:
        """The arrays the loop's lines name: the run's inputs, and its buffers."""
        text = "\n".join(lines)
        wanted = [self.names[s] for s in self.passed if self.names[s] + "[" in text]
        buffers = dict.fromkeys([self.shared[s][0] for s in self.inherited] + self.buffers())
        return wanted, [b for b in buffers if b + "[" in text]

    # -- names ------------------------------------------------------------------------------------
    def _scalar(self, slot: int) -> str:
        return self.names[slot] + "_" if slot in self.run.external else self.names[slot]

    def _array_at(self, slot: int, index: str) -> str:
        if slot in self.inherited:
            buffer, row, _ = self.shared[slot]
            return _element(buffer, row, index)
        if slot in self.run.external:
            return f"{self.names[slot]}[{_broadcast_index(np.shape(self.values[slot]), self.run.shape)}]"
        return self._row_at(slot, index)

    def _row_at(self, slot: int, index: str) -> str:
        """The element of ``slot``'s row in its buffer (a row is given on first use)."""
        if slot not in self.rows:  # what the program reads on, apart from what only later loops read
            kind = "fused" if slot in self.run.outputs else "carry"
            buffer = f"{kind}{self.run.number}_{self.values[slot].dtype.name}"
            self.rows[slot] = (buffer, self.counts.get(buffer, 0))
            self.counts[buffer] = self.rows[slot][1] + 1
        return _element(*self.rows[slot], index)

    def buffers(self) -> list[str]:
        """Every buffer of the run's loops."""
        return list(self.counts)

    def handed(self) -> list[str]:
        """The buffers the wrapper returns: those of the values the program reads on (the others carry
        values from one loop to a later one, and keep their rows apart, so that loops of one pattern
        have one source)."""
        return [b for b in self.counts if b.startswith("fused")]

    def _cast(self, step: Step, expr: str) -> str:
        """``expr`` in the dtype numpy gives the step's result: numba computes a float32 with a
        Python number, or with a float64, in float64."""
        dtype = self.values[step.out].dtype
        mixed = any(type(v) is not Ref or self.values[v.slot].dtype != dtype for v in operands(step))
        return f"np.{dtype.name}({expr})" if mixed and dtype.kind != "b" else expr

    # -- the wrapper ---------------------------------------------------------------------------------
    def wrapper_source(self) -> str:
        """The Python function the program calls: it makes the buffers, runs the loops and returns
        the buffers and the rows that numpy's calls read."""
        run, shape = self.run, self.run.shape
        lines = [f"def {self.wrapper}({', '.join(self.params())}):",
                 f'    """run {run.number}: {len(run.steps)} elementwise calls over shape {shape}, '
                 f'{len(self.pieces)} loop{"s" if len(self.pieces) != 1 else ""}"""']
        for buffer, n in self.counts.items():
            lines.append(f"    {buffer} = np.empty({(n,) + shape!r}, np.{buffer.split('_', 1)[1]})")
        for slot in self.passed:
            if type(self.values[slot]) is not np.ndarray:  # a numpy scalar: numba indexes arrays only
                lines.append(f"    {self.names[slot]} = np.asarray({self.names[slot]})")
        for k, name in enumerate(self.loop_names):
            # the sizes, the first rows, the arrays
            lines.append(f"    {name}({', '.join([str(n) for n in shape] + self.loop_params[k])})")
        rest = ", ..." if not shape else ""  # a row of 0-d values as a 0-d array, not a number
        outs = self.handed() + [f"{self.rows[s][0]}[{self.rows[s][1]}{rest}]" for s in run.views]
        lines.append(f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
        return "\n".join(lines)

    def params(self) -> list[str]:
        """The wrapper's parameters: the arrays passed in, then the earlier runs' buffers it reads."""
        return [self.names[s] for s in self.passed] + self.read_buffers

    def call_line(self) -> str:
        """The program's line that runs the whole run."""
        outs = self.handed() + [self.names[s] for s in self.run.views]
        call = f"{self.wrapper}({', '.join(self.params())})"
        return f"{', '.join(outs)}{',' if len(outs) == 1 else ''} = {call}" if outs else call

    def dummies(self, made: dict) -> list:
        """Arrays like the wrapper's inputs, to compile its loops on before the first replay (numba
        compiles for each layout it meets): the recorded ones, copies of those written in place,
        and the earlier runs' buffers as ``made`` holds them."""
        passed = [self.values[s].copy() if s in self.run.targets else self.values[s] for s in self.passed]
        return passed + [made[b] for b in self.read_buffers]


def _piece_size(steps: list[Step]) -> int:
    """``PIECE``, or the multiple of the run's period nearest below it where its steps repeat one
    pattern (a chain's ops, their rules): each loop then starts at the same point of the pattern, and
    the loops in the middle of the run are one source, compiled once."""
    if len(steps) <= PIECE:
        return PIECE
    shapes = [(s.kind, s.head, tuple(type(v) is Ref for v in s.args)) for s in steps]
    for period in range(1, min(PIECE, len(steps) // 3) + 1):
        same = sum(a == b for a, b in zip(shapes, shapes[period:]))
        if same >= 0.9 * (len(shapes) - period):
            return period * max(1, PIECE // period)
    return PIECE


def _relative_rows(text: str, buffers: list[str]) -> tuple[str, dict[str, int]]:
    """``text`` with each buffer's rows counted from the first row it uses, passed in (``r_...``):
    loops that differ only in where their rows lie get one source, so numba compiles it once (a
    chain's loops repeat one pattern of ops, each a few rows further down)."""
    bases: dict[str, int] = {}
    for buffer in buffers:
        rows = [int(r) for r in re.findall(rf"\b{buffer}\[(\d+)[,\]]", text)]
        if not rows:
            continue
        base = bases[f"r_{buffer}"] = min(rows)

        def relative(m: re.Match, b: str = buffer, n: int = base) -> str:
            offset = int(m.group(1)) - n
            return f"{b}[r_{b} + {offset}" if offset else f"{b}[r_{b}"

        text = re.sub(rf"\b{buffer}\[(\d+)(?=[,\]])", relative, text)
    return text, bases


def _broadcast_index(shape: tuple, run_shape: tuple) -> str:
    """The index of element ``i0, i1, ...`` of the run in an operand of ``shape``, as broadcasting
    reads it: its axes are the run's last ones, and an axis of length 1 is read at 0."""
    skipped = len(run_shape) - len(shape)
    index = ["0" if n == 1 and run_shape[skipped + d] != 1 else f"i{skipped + d}" for d, n in enumerate(shape)]
    return ", ".join(index) or "()"


def _element(buffer: str, row: int, index: str) -> str:
    return f"{buffer}[{row}]" if index == "()" else f"{buffer}[{row}, {index}]"


def _literal(v: object) -> str:
    if type(v) is float and not np.isfinite(v):
        return "np.nan" if v != v else ("np.inf" if v > 0 else "-np.inf")
    return repr(v)
