"""mx.linalg against NumPy/SciPy: reconstructions (Q R = A, U S Vt = A, L Lᵀ = A,
P L U = A, A V = V w) over random, ill-conditioned and batched inputs, values,
MLX's errors and singular-input behaviour. Gradients and vmap are in
test_linalg_grad.py; the matmul family in test_linalg_matmul.py."""

import math

import numpy as np
import pytest

from _backend import IS_MLX, mx

CPU = mx.cpu
RNG = np.random.default_rng(0)

SHAPES = [(4, 4), (6, 3), (3, 6), (2, 5, 5), (2, 3, 4, 2)]


def rand(shape, dtype=np.float32, seed=None):
    rng = RNG if seed is None else np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(dtype)


def spd(n, batch=(), dtype=np.float32, seed=1):
    x = rand(batch + (n, n), np.float64, seed)
    return (x @ np.swapaxes(x, -1, -2) + n * np.eye(n)).astype(dtype)


def ill_conditioned(n, cond=1e6, seed=2):
    rng = np.random.default_rng(seed)
    q1, _ = np.linalg.qr(rng.standard_normal((n, n)))
    q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
    s = np.logspace(0, -math.log10(cond), n)
    return (q1 * s) @ q2.T


def tol(dtype):
    return dict(rtol=2e-4, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)


def npa(x):
    return np.array(x)


_MX_DTYPES = {np.dtype(np.float64): "float64", np.dtype(np.float32): "float32", np.dtype(np.complex64): "complex64"}


def arr(x):
    """An array of x's dtype (mx.array would make float64 NumPy data float32)."""
    x = np.asarray(x)
    name = _MX_DTYPES.get(x.dtype)
    return mx.array(x, dtype=getattr(mx, name)) if name else mx.array(x)


# --- QR ------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_qr_reconstructs(shape, dtype):
    a = rand(shape, dtype)
    q, r = mx.linalg.qr(arr(a), stream=CPU)
    m, n = shape[-2:]
    k = min(m, n)
    assert q.shape == shape[:-2] + (m, k) and r.shape == shape[:-2] + (k, n)
    q, r = npa(q), npa(r)
    np.testing.assert_allclose(q @ r, a, **tol(dtype))
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(k), q.shape[:-2] + (k, k)), **tol(dtype))
    np.testing.assert_array_equal(np.tril(r, -1), 0)


def test_qr_ill_conditioned():
    a = ill_conditioned(8)
    q, r = mx.linalg.qr(arr(a), stream=CPU)
    np.testing.assert_allclose(npa(q) @ npa(r), a, atol=1e-12)
    np.testing.assert_allclose(np.abs(npa(r)), np.abs(np.linalg.qr(a)[1]), atol=1e-12)


# --- SVD -----------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_svd_reconstructs(shape, dtype):
    a = rand(shape, dtype)
    u, s, vt = (npa(x) for x in mx.linalg.svd(arr(a), stream=CPU))
    m, n = shape[-2:]
    k = min(m, n)
    assert u.shape == shape[:-2] + (m, m) and vt.shape == shape[:-2] + (n, n)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), **tol(dtype))
    np.testing.assert_allclose((u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :], a, **tol(dtype))
    np.testing.assert_allclose(np.swapaxes(u, -1, -2) @ u, np.broadcast_to(np.eye(m), u.shape), **tol(dtype))
    np.testing.assert_allclose(vt @ np.swapaxes(vt, -1, -2), np.broadcast_to(np.eye(n), vt.shape), **tol(dtype))
    s_only = mx.linalg.svd(arr(a), compute_uv=False, stream=CPU)
    np.testing.assert_allclose(npa(s_only), s, **tol(dtype))


def test_svd_ill_conditioned_and_complex():
    a = ill_conditioned(10, cond=1e8)
    s = npa(mx.linalg.svd(arr(a), compute_uv=False, stream=CPU))
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=1e-10, atol=1e-14)
    c = (rand((4, 3)) + 1j * rand((4, 3))).astype(np.complex64)
    u, s, vt = mx.linalg.svd(arr(c), stream=CPU)
    assert u.dtype == mx.complex64 and s.dtype == mx.float32 and vt.dtype == mx.complex64
    u, s, vt = npa(u), npa(s), npa(vt)
    np.testing.assert_allclose((u[:, :3] * s) @ vt, c, atol=1e-5)
    np.testing.assert_allclose(s, np.linalg.svd(c, compute_uv=False), rtol=1e-5)


