"""Shapeless functions called with a dimension that becomes 1, or stops being
1, after the trace (export/import and compile).

A trace decides at every element-wise op whether an operand broadcasts.
MLX 0.32.4 records its shapeless broadcasts with the arrays they broadcast
against, so forward functions (a linear layer traced at batch 3 and called
at batch 1) come out right there; Loom (which returned 3 rows before session
6) recomputes the broadcasts of an imported function from the new shapes and
retraces a compiled function when its size-1 dimensions move. Where the
trace cannot represent the call (the gradient with respect to an operand
that now broadcasts), MLX returns a gradient of the wrong shape and Loom
raises, naming the input and dimension, or (compile) retraces: Loom-only.
"""

import numpy as np
import pytest

from _backend import mx

rng = np.random.default_rng(12)


def _arr(*shape):
    return mx.array(rng.normal(size=shape).astype(np.float32))


W = _arr(4, 5)
B = _arr(5)
G = _arr(5)
mx.eval(W, B, G)


def linear(x):
    return x @ W + B


def norm(x):
    # A norm's weight and bias broadcast to the traced shape, and the mean
    # broadcast back over the row.
    c = x - mx.mean(x, axis=-1, keepdims=True)
    return c * mx.rsqrt(mx.mean(c * c, axis=-1, keepdims=True) + 1e-5) * G + B


def mlp(x):
    return norm(mx.maximum(linear(x), 0.0))


def _check(got, want):
    assert got.shape == want.shape
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fun", [linear, norm, mlp])
@pytest.mark.parametrize("traced,called", [((3, 4), (1, 4)), ((1, 4), (3, 4)), ((3, 4), (6, 4))])
def test_export_batch_dimension_becomes_one(tmp_path, fun, traced, called):
    shape_in = lambda s: s if fun is not norm else s[:-1] + (5,)
    path = str(tmp_path / "f.mlxfn")
    mx.export_function(path, fun, mx.zeros(shape_in(traced)), shapeless=True)
    imported = mx.import_function(path)
    for batch_shape in (called, traced, (1, 4)):
        x = _arr(*shape_in(batch_shape))
        _check(imported(x)[0], fun(x))


@pytest.mark.parametrize("fun", [linear, norm, mlp])
def test_compile_batch_dimension_becomes_one(fun):
    width = 5 if fun is norm else 4
    compiled = mx.compile(fun, shapeless=True)
    for batch in (3, 1, 6, 1, 2):
        x = _arr(batch, 2, width)
        _check(compiled(x), fun(x))


def test_three_dimensional_batch_and_length_become_one(tmp_path):
    path = str(tmp_path / "f.mlxfn")
    mx.export_function(path, mlp, mx.zeros((2, 7, 4)), shapeless=True)
    imported = mx.import_function(path)
    compiled = mx.compile(mlp, shapeless=True)
    for shape in [(2, 7, 4), (1, 7, 4), (2, 1, 4), (1, 1, 4), (3, 9, 4)]:
        x = _arr(*shape)
        _check(imported(x)[0], mlp(x))
        _check(compiled(x), mlp(x))


@pytest.mark.loom_only
def test_import_refuses_a_broadcast_the_trace_did_not_have(tmp_path):
    path = str(tmp_path / "f.mlxfn")
    mx.export_function(path, lambda x, y: x * y, mx.zeros((3, 4)), mx.zeros((3, 4)), shapeless=True)
    f = mx.import_function(path)
    _check(f(mx.ones((5, 4)), mx.ones((5, 4)))[0], mx.ones((5, 4)))
    with pytest.raises(ValueError, match=r"input 2 dimension 0 \(3 when traced, 1 now\)"):
        f(mx.ones((3, 4)), mx.ones((1, 4)))
    # Both operands of size 1 there: no broadcast needed.
    _check(f(mx.ones((1, 4)), mx.ones((1, 4)))[0], mx.ones((1, 4)))


