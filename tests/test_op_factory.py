"""Every op through one factory (tests/opfactory.py): forward against numpy, gradient against
float64 central differences, the forward rule (JVP) against both, over drawn shapes, axes, keys and
values, on every device; and each documented edge value, by backward and by forward mode."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tapekit as tk

from .conftest import DEVICE_KINDS, make_device
from .op_specs import SPECS
from .opfactory import check_edge, check_edge_jvp, check_jvp, check_second, check_spec, finite

CASES = [(kind, name) for name, spec in sorted(SPECS.items()) for kind in DEVICE_KINDS
         if spec.strict or kind != "strict"]


def check_drawn(check, kind: str, name: str, examples: int | None = None) -> None:
    """``check(spec, dev, arrays, kwargs)`` at hypothesis-drawn operands of op ``name`` on device ``kind``."""
    spec = SPECS[name]
    dev = make_device(kind)

    @settings(max_examples=examples or spec.examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def run(data):
        arrays, kwargs = spec.draw(data)
        check(spec, dev, arrays, kwargs)

    run()


@pytest.mark.parametrize("kind,name", CASES)
def test_op(kind, name):
    check_drawn(check_spec, kind, name)


SECOND = [(kind, name) for kind, name in CASES if SPECS[name].grad]


@pytest.mark.parametrize("kind,name", SECOND)
def test_second_derivative(kind, name):
    check_drawn(check_second, kind, name, examples=max(SPECS[name].examples // 2, 3))


@pytest.mark.parametrize("kind,name", CASES)
def test_op_jvp(kind, name):
    check_drawn(check_jvp, kind, name)


EDGES = [(kind, name, i) for name, spec in sorted(SPECS.items()) for i in range(len(spec.edges))
         for kind in DEVICE_KINDS if spec.strict or kind != "strict"]


@pytest.mark.parametrize("kind,name,i", EDGES)
def test_documented_edge(kind, name, i):
    spec = SPECS[name]
    check_edge(spec, make_device(kind), spec.edges[i])


@pytest.mark.parametrize("kind,name,i", [(kind, name, i) for kind, name, i in EDGES if finite(SPECS[name].edges[i])])
def test_documented_edge_by_forward_mode(kind, name, i):
    spec = SPECS[name]
    check_edge_jvp(spec, make_device(kind), spec.edges[i])


ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan"}


@pytest.mark.parametrize("name", sorted(set(tk.ops.__all__) | set(tk.losses.__all__)))
def test_every_public_op_is_in_the_factory_and_says_what_its_gradient_is(name):
    if name in ALIASES:
        assert getattr(tk, name) is getattr(tk, ALIASES[name])
        return
    assert name in SPECS or any(spec.startswith(name + "_") for spec in SPECS), f"tk.{name} has no OpSpec"
    doc = (getattr(tk, name).__doc__ or "").lower()
    assert "gradient" in doc, f"help(tk.{name}) does not give its gradient"
    assert "forward rule" in doc or "no tangent" in doc, f"help(tk.{name}) does not give its forward rule (JVP)"