# --- inverses --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inv_and_batches(dtype):
    a = rand((3, 5, 5), dtype) + 5 * np.eye(5, dtype=dtype)
    np.testing.assert_allclose(npa(mx.linalg.inv(arr(a), stream=CPU)), np.linalg.inv(a), **tol(dtype))
    # A transposed (non-contiguous) input.
    at = mx.swapaxes(arr(a), -1, -2)
    np.testing.assert_allclose(npa(mx.linalg.inv(at, stream=CPU)), np.linalg.inv(np.swapaxes(a, -1, -2)), **tol(dtype))


def test_inv_ill_conditioned():
    a = ill_conditioned(6, cond=1e6)
    x = npa(mx.linalg.inv(arr(a), stream=CPU))
    np.testing.assert_allclose(x @ a, np.eye(6), atol=1e-8)


@pytest.mark.parametrize("upper", [False, True])
def test_tri_inv_reads_one_triangle(upper):
    a = rand((2, 4, 4)) + 4 * np.eye(4, dtype=np.float32)
    tri = np.triu(a) if upper else np.tril(a)
    got = npa(mx.linalg.tri_inv(arr(a), upper=upper, stream=CPU))
    np.testing.assert_allclose(got, np.linalg.inv(tri), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(np.tril(got, -1) if upper else np.triu(got, 1), 0)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_and_its_inverse(upper):
    a = spd(5, (3,), np.float64)
    f = npa(mx.linalg.cholesky(arr(a), upper=upper, stream=CPU))
    recon = np.swapaxes(f, -1, -2) @ f if upper else f @ np.swapaxes(f, -1, -2)
    np.testing.assert_allclose(recon, a, rtol=1e-12)
    np.testing.assert_array_equal(np.tril(f, -1) if upper else np.triu(f, 1), 0)
    inv = npa(mx.linalg.cholesky_inv(arr(f), upper=upper, stream=CPU))
    np.testing.assert_allclose(inv, np.linalg.inv(a), rtol=1e-10)


def test_cholesky_values_match_mlx():
    a = mx.array([[4.0, 1.0], [1.0, 3.0]])
    np.testing.assert_allclose(npa(mx.linalg.cholesky(a, stream=CPU)), [[2, 0], [0.5, 1.658312]], rtol=1e-6)
    np.testing.assert_allclose(npa(mx.linalg.cholesky_inv(mx.array([[2.0, 7.0], [1.0, 3.0]]), stream=CPU)),
                               [[0.277778, -0.0555556], [-0.0555556, 0.111111]], rtol=1e-5)


def test_cholesky_not_positive_definite_returns_lapacks_partial_factor():
    # MLX's behaviour (documented in docs/linalg.md): no error, LAPACK's
    # partially factored matrix.
    a = mx.array([[1.0, 2.0], [2.0, 1.0]])
    np.testing.assert_allclose(npa(mx.linalg.cholesky(a, stream=CPU)), [[1, 0], [2, -3]])


def test_pinv():
    for shape in [(5, 3), (3, 5), (2, 4, 4)]:
        a = rand(shape, np.float64)
        np.testing.assert_allclose(npa(mx.linalg.pinv(arr(a), stream=CPU)), np.linalg.pinv(a), rtol=1e-9, atol=1e-10)
    rank1 = np.ones((3, 2), np.float32)
    np.testing.assert_allclose(npa(mx.linalg.pinv(mx.array(rank1), stream=CPU)), np.full((2, 3), 1 / 6), rtol=1e-5)


# --- eigen-decompositions --------------------------------------------------------


@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eigh(uplo, dtype):
    a = rand((2, 6, 6), dtype)
    w, v = mx.linalg.eigh(arr(a), UPLO=uplo, stream=CPU)
    w, v = npa(w), npa(v)
    w_ref = np.linalg.eigvalsh(a, UPLO=uplo)
    np.testing.assert_allclose(w, w_ref, **tol(dtype))
    sym = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2) if uplo == "L" else np.triu(a) + np.swapaxes(np.triu(a, 1), -1, -2)
    np.testing.assert_allclose(sym @ v, v * w[..., None, :], **tol(dtype))
    np.testing.assert_allclose(npa(mx.linalg.eigvalsh(arr(a), UPLO=uplo, stream=CPU)), w_ref, **tol(dtype))


