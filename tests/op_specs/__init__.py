"""Every op's ``OpSpec``, one module per family; ``SPECS`` gathers them for the factory."""

from __future__ import annotations

from . import compare, elementwise, linalg, losses, reduce, shape

SPECS = {spec.name: spec for module in (elementwise, compare, reduce, shape, linalg, losses) for spec in module.SPECS}
