"""quantize / dequantize / quantized_matmul / gather_qmm / qqmm.

Bit-exactness: data/mlx_quantized.npz holds inputs and MLX 0.32.4's outputs
(made by data/make_quantized_fixtures.py with the MLX wheel); quantize must
give the same codes, scales and biases, and dequantize the same values.
Products are checked against x @ dequantize(w).T; gradients against the same
composite. Every test also runs against MLX (LOOM_TEST_ORACLE=mlx) except
those marked loom_only (MLX's CPU lacks vmap of quantized_matmul and qqmm
beyond one row)."""

import gc
import os

import numpy as np
import pytest

from _backend import IS_MLX, mx

FIX = np.load(os.path.join(os.path.dirname(__file__), "data", "mlx_quantized.npz"))
DTYPES = {"float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}
AFFINE_BITS = (1, 2, 3, 4, 5, 6, 8)
FP_MODES = ("mxfp4", "mxfp8", "nvfp4")


def as_np(a):
    return np.array(a.astype(mx.float32)) if a.dtype not in (mx.uint8, mx.uint32) else np.array(a)


def fixture_input(name):
    return mx.array(FIX[f"w_{name}"]).astype(DTYPES[name])


# --- bit-exact against MLX -------------------------------------------------------


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("gs", [32, 64, 128])
@pytest.mark.parametrize("bits", AFFINE_BITS)
def test_affine_quantize_matches_mlx_bit_for_bit(name, gs, bits):
    w = fixture_input(name)
    q, s, b = mx.quantize(w, gs, bits)
    key = f"affine_{name}_{gs}_{bits}"
    assert q.dtype == mx.uint32 and s.dtype == DTYPES[name] and b.dtype == DTYPES[name]
    np.testing.assert_array_equal(np.array(q), FIX[key + "_q"])
    np.testing.assert_array_equal(as_np(s), FIX[key + "_s"])
    np.testing.assert_array_equal(as_np(b), FIX[key + "_b"])


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("gs", [32, 64, 128])
@pytest.mark.parametrize("bits", AFFINE_BITS)
def test_affine_dequantize_of_mlx_codes_matches_mlx(name, gs, bits):
    key = f"affine_{name}_{gs}_{bits}"
    dt = DTYPES[name]
    q = mx.array(FIX[key + "_q"])
    s = mx.array(FIX[key + "_s"]).astype(dt)
    b = mx.array(FIX[key + "_b"]).astype(dt)
    d = mx.dequantize(q, s, b, gs, bits)
    assert d.dtype == dt
    np.testing.assert_array_equal(as_np(d), FIX[key + "_d"])


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("mode", FP_MODES)
def test_fp_modes_match_mlx_bit_for_bit(name, mode):
    w = fixture_input(name)
    q, s = mx.quantize(w, mode=mode)
    key = f"{mode}_{name}"
    assert s.dtype == mx.uint8
    np.testing.assert_array_equal(np.array(q), FIX[key + "_q"])
    np.testing.assert_array_equal(np.array(s), FIX[key + "_s"])
    qm, sm = mx.array(FIX[key + "_q"]), mx.array(FIX[key + "_s"])
    d = mx.dequantize(qm, sm, mode=mode)
    assert d.dtype == mx.bfloat16  # MLX's default when scales carry no float type
    np.testing.assert_array_equal(as_np(d), FIX[key + "_d"])
    d32 = mx.dequantize(qm, sm, mode=mode, dtype=mx.float32)
    np.testing.assert_array_equal(np.array(d32), FIX[key + "_d32"])


def test_nvfp4_global_scale_matches_mlx():
    w = mx.array(FIX["w_float32"])[:6]
    g = mx.array(FIX["nvfp4_global_scale"])
    q, s = mx.quantize(w, mode="nvfp4", global_scale=g)
    np.testing.assert_array_equal(np.array(q), FIX["nvfp4_global_q"])
    np.testing.assert_array_equal(np.array(s), FIX["nvfp4_global_s"])
    d = mx.dequantize(q, s, mode="nvfp4", global_scale=g, dtype=mx.float32)
    np.testing.assert_allclose(np.array(d), FIX["nvfp4_global_d32"], rtol=1e-6, atol=0)


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("src", ["ties", "w"])
@pytest.mark.parametrize("which", [0, 1, 2])
def test_nvfp4_global_scale_matches_mlx_on_every_dtype(name, src, which):
    # Half inputs: MLX divides by the E4M3 scale in the input's type, then
    # multiplies by 448 * 6 / global_scale in float32; near-ties depend on it.
    w = mx.array(FIX[f"{src}_{name}" if src == "ties" else f"w_{name}"]).astype(DTYPES[name])
    key = f"{src}_nvfp4_global{which}_{name}"
    g = mx.array(FIX[key + "_g"])
    q, s = mx.quantize(w, mode="nvfp4", global_scale=g)
    np.testing.assert_array_equal(np.array(q), FIX[key + "_q"])
    np.testing.assert_array_equal(np.array(s), FIX[key + "_s"])
    d = mx.dequantize(mx.array(FIX[key + "_q"]), mx.array(FIX[key + "_s"]), mode="nvfp4",
                      global_scale=g, dtype=DTYPES[name])
    assert d.dtype == mx.float32  # promoted with the float32 global scale, as MLX does
    np.testing.assert_array_equal(np.array(d), FIX[key + "_d"])


@pytest.mark.parametrize("name", list(DTYPES))
def test_quantize_near_ties_matches_mlx_bit_for_bit(name):
    w = mx.array(FIX[f"ties_{name}"]).astype(DTYPES[name])
    for gs in (32, 64, 128):
        for bits in AFFINE_BITS:
            q, s, b = mx.quantize(w, gs, bits)
            key = f"ties_affine_{name}_{gs}_{bits}"
            np.testing.assert_array_equal(np.array(q), FIX[key + "_q"], err_msg=key)
            np.testing.assert_array_equal(as_np(s), FIX[key + "_s"], err_msg=key)
            np.testing.assert_array_equal(as_np(b), FIX[key + "_b"], err_msg=key)
    for mode in FP_MODES:
        q, s = mx.quantize(w, mode=mode)
        np.testing.assert_array_equal(np.array(q), FIX[f"ties_{mode}_{name}_q"], err_msg=mode)
        np.testing.assert_array_equal(np.array(s), FIX[f"ties_{mode}_{name}_s"], err_msg=mode)


@pytest.mark.parametrize("shape,kw,message", [
    ((64,), {"group_size": 48}, "[quantize] The matrix to be quantized must have at least 2 dimension"),
    ((4, 64), {"group_size": 48, "bits": 7},
     "[quantize] The last dimension of the matrix needs to be divisible by the quantization group "
     "size 48. However the provided  matrix has shape (4,64)"),
    ((4, 60), {"group_size": 32, "bits": 7}, "group size 32. However the provided  matrix has shape (4,60)"),
    ((4, 96), {"group_size": 48}, "[quantize] The requested group size 48 is not supported."),
    ((4, 64), {"group_size": 32, "bits": 7}, "[quantize] The requested number of bits 7 is not supported."),
    ((4, 48), {"group_size": 32, "mode": "nvfp4"}, "size 32. However the provided  matrix has shape (4,48)"),
    ((4, 64), {"group_size": 32, "mode": "nvfp4"}, "[quantize] nvfp4 quantization requires group size 16 but got 32."),
])
def test_quantize_checks_the_matrix_before_the_parameters(shape, kw, message):
    # MLX's order: rank, type and divisibility of the matrix, then group size
    # and bits; the divisibility message names the shape.
    with pytest.raises(ValueError) as info:
        mx.quantize(mx.ones(shape), **kw)
    assert message in str(info.value)


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("mode", ["mxfp4", "mxfp8", "nvfp4", "nvfp4g"])
def test_fp_modes_with_non_finite_and_huge_values_match_mlx(name, mode):
    # A NaN propagates through the group maximum; mx scales of inf/NaN are
    # byte 128 (float32) or 0 (half), mxfp4 divides by them and mxfp8 by
    # zero; E2M1 of an inf, a NaN or a huge quotient is MLX's nearest-value
    # search (code 0).
    w = mx.array(FIX["special"]).astype(DTYPES[name])
    kw = {"mode": "nvfp4", "global_scale": mx.array(np.float32(2.0))} if mode == "nvfp4g" else {"mode": mode}
    q, s = mx.quantize(w, **kw)
    key = f"special_{mode}_{name}"
    np.testing.assert_array_equal(np.array(s), FIX[key + "_s"])
    np.testing.assert_array_equal(np.array(q), FIX[key + "_q"])


@pytest.mark.loom_only  # MLX 0.32.4 raises "[reshape] Cannot reshape array of size 16 into shape (0,4,8)"
def test_nvfp4_of_a_single_group():
    # The E2M1 grid times 0.5 (an exact E4M3 scale): the round trip is exact.
    grid = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, 0, -.5, -1, -1.5, -2, -3, -4, -6], np.float32)
    w = mx.array(0.5 * grid[None])
    q, s = mx.quantize(w, mode="nvfp4")
    assert q.shape == (1, 2) and s.shape == (1, 1)
    d = mx.dequantize(q, s, mode="nvfp4", dtype=mx.float32)
    np.testing.assert_array_equal(np.array(d), np.array(w))


