"""The comparisons (``Tensor.__eq__`` and friends): elementwise boolean tensors with no gradient."""

from __future__ import annotations

import operator

import numpy as np

from ..opfactory import OpSpec, binary_draw, each_array, unary_draw


def _with_ties(data):
    """Two broadcastable arrays of values on a grid of 0.5, so that equal values are common."""
    arrays, kwargs = binary_draw()(data)
    return each_array(arrays, lambda a: np.round(a * 2) / 2), kwargs


SPECS: list[OpSpec] = [OpSpec(f"compare_{fn.__name__}", fn, fn, _with_ties, grad=False)
                       for fn in (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge)]
SPECS += [OpSpec("compare_number_right", lambda a: a >= 0.5, lambda a: a >= 0.5, unary_draw(), grad=False),
          OpSpec("compare_number_left", lambda a: 0.5 < a, lambda a: 0.5 < a, unary_draw(), grad=False)]
