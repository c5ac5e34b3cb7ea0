"""A run on a CUDA device written as one of CuPy's elementwise kernels.

On the GPU a run needs no loops of its own: CuPy's ``ElementwiseKernel`` takes the body for one
element (CUDA C++, with ``i`` the element's index), broadcasts its inputs, allocates its outputs and
compiles the kernel with NVRTC on its first call, caching it on disk. Each step is one statement of
the body; the values the rest of the program reads are the kernel's outputs. There is no piece
limit: NVRTC compiles a long body in linear time.

This path has been checked only as text (``tests/test_compile_fuse.py`` reads the kernel written for
a recorded run): it has not yet run on a GPU.
"""

from __future__ import annotations

from typing import Any, Callable

from .recorder import Ref, Step
from .runs import Run

_C_FUNCTIONS = {"exp": "exp({0})", "log": "log({0})", "tanh": "tanh({0})", "sinh": "sinh({0})", "cosh": "cosh({0})",
                "sin": "sin({0})", "cos": "cos({0})", "tan": "tan({0})", "sqrt": "sqrt({0})", "expm1": "expm1({0})",
                "log1p": "log1p({0})", "log2": "log2({0})", "log10": "log10({0})", "floor": "floor({0})",
                "ceil": "ceil({0})", "arctan": "atan({0})", "atan": "atan({0})", "arcsin": "asin({0})",
                "asin": "asin({0})", "arccos": "acos({0})", "acos": "acos({0})", "isnan": "isnan({0})",
                "isfinite": "isfinite({0})", "negative": "(-{0})", "square": "({0} * {0})", "abs": "abs({0})",
                "absolute": "abs({0})", "sign": "(({0} > 0) - ({0} < 0))",
                "maximum": "(isnan({0}) || {0} > {1} ? {0} : {1})", "minimum": "(isnan({0}) || {0} < {1} ? {0} : {1})",
                "logaddexp": "(max({0}, {1}) + log1p(exp(-abs({0} - {1}))))", "multiply": "({0} * {1})",
                "add": "({0} + {1})", "subtract": "({0} - {1})", "divide": "({0} / {1})", "true_divide": "({0} / {1})",
                "where": "({0} ? {1} : {2})"}
_C_TYPES = {"float64": "double", "float32": "float", "float16": "float16", "bool": "bool", "int64": "long long",
            "int32": "int", "int16": "short", "int8": "signed char", "uint8": "unsigned char"}


class CudaKernel:
    """A run as a CuPy ``ElementwiseKernel``: its parameters, its body, and the wrapper the program calls."""

    def __init__(self, run: Run, names: dict, values: list, comment: Callable[[Step], str]) -> None:
        self.run, self.names, self.values, self.comment = run, names, values, comment
        self.name = f"fused_run_{run.number}"
        self.inputs = [s for s in run.external if s not in run.targets]
        self.outputs = list(run.targets) + [s for s in run.outputs if s not in run.targets]
        self.body = self._body()

    def _body(self) -> list[str]:
        """The statements for element ``i``: temporaries declared with their C type, outputs assigned."""
        lines, declared = [], set(self.run.external)
        for step in self.run.steps:
            operands = [self._operand(v) for v in step.args]
            expr = _c_expression(step).format(*operands)
            out = step.out
            ctype = _C_TYPES[self.values[out].dtype.name]
            target = self._value(out)
            declare = "" if out in declared or out in self.outputs else f"{ctype} "
            declared.add(out)
            lines.append(f"{declare}{target} = ({ctype})({expr});{self._comment(step)}")
        return lines

    def _operand(self, v: Any) -> str:
        if type(v) is not Ref:
            return repr(v).lower() if type(v) is bool else repr(v)
        return self._value(v.slot)

    def _value(self, slot: int) -> str:
        """The name of a value in the body: a parameter's own name (CuPy indexes it for element ``i``)."""
        return self.names[slot]

    def _comment(self, step: Step) -> str:
        text = self.comment(step)
        return f"  // {text.strip()[2:]}" if text else ""

    def params(self) -> tuple[str, str]:
        """CuPy's ``in_params`` and ``out_params``: a raw-typed parameter per array."""
        ins = ", ".join(f"{_C_TYPES[self.values[s].dtype.name]} {self.names[s]}" for s in self.inputs)
        outs = ", ".join(f"{_C_TYPES[self.values[s].dtype.name]} {self.names[s]}" for s in self.outputs)
        return ins, outs

    def source(self) -> str:
        """The Python that builds the kernel, and the wrapper the program calls: it allocates the
        outputs, runs the kernel (inputs, then the arrays it writes in place, then the outputs) and
        returns the new arrays."""
        ins, outs = self.params()
        made = [s for s in self.outputs if s not in self.run.targets]
        args = [self.names[s] for s in self.inputs + list(self.run.targets) + made]
        lines = [f"{self.name}_kernel = cupy.ElementwiseKernel(", f'    "{ins}",', f'    "{outs}",', '    """']
        lines += [f"    {line}" for line in self.body]
        lines += ['    """,', f'    "{self.name}")', "", "",
                  f"def {self.name}({', '.join(self.names[s] for s in self.run.external)}):",
                  f'    """run {self.run.number}: {len(self.run.steps)} elementwise calls over shape '
                  f'{self.run.shape}, one kernel"""']
        shape = self.run.shape
        lines += [f"    {self.names[s]} = cupy.empty({shape!r}, cupy.{self.values[s].dtype.name})" for s in made]
        lines.append(f"    {self.name}_kernel({', '.join(args)})")
        returned = [self.names[s] for s in made]
        lines.append(f"    return ({', '.join(returned)}{',' if len(returned) == 1 else ''})")
        return "\n".join(lines)

    def call_line(self) -> str:
        """The program's line that runs the kernel."""
        outs = [self.names[s] for s in self.outputs if s not in self.run.targets]
        call = f"{self.name}({', '.join(self.names[s] for s in self.run.external)})"
        return f"{', '.join(outs)}{',' if len(outs) == 1 else ''} = {call}" if outs else call

    def build(self, cupy: Any) -> dict[str, Any]:
        """The wrapper, its kernel built by ``cupy`` (compiled by NVRTC on its first call)."""
        space = {"cupy": cupy}
        exec(compile(self.source(), f"<tk.compile fused run {self.run.number}>", "exec"), space)
        return {self.name: space[self.name]}


def _c_expression(step: Step) -> str:
    if step.kind in ("binop", "iop"):
        return f"({{0}} {step.head} {{1}})" if step.head != "**" else "pow({0}, {1})"
    if step.kind == "unop":
        return "abs({0})" if step.head == "abs" else f"({step.head}{{0}})"
    return _C_FUNCTIONS[step.head.rsplit(".", 1)[-1]]