def test_affine_packing_is_a_little_endian_bit_stream():
    # Values 0..7 in 3 bits: the larger edge (7) is exact, so the scale is -1,
    # the bias 7 and element i's code 7 - i, at bits [3i, 3i+3) of the row.
    w = mx.array(np.tile(np.arange(8, dtype=np.float32), 4)[None, :])
    q, s, b = mx.quantize(w, 32, 3)
    assert float(s[0, 0]) == -1.0 and float(b[0, 0]) == 7.0
    bits = np.unpackbits(np.array(q).view(np.uint8), bitorder="little")
    codes = (bits.reshape(-1, 3) * [1, 2, 4]).sum(1)
    np.testing.assert_array_equal(codes, 7 - np.tile(np.arange(8), 4))


# --- round trips -----------------------------------------------------------------


@pytest.mark.parametrize("bits", AFFINE_BITS)
@pytest.mark.parametrize("gs", [32, 64, 128])
def test_affine_round_trip_error_is_at_most_half_a_step(bits, gs):
    rng = np.random.default_rng(bits * 1000 + gs)
    wn = (rng.standard_normal((16, 256)) * rng.uniform(0.1, 10, (16, 1))).astype(np.float32)
    q, s, b = mx.quantize(mx.array(wn), gs, bits)
    d = np.array(mx.dequantize(q, s, b, gs, bits))
    err = np.abs(d - wn).reshape(16, -1, gs).max(-1)
    step = np.abs(np.array(s))
    # The rounded scale can move the far edge by up to one step.
    bound = step * (1.0 if bits > 1 else 1.0) + 1e-6 * np.abs(wn).max()
    assert (err <= bound).all()


