"""``tk.compile``: a compiled step gives what the eager step gives (bitwise, in float64 on numpy),
under every policy and over every op; it records again for other shapes; it refuses to read values
while recording; Dropout draws afresh; an optimizer's update lands in the model."""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import enum
import ctypes
import functools
import gc
import math
import importlib.util
import re
import sys
import threading
import types
import warnings
import weakref
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tapekit as tk

from .conftest import host
from .op_specs import SPECS
from .test_fuzz_programs import outputs_under, programs

POLICY_NAMES = ["owned", "arc", "union", "global"]
TAPES = {"owned": tk.OwnedTape, "arc": tk.ArcTape, "union": tk.UnionTape}


def same(a, b) -> bool:
    """Bitwise equal arrays (and equal shapes and dtypes)."""
    a, b = host(a), host(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


def chain(x, w, tape):
    """A small program: mul, tanh, sum; the gradients of both inputs."""
    xt = x.trace(tape(leaves=[x, w]))
    h = xt * w
    h.name = "h"
    loss = h.tanh().sum()
    g = loss.backward()
    return loss, g[x], g[w]


# -- the basics -------------------------------------------------------------------------------------
def test_a_compiled_step_equals_the_eager_one_and_replays_without_tensors() -> None:
    dev = tk.Cpu(default_dtype="float64")
    step = tk.compile(lambda x, w: chain(x, w, tk.OwnedTape))
    w = dev.tensor([0.5, -1.0, 2.0], name="w")
    for values in ([1.0, 2.0, 3.0], [3.0, -2.0, 0.25], [0.0, 1.0, -1.0]):
        x = dev.tensor(values, name="x")
        got, want = step(x, w), chain(x, w, tk.OwnedTape)
        assert all(same(a, b) for a, b in zip(got, want))
    assert len(step.history) == 1 and step.history[0].calls == 2
    assert "1 program" in repr(step) and "the first call" in repr(step)


def test_the_source_is_readable_python_named_after_the_tensors() -> None:
    dev = tk.Cpu(default_dtype="float64")
    step = tk.compile(lambda x, w: chain(x, w, tk.OwnedTape))
    step(dev.tensor([1.0, 2.0], name="x"), dev.tensor([3.0, 4.0], name="w"))
    source = step.source
    compile(source, "<source>", "exec")  # noqa: S102  (it is Python)
    assert "h = x * w  # #" in source and "mul(x, w) -> h" in source
    assert "# forward" in source and "# backward" in source
    assert source.index("xp.tanh(h)") < source.index(": rule for h")  # forward first, then the rules
    assert len(source.splitlines()) < 40  # a 3-op program fits on one screen


def test_other_shapes_record_again_and_a_program_never_runs_on_the_wrong_shapes() -> None:
    dev = tk.Cpu(default_dtype="float64")
    step = tk.compile(lambda x, w: chain(x, w, tk.UnionTape))
    small = [dev.tensor([1.0, 2.0]), dev.tensor([3.0, 4.0])]
    big = [dev.tensor([1.0, 2.0, 3.0]), dev.tensor([3.0, 4.0, 5.0])]
    for x, w in (small, big, small, big):
        assert all(same(a, b) for a, b in zip(step(x, w), chain(x, w, tk.UnionTape)))
    assert len(step.history) == 2
    assert "argument x changed" in step.history[1].why and "(2,)" in step.history[1].why
    step(dev.tensor([1.0, 2.0], dtype="float32"), dev.tensor([3.0, 4.0], dtype="float32"))
    assert len(step.history) == 3 and "float32" in step.history[2].why
    assert "3 programs" in repr(step)


def test_a_different_policy_records_again() -> None:
    dev = tk.Cpu(default_dtype="float64")

    def f(x):
        return (x * 2.0).sum().backward()[x]

    step = tk.compile(f)
    x = dev.tensor([1.0, 2.0])
    step(x.trace(tk.OwnedTape()))
    step(x.trace(tk.UnionTape()))
    assert len(step.history) == 2 and "tape" in step.history[1].why


RATE = 0.5  # read by the step below as a global


def test_a_python_number_the_step_reads_by_name_records_again_when_it_changes() -> None:
    """A global or a closure's number is baked into the program as a constant, as an argument's is:
    a new value records a new program, never a replay with the old one."""
    global RATE
    dev = tk.Cpu(default_dtype="float64")
    factor = 3

    def f(x):
        return x * RATE * factor

    x = dev.tensor([1.0, 2.0])
    step = tk.compile(f)
    try:
        assert same(step(x), x * 1.5)
        RATE = 2.0
        assert same(step(x), x * 6.0)
        assert len(step.history) == 2 and step.history[1].why == "RATE changed: float 0.5 -> float 2.0"
        assert same(step(x), x * 6.0) and len(step.history) == 2  # the same value replays
    finally:
        RATE = 0.5
    factor = 3.0  # equal, but another type: a program may compute another dtype with it
    assert same(step(x), x * 1.5) and step.history[-1].why == "factor changed: int 3 -> float 3.0"


def _square_sum(a):
    return (a * a).sum()


def _triple_sum(a):
    return (a * 3.0).sum()


LOSS = _square_sum  # called by the step below through a global name


def test_a_function_the_step_calls_by_name_records_again_when_the_name_holds_another() -> None:
    """Binding a global to another function (a notebook cell run again, a loss swapped) replayed the
    first function's program: a wrong gradient, silently. A function, a class or a builtin the step
    reaches by name is keyed by identity; and the functions the new one calls are followed anew."""
    global LOSS
    dev = tk.Cpu(default_dtype="float64")
    weight = dev.tensor([0.5, 4.0])

    def scaled_sum(a):
        return (a * weight).sum()  # a tensor only this function reads: an input once it is called

    def step(x):
        x = x.trace(tk.OwnedTape(leaves=[x]))
        return LOSS(x).backward()[x]

    compiled = tk.compile(step)
    x = dev.tensor([1.0, 2.0])
    try:
        assert same(compiled(x), step(x))
        LOSS = _triple_sum
        assert same(compiled(x), step(x))
        assert len(compiled.history) == 2
        assert re.fullmatch(r"LOSS changed: function _square_sum at 0x[0-9a-f]+ -> function _triple_sum at "
                            r"0x[0-9a-f]+", compiled.history[1].why)
        LOSS = scaled_sum
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # weight is found as an input: no FrozenTensorWarning
            assert same(compiled(x), step(x))
        weight.data[...] = [7.0, 8.0]
        assert same(compiled(x), step(x))  # a replay reads weight as it is now
        LOSS = _triple_sum
        assert same(compiled(x), step(x)) and len(compiled.history) == 3  # replays the second program
    finally:
        LOSS = _square_sum


ACTIVATION, POLICY = np.tanh, tk.OwnedTape  # read by the step below as globals


def test_a_ufunc_or_a_class_the_step_reads_by_name_records_again_when_the_name_holds_another() -> None:
    global ACTIVATION, POLICY
    dev = tk.Cpu(default_dtype="float64")

    def step(x):
        x = x.trace(POLICY(leaves=[x]))
        return ACTIVATION((x * x).sum().backward()[x])

    compiled = tk.compile(step)
    x = dev.tensor([1.0, 2.0])
    try:
        assert same(compiled(x), np.tanh([2.0, 4.0]))
        ACTIVATION = np.sin
        assert same(compiled(x), np.sin([2.0, 4.0]))
        POLICY = tk.UnionTape
        assert same(compiled(x), np.sin([2.0, 4.0]))
        assert [re.sub("0x[0-9a-f]+", "0x", p.why) for p in compiled.history[1:]] == [
            "ACTIVATION changed: function tanh at 0x -> function sin at 0x",
            "POLICY changed: class OwnedTape at 0x -> class UnionTape at 0x"]
    finally:
        ACTIVATION, POLICY = np.tanh, tk.OwnedTape


class _Settings:
    """A namespace of settings: an object, or a class, that a step reads numbers from."""


def _settings_module(scale: float) -> types.ModuleType:
    module = types.ModuleType("settings")
    module.__file__ = "settings.py"  # the user's own module (a file of the project's, not a library's)
    module.scale = scale
    return module


def _nested(scale: float) -> _Settings:
    outer = _Settings()
    outer.inner = _Settings()
    outer.inner.scale = scale
    return outer


class _ClassSettings:
    scale = 0.5


def _tuple_case():
    weights = (0.5, 1.0)

    def change():
        nonlocal weights
        weights = (2.0, 1.0)
    return (lambda x: x * weights[0]), change


def _list_case():
    weights = [0.5, 1.0]
    return (lambda x: x * weights[0]), lambda: weights.__setitem__(0, 2.0)


def _long_list_case():
    data = [1.0] * 40  # data, not keyed item by item: its length is

    return (lambda x: x * (len(data) / 80)), lambda: data.extend([1.0] * 120)


@dataclasses.dataclass(slots=True)
class _SlottedConfig:
    scale: float = 0.5


def _slots_case():
    config = _SlottedConfig()
    return (lambda x: x * config.scale), lambda: setattr(config, "scale", 2.0)


class _Schedule:
    def __init__(self) -> None:
        self._base = 0.5

    @property
    def scale(self) -> float:  # computed from a private field
        return self._base


def _property_case():
    schedule = _Schedule()
    return (lambda x: x * schedule.scale), lambda: setattr(schedule, "_base", 2.0)


def _nested_case():
    hp = _nested(0.5)
    return (lambda x: x * hp.inner.scale), lambda: setattr(hp.inner, "scale", 2.0)


def _dict_case():
    config = {"opt": {"scale": 0.5}}
    return (lambda x: x * config["opt"]["scale"]), lambda: config["opt"].__setitem__("scale", 2.0)


def _class_case():
    return (lambda x: x * _ClassSettings.scale), lambda: setattr(_ClassSettings, "scale", 2.0)


def _module_case():
    settings = _settings_module(0.5)
    return (lambda x: x * settings.scale), lambda: setattr(settings, "scale", 2.0)


class _Scaled(tk.nn.Module):
    """A model that keeps its settings in an object of their own, as a config, and a list."""

    def __init__(self) -> None:
        self.config, self.scales = _nested(0.5), [0.5]

    def forward(self, x):
        return x * self.config.inner.scale * self.scales[0] * 2.0


def _module_config_case():
    model = _Scaled()
    return (lambda x: model(x)), lambda: setattr(model.config.inner, "scale", 2.0)


def _module_list_case():
    model = _Scaled()
    model.config.inner.scale = 1.0
    return (lambda x: model(x) * 0.5), lambda: model.scales.__setitem__(0, 2.0)


# where a step reads the number it multiplies by: (the step, how the number changes between calls)
NUMBER_HOLDERS = {"a tuple": _tuple_case, "a list, an item set": _list_case, "a long list's length": _long_list_case,
                  "an object's object's attribute": _nested_case, "a dict in a dict": _dict_case,
                  "a dataclass with slots": _slots_case, "a property": _property_case,
                  "a class attribute": _class_case, "a module of the user's": _module_case,
                  "a model's config object": _module_config_case, "a model's list": _module_list_case}


@pytest.mark.parametrize("holder", list(NUMBER_HOLDERS))
def test_a_number_the_step_reads_inside_what_it_names_records_again_when_it_changes(holder) -> None:
    """A number in a tuple or a short list, two attributes or keys deep, a class's attribute or a
    user's module's attribute was baked into the program and a replay kept the first value: a wrong
    result, silently. Each is keyed, as a global number is."""
    step, change = NUMBER_HOLDERS[holder]()
    compiled = tk.compile(step)
    x = tk.Cpu(default_dtype="float64").tensor([1.0, 2.0])
    assert same(compiled(x), x * 0.5)
    change()
    try:
        assert same(compiled(x), x * 2.0)
    finally:
        _ClassSettings.scale = 0.5
    assert len(compiled.history) == 2 and re.search(r"changed: .* -> .*(2\.0|160)", compiled.history[1].why)


MASK = np.array([1.0, 1.0])  # read by the step below as a global


def test_a_numpy_array_the_step_reads_by_name_records_again_when_the_name_holds_another():
    """Such an array is a constant of the program, copied as recorded: binding the name to another
    array records again; writing into it is not seen (the docstring of tk.compile says so)."""
    global MASK
    dev = tk.Cpu(default_dtype="float64")
    step = tk.compile(lambda x: x * MASK)
    x = dev.tensor([1.0, 2.0])
    try:
        assert same(step(x), x * 1.0)
        MASK = np.array([3.0, 3.0])
        assert same(step(x), x * 3.0)
        assert len(step.history) == 2
        assert re.fullmatch(r"MASK changed: array at 0x[0-9a-f]+ -> array at 0x[0-9a-f]+", step.history[1].why)
        MASK[:] = 5.0
        assert same(step(x), x * 3.0)  # the recorded copy, as documented
    finally:
        MASK = np.array([1.0, 1.0])


def test_operators_of_tracers_numbers_and_arrays_record_as_written_and_replay() -> None:
    """The operators' hot path (``Recorder.operation``) and what it hands to ``call``: a number on
    either side, a numpy scalar, an array made outside the step, an operator in place."""
    offset = np.array([0.5, -0.5, 1.5])

    def f(x, y):
        a = x.data
        b = (2.0 - a) * y.data + np.float64(3.0) * a - a ** 2
        b += offset
        b -= a
        return -abs(b) + np.tanh(a)

    step = tk.compile(f)
    dev = tk.Cpu(default_dtype="float64")
    for xs, ys in (([1.0, 2.0, 3.0], [0.5, 0.25, -1.0]), ([-1.0, 0.0, 4.0], [2.0, 3.0, 1.0])):
        x, y = dev.tensor(xs), dev.tensor(ys)
        assert same(step(x, y), f(x, y))
    assert len(step.history) == 1
    for line in ["= 2.0 - x", "* y", "= x ** 2", "+= ", "-= x", "= -", "= abs(", "np.tanh(x)"]:
        assert line in step.source, (line, step.source)
    assert "copy_of" not in step.source  # arithmetic makes new arrays: a sum written in place is no constant's view


# -- every policy, the partition and its warning -------------------------------------------------------
@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_every_policy_compiles_to_the_eager_gradients(policy) -> None:
    dev = tk.Cpu(default_dtype="float64")

    def f(x, y):  # the acceptance program P3/P5 shape: a DAG of two outputs, one backward over both
        with (tk.GlobalTape() if policy == "global" else contextlib.nullcontext()) as tape:
            a = x.trace(tape) if policy == "global" else x.trace(TAPES[policy]())
            b = y.trace(tape) if policy == "global" else y.trace(TAPES[policy]())
            b1, b2 = (b.retaped(), b.retaped()) if policy == "owned" else (b, b)  # an OwnedTape has one owner
            z = a.exp() * b + b1.sin()
            zz = (b2 * 2.0).tanh()
            outs = [z.sum(), zz.sum()]
            g = tape.backward(outs) if policy == "global" else tk.backward(outs)
        return g[x], g[y]

    step = tk.compile(f)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        x, y = dev.tensor(rng.uniform(-1, 1, 3)), dev.tensor(rng.uniform(-1, 1, 3))
        assert all(same(a, b) for a, b in zip(step(x, y), f(x, y)))
    assert len(step.history) == 1


def arc_pitfall(x, y):
    """P4 in the other order: zz is made first, then the merge moves its record into x's tape, and
    zz's backward misses y's gradient (the seed complaint)."""
    xt, yt = x.trace(tk.ArcTape()), y.trace(tk.ArcTape())
    zz = yt * 2.0
    xt + yt  # z: the merge moves zz's record into x's tape
    g = zz.sum().backward()
    return g


def plain(message) -> str:
    """A warning's text without the ids of the run's own tensors and tapes."""
    return re.sub(r"\bt\d+\b|\btape [A-Z]+\b", "_", str(message))


def test_a_partitioned_program_compiles_to_the_same_partial_gradients_and_warns_the_same_way() -> None:
    dev = tk.Cpu(default_dtype="float64")
    x, y = dev.tensor([1.0, 2.0]), dev.tensor([4.0, 5.0])
    with pytest.warns(tk.IncompleteTapeWarning) as eager_warnings:
        want = arc_pitfall(x, y)
    step = tk.compile(arc_pitfall)
    for _ in range(3):
        with pytest.warns(tk.IncompleteTapeWarning) as caught:
            got = step(x, y)
        assert [plain(w.message) for w in caught] == [plain(w.message) for w in eager_warnings]
        assert len(got) == len(want)  # its entries are of each run's own tensors (zz's)
        assert [same(a, b) for a, b in zip(got._arrays.values(), want._arrays.values())] == [True] * len(want)
        with pytest.raises(tk.MissingGradientError, match="lives on ArcTape"):
            got[y]
    assert step.history[0].calls == 2


# -- every op ---------------------------------------------------------------------------------------------
def op_step(spec, kwargs):
    def f(*tensors):
        traced = [t.trace(tk.UnionTape()) for t in tensors] if spec.grad else list(tensors)
        out = spec.fn(*traced, **kwargs)
        if not spec.grad:
            return out
        seed = out.device.tensor(np.linspace(-1.0, 1.0, out.size).reshape(out.shape), dtype=out.dtype)
        g = tk.backward([out], [seed])
        return out, [g.get(t) for t in tensors]
    return f


def outputs_equal(got, want) -> bool:
    if isinstance(want, tk.Tensor):
        return same(got, want)
    (out_g, grads_g), (out_w, grads_w) = got, want
    return same(out_g, out_w) and all((a is None and b is None) or same(a, b) for a, b in zip(grads_g, grads_w))


@pytest.mark.parametrize("kind", ["numpy", "strict"])
@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_op_compiled_equals_eager(kind, name) -> None:
    spec = SPECS[name]
    if kind == "strict" and not spec.strict:
        pytest.skip("not an array-API op")
    dev = tk.Cpu(backend=kind, default_dtype="float64")

    @settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors])
    @given(data=st.data())
    def check(data):
        drawn, kwargs = spec.draw(data)
        arrays = [np.asarray(a, dtype=float) for a in drawn]  # a drawn number: a 0-d argument of the step
        f = op_step(spec, kwargs)
        step = tk.compile(f)
        first = [dev.tensor(a, dtype="float64") for a in arrays]
        assert outputs_equal(step(*first), f(*first)), f"{name}: the recording call"
        rng = np.random.default_rng(7)
        second = [dev.tensor(a + rng.uniform(-0.01, 0.01, a.shape), dtype="float64") for a in arrays]
        assert outputs_equal(step(*second), f(*second)), f"{name}: a replay on new values"
        assert len(step.history) == 1

    check()


