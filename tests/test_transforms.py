"""The function transforms against closed forms and central differences: ``tk.grad`` (nested),
``tk.vjp``, ``tk.jacobian`` both ways, ``tk.hessian`` and ``tk.hvp``, on every device; and their
errors, which name the fix."""

from __future__ import annotations

import numpy as np
import pytest

import tapekit as tk

from .conftest import exp2_by_hand, host

RNG = np.random.default_rng(7)
A = RNG.standard_normal((4, 4))
W = RNG.standard_normal((3, 4))
X = np.array([0.3, -0.8, 1.1, 0.5])


def central(f, x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """The Jacobian of ``f`` (arrays to arrays) at ``x`` by central differences, of shape f(x).shape + x.shape."""
    cols = []
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = eps
        cols.append((f(x + e.reshape(x.shape)) - f(x - e.reshape(x.shape))) / (2 * eps))
    return np.moveaxis(np.array(cols), 0, -1).reshape(np.shape(f(x)) + x.shape)


def test_grad_of_grad_of_grad_is_the_third_derivative(dev):
    x = dev.tensor(0.7, dtype="float64")

    def f(t):
        return t.sin() * t

    assert np.isclose(host(tk.grad(f)(x)), np.cos(0.7) * 0.7 + np.sin(0.7))
    assert np.isclose(host(tk.grad(tk.grad(f))(x)), 2 * np.cos(0.7) - 0.7 * np.sin(0.7))
    assert np.isclose(host(tk.grad(tk.grad(tk.grad(f)))(x)), -3 * np.sin(0.7) - 0.7 * np.cos(0.7))
    assert tk.grad(tk.grad(f))(x).tape is None, "the outermost transform's result carries no tape"


def test_grad_takes_argnums_and_gives_zeros_for_an_unused_input(dev):
    x, y = dev.tensor(X, dtype="float64"), dev.tensor(X[::-1].copy(), dtype="float64")
    gx, gy = tk.grad(lambda a, b: (a * b).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(host(gx), X[::-1])
    np.testing.assert_allclose(host(gy), X)
    np.testing.assert_allclose(host(tk.grad(lambda a, b: (b * 2.0).sum())(x, y)), np.zeros(4))


def test_one_tensor_given_for_two_arguments_gets_each_partial_derivative(dev):
    """f(x, y) = sum(x y y) at (x, x): df/dx = y^2 and df/dy = 2 x y, as for two tensors of the same
    values, from tk.grad, tk.vjp and, nested, under an outer tk.grad (d/dt of t^2 + 2 t^2: 6 t)."""
    def f(a, b):
        return (a * b * b).sum()

    x = dev.tensor([0.7], dtype="float64")
    gx, gy = tk.grad(f, argnums=(0, 1))(x, x)
    np.testing.assert_allclose([host(gx)[0], host(gy)[0]], [0.49, 0.98])
    vx, vy = tk.vjp(f, x, x)[1](1.0)
    np.testing.assert_allclose([host(vx)[0], host(vy)[0]], [0.49, 0.98])
    outer = tk.grad(lambda t: sum(g.sum() for g in tk.grad(f, argnums=(0, 1))(t, t)))(x)
    np.testing.assert_allclose(host(outer), [6 * 0.7])


def test_a_nested_transform_treats_what_was_computed_outside_it_as_a_constant(dev):
    """Inside tk.grad over x, tk.grad(y -> sum(y c))(x) with c = x * x closed over is c (its
    gradient in y alone), so the outer gradient of its sum is 2x, not 6x; and tk.hvp(f, x, 2x) of a
    traced x is H (2x) = 12 x^2 for f = sum(x^3), whose gradient in x is 24 x."""
    x0 = np.array([0.7, -0.4])

    def outer(x):
        c = x * x
        return tk.grad(lambda y: (y * c).sum())(x).sum()

    np.testing.assert_allclose(host(tk.grad(outer)(dev.tensor(x0, dtype="float64"))), 2 * x0)
    traced = dev.tensor(x0, dtype="float64").trace(tk.UnionTape())
    c = traced * traced
    np.testing.assert_allclose(host(tk.grad(lambda y: (y * c).sum())(traced)), x0 ** 2)

    def cubes(y):
        return (y ** 3).sum()

    traced = dev.tensor(x0, dtype="float64").trace(tk.UnionTape())
    np.testing.assert_allclose(host(tk.hvp(cubes, traced, traced * 2.0)), 12 * x0 ** 2)
    np.testing.assert_allclose(host(tk.grad(lambda x: tk.hvp(cubes, x, x * 2.0).sum())(dev.tensor(x0, dtype="float64"))),
                               24 * x0)


def test_a_transform_over_x_inside_one_over_w_keeps_the_dependence_on_w(dev):
    """f = sum((x w)^3): d/dw of sum(grad_x f) is 9 x^2 w^2 summed, of sum(H_x f 1) and of sum(H_x f)
    18 x w^2 summed; and a gradient penalty on a parameter traced by hand reaches the parameter."""
    x0, w0 = np.array([0.7, -0.4]), 1.3

    def f(x, w):
        return ((x * w) ** 3).sum()

    def x_of():
        return dev.tensor(x0, dtype="float64")

    inner = {"grad": lambda w: tk.grad(lambda x: f(x, w))(x_of()).sum(),
             "hvp": lambda w: tk.hvp(lambda x: f(x, w), x_of(), dev.tensor(np.ones(2), dtype="float64")).sum(),
             "hessian": lambda w: tk.hessian(lambda x: f(x, w), x_of()).sum()}
    want = {"grad": np.sum(9 * x0 ** 2 * w0 ** 2), "hvp": np.sum(18 * x0 * w0 ** 2), "hessian": np.sum(18 * x0 * w0 ** 2)}
    for name, g in inner.items():
        assert np.isclose(host(tk.grad(g)(dev.tensor(w0, dtype="float64"))), want[name]), name
    w = dev.tensor([1.3, 0.2], dtype="float64")
    wt = w.trace(tk.UnionTape())
    gx = tk.grad(lambda x: (x * wt).tanh().sum())(x_of())
    loss = (wt * wt).sum() + (gx * gx).sum()
    t = np.tanh(x0 * host(w))
    s = 1 - t ** 2
    np.testing.assert_allclose(host(loss.backward()[w]), 2 * host(w) + 2 * host(w) * s * (s - 2 * host(w) * t * s * x0))


def test_jvp_of_a_function_of_a_tensor_traced_outside_is_refused_not_a_silent_zero(dev):
    """Tangents are computed on arrays and carry no dependence on a tensor traced outside f, so
    tk.grad over w of tk.jvp's tangent of x -> sum((x w)^3) would be 0 (it is 9 x^2 w^2 v): refused,
    as is jacfwd; with w's values (detach) the tangent itself is given."""
    x0, v0 = dev.tensor([0.7, -0.4], dtype="float64"), dev.tensor([1.0, 0.0], dtype="float64")

    def tangent(w):
        return tk.jvp(lambda x: ((x * w) ** 3).sum(), (x0,), (v0,))[1]

    with pytest.raises(tk.SecondOrderError, match="traced outside it"):
        tk.grad(tangent)(dev.tensor(1.3, dtype="float64"))
    w = dev.tensor(1.3, dtype="float64").trace(tk.UnionTape())
    with pytest.raises(tk.SecondOrderError, match="traced outside it"):
        tk.jacobian(lambda x: (x * w) ** 3, x0, mode="fwd")
    assert np.isclose(host(tangent(w.detach())), 3 * 0.7 ** 2 * 1.3 ** 3)


def test_x_transpose_a_x_has_hessian_a_plus_a_transpose(dev):
    a = dev.tensor(A, dtype="float64")
    h = tk.hessian(lambda x: x @ (a @ x), dev.tensor(X, dtype="float64"))
    np.testing.assert_allclose(host(h), A + A.T, atol=1e-12)


def test_a_tanh_chain_against_its_closed_form(dev):
    w = dev.tensor(W, dtype="float64")
    x = dev.tensor(X, dtype="float64")
    t = np.tanh(W @ X)
    np.testing.assert_allclose(host(tk.jacobian(lambda x: (w @ x).tanh(), x)), (1 - t * t)[:, None] * W)
    np.testing.assert_allclose(host(tk.jacobian(lambda x: (w @ x).tanh(), x, mode="fwd")), (1 - t * t)[:, None] * W)
    want = W.T @ np.diag(-2 * t * (1 - t * t)) @ W  # d² sum(tanh(W x)) / dx²
    np.testing.assert_allclose(host(tk.hessian(lambda x: (w @ x).tanh().sum(), x)), want, atol=1e-12)


def test_softmax_cross_entropy_has_hessian_diag_p_minus_p_p_transpose(dev):
    z = dev.tensor(X, dtype="float64")
    p = np.exp(X) / np.exp(X).sum()
    for loss in (lambda z: tk.cross_entropy(z.reshape(1, 4), np.array([2])),
                 lambda z: -z.log_softmax()[2]):
        np.testing.assert_allclose(host(tk.hessian(loss, z)), np.diag(p) - np.outer(p, p), atol=1e-12)


def test_the_mlp_loss_hessian_against_central_differences_of_its_gradient():
    dev = tk.Cpu(seed=0)
    first, second = tk.nn.Linear(3, 4, device=dev, dtype="float64"), tk.nn.Linear(4, 2, device=dev, dtype="float64")
    inputs = dev.tensor(RNG.standard_normal((5, 3)), dtype="float64")
    labels = np.array([0, 1, 1, 0, 1])

    def loss_of(flat: tk.Tensor) -> tk.Tensor:  # the loss as a function of the first layer's weight
        hidden = (inputs @ flat.reshape(3, 4) + first.bias).tanh()
        return tk.cross_entropy(second(hidden), labels)

    def gradient(values: np.ndarray) -> np.ndarray:
        return host(tk.grad(loss_of)(dev.tensor(values, dtype="float64")))

    flat = first.weight.numpy().reshape(-1)
    hess = host(tk.hessian(loss_of, dev.tensor(flat, dtype="float64")))
    np.testing.assert_allclose(hess, central(gradient, flat), atol=1e-7)
    np.testing.assert_allclose(hess, hess.T, atol=1e-12)
    np.testing.assert_allclose(host(tk.jacobian(tk.grad(loss_of), dev.tensor(flat, dtype="float64"))), hess,
                               atol=1e-12)


def test_hvp_is_the_hessian_times_v_forward_over_reverse_and_inside_grad(dev):
    a = dev.tensor(A, dtype="float64")
    x, v = dev.tensor(X, dtype="float64"), dev.tensor(X[::-1].copy(), dtype="float64")

    def f(x):
        return (a @ x).sin().sum() + (x * x * x).sum()

    h = host(tk.hessian(f, x))
    np.testing.assert_allclose(host(tk.hvp(f, x, v)), h @ X[::-1], atol=1e-12)
    # inside another transform the gradient of hvp . 1 is the third derivative contracted with v
    third = tk.grad(lambda y: tk.hvp(f, y, v).sum())(x)
    np.testing.assert_allclose(host(third), central(lambda p: host(tk.hessian(f, dev.tensor(p, dtype="float64")))
                                                    @ X[::-1], X).sum(axis=0), atol=1e-6)


def test_vjp_gives_u_transpose_j_for_many_u(dev):
    w = dev.tensor(W, dtype="float64")
    out, pull = tk.vjp(lambda x, y: (w @ x).tanh() * y, dev.tensor(X, dtype="float64"),
                       dev.tensor([1.0, 2.0, 3.0], dtype="float64"))
    t = np.tanh(W @ X)
    np.testing.assert_allclose(host(out), t * [1, 2, 3])
    assert out.tape is None
    for u in np.eye(3):
        gx, gy = pull(dev.tensor(u, dtype="float64"))
        np.testing.assert_allclose(host(gx), u @ (((1 - t * t) * [1, 2, 3])[:, None] * W))
        np.testing.assert_allclose(host(gy), u * t)


@pytest.mark.parametrize("key", [[0, 0, 3], slice(1, 3), (np.array([True, False, True, True]),)],
                         ids=["integers", "slice", "mask"])
def test_third_and_fourth_derivatives_flow_through_indexing(dev, key):
    """The rule of an index is a scatter, recorded whole with its transpose (a gather) as its own
    rule; a third derivative runs that transpose on tensors, and a fourth its transpose again."""
    x = dev.tensor(X, dtype="float64")
    picks = np.bincount(np.arange(4)[key], minlength=4)  # how often each value is picked

    def f(t):
        return (t[key] ** 4).sum()  # the sum over the picks of x ** 4

    d = [lambda p: picks * p ** 4, lambda p: picks * 4 * p ** 3, lambda p: picks * 12 * p ** 2,
         lambda p: picks * 24 * p, lambda p: picks * 24.0]
    grad = f
    for order in range(1, 5):  # the gradient of the sum of the last: the order-th derivative of each value
        grad = tk.grad(lambda t, inner=grad: inner(t).sum())
        np.testing.assert_allclose(host(grad(x)), d[order](X), rtol=1e-12, atol=1e-12)


def test_the_errors_name_the_fix():
    dev = tk.Cpu()
    x = dev.tensor(X, dtype="float64")
    with pytest.raises(tk.ShapeError, match="tk.jacobian"):
        tk.grad(lambda x: x * 2.0)(x)
    with pytest.raises(tk.DTypeError, match="float"):
        tk.grad(lambda x: x.sum())(dev.tensor([1, 2], dtype="int64"))
    with pytest.raises(tk.OperandError, match="dev.tensor"):
        tk.grad(lambda x: x.sum())(np.ones(3))
    with pytest.raises(tk.BackwardError, match="no second derivative") as info:
        tk.hessian(lambda x: exp2_by_hand(x).sum(), x)
    assert isinstance(info.value.__cause__, tk.SecondOrderError)
    with pytest.raises(tk.InvalidArgumentError, match="'rev'"):
        tk.jacobian(lambda x: x, x, mode="sideways")


def test_compiled_newton_and_hvp_steps_equal_eager_bitwise(dev):
    a = dev.tensor(np.array([[3.0, 1.0], [1.0, 2.0]]), dtype="float64")
    b = dev.tensor(np.array([1.0, -1.0]), dtype="float64")

    def f(x):
        return 0.5 * (x @ (a @ x)) - b @ x + (x * x * x * x).sum() * 0.1

    def newton(x):  # the gradient, the Hessian (forward over reverse) and a Hessian-vector product
        g = tk.grad(f)(x)
        return g, tk.hessian(f, x), tk.hvp(f, x, g), tk.jvp(f, (x,), (g,))[1]

    def recorded(x):  # create_graph by hand: the gradient of |grad f|^2 / 2, which is H g
        t = x.trace(tk.UnionTape())
        g = f(t).backward(create_graph=True)[x]
        return (g * g).sum().backward()[x] * 0.5

    for fn in (newton, recorded):
        step = tk.compile(fn)
        for start in ([0.3, -0.2], [1.3, 0.4], [-2.0, 0.5]):
            x = dev.tensor(np.array(start), dtype="float64")
            got, want = step(x), fn(x)
            for g, w in zip(*((got, want) if isinstance(got, tuple) else ((got,), (want,)))):
                np.testing.assert_array_equal(host(g), host(w))
        assert len(step.history) == 1 and step.history[0].calls == 2


@pytest.mark.parametrize("transform", ["grad", "vjp", "hvp", "hessian"])
def test_a_reverse_transform_inside_a_global_tape_block_says_where_to_call_it(transform):
    dev = tk.Cpu(default_dtype="float64")

    def f(t):
        return (t * t).sum()

    calls = {"grad": lambda x: tk.grad(f)(x), "vjp": lambda x: tk.vjp(f, x), "hvp": lambda x: tk.hvp(f, x, x),
             "hessian": lambda x: tk.hessian(f, x)}
    with tk.GlobalTape():
        x = dev.tensor([1.0, 2.0])
        with pytest.raises(tk.TapePolicyError, match="outside the block"):
            calls[transform](x)
        np.testing.assert_allclose(host(tk.jacobian(lambda t: t * t, x, mode="fwd")), np.diag([2.0, 4.0]))


@pytest.mark.parametrize("policy", [tk.OwnedTape, tk.ArcTape])
@pytest.mark.parametrize("transform", ["grad", "vjp", "hvp", "hessian"])
def test_a_transform_of_f_using_a_tensor_traced_on_another_policy_names_the_transform_and_the_fix(transform, policy):
    """A transform traces its arguments on a UnionTape of its own: the error when f meets a tensor
    traced outside on another policy says so, not only 'one call cannot mix tape policies'."""
    dev = tk.Cpu(default_dtype="float64")
    w = dev.tensor([1.0, 2.0], name="w").trace(policy())
    before = repr(w.tape)

    def f(t):
        return (t * w).sum()

    calls = {"grad": lambda x: tk.grad(f)(x), "vjp": lambda x: tk.vjp(f, x), "hvp": lambda x: tk.hvp(f, x, x),
             "hessian": lambda x: tk.hessian(f, x)}
    with pytest.raises(tk.TapePolicyError) as err:
        calls[transform](dev.tensor([0.5, -1.0]))
    said = str(err.value)
    assert f"tk.{'grad' if transform in ('hvp', 'hessian') else transform}" in said and "UnionTape of its own" in said
    assert "w carries " + policy.__name__ in said and "tk.UnionTape()" in said and "w.detach()" in said
    assert repr(w.tape) == before  # the refused op changed no tape


def test_a_refused_jvp_leaves_the_outer_tape_as_it_was(dev):
    """jvp refuses f's first op on a tensor traced outside, before it records: no record of f's is
    left on the outer tape (it was refused only once f returned, its records already there)."""
    w = dev.tensor([1.3, 0.2], dtype="float64").trace(tk.UnionTape())
    y = w * 2.0
    before = len(y.tape)
    with pytest.raises(tk.TracedOutsideError, match="traced outside it"):
        tk.jvp(lambda x: ((x * y) ** 3).sum(), (dev.tensor([0.7, -0.4], dtype="float64"),),
               (dev.tensor([1.0, 0.0], dtype="float64"),))
    assert len(y.tape) == before
    np.testing.assert_allclose(host(y.sum().backward()[w]), [2.0, 2.0])


def test_hvp_is_differentiable_in_v_and_refuses_a_v_of_another_shape(dev):
    """Forward over reverse computes tangents on arrays: a traced v is taken reverse over reverse,
    whose result depends on v (the gradient of hvp . 1 in v is Hᵀ 1, not a silent zero); v is
    checked and cast to x's dtype on both paths (a traced x broadcast a v of shape (1,))."""
    a = dev.tensor(A, dtype="float64")

    def f(x):
        return 0.5 * (x * (a @ x)).sum()

    x = dev.tensor(X, dtype="float64")
    h = (A + A.T) / 2
    np.testing.assert_allclose(host(tk.grad(lambda v: tk.hvp(f, x, v).sum())(dev.tensor(X, dtype="float64"))),
                               h.T @ np.ones(4), atol=1e-12)
    for point in (x, x.trace(tk.UnionTape())):
        with pytest.raises(tk.ShapeError, match="shape"):
            tk.hvp(f, point, dev.tensor([1.0], dtype="float64"))
    x32 = dev.tensor(X, dtype="float32")
    for point in (x32, x32.trace(tk.UnionTape())):
        assert tk.hvp(lambda t: (t * t * t).sum(), point, dev.tensor(X, dtype="float64")).dtype == x32.dtype


def test_jvp_refuses_a_traced_tangent_whose_gradient_would_be_zero(dev):
    x = dev.tensor(X, dtype="float64")
    with pytest.raises(tk.TracedOutsideError, match="tangent 0 carries a tape"):
        tk.grad(lambda v: tk.jvp(lambda t: (t * t).sum(), (x,), (v,))[1])(dev.tensor(X, dtype="float64"))


def test_an_argument_is_its_own_tensor_apart_from_the_same_tensor_closed_over_or_passed_again(dev):
    """Only f's own argument is differentiated: the same tensor closed over, or given again as an
    argument not differentiated, is a constant of f (as in JAX). It was keyed as the same tensor, and
    the total derivative came back (1 for 0.5)."""
    x = dev.tensor([0.5], dtype="float64")
    v = dev.tensor([1.0], dtype="float64")
    assert np.allclose(host(tk.grad(lambda a: (a * x).sum())(x)), [0.5])
    for mode in ("rev", "fwd"):
        assert np.allclose(host(tk.jacobian(lambda a: a * x, x, mode=mode)), [[0.5]])
    assert np.allclose(host(tk.grad(lambda a, b: (a * b).sum())(x, x)), [0.5])
    assert np.allclose(host(tk.vjp(lambda a: a * x, x)[1](v)[0]), [0.5])
    inner = tk.jvp(lambda t: tk.grad(lambda y: (y.sin() * t).sum())(t), (x,), (v,))[1]
    assert np.allclose(host(inner), [-np.sin(0.5) * 0.5 + np.cos(0.5)])  # d/dt of cos(t) t


def test_a_transform_under_a_tape_with_a_leaf_set_keeps_its_own_gradients(dev):
    """A leaf set names the user's leaves, not a transform's own inputs: their gradients were
    dropped, and silent zeros came back (a gradient penalty under model.alloc_grads())."""
    x0, w0 = np.array([0.3, -0.8, 1.1]), np.array([0.5, 1.5, -0.7])
    x, w = dev.tensor(x0, dtype="float64"), dev.tensor(w0, dtype="float64")
    wt = w.trace(tk.UnionTape(leaves=[w]))
    gx = tk.grad(lambda s: (s * wt).sin().sum())(x)
    np.testing.assert_allclose(host(gx), np.cos(x0 * w0) * w0, atol=1e-12)
    penalty = (gx * gx).sum().backward()[w]  # d/dw of sum(cos(x w)^2 w^2)
    c, s_ = np.cos(x0 * w0), np.sin(x0 * w0)
    np.testing.assert_allclose(host(penalty), 2 * c * w0 * (c - s_ * x0 * w0), atol=1e-12)
    xt = x.trace(tk.UnionTape(leaves=[x]))
    np.testing.assert_allclose(host(tk.grad(lambda s: (s * s).sum())(xt)), 2 * x0, atol=1e-12)


@pytest.mark.parametrize("call", [lambda f, x: tk.grad(f)(x), lambda f, x: tk.vjp(f, x),
                                  lambda f, x: tk.jacobian(f, x)], ids=["grad", "vjp", "jacobian"])
def test_an_output_without_a_derivative_is_refused_not_given_zeros(call, dev):
    x = dev.tensor(X, dtype="float64")
    for f in (lambda t: t.argmax(), lambda t: (t > 0).any()):
        with pytest.raises(tk.DTypeError, match="no derivative"):
            call(f, x)


def test_a_jacobians_dtype_is_xs_in_reverse_mode_and_fs_in_forward_mode_as_documented():
    dev = tk.Cpu()
    x = dev.tensor([1.0, 2.0], dtype="float32")
    c = dev.tensor([3.0, 4.0], dtype="float64")
    rev, fwd = (tk.jacobian(lambda v: v * c, x, mode=m) for m in ("rev", "fwd"))
    assert (str(rev.dtype), str(fwd.dtype)) == ("float32", "float64")
    np.testing.assert_allclose(rev.numpy(), fwd.numpy())
