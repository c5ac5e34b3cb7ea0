"""Linear algebra: ``matmul`` with numpy's rules (vectors promoted, batch axes broadcast), and
``einsum``, with ``outer`` and ``tensordot`` written as einsums. An einsum's gradient is an
einsum too (``einsum_grad_subscripts``)."""

from __future__ import annotations

import functools
import math
import string
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..errors import AxisError, InvalidArgumentError, OperandError, ShapeError
from ..tensor import Tensor
from .core import (broadcast_shape, check_devices, declared_links, emit, fills, host_constant, normalize_axes,
                   unbroadcast)

__all__ = ["matmul", "einsum", "outer", "tensordot"]


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b``. A 1-D operand is a row (left) or a column (right); leading axes broadcast.
    Gradients: ``g @ bᵀ`` for ``a`` and ``aᵀ @ g`` for ``b``, summed over broadcast batch axes.
    Forward rule (JVP): ``ta @ b + a @ tb``. On the numpy device a numpy array beside a tensor is
    a constant (``host_constant``), as for ``a @ array``."""
    a, b = _array_as_constant(a, b), _array_as_constant(b, a)
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise OperandError(f"matmul takes two tensors, got {type(a).__name__} @ {type(b).__name__}; make an array a "
                        f"tensor with dev.tensor(array), and multiply by a number with *")
    check_devices((a, b), "matmul")
    x, y = a.data, b.data
    if x.ndim == 0 or y.ndim == 0:
        raise ShapeError(f"matmul: operands need at least 1 dimension, got {x.shape} @ {y.shape}; use * for scalars")
    inner = y.shape[-2] if y.ndim > 1 else y.shape[0]
    if x.shape[-1] != inner:
        raise ShapeError(f"matmul: {x.shape} @ {y.shape}: the last axis of the left ({x.shape[-1]}) must match "
                         f"the {'second-to-last' if y.ndim > 1 else 'only'} axis of the right ({inner}). "
                         f"Transpose or reshape an operand so these agree.")
    broadcast_shape(x.shape[:-2], y.shape[:-2], "matmul (batch axes)")
    xp = a.device.xp
    out = xp.matmul(x, y)
    if x.ndim == 2 and y.ndim == 2:  # the common case: each rule can write into a preallocated buffer
        return emit("matmul", out, (a, b), _MATRIX_RULES, (xp, x, y), a.device, _matmul_jvp, _MATMUL_LINKS)
    shape2 = list(out.shape) + ([1] if y.ndim == 1 else [])
    if x.ndim == 1:
        shape2.insert(len(shape2) - 1, 1)
    return emit("matmul", out, (a, b), (_grad_x, _grad_y), (xp, x, y, tuple(shape2)), a.device, _matmul_jvp,
                _MATMUL_LINKS)


def _array_as_constant(operand: Any, beside: Any) -> Any:
    """A numpy array operand beside a tensor as an untraced tensor (``host_constant``); any other as it is."""
    if isinstance(operand, np.ndarray) and isinstance(beside, Tensor):
        return Tensor(beside.device.count(host_constant(operand, "matmul", beside)), beside.device)
    return operand


_MATMUL_LINKS = declared_links(("xp", "x", "y"), ("x", "y"))  # what matmul saves: its operands' arrays (and shape2)
_MATRIX_RULES = (fills(lambda g, xp, x, y, **into: xp.matmul(g, xp.matrix_transpose(y), **into)),
                 fills(lambda g, xp, x, y, **into: xp.matmul(xp.matrix_transpose(x), g, **into)))


def _matmul_jvp(tangents, xp, x, y, *shape2):
    """``tx @ y + x @ ty``, the product rule, without the term of an operand that has no tangent."""
    tx, ty = tangents
    if ty is None:
        return xp.matmul(tx, y)
    return xp.matmul(x, ty) if tx is None else xp.matmul(tx, y) + xp.matmul(x, ty)


def _as_matrices(xp, x, y):
    """``x`` and ``y`` with a 1-D left operand as a row and a 1-D right operand as a column."""
    return (x if x.ndim > 1 else xp.reshape(x, (1, x.shape[0])),
            y if y.ndim > 1 else xp.reshape(y, (y.shape[0], 1)))


def _grad_x(g, xp, x, y, shape2):
    x2, y2 = _as_matrices(xp, x, y)
    g2 = xp.reshape(g, shape2)
    return xp.reshape(unbroadcast(xp, xp.matmul(g2, xp.matrix_transpose(y2)), x2.shape), x.shape)


def _grad_y(g, xp, x, y, shape2):
    x2, y2 = _as_matrices(xp, x, y)
    g2 = xp.reshape(g, shape2)
    return xp.reshape(unbroadcast(xp, xp.matmul(xp.matrix_transpose(x2), g2), y2.shape), y.shape)


# -- einsum, and the ops written as einsums ------------------------------------------------------
def einsum(subscripts: str, *operands: Tensor) -> Tensor:
    """numpy's ``einsum``: multiply the operands' elements as the letters pair them, and sum over
    the letters the output lacks. ``'ij,jk->ik'`` is a matrix product, ``'ij->ji'`` a transpose,
    ``'ii'`` a trace, ``'ii->i'`` a diagonal, ``'bij,bjk->bik'`` a batch of products, and
    ``'...ij,...jk'`` one whose leading axes broadcast. Without ``->`` the output is numpy's: the
    ``...`` axes, then the letters used once, in alphabetical order.

    Gradient: an einsum again. Operand ``k``'s is the output's gradient ``g`` contracted with every
    other operand, onto ``k``'s letters: for ``'ij,jk->ik'``, ``a``'s is ``einsum('ik,jk->ij', g, b)``
    and ``b``'s is ``einsum('ik,ij->jk', g, a)``; see ``einsum_grad_subscripts``. Forward rule (JVP):
    the product rule, the sum over operands of the einsum with that operand's tangent in its place."""
    return _einsum("einsum", subscripts, operands)


