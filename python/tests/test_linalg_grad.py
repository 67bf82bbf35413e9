"""Gradients of mx.linalg against central finite differences (float64), forward
mode against the same directional derivatives, and vmap against a loop.

MLX 0.32.4 has no vjp/jvp for QRF, SVD, Eigh, Cholesky, Inverse or LUF (det's
gradient aside) and no vmap for QRF or LUF: these tests are Loom-only except
where noted. Symmetric-input ops (cholesky, eigh) are differentiated along
symmetric directions: their gradient is that of A treated as symmetric."""

import numpy as np
import pytest

from _backend import mx

CPU = mx.cpu


def f64(x):
    return mx.array(np.asarray(x, dtype=np.float64), dtype=mx.float64)


def rng(seed):
    return np.random.default_rng(seed)


def general(shape, seed=0):
    return rng(seed).standard_normal(shape)


def well_conditioned(n, seed=0):
    return rng(seed).standard_normal((n, n)) + n * np.eye(n)


def spd(n, seed=0):
    x = rng(seed).standard_normal((n, n))
    return x @ x.T + n * np.eye(n)


def weights(shape, seed):
    return f64(rng(seed).standard_normal(shape))


def first(xs):
    return xs[0] if isinstance(xs, (list, tuple)) else xs


# Each case: a scalar loss of one matrix, the input, symmetric directions?
def _qr_loss(shape):
    m, n = shape
    k = min(m, n)
    wq, wr = weights((m, k), 1), weights((k, n), 2)
    return lambda a: mx.sum(wq * mx.linalg.qr(a, stream=CPU)[0]) + mx.sum(wr * mx.linalg.qr(a, stream=CPU)[1])


def _svd_loss(shape):
    m, n = shape
    k = min(m, n)
    ws, wu, wv = weights((k,), 3), weights((m, m), 4), weights((n, n), 5)

    def loss(a):
        u, s, vt = mx.linalg.svd(a, stream=CPU)
        u1, v1 = u[:, :k], vt[:k, :]
        # Invariant to the sign of each singular pair.
        pu = (u1 * s) @ u1.T
        pv = v1.T @ (v1 * s[:, None])
        return mx.sum(ws * s) + mx.sum(wu * pu) + mx.sum(wv * pv)

    return loss


def _eigh_loss(n):
    ww, wv = weights((n,), 6), weights((n, n), 7)

    def loss(a):
        w, v = mx.linalg.eigh(a, stream=CPU)
        proj = v[:, :1] @ v[:, :1].T
        return mx.sum(ww * w) + mx.sum(wv * proj)

    return loss


CASES = {
    "qr_square": (_qr_loss((4, 4)), general((4, 4)), False),
    "qr_tall": (_qr_loss((5, 3)), general((5, 3)), False),
    "qr_wide": (_qr_loss((3, 5)), general((3, 5)), False),
    "svd_square": (_svd_loss((4, 4)), general((4, 4), 8), False),
    "svd_tall": (_svd_loss((5, 3)), general((5, 3), 9), False),
    "svd_wide": (_svd_loss((3, 5)), general((3, 5), 10), False),
    "svd_values": (lambda a: mx.sum(weights((3,), 11) * mx.linalg.svd(a, compute_uv=False, stream=CPU)), general((5, 3), 12), False),
    "eigh": (_eigh_loss(4), spd(4, 13), True),
    "eigvalsh": (lambda a: mx.sum(weights((4,), 14) * mx.linalg.eigvalsh(a, stream=CPU)), spd(4, 15), True),
    "eigh_upper": (lambda a: mx.sum(weights((4,), 16) * mx.linalg.eigh(a, UPLO="U", stream=CPU)[0]), spd(4, 17), True),
    "cholesky": (lambda a: mx.sum(weights((4, 4), 18) * mx.linalg.cholesky(a, stream=CPU)), spd(4, 19), True),
    "cholesky_upper": (lambda a: mx.sum(weights((4, 4), 20) * mx.linalg.cholesky(a, upper=True, stream=CPU)), spd(4, 21), True),
    "inv": (lambda a: mx.sum(weights((4, 4), 22) * mx.linalg.inv(a, stream=CPU)), well_conditioned(4, 23), False),
    "tri_inv": (lambda a: mx.sum(weights((4, 4), 24) * mx.linalg.tri_inv(a, stream=CPU)), well_conditioned(4, 25), False),
    "tri_inv_upper": (lambda a: mx.sum(weights((4, 4), 26) * mx.linalg.tri_inv(a, upper=True, stream=CPU)), well_conditioned(4, 27), False),
    "cholesky_inv": (lambda a: mx.sum(weights((4, 4), 28) * mx.linalg.cholesky_inv(a, stream=CPU)), well_conditioned(4, 29), False),
    "solve_a": (lambda a: mx.sum(weights((4, 2), 30) * mx.linalg.solve(a, weights((4, 2), 31), stream=CPU)), well_conditioned(4, 32), False),
    "solve_b": (lambda b: mx.sum(weights((4, 2), 33) * mx.linalg.solve(f64(well_conditioned(4, 34)), b, stream=CPU)), general((4, 2), 35), False),
    "solve_triangular": (lambda a: mx.sum(weights((4,), 36) * mx.linalg.solve_triangular(a, weights((4,), 37), stream=CPU)), well_conditioned(4, 38), False),
    "det": (lambda a: mx.linalg.det(a, stream=CPU), general((4, 4), 39), False),
    "slogdet": (lambda a: mx.linalg.slogdet(a, stream=CPU)[1], general((4, 4), 40), False),
    "lu_factor": (lambda a: mx.sum(weights((4, 4), 41) * mx.linalg.lu_factor(a, stream=CPU)[0]), general((4, 4), 42), False),
    "lu": (lambda a: mx.sum(weights((4, 4), 43) * mx.linalg.lu(a, stream=CPU)[1]) + mx.sum(weights((4, 4), 44) * mx.linalg.lu(a, stream=CPU)[2]), general((4, 4), 45), False),
    "pinv": (lambda a: mx.sum(weights((3, 5), 46) * mx.linalg.pinv(a, stream=CPU)), general((5, 3), 47), False),
    "norm_2": (lambda a: mx.linalg.norm(a, ord=2), general((4, 3), 48), False),
    "norm_nuc": (lambda a: mx.linalg.norm(a, ord="nuc"), general((4, 3), 49), False),
    "norm_fro": (lambda a: mx.linalg.norm(a, ord="fro"), general((4, 3), 50), False),
    "norm_inf": (lambda a: mx.linalg.norm(a, ord=np.inf), general((4, 3), 51), False),
    "norm_vec3": (lambda a: mx.linalg.norm(a, ord=3), general((6,), 52), False),
    "cross": (lambda a: mx.sum(weights((2, 3), 53) * mx.linalg.cross(a, weights((2, 3), 54))), general((2, 3), 55), False),
}