def twice_step(spec, kwargs):
    """The op applied twice to the same operands and its backward: a program whose parts repeat."""
    def f(*tensors):
        traced = [t.trace(tk.UnionTape()) for t in tensors]
        outs = [spec.fn(*traced, **kwargs), spec.fn(*traced, **kwargs)]
        seeds = [o.device.tensor(np.linspace(-1.0, 1.0, o.size).reshape(o.shape), dtype=o.dtype) for o in outs]
        g = tk.backward(outs, seeds)
        return outs, [g.get(t) for t in tensors]
    return f


@pytest.mark.parametrize("name", sorted(n for n, s in SPECS.items() if s.grad))
def test_every_op_compiled_in_parts_of_one_call_equals_eager(name, monkeypatch) -> None:
    """Every op's calls, each a part of its own: parts of one shape share their bytecode, so a shape
    must tell apart every argument that writes differently (an axis, a slice, 0.0 from -0.0)."""
    monkeypatch.setattr(importlib.import_module("tapekit.compile.source"), "PART", 1)
    spec = SPECS[name]
    dev = tk.Cpu(default_dtype="float64")

    @settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors])
    @given(data=st.data())
    def check(data):
        drawn, kwargs = spec.draw(data)
        arrays = [np.asarray(a, dtype=float) for a in drawn]
        f = twice_step(spec, kwargs)
        step = tk.compile(f)
        for shift in (0.0, 0.005):
            tensors = [dev.tensor(a + shift, dtype="float64") for a in arrays]
            (outs_g, grads_g), (outs_w, grads_w) = step(*tensors), f(*tensors)
            assert all(same(a, b) for a, b in zip(outs_g, outs_w)), f"{name}: outputs"
            assert all((a is None and b is None) or same(a, b) for a, b in zip(grads_g, grads_w)), f"{name}: gradients"
        assert "_part2(" in step.source

    check()


def test_parts_of_one_call_tell_apart_a_value_from_an_operand_and_0_from_minus_0(monkeypatch) -> None:
    """``x * x`` and ``x * 0`` (the part's first value, numbered 0, and the number 0), and ``x * 0.0``
    and ``x * -0.0`` (equal as numbers, written differently) are parts of different shapes."""
    monkeypatch.setattr(importlib.import_module("tapekit.compile.source"), "PART", 1)
    dev = tk.Cpu(default_dtype="float64")

    def f(x):  # the first part also holds the program's heading: the others are compared
        return [x + 1.0, x * x, x * 0, 1.0 / (x * 0.0), 1.0 / (x * -0.0)]

    step = tk.compile(f)
    for values in ([1.0, 2.0], [3.0, 0.5]):
        x = dev.tensor(values)
        got, want = step(x), f(x)
        assert all(same(a, b) for a, b in zip(got, want))
        assert [float(t.numpy()[0]) for t in got[3:]] == [np.inf, -np.inf]


# -- the fuzzed DAG programs --------------------------------------------------------------------------------
def fuzzed_gradients(dev, program, policy, preallocated):
    """The step of a fuzzed program: its leaves' gradients under ``policy``, every output seeded."""
    def f(*leaves):
        outs = outputs_under(policy, program, list(leaves), preallocated)
        seeds = [dev.tensor(np.linspace(-1, 1, o.size).reshape(o.shape)) for o in outs]
        grads = tk.backward(outs, seeds)
        return [grads[x] for x in leaves]

    return f


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.sampled_from(POLICY_NAMES), st.booleans())
def test_fuzzed_programs_compile_to_the_eager_gradients(program, policy, preallocated) -> None:
    dev = tk.Cpu(default_dtype="float64")
    f = fuzzed_gradients(dev, program, policy, preallocated)
    step = tk.compile(f)
    for shift in (0.0, 0.125):
        leaves = [dev.tensor(v + shift) for v in program.values]
        got, want = step(*leaves), f(*leaves)
        assert all(same(a, b) for a, b in zip(got, want)), repr(program)
    assert len(step.history) == 1


# -- training ---------------------------------------------------------------------------------------------
_spec = importlib.util.spec_from_file_location(
    "train_digits", Path(__file__).resolve().parents[1] / "examples" / "train_digits.py")
train_digits = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
if not hasattr(train_digits, "load_split"):
    _spec.loader.exec_module(train_digits)


def digits_losses(compiled: bool, optimizer, tagging: str, steps: int = 50):
    pytest.importorskip("sklearn")
    dev = tk.Cpu(seed=0)
    x_train, _, y_train, _ = train_digits.load_split(0)
    model = train_digits.make_model(dev)
    opt = optimizer(model, lr=1e-2)
    grads = model.alloc_grads()

    def step(x, y):
        model.zero_grads(grads)
        if tagging == "parameters":
            loss = tk.cross_entropy(model.trace(tk.UnionTape(grads))(x), y)
        else:
            loss = tk.cross_entropy(model(x.trace(tk.OwnedTape(grads))), y)
        loss.backward()
        opt.update(model, grads)
        return loss

    run_step = tk.compile(step) if compiled else step
    order = np.random.default_rng(0).permutation(len(x_train))
    losses = []
    for i in range(steps):
        idx = order[(i * 64) % 1280:(i * 64) % 1280 + 64]
        losses.append(run_step(dev.tensor(x_train[idx]), dev.tensor(y_train[idx])).item())
    return losses, model, run_step


@pytest.mark.parametrize("optimizer", [tk.optim.Sgd, tk.optim.Adam], ids=["Sgd", "Adam"])
@pytest.mark.parametrize("tagging", ["parameters", "input"])
def test_digits_training_gives_the_same_losses_step_by_step(optimizer, tagging) -> None:
    eager, eager_model, _ = digits_losses(False, optimizer, tagging)
    compiled, model, step = digits_losses(True, optimizer, tagging)
    assert compiled == eager  # bitwise, for 50 steps
    assert eager[-1] < eager[0]
    for p, q in zip(model.parameters(), eager_model.parameters()):  # the updates landed in the model
        assert same(p, q)
    # the first call records; so does the second where the buffers a backward filled no longer hold
    # zeros, but never because of the optimizer: its state exists before the first update
    assert sum(p.calls for p in step.history) >= 48
    assert not any("Adam" in p.why for p in step.history)