@pytest.mark.loom_only
def test_gradient_of_an_operand_that_becomes_one(tmp_path):
    # The gradient with respect to y sums over the rows y broadcasts to: a
    # trace with equal shapes has no such sum, so replaying it for a one-row
    # y would return a gradient of x's shape.
    grad = mx.grad(lambda x, y: mx.sum(mx.sin(x * y)), argnums=1)
    x, y = _arr(3, 4), _arr(1, 4)
    want = grad(x, y)
    assert want.shape == (1, 4)

    path = str(tmp_path / "g.mlxfn")
    mx.export_function(path, grad, mx.zeros((3, 4)), mx.zeros((3, 4)), shapeless=True)
    with pytest.raises(ValueError, match=r"input 2 dimension 0"):
        mx.import_function(path)(x, y)

    # A trace with that dimension of size 1 as well serves such calls.
    both = str(tmp_path / "both.mlxfn")
    with mx.exporter(both, grad, shapeless=True) as exporter:
        exporter(mx.zeros((3, 4)), mx.zeros((3, 4)))
        exporter(mx.zeros((3, 4)), mx.zeros((1, 4)))
    g = mx.import_function(both)
    _check(g(x, y)[0], want)
    x5, y5 = _arr(5, 4), _arr(5, 4)
    _check(g(x5, y5)[0], grad(x5, y5))
    x6, y6 = _arr(6, 4), _arr(1, 4)
    _check(g(x6, y6)[0], grad(x6, y6))

    # Compile retraces when a dimension becomes 1 and gets it right.
    compiled = mx.compile(grad, shapeless=True)
    _check(compiled(x5, y5), grad(x5, y5))
    _check(compiled(x, y), want)


@pytest.mark.loom_only
def test_gradient_of_an_operand_that_stops_being_one(tmp_path):
    grad = mx.grad(lambda x, y: mx.sum(x * y), argnums=1)
    path = str(tmp_path / "g.mlxfn")
    mx.export_function(path, grad, mx.zeros((1, 4)), mx.zeros((1, 4)), shapeless=True)
    g = mx.import_function(path)
    x, y = _arr(3, 4), _arr(1, 4)
    with pytest.raises(ValueError, match=r"input 1 dimension 0 \(1 when traced, 3 now\)"):
        g(x, y)
    compiled = mx.compile(grad, shapeless=True)
    x1, y1 = _arr(1, 4), _arr(1, 4)
    _check(compiled(x1, y1), grad(x1, y1))
    _check(compiled(x, y), grad(x, y))


@pytest.mark.loom_only
def test_compile_retraces_only_when_size_one_dimensions_move():
    calls = []

    def f(x, y):
        calls.append(1)
        return x + y

    compiled = mx.compile(f, shapeless=True)
    compiled(mx.ones((3, 4)), mx.ones((3, 4)))
    compiled(mx.ones((5, 2)), mx.ones((5, 2)))
    assert len(calls) == 1
    out = compiled(mx.ones((3, 4)), mx.ones((1, 4)))
    assert out.shape == (3, 4) and len(calls) == 2
    compiled(mx.ones((7, 4)), mx.ones((1, 4)))
    assert len(calls) == 2


def test_two_inputs_whose_batch_becomes_one_together(tmp_path):
    # y broadcasts along x's columns in the trace; both batches become 1.
    def f(x, y):
        return mx.exp(x + y) * y

    path = str(tmp_path / "f.mlxfn")
    mx.export_function(path, f, mx.zeros((3, 4)), mx.zeros((3, 1)), shapeless=True)
    imported = mx.import_function(path)
    compiled = mx.compile(f, shapeless=True)
    compiled(mx.zeros((3, 4)), mx.zeros((3, 1)))
    for rows in (1, 3, 7):
        x, y = _arr(rows, 4), _arr(rows, 1)
        _check(imported(x, y)[0], f(x, y))
        _check(compiled(x, y), f(x, y))