def direction(x, symmetric, seed):
    e = rng(seed).standard_normal(x.shape)
    return (e + e.T) / 2 if symmetric else e


def fd(loss, x, e, h=1e-6):
    up = loss(f64(x + h * e)).item()
    down = loss(f64(x - h * e)).item()
    return (up - down) / (2 * h)


@pytest.mark.loom_only
@pytest.mark.parametrize("name", sorted(CASES))
def test_vjp_matches_finite_differences(name):
    loss, x, symmetric = CASES[name]
    g = np.array(mx.grad(loss)(f64(x)))
    for seed in (100, 101):
        e = direction(x, symmetric, seed)
        want = fd(loss, x, e)
        assert abs(np.sum(g * e) - want) <= 1e-6 * max(1.0, abs(want)), (np.sum(g * e), want)


@pytest.mark.loom_only
@pytest.mark.parametrize("name", sorted(CASES))
def test_jvp_matches_finite_differences(name):
    loss, x, symmetric = CASES[name]
    if name in ("qr_wide", "svd_tall", "svd_wide", "pinv"):
        # The forward rules for wide QR and for the full U / Vt of non-square
        # matrices are not defined (they raise; see the next test).
        pytest.skip("forward mode not defined for this shape")
    e = direction(x, symmetric, 102)
    _, (t,) = mx.jvp(loss, [f64(x)], [f64(e)])
    want = fd(loss, x, e)
    assert abs(t.item() - want) <= 1e-6 * max(1.0, abs(want)), (t.item(), want)


@pytest.mark.loom_only
def test_forward_mode_limits_raise_clearly():
    a = f64(general((3, 5)))
    with pytest.raises(ValueError, match=r"\[QRF::jvp\]"):
        mx.jvp(lambda x: mx.linalg.qr(x, stream=CPU)[0], [a], [a])
    with pytest.raises(ValueError, match=r"\[SVD::jvp\]"):
        mx.jvp(lambda x: mx.linalg.svd(x, stream=CPU)[0], [a], [a])


def test_det_gradient_is_cofactor_matrix():
    # MLX has this gradient too: d det(A) / dA = det(A) A^{-T}.
    a = np.array([[4.0, 1.0], [1.0, 3.0]], dtype=np.float32)
    g = mx.grad(lambda x: mx.linalg.det(x, stream=CPU))(mx.array(a))
    np.testing.assert_allclose(np.array(g), [[3, -1], [-1, 4]], rtol=1e-5)