# -- random draws --------------------------------------------------------------------------------------------
def test_dropout_draws_a_fresh_mask_on_every_call() -> None:
    drop = tk.nn.Dropout(0.5)
    dev = tk.Cpu(seed=1)
    step = tk.compile(lambda x: drop(x))
    x = dev.ones((4000,))
    masks = [step(x).numpy() for _ in range(4)]
    for a, b in zip(masks, masks[1:]):
        assert not np.array_equal(a, b)
    for m in masks:
        assert set(np.unique(m)) == {0.0, 2.0}
        assert abs((m == 0).mean() - 0.5) < 0.05
    eager = tk.Cpu(seed=1)  # the same generator, drawn the same way: the very same masks
    x = eager.ones((4000,))
    assert all(np.array_equal(m, drop(x).numpy()) for m in masks)
    assert "rng.random" in step.source


def test_dropout_in_training_and_eval_mode_are_two_programs() -> None:
    dev = tk.Cpu(seed=0)
    model = tk.nn.Sequential(tk.nn.Linear(3, 4, device=dev), tk.nn.Dropout(0.5))
    step = tk.compile(lambda x: model(x))
    x = dev.ones((2, 3))
    step(x)
    model.eval()
    assert same(step(x), model(x))
    assert len(step.history) == 2 and "training" in step.history[1].why


def test_why_a_model_or_optimizer_recorded_again_names_the_setting() -> None:
    """A changed model or optimizer said why in raw key tuples (object ids and nested pairs, cut
    at 80 characters, so the setting that changed was often cut off). It names the setting, the
    module that holds it, and the values."""
    dev = tk.Cpu(seed=0)
    model = tk.nn.Sequential(tk.nn.Linear(3, 4, device=dev), tk.nn.Dropout(0.5))
    opt = tk.optim.Sgd(model, lr=0.1)

    def step(x):
        loss = model(x.trace(tk.OwnedTape(model.alloc_grads()))).sum()
        opt.update(model, loss.backward())
        return loss

    compiled = tk.compile(step)
    x = dev.ones((2, 3))
    compiled(x)
    model.eval()
    compiled(x)
    model.train()
    model[1].p = 0.25
    compiled(x)
    opt.lr = 0.05
    compiled(x)
    whys = [p.why for p in compiled.history[1:]]
    layers = tk.nn.Sequential(tk.nn.Linear(3, 3, device=dev), tk.nn.ReLU())
    other = tk.compile(lambda x, space: layers(x).sum())
    for change in (lambda: None, lambda: layers.layers.__setitem__(1, tk.nn.Tanh()),
                   lambda: layers.layers.append(tk.nn.Tanh()),
                   lambda: setattr(layers.layers[0], "out_features", np.int64(3))):
        change()
        other(x, np)
    other(x, math)  # a Python module as an argument: keyed by identity, as any object
    assert [p.why for p in other.history[1:]] == [
        "layers (a Sequential) changed: its module 2 is a Tanh, where it was a ReLU",
        "layers (a Sequential) changed: it holds 3 modules, where it held 2",
        "layers (a Sequential) changed: out_features int 3 -> int64 3 in its module 1 (a Linear)",
        f"argument space changed: module at {id(np):#x} -> module at {id(math):#x}"]
    assert whys == ["model (a Sequential) changed: training True -> False in it and its 2 modules",
                    "model (a Sequential) changed: training False -> True in it and its 2 modules; "
                    "p 0.5 -> 0.25 in its module 2 (a Dropout)",
                    "opt (a Sgd) changed: lr 0.1 -> 0.05"]


def test_a_step_that_records_again_and_again_warns_once() -> None:
    """A setting changed at every call (a learning rate set each step) recorded a program per call,
    each an eager run and a build, without a word. The eighth recording warns, naming why."""
    dev = tk.Cpu(seed=0)
    model = tk.nn.Linear(3, 1, device=dev)
    opt = tk.optim.Sgd(model, lr=0.1)

    def step(x):
        opt.update(model, model(x.trace(tk.OwnedTape(model.alloc_grads()))).sum().backward())

    compiled = tk.compile(step)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(10):
            opt.lr = 0.1 / (i + 1)
            compiled(dev.ones((2, 3)))
    found = [w for w in caught if w.category is tk.RecompileWarning]
    assert len(compiled.history) == 10 and len(found) == 1 and Path(found[0].filename).name == "test_compile.py"
    assert str(found[0].message).startswith(
        "step has recorded 8 programs, the last because of opt (a Sgd) changed: lr 0.014285714285714287 -> 0.0125. ")


@dataclasses.dataclass
class _Batch:
    x: tk.Tensor
    y: tk.Tensor
    weight: float = 1.0


def test_tensors_in_a_dataclass_argument_are_inputs() -> None:
    """A batch passed as a dataclass was keyed by the object's identity: every call recorded again,
    and each recording warned that its tensors were frozen. Its fields are walked as an argument's
    list or dict is: its tensors are inputs, its numbers part of the key."""
    dev = tk.Cpu(seed=0, default_dtype="float64")
    model = tk.nn.Linear(3, 1, device=dev)
    step = tk.compile(lambda b: tk.mse_loss(model(b.x), b.y) * b.weight)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for weight in (1.0, 1.0, 2.0, 2.0):
            batch = _Batch(dev.tensor(rng.standard_normal((4, 3))), dev.tensor(rng.standard_normal((4, 1))), weight)
            assert same(step(batch), tk.mse_loss(model(batch.x), batch.y) * weight)
    assert len(step.history) == 2 and step.history[1].why == "argument b.weight changed: float 1.0 -> float 2.0"


# -- what a recording refuses --------------------------------------------------------------------------------
@pytest.mark.parametrize("read", ["float", "item", "bool", "if"])
def test_reading_a_value_while_recording_names_the_line(read) -> None:
    dev = tk.Cpu()

    def f(x):
        y = (x * 2.0).sum()
        if read == "float":
            return float(y)
        if read == "item":
            return y.item()
        if read == "bool":
            return bool(y > 0)
        if y > 0:
            return y
        return -y

    with pytest.raises(tk.CompileError, match=r"test_compile\.py:\d+") as err:
        tk.compile(f)(dev.ones((3,)))
    assert isinstance(err.value, tk.TapekitError)
    assert "Move the read out of f" in str(err.value)


@pytest.mark.parametrize("read", ["asarray", "array", "tolist", "tobytes", "array2string", "array_repr"])
def test_numpy_reading_a_recorded_array_is_a_read_too(read) -> None:
    """numpy asks an object it converts for ``__array_interface__`` before ``__array__``: a tracer
    that answered it with its real array's would let numpy read the values unseen, frozen into the
    program (a replay of ``x * float(np.sum(np.asarray(x.data)))`` gave 6 where eager gives 12).
    Text made of the values (bytes, a printout) would be frozen the same way."""
    dev = tk.Cpu()

    def f(x):
        if read in ("asarray", "array", "tolist"):
            v = np.asarray(x.data) if read == "asarray" else np.array(x.data) if read == "array" else x.data.tolist()
            return x * float(np.sum(v))
        text = x.data.tobytes() if read == "tobytes" else getattr(np, read)(x.data)  # text made of the values
        return x * len(text)

    step = tk.compile(f)
    with pytest.raises(tk.CompileError, match=r"test_compile\.py:\d+"):
        step(dev.ones(3))


@pytest.mark.parametrize("read", ["flat", "data", "ctypes"])
def test_an_attribute_that_hands_out_the_values_is_a_read(read) -> None:
    """``x.data.flat`` (an iterator over the values), ``x.data.data`` (a memoryview of them) and
    ``x.data.ctypes`` (a pointer to them) are neither arrays nor facts about the array: handed to
    the function as they were, the recording's values would be frozen into the program (a replay of
    ``x * sum(x.data.flat)`` gave 6 where eager gives 12)."""
    dev = tk.Cpu()

    def f(x):
        if read == "flat":
            return x * float(sum(x.data.flat))
        if read == "data":
            return x * float(sum(x.data.data))
        pointer = x.data.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        return x * float(np.ctypeslib.as_array(pointer, shape=x.shape).sum())

    step = tk.compile(f)
    with pytest.raises(tk.CompileError, match=r"test_compile\.py:\d+"):
        step(dev.ones(3))


def test_a_call_that_returns_a_named_tuple_of_arrays_records_each() -> None:
    """numpy's linear algebra hands back named tuples (``slogdet``'s sign and logabsdet): recorded,
    each array is a step of its own, and the function gets the named tuple it would get eagerly."""
    dev = tk.Cpu(default_dtype="float64")

    def f(x):
        found = np.linalg.slogdet(x.data)
        return x * dev.tensor(found.logabsdet) + dev.tensor(found.sign)

    step = tk.compile(f)
    for scale in (2.0, 3.0):
        x = dev.tensor(np.eye(2) * scale)
        assert same(step(x), f(x))


def test_a_function_numpy_dispatches_is_called_where_it_lives() -> None:
    """A function that takes part in numpy's dispatch is written as numpy's path to it
    (``np.linalg.slogdet``, not ``np.slogdet``), and one numpy does not hold (another library's)
    as a global of the program."""
    from numpy._core.overrides import array_function_dispatch

    @array_function_dispatch(lambda a: (a,), module="otherlib")
    def double(a):
        return np.asarray(a) * 2

    dev = tk.Cpu(default_dtype="float64")

    def f(x):
        return dev.tensor(double(x.data)) * dev.tensor(np.linalg.det(x.data))

    step = tk.compile(f)
    for scale in (2.0, 3.0):
        x = dev.tensor(np.eye(2) * scale)
        assert same(step(x), f(x))
    assert "np.linalg.det(x)" in step.source and re.search(r"= double\d+\(x\)", step.source)


@pytest.mark.parametrize("key", ["index", "mask", "mask made in the step", "take_along_axis", "repeat counts"])
def test_an_op_that_computes_with_a_tensors_values_is_refused(key) -> None:
    """Indexing finds the positions an index tensor or a mask picks on the host: recorded, they
    were frozen at the first call's values (``x[i]`` replayed with another ``i`` gave 2 where eager
    gives 5). Such a read is refused, naming the line; a read that only checks (labels in range)
    is let through (``test_tapekits_own_checks_may_read_values``)."""
    dev = tk.Cpu(default_dtype="float64")
    calls = {"index": lambda x, i: x[i], "mask": lambda x, i: x[i > 0],
             "mask made in the step": lambda x, i: x[x > 1.5],
             "take_along_axis": lambda x, i: tk.take_along_axis(x, i, 0),
             "repeat counts": lambda x, i: tk.repeat(x, i, 0)}
    call = calls[key]
    step = tk.compile(lambda x, i: call(x, i).sum())
    with pytest.raises(tk.CompileError, match=r"reads the values of a tensor .*test_compile\.py:\d+"):
        step(dev.tensor([1.0, 2.0, 3.0]), dev.tensor(np.array([0, 0, 1])))


def test_an_array_argument_is_kept_while_its_program_is() -> None:
    """A numpy array argument is a constant of its program, keyed by identity: the program keeps
    it alive, so an array made later cannot take its id (and the program, with the first array's
    values frozen in it, replayed for the second gave 2 where eager gives 5)."""
    dev = tk.Cpu(default_dtype="float64")
    f = lambda x, i: x[i].sum()  # noqa: E731
    step = tk.compile(f)
    x = dev.tensor([1.0, 2.0, 3.0])
    first = step(x, np.array([0, 0]))
    second = step(x, np.array([2, 1]))  # freed, the first array's memory is the likeliest place for this one
    assert float(first) == 2.0 and float(second) == 5.0


def test_facts_about_a_recorded_array_are_not_reads() -> None:
    """What an array says about itself without its values (its strides, flags, base) stays static."""
    dev = tk.Cpu()

    def f(x):
        contiguous = x.data.flags["C_CONTIGUOUS"] and x.data.strides == (x.data.itemsize,)
        return x * (2.0 if contiguous else 3.0)

    step = tk.compile(f)
    assert same(step(dev.ones(3)), dev.ones(3) * 2.0)
    assert same(step(dev.ones(3) * 2.0), dev.ones(3) * 4.0)


def test_a_read_in_a_notebook_cell_names_the_cells_line() -> None:
    cell = compile("def f(x):\n    return float((x * 2.0).sum())\n", "/tmp/ipykernel_4102/3848855837.py", "exec")
    scope: dict = {}
    exec(cell, scope)
    with pytest.raises(tk.CompileError, match=r"records f\(\) at line 2 of a notebook cell\. ") as err:
        tk.compile(scope["f"])(tk.Cpu().ones((3,)))
    assert "ipykernel" not in str(err.value)