def test_eigh_complex_hermitian():
    x = rand((4, 4)) + 1j * rand((4, 4))
    h = (x + x.conj().T).astype(np.complex64)
    w, v = mx.linalg.eigh(arr(h), stream=CPU)
    assert w.dtype == mx.float32 and v.dtype == mx.complex64
    np.testing.assert_allclose(npa(w), np.linalg.eigvalsh(h), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(h @ npa(v), npa(v) * npa(w), atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_eig(dtype):
    a = rand((2, 5, 5)).astype(dtype)
    w, v = mx.linalg.eig(arr(a), stream=CPU)
    assert w.dtype == mx.complex64 and v.dtype == mx.complex64
    w, v = npa(w), npa(v)
    if dtype != np.complex64 or not IS_MLX:
        # MLX 0.32.4's complex64 eigenvectors do not satisfy A v = w v
        # (its eigenvalues are right); Loom's do.
        np.testing.assert_allclose(a @ v, v * w[..., None, :], atol=1e-4)
    ref = np.linalg.eigvals(a)
    for got, want in zip(w, ref):
        # Every eigenvalue found, whatever the order.
        assert np.abs(got[:, None] - want[None, :]).min(axis=0).max() < 1e-4
    np.testing.assert_allclose(npa(mx.linalg.eigvals(arr(a), stream=CPU)), w, atol=1e-5)


def test_eigvals_complex_pair():
    w = npa(mx.linalg.eigvals(mx.array([[0.0, -1.0], [1.0, 0.0]]), stream=CPU))
    np.testing.assert_allclose(w, [1j, -1j], atol=1e-7)


# --- LU, solves, determinants -------------------------------------------------------


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 4)])
def test_lu(shape):
    a = rand(shape, np.float64)
    p, l, u = (npa(x) for x in mx.linalg.lu(arr(a), stream=CPU))
    assert p.dtype == np.uint32
    lu_prod = l @ u
    rows = np.take_along_axis(lu_prod, p[..., :, None].astype(np.int64), axis=-2)
    np.testing.assert_allclose(rows, a, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.triu(l, 1), 0)
    np.testing.assert_array_equal(np.tril(u, -1), 0)


