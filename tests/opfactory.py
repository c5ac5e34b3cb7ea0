"""The op-test factory: every op is described once, by an ``OpSpec``, and checked the same way.

For each spec, on every device, hypothesis draws the op's inputs (shapes, values, axes, keys)
from the spec's ``draw``; the factory then checks

- the forward against the numpy reference, in float64 (and in float32 for ``dtypes``);
- the gradient against float64 central differences (``tk.check_grads``), unless the op has none;
- that an op without gradient gives a tensor that carries no tape;
- every documented ``Edge``: where finite differences cannot decide (ties, kinks, the edge of a
  domain), the gradient the op's docstring promises;
- a drawn numpy array operand (binary ops) is checked as the arrays are on the numpy device, and
  refused with ``DeviceMismatchError`` on the others.
- the second derivative (``check_second``): the gradient of ``sum(grad * v)``, the backward
  recorded with ``create_graph=True``, against central differences of the gradient, at a random
  ``v``; an op whose rule has no recorded form (``second=False``) says so with ``SecondOrderError``;
- the forward rule (``check_jvp``): ``tk.jvp``'s tangent against float64 central differences along
  a random direction, and against the backward (the dot-product test ``<u, J v> = <Jᵀ u, v>`` at
  random ``u``, ``v``); an op without gradient gives no tangent (an error, or zero); at each
  documented edge, the tangents along the basis directions sum to the documented gradient.

Specs live in ``tests/op_specs/``, one module per family of ops; ``test_op_factory.py`` runs them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

import tapekit as tk
from tapekit.ops import core

from .conftest import host


def values(shape: tuple[int, ...], domain: str = "any", seed: int = 0) -> np.ndarray:
    """Float64 values of ``shape`` in a domain where the op is smooth:

    ``any`` in (-2, 2); ``positive`` in (0.5, 2.5); ``unit`` in (-0.9, 0.9) (asin, acos);
    ``apart`` like ``any`` but with values at least 0.1 apart (no ties for max, sort, median);
    ``nonint`` like ``any`` but at least 0.05 from an integer (floor, round, remainder)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=shape)
    if domain == "positive":
        return np.abs(x) + 0.5
    if domain == "unit":
        return x * 0.45
    if domain == "apart":
        flat = rng.permutation(int(np.prod(shape, dtype=int))) * 0.13 - 1.5
        return flat.reshape(shape) + rng.uniform(-0.02, 0.02, size=shape)
    if domain == "nonint":
        return np.floor(x) + 0.05 + 0.9 * rng.uniform(size=shape)
    return x


@dataclass
class Edge:
    """A documented value: ``fn(*inputs, **kwargs)``'s gradient for each input (None: no entry)."""

    inputs: Sequence[Any]
    grads: Sequence[Any]
    kwargs: dict = field(default_factory=dict)
    why: str = ""


@dataclass
class OpSpec:
    """One op as the factory checks it.

    ``draw(data)`` returns ``(arrays, kwargs)``: the float64 inputs and the op's other arguments,
    drawn with hypothesis's ``data`` object. ``fn(*tensors, **kwargs)`` is the tapekit call and
    ``reference(*arrays, **kwargs)`` numpy's. ``grad=False`` for ops with no gradient (their output
    carries no tape). ``dtypes`` are checked for the forward beside float64 (the output's dtype and
    values, at float32's tolerance)."""

    name: str
    fn: Callable[..., tk.Tensor]
    reference: Callable[..., Any]
    draw: Callable[[Any], tuple[list[np.ndarray], dict]]
    grad: bool = True
    dtypes: tuple[str, ...] = ("float32",)
    edges: Sequence[Edge] = ()
    rtol: float = 1e-5
    strict: bool = True  # also run on the array-API-strict device
    second: bool = True  # its rule records: a second derivative exists (else SecondOrderError)
    examples: int = 10


# -- common ways of drawing inputs ----------------------------------------------------------------
SHAPES = array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3)


def unary_draw(domain: str = "any", shapes: Any = SHAPES, **kwargs: Any) -> Callable:
    """One array of a drawn shape; ``kwargs`` are strategies for the op's other arguments."""
    def draw(data: Any) -> tuple[list[np.ndarray], dict]:
        shape = data.draw(shapes, label="shape")
        seed = data.draw(st.integers(0, 2 ** 16), label="seed")
        return [values(shape, domain, seed)], {k: data.draw(s, label=k) for k, s in kwargs.items()}
    return draw