def outer(a: Tensor, b: Tensor) -> Tensor:
    """numpy's ``outer``: ``out[i, j] = a[i] * b[j]``, the operands flattened first. It is
    ``einsum('i,j->ij', a, b)``, so ``a``'s gradient is ``g @ b`` and ``b``'s is ``a @ g``, and its
    forward rule (JVP) is ``outer(ta, b) + outer(a, tb)``."""
    _check_tensors((a, b), "outer")
    return _einsum("outer", "i,j->ij", [t if t.ndim == 1 else t.reshape(t.size) for t in (a, b)])


def tensordot(a: Tensor, b: Tensor, axes: Any = 2) -> Tensor:
    """numpy's ``tensordot``: the sum of products over pairs of axes, ``a``'s last ``axes`` with
    ``b``'s first ``axes``, or ``axes=(a_axes, b_axes)`` paired in order. The output has ``a``'s
    other axes, then ``b``'s. It is an einsum (gradient, forward rule and all): ``tensordot(a, b, 1)`` of
    matrices is ``einsum('ab,bc->ac', a, b)``."""
    _check_tensors((a, b), "tensordot")
    a_axes, b_axes = _paired_axes(a, b, axes)
    letters = iter(string.ascii_letters)
    of_a = [_fresh(letters, "tensordot") for _ in range(a.ndim)]
    of_b = [of_a[a_axes[b_axes.index(i)]] if i in b_axes else _fresh(letters, "tensordot") for i in range(b.ndim)]
    out = [c for i, c in enumerate(of_a) if i not in a_axes] + [c for i, c in enumerate(of_b) if i not in b_axes]
    return _einsum("tensordot", f"{''.join(of_a)},{''.join(of_b)}->{''.join(out)}", (a, b))


def _einsum(name: str, subscripts: str, operands: Sequence[Tensor]) -> Tensor:
    """The einsum op, recorded as ``name``: the operands reshaped to the plain form of ``_plan``,
    with its identity matrices, are contracted, and saved for the rules."""
    if not isinstance(subscripts, str):
        raise OperandError(f"{name}: the subscripts come first, as a string such as 'ij,jk->ik'; got a "
                           f"{type(subscripts).__name__}")
    _check_tensors(operands, name)
    given = tuple(t.shape for t in operands)
    spec, shapes, eyes = _plan(subscripts, given, name)
    device = operands[0].device
    xp = device.xp
    eyes = [device.count(xp.eye(n, dtype=operands[k].dtype, **device._placement())) for k, n in eyes]
    operands_data = [t.data for t in operands]
    out = contract(xp, spec, _plain(xp, operands_data, shapes, eyes))
    return emit(name, out, operands, _einsum_rules(len(operands)), (xp, spec, shapes, eyes, *operands_data),
                device, _einsum_jvp)