@pytest.mark.parametrize("mode,rel", [("mxfp4", 0.5), ("mxfp8", 0.125), ("nvfp4", 0.35)])
def test_fp_round_trip_error_is_bounded_by_the_format(mode, rel):
    rng = np.random.default_rng(7)
    wn = rng.standard_normal((8, 128)).astype(np.float32)
    q, s = mx.quantize(mx.array(wn), mode=mode)
    d = np.array(mx.dequantize(q, s, mode=mode, dtype=mx.float32))
    g = 16 if mode == "nvfp4" else 32
    amax = np.abs(wn).reshape(8, -1, g).max(-1, keepdims=True)
    err = np.abs(d - wn).reshape(8, -1, g)
    assert (err <= rel * amax + 1e-7).all()


def test_quantize_of_a_batch_matches_row_by_row():
    rng = np.random.default_rng(3)
    w = mx.array(rng.standard_normal((2, 3, 128)).astype(np.float32))
    q, s, b = mx.quantize(w)
    assert q.shape == (2, 3, 16) and s.shape == (2, 3, 2)
    q2, s2, b2 = mx.quantize(w.reshape(6, 128))
    np.testing.assert_array_equal(np.array(q).reshape(6, 16), np.array(q2))


# --- products --------------------------------------------------------------------


def reference_qmm(x, q, s, b, transpose, gs, bits, mode):
    w = mx.dequantize(q, s, b, gs, bits, mode=mode, dtype=mx.float32)
    x = x.astype(mx.float32)
    return x @ (mx.swapaxes(w, -1, -2) if transpose else w)


CASES = [("affine", 64, b) for b in (2, 3, 4, 5, 6, 8)] + [
    ("affine", 32, 4),
    ("affine", 128, 4),
    ("mxfp4", 32, 4),
    ("mxfp8", 32, 8),
    ("nvfp4", 16, 4),
]


@pytest.mark.parametrize("mode,gs,bits", CASES)
@pytest.mark.parametrize("M", [1, 3, 33])
@pytest.mark.parametrize("transpose", [True, False])
def test_quantized_matmul_matches_the_dequantized_product(mode, gs, bits, M, transpose):
    rng = np.random.default_rng(M * 7 + bits)
    K, N = 256, 128
    w = mx.array(rng.standard_normal((N, K) if transpose else (K, N)).astype(np.float32))
    q, s, *b = mx.quantize(w, gs, bits, mode=mode)
    b = b[0] if b else None
    x = mx.array(rng.standard_normal((M, K)).astype(np.float32))
    y = mx.quantized_matmul(x, q, s, b, transpose, gs, bits, mode)
    ref = reference_qmm(x, q, s, b, transpose, gs, bits, mode)
    assert y.shape == ref.shape and y.dtype == mx.float32
    np.testing.assert_allclose(np.array(y), np.array(ref), rtol=1e-4, atol=1e-3)


def test_quantized_matmul_4bit_large_matvec():
    rng = np.random.default_rng(11)
    w = mx.array(rng.standard_normal((1024, 2048)).astype(np.float32))
    q, s, b = mx.quantize(w)
    x = mx.array(rng.standard_normal((2048,)).astype(np.float32))
    y = mx.quantized_matmul(x, q, s, b)
    assert y.shape == (1024,)
    ref = reference_qmm(x[None], q, s, b, True, 64, 4, "affine")[0]
    np.testing.assert_allclose(np.array(y), np.array(ref), rtol=1e-4, atol=2e-3)