def quotient_draw(divisor: float | None = None, dividend: float | None = None) -> Callable:
    """One array ``x`` for ``x // divisor`` and ``x % divisor``, or for ``dividend // x`` and
    ``dividend % x``, drawn so that the quotient stays at least 0.05 from an integer: there these
    ops' gradients step, and finite differences straddling a step cannot decide (the documented
    edges of ``floor_divide`` and ``remainder`` assert the value at the steps)."""
    def draw(data: Any) -> tuple[list[np.ndarray], dict]:
        shape = data.draw(SHAPES, label="shape")
        quotients = values(shape, "nonint", data.draw(st.integers(0, 2 ** 16), label="seed"))
        return [quotients * divisor if divisor is not None else dividend / np.abs(quotients)], {}
    return draw


class Number(float):
    """A drawn operand to pass as a Python number, not as a tensor (as a plain ``float``: numpy
    promotes a subclass of float as it does a float64 array)."""


@dataclass
class HostArray:
    """A drawn operand to pass as a numpy array: a constant, as a number is, on the numpy device;
    refused with ``DeviceMismatchError`` on the others."""

    array: np.ndarray

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:  # where a test wants only arrays
        return np.asarray(self.array, dtype)


def each_array(drawn: list[Any], fn: Callable[[np.ndarray], np.ndarray]) -> list[Any]:
    """``fn`` of each drawn array, a drawn number or numpy array staying one."""
    return [Number(fn(np.float64(a))) if isinstance(a, Number) else HostArray(fn(a.array))
            if isinstance(a, HostArray) else fn(a) for a in drawn]


def binary_draw(domain: str = "any", domain_y: str | None = None) -> Callable:
    """Two arrays of mutually broadcastable drawn shapes, or one of them a constant: a Python number
    (``2.0 * t``) or a numpy array (``np.arange(3.0) * t``)."""
    def draw(data: Any) -> tuple[list[Any], dict]:
        shapes = data.draw(mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
                           label="shapes")
        seed = data.draw(st.integers(0, 2 ** 16), label="seed")
        constant = data.draw(st.sampled_from([None, 0, 1]), label="which operand is a constant")
        a, b = shapes.input_shapes
        operands = [values(a, domain, seed), values(b, domain_y or domain, seed + 1)]
        if constant is not None and data.draw(st.booleans(), label="the constant is a numpy array"):
            operands[constant] = HostArray(operands[constant])
        elif constant is not None:
            operands[constant] = Number(operands[constant].flat[0] if operands[constant].size else 1.0)
        return operands, {}
    return draw


def axis_of(ndim_min: int = 0) -> Callable:
    """A draw of one array and a valid axis (or None) for it, as ``axis=``."""
    def draw(data: Any, domain: str = "any") -> tuple[list[np.ndarray], dict]:
        shape = data.draw(array_shapes(min_dims=ndim_min, max_dims=3, min_side=1, max_side=3), label="shape")
        axes = [None] + list(range(-max(len(shape), 1), max(len(shape), 1)))
        axis = data.draw(st.sampled_from(axes), label="axis")
        seed = data.draw(st.integers(0, 2 ** 16), label="seed")
        return [values(shape, domain, seed)], {"axis": axis}
    return draw


# -- the checks ------------------------------------------------------------------------------------
def operands(drawn: list[Any], dtype: str, make: Callable[[Any, str], Any]) -> list[Any]:
    """``make(array, dtype)`` of each drawn array; a drawn ``Number`` stays a (plain) number, a
    drawn ``HostArray`` a numpy array."""
    return [float(a) if isinstance(a, Number) else np.asarray(a.array, dtype) if isinstance(a, HostArray)
            else make(a, dtype) for a in drawn]


def tensors_of(dev: tk.Device, drawn: list[Any], dtype: str = "float64") -> list[Any]:
    return operands(drawn, dtype, lambda a, d: dev.tensor(a, dtype=d))


def reference_of(spec: OpSpec, drawn: list[Any], kwargs: dict, dtype: str = "float64") -> np.ndarray:
    return np.asarray(spec.reference(*operands(drawn, dtype, lambda a, d: a.astype(d)), **kwargs))


def of_tensors(spec: OpSpec, given: list[Any], kwargs: dict) -> tuple[Callable[..., tk.Tensor], list[tk.Tensor]]:
    """The op as a function of its tensor operands alone (a drawn number stays fixed), and those operands."""
    at = [i for i, t in enumerate(given) if isinstance(t, tk.Tensor)]

    def f(*ts: tk.Tensor) -> tk.Tensor:
        args = list(given)
        for i, t in zip(at, ts):
            args[i] = t
        return spec.fn(*args, **kwargs)

    return f, [given[i] for i in at]