def _plain(xp: Any, arrays: Sequence[Any], shapes: tuple, eyes: list) -> list:
    """The operands reshaped to the plain form of ``_plan``, then its identity matrices."""
    return [a if a.shape == shape else xp.reshape(a, shape) for a, shape in zip(arrays, shapes)] + eyes


def _einsum_jvp(tangents: tuple, xp: Any, spec: str, shapes: tuple, eyes: list, *operands: Any) -> Any:
    """The product rule: for each operand with a tangent, the einsum with the tangent in its place."""
    arrays = _plain(xp, operands, shapes, eyes)
    total = None
    for k, t in enumerate(tangents):
        if t is not None:
            part = contract(xp, spec, [*arrays[:k], xp.reshape(t, arrays[k].shape), *arrays[k + 1:]])
            total = part if total is None else total + part
    return total


def _einsum_rules(n: int) -> tuple[Callable, ...]:
    return tuple(_einsum_rule(k) for k in range(n))


@functools.cache
def _einsum_rule(k: int) -> Callable:
    """The rule of an einsum's operand ``k``, made once per position."""
    return lambda g, xp, spec, shapes, eyes, *operands: _einsum_grad(xp, spec, _plain(xp, operands, shapes, eyes), k,
                                                                      g, operands[k].shape)


def _einsum_grad(xp: Any, spec: str, arrays: Sequence[Any], k: int, g: Any, shape: tuple[int, ...]) -> Any:
    """Operand ``k``'s gradient: the einsum ``einsum_grad_subscripts(spec, k)`` of ``g`` and the
    other operands. Letters that only operand ``k`` has were summed away by the forward, so the
    gradient is the same all along them: it is broadcast back over them."""
    grad_spec = einsum_grad_subscripts(spec, k)
    grad = contract(xp, grad_spec, [g, *arrays[:k], *arrays[k + 1:]])
    reached = grad_spec.split("->")[1]
    plain = arrays[k].shape
    grad = xp.reshape(grad, tuple(n if c in reached else 1 for c, n in zip(_terms(spec)[0][k], plain)))
    return xp.reshape(xp.broadcast_to(grad, plain), shape)


def einsum_grad_subscripts(spec: str, k: int) -> str:
    """The einsum that gives operand ``k``'s gradient in the einsum ``spec`` (whose operands name
    each axis once): the output's gradient, lettered as the output, then the other operands, onto
    ``k``'s letters that some of them have. ``einsum_grad_subscripts('ij,jk->ik', 0)`` is
    ``'ik,jk->ij'`` (``g @ b.T``), and for operand 1 it is ``'ik,ij->jk'`` (``a.T @ g``)."""
    terms, out = _terms(spec)
    others = terms[:k] + terms[k + 1:]
    reached = "".join(c for c in terms[k] if c in out + "".join(others))
    return f"{','.join([out] + others)}->{reached}"


def contract(xp: Any, spec: str, arrays: Sequence[Any]) -> Any:
    """The einsum ``spec`` of device arrays, where every operand names each of its axes once
    (``_plan``'s plain form), by array-API calls alone (the standard has no einsum), the same on
    every device. Each operand is first summed over its letters that appear nowhere else; then the
    operands are contracted pairwise, left to right, each pair as one batched ``matmul``: letters
    both share and a later term needs are its batch axes, letters both share and nothing later
    needs its summed axis, the others its rows and columns."""
    terms, out = _terms(spec)
    size = {c: n for term, a in zip(terms, arrays) for c, n in zip(term, a.shape)}
    pairs = [_sum_lone_letters(xp, term, a, out + "".join(terms[:k] + terms[k + 1:]))
             for k, (term, a) in enumerate(zip(terms, arrays))]
    while len(pairs) > 1:
        (a, x), (b, y), rest = pairs[0], pairs[1], pairs[2:]
        later = out + "".join(term for term, _ in rest)
        batch = [c for c in a if c in b and c in later]
        summed = [c for c in a if c in b and c not in later]
        rows, cols = [c for c in a if c not in b], [c for c in b if c not in a]
        x, y = _grouped(xp, x, a, batch, rows, summed, size), _grouped(xp, y, b, batch, summed, cols, size)
        z = xp.matmul(x, y) if summed else xp.multiply(x, y)  # nothing to sum: (rows, 1) times (1, cols)
        joined = batch + rows + cols
        pairs = [("".join(joined), xp.reshape(z, tuple(size[c] for c in joined)))] + rest
    ((term, z),) = pairs
    return xp.permute_dims(z, tuple(term.index(c) for c in out))


