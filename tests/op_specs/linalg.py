"""The op specs of tapekit.ops.linalg (see tests/opfactory.py).

``matmul`` gets 1-D and batched operands whose batch axes broadcast. ``einsum`` draws its
subscripts from tables of forms (products, diagonals and traces, transposes and sums, implicit
outputs, ``...``), each letter a drawn size, and sometimes one axis of size 1 that broadcasts.
``tensordot`` draws numpy's two forms of ``axes``; ``outer`` operands of any shape.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import tapekit as tk

from ..opfactory import SHAPES, OpSpec, values

EINSUM_FORMS = {
    "products": ["ij,jk->ik", "bij,bjk->bik", "i,i->", "i,j->ij", "ij,ij->ij", "ij,jk,kl->il", ",i->i",
                 "ij,j->i", "bi,bi->b"],
    "diagonals": ["ii", "ii->i", "iij->j", "bii->b", "ij,ji->", "iii->i", "ii,i->i"],
    "transposes_and_sums": ["ij->ji", "ijk->kij", "ij->", "ij->j", "i->i", "ij->ij"],
    "implicit": ["ij,jk", "ba", "ij", "i,i", "ij,ji", "abc,bd"],
    "ellipsis": ["...ij,...jk->...ik", "...i,...i->...", "...->...", "i...->...", "...ij->...ji", "...ij,j",
                 "...,...", "...ii->...i"],
}


def _shape(term, size, dots):
    before, _, after = term.partition("...")
    return tuple(size[c] for c in before) + (dots if "..." in term else ()) + tuple(size[c] for c in after)


def _einsum_draw(forms):
    """Subscripts from ``forms``, a size per letter, broadcastable shapes for ``...``, and sometimes
    one axis of size 1 (of a letter its operand names once) that broadcasts against the others."""
    def draw(data):
        subscripts = data.draw(st.sampled_from(forms), label="subscripts")
        terms = subscripts.split("->")[0].split(",")
        size = {c: data.draw(st.integers(1, 3), label=f"size of {c}") for c in sorted(set(subscripts) - set(",->."))}
        dots = data.draw(mutually_broadcastable_shapes(num_shapes=len(terms), max_dims=2, max_side=3),
                         label="... shapes").input_shapes
        shapes = [_shape(term, size, d) for term, d in zip(terms, dots)]
        once = [(k, c) for k, term in enumerate(terms) for c in term if c != "." and term.count(c) == 1]
        squeezed = data.draw(st.sampled_from([None] + once), label="size-1 axis")
        if squeezed is not None:
            k, c = squeezed
            shapes[k] = _shape(terms[k], {**size, c: 1}, dots[k])
        seed = data.draw(st.integers(0, 2 ** 16), label="seed")
        return [values(shape, "any", seed + i) for i, shape in enumerate(shapes)], {"subscripts": subscripts}
    return draw


def _matmul_draw(data):
    """Matrices, vectors, or batches of matrices whose batch axes broadcast."""
    n, k, m = (data.draw(st.integers(1, 3), label=name) for name in "nkm")
    batch = data.draw(mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3), label="batch").input_shapes
    x = (k,) if data.draw(st.booleans(), label="x is a vector") else batch[0] + (n, k)
    y = (k,) if data.draw(st.booleans(), label="y is a vector") else batch[1] + (k, m)
    seed = data.draw(st.integers(0, 2 ** 16), label="seed")
    return [values(x, "any", seed), values(y, "any", seed + 1)], {}


def _tensordot_draw(data):
    """``axes=N`` (a's last N axes with b's first N) or a pair of axis lists, paired in a drawn order."""
    a = data.draw(SHAPES, label="a's shape")
    if data.draw(st.booleans(), label="int axes"):
        n = data.draw(st.integers(0, len(a)), label="axes")
        b = list(a[len(a) - n:]) + data.draw(st.lists(st.integers(1, 3), max_size=3 - n), label="b's other axes")
        axes = n
    else:
        a_axes = data.draw(st.permutations(range(len(a))), label="a's axes")[:data.draw(st.integers(0, len(a)))]
        b = data.draw(st.lists(st.integers(1, 3), max_size=3 - len(a_axes)), label="b's other axes")
        b_axes = []
        for ax in a_axes:  # each paired axis of b goes at a drawn place, b_axes kept pointing at the right ones
            at = data.draw(st.integers(0, len(b)), label="place")
            b.insert(at, a[ax])
            b_axes = [i + (i >= at) for i in b_axes] + [at]
        negative = data.draw(st.booleans(), label="negative axes")
        axes = ([ax - len(a) for ax in a_axes] if negative else list(a_axes), b_axes)
    seed = data.draw(st.integers(0, 2 ** 16), label="seed")
    return [values(a, "any", seed), values(tuple(b), "any", seed + 1)], {"axes": axes}


def _outer_draw(data):
    shapes = [data.draw(SHAPES, label=name) for name in ("a's shape", "b's shape")]
    seed = data.draw(st.integers(0, 2 ** 16), label="seed")
    return [values(shape, "any", seed + i) for i, shape in enumerate(shapes)], {}


SPECS: list[OpSpec] = [
    OpSpec("matmul", tk.matmul, np.matmul, _matmul_draw, examples=25),
    *(OpSpec(f"einsum_{family}", lambda *ts, subscripts: tk.einsum(subscripts, *ts),
             lambda *arrays, subscripts: np.einsum(subscripts, *arrays), _einsum_draw(forms), examples=25)
      for family, forms in EINSUM_FORMS.items()),
    OpSpec("tensordot", tk.tensordot, np.tensordot, _tensordot_draw, examples=25),
    OpSpec("outer", tk.outer, np.outer, _outer_draw),
]
