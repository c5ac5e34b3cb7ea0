"""The op specs of tapekit.ops.losses (see tests/opfactory.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import tapekit as tk

from ..opfactory import Edge, OpSpec, axis_of, binary_draw, unary_draw, values

SPECS: list[OpSpec] = []
