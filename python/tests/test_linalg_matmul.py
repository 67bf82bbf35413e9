"""The matmul family: gather_mm, segmented_mm, block_masked_mm (values against
NumPy, shapes, dtypes, errors, gradients), half-precision matmul, and
random.multivariate_normal."""

import gc

import numpy as np
import pytest

from _backend import mx

RNG = np.random.default_rng(3)


def rand(shape):
    return RNG.standard_normal(shape).astype(np.float32)


def npa(x):
    return np.array(x)


# --- gather_mm -------------------------------------------------------------------


def test_gather_mm_values():
    a, b = rand((2, 3, 4)), rand((3, 4, 5))
    li, ri = np.array([1, 0, 1]), np.array([0, 2, 2])
    got = mx.gather_mm(mx.array(a), mx.array(b), mx.array(li), mx.array(ri))
    np.testing.assert_allclose(npa(got), a[li] @ b[ri], rtol=1e-5, atol=1e-5)


def test_gather_mm_shapes():
    a, b = mx.array(rand((2, 3, 4))), mx.array(rand((2, 4, 5)))
    assert mx.gather_mm(a, b).shape == (2, 3, 5)
    assert mx.gather_mm(a, b, mx.array([1, 0])).shape == (2, 3, 5)
    assert mx.gather_mm(a, b, mx.array([[1, 0], [0, 0]]), mx.array([[1], [0]])).shape == (2, 2, 3, 5)
    assert mx.gather_mm(mx.ones((4,)), b, None, mx.array([0, 1])).shape == (2, 5)
    assert mx.gather_mm(a, mx.ones((4,)), mx.array([0, 1]), None).shape == (2, 3)
    assert mx.gather_mm(mx.ones((3, 4)), b, None, mx.array([0, 1, 1])).shape == (3, 3, 5)
    assert mx.gather_mm(mx.ones((3, 4)), mx.ones((4, 5))).shape == (3, 5)
    assert mx.gather_mm(a, b, mx.array(1), mx.array(0)).shape == (3, 5)
    out = mx.gather_mm(mx.ones((2, 3, 3, 4)), mx.ones((5, 4, 5)), mx.array([5, 1]), mx.array([4, 0]))
    assert out.shape == (2, 3, 5)
    sorted_out = mx.gather_mm(mx.ones((6, 1, 4)), b, None, mx.array([0, 0, 0, 1, 1, 1]), sorted_indices=True)
    assert sorted_out.shape == (6, 1, 5)
    for dt in (mx.uint32, mx.int64, mx.int16):
        assert mx.gather_mm(a, b, mx.array([1, 0], dtype=dt)).shape == (2, 3, 5)


def test_gather_mm_dtypes():
    a, b = mx.array(rand((2, 3, 4))), mx.array(rand((2, 4, 5)))
    assert mx.gather_mm(a.astype(mx.bfloat16), b.astype(mx.bfloat16)).dtype == mx.bfloat16
    assert mx.gather_mm(a.astype(mx.float16), b).dtype == mx.float32
    assert mx.gather_mm(a.astype(mx.float64), b.astype(mx.float64)).dtype == mx.float64


@pytest.mark.loom_only
def test_gather_mm_computes_every_inexact_dtype():
    # MLX 0.32.4's CPU kernel raises "Currently only supports float32".
    a, b = mx.array(rand((2, 3, 4))), mx.array(rand((2, 4, 5)))
    d = mx.gather_mm(a.astype(mx.float64), b.astype(mx.float64), mx.array([1, 0]))
    np.testing.assert_allclose(npa(d), npa(a)[[1, 0]] @ npa(b), rtol=1e-5, atol=1e-5)
    c = mx.gather_mm(a.astype(mx.complex64), b.astype(mx.complex64))
    np.testing.assert_allclose(npa(c), npa(a) @ npa(b), rtol=1e-5, atol=1e-5)
    h = mx.gather_mm(a.astype(mx.float16), b.astype(mx.float16), mx.array([1, 1]))
    np.testing.assert_allclose(npa(h.astype(mx.float32)), npa(a)[[1, 1]] @ npa(b), rtol=1e-2, atol=1e-2)


def test_gather_mm_errors():
    a, b = mx.array(rand((2, 3, 4))), mx.array(rand((2, 4, 5)))
    with pytest.raises(ValueError, match="Indices must be integral"):
        mx.gather_mm(a, b, mx.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="Indices must be integral"):
        mx.gather_mm(a, b, mx.array([True, False]))
    with pytest.raises(ValueError, match=r"\[matmul\] Only inexact types"):
        mx.gather_mm(a.astype(mx.int32), b.astype(mx.int32))
    with pytest.raises(ValueError, match=r"\[matmul\] Last dimension of first input with shape \(2,3,4\)"):
        mx.gather_mm(a, mx.ones((2, 3, 5)))
    with pytest.raises(ValueError, match="broadcast"):
        mx.gather_mm(a, b, mx.array([[1, 0, 1]]))


