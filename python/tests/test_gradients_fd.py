"""Derivatives of every differentiable op checked against central finite
differences computed in float64 NumPy, through grad, jvp and vmap(grad)."""

import math

import numpy as np
import pytest

from _backend import mx

EPS = 1e-6
RTOL, ATOL = 2e-4, 2e-5

_erf = np.vectorize(math.erf, otypes=[np.float64])


def uniform(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, size=shape)


def away_from_zero(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, size=shape) * rng.choice([-1.0, 1.0], size=shape)


def distinct(rng, shape):
    """Values at least 0.05 apart, so max/min have a unique winner."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.1 - n * 0.05 + rng.uniform(0, 0.05, size=n)).reshape(shape)


U = uniform(-2, 2)


class Case:
    def __init__(self, name, fn, ref, inputs):
        self.name = name
        self.fn = fn  # mx arrays -> array or tuple of arrays
        self.ref = ref  # float64 NumPy arrays -> array or tuple of arrays
        self.inputs = inputs  # [(shape, sampler)]

    def __repr__(self):
        return self.name


def _split_ref(x):
    return tuple(np.split(x, [1, 3], axis=1))


CASES = [
    # unary
    Case("negative", mx.negative, np.negative, [((3, 4), U)]),
    Case("abs", mx.abs, np.abs, [((3, 4), away_from_zero(0.2, 2))]),
    Case("square", mx.square, np.square, [((3, 4), U)]),
    Case("exp", mx.exp, np.exp, [((3, 4), U)]),
    Case("log", mx.log, np.log, [((3, 4), uniform(0.3, 3))]),
    Case("sqrt", mx.sqrt, np.sqrt, [((3, 4), uniform(0.3, 3))]),
    Case("sin", mx.sin, np.sin, [((3, 4), U)]),
    Case("cos", mx.cos, np.cos, [((3, 4), U)]),
    Case("tanh", mx.tanh, np.tanh, [((3, 4), U)]),
    Case("erf", mx.erf, _erf, [((3, 4), U)]),
    Case("sigmoid", mx.sigmoid, lambda x: 1 / (1 + np.exp(-x)), [((3, 4), uniform(-4, 4))]),
    # binary, with broadcasting (the gradient must be summed back)
    Case("add", mx.add, np.add, [((3, 4), U), ((3, 4), U)]),
    Case("add-broadcast", mx.add, np.add, [((3, 1), U), ((1, 4), U)]),
    Case("subtract", mx.subtract, np.subtract, [((3, 4), U), ((4,), U)]),
    Case("multiply", mx.multiply, np.multiply, [((3, 4), U), ((3, 4), U)]),
    Case("multiply-broadcast", mx.multiply, np.multiply, [((2, 1, 4), U), ((3, 1), U)]),
    Case("multiply-scalar-array", mx.multiply, np.multiply, [((), U), ((3, 4), U)]),
    Case("divide", mx.divide, np.divide, [((3, 4), U), ((3, 4), away_from_zero(0.5, 2))]),
    Case("power", mx.power, np.power, [((3, 4), uniform(0.5, 2)), ((3, 4), uniform(-2, 2))]),
    Case("maximum", mx.maximum, np.maximum, [((3, 4), distinct), ((3, 4), distinct)]),
    Case("minimum", mx.minimum, np.minimum, [((3, 4), distinct), ((1, 4), distinct)]),
    Case(
        "where",
        lambda x, y: mx.where(mx.array([[True, False, True, False]]), x, y),
        lambda x, y: np.where(np.array([[True, False, True, False]]), x, y),
        [((3, 4), U), ((3, 4), U)],
    ),
    Case("operators", lambda x, y: (x * y - x / (y * y + 1)) ** 2 + 3 * x, lambda x, y: (x * y - x / (y * y + 1)) ** 2 + 3 * x, [((3, 4), U), ((3, 4), U)]),
    # reductions
    Case("sum-all", lambda x: mx.sum(x), lambda x: np.sum(x), [((3, 4), U)]),
    Case("sum-axis", lambda x: mx.sum(x, axis=1), lambda x: np.sum(x, axis=1), [((3, 4), U)]),
    Case("sum-axes-keepdims", lambda x: mx.sum(x, axis=(0, 2), keepdims=True), lambda x: np.sum(x, axis=(0, 2), keepdims=True), [((2, 3, 4), U)]),
    Case("mean", lambda x: mx.mean(x, axis=-1), lambda x: np.mean(x, axis=-1), [((3, 4), U)]),
    Case("mean-all", lambda x: mx.mean(x), lambda x: np.mean(x), [((3, 4), U)]),
    Case("max", lambda x: mx.max(x, axis=0), lambda x: np.max(x, axis=0), [((3, 4), distinct)]),
    Case("max-all", lambda x: mx.max(x), lambda x: np.max(x), [((3, 4), distinct)]),
    Case("min", lambda x: mx.min(x, axis=1, keepdims=True), lambda x: np.min(x, axis=1, keepdims=True), [((3, 4), distinct)]),
    # matmul
    Case("matmul", mx.matmul, np.matmul, [((3, 4), U), ((4, 2), U)]),
    Case("matmul-batched", mx.matmul, np.matmul, [((2, 3, 4), U), ((2, 4, 2), U)]),
    Case("matmul-broadcast", mx.matmul, np.matmul, [((2, 3, 4), U), ((4, 2), U)]),
    Case("matmul-vector", mx.matmul, np.matmul, [((4,), U), ((4, 3), U)]),
    Case("matmul-dot", mx.matmul, np.matmul, [((4,), U), ((4,), U)]),
    # shape ops
    Case("reshape", lambda x: mx.reshape(x, (2, 6)) * mx.arange(6), lambda x: np.reshape(x, (2, 6)) * np.arange(6), [((3, 4), U)]),
    Case("transpose", lambda x: mx.transpose(x, (2, 0, 1)), lambda x: np.transpose(x, (2, 0, 1)), [((2, 3, 4), U)]),
    Case("T-then-matmul", lambda x, y: x.T @ y, lambda x, y: x.T @ y, [((4, 3), U), ((4, 2), U)]),
    Case("broadcast_to", lambda x: mx.broadcast_to(x, (2, 3, 4)), lambda x: np.broadcast_to(x, (2, 3, 4)), [((3, 1), U)]),
    Case("expand_dims", lambda x: mx.expand_dims(x, (0, 2)), lambda x: np.expand_dims(x, (0, 2)), [((3, 4), U)]),
    Case("squeeze", lambda x: mx.squeeze(x, 1), lambda x: np.squeeze(x, 1), [((3, 1, 4), U)]),
    Case("slice", lambda x: x[1:, ::2], lambda x: x[1:, ::2], [((3, 4), U)]),
    Case("slice-negative-step", lambda x: x[::-1, 3:0:-2], lambda x: x[::-1, 3:0:-2], [((3, 4), U)]),
    Case("index-int-none-ellipsis", lambda x: x[1, None, ..., 2:], lambda x: x[1, None, ..., 2:], [((3, 4), U)]),
    Case("concatenate", lambda x, y: mx.concatenate([x, y, x], axis=1), lambda x, y: np.concatenate([x, y, x], axis=1), [((3, 2), U), ((3, 4), U)]),
    Case("split", lambda x: tuple(mx.split(x, [1, 3], axis=1)), _split_ref, [((3, 4), U)]),
    Case("split-sections", lambda x: tuple(mx.split(x, 2, axis=0)), lambda x: tuple(np.split(x, 2, axis=0)), [((4, 3), U)]),
    Case("chain", lambda x: mx.tanh(mx.exp(x) @ mx.sin(x).T).sum(axis=0), lambda x: np.tanh(np.exp(x) @ np.sin(x).T).sum(axis=0), [((3, 4), uniform(-1, 1))]),
]


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _inputs(case, seed=0):
    rng = np.random.default_rng(seed)
    values = [sampler(rng, shape).astype(np.float32).astype(np.float64) for shape, sampler in case.inputs]
    return values


def _weights(case, values, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, size=np.shape(o)) for o in _as_tuple(case.ref(*values))]


def _mx(values):
    return [mx.array(v.astype(np.float32)) for v in values]


def _scalarised(case, weights):
    """L(args) = sum_k sum(f_k(args) * w_k), in MLX and in NumPy."""
    w_mx = [mx.array(w.astype(np.float32)) for w in weights]

    def loss(*args):
        return sum(mx.sum(o * w) for o, w in zip(_as_tuple(case.fn(*args)), w_mx))

    def loss_ref(*args):
        return sum(np.sum(o * w) for o, w in zip(_as_tuple(case.ref(*args)), weights))

    return loss, loss_ref


def _fd_gradient(loss_ref, values, argnum):
    values = [np.array(v, dtype=np.float64) for v in values]  # 0-d stays an ndarray
    x = values[argnum]
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        hi = [v.copy() for v in values]
        lo = [v.copy() for v in values]
        hi[argnum][idx] += EPS
        lo[argnum][idx] -= EPS
        grad[idx] = (loss_ref(*hi) - loss_ref(*lo)) / (2 * EPS)
    return grad


def _check(actual, expected, what):
    assert tuple(actual.shape) == np.shape(expected), (what, actual.shape, np.shape(expected))
    assert actual.dtype == mx.float32, (what, actual.dtype)
    np.testing.assert_allclose(np.array(actual, dtype=np.float64), expected, rtol=RTOL, atol=ATOL, err_msg=what)


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_grad_matches_finite_differences(case):
    values = _inputs(case)
    loss, loss_ref = _scalarised(case, _weights(case, values))
    argnums = tuple(range(len(values)))
    grads = mx.grad(loss, argnums=argnums)(*_mx(values))
    if len(argnums) == 1:
        grads = (grads,)
    for i, g in enumerate(grads):
        _check(g, _fd_gradient(loss_ref, values, i), f"d/d arg{i}")


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_value_and_grad_matches_finite_differences(case):
    values = _inputs(case, seed=5)
    loss, loss_ref = _scalarised(case, _weights(case, values, seed=6))
    value, g = mx.value_and_grad(loss)(*_mx(values))
    np.testing.assert_allclose(value.item(), loss_ref(*values), rtol=1e-5, atol=1e-5)
    _check(g, _fd_gradient(loss_ref, values, 0), "d/d arg0")


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_jvp_matches_finite_differences(case):
    values = _inputs(case, seed=2)
    rng = np.random.default_rng(3)
    tangents = [rng.uniform(-1, 1, size=v.shape).astype(np.float32).astype(np.float64) for v in values]
    outs, jvps = mx.jvp(lambda *a: case.fn(*a), _mx(values), _mx(tangents))
    hi = [v + EPS * t for v, t in zip(values, tangents)]
    lo = [v - EPS * t for v, t in zip(values, tangents)]
    expected = [(h - l) / (2 * EPS) for h, l in zip(_as_tuple(case.ref(*hi)), _as_tuple(case.ref(*lo)))]
    primal = _as_tuple(case.ref(*values))
    assert len(outs) == len(jvps) == len(expected)
    for o, p in zip(outs, primal):
        _check(o, p, "primal output")
    for t, e in zip(jvps, expected):
        _check(t, e, "tangent")


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_vjp_matches_finite_differences(case):
    values = _inputs(case, seed=7)
    weights = _weights(case, values, seed=8)
    outs, vjps = mx.vjp(lambda *a: list(_as_tuple(case.fn(*a))), _mx(values), [mx.array(w.astype(np.float32)) for w in weights])
    _, loss_ref = _scalarised(case, weights)
    assert len(vjps) == len(values)
    for i, g in enumerate(vjps):
        _check(g, _fd_gradient(loss_ref, values, i), f"vjp arg{i}")


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_vmap_of_grad_matches_finite_differences(case):
    batch = 3
    per_example = [_inputs(case, seed=10 + b) for b in range(batch)]
    weights = _weights(case, per_example[0], seed=4)
    loss, loss_ref = _scalarised(case, weights)
    # batch the first argument, share the others
    xs = np.stack([v[0] for v in per_example])
    shared = per_example[0][1:]
    in_axes = (0,) + (None,) * len(shared)
    grads = mx.vmap(mx.grad(loss), in_axes=in_axes)(mx.array(xs.astype(np.float32)), *_mx(shared))
    expected = np.stack([_fd_gradient(loss_ref, [xs[b]] + shared, 0) for b in range(batch)])
    _check(grads, expected, "vmap(grad)")


def test_second_derivatives_match_finite_differences():
    x = np.array([0.3, -0.7, 1.1])
    for fn, ref in [(mx.sin, np.sin), (mx.tanh, np.tanh), (mx.exp, np.exp), (mx.sigmoid, lambda v: 1 / (1 + np.exp(-v)))]:
        second = mx.vmap(mx.grad(mx.grad(fn)))(mx.array(x.astype(np.float32)))
        h = 1e-4
        expected = (ref(x + h) - 2 * ref(x) + ref(x - h)) / h**2
        np.testing.assert_allclose(np.array(second, dtype=np.float64), expected, rtol=1e-3, atol=1e-4)


def test_hessian_vector_product_forward_over_reverse():
    def f(x):
        return mx.sum(mx.sin(x) * x * x)

    x = np.array([0.5, -1.0, 2.0])
    v = np.array([1.0, 0.5, -2.0])
    _, hvp = mx.jvp(mx.grad(f), [mx.array(x.astype(np.float32))], [mx.array(v.astype(np.float32))])
    # f'' along the diagonal: d2/dx2 (x^2 sin x) = 2 sin x + 4 x cos x - x^2 sin x
    expected = (2 * np.sin(x) + 4 * x * np.cos(x) - x * x * np.sin(x)) * v
    np.testing.assert_allclose(np.array(hvp[0], dtype=np.float64), expected, rtol=1e-5, atol=1e-5)


def test_stop_gradient_blocks_and_integer_ops_have_no_gradient():
    x = mx.array([1.0, 2.0, 3.0])
    g = mx.grad(lambda v: mx.sum(mx.stop_gradient(v) * v + mx.stop_gradient(mx.exp(v))))(x)
    assert g.tolist() == [1.0, 2.0, 3.0]
    # comparisons and argmax are piecewise constant: zero gradient
    g = mx.grad(lambda v: mx.sum(mx.where(v > 1.5, v, 0.0)) + mx.argmax(v).astype(mx.float32))(x)
    assert g.tolist() == [0.0, 1.0, 1.0]