def refused_array(dev: tk.Device, arrays: list[Any]) -> bool:
    """Whether a drawn numpy array operand is refused on ``dev`` (every device but numpy's):
    ``check_spec`` asserts the refusal, and the other checks have nothing to differentiate."""
    return any(isinstance(a, HostArray) for a in arrays) and dev.place != ("cpu",)


def check_spec(spec: OpSpec, dev: tk.Device, arrays: list[Any], kwargs: dict) -> None:
    given = tensors_of(dev, arrays)
    if refused_array(dev, arrays):
        with pytest.raises(tk.DeviceMismatchError, match=r"a numpy array cannot meet .* dev.tensor\(array\)"):
            spec.fn(*given, **kwargs)
        return
    got = spec.fn(*given, **kwargs)
    want = reference_of(spec, arrays, kwargs)
    assert got.shape == want.shape, f"{spec.name}: shape {got.shape}, numpy gives {want.shape}"
    np.testing.assert_allclose(host(got), want, rtol=spec.rtol, atol=1e-12, err_msg=spec.name)
    f, primals = of_tensors(spec, given, kwargs)
    if spec.grad:
        tk.check_grads(f, *primals)
        check_links(f, primals)
    else:
        assert f(*[p.trace() for p in primals]).tape is None, f"{spec.name} has no gradient: its output carries no tape"
    for dtype in spec.dtypes:
        out = spec.fn(*tensors_of(dev, arrays, dtype), **kwargs)
        ref = reference_of(spec, arrays, kwargs, dtype)
        if spec.grad:
            assert str(out.dtype).endswith(dtype), f"{spec.name}: {dtype} inputs gave {out.dtype}"
        np.testing.assert_allclose(host(out), ref, rtol=2e-3, atol=1e-5, err_msg=f"{spec.name} in {dtype}")


def check_links(f: Callable[..., tk.Tensor], primals: list[tk.Tensor]) -> None:
    """The record says which saved values are the output's or an operand's own array (``links``,
    through which a second derivative flows) as the search by identity finds them, where the op
    declares them instead (``ops.core.declared_links``)."""
    declared = _links_of(f(*[p.trace(tk.UnionTape()) for p in primals]))
    make_record = core._make_record
    core._make_record = lambda *args: make_record(*args[:-1], None)  # every op searches
    try:
        found = _links_of(f(*[p.trace(tk.UnionTape()) for p in primals]))
    finally:
        core._make_record = make_record
    assert declared == found, f"declared links {declared}, found {found} (None: no link, -1: the output, k: operand k)"


def _links_of(out: tk.Tensor) -> list[int | None] | None:
    """What each saved value of ``out``'s record is: the output (-1), the first operand that is the
    same tensor as the one it links to, or nothing (None)."""
    rec = out._record
    if rec is None:
        return None
    links = [rec.link(j) for j in range(len(rec.saved))]
    return [k if k is None or k == -1 else rec.inputs.index(rec.inputs[k]) for k in links]


def check_edge(spec: OpSpec, dev: tk.Device, edge: Edge) -> None:
    tensors = [dev.tensor(a, dtype="float64") for a in edge.inputs]
    tape = tk.UnionTape()
    traced = [t.trace(tape) for t in tensors]
    out = spec.fn(*traced, **edge.kwargs)
    seed = dev.tensor(np.ones(out.shape), dtype="float64")
    grads = tk.backward([out], [seed])
    for t, want in zip(tensors, edge.grads):
        if want is None:
            assert grads.get(t) is None, f"{spec.name}: expected no gradient ({edge.why})"
        else:
            np.testing.assert_allclose(host(grads[t]), want, rtol=1e-6, atol=1e-12,
                                       err_msg=f"{spec.name} at {edge.inputs}: {edge.why}")


def grad_dot(spec: OpSpec, kwargs: dict, given: list[Any], tensors: list[int], weights: np.ndarray,
             directions: list[np.ndarray]) -> Callable[..., tk.Tensor]:
    """``ts -> sum(grad_i * v_i)``: the gradient of ``sum(op(ts) * weights)`` (recorded with
    ``create_graph=True``) dotted with the directions, a traced scalar."""
    def f(*ts: tk.Tensor) -> tk.Tensor:
        tape = tk.UnionTape()
        args = list(given)
        traced = [t.trace(tape) for t in ts]
        for i, t in zip(tensors, traced):
            args[i] = t
        out = spec.fn(*args, **kwargs)
        dev = ts[0].device
        grads = tk.backward([out], [dev.tensor(weights, dtype="float64")], create_graph=True)
        total = None
        for t, v in zip(traced, directions):
            if t in grads:
                term = (grads[t] * dev.tensor(v, dtype="float64")).sum()
                total = term if total is None else total + term
        return total if total is not None else traced[0].sum() * 0.0
    return f