@pytest.mark.parametrize("loss", ["nll_loss", "cross_entropy"])
def test_labels_passed_as_a_tensor_are_read_afresh_by_each_replay(loss) -> None:
    """Integer labels become a one-hot mask on the device; ``nll_loss`` handed it to ``tk.where``,
    which took it to the host as data: the recorded program kept the first call's labels (a replay
    with labels [1, 1] gave the loss of [0, 2], 1.4067 where eager gives 0.8574)."""
    dev = tk.Cpu(default_dtype="float64")
    f = getattr(tk, loss)
    step = tk.compile(f)
    x = dev.tensor(np.log([[0.2, 0.3, 0.5], [0.1, 0.6, 0.3]]))
    for labels in ([0, 2], [1, 1], [2, 0]):
        target = dev.tensor(np.array(labels))
        assert same(step(x, target), f(x, target))
    assert len(step.history) == 1


@pytest.mark.parametrize("kind", ["tensor", "numpy"])
def test_an_embeddings_indices_are_read_afresh_by_each_replay(kind) -> None:
    """``nn.Embedding`` finds its rows' positions on the device from the indices, so a compiled
    step reads new indices on each call (they were taken to the host and frozen: with the op that
    now refuses such a read, no index of any kind compiled)."""
    dev = tk.Cpu(seed=0, default_dtype="float64")
    emb = tk.nn.Embedding(5, 2, device=dev, dtype="float64")

    def f(idx):
        out = emb.trace(tk.UnionTape())(idx)
        return out, (out * out).sum().backward()[emb.weight]

    step = tk.compile(f)
    for idx in ([0, 3], [4, 4], [2, 1]):
        idx = dev.tensor(np.array(idx)) if kind == "tensor" else np.array(idx)
        (out_c, grad_c), (out_e, grad_e) = step(idx), f(idx)
        assert same(out_c, out_e) and np.array_equal(grad_c, grad_e)


def test_a_seed_given_as_a_recorded_array_is_used_as_it_is() -> None:
    """``backward(seed=w.data)``: the seed is an array of the device, not data to read on the host
    (which raised a CompileError that told the user to pass a numpy array)."""
    dev = tk.Cpu(default_dtype="float64")

    def f(x, w):
        return (x.trace(tk.ArcTape(leaves=[x])) * 2.0).backward(seed=w.data)[x]

    step = tk.compile(f)
    x = dev.tensor([0.0, 0.0])
    for w in ([1.0, 3.0], [2.0, -1.0]):
        assert np.array_equal(step(x, dev.tensor(w)), f(x, dev.tensor(w)))


def test_a_float_argument_is_keyed_by_its_text() -> None:
    """0.0 and -0.0 are equal numbers that compute differently: each records its own program (the
    one for 0.0 was replayed for -0.0: inf where eager gives -inf); NaN, equal to nothing,
    replays its own instead of recording again."""
    dev = tk.Cpu(default_dtype="float64")
    f = lambda x, c: 1.0 / (x * c)  # noqa: E731
    step = tk.compile(f)
    x = dev.tensor([1.0, 2.0])
    for c in (0.0, -0.0, 0.0, float("nan"), float("nan")):
        assert same(step(x, c), f(x, c))
    assert len(step.history) == 3
    assert "argument c changed: float 0.0 -> float -0.0" in repr(step)


@pytest.mark.parametrize("zeros", [(np.float32(0.0), np.float32(-0.0), np.float32("nan")),
                                   ((1.0, 0.0), (1.0, -0.0), (1.0, float("nan")))], ids=["numpy scalar", "tuple"])
def test_a_numpy_scalar_or_a_tuple_of_floats_is_keyed_by_its_text(zeros) -> None:
    """As a float is: a numpy scalar or a tuple of floats, passed or a model's setting, with -0.0
    replayed the program of 0.0 (inf where eager gives -inf), and one with NaN recorded anew at
    every call."""
    dev = tk.Cpu(default_dtype="float64")
    model = tk.nn.Linear(2, 2, device=dev)
    x = dev.tensor([1.0, 2.0])

    def passed(x, c):
        return 1.0 / (x * float(np.asarray(c).ravel()[-1]))

    def held(x):
        return passed(x, model.c)

    by_argument, by_setting = tk.compile(passed), tk.compile(held)
    for c in (zeros[0], zeros[1], zeros[0], type(zeros[2])(zeros[2]), type(zeros[2])(zeros[2])):
        model.c = c
        assert same(by_argument(x, c), passed(x, c)) and same(by_setting(x), held(x))
    assert len(by_argument.history) == 3 and len(by_setting.history) == 3


def _linear_and_sgd():
    model = tk.nn.Linear(2, 1, device=tk.Cpu(seed=3, default_dtype="float64"))
    return model, tk.optim.Sgd(model, lr=0.1)


def _train(x, y, model, opt):
    loss = tk.mse_loss(model(x.trace(tk.OwnedTape(leaves=model.parameters()))), y)
    opt.update(model, loss.backward())
    return loss


@pytest.mark.parametrize("how", ["default arguments", "functools.partial"])
def test_a_model_bound_as_a_default_or_by_a_partial_is_an_input(how) -> None:
    """Its parameters were not inputs: the recording left tracers in them, and replays never
    trained it (losses 1.3454, 2.3474, 3.6265 where eager gives 1.3454, 1.1410, 0.3432)."""
    dev = tk.Cpu(default_dtype="float64")
    (eager_model, eager_opt), (model, opt) = _linear_and_sgd(), _linear_and_sgd()

    def with_defaults(x, y, model=model, opt=opt):
        return _train(x, y, model, opt)

    step = tk.compile(with_defaults if how == "default arguments" else functools.partial(_train, model=model, opt=opt))
    for i in range(3):
        x, y = dev.tensor([[1.0, float(i)]]), dev.tensor([[1.0]])
        assert same(step(x, y), _train(x, y, eager_model, eager_opt))
    assert type(model.weight.data) is np.ndarray and np.array_equal(model.weight.data, eager_model.weight.data)


def test_what_a_called_function_reaches_is_an_input() -> None:
    """A loss defined apart, which reads its own closure: its tensors are inputs, so writing into
    them between calls is seen."""
    dev = tk.Cpu(default_dtype="float64")
    scale = dev.tensor([2.0, 3.0])

    def loss(x):
        return (x * scale).sum()

    step = tk.compile(lambda x: loss(x))
    x = dev.tensor([1.0, 1.0])
    assert float(step(x)) == 5.0
    scale.data[...] = [10.0, 20.0]
    assert float(step(x)) == 30.0


def test_an_update_of_parameters_that_are_not_inputs_is_refused() -> None:
    """A model four containers deep is not found (a walk looks three deep): the recording's update
    would leave tracers in its parameters, and replays could not put new values back. The call
    fails, and the parameters are as they were."""
    dev = tk.Cpu(default_dtype="float64")
    model = tk.nn.Linear(2, 1, device=dev)
    before = model.weight.data
    held = {"a": {"b": {"c": {"model": model, "opt": tk.optim.Sgd(model, lr=0.1)}}}}

    def f(x, y):
        return _train(x, y, held["a"]["b"]["c"]["model"], held["a"]["b"]["c"]["opt"])

    with pytest.raises(tk.CompileError, match=r"updates 2 parameters .* did not find among its inputs"):
        tk.compile(f)(dev.tensor([[1.0, 2.0]]), dev.tensor([[1.0]]))
    assert model.weight.data is before


def test_a_refused_update_leaves_the_optimizers_state_as_it_was() -> None:
    """Adam's moments, written by the refused update, are put back: eager training goes on."""
    dev = tk.Cpu(default_dtype="float64")
    model = tk.nn.Linear(2, 1, device=dev)
    adam = tk.optim.Adam(model, lr=0.1)
    before = {k: v for _, kept in adam._state.values() for k, v in kept.items()}
    held = {"a": {"b": {"c": {"model": model, "opt": adam}}}}
    x, y = dev.tensor([[1.0, 2.0]]), dev.tensor([[1.0]])
    with pytest.raises(tk.CompileError):
        tk.compile(lambda x, y: _train(x, y, held["a"]["b"]["c"]["model"], held["a"]["b"]["c"]["opt"]))(x, y)
    after = {k: v for _, kept in adam._state.values() for k, v in kept.items()}
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)
    _train(x, y, model, adam)
    _train(x, y, model, adam)


def test_a_model_and_optimizer_made_in_the_step_train_as_eagerly() -> None:
    """A probe fitted afresh at every call: its parameters and optimizer are the step's own."""
    dev = tk.Cpu(default_dtype="float64")

    def fit_probe(x, y):
        model = tk.nn.Linear(2, 1, device=dev)
        model.weight.data, model.bias.data = model.weight.data * 0.0, model.bias.data * 0.0
        _train(x, y, model, tk.optim.Adam(model, lr=0.1))
        return model(x)

    step = tk.compile(fit_probe)
    for i in range(3):
        x, y = dev.tensor([[1.0, float(i)]]), dev.tensor([[2.0 + i]])
        assert same(step(x, y), fit_probe(x, y))
    assert len(step.history) == 1


def test_what_a_step_does_not_read_records_nothing_new() -> None:
    """A module's private counter, a dict's keys the step does not name, and a module's private
    constant tensor (a mask): one program, each call replays it."""
    dev = tk.Cpu(seed=0, default_dtype="float64")
    progress = {"scale": 2.0, "seen": 0}

    class Masked(tk.nn.Module):
        def __init__(self):
            self.lin, self._calls = tk.nn.Linear(3, 3, device=dev), 0
            self._mask = dev.tensor(np.tril(np.ones((3, 3))))

        def forward(self, x):
            self._calls += 1
            return self.lin(x) * self._mask

    model = Masked()

    def f(x):
        return model(x).sum() * progress["scale"]

    step = tk.compile(f)
    x = dev.randn((3, 3))
    for i in range(4):
        assert same(step(x), f(x))
        progress["seen"] += 8
    assert len(step.history) == 1


class _Bits(enum.IntFlag):  # _Bits(3) has no name of its own
    ONE = 1
    TWO = 2


class _Mode(enum.Enum):
    SUM = 1
    MEAN = 2


def _builtin_values_cases():
    """Values of Python's own types the key missed: (before, after, how the step uses them)."""
    return {"an Enum member": (_Mode.SUM, _Mode.MEAN, lambda v, x: x.sum() if v is _Mode.SUM else x.mean()),
            "a Flag's combination": (_Bits(3), _Bits(1), lambda v, x: x.sum() * float(v.value)),
            "a range": (range(2), range(1), lambda v, x: x[list(v)].sum()),
            "a slice": (slice(0, 2), slice(0, 1), lambda v, x: x[v].sum()),
            "a set": ({0, 1}, {0}, lambda v, x: x[sorted(v)].sum()),
            "a frozenset": (frozenset({0, 1}), frozenset({0}), lambda v, x: x[sorted(v)].sum())}


def test_a_function_a_model_holds_records_again_when_it_changes() -> None:
    """A model's activation as an attribute (``self.act = np.sin``, then ``np.cos``) was not part of
    its settings: the first one's program was replayed."""
    class Net(tk.nn.Module):
        def __init__(self) -> None:
            self.act = np.sin

        def forward(self, x):
            return self.act(x.data)

    net = Net()
    step = tk.compile(lambda x: net(x))
    x = tk.Cpu(default_dtype="float64").tensor([1.0, 2.0])
    assert same(step(x), np.sin([1.0, 2.0]))
    net.act = np.cos
    assert same(step(x), np.cos([1.0, 2.0])) and len(step.history) == 2
    assert re.fullmatch(r"net \(a Net\) changed: act function sin at 0x[0-9a-f]+ -> function cos at 0x[0-9a-f]+",
                        step.history[1].why)


def test_a_function_whose_code_is_replaced_records_again() -> None:
    """IPython's autoreload puts a module's edited code into the function it had (``__code__``):
    the function is the same object, and its first program was replayed."""
    def loss(x):
        return x.sum() * 2.0

    def edited(x):
        return x.sum() * 3.0

    step = tk.compile(lambda x: loss(x))
    x = tk.Cpu(default_dtype="float64").tensor([1.0, 2.0])
    assert step(x).item() == 6.0
    loss.__code__ = edited.__code__
    assert step(x).item() == 9.0 and len(step.history) == 2
    assert re.fullmatch(r"loss \(its code\) changed: code at 0x[0-9a-f]+ -> code at 0x[0-9a-f]+", step.history[1].why)