def _sum_lone_letters(xp: Any, term: str, a: Any, elsewhere: str) -> tuple[str, Any]:
    """``a`` summed over the axes whose letters are not in ``elsewhere``, and its remaining letters."""
    lone = tuple(i for i, c in enumerate(term) if c not in elsewhere)
    if not lone:
        return term, a
    return "".join(c for c in term if c in elsewhere), xp.sum(a, axis=lone)


def _grouped(xp: Any, a: Any, term: str, batch: list, rows: list, cols: list, size: dict) -> Any:
    """``a``'s axes put in the order batch, rows, cols, as an array of shape (*batch, rows, cols)."""
    a = xp.permute_dims(a, tuple(term.index(c) for c in batch + rows + cols))
    return xp.reshape(a, tuple(size[c] for c in batch) + (math.prod(size[c] for c in rows),
                                                         math.prod(size[c] for c in cols)))


def _terms(spec: str) -> tuple[list[str], str]:
    """A plain spec's operand terms and output term."""
    inputs, out = spec.split("->")
    return inputs.split(","), out


@functools.lru_cache(maxsize=1024)
def _plan(subscripts: str, shapes: tuple, op: str) -> tuple[str, tuple, tuple]:
    """``subscripts`` for operands of ``shapes`` as a plain einsum, one whose every operand names
    each of its axes once: returns its spec, the shape each operand is reshaped to, and the
    identity matrices it adds, as (operand, size).

    ``...`` becomes fresh letters, right-aligned as broadcasting aligns axes. An axis of size 1
    that broadcasts against a longer one is dropped with its letter. A letter repeated within an
    operand gets a fresh letter the second time, tied to the first by an identity matrix:
    ``'ii->i'`` is ``'ij,ij->i'`` with ``eye``, so the gradient lands on the diagonal, by an
    einsum like every other."""
    unused = iter(c for c in string.ascii_letters if c not in subscripts)
    terms, out = _spelled_out(subscripts, [len(s) for s in shapes], op, unused)
    sizes = _letter_sizes(terms, shapes, subscripts, op)
    plain, plain_shapes, eyes, ties = [], [], [], []
    for k, (term, shape) in enumerate(zip(terms, shapes)):
        letters, kept = "", []
        for c, n in zip(term, shape):
            if n == 1 and sizes[c] > 1:
                continue
            if c in letters:
                fresh = _fresh(unused, op)
                ties.append(c + fresh)
                eyes.append((k, n))
                c = fresh
            letters += c
            kept.append(n)
        plain.append(letters)
        plain_shapes.append(tuple(kept))
    return f"{','.join(plain + ties)}->{out}", tuple(plain_shapes), tuple(eyes)


def _spelled_out(subscripts: str, ndims: list[int], op: str, unused: Iterator[str]) -> tuple[list[str], str]:
    """The checked terms of each operand and of the output, with ``...`` spelled out in letters
    from ``unused`` and an implicit output made explicit."""
    text = subscripts.replace(" ", "")
    inputs, arrow, out = text.partition("->")
    terms = inputs.split(",")
    for term in terms + [out]:
        if not all(c in string.ascii_letters for c in term.replace("...", "", 1)):
            raise InvalidArgumentError(f"{op}: cannot read {term!r} in {subscripts!r}; a term is letters (a-z, A-Z) "
                                       f"with at most one '...', terms are split by ',', one '->' starts the output")
    if len(terms) != len(ndims):
        raise InvalidArgumentError(f"{op}: {subscripts!r} has {len(terms)} operand terms but {len(ndims)} operands "
                                   f"were given; write one term per operand, split by ','")
    spans = []
    for term, ndim in zip(terms, ndims):
        named = len(term) - 3 * ("..." in term)
        if named > ndim or ("..." not in term and named != ndim):
            raise ShapeError(f"{op}: the term {term!r} names {named} axes but its operand has {ndim}; name each "
                             f"axis once, or write '...' for the axes you do not name")
        spans.append(ndim - named)
    dots = "".join(_fresh(unused, op) for _ in range(max(spans, default=0)))
    terms = [term.replace("...", dots[len(dots) - span:]) for term, span in zip(terms, spans)]
    if not arrow:
        named = inputs.replace("...", "").replace(",", "")
        return terms, dots + "".join(sorted(c for c in set(named) if named.count(c) == 1))
    if dots and "..." not in out:
        raise InvalidArgumentError(f"{op}: the operands' '...' stands for {len(dots)} axes but the output "
                                   f"{out!r} has no '...'; add it (as in numpy)")
    out = out.replace("...", dots)
    for c in out:
        if out.count(c) > 1 or c not in "".join(terms):
            raise InvalidArgumentError(f"{op}: the output {out!r} of {subscripts!r} names {c!r} "
                                       f"{'twice' if out.count(c) > 1 else 'but no operand does'}; an output "
                                       f"names each axis once, with letters of the operands")
    return terms, out