@pytest.mark.parametrize("dt", [mx.float16, mx.bfloat16])
def test_quantized_matmul_half_precision(dt):
    rng = np.random.default_rng(5)
    w = mx.array(rng.standard_normal((64, 128)).astype(np.float32)).astype(dt)
    q, s, b = mx.quantize(w)
    x = mx.array(rng.standard_normal((2, 128)).astype(np.float32)).astype(dt)
    y = mx.quantized_matmul(x, q, s, b)
    assert y.dtype == dt
    ref = reference_qmm(x, q, s, b, True, 64, 4, "affine")
    # Sums of 128 products: MLX accumulates in the half type, Loom in float32.
    np.testing.assert_allclose(as_np(y), np.array(ref), rtol=2e-2, atol=0.6)


def test_quantized_matmul_batches_broadcast():
    rng = np.random.default_rng(9)
    w = mx.array(rng.standard_normal((3, 32, 64)).astype(np.float32))
    q, s, b = mx.quantize(w)
    x = mx.array(rng.standard_normal((2, 1, 5, 64)).astype(np.float32))
    y = mx.quantized_matmul(x, q, s, b)
    assert y.shape == (2, 3, 5, 32)
    np.testing.assert_allclose(
        np.array(y), np.array(reference_qmm(x, q, s, b, True, 64, 4, "affine")), rtol=1e-4,
        atol=1e-3,
    )
    x3 = mx.array(rng.standard_normal((4, 5, 64)).astype(np.float32))
    y3 = mx.quantized_matmul(x3, q[0], s[0], b[0])
    assert y3.shape == (4, 5, 32)


def test_quantized_matmul_output_dtype_follows_the_scales():
    w = mx.random.normal((32, 64))
    q, s, b = mx.quantize(w)
    assert mx.quantized_matmul(mx.ones((1, 64), mx.int32), q, s, b).dtype == mx.float32
    assert mx.quantized_matmul(mx.ones((1, 64), mx.bfloat16), q, s, b).dtype == mx.float32


# --- gradients and transforms ----------------------------------------------------


def test_vjp_wrt_x_scales_and_biases_matches_the_composite():
    rng = np.random.default_rng(2)
    w = mx.array(rng.standard_normal((32, 128)).astype(np.float32))
    q, s, b = mx.quantize(w)
    x = mx.array(rng.standard_normal((3, 128)).astype(np.float32))

    def f(x, s, b):
        return (mx.quantized_matmul(x, q, s, b) ** 2).sum()

    def g(x, s, b):
        return ((x @ mx.dequantize(q, s, b).T) ** 2).sum()

    got = mx.grad(f, argnums=(0, 1, 2))(x, s, b)
    want = mx.grad(g, argnums=(0, 1, 2))(x, s, b)
    for a, r in zip(got, want):
        np.testing.assert_allclose(np.array(a), np.array(r), rtol=1e-3, atol=1e-2)


def test_vjp_wrt_x_untransposed_and_fp_mode():
    rng = np.random.default_rng(4)
    w = mx.array(rng.standard_normal((128, 64)).astype(np.float32))
    q, s, b = mx.quantize(w)
    x = mx.array(rng.standard_normal((2, 128)).astype(np.float32))
    got = mx.grad(lambda x: mx.quantized_matmul(x, q, s, b, transpose=False).sum())(x)
    wd = mx.dequantize(q, s, b)
    np.testing.assert_allclose(np.array(got), np.array(mx.ones((2, 64)) @ wd.T), rtol=1e-4,
                               atol=1e-3)
    qm, sm = mx.quantize(w.T, mode="mxfp4")
    got = mx.grad(lambda x: mx.quantized_matmul(x, qm, sm, mode="mxfp4").sum())(x)
    wd = mx.dequantize(qm, sm, mode="mxfp4", dtype=mx.float32)
    np.testing.assert_allclose(np.array(got), np.array(mx.ones((2, 64)) @ wd), rtol=1e-4,
                               atol=1e-3)


def test_no_gradient_wrt_the_quantized_weight():
    w = mx.random.normal((32, 64))
    q, s, b = mx.quantize(w)
    x = mx.random.normal((1, 64))
    with pytest.raises(Exception, match="quantized"):
        mx.grad(lambda qf: mx.quantized_matmul(x, qf.astype(mx.uint32), s, b).sum())(
            q.astype(mx.float32)
        ) if IS_MLX else mx.vjp(lambda q: mx.quantized_matmul(x, q, s, b), [q], [mx.ones((1, 32))])