@pytest.mark.parametrize("case", list(_builtin_values_cases()))
def test_a_builtin_value_a_model_holds_records_again_when_it_changes(case) -> None:
    """As a setting of a model (``self.mode = Mode.SUM``): an Enum member's attributes are private
    and a range, a set or a slice was no setting, so each replayed the first one's program."""
    before, after, use = _builtin_values_cases()[case]

    class Holder(tk.nn.Module):
        def __init__(self) -> None:
            self.setting = before

        def forward(self, x):
            return use(self.setting, x)

    holder = Holder()
    step = tk.compile(lambda x: holder(x))
    x = tk.Cpu(default_dtype="float64").tensor([1.0, 2.0, 4.0])
    assert same(step(x), holder(x))
    holder.setting = after
    assert same(step(x), holder(x)) and len(step.history) == 2


def test_a_followed_function_whose_code_is_replaced_records_again() -> None:
    """Autoreload edits a model's forward in place too, and a helper the step's loss calls."""
    class Net(tk.nn.Module):
        def forward(self, x):
            return x.sum() * 2.0

    def edited(self, x):
        return x.sum() * 3.0

    net = Net()
    step = tk.compile(lambda x: net(x))
    x = tk.Cpu(default_dtype="float64").tensor([1.0, 2.0])
    assert step(x).item() == 6.0
    Net.forward.__code__ = edited.__code__
    assert step(x).item() == 9.0 and len(step.history) == 2


def test_a_partial_made_afresh_at_each_call_replays() -> None:
    """``step(functools.partial(loss, k=2.0), x)``: a new object at each call, keyed by its id, recorded
    a program per call; it is keyed by its function and walked arguments, so another k records again."""
    def loss(y, k):
        return (y * k).sum()

    step = tk.compile(lambda f, x: f(x))
    x = tk.Cpu(default_dtype="float64").tensor([1.0, 2.0])
    for _ in range(3):
        assert step(functools.partial(loss, k=2.0), x).item() == 6.0
    assert step(functools.partial(loss, k=3.0), x).item() == 9.0
    assert len(step.history) == 2 and len(step.reach.roots) == 1