def test_lu_factor_matches_lapack_pivots():
    a = mx.array([[1.0, 2.0, 5.0], [3.0, 4.0, 6.0], [7.0, 1.0, 1.0]])
    lu, piv = mx.linalg.lu_factor(a, stream=CPU)
    assert piv.tolist() == [2, 1, 2] and piv.dtype == mx.uint32
    np.testing.assert_allclose(npa(lu), [[7, 1, 1], [0.428571, 3.571429, 5.571429], [0.142857, 0.52, 1.96]], rtol=1e-5)
    p, l, u = mx.linalg.lu(mx.array([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]]), stream=CPU)
    assert p.tolist() == [1, 2, 0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_solve(dtype):
    a = rand((3, 4, 4), dtype) + 4 * np.eye(4, dtype=dtype)
    b = rand((3, 4, 2), dtype)
    np.testing.assert_allclose(npa(mx.linalg.solve(arr(a), arr(b), stream=CPU)), np.linalg.solve(a, b), **tol(dtype))
    v = rand((4,), dtype)
    np.testing.assert_allclose(npa(mx.linalg.solve(arr(a[0]), arr(v), stream=CPU)), np.linalg.solve(a[0], v), **tol(dtype))


def test_solve_ill_conditioned():
    a = ill_conditioned(6, cond=1e5)
    x = rand((6, 1), np.float64)
    got = npa(mx.linalg.solve(arr(a), arr(a @ x), stream=CPU))
    np.testing.assert_allclose(got, x, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("upper", [False, True])
def test_solve_triangular(upper):
    a = rand((5, 5)) + 5 * np.eye(5, dtype=np.float32)
    tri = np.triu(a) if upper else np.tril(a)
    b = rand((5, 3))
    got = npa(mx.linalg.solve_triangular(arr(a), arr(b), upper=upper, stream=CPU))
    np.testing.assert_allclose(got, np.linalg.solve(tri, b), rtol=1e-4, atol=1e-5)
    vec = npa(mx.linalg.solve_triangular(arr(a), arr(b[:, 0]), upper=upper, stream=CPU))
    np.testing.assert_allclose(vec, np.linalg.solve(tri, b[:, 0]), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_det_and_slogdet(dtype):
    a = rand((4, 5, 5), dtype)
    # MLX's float64 det carries float32 rounding: 1e-6 holds for both.
    np.testing.assert_allclose(npa(mx.linalg.det(arr(a), stream=CPU)), np.linalg.det(a), rtol=1e-4 if dtype == np.float32 else 1e-6)
    sign, logabs = mx.linalg.slogdet(arr(a), stream=CPU)
    rs, rl = np.linalg.slogdet(a)
    np.testing.assert_array_equal(npa(sign), rs)
    np.testing.assert_allclose(npa(logabs), rl, rtol=1e-4 if dtype == np.float32 else 1e-6)


def test_det_singular_and_integer_inputs():
    assert mx.linalg.det(mx.array([[1.0, 2.0], [2.0, 4.0]]), stream=CPU).item() == 0
    sign, logabs = mx.linalg.slogdet(mx.array([[1.0, 2.0], [2.0, 4.0]]), stream=CPU)
    assert sign.item() == 0 and logabs.item() == -math.inf
    d = mx.linalg.det(mx.array([[1, 2], [3, 4]]), stream=CPU)
    assert d.dtype == mx.float32 and abs(d.item() + 2) < 1e-5


# --- cross and norm ----------------------------------------------------------------


def test_cross():
    a, b = rand((4, 3)), rand((4, 3))
    np.testing.assert_allclose(npa(mx.linalg.cross(arr(a), arr(b))), np.cross(a, b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(npa(mx.linalg.cross(mx.array(a.T), mx.array(b.T), axis=0)), np.cross(a.T, b.T, axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(npa(mx.linalg.cross(mx.array([1.0, 2.0]), mx.array([4.0, 5.0]))), [0, 0, -3])
    np.testing.assert_allclose(npa(mx.linalg.cross(mx.array([1.0, 2.0, 3.0]), mx.array([4.0, 5.0]))), np.cross([1, 2, 3], [4, 5, 0]))
    out = mx.linalg.cross(mx.array([1, 2, 3]), mx.array([4, 5, 6]))
    assert out.dtype == mx.int32 and out.tolist() == [-3, 6, -3]
    assert mx.linalg.cross(mx.ones((2, 2, 3)), mx.ones((3,))).shape == (2, 2, 3)


VECTOR_ORDS = [None, 0, 1, -1, 2, -2, 3, 0.5, math.inf, -math.inf]
MATRIX_ORDS = [None, "fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf]


@pytest.mark.parametrize("ord", VECTOR_ORDS)
def test_vector_norms(ord):
    x = rand((3, 7))
    x[0, 0] = 0
    for axis in (0, 1, -1):
        got = npa(mx.linalg.norm(arr(x), ord=ord, axis=axis))
        np.testing.assert_allclose(got, np.linalg.norm(x, ord=ord, axis=axis), rtol=1e-5)
    got = mx.linalg.norm(arr(x), ord=ord, axis=1, keepdims=True)
    assert got.shape == (3, 1)
    np.testing.assert_allclose(npa(mx.linalg.norm(arr(x[0]), ord=ord)), np.linalg.norm(x[0], ord=ord), rtol=1e-5)


@pytest.mark.parametrize("ord", MATRIX_ORDS)
def test_matrix_norms(ord):
    x = rand((2, 4, 5))
    for axis in [(1, 2), (2, 1), (0, 2)]:
        got = npa(mx.linalg.norm(arr(x), ord=ord, axis=axis))
        np.testing.assert_allclose(got, np.linalg.norm(x, ord=ord, axis=axis), rtol=1e-5)
        kept = mx.linalg.norm(arr(x), ord=ord, axis=axis, keepdims=True)
        assert kept.shape == np.linalg.norm(x, ord=ord, axis=axis, keepdims=True).shape
    np.testing.assert_allclose(npa(mx.linalg.norm(arr(x[0]), ord=ord)), np.linalg.norm(x[0], ord=ord), rtol=1e-5)


def test_norm_defaults_dtypes_and_alias():
    x = rand((2, 3, 4))
    np.testing.assert_allclose(mx.linalg.norm(arr(x)).item(), np.linalg.norm(x.ravel()), rtol=1e-5)
    assert mx.linalg.norm(arr(x), keepdims=True).shape == (1, 1, 1)
    assert mx.linalg.norm(mx.array([1, 2, 3])).dtype == mx.float32
    assert mx.linalg.norm(mx.array([1.0, 2.0], dtype=mx.float64)).dtype == mx.float64
    assert mx.linalg.norm(mx.ones((3,), dtype=mx.float16)).dtype == mx.float16
    np.testing.assert_allclose(mx.linalg.norm(mx.array([3 + 4j, 1])).item(), math.sqrt(26), rtol=1e-6)
    assert mx.linalg.norm(mx.array(-3.0)).item() == 3
    assert mx.linalg.norm(mx.zeros((0,))).item() == 0
    assert mx.matrix_norm is mx.linalg.norm


# --- errors (MLX 0.32.4's messages) ------------------------------------------------------

I2 = [[1, 2], [3, 4]]

ERRORS = [
    (lambda: mx.linalg.inv(mx.ones((2, 3)), stream=CPU), ValueError, "[linalg::inv] Inverses are only defined for square matrices."),
    (lambda: mx.linalg.inv(mx.ones((2,)), stream=CPU), ValueError, "[linalg::inv] Arrays must have >= 2 dimensions. Received array with 1 dimensions."),
    (lambda: mx.linalg.inv(mx.array(I2), stream=CPU), ValueError, "[linalg::inv] Arrays must have type float32 or float64. Received array with type int32."),
    (lambda: mx.linalg.inv(mx.ones((2, 2), dtype=mx.float16), stream=CPU), ValueError, "type float16"),
    (lambda: mx.linalg.qr(mx.ones((3,)), stream=CPU), ValueError, "[linalg::qr] Arrays must have >= 2 dimensions."),
    (lambda: mx.linalg.qr(mx.ones((3, 3), dtype=mx.complex64), stream=CPU), ValueError, "[linalg::qr] Arrays must have type float32 or float64."),
    (lambda: mx.linalg.svd(mx.ones((3,)), stream=CPU), ValueError, "[linalg::svd] Input array must have >= 2 dimensions. Received array with 1 dimensions."),
    (lambda: mx.linalg.svd(mx.ones((3, 3), dtype=mx.int32), stream=CPU), ValueError, "[linalg::svd] Arrays must have type float32, float64 or complex64. Received array with type int32."),
    (lambda: mx.linalg.cholesky(mx.ones((2, 3)), stream=CPU), ValueError, "[linalg::cholesky] Cholesky decomposition is only defined for square matrices."),
    (lambda: mx.linalg.cholesky_inv(mx.ones((2, 3)), stream=CPU), ValueError, "[linalg::cholesky_inv] Cholesky inverse is only defined for square matrices."),
    (lambda: mx.linalg.tri_inv(mx.ones((2, 3)), stream=CPU), ValueError, "[linalg::inv] Inverses are only defined for square matrices."),
    (lambda: mx.linalg.eigh(mx.ones((2, 3)), stream=CPU), ValueError, "[linalg::eigh] Only defined for square matrices."),
    (lambda: mx.linalg.eigh(mx.ones((2, 2), dtype=mx.int32), stream=CPU), ValueError, "[linalg::eigh] Arrays must have type float32, float64 or complex64."),
    (lambda: mx.linalg.eig(mx.ones((2, 3)), stream=CPU), ValueError, "[linalg::eig] Only defined for square matrices."),
    (lambda: mx.linalg.lu(mx.ones((2, 2), dtype=mx.int32), stream=CPU), ValueError, "[linalg::lu] Arrays must have type float32 or float64."),
    (lambda: mx.linalg.pinv(mx.ones((3,)), stream=CPU), ValueError, "[linalg::pinv] Arrays must have >= 2 dimensions."),
    (lambda: mx.linalg.det(mx.ones((2, 3)), stream=CPU), ValueError, "[linalg::det] Only defined for square matrices."),
    (lambda: mx.linalg.det(mx.ones((3,)), stream=CPU), ValueError, "[linalg::det] Arrays must have >= 2 dimensions."),
    (lambda: mx.linalg.solve(mx.ones((2,)), mx.ones((2,)), stream=CPU), ValueError, "[linalg::solve] First input must have >= 2 dimensions. Received array with 1 dimensions."),
    (lambda: mx.linalg.solve(mx.ones((2, 3)), mx.ones((2,)), stream=CPU), ValueError, "[linalg::solve] First input must be a square matrix. Received array with shape (2,3)."),
    (lambda: mx.linalg.solve(mx.eye(2), mx.ones((3,)), stream=CPU), ValueError, "[linalg::solve] Last dimension of first input with shape (2,2) must match second to last dimension of second input with shape (3"),
    (lambda: mx.linalg.solve_triangular(mx.ones((2, 3)), mx.ones((2,)), stream=CPU), ValueError, "[linalg::solve_triangular] First input must be a square matrix. Received array with shape (2,3)."),
    (lambda: mx.linalg.solve_triangular(mx.eye(2), mx.ones((3, 3)), stream=CPU), ValueError, "[linalg::solve_triangular] Last dimension of first input with shape (2,2) must match second to last dimension of second input with shape (3,3)."),
    (lambda: mx.linalg.cross(mx.ones((4,)), mx.ones((4,))), ValueError, "[linalg::cross] The specified axis must have size 2 or 3."),
    (lambda: mx.linalg.norm(mx.ones((2,)), ord="fro"), ValueError, "[linalg::norm] Norm 'fro' only supported for matrices, but received 1 axis/axes."),
    (lambda: mx.linalg.norm(mx.ones((2, 2)), ord="foo"), ValueError, "[linalg::norm] Invalid ord value 'foo' for matrix norm."),
    (lambda: mx.linalg.norm(mx.ones((2, 2)), ord=0, axis=(0, 1)), ValueError, "[linalg::norm] Invalid ord 0 for matrix norm."),
    (lambda: mx.linalg.norm(mx.ones((2, 2)), ord=3), ValueError, "[linalg::norm] Invalid ord 3 for matrix norm."),
    (lambda: mx.linalg.norm(mx.ones((2, 2, 2)), ord=2), ValueError, "[linalg::norm] Received too many axes for norm."),
    (lambda: mx.linalg.norm(mx.ones((2, 2, 2)), axis=(0, 1, 2)), ValueError, "[linalg::norm] Received too many axes for norm."),
    (lambda: mx.linalg.norm(mx.ones((2, 2)), axis=3), IndexError, "Invalid axis 3 for array with 2 dimensions."),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors(case):
    fn, exc, message = ERRORS[case]
    with pytest.raises(exc) as info:
        fn()
    assert message in str(info.value)


@pytest.mark.loom_only
def test_gpu_stream_is_refused_with_mlxs_message():
    # Loom has no GPU in this build: the stream argument itself is refused,
    # as MLX's CPU wheel does.
    with pytest.raises(ValueError):
        mx.linalg.inv(mx.eye(2), stream=mx.gpu)


def test_singular_inputs_raise_at_evaluation():
    # MLX's behaviour: a RuntimeError when the LAPACK factorization fails.
    with pytest.raises(RuntimeError):
        mx.eval(mx.linalg.inv(mx.array([[1.0, 2.0], [2.0, 4.0]]), stream=CPU))
    with pytest.raises(RuntimeError):
        mx.eval(mx.linalg.solve(mx.array([[1.0, 2.0], [2.0, 4.0]]), mx.array([1.0, 2.0]), stream=CPU))
    with pytest.raises(RuntimeError):
        mx.eval(mx.linalg.tri_inv(mx.array([[0.0, 0.0], [1.0, 1.0]]), stream=CPU))


@pytest.mark.loom_only
def test_bad_input_errors_name_the_op_and_shapes():
    # Beyond MLX's messages: the shape that was wrong, and for a singular
    # matrix the primitive and its input shapes (added at evaluation).
    for fn, op in [(mx.linalg.inv, "inv"), (mx.linalg.cholesky, "cholesky"),
                   (mx.linalg.eigh, "eigh"), (mx.linalg.det, "det")]:
        with pytest.raises(ValueError, match=rf"\[linalg::{op}\].*shape \(4,2,3\)"):
            fn(mx.ones((4, 2, 3)), stream=CPU)
    a = mx.stack([mx.eye(3), mx.zeros((3, 3))])
    with pytest.raises(RuntimeError, match=r"(?s)\[Solve::eval_cpu\] The matrix is singular.*Solve.*\(2,3,3\)"):
        mx.eval(mx.linalg.solve(a, mx.ones((2, 3, 1)), stream=CPU))
    with pytest.raises(RuntimeError, match=r"(?s)\[Inverse::eval_cpu\].*Inverse.*\(3,3\)"):
        mx.eval(mx.linalg.inv(mx.zeros((3, 3)), stream=CPU))


@pytest.mark.loom_only
def test_empty_matrices():
    # MLX crashes (SIGFPE) on a 0 x 0 inverse; Loom returns empty results.
    assert mx.linalg.inv(mx.zeros((0, 0)), stream=CPU).shape == (0, 0)
    assert mx.linalg.det(mx.zeros((0, 0)), stream=CPU).item() == 1
    u, s, vt = mx.linalg.svd(mx.zeros((3, 0)), stream=CPU)
    assert u.shape == (3, 3) and s.shape == (0,) and vt.shape == (0, 0)
    np.testing.assert_array_equal(npa(u), np.eye(3))
    assert mx.linalg.qr(mx.zeros((2, 0, 3)), stream=CPU)[0].shape == (2, 0, 0)


@pytest.mark.loom_only
def test_solve_broadcasts_batches():
    # MLX 0.32.4 raises a take_along_axis error for both cases.
    a = rand((3, 4, 4)) + 4 * np.eye(4, dtype=np.float32)
    v = rand((4,))
    got = npa(mx.linalg.solve(arr(a), arr(v), stream=CPU))
    np.testing.assert_allclose(got, np.stack([np.linalg.solve(m, v) for m in a]), rtol=1e-4, atol=1e-5)
    b = rand((3, 4, 2))
    got = npa(mx.linalg.solve(arr(a[0]), arr(b), stream=CPU))
    np.testing.assert_allclose(got, np.linalg.solve(a[0], b), rtol=1e-4, atol=1e-5)


# --- memory ----------------------------------------------------------------------------


def test_linalg_graphs_release_their_memory():
    import gc

    a = mx.array(spd(16, (4,)))
    b = mx.array(rand((4, 16, 3)))
    mx.eval(a, b)

    def cycle():
        q, r = mx.linalg.qr(a, stream=CPU)
        u, s, vt = mx.linalg.svd(a, stream=CPU)
        w, v = mx.linalg.eigh(a, stream=CPU)
        x = mx.linalg.solve(a, b, stream=CPU)
        l = mx.linalg.cholesky(a, stream=CPU)
        d = mx.linalg.slogdet(a, stream=CPU)[1]
        mx.eval(q, r, u, s, vt, w, v, x, l, d, mx.linalg.inv(a, stream=CPU), mx.linalg.norm(a, ord=2, axis=(1, 2)))

    for _ in range(3):
        cycle()
    gc.collect()
    mx.synchronize()
    base = mx.get_active_memory()
    for _ in range(20):
        cycle()
        gc.collect()
        mx.synchronize()
        assert mx.get_active_memory() == base