@pytest.mark.loom_only
def test_second_order_gradient_of_inverse():
    # Rules are built from ops: they differentiate again.
    a = well_conditioned(3, 60)
    e = direction(a, False, 61)

    def loss(x):
        return mx.sum(mx.linalg.inv(x, stream=CPU) ** 2)

    def dir_grad(x):
        return mx.sum(mx.grad(loss)(x) * f64(e))

    h = mx.grad(dir_grad)(f64(a))
    e2 = direction(a, False, 62)
    up = dir_grad(f64(a + 1e-5 * e2)).item()
    down = dir_grad(f64(a - 1e-5 * e2)).item()
    want = (up - down) / 2e-5
    assert abs(np.sum(np.array(h) * e2) - want) <= 1e-6 * max(1.0, abs(want))


VMAP_CASES = {
    "qr": lambda a: mx.linalg.qr(a, stream=CPU),
    "svd": lambda a: mx.linalg.svd(a, stream=CPU),
    "inv": lambda a: mx.linalg.inv(a, stream=CPU),
    "cholesky": lambda a: mx.linalg.cholesky(a @ a.T + 4 * mx.eye(4), stream=CPU),
    "eigh": lambda a: mx.linalg.eigh(a + a.T, stream=CPU),
    "eig": lambda a: mx.linalg.eigvals(a, stream=CPU),
    "lu_factor": lambda a: mx.linalg.lu_factor(a, stream=CPU),
    "det": lambda a: mx.linalg.det(a, stream=CPU),
    "solve": lambda a: mx.linalg.solve(a + 4 * mx.eye(4), mx.ones((4,)), stream=CPU),
    "norm": lambda a: mx.linalg.norm(a, ord=2),
}


@pytest.mark.loom_only
@pytest.mark.parametrize("name", sorted(VMAP_CASES))
def test_vmap_matches_a_loop(name):
    fn = VMAP_CASES[name]
    xs = mx.array(general((3, 4, 4), 70).astype(np.float32))
    for in_axis, batch in ((0, xs), (2, mx.moveaxis(xs, 0, 2))):
        got = mx.vmap(fn, in_axes=in_axis)(batch)
        got = got if isinstance(got, (list, tuple)) else [got]
        loop = [fn(xs[i]) for i in range(3)]
        loop = [x if isinstance(x, (list, tuple)) else [x] for x in loop]
        for j, g in enumerate(got):
            want = np.stack([np.array(l[j]) for l in loop])
            np.testing.assert_allclose(np.array(g), want, rtol=1e-4, atol=1e-5)


@pytest.mark.loom_only
def test_grad_of_vmapped_solve():
    a = f64(np.stack([well_conditioned(3, 80), well_conditioned(3, 81)]))
    b = f64(general((2, 3), 82))
    g = mx.grad(lambda x: mx.sum(mx.vmap(lambda m, v: mx.linalg.solve(m, v, stream=CPU))(x, b)))(a)
    for i in range(2):
        gi = mx.grad(lambda m: mx.sum(mx.linalg.solve(m, b[i], stream=CPU)))(a[i])
        np.testing.assert_allclose(np.array(g[i]), np.array(gi), rtol=1e-10)


@pytest.mark.parametrize("x_shape", [(6, 5), (3, 6, 5), (2, 3, 4, 5), (1, 5), (5,)])
@pytest.mark.parametrize("transposed", [False, True])
def test_matmul_weight_gradient_shared_by_a_batch(x_shape, transposed):
    # d/dW of sum(c * (x @ W)) and of x @ W.T (nn.Linear's form), x with any
    # number of batch dimensions: the batch is folded into one product and a
    # transposed weight gets its gradient in its own layout; the values are
    # those of the batched products summed.
    r = rng(11)
    x = r.normal(size=x_shape).astype(np.float32)
    w = r.normal(size=(4, 5) if transposed else (5, 4)).astype(np.float32)
    out_shape = x_shape[:-1] + (4,)
    c = r.normal(size=out_shape).astype(np.float32)

    def loss(w, x):
        y = x @ (w.T if transposed else w)
        return (y * mx.array(c)).sum()

    gw, gx = mx.grad(loss, argnums=(0, 1))(mx.array(w), mx.array(x))
    x2 = x.reshape(-1, 5).astype(np.float64)
    c2 = c.reshape(-1, 4).astype(np.float64)
    want_w = x2.T @ c2
    if transposed:
        want_w = want_w.T
    w_eff = (w.T if transposed else w).astype(np.float64)
    assert gw.shape == w.shape and gx.shape == x.shape
    np.testing.assert_allclose(np.array(gw), want_w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.array(gx), (c2 @ w_eff.T).reshape(x_shape), rtol=1e-5, atol=1e-5)
    # Updating the weight with its gradient reads it as the weight's layout.
    np.testing.assert_allclose(np.array(mx.array(w) - 0.5 * gw), w - 0.5 * want_w, rtol=1e-5, atol=1e-5)