@pytest.mark.parametrize("bits", [1, 4])
def test_quantize_gradient_of_scales_and_biases_matches_mlx(bits):
    w = mx.array(FIX["w_float32"])
    cs, cb = mx.array(FIX["grad_cs"]), mx.array(FIX["grad_cb"])

    def f(w):
        _, s, b = mx.quantize(w, 64, bits)
        return (s * cs).sum() + (b * cb).sum()

    got, want = np.array(mx.grad(f)(w)), FIX[f"grad_quantize_{bits}"]
    # MLX's composite divides by a zero code on an all-zero group (row 6) and
    # returns NaN there; Loom returns that group's finite one-sided value.
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-6)
    if not IS_MLX:
        assert np.isfinite(got).all()


def test_jvp_of_quantized_matmul():
    rng = np.random.default_rng(6)
    w = mx.array(rng.standard_normal((16, 64)).astype(np.float32))
    q, s, b = mx.quantize(w)
    x = mx.array(rng.standard_normal((2, 64)).astype(np.float32))
    t = mx.array(rng.standard_normal((2, 64)).astype(np.float32))
    _, (jt,) = mx.jvp(lambda x: mx.quantized_matmul(x, q, s, b), [x], [t])
    np.testing.assert_allclose(np.array(jt), np.array(mx.quantized_matmul(t, q, s, b)),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.loom_only
def test_vmap_of_quantized_matmul_over_x_and_over_the_weights():
    rng = np.random.default_rng(8)
    w = mx.array(rng.standard_normal((3, 16, 64)).astype(np.float32))
    q, s, b = mx.quantize(w)
    xs = mx.array(rng.standard_normal((4, 2, 64)).astype(np.float32))
    y = mx.vmap(lambda x: mx.quantized_matmul(x, q[0], s[0], b[0]))(xs)
    np.testing.assert_allclose(np.array(y), np.array(mx.quantized_matmul(xs, q[0], s[0], b[0])),
                               rtol=1e-5, atol=1e-5)
    x = xs[0]
    y = mx.vmap(lambda q, s, b: mx.quantized_matmul(x, q, s, b))(q, s, b)
    assert y.shape == (3, 2, 16)
    for i in range(3):
        np.testing.assert_allclose(
            np.array(y[i]), np.array(mx.quantized_matmul(x, q[i], s[i], b[i])), rtol=1e-5,
            atol=1e-5,
        )


def test_vmap_of_quantize_and_dequantize():
    rng = np.random.default_rng(10)
    w = mx.array(rng.standard_normal((3, 4, 64)).astype(np.float32))
    q, s, b = mx.vmap(lambda w: mx.quantize(w))(w)
    q2, s2, b2 = mx.quantize(w)
    np.testing.assert_array_equal(np.array(q), np.array(q2))
    d = mx.vmap(lambda q: mx.dequantize(q, s2[0], b2[0]))(q2)
    np.testing.assert_array_equal(np.array(d[0]), np.array(mx.dequantize(q2[0], s2[0], b2[0])))


# --- gather_qmm and qqmm ---------------------------------------------------------


def test_gather_qmm_matches_per_matrix_products():
    rng = np.random.default_rng(12)
    w = mx.array(rng.standard_normal((4, 32, 128)).astype(np.float32))
    q, s, b = mx.quantize(w)
    x = mx.array(rng.standard_normal((3, 2, 128)).astype(np.float32))
    lhs = mx.array([0, 2, 1, 1])
    rhs = mx.array([3, 0, 0, 2])
    y = mx.gather_qmm(x, q, s, b, lhs_indices=lhs, rhs_indices=rhs)
    assert y.shape == (4, 2, 32)
    for i, (li, ri) in enumerate(zip([0, 2, 1, 1], [3, 0, 0, 2])):
        np.testing.assert_allclose(
            np.array(y[i]), np.array(mx.quantized_matmul(x[li], q[ri], s[ri], b[ri])),
            rtol=1e-5, atol=1e-5,
        )
    # Only rhs: x broadcast against the index batch.
    y = mx.gather_qmm(x[0, :1], q, s, b, rhs_indices=mx.array([[1], [0]]))
    assert y.shape == (2, 1, 1, 32)


def _gather_qmm_vmap_case(seed, mode):
    rng = np.random.default_rng(seed)
    V = 3
    kw = {"mode": mode} if mode != "affine" else {"group_size": 32, "bits": 4}
    ws = mx.array(rng.standard_normal((V, 4, 16, 64)).astype(np.float32))
    parts = [mx.quantize(ws[i], **kw) for i in range(V)]
    stacked = [mx.stack([p[j] for p in parts]) for j in range(len(parts[0]))]
    x = mx.array(rng.standard_normal((V, 3, 2, 64)).astype(np.float32))
    lhs = mx.array(rng.integers(0, 3, (V, 5)).astype(np.int32))
    rhs = mx.array(rng.integers(0, 4, (V, 5)).astype(np.int32))
    return kw, stacked, x, lhs, rhs


@pytest.mark.loom_only  # MLX 0.32.4 has no vmap rule for gather_qmm
@pytest.mark.parametrize("mode", ["affine", "mxfp4", "nvfp4"])
@pytest.mark.parametrize("mapped", ["x", "w", "lhs", "rhs", "x_rhs", "w_lhs", "all"])
def test_gather_qmm_under_vmap_matches_a_loop(mode, mapped):
    kw, wparts, x, lhs, rhs = _gather_qmm_vmap_case(21, mode)
    V = x.shape[0]
    names = ["x", "w", "lhs", "rhs"]
    on = {n: mapped == "all" or n in mapped.split("_") for n in names}

    def f(x, wparts, lhs, rhs):
        s, b = wparts[1], (wparts[2] if len(wparts) > 2 else None)
        return mx.gather_qmm(x, wparts[0], s, b, lhs_indices=lhs, rhs_indices=rhs, **kw)

    args = [x if on["x"] else x[0], wparts if on["w"] else [p[0] for p in wparts],
            lhs if on["lhs"] else lhs[0], rhs if on["rhs"] else rhs[0]]
    in_axes = tuple(0 if on[n] else None for n in names)
    got = mx.vmap(f, in_axes=in_axes)(*args)
    for v in range(V):
        i = {n: v if on[n] else 0 for n in names}
        pick = [x[i["x"]], [p[i["w"]] for p in wparts], lhs[i["lhs"]], rhs[i["rhs"]]]
        np.testing.assert_allclose(np.array(got[v]), np.array(f(*pick)), rtol=1e-5, atol=1e-5)


@pytest.mark.loom_only
def test_gather_qmm_vmap_on_a_later_axis_and_with_grad():
    kw, wparts, x, lhs, rhs = _gather_qmm_vmap_case(22, "affine")
    q, s, b = wparts
    xt = mx.moveaxis(x, 0, 2)  # mapped axis 2 of (3, 2, V, 64)

    def f(x, rhs):
        return mx.gather_qmm(x, q[0], s[0], b[0], lhs_indices=lhs[0], rhs_indices=rhs, **kw)

    got = mx.vmap(f, in_axes=(2, 0))(xt, rhs)
    for v in range(x.shape[0]):
        np.testing.assert_allclose(np.array(got[v]), np.array(f(x[v], rhs[v])), rtol=1e-5,
                                   atol=1e-5)
    # vmap of a gradient: the backward gather_qmm is batched too.
    gfun = mx.vmap(mx.grad(lambda x, rhs: f(x, rhs).sum()))
    gv = gfun(x, rhs)
    for v in range(x.shape[0]):
        ref = mx.grad(lambda x: f(x, rhs[v]).sum())(x[v])
        np.testing.assert_allclose(np.array(gv[v]), np.array(ref), rtol=1e-4, atol=1e-4)


def test_gather_qmm_gradient_wrt_x():
    rng = np.random.default_rng(13)
    w = mx.array(rng.standard_normal((2, 16, 64)).astype(np.float32))
    q, s, b = mx.quantize(w)
    x = mx.array(rng.standard_normal((2, 1, 64)).astype(np.float32))
    lhs, rhs = mx.array([0, 0, 1]), mx.array([1, 0, 1])

    def f(x):
        return mx.gather_qmm(x, q, s, b, lhs_indices=lhs, rhs_indices=rhs).sum()

    def g(x):
        return sum(
            mx.quantized_matmul(x[i], q[j], s[j], b[j]).sum() for i, j in [(0, 1), (0, 0), (1, 1)]
        )

    np.testing.assert_allclose(np.array(mx.grad(f)(x)), np.array(mx.grad(g)(x)), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("mode", ["nvfp4", "mxfp8"])
def test_qqmm_single_row_with_quantized_weight(mode):
    rng = np.random.default_rng(14)
    w = mx.array(rng.standard_normal((32, 64)).astype(np.float32))
    x = mx.array(rng.standard_normal((1, 64)).astype(np.float32))
    q, s = mx.quantize(w, mode=mode)
    y = mx.qqmm(x, q, s, mode=mode)
    xq = mx.dequantize(*mx.quantize(x, mode=mode), mode=mode, dtype=mx.float32)
    ref = xq @ mx.dequantize(q, s, mode=mode, dtype=mx.float32).T
    np.testing.assert_allclose(np.array(y), np.array(ref), rtol=1e-4, atol=1e-4)


@pytest.mark.loom_only
def test_qqmm_general_case_quantizes_both_operands():
    rng = np.random.default_rng(15)
    w = mx.array(rng.standard_normal((32, 64)).astype(np.float32))
    x = mx.array(rng.standard_normal((4, 64)).astype(np.float32))
    y = mx.qqmm(x, w)
    xq = mx.dequantize(*mx.quantize(x, mode="nvfp4"), mode="nvfp4", dtype=mx.float32)
    wq = mx.dequantize(*mx.quantize(w, mode="nvfp4"), mode="nvfp4", dtype=mx.float32)
    np.testing.assert_allclose(np.array(y), np.array(xq @ wq.T), rtol=1e-4, atol=1e-4)
    # Gradient wrt the float weight flows (straight through the rounding of x).
    gw = mx.grad(lambda w: mx.qqmm(x, w).sum())(w)
    assert gw.shape == w.shape


# --- errors ----------------------------------------------------------------------


W = None


def weights():
    w = mx.random.normal((64, 128), key=mx.random.key(0))
    return (w,) + tuple(mx.quantize(w))


ERRORS = [
    (lambda w, q, s, b: mx.quantize(w, 16, 4),
     "[quantize] The requested group size 16 is not supported. The supported group sizes are "
     "32, 64, and 128."),
    (lambda w, q, s, b: mx.quantize(w, 64, 7),
     "[quantize] The requested number of bits 7 is not supported. The supported bits are 1, 2, "
     "3, 4, 5, 6 and 8."),
    (lambda w, q, s, b: mx.quantize(w[0], 64, 4),
     "[quantize] The matrix to be quantized must have at least 2 dimension but it has only 1."),
    (lambda w, q, s, b: mx.quantize(w[:, :96], 64, 4),
     "[quantize] The last dimension of the matrix needs to be divisible by the quantization "
     "group size 64. However the provided  matrix has shape (64,96)"),
    (lambda w, q, s, b: mx.quantize(w.astype(mx.int32)),
     "[quantize] Only real floating types can be quantized but w has type int32."),
    (lambda w, q, s, b: mx.quantize(w, mode="foo"), "[quantize] Invalid quantization mode 'foo'."),
    (lambda w, q, s, b: mx.quantize(w, 64, mode="mxfp4"),
     "[quantize] mxfp4 quantization requires group size 32 but got 64."),
    (lambda w, q, s, b: mx.quantize(w, 32, 8, mode="mxfp4"),
     "[quantize] mxfp4 quantization requires bits to be 4 but got 8."),
    (lambda w, q, s, b: mx.quantize(w, mode="mxfp4", global_scale=mx.array(1.0)),
     "[quantize] Global scale is only supported for 'nvfp4' quantization mode."),
    (lambda w, q, s, b: mx.dequantize(q, s),
     "[dequantize] Biases must be provided for affine quantization."),
    (lambda w, q, s, b: mx.dequantize(q, s.astype(mx.uint8), b, mode="mxfp4"),
     "[dequantize] Biases must be null for quantization mode 'mxfp4'."),
    (lambda w, q, s, b: mx.dequantize(q, s, mode="mxfp4"),
     "[dequantize] Scale type must be uint8 but received type float32."),
    (lambda w, q, s, b: mx.dequantize(q, s[:, :1], b[:, :1]),
     "[dequantize] Shape of scales and biases does not match the matrix given the quantization "
     "parameters. Provided matrix of shape (64,16) and scales/biases of shape (64,1) with "
     "group_size=64 and bits=4."),
    (lambda w, q, s, b: mx.dequantize(q, s, b, dtype=mx.int32),
     "[dequantize] Only real floating types are supported but output dtype == int32."),
    (lambda w, q, s, b: mx.dequantize(w, s, b), "[dequantize] The matrix should be given as a uint32"),
    (lambda w, q, s, b: mx.dequantize(q[0], s[0], b[0]),
     "[dequantize] The matrix to be dequantized must have at least 2 dimension but it has only 1."),
    (lambda w, q, s, b: mx.quantized_matmul(mx.zeros((4, 64)), q, s, b),
     "[quantized_matmul] Last dimension of first input with shape (..., 64) does not match the "
     "expanded quantized matrix (128, 64) computed from shape (64,16) with group_size=64, bits=4 "
     "and transpose=true"),
    (lambda w, q, s, b: mx.quantized_matmul(mx.zeros((4, 128)), q, s),
     "[quantized_matmul] Biases must be provided for affine quantization."),
    (lambda w, q, s, b: mx.quantized_matmul(mx.zeros((4, 128)), w, s, b),
     "[quantized_matmul] The weight matrix should be uint32 but received float32"),
    (lambda w, q, s, b: mx.quantized_matmul(mx.zeros((4, 128)), q, s, b[:, :1]),
     "[quantized_matmul] Scales and biases should have the same shape. Received scales with "
     "shape (64,2) and biases with (64,1)"),
    (lambda w, q, s, b: mx.quantized_matmul(mx.zeros((4, 128)), q, s[:, :1], b[:, :1]),
     "[quantized_matmul] The shapes of the weight and scales are incompatible based on bits and "
     "group_size. w.shape() == (64,16) and scales.shape() == (64,1) with group_size=64 and "
     "bits=4"),
    (lambda w, q, s, b: mx.quantized_matmul(mx.zeros((4, 128)), q[0], s[0], b[0]),
     "[quantized_matmul] Weight and scales should have the same batch shape. Received weight "
     "with shape (16), scales with (2)."),
    (lambda w, q, s, b: mx.gather_qmm(mx.zeros((2, 1, 128)), q, s, b,
                                      rhs_indices=mx.array([1.0, 0.0])),
     "[gather_qmm] Got indices with invalid dtype. Indices must be integral."),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_match_mlx(case):
    fn, msg = ERRORS[case]
    with pytest.raises(ValueError) as info:
        out = fn(*weights())
        mx.eval(out)
    assert str(info.value) == msg


# --- memory ----------------------------------------------------------------------


@pytest.mark.loom_only
def test_quantized_graphs_release_their_memory():
    w = mx.random.normal((128, 256))
    x = mx.random.normal((4, 256))
    mx.eval(w, x)

    def cycle():
        q, s, b = mx.quantize(w)
        y = mx.quantized_matmul(x, q, s, b)
        g = mx.grad(lambda x: mx.quantized_matmul(x, q, s, b).sum())(x)
        d = mx.dequantize(q, s, b)
        qs, ss, bs = (mx.stack([a, a]) for a in (q, s, b))
        gq = mx.vmap(lambda x, i: mx.gather_qmm(x, qs, ss, bs, rhs_indices=i),
                     in_axes=(0, 0))(mx.stack([x, x]), mx.array([[0, 1], [1, 1]]))
        mx.eval(y, g, d, gq)

    cycle()
    gc.collect()
    base = mx.get_active_memory()
    for _ in range(20):
        cycle()
    gc.collect()
    assert mx.get_active_memory() <= base


# --- fp8 conversions -------------------------------------------------------------


def test_to_fp8_and_from_fp8_match_mlx():
    x = mx.array([0.53125, 1.0, 448.0, 1000.0, -0.0, float("nan"), 1e-4, 0.001, -500.0,
                  float("inf"), float("-inf"), 0.0009765625, 0.00146484375])
    codes = mx.to_fp8(x)
    assert codes.dtype == mx.uint8
    assert np.array(codes).tolist() == [48, 56, 126, 126, 128, 126, 0, 1, 254, 126, 254, 0, 1]
    assert np.array(mx.to_fp8(x.astype(mx.bfloat16))).tolist() == np.array(codes).tolist()
    back = mx.from_fp8(mx.arange(256).astype(mx.uint8), dtype=mx.float32)
    b = np.array(back)
    assert b[56] == 1.0 and b[126] == 448.0 and np.isnan(b[127]) and b[254] == -448.0
    assert b[1] == 2.0**-9 and b[128] == 0.0 and np.signbit(b[128])
    assert mx.from_fp8(codes).dtype == mx.bfloat16
    finite = [i for i in range(256) if i not in (127, 255)]
    np.testing.assert_array_equal(
        np.array(mx.to_fp8(back))[finite], np.arange(256, dtype=np.uint8)[finite]
    )


def test_fp8_errors_match_mlx():
    with pytest.raises(ValueError) as e:
        mx.to_fp8(mx.array([1, 2]))
    assert str(e.value) == "[to_fp8] Only real floating types are supported but x.dtype() == int32."
    with pytest.raises(ValueError) as e:
        mx.from_fp8(mx.array([1.0]))
    assert str(e.value) == "[from_fp8] Input must have type uint8 but x.dtype() == float32."


def test_quantized_ops_inside_compile():
    w = mx.random.normal((32, 64), key=mx.random.key(3))
    q, s, b = mx.quantize(w)
    x = mx.random.normal((2, 64), key=mx.random.key(4))
    f = mx.compile(lambda x: mx.quantized_matmul(x, q, s, b) * 2 + 1)
    np.testing.assert_allclose(np.array(f(x)), np.array(mx.quantized_matmul(x, q, s, b) * 2 + 1),
                               rtol=1e-6, atol=1e-6)
    g = mx.compile(lambda x: mx.from_fp8(mx.to_fp8(x * 2), dtype=mx.float32) + 1)
    assert np.array(g(mx.array([1.0, 0.3]))).tolist() == [3.0, 1.625]
    dx = mx.grad(mx.compile(lambda x: mx.quantized_matmul(x, q, s, b).sum()))(x)
    np.testing.assert_allclose(np.array(dx), np.array(mx.ones((2, 32)) @ mx.dequantize(q, s, b)),
                               rtol=1e-4, atol=1e-4)