def _letter_sizes(terms: list[str], shapes: tuple, subscripts: str, op: str) -> dict[str, int]:
    """Each letter's size. Operands must agree on it, or have 1 (which broadcasts); a letter
    repeated within one operand needs one size there."""
    sizes: dict[str, int] = {}
    for term, shape in zip(terms, shapes):
        own: dict[str, int] = {}
        for c, n in zip(term, shape):
            what = f"letter {c!r}" if c in subscripts else "a '...' axis"
            if own.setdefault(c, n) != n:
                raise ShapeError(f"{op}: {what} names axes of sizes {own[c]} and {n} in one operand of shape "
                                 f"{shape}; a repeated letter takes a diagonal, which needs equal sizes")
            m = sizes.setdefault(c, n)
            if m != n and 1 not in (m, n):
                raise ShapeError(f"{op}: {what} has size {m} in one operand and {n} in another (shapes "
                                 f"{list(shapes)}); sizes must agree, or be 1 to broadcast")
            sizes[c] = max(m, n)
    return sizes


def _fresh(unused: Iterator[str], op: str) -> str:
    c = next(unused, None)
    if c is None:
        raise InvalidArgumentError(f"{op}: more axes than the 52 letters a-z, A-Z can name; reshape the operands "
                                   f"to fewer axes")
    return c


def _paired_axes(a: Tensor, b: Tensor, axes: Any) -> tuple[list[int], list[int]]:
    """``tensordot``'s ``axes`` as two lists of axes, of ``a`` and ``b``, paired in order."""
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        if not 0 <= axes <= min(a.ndim, b.ndim):
            raise AxisError(f"tensordot: axes={axes} pairs that many axes of each operand, but they have {a.ndim} "
                            f"and {b.ndim}; pass 0 to {min(a.ndim, b.ndim)}, or a pair (a_axes, b_axes)")
        pairs = list(range(a.ndim - axes, a.ndim)), list(range(axes))
    elif isinstance(axes, (tuple, list)) and len(axes) == 2:
        pairs = tuple(_axes_in_order(given, t, "tensordot") for given, t in zip(axes, (a, b)))
    else:
        raise InvalidArgumentError(f"tensordot: axes must be an int or a pair (a_axes, b_axes), got {axes!r}")
    if len(pairs[0]) != len(pairs[1]):
        raise AxisError(f"tensordot: axes={axes!r} names {len(pairs[0])} axes of a but {len(pairs[1])} of b; pair "
                        f"them one to one")
    for i, j in zip(*pairs):
        if a.shape[i] != b.shape[j]:
            raise ShapeError(f"tensordot: axis {i} of a {a.shape} has size {a.shape[i]} but axis {j} of b {b.shape} "
                             f"has {b.shape[j]}; paired axes need one size")
    return pairs


def _axes_in_order(given: Any, t: Tensor, op: str) -> list[int]:
    """An int or a sequence of them, checked as axes of ``t`` (in range, none twice), in order."""
    given = list(given) if isinstance(given, (tuple, list)) else [given]
    if len(normalize_axes(given, t.ndim, op)) != len(given):
        raise AxisError(f"{op}: a 0-d tensor has no axis to sum over; pair no axes of it (axes=0)")
    return [int(ax) % t.ndim for ax in given]


def _check_tensors(operands: Sequence[Any], op: str) -> None:
    if not operands or not all(isinstance(t, Tensor) for t in operands):
        got = ", ".join(type(t).__name__ for t in operands) or "none"
        raise OperandError(f"{op} takes tensors, got {got}; make an array a tensor with dev.tensor(array)")
    check_devices(operands, op)