def test_a_bound_method_passed_as_an_argument_replays() -> None:
    """``obj.method`` is a new object at each access: keyed by its id, every call recorded anew. Its
    object is walked as an argument: a model's parameters are inputs, not frozen constants."""
    dev = tk.Cpu(default_dtype="float64")
    model = tk.nn.Linear(2, 1, device=dev)
    step = tk.compile(lambda x, forward: forward(x).sum())
    x = dev.tensor([[1.0, 2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            assert same(step(x, model.forward), model(x).sum())
            model.weight.data += 1.0
    assert len(step.history) == 1


class _Stats:
    def __init__(self) -> None:
        self.calls = 0


class _Trainer:
    """A training loop's holder: the step reads its model and optimizer; the loop appends to its losses."""

    def __init__(self, dev: tk.Device) -> None:
        self.model = tk.nn.Linear(2, 1, device=dev)
        self.opt = tk.optim.Sgd(self.model, lr=0.1)
        self.losses: list[float] = []
        self.model.history, self.model.stats, self.model.meta = [], _Stats(), {"steps": 0}
        self.opt.log = {"step": 0}

    def step(self, x, y):
        loss = tk.mse_loss(self.model(x.trace(tk.OwnedTape(leaves=self.model.parameters()))), y)
        self.opt.update(self.model, loss.backward())
        return loss


def test_bookkeeping_the_step_does_not_read_records_nothing_new() -> None:
    """A list of losses on the step's owner, a model's public history, counters and dicts, an
    optimizer's log: the loop changes them at every call, the step's code reads none of them. Each
    recorded a program per call once lists' lengths and a model's nested settings were keyed."""
    dev = tk.Cpu(default_dtype="float64")
    trainer = _Trainer(dev)
    step = tk.compile(trainer.step)
    x, y = dev.tensor([[1.0, 2.0]]), dev.tensor([[1.0]])
    for _ in range(4):
        step(x, y)
        trainer.losses.append(1.0)
        trainer.model.history.append(1.0)
        trainer.model.stats.calls += 1
        trainer.model.meta["steps"] += 1
        trainer.opt.log["step"] += 1
    assert len(step.history) == 1


class _Weighted:
    def __init__(self) -> None:
        self.alpha = 2.0

    def _loss(self, x):
        return x * self.alpha

    def step(self, x):
        return self._loss(x) + 0.0


def test_an_attribute_a_method_of_the_steps_owner_reads_records_again_when_it_changes() -> None:
    """Only what the step's code names of its owner is keyed: also what the owner's other methods,
    which it calls, read (``self.alpha`` in ``_loss``)."""
    weighted = _Weighted()
    step = tk.compile(weighted.step)
    x = tk.Cpu(default_dtype="float64").tensor([1.0, 2.0])
    assert same(step(x), x * 2.0)
    weighted.alpha = 3.0
    assert same(step(x), x * 3.0) and len(step.history) == 2


class _Config:
    def __init__(self) -> None:
        self.scale = 2.0

    @property
    def effective(self):
        return self.scale * 1.0


def _times_scale(y, config):
    return y * config.scale


class _ByHelper(tk.nn.Module):
    def __init__(self) -> None:
        self.config = _Config()

    def forward(self, y):
        return _times_scale(y, self.config)


class _ByProperty(_ByHelper):
    def forward(self, y):
        return y * self.config.effective


class _ByGetattr(_ByHelper):
    def forward(self, y):
        return y * getattr(self.config, "scale")


class _OwnerByGetattr:
    def __init__(self) -> None:
        self.config = _Config()
        self.scale = 2.0

    def step(self, y):
        return y * getattr(self, "scale")


class _Coder:
    """An owner whose models the step picks by name: ``getattr(self, name)`` for names in a tuple."""

    def __init__(self, dev: tk.Device) -> None:
        self.enc, self.dec = tk.nn.Linear(2, 2, device=dev), tk.nn.Linear(2, 1, device=dev)

    def step(self, y):
        for name in ("enc", "dec"):
            y = getattr(self, name)(y)
        return y.sum()


def test_models_the_owner_names_in_strings_are_inputs() -> None:
    dev = tk.Cpu(default_dtype="float64")
    coder = _Coder(dev)
    step = tk.compile(coder.step)
    x = dev.tensor([[1.0, 2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # found: no FrozenTensorWarning
        assert same(step(x), coder.step(x))
    coder.enc.weight.data *= 2.0
    assert same(step(x), coder.step(x)) and len(step.history) == 1


@pytest.mark.parametrize("kind", [_ByHelper, _ByProperty, _ByGetattr, _OwnerByGetattr])
def test_a_setting_read_through_a_helper_a_property_or_getattr_records_again_when_it_changes(kind) -> None:
    """A model's config read by a helper outside its class, through a property, or with getattr and
    a string, and an owner's attribute read with getattr: each replayed the first value once only
    the names a model's class reads were keyed."""
    held = kind()
    step = tk.compile(held.step if kind is _OwnerByGetattr else lambda y: held(y))
    x = tk.Cpu(default_dtype="float64").tensor([1.0, 2.0])
    assert same(step(x), x * 2.0)
    held.config.scale = held.scale = 5.0
    assert same(step(x), x * 5.0) and len(step.history) == 2


GLOBAL_STEP = 0  # a loop's counter, read by a model's method the step never calls


class _Logged(tk.nn.Module):
    def __init__(self, dev: tk.Device) -> None:
        self.lin = tk.nn.Linear(2, 1, device=dev)
        self.sched, self.losses = None, []

    def forward(self, x):
        return self.lin(x)

    def maybe_log(self) -> None:  # never called in the step
        if GLOBAL_STEP % 100 == 0:
            self.losses.append(GLOBAL_STEP)

    def end_of_batch(self) -> None:  # names an attribute "step", as the loop's variable below is named
        self.sched.step()


class _Fitter:
    def __init__(self, dev: tk.Device) -> None:
        self.model = _Logged(dev)
        self.losses: list[float] = []
        self.compiled = tk.compile(self.train)

    def train(self, x):
        return self.model(x).sum()

    def fit(self, x, n):  # the loop: not called in the step, it reads what changes at every call
        for _ in range(n):
            self.losses.append(float(self.compiled(x)))


def test_methods_the_step_does_not_call_record_nothing_new() -> None:
    """A loop method of the step's owner that appends to ``self.losses``, a model's method that
    reads a global counter, a global loop variable named as an attribute a method calls: each
    recorded a program per call once every method of the owner and of the models was followed."""
    global GLOBAL_STEP
    dev = tk.Cpu(default_dtype="float64")
    fitter = _Fitter(dev)
    x = dev.tensor([[1.0, 2.0]])
    fitter.fit(x, 4)
    assert len(fitter.compiled.history) == 1
    model = _Logged(dev)
    compiled = tk.compile(lambda x: model(x).sum())
    try:
        for step in range(4):  # noqa: B007  (a global named as the attribute end_of_batch calls)
            globals()["step"] = step
            compiled(x)
            GLOBAL_STEP += 1
            model.maybe_log()
    finally:
        GLOBAL_STEP = 0
        globals().pop("step", None)
    assert len(compiled.history) == 1


def test_a_set_of_tensors_the_step_names_records_nothing_new() -> None:
    """A set was keyed by its items' text, and a tensor's text shows its values: a program per call."""
    dev = tk.Cpu(default_dtype="float64")
    model = tk.nn.Linear(2, 1, device=dev)
    frozen = {model.bias}
    step = tk.compile(lambda x: model(x).sum() * (1.0 if model.bias in frozen else 2.0))
    x = dev.tensor([[1.0, 2.0]])
    for _ in range(3):
        step(x)
        model.bias.data += 1.0
    assert len(step.history) == 1


def test_a_function_made_by_exec_is_keyed() -> None:
    """A function whose ``__module__`` is None (made by ``exec`` with bare globals) crashed the key."""
    space: dict = {}
    exec("def loss(y):\n    return (y * 2.0).sum()\n", space)
    loss = space["loss"]

    def with_default(y, loss=loss):
        return loss(y)

    x = tk.Cpu(default_dtype="float64").tensor([1.0, 2.0])
    for step in (lambda y: loss(y), with_default, loss):
        assert tk.compile(step)(x).item() == 6.0


class _AttrDict(dict):
    """The attribute-dict idiom: a missing attribute raises KeyError, not AttributeError."""

    __getattr__ = dict.__getitem__


def test_an_attribute_dict_the_step_reaches_is_keyed_by_its_items() -> None:
    """An attribute dict (``hasattr`` on it raises KeyError) crashed the key: read by name, in a dict,
    in a list, and held by a model."""
    dev = tk.Cpu(default_dtype="float64")
    configs = {"small": _AttrDict(scale=2.0), "large": _AttrDict(scale=3.0)}
    listed = [_AttrDict(scale=4.0)]
    hp = _AttrDict(scale=5.0)
    model = tk.nn.Linear(2, 1, device=dev)
    model.hparams = {"optim": _AttrDict(lr=0.1)}
    step = tk.compile(lambda x, size: model(x).sum() * configs[size]["scale"] * listed[0]["scale"] * hp["scale"])
    x = dev.tensor([[1.0, 2.0]])
    for size in ("small", "large"):
        assert same(step(x, size), model(x).sum() * configs[size]["scale"] * 20.0)
    hp["scale"] = 1.0
    assert same(step(x, "large"), model(x).sum() * 12.0)


class _NoDict:
    k = 2.0

    @property
    def __dict__(self):  # noqa: PLE0307  (an object that refuses to show its attributes)
        raise RuntimeError("no __dict__ here")


def test_an_object_whose_dict_raises_is_passed_by() -> None:
    """Following what the step's objects may call asked for their ``__dict__``: one that raises
    (a proxy, a lazy object) crashed the compiled step's first call."""
    held = _NoDict()
    step = tk.compile(lambda x: x * held.k)
    assert same(step(tk.Cpu(default_dtype="float64").tensor([1.0, 2.0])), np.array([2.0, 4.0]))


class _Abstract(abc.ABC):  # a class with a metaclass
    scale = 2.0


class _OtherAbstract(abc.ABC):
    scale = 3.0


@functools.lru_cache(maxsize=None)
def _cached_two() -> float:
    return 2.0


@functools.lru_cache(maxsize=None)
def _cached_three() -> float:
    return 3.0


def _callables_cases():
    """Callables the key missed: (before, after, how the step uses the one under its name)."""
    return {"numpy's np.mean and np.sum": (np.mean, np.sum, lambda f, x: f(x.data * 1.0)),
            "a class with a metaclass": (_Abstract, _OtherAbstract, lambda f, x: x.data * f.scale),
            "an lru_cache wrapper": (_cached_two, _cached_three, lambda f, x: x.data * f())}


def _swapped_cases():
    return {**_callables_cases(), **_builtin_values_cases()}


@pytest.mark.parametrize("case", list(_swapped_cases()))
def test_a_callable_or_a_builtin_value_the_step_reads_by_name_records_again_when_the_name_holds_another(case):
    before, after, use = _swapped_cases()[case]
    held = before

    def step(x):
        return use(held, x)

    compiled = tk.compile(step)
    x = tk.Cpu(default_dtype="float64").tensor([1.0, 2.0, 3.0])
    assert same(compiled(x), step(x))
    held = after
    assert same(compiled(x), step(x)) and len(compiled.history) == 2


SCALE = 2.0  # read by _scaled_loss, which the step below calls


def _scaled_loss(y):
    return (y * SCALE).sum()


class _StaticLoss:
    loss = staticmethod(_scaled_loss)


class _LossHolder:
    def __init__(self) -> None:
        self.loss_fn = _scaled_loss

    def step(self, x):
        return self.loss_fn(x)


class _GlobalScaled(tk.nn.Module):
    def forward(self, x):
        return x * SCALE


def _losses_module() -> types.ModuleType:
    module = types.ModuleType("losses")
    module.__file__ = "losses.py"  # the user's own module
    module.loss = _scaled_loss
    return module


def _reached_loss_cases():
    """Steps that reach ``_scaled_loss`` (or a module's forward that reads SCALE) other than by a global name."""
    partial = functools.partial(_scaled_loss)
    losses = _losses_module()
    model = _GlobalScaled()

    def with_default(x, loss=_scaled_loss):
        return loss(x)

    outer, called, by_key = _Outer(), _Outer(), {"scaled": _scaled_loss}
    return {"a default argument": with_default, "a functools.partial": lambda x: partial(x),
            "a class's static method": lambda x: _StaticLoss.loss(x), "a user module's function": lambda x: losses.loss(x),
            "a function on the step's owner": _LossHolder().step, "a model's forward": lambda x: model(x).sum(),
            "a submodule's forward": lambda x: outer(x), "the model compiled itself": called,
            "a dict of losses": lambda x: by_key["scaled"](x)}


class _Scaling(tk.nn.Module):
    def forward(self, x):
        return x * SCALE


class _Outer(tk.nn.Module):
    """A model whose submodule's forward reads the global."""

    def __init__(self) -> None:
        self.inner = _Scaling()

    def forward(self, x):
        return self.inner(x).sum()


@pytest.mark.parametrize("case", list(_reached_loss_cases()))
def test_a_number_a_function_reached_other_than_by_name_reads_records_again_when_it_changes(case) -> None:
    """A function the step reaches through a default, a partial, a class, a module, its owner, a
    model's or its submodule's forward, a model compiled itself, or a dict, was not followed: the
    global number it reads replayed its first value."""
    global SCALE
    step = tk.compile(_reached_loss_cases()[case])
    x = tk.Cpu(default_dtype="float64").tensor([1.0, 2.0])
    try:
        assert float(step(x)) == 6.0
        SCALE = 5.0
        assert float(step(x)) == 15.0 and len(step.history) == 2
    finally:
        SCALE = 2.0


def test_a_number_a_model_or_a_loss_passed_as_an_argument_reads_records_again_when_it_changes() -> None:
    """``step(model, x)`` and ``step(loss, x)``: arguments were walked for their tensors and settings,
    but what their code reads was not followed, so a global their forward or body reads replayed."""
    global SCALE
    dev = tk.Cpu(default_dtype="float64")
    x = dev.tensor([1.0, 2.0])
    model = _Scaling()
    by_model = tk.compile(lambda model, x: model(x).sum())
    by_loss = tk.compile(lambda loss, x: loss(x))
    try:
        assert float(by_model(model, x)) == 6.0 and float(by_loss(_scaled_loss, x)) == 6.0
        SCALE = 5.0
        for _ in range(2):  # records once, then replays
            assert float(by_model(model, x)) == 15.0 and float(by_loss(_scaled_loss, x)) == 15.0
        assert len(by_model.history) == 2 and len(by_loss.history) == 2
    finally:
        SCALE = 2.0


def test_a_number_a_function_the_step_calls_reads_by_name_records_again_when_it_changes() -> None:
    """A loss defined apart that reads a global coefficient replayed the first call's value: a
    wrong gradient, silently. Its numbers are keyed as the step's own are, and the reason names the
    function that reads it; a helper's counter so records a program per call, which
    ``tk.RecompileWarning`` names at the eighth."""
    global SCALE
    dev = tk.Cpu(default_dtype="float64")
    calls = 0

    def count():
        global_calls = calls  # noqa: F841  (read, as a logger's step counter is)

    def step(x):
        x = x.trace(tk.OwnedTape(leaves=[x]))
        return _scaled_loss(x).backward()[x]

    def counted(x):
        count()
        return x * 2.0

    compiled = tk.compile(step)
    x = dev.tensor([1.0, 2.0])
    try:
        assert same(compiled(x), np.array([2.0, 2.0]))
        SCALE = 5.0
        assert same(compiled(x), np.array([5.0, 5.0]))
        assert compiled.history[1].why == "SCALE (read by _scaled_loss) changed: float 2.0 -> float 5.0"
    finally:
        SCALE = 2.0
    logged = tk.compile(counted)
    with pytest.warns(tk.RecompileWarning, match=r"calls \(read by count\) changed: int 6 -> int 7"):
        for _ in range(8):
            assert same(logged(x), x * 2.0)
            calls += 1


def test_functions_installed_with_python_or_a_package_are_not_followed() -> None:
    """Following a library's functions (logging's, sklearn's) walked their globals at every call
    (2.5 to 4 times the time of a small replay) and keyed their settings; numpy, named by the step,
    was keyed as an array (it has shape and dtype)."""
    import logging

    def helper(x):
        return x * 2.0

    def f(x):
        logging.debug("step")
        return (helper(x) * np.float64(1.0)).sum()

    reach = importlib.import_module("tapekit.compile.inputs").Reach(f)
    assert [names for _, names, _ in reach.globals][1:] == [[]]  # f's, then helper's (which names nothing)
    step = tk.compile(f)
    step(tk.Cpu().ones(3))
    assert not any("array at" in str(k) for k in step.history[0].key)


def test_labels_of_another_array_library_are_taken_to_the_device() -> None:
    """An array-API array on numpy's device is data to convert, not a device array to use as is."""
    import array_api_strict as xs
    x = tk.Cpu(default_dtype="float64").tensor(np.arange(6.0).reshape(2, 3))
    assert float(tk.cross_entropy(x, xs.asarray([0, 2]))) == float(tk.cross_entropy(x, np.array([0, 2])))


def test_an_embedding_of_small_integer_indices_picks_the_right_rows() -> None:
    """Row positions are made in int64: a uint8 index times the row length wrapped around."""
    dev = tk.Cpu(seed=0)
    emb = tk.nn.Embedding(256, 64, device=dev)
    index = np.frombuffer(b"hello, world", dtype=np.uint8)
    assert np.array_equal(emb(index).numpy(), emb.weight.numpy()[index.astype(np.int64)])


@pytest.mark.parametrize("where", ["a traced argument", "an ambient GlobalTape"])
def test_a_result_whose_record_is_still_on_a_tape_is_refused(where) -> None:
    """A result for a backward after the call: its tape's records held tracers, and replays
    returned tensors with no tape (a traced argument's replay raised 'carries no tape')."""
    dev = tk.Cpu(default_dtype="float64")
    w = dev.tensor([1.0, 2.0, 3.0])
    step = tk.compile(lambda x: (x * w).sum())
    x = dev.tensor([1.0, 1.0, 1.0])
    with pytest.raises(tk.CompileError, match=r"returns t\d+, recorded on a tape made before the call"):
        if where == "a traced argument":
            step(x.trace(tk.UnionTape(leaves=[x])))
        else:
            with tk.GlobalTape():
                step(x)


def test_a_replays_missing_gradient_names_this_calls_tensors() -> None:
    """Why a gradient is missing is recorded once; a replay's message names its own argument
    (it named the recording's: ``b1 has no gradient`` for the tensor ``b2``)."""
    dev = tk.Cpu()

    def f(a, b):
        x, y = a.trace(tk.ArcTape()), b.trace(tk.ArcTape())
        zz = y * 2.0
        x + y  # noqa: B018  (absorbs y's tape: the backward on zz cannot see it)
        return zz.sum().backward()

    step = tk.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tk.IncompleteTapeWarning)
        step(dev.tensor([1., 2.], name="a1"), dev.tensor([3., 4.], name="b1"))
        b2 = dev.tensor([3., 4.], name="b2")
        grads = step(dev.tensor([1., 2.], name="a2"), b2)
    with pytest.raises(tk.MissingGradientError, match=r"^b2 has no gradient: the record `t\d+ = mul\(b2, const\)`"):
        grads[b2]


def test_settings_a_step_reads_from_a_dict_an_object_or_its_module_are_keyed() -> None:
    """A global dict's number, an attribute of a plain object, a module's number and its numpy
    array attribute: a new value records a new program (each was frozen: [2, 3] replayed where
    eager gives [10, 18] and [30, 57])."""
    dev = tk.Cpu(default_dtype="float64")
    config, settings = {"scale": 1.0}, types.SimpleNamespace(shift=0.0)

    class Scaled(tk.nn.Module):
        def __init__(self):
            self.mask, self.t = np.ones(2), 1.0

        def forward(self, x):
            return x * self.mask / self.t

    model = Scaled()

    def f(x):
        return model(x) * config["scale"] + settings.shift

    step = tk.compile(f)
    x = dev.tensor([1.0, 2.0])
    for v in (1.0, 2.0, 3.0, 3.0):
        config["scale"], settings.shift, model.t = v, v, 1.0 / v
        model.mask = model.mask if v == 3.0 else np.full(2, v)
        assert same(step(x), f(x))
    assert len(step.history) == 3


def test_training_again_after_eval_replays_the_first_program() -> None:
    """``train()`` after ``eval()`` sets the mode on the module itself, where it was the class's:
    the same mode, so the first program replays (it recorded a third)."""
    dev = tk.Cpu(default_dtype="float64")
    model = tk.nn.Sequential(tk.nn.Linear(2, 2, device=dev), tk.nn.Dropout(0.5))
    step = tk.compile(lambda x: model(x).sum())
    x = dev.tensor([[1.0, 2.0]])
    step(x)
    model.eval()
    step(x)
    model.train()
    step(x)
    assert len(step.history) == 2 and step.history[0].calls == 1


def test_a_result_on_a_tape_made_in_the_step_is_returned() -> None:
    """A metric computed after the backward, or a forward alone on a model traced in the step, is
    returned as it is: the tape is the step's own."""
    dev = tk.Cpu(seed=0, default_dtype="float64")
    model = tk.nn.Linear(4, 3, device=dev)

    def train(x):
        logits = model.trace(tk.UnionTape(model.alloc_grads()))(x)
        grads = tk.cross_entropy(logits, [0, 2, 1, 0]).backward()
        return grads, logits.max(axis=-1).mean()

    def forward_only(x):
        return model.trace(tk.UnionTape())(x).sum()

    for f in (train, forward_only):
        step = tk.compile(f)
        for seed in range(3):
            x = tk.Cpu(seed=seed, default_dtype="float64").randn((4, 4))
            got, want = step(x), f(x)
            assert same(got[1], want[1]) if f is train else same(got, want)
        assert len(step.history) == 1


def test_the_first_calls_result_carries_no_tape_as_a_replays() -> None:
    """A tensor the step returns on a tape made in the step: the first call returned it on that
    tape, whose records held tracers (a backward after the call said "while tk.compile records"),
    while a replay's carries none. Both now carry none, and a backward says so alike."""
    dev = tk.Cpu(default_dtype="float64")
    w = dev.tensor([1.0, 2.0])

    def step(x):
        xt = x.trace(tk.ArcTape())
        return (xt * w).sum(), xt

    compiled = tk.compile(step)
    for _ in range(2):
        loss, xt = compiled(dev.tensor([3.0, 4.0]))
        assert loss.tape is None and xt.tape is None and loss.item() == 11.0
        with pytest.raises(tk.BackwardError, match="carries no tape"):
            loss.backward()


_ema = None


def test_a_name_the_step_binds_to_a_tensor_it_made_is_refused() -> None:
    """``global ema; ema = ema * 0.5 + x``: the name held a tracer after the recording, and the
    next replay's error pointed at the generated program. The name gets its array, and the call is
    refused with what to do."""
    global _ema
    dev = tk.Cpu(default_dtype="float64")
    _ema = dev.tensor([0.0, 0.0])

    def step(x):
        global _ema
        _ema = _ema * 0.5 + x
        return _ema.sum()

    with pytest.raises(tk.CompileError, match=r"step binds _ema to t\d+, a tensor it made"):
        tk.compile(step)(dev.tensor([1.0, 2.0]))
    assert type(_ema.data) is np.ndarray and _ema.numpy().tolist() == [1.0, 2.0]


def test_a_module_attribute_forward_binds_to_a_tensor_it_made_is_refused() -> None:
    """A running mean set in ``forward`` (``self.running = self.running * 0.5 + x``) held a tracer
    after the recording: printing it, or the next replay, raised an error about reading values in
    the generated program. It gets its array back, and the call is refused with what to do."""
    dev = tk.Cpu(default_dtype="float64")

    class Norm(tk.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.running = dev.tensor([0.0, 0.0])

        def forward(self, x):
            self.running = self.running * 0.5 + x.detach()
            return x - self.running

    norm = Norm()

    def step(x):
        return norm(x).sum()

    with pytest.raises(tk.CompileError, match=r"step binds norm\.running to t\d+, a tensor it made"):
        tk.compile(step)(dev.tensor([2.0, 4.0]))
    assert type(norm.running.data) is np.ndarray and norm.running.numpy().tolist() == [2.0, 4.0]

    class Last(tk.nn.Module):  # a private attribute, and a list the step appends to
        def forward(self, x):
            self._last = x * 2
            return self._last

    last, history = Last(), []

    def private(x):
        return last(x).sum()

    def appended(x):
        history.append(x * 2)
        return x.sum()

    state = types.SimpleNamespace(ema=dev.tensor([0.0, 0.0]))

    def averaged(x):  # an attribute of a plain object the step names
        state.ema = state.ema * 0.5 + x
        return state.ema.sum()

    for step, name in ((private, r"last\._last"), (appended, r"history\[0\]"), (averaged, r"state\.ema")):
        with pytest.raises(tk.CompileError, match=rf"{step.__name__} binds {name} to t\d+, a tensor it made"):
            tk.compile(step)(dev.tensor([2.0, 4.0]))
    assert type(last._last.data) is np.ndarray and type(history[0].data) is np.ndarray
    assert type(state.ema.data) is np.ndarray


_noise = np.random.default_rng(0)


_rand = np.random.rand  # as ``from numpy.random import rand`` binds it


def test_a_draw_from_numpys_own_generators_is_refused() -> None:
    """A mask drawn with numpy's global functions or a numpy generator the step names was a
    constant of the program: every replay reused the first call's draw. The device's generator
    (``dev.rng``, ``nn.Dropout``) is recorded, and draws afresh."""
    dev = tk.Cpu(seed=0, default_dtype="float64")

    def global_draw(x):
        return (x * dev.tensor(np.random.rand(3) > 0.5)).sum()

    def named_draw(x):
        return (x * dev.tensor(_noise.random(3) > 0.5)).sum()

    def device_draw(x):
        return (x * dev.rand(3)).sum()

    class Masked(tk.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rng = np.random.default_rng(1)

        def forward(self, x):
            return x * dev.tensor(self.rng.random(3) > 0.5)

    masked = Masked()

    def module_draw(x):
        return masked(x).sum()

    def passed_draw(x, gen):
        return (x * dev.tensor(gen.random(3) > 0.5)).sum()

    def imported_draw(x):  # from numpy.random import rand: the global generator's method, under another name
        return (x * dev.tensor(_rand(3) > 0.5)).sum()

    uniform = np.random.default_rng(3).random

    def method_draw(x):
        return (x * dev.tensor(uniform(3) > 0.5)).sum()

    sampler = types.SimpleNamespace(rng=np.random.default_rng(4))
    normal = functools.partial(np.random.default_rng(5).normal, 0.0, 1.0)

    def held_draw(x):  # a generator a plain object holds
        return (x * sampler.rng.normal()).sum()

    def partial_draw(x):
        return (x * normal()).sum()

    for step, name in ((global_draw, r"numpy's global generator \(np\.random\.rand\) while tk\.compile records it "
                                     r"at .*test_compile\.py:\d+: `return \(x \* dev\.tensor\(np\.random\.rand"),
                       (named_draw, "_noise"), (module_draw, r"masked\.rng"), (passed_draw, "an argument"),
                       (imported_draw, r"_rand \(a RandomState's method\)"),
                       (method_draw, r"uniform \(a Generator's method\)"), (held_draw, r"sampler\.rng"),
                       (partial_draw, r"normal \(a Generator's method\)")):
        with pytest.raises(tk.CompileError, match=rf"{step.__name__} draws from {name}"):
            tk.compile(step)(dev.ones(3), *([np.random.default_rng(2)] if step is passed_draw else []))
    compiled = tk.compile(device_draw)
    draws = {compiled(dev.ones(3)).item() for _ in range(3)}
    assert len(draws) == 3 and len(compiled.history) == 1


def test_the_devices_own_generator_and_other_threads_draws_are_not_refused() -> None:
    """The device's generator kept under another name (``self.rng = dev.rng``) advanced with
    Dropout's recorded draws, and a draw from numpy's global functions in another thread changed
    the global state while a call recorded: both were refused as draws of the step."""
    dev = tk.Cpu(seed=0, default_dtype="float64")

    class Trainer:
        def __init__(self) -> None:
            self.rng = dev.rng  # for sampling batches, outside the step
            self.model = tk.nn.Sequential(tk.nn.Linear(3, 4, device=dev), tk.nn.Dropout(0.5))

        def step(self, x):
            worker = threading.Thread(target=np.random.rand, args=(3,))
            worker.start()
            worker.join()
            return self.model(x).sum()

    step = tk.compile(Trainer().step)
    assert len({step(dev.ones((8, 3))).item() for _ in range(3)}) == 3 and len(step.history) == 1

    def augmented(x, augment=False):  # names numpy's global draw (imported), in a branch not taken
        if augment:
            x = x + _rand(*x.shape)
        worker = threading.Thread(target=np.random.rand, args=(3,))
        worker.start()
        worker.join()
        return (x * 2.0).sum()

    assert tk.compile(augmented)(dev.ones(2)).item() == 4.0


def test_a_tensor_made_before_the_call_and_not_found_is_frozen_with_a_warning() -> None:
    """A tensor the step reaches where tk.compile does not look (four containers deep, a handle
    traced before the call) is a constant of the program: a replay used its first values, silently,
    after the caller changed them. The recording now warns, naming the tensor; a found one does not."""
    dev = tk.Cpu(default_dtype="float64")

    class Holder:
        deep = {"a": {"b": {"scale": dev.tensor([2.0, 2.0], name="scale")}}}

    def step(x):
        return (x * Holder.deep["a"]["b"]["scale"]).sum()

    with pytest.warns(tk.FrozenTensorWarning, match=r"step uses scale, a tensor made before the call") as caught:
        compiled = tk.compile(step)
        compiled(dev.ones(2))
    assert [Path(w.filename).name for w in caught] == ["test_compile.py"]  # the caller's line, not tapekit's
    Holder.deep["a"]["b"]["scale"].data[...] = 3.0  # the caller changes it: a replay keeps the first values, as warned
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once, when recorded: not again at each replay
        assert compiled(dev.ones(2)).item() == 4.0 and step(dev.ones(2)).item() == 6.0

    class Masked(tk.nn.Module):
        def __init__(self) -> None:
            self._masks = [dev.tensor([1.0, 0.0])]  # a module's own constants, in a list

        def forward(self, x):
            return x * self._masks[0]

    found, masked = dev.tensor([2.0, 2.0]), Masked()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tk.compile(lambda x: (x * found).sum())(dev.ones(2))
        tk.compile(lambda x: masked(x).sum())(dev.ones(2))
        by_class = tk.compile(lambda x: (x * Holder.scale).sum())  # a class's tensor: an input
        Holder.scale = dev.tensor([2.0, 2.0])
        assert by_class(dev.ones(2)).item() == 4.0
        Holder.scale.data[...] = 3.0
        assert by_class(dev.ones(2)).item() == 6.0


def test_tapekits_own_checks_may_read_values() -> None:
    dev = tk.Cpu()
    step = tk.compile(lambda x, y: tk.cross_entropy(x, y))  # checks the label range: a read, allowed
    x, y = dev.randn((4, 3)), dev.tensor(np.array([0, 2, 1, 1]))
    assert same(step(x, y), tk.cross_entropy(x, y))


def test_labels_out_of_range_are_refused_at_every_call() -> None:
    """The label check ran on the first call's labels only: a replay with a label past the classes
    gave a loss without that example's term (the one-hot row of zeros), where eager raises; so did
    Embedding's check of its indices. The check is now a line of the program, and a replay raises
    as eager does."""
    dev = tk.Cpu(default_dtype="float64")
    x = dev.randn((2, 3))
    for loss in (tk.cross_entropy, tk.nll_loss):
        step = tk.compile(lambda x, y: loss(x, y))
        assert same(step(x, dev.tensor(np.array([0, 2]))), loss(x, dev.tensor(np.array([0, 2]))))
        for bad in ([0, 3], [-1, 1]):
            with pytest.raises(tk.IndexingError, match=r"labels range from -?\d to \d, but the .* have 3 classes"):
                step(x, dev.tensor(np.array(bad)))
        assert len(step.history) == 1 and "refuse_out_of_range" in step.source
    embed = tk.nn.Embedding(3, 2, device=dev)
    step = tk.compile(lambda i: embed(i).sum())
    step(dev.tensor(np.array([0, 2])))
    for bad in ([0, 3], [-1, 1]):  # -1 picked a row's last value and the next row's first: a wrong sum
        with pytest.raises(tk.IndexingError, match=r"Embedding: indices range from -?\d to \d, but it has 3 rows"):
            step(dev.tensor(np.array(bad)))


# -- optimizers ------------------------------------------------------------------------------------------------
def test_a_compiled_update_lands_in_the_models_tensors() -> None:
    dev = tk.Cpu(seed=0, default_dtype="float64")
    c = tk.nn.Constant((2,), device=dev)
    opt = tk.optim.Sgd(c, lr=0.1)
    target = dev.tensor([3.0, -1.0])

    def step():
        opt.update(c, tk.mse_loss(c.trace(tk.UnionTape())(dev.tensor([0.0])), target).backward())

    compiled = tk.compile(step)
    for _ in range(200):
        compiled()
    assert np.allclose(c.value.numpy(), [3.0, -1.0])
    assert compiled.history[0].calls == 199


def test_strict_device_runs_only_the_array_api() -> None:
    dev = tk.Cpu(backend="strict", default_dtype="float64")
    model = tk.nn.Sequential(tk.nn.Linear(3, 4, device=dev), tk.nn.Tanh(), tk.nn.Linear(4, 2, device=dev))
    opt = tk.optim.Adam(model, lr=0.1)

    def step(x, y):
        loss = tk.mse_loss(model(x.trace(tk.OwnedTape(model.alloc_grads()))), y)
        opt.update(model, loss.backward())
        return loss

    eager_model = tk.nn.Sequential(tk.nn.Linear(3, 4, device=dev), tk.nn.Tanh(), tk.nn.Linear(4, 2, device=dev))
    for p, q in zip(eager_model.parameters(), model.parameters()):
        p.data = q.data
    eager_opt = tk.optim.Adam(eager_model, lr=0.1)
    compiled = tk.compile(step)
    x, y = dev.randn((5, 3)), dev.randn((5, 2))
    for _ in range(5):
        got = compiled(x, y)
        loss = tk.mse_loss(eager_model(x.trace(tk.OwnedTape(eager_model.alloc_grads()))), y)
        eager_opt.update(eager_model, loss.backward())
        assert same(got, loss)
    assert "xp.matmul" in compiled.source


def _chain(n: int):
    """A step of ``n`` ops (add, mul and tanh in turn) and its backward: a long program."""
    def f(x, w):
        h = x.trace(tk.OwnedTape(leaves=[x, w]))
        for i in range(n):
            h = h + w if i % 3 == 0 else h * w if i % 3 == 1 else h.tanh()
        g = h.sum().backward()
        return g[x], g[w]

    return f


def test_a_long_program_is_written_in_parts_and_still_equals_eager() -> None:
    dev = tk.Cpu(default_dtype="float64")
    f = _chain(400)
    step = tk.compile(f)
    for values in ([0.1, -0.2, 0.3], [0.5, 0.25, -0.75]):
        x, w = dev.tensor(values), dev.tensor([0.9, 1.1, -0.4])
        assert all(same(a, b) for a, b in zip(step(x, w), f(x, w)))
    assert "_part2(" in step.source and step.history[0].steps > 1000
    source = step.source  # written when asked for, from the parts' shapes: with its headings and comments
    assert "    # forward: the ops, in the order they ran" in source and "    # backward: the rules" in source
    assert re.search(r"\n    t\d+ = xp\.tanh\(t\d+\)  # #\d+ tanh\(t\d+\) -> t\d+\n", source)
    assert re.search(r"  # #\d+ mul\(t\d+, w\) -> t\d+: rule for w\n", source)


def test_a_long_program_compiles_each_shape_of_part_once_and_each_part_keeps_its_names_and_lines(monkeypatch) -> None:
    dev = tk.Cpu(default_dtype="float64")
    compiled_texts = []

    def counting_compile(text, *args):
        compiled_texts.append(text)
        return compile(text, *args)

    monkeypatch.setattr(sys.modules["tapekit.compile.parts"], "compile", counting_compile, raising=False)
    f = _chain(3000)
    step = tk.compile(f)
    x, w = dev.tensor([0.1, -0.2, 0.3]), dev.tensor([0.9, 1.1, -0.4])
    step(x, w)
    assert all(same(a, b) for a, b in zip(step(x, w), f(x, w)))
    space = step.history[0].run.__globals__
    parts = [fn for name, fn in space.items() if "_part" in name and callable(fn)]
    assert 1 < len(compiled_texts) < len(parts) / 2, (len(compiled_texts), len(parts))  # one compile a shape
    lines = step.source.splitlines()
    for p in parts:
        code = p.__code__
        head = lines[code.co_firstlineno - 1]
        assert head.startswith(f"def {p.__name__}(") and code.co_name == p.__name__
        assert list(code.co_varnames[:code.co_argcount]) == head[head.index("(") + 1:head.index(")")].split(", ")
        end = next(i for i in range(code.co_firstlineno, len(lines)) if lines[i].startswith("    return "))
        statements = {i + 1 for i in range(code.co_firstlineno, end + 1)
                      if lines[i].strip() and not lines[i].lstrip().startswith("#")}
        assert {line for _, _, line in code.co_lines() if line is not None} - {code.co_firstlineno} == statements
        assert set(code.co_varnames) >= {name for i in statements for name in re.findall(r"^\s*(\w+) = ", lines[i - 1])}


def test_big_intermediates_are_let_go_after_their_last_use() -> None:
    dev = tk.Cpu(default_dtype="float64")
    step = tk.compile(lambda x: ((x.trace() * 2.0).tanh() * 3.0).sum().backward()[x])
    x = dev.ones((100, 100))  # 80 kB arrays
    assert same(step(x), step(x))
    assert "\n    del " in step.source


def test_a_big_constant_array_is_read_by_every_replay_not_let_go() -> None:
    """A constant made outside the step is a global of the program: a ``del`` of it after its last
    use would make it a local that the replay reads before it has one (UnboundLocalError)."""
    dev = tk.Cpu(default_dtype="float64")
    scale = np.linspace(0.5, 1.5, 10_000).reshape(100, 100)  # 80 kB: big enough to be let go if it were a local

    def f(x):
        return ((x.trace() * scale).tanh() * 3.0).sum().backward()[x]

    step = tk.compile(f)
    x = dev.tensor(np.full((100, 100), 0.25))
    for _ in range(3):
        assert same(step(x), f(x))


def test_a_recording_is_let_go_when_its_call_returns_without_the_cyclic_collector(monkeypatch) -> None:
    """What a recording made (its steps, tracers and arrays: hundreds of MB for a long chain) is
    freed when the first call returns, by reference counts: a cycle through the recorder would keep
    it all until Python's cyclic collector next runs a full collection."""
    from tapekit.compile import recorder

    made = []
    real_init = recorder.Recorder.__init__

    def init(self, fn_name):
        real_init(self, fn_name)
        made.append(weakref.ref(self))

    monkeypatch.setattr(recorder.Recorder, "__init__", init)
    dev = tk.Cpu()
    scale = np.full(3, 0.5, dtype=np.float32)  # a constant: the recorder keeps a copy of it in a slot
    step = tk.compile(lambda x, w: ((x.trace(tk.OwnedTape(leaves=[x, w])) * w * scale).tanh()).sum().backward()[w])
    collecting = gc.isenabled()
    gc.disable()
    try:
        step(dev.ones(3), dev.ones(3))
        assert len(made) == 1 and made[0]() is None
    finally:
        if collecting:
            gc.enable()


# -- threads ----------------------------------------------------------------------------------------------------
def test_another_threads_eager_work_during_a_recording_is_neither_recorded_nor_changed() -> None:
    dev = tk.Cpu()
    x, w = dev.tensor([0.5, -1.0, 2.0], dtype="float64"), dev.tensor([1.5, 0.25, -0.5], dtype="float64")
    recording, done = threading.Event(), threading.Event()

    def step(x, w):
        recording.set()
        assert done.wait(10)  # the other thread runs its eager step while this one records
        return chain(x, w, tk.OwnedTape)

    def other() -> None:
        assert recording.wait(10)
        a, b = dev.tensor([1.0, 2.0], dtype="float64"), dev.tensor([3.0, 4.0], dtype="float64")
        got.append(chain(a, b, tk.UnionTape))
        done.set()

    got: list = []
    thread = threading.Thread(target=other)
    thread.start()
    compiled = tk.compile(step)
    first = compiled(x, w)
    thread.join()
    a, b = dev.tensor([1.0, 2.0], dtype="float64"), dev.tensor([3.0, 4.0], dtype="float64")
    assert all(same(g, e) for g, e in zip(got[0], chain(a, b, tk.UnionTape)))
    assert all(same(g, e) for g, e in zip(first, chain(x, w, tk.OwnedTape)))
    assert compiled.source.count("xp.tanh(") == 1  # the recording holds its own tanh only
    assert all(same(g, e) for g, e in zip(compiled(x, w), chain(x, w, tk.OwnedTape)))


def test_compiled_calls_in_several_threads_run_one_at_a_time_and_each_is_right() -> None:
    dev = tk.Cpu()
    steps = [tk.compile(lambda x, w: chain(x, w, tk.UnionTape)) for _ in range(4)]
    inputs = [(dev.tensor(np.linspace(-1, 1, 3) * k), dev.tensor(np.linspace(2, 3, 3) + k)) for k in range(4)]
    results: dict[int, list] = {}

    def run(k: int) -> None:
        results[k] = [steps[k](*inputs[k]) for _ in range(3)]  # a recording, then replays

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        eager = chain(*inputs[k], tk.UnionTape)
        assert all(same(g, e) for call in results[k] for g, e in zip(call, eager))
        assert len(steps[k].history) == 1 and steps[k].source.count("xp.tanh(") == 1


def test_a_compiled_step_called_inside_another_runs_within_its_recording() -> None:
    """As jax.jit inside jit: the inner step's calls become the outer program's own (the inner step
    replayed its program on the outer's tracers, and that program read them: a CompileError)."""
    dev = tk.Cpu(default_dtype="float64")

    @tk.compile
    def inner(x):
        return (x * x).sum()

    def eager(x):
        return inner.fn(x) * 2.0

    outer = tk.compile(lambda x: inner(x) * 2.0)
    inner(dev.tensor([5.0, 6.0]))  # inner has a program of its own for this kind of input
    for values in ([1.0, 2.0], [3.0, -1.0]):
        x = dev.tensor(values)
        np.testing.assert_array_equal(outer(x).numpy(), eager(x).numpy())
    assert len(outer.history) == 1 and outer.history[0].calls == 1 and len(inner.history) == 1
    assert "x * x" in outer.source.replace("_", "")


def test_a_refused_first_call_puts_back_what_it_changed() -> None:
    """A first call refused while it records (here: it reads a value after the update) leaves the
    model, the optimizer's state, a gradient buffer and an argument written in place as they were:
    it had taken an Adam step, and the retried step took a second."""
    dev = tk.Cpu(seed=0)
    model = tk.nn.Linear(3, 2, dev)
    opt = tk.optim.Adam(model, lr=0.1)
    buffer = model.alloc_grads()
    x = dev.tensor(np.ones((4, 3), dtype=np.float32))
    params = {n: p.data for n, p in model.named_parameters()}
    values = {n: p.numpy().copy() for n, p in model.named_parameters()}
    states = {pid: dict(state) for pid, (_, state) in opt._state.items()}
    entries = {tid: np.array(a) for tid, a in buffer.items()}

    def step(x, read):
        x.data += 1.0  # an argument written in place
        loss = (model(x.trace(tk.OwnedTape(buffer))) ** 2).mean()
        opt.update(model, loss.backward())
        return float(loss) if read else loss

    with pytest.raises(tk.CompileError):
        tk.compile(step)(x, True)
    for n, p in model.named_parameters():
        assert p.data is params[n] and np.array_equal(p.numpy(), values[n]), n
    assert {pid: dict(state) for pid, (_, state) in opt._state.items()} == states
    assert set(buffer) == entries.keys() and all(np.array_equal(buffer[t], a) for t, a in entries.items())
    assert np.array_equal(x.numpy(), np.ones((4, 3)))
    compiled = tk.compile(step)
    compiled(x, False)
    np.testing.assert_array_equal(x.numpy(), np.full((4, 3), 2.0))


def _object_argument():
    hp = types.SimpleNamespace(scale=2.0)
    step = tk.compile(lambda x, hp: (x * hp.scale).sum())
    return (lambda x: step(x, hp)), (lambda: setattr(hp, "scale", 3.0)), 3.0


def _inner_compiled_step():
    hp = types.SimpleNamespace(scale=2.0)
    inner = tk.compile(lambda x: x * hp.scale)
    return tk.compile(lambda x: inner(x).sum()), (lambda: setattr(hp, "scale", 3.0)), 3.0


def _class_attribute_of_a_module():
    class Scaled(tk.nn.Module):
        scale = 2.0

        def forward(self, x):
            return x * self.scale

    model = Scaled()
    return tk.compile(lambda x: model(x).sum()), (lambda: setattr(Scaled, "scale", 3.0)), 3.0


@pytest.mark.parametrize("make", [_object_argument, _inner_compiled_step, _class_attribute_of_a_module],
                         ids=["an object passed as an argument", "a compiled step called inside",
                              "a module's class attribute"])
def test_a_number_the_step_reads_through_records_again_when_it_changes(make) -> None:
    """Found by an audit: each replayed the first program, silently (6 for 9)."""
    x = tk.Cpu(default_dtype="float64").tensor([1.0, 2.0])
    step, change, scale = make()
    assert step(x).item() == 6.0
    change()
    assert step(x).item() == 3.0 * scale


def test_a_short_dict_the_step_iterates_is_keyed_by_its_values() -> None:
    """Loss weights read with .items() (no key named in the code): a new weight replayed the first
    program (6.5 for 14), silently. Found by an audit."""
    dev = tk.Cpu(default_dtype="float64")
    weights = {"mse": 1.0, "l1": 0.5}

    def f(x):
        return sum(w * ((x * x).sum() if k == "mse" else x.abs().sum()) for k, w in weights.items())

    step, x = tk.compile(f), dev.tensor([1.0, 2.0])
    assert step(x).item() == f(x).item() == 6.5
    weights["l1"] = 3.0
    assert step(x).item() == f(x).item() == 14.0