def check_second(spec: OpSpec, dev: tk.Device, arrays: list[Any], kwargs: dict) -> None:
    """The gradient of ``sum(grad * v)`` against central differences of the gradient."""
    if refused_array(dev, arrays):
        return
    given = tensors_of(dev, arrays)
    tensors = [i for i, t in enumerate(given) if isinstance(t, tk.Tensor)]
    rng = np.random.default_rng(1)
    out_shape = spec.fn(*given, **kwargs).shape
    weights = rng.standard_normal(out_shape)
    directions = [rng.standard_normal(given[i].shape) for i in tensors]
    f = grad_dot(spec, kwargs, given, tensors, weights, directions)
    if not spec.second:
        with pytest.raises(tk.BackwardError) as info:
            f(*[given[i] for i in tensors])
        assert isinstance(info.value.__cause__, tk.SecondOrderError), f"{spec.name}: {info.value}"
        return
    tk.check_grads(f, *[given[i] for i in tensors], atol=1e-5, rtol=1e-4)


def check_jvp(spec: OpSpec, dev: tk.Device, arrays: list[Any], kwargs: dict, eps: float = 1e-6) -> None:
    """The forward rule at drawn inputs: against central differences along a random direction ``v``,
    and against the backward at a random ``u`` (``<u, J v> = <Jᵀ u, v>``, both exact, so to rounding)."""
    if refused_array(dev, arrays):
        return
    f, primals = of_tensors(spec, tensors_of(dev, arrays), kwargs)
    rng = np.random.default_rng(len(arrays))
    directions = [rng.standard_normal(p.shape) for p in primals]
    if not spec.grad:
        try:
            _, tangent = tk.jvp(f, primals, directions)
        except tk.DTypeError as err:
            assert "no tangent" in str(err), f"{spec.name}: {err}"
            return
        assert not np.any(host(tangent)), f"{spec.name} has no gradient, so its tangent is zero"
        return
    out, tangent = tk.jvp(f, primals, directions)
    np.testing.assert_allclose(host(out), host(f(*primals)), rtol=0, atol=0, err_msg=f"{spec.name}: jvp's output")

    def moved(step: float) -> np.ndarray:
        return host(f(*[dev.tensor(host(p) + step * v, dtype="float64") for p, v in zip(primals, directions)]))

    numeric = (moved(eps) - moved(-eps)) / (2 * eps)
    np.testing.assert_allclose(host(tangent), numeric, rtol=1e-5, atol=1e-6, err_msg=f"{spec.name}: J v")
    u = rng.standard_normal(out.shape)
    tape = tk.UnionTape()
    grads = tk.backward([f(*[p.trace(tape) for p in primals])], [dev.tensor(u, dtype="float64")])
    forward = float(np.sum(u * host(tangent)))
    reverse = sum(float(np.sum(host(grads[p]) * v)) for p, v in zip(primals, directions) if grads.get(p) is not None)
    scale = float(np.sum(np.abs(u * host(tangent)))) + 1e-12
    assert abs(forward - reverse) <= 1e-10 * scale, f"{spec.name}: <u, J v> = {forward}, <J^T u, v> = {reverse}"


def finite(edge: Edge) -> bool:
    """Whether every gradient ``edge`` documents is finite."""
    return all(want is None or bool(np.all(np.isfinite(want))) for want in edge.grads)


def check_edge_jvp(spec: OpSpec, dev: tk.Device, edge: Edge) -> None:
    """At a documented edge, the forward rule agrees with the documented gradient: the output's
    tangents along each basis direction of each input, summed, are that element's gradient. Where a
    documented gradient is infinite or nan, forward mode multiplies the zero tangent of the other
    directions by it (nan, as in JAX): such an edge is the backward's alone (``finite``)."""
    assert finite(edge), f"{spec.name}: an edge with an infinite or nan gradient is checked by backward only"
    tensors = [dev.tensor(a, dtype="float64") for a in edge.inputs]
    for i, (t, want) in enumerate(zip(tensors, edge.grads)):
        got = np.zeros(t.shape)
        for index in np.ndindex(*t.shape):
            directions = [np.zeros(u.shape) for u in tensors]
            directions[i][index] = 1.0
            _, tangent = tk.jvp(lambda *ts: spec.fn(*ts, **edge.kwargs), tensors, directions)
            got[index] = np.sum(host(tangent))
        np.testing.assert_allclose(got, 0.0 if want is None else want, rtol=1e-6, atol=1e-12,
                                   err_msg=f"{spec.name}'s tangent at {edge.inputs}: {edge.why}")