@pytest.mark.loom_only
def test_gather_mm_index_out_of_range_raises():
    # MLX reads past the batch and returns garbage.
    with pytest.raises((IndexError, RuntimeError, ValueError), match="out of range"):
        mx.eval(mx.gather_mm(mx.ones((2, 3, 4)), mx.ones((2, 4, 5)), mx.array([5]), mx.array([0])))


def test_gather_mm_gradients():
    a, b = rand((2, 3, 4)), rand((2, 4, 5))
    li, ri = np.array([1, 1, 0]), np.array([0, 1, 1])
    w = rand((3, 3, 5))

    def loss(x, y):
        return mx.sum(mx.array(w) * mx.gather_mm(x, y, mx.array(li), mx.array(ri)))

    ga, gb = mx.grad(loss, argnums=(0, 1))(mx.array(a), mx.array(b))
    want_a = np.zeros_like(a)
    want_b = np.zeros_like(b)
    for i, (l, r) in enumerate(zip(li, ri)):
        want_a[l] += w[i] @ b[r].T
        want_b[r] += a[l].T @ w[i]
    np.testing.assert_allclose(npa(ga), want_a, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(npa(gb), want_b, rtol=1e-4, atol=1e-5)


@pytest.mark.loom_only
def test_gather_mm_jvp_and_vmap():
    a, b = mx.array(rand((2, 3, 4))), mx.array(rand((2, 4, 5)))
    li, ri = mx.array([1, 0]), mx.array([0, 1])
    da, db = mx.array(rand((2, 3, 4))), mx.array(rand((2, 4, 5)))
    _, (t,) = mx.jvp(lambda x, y: mx.gather_mm(x, y, li, ri), [a, b], [da, db])
    want = mx.gather_mm(da, b, li, ri) + mx.gather_mm(a, db, li, ri)
    np.testing.assert_allclose(npa(t), npa(want), rtol=1e-5, atol=1e-5)
    xs = mx.array(rand((3, 2, 3, 4)))
    got = mx.vmap(lambda x: mx.gather_mm(x, b, None, mx.array([1, 0])))(xs)
    want = np.stack([npa(mx.gather_mm(xs[i], b, None, mx.array([1, 0]))) for i in range(3)])
    np.testing.assert_allclose(npa(got), want, rtol=1e-5, atol=1e-5)
    idx = mx.array([[0, 1], [1, 1], [1, 0]])
    got = mx.vmap(lambda i, y: mx.gather_mm(a, y, i), in_axes=(0, None))(idx, b)
    want = np.stack([npa(mx.gather_mm(a, b, idx[i])) for i in range(3)])
    np.testing.assert_allclose(npa(got), want, rtol=1e-5, atol=1e-5)


# --- segmented_mm ------------------------------------------------------------------


def test_segmented_mm_values():
    a, b = rand((3, 6)), rand((6, 5))
    seg = np.array([[0, 2], [2, 6], [1, 4], [3, 3], [4, 2]])
    got = npa(mx.segmented_mm(mx.array(a), mx.array(b), mx.array(seg)))
    want = np.stack([a[:, s0:s1] @ b[s0:s1] if s1 > s0 else np.zeros((3, 5), np.float32) for s0, s1 in seg])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert mx.segmented_mm(mx.array(a), mx.array(b), mx.array(seg.reshape(5, 1, 2))).shape == (5, 1, 3, 5)
    for dt in (mx.int64, mx.uint32):
        assert mx.segmented_mm(mx.array(a), mx.array(b), mx.array(seg, dtype=dt)).shape == (5, 3, 5)
    assert mx.segmented_mm(mx.array(a).astype(mx.float16), mx.array(b), mx.array(seg)).dtype == mx.float32
    f64 = mx.segmented_mm(mx.array(a).astype(mx.float64), mx.array(b).astype(mx.float64), mx.array(seg))
    assert f64.dtype == mx.float64


def test_segmented_mm_errors():
    a, b = mx.ones((3, 4)), mx.ones((4, 5))
    with pytest.raises(ValueError, match=r"\[segmented_mm\] The segments should have shape \(\.\.\., 2\)"):
        mx.segmented_mm(a, b, mx.array([0, 2, 4]))
    with pytest.raises(ValueError, match=r"\[segmented_mm\] Batched matmul not supported"):
        mx.segmented_mm(mx.ones((2, 3, 4)), mx.ones((2, 4, 5)), mx.array([[0, 2]]))
    with pytest.raises(ValueError, match="Segments must be integral"):
        mx.segmented_mm(a, b, mx.array([[0.0, 2.0]]))
    with pytest.raises(ValueError, match="Only real floating point types are supported"):
        mx.segmented_mm(a.astype(mx.int32), b.astype(mx.int32), mx.array([[0, 2]]))
    with pytest.raises(ValueError, match="Only real floating point types are supported"):
        mx.segmented_mm(a.astype(mx.complex64), b, mx.array([[0, 2]]))


@pytest.mark.loom_only
def test_segmented_mm_loom_checks():
    # MLX neither checks the inner dimensions nor the segment bounds (SGEMM
    # aborts the process).
    with pytest.raises(ValueError, match="must match"):
        mx.segmented_mm(mx.ones((3, 4)), mx.ones((3, 5)), mx.array([[0, 2]]))
    with pytest.raises((IndexError, RuntimeError, ValueError), match="out of range"):
        mx.eval(mx.segmented_mm(mx.ones((3, 4)), mx.ones((4, 5)), mx.array([[0, 9]])))


@pytest.mark.loom_only
def test_segmented_mm_gradients_and_vmap():
    a, b = rand((3, 6)), rand((6, 5))
    seg = mx.array([[0, 2], [2, 6], [1, 4]])
    w = rand((3, 3, 5))

    def loss(x, y):
        return mx.sum(mx.array(w) * mx.segmented_mm(x, y, seg))

    ga, gb = mx.grad(loss, argnums=(0, 1))(mx.array(a), mx.array(b))
    want_a, want_b = np.zeros_like(a), np.zeros_like(b)
    for i, (s0, s1) in enumerate(npa(seg)):
        want_a[:, s0:s1] += w[i] @ b[s0:s1].T
        want_b[s0:s1] += a[:, s0:s1].T @ w[i]
    np.testing.assert_allclose(npa(ga), want_a, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(npa(gb), want_b, rtol=1e-4, atol=1e-5)
    xs = mx.array(rand((2, 3, 6)))
    got = mx.vmap(lambda x: mx.segmented_mm(x, mx.array(b), seg))(xs)
    want = np.stack([npa(mx.segmented_mm(xs[i], mx.array(b), seg)) for i in range(2)])
    np.testing.assert_allclose(npa(got), want, rtol=1e-5, atol=1e-5)


# --- block_masked_mm -----------------------------------------------------------------


def expand(mask, bs, rows, cols):
    return np.repeat(np.repeat(mask, bs, -2), bs, -1)[..., :rows, :cols]


@pytest.mark.parametrize("bs", [32, 64])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_block_masked_mm_values(bs, kind):
    m, k, n = 70, 40, 33
    tm, tk, tn = -(-m // bs), -(-k // bs), -(-n // bs)
    a, b = rand((2, m, k)), rand((2, k, n))
    if kind == "bool":
        mo, ml, mr = (RNG.random(s) > 0.4 for s in [(2, tm, tn), (2, tm, tk), (tk, tn)])
    else:
        mo, ml, mr = (RNG.random(s).astype(np.float32) for s in [(2, tm, tn), (2, tm, tk), (tk, tn)])
    got = mx.block_masked_mm(mx.array(a), mx.array(b), bs, mx.array(mo), mx.array(ml), mx.array(mr))
    want = ((a * expand(ml, bs, m, k)) @ (b * expand(mr, bs, k, n))) * expand(mo, bs, m, n)
    np.testing.assert_allclose(npa(got), want, rtol=1e-4, atol=1e-4)
    only_out = mx.block_masked_mm(mx.array(a), mx.array(b), bs, mx.array(mo))
    np.testing.assert_allclose(npa(only_out), (a @ b) * expand(mo, bs, m, n), rtol=1e-4, atol=1e-4)


def test_block_masked_mm_shapes_and_errors():
    a, b = mx.ones((70, 40)), mx.ones((40, 33))
    assert mx.block_masked_mm(a, b).shape == (70, 33)
    assert mx.block_masked_mm(mx.ones((40,)), b, 32).shape == (33,)
    assert mx.block_masked_mm(a.astype(mx.float64), b, 32).dtype == mx.float64
    with pytest.raises(ValueError, match="broadcast"):
        mx.block_masked_mm(a, b, 32, mx.ones((2, 2), dtype=mx.bool_))
    with pytest.raises(ValueError, match=r"\[matmul\] Only inexact types"):
        mx.block_masked_mm(a.astype(mx.int32), b.astype(mx.int32), 32)


def test_block_masked_mm_gradient():
    a, b = rand((70, 40)), rand((40, 33))
    ml = RNG.random((3, 2)) > 0.5
    g = mx.grad(lambda x: mx.sum(mx.block_masked_mm(x, mx.array(b), 32, None, mx.array(ml), None)))(mx.array(a))
    want = np.ones((70, 33), np.float32) @ b.T * expand(ml, 32, 70, 40)
    np.testing.assert_allclose(npa(g), want, rtol=1e-4, atol=1e-4)


# --- half precision matmul and addmm ------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_matmul(dtype):
    a, b = rand((3, 64, 48)), rand((48, 40))
    dt = getattr(mx, dtype)
    got = mx.matmul(mx.array(a).astype(dt), mx.array(b).astype(dt))
    assert got.dtype == dt
    ref = npa(mx.array(a).astype(dt).astype(mx.float32)) @ npa(mx.array(b).astype(dt).astype(mx.float32))
    np.testing.assert_allclose(npa(got.astype(mx.float32)), ref, rtol=2e-2, atol=2e-1)
    # A transposed operand takes the same path.
    got_t = mx.matmul(mx.array(a[0].T).astype(dt).T, mx.array(b).astype(dt))
    np.testing.assert_allclose(npa(got_t.astype(mx.float32)), ref[0], rtol=2e-2, atol=2e-1)


def test_addmm():
    a, b, c = rand((4, 5)), rand((5, 3)), rand((4, 3))
    got = mx.addmm(mx.array(c), mx.array(a), mx.array(b), alpha=2.0, beta=0.5)
    np.testing.assert_allclose(npa(got), 2 * a @ b + 0.5 * c, rtol=1e-5, atol=1e-5)


# --- random.multivariate_normal --------------------------------------------------------------


def test_multivariate_normal_is_mean_plus_z_times_sqrt_cov():
    cov = np.array([[2.0, 1.0], [1.0, 2.0]], np.float32)
    key = mx.random.key(0)
    x = mx.random.multivariate_normal(mx.zeros((2,)), mx.array(cov), key=key)
    z = npa(mx.random.normal((2,), key=key))
    w, v = np.linalg.eigh(cov)
    root = (v * np.sqrt(w)) @ v.T
    np.testing.assert_allclose(npa(x), z @ root, rtol=1e-5, atol=1e-5)


def test_multivariate_normal_shapes_and_statistics():
    key = mx.random.key(1)
    assert mx.random.multivariate_normal(mx.zeros((3,)), mx.eye(3), key=key).shape == (3,)
    assert mx.random.multivariate_normal(mx.zeros((3,)), mx.eye(3), shape=(4, 5), key=key).shape == (4, 5, 3)
    assert mx.random.multivariate_normal(mx.zeros((2, 3)), mx.eye(3), key=key).shape == (2, 3)
    mean = np.array([1.0, 2.0], np.float32)
    cov = np.array([[2.0, 1.0], [1.0, 2.0]], np.float32)
    x = npa(mx.random.multivariate_normal(mx.array(mean), mx.array(cov), shape=(100000,), key=mx.random.key(2)))
    np.testing.assert_allclose(x.mean(0), mean, atol=0.03)
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.05)


MVN_ERRORS = [
    (dict(mean=(3,), cov=(3, 3), dtype="float64"), "[multivariate_normal] dtype must be float32."),
    (dict(mean=(3,), cov=(2, 2)), "[multivariate_normal] mean and cov must have compatible shapes."),
    (dict(mean=(3,), cov=(3, 2)), "[multivariate_normal] last two dimensions of cov must be equal."),
    (dict(mean=(), cov=(2, 2)), "[multivariate_normal] mean must have at least one dimension."),
    (dict(mean=(3,), cov=(3,)), "[multivariate_normal] cov must have at least two dimensions."),
]


@pytest.mark.parametrize("case", range(len(MVN_ERRORS)))
def test_multivariate_normal_errors(case):
    spec, message = MVN_ERRORS[case]
    kwargs = {"dtype": getattr(mx, spec["dtype"])} if "dtype" in spec else {}
    with pytest.raises(ValueError) as info:
        mx.random.multivariate_normal(mx.zeros(spec["mean"]), mx.ones(spec["cov"]), **kwargs)
    assert message in str(info.value)
    with pytest.raises(ValueError, match="broadcast"):
        mx.random.multivariate_normal(mx.zeros((2, 3)), mx.eye(3), shape=(4,))


def test_matmul_family_graphs_release_their_memory():
    a, b = mx.array(rand((4, 8, 8))), mx.array(rand((4, 8, 8)))
    seg = mx.array([[0, 3], [3, 8]])
    mx.eval(a, b, seg)

    def cycle():
        g = mx.grad(lambda x: mx.sum(mx.gather_mm(x, b, mx.array([0, 2]), mx.array([1, 3]))))(a)
        s = mx.segmented_mm(a[0], b[0], seg)
        m = mx.block_masked_mm(a, b, 32, mx.ones((1, 1), dtype=mx.bool_))
        mx.eval(g, s, m)

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
