"""``tk.jvp`` and ``tk.jacfwd``: forward mode, one pass per direction, recording nothing. Each op's
forward rule is checked by the op factory (test_op_factory.py); here, the transform itself."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tapekit as tk
from tapekit.ops.core import ELEMENTWISE, unary

from .conftest import host


def _mlp(x: tk.Tensor, w1: tk.Tensor, w2: tk.Tensor) -> tk.Tensor:
    return tk.softmax(tk.tanh(x @ w1) @ w2, axis=-1)


def test_jvp_of_a_composite_matches_central_differences(dev):
    rng = np.random.default_rng(0)
    x, w1, w2 = (rng.standard_normal(s) for s in [(4, 3), (3, 5), (5, 2)])
    v = [rng.standard_normal(a.shape) for a in (x, w1, w2)]
    primals = [dev.tensor(a, dtype="float64") for a in (x, w1, w2)]
    out, tangent = tk.jvp(_mlp, primals, v)

    def at(step):
        return host(_mlp(*[dev.tensor(a + step * d, dtype="float64") for a, d in zip((x, w1, w2), v)]))

    np.testing.assert_allclose(host(out), at(0.0))
    np.testing.assert_allclose(host(tangent), (at(1e-6) - at(-1e-6)) / 2e-6, rtol=1e-6, atol=1e-9)


def test_jvp_records_nothing_and_leaves_tapes_as_they_were(cpu):
    x = cpu.tensor([0.5, 1.5])
    tape = tk.UnionTape()
    held = cpu.tensor([1.0, 2.0]).trace(tape)
    (held * 2.0).sum()
    out, tangent = tk.jvp(lambda a: (a.exp() * 3.0).sum(), (x,), (np.ones(2),))
    assert out.tape is None and tangent.tape is None
    assert len(tape) == 2
    np.testing.assert_allclose(host(tangent), 3 * np.exp(0.5) + 3 * np.exp(1.5), rtol=1e-6)


def test_a_primal_given_twice_takes_two_tangents(cpu):
    x = cpu.tensor([2.0], dtype="float64")
    _, tangent = tk.jvp(lambda a, b: a * b, (x, x), ([1.0], [0.0]))
    np.testing.assert_allclose(host(tangent), [2.0])  # d(a b)/da = b, along a alone


def test_outputs_come_back_in_their_form_and_a_constant_output_has_zero_tangent(cpu):
    x = cpu.tensor([1.0, 2.0], dtype="float64")
    c = cpu.tensor([5.0], dtype="float64")
    outs, tangents = tk.jvp(lambda a: (a * a, c + 1.0), x, [1.0, 1.0])
    assert isinstance(outs, tuple) and isinstance(tangents, tuple)
    np.testing.assert_allclose(host(tangents[0]), [2.0, 4.0])
    np.testing.assert_allclose(host(tangents[1]), [0.0])
    outs, tangents = tk.jvp(lambda a: [a.sum()], (x,), (np.ones(2),))
    assert isinstance(tangents, list) and float(tangents[0].item()) == 2.0


def test_a_traced_handle_carries_its_tensors_tangent(cpu):
    x = cpu.tensor([0.3, 0.7], dtype="float64")
    _, tangent = tk.jvp(lambda a: (a.trace(tk.UnionTape()) * a).sum(), (x,), ([1.0, 1.0],))
    np.testing.assert_allclose(host(tangent), 2 * 0.3 + 2 * 0.7)


def test_detach_stops_the_tangent_as_it_stops_the_gradient(cpu):
    x = cpu.tensor([3.0], dtype="float64")
    _, tangent = tk.jvp(lambda a: a.detach() * a, (x,), ([1.0],))
    np.testing.assert_allclose(host(tangent), [3.0])


@pytest.mark.parametrize("f,why", [
    (lambda a: a.argmax(), "dtype int64"),
    (lambda a: a > 0, "dtype bool"),
    (lambda a: a.any(), "dtype bool"),
])
def test_an_output_without_tangent_is_refused(cpu, f, why):
    with pytest.raises(tk.DTypeError, match=why + ".*no tangent"):
        tk.jvp(f, cpu.tensor([1.0, -1.0]), [1.0, 1.0])


def test_floor_has_a_zero_tangent_as_it_has_a_zero_gradient(cpu):
    _, tangent = tk.jvp(tk.floor, cpu.tensor([1.5, -0.5]), [1.0, 1.0])
    np.testing.assert_array_equal(host(tangent), [0.0, 0.0])


def test_bad_calls_say_what_to_do(cpu):
    x = cpu.tensor([1.0, 2.0])
    with pytest.raises(tk.InvalidArgumentError, match="one tangent per primal"):
        tk.jvp(tk.exp, (x, x), ([1.0, 1.0],))
    with pytest.raises(tk.ShapeError, match="of its shape"):
        tk.jvp(tk.exp, (x,), ([1.0, 1.0, 1.0],))
    with pytest.raises(tk.DTypeError, match="float32"):
        tk.jvp(tk.neg, (cpu.tensor([1, 2], dtype="int64"),), ([1, 1],))
    with pytest.raises(tk.InvalidArgumentError, match="carries a tape"):
        tk.jvp(tk.exp, (x.trace(),), ([1.0, 1.0],))
    with pytest.raises(tk.InvalidArgumentError, match="pass tensors"):
        tk.jvp(tk.exp, ([1.0, 2.0],), ([1.0, 1.0],))
    with pytest.raises(tk.InvalidArgumentError, match="a tuple of tensors"):
        tk.jvp(tk.exp, (x,), np.ones(2))
    with pytest.raises(tk.InvalidArgumentError, match="returns? a tensor"):
        tk.jvp(lambda a: 3.0, (x,), ([1.0, 1.0],))
    with pytest.raises(tk.InvalidArgumentError, match="forward over forward"):
        tk.jvp(lambda a: tk.jvp(tk.exp, (a,), ([1.0, 1.0],))[1], (x,), ([1.0, 1.0],))


def test_after_a_failure_ops_carry_no_tangents(cpu):
    x = cpu.tensor([1.0])
    with pytest.raises(ZeroDivisionError):
        tk.jvp(lambda a: a * (1 / 0), (x,), ([1.0],))
    assert not tk.forward.on
    assert tk.forward._tangents.get() is None


def test_another_thread_carries_no_tangents_of_this_ones_jvp(cpu):
    x = cpu.tensor([1.0, 2.0])
    seen = []

    def inside(a):
        t = threading.Thread(target=lambda: seen.append(tk.forward._tangents.get()))
        t.start()
        t.join()
        return a * 2.0

    tk.jvp(inside, (x,), ([1.0, 1.0],))
    assert seen == [None]


def test_jacfwd_is_the_jacobian_by_columns(dev):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 4))
    x = rng.standard_normal(4)
    jac = tk.jacfwd(lambda t: tk.tanh(dev.tensor(a, dtype="float64") @ t), dev.tensor(x, dtype="float64"))
    want = (1 - np.tanh(a @ x) ** 2)[:, None] * a
    assert jac.shape == (3, 4) and jac.tape is None
    np.testing.assert_allclose(host(jac), want, rtol=1e-12)


def test_jacfwd_has_the_outputs_then_the_inputs_axes(cpu):
    x = cpu.tensor(np.arange(6.0).reshape(2, 3), dtype="float64")
    jac = tk.jacfwd(lambda t: t.sum(axis=0) * 2.0, x)
    assert jac.shape == (3, 2, 3)
    want = np.zeros((3, 2, 3))
    for j in range(3):
        want[j, :, j] = 2.0
    np.testing.assert_array_equal(host(jac), want)


def test_jvp_through_modules_and_a_loss(cpu):
    model = tk.nn.Sequential(tk.nn.Linear(4, 5, device=cpu, dtype="float64"), tk.nn.Tanh(),
                             tk.nn.LayerNorm(5, device=cpu, dtype="float64"), tk.nn.Linear(5, 3, device=cpu,
                                                                                          dtype="float64"))
    embed = tk.nn.Embedding(6, 4, device=cpu, dtype="float64")
    rows = embed(cpu.tensor(np.array([0, 3, 5]), dtype="int64"))
    labels = cpu.tensor(np.array([2, 0, 1]), dtype="int64")
    rng = np.random.default_rng(2)
    x, v = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))

    def loss(a):
        return tk.cross_entropy(model(a + rows), labels) + tk.mse_loss(a, cpu.tensor(np.zeros((3, 4))))

    _, tangent = tk.jvp(loss, cpu.tensor(x, dtype="float64"), v)
    at = [float(loss(cpu.tensor(x + s * v, dtype="float64")).item()) for s in (1e-6, -1e-6)]
    np.testing.assert_allclose(float(tangent.item()), (at[0] - at[1]) / 2e-6, rtol=1e-6)


def test_tk_compile_records_a_step_that_uses_jvp_bitwise_equal_to_eager(cpu):
    w = cpu.tensor(np.random.default_rng(3).standard_normal((3, 3)))

    def step(x, v):
        return tk.jvp(lambda t: tk.softmax(tk.tanh(w @ t), axis=-1).max() * 2.0, x, v)

    program = tk.compile(step)
    v = cpu.tensor([1.0, 0.0, -1.0])
    for values in ([0.1, 0.2, 0.3], [0.5, -0.2, 0.9]):
        x = cpu.tensor(values)
        (out, tangent), (want_out, want) = program(x, v), step(x, v)
        np.testing.assert_array_equal(host(tangent), host(want))
        np.testing.assert_array_equal(host(out), host(want_out))
        assert float(np.abs(host(want))) > 0


def test_an_op_of_your_own_without_a_forward_rule_says_how_to_give_it_one(cpu):
    @unary(lambda g, x: 3 * g * x * x)
    def cube(xp, x):
        """``x ** 3``; gradient ``3 x ** 2``."""
        return x * x * x, (x,)

    x = cpu.tensor([2.0])
    assert float(cube(x.trace()).backward()[x].item()) == 12.0
    with pytest.raises(tk.TapekitError, match="cube has no forward rule.*jvp="):
        tk.jvp(cube, x, [1.0])

    @unary(lambda g, x: 3 * g * x * x, ELEMENTWISE)
    def cube_with_rule(xp, x):
        """``x ** 3``; gradient ``3 x ** 2``."""
        return x * x * x, (x,)

    np.testing.assert_allclose(host(tk.jvp(cube_with_rule, x, [1.0])[1]), [12.0])
    assert "Forward rule (JVP): the tangent times the gradient" in cube_with_rule.__doc__


def test_a_tangent_may_be_an_array_of_the_devices_namespace(dev):
    x = dev.tensor([1.0, 2.0], dtype="float64")
    direction = dev.tensor([1.0, -1.0], dtype="float32").data  # the device's own array, float32
    _, tangent = tk.jvp(lambda a: a * a, x, direction)
    assert str(tangent.dtype).endswith("float64")
    np.testing.assert_allclose(host(tangent), [2.0, -4.0])


def test_jacfwd_refuses_what_it_cannot_take(cpu):
    x = cpu.tensor([1.0, 2.0])
    with pytest.raises(tk.InvalidArgumentError, match="f must return one tensor, got a tuple"):
        tk.jacfwd(lambda t: (t, t), x)
    with pytest.raises(tk.InvalidArgumentError, match="takes a tensor x"):
        tk.jacfwd(tk.exp, [1.0, 2.0])
    with pytest.raises(tk.InvalidArgumentError, match="forward over forward"):
        tk.jvp(lambda a: tk.jacfwd(tk.exp, a), x, [1.0, 1.0])
    with pytest.raises(tk.DTypeError, match="no tangent"):
        tk.jacfwd(lambda t: t > 0, x)
    assert not tk.forward.on


def test_a_plain_backward_of_an_output_with_a_tangent_inside_jvp_is_refused_and_changes_nothing(cpu):
    x = cpu.tensor([0.5, -1.0], dtype="float64")
    seen = {}

    def gradient_as_a_constant(a):
        u = a.trace(tk.UnionTape())
        y = (u * u).sum()
        seen["tape"] = u.tape
        return cpu.tensor(tk.backward(y)[u])  # its tangent would be lost: 0 instead of 2

    with pytest.raises(tk.BackwardError, match="inside tk.jvp.*create_graph=True"):
        tk.jvp(gradient_as_a_constant, (x,), ([1.0, 0.0],))
    assert len(seen["tape"]) == 2  # the refused backward drained nothing


def test_inside_jvp_a_recorded_backward_passes_tangents_and_a_backward_of_what_has_none_is_plain(cpu):
    x = cpu.tensor([0.5, -1.0], dtype="float64")
    w = cpu.tensor([3.0], dtype="float64")

    def f(a):
        u = a.trace(tk.UnionTape())
        g = tk.backward((u * u).sum(), create_graph=True)[u]
        v = w.trace(tk.UnionTape())
        assert float(tk.backward((v * v).sum())[v][0]) == 6.0  # no tangent reaches v: a plain backward
        return g

    _, tangent = tk.jvp(f, (x,), ([1.0, 0.0],))
    np.testing.assert_allclose(host(tangent), [2.0, 0.0])
