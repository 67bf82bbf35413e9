"""Matrix products run the CPU's best BLAS kernels without any setting: on a
CPU with AVX2 or better, the OpenBLAS Loom loads must not report a generic
core (Debian's OpenBLAS 0.3.21 falls back to Prescott on CPUs it does not know,
such as Sapphire Rapids, and runs matmul 4-8x slower)."""

import numpy as np
import pytest

from _backend import mx

VECTOR_CORES = {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"}


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@pytest.mark.loom_only
def test_blas_core_is_not_generic_on_avx2_cpus():
    core = mx._blas_core()
    assert core
    flags = _cpu_flags()
    if not {"avx2", "fma"} <= flags:
        pytest.skip(f"CPU without AVX2/FMA: OpenBLAS picks its own core ({core})")
    assert core.lower() in VECTOR_CORES, f"generic BLAS core {core} on a CPU with AVX2"


# --- products split over the intra-op pool (backend/cpu/gemm.cpp) ------------------
# Shapes reach every path: one call (small), panels of rows, panels of
# columns (thin M), matrix-vector products (M == 1 or N == 1) with both
# layouts of each operand, ragged panel edges, and batches.

def _rand(shape, seed, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _ref(a, b):
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


def _close(out, ref, k, rtol=1e-5):
    # float32 accumulation error grows like sqrt(k); scale by the magnitude
    # of the terms, not of the result (which can cancel).
    scale = np.sqrt(k) * rtol * max(1.0, float(np.max(np.abs(ref))))
    np.testing.assert_allclose(np.asarray(out, dtype=np.float64), ref, rtol=0, atol=scale * 10)


@pytest.mark.parametrize("m,n,k", [
    (7, 5, 3), (300, 257, 129), (1000, 64, 300), (40, 1500, 200), (33, 1000, 17),
    (1, 3000, 700), (3000, 1, 700), (1, 1, 4000), (1, 7, 3), (2, 4097, 65),
])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_float32_products_of_every_shape_and_layout(m, n, k, ta, tb):
    a = _rand((k, m) if ta else (m, k), 1)
    b = _rand((n, k) if tb else (k, n), 2)
    am = mx.array(a).T if ta else mx.array(a)
    bm = mx.array(b).T if tb else mx.array(b)
    _close(am @ bm, _ref(a.T if ta else a, b.T if tb else b), k)


@pytest.mark.parametrize("shape", [(3000,), (1, 3000)])
def test_vector_times_matrix_and_matrix_times_vector(shape):
    v = _rand(shape, 3)
    w = _rand((3000, 2000), 4)
    _close(mx.array(v) @ mx.array(w), _ref(v, w), 3000)
    wt = _rand((2000, 3000), 5)
    vv = v.reshape(3000)
    _close(mx.array(wt) @ mx.array(vv), _ref(wt, vv), 3000)


def test_strided_vector_operands():
    # The vector read with a stride (a column of a row-major matrix).
    x = _rand((900, 4), 6)
    w = _rand((700, 900), 7)
    _close(mx.array(w) @ mx.array(x)[:, 1:2], _ref(w, x[:, 1:2]), 900)
    _close(mx.array(x)[:, 2][None, :] @ mx.array(w).T, _ref(x[:, 2][None, :], w.T), 900)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_double_and_complex_products_split_over_the_pool(dtype):
    rng = np.random.default_rng(8)
    a = rng.standard_normal((400, 300)).astype(dtype)
    b = rng.standard_normal((300, 350)).astype(dtype)
    v = rng.standard_normal((300,)).astype(dtype)
    if dtype == np.complex64:
        a = a + 1j * rng.standard_normal(a.shape).astype(np.float32)
        b = b + 1j * rng.standard_normal(b.shape).astype(np.float32)
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    mdt = mx.float64 if dtype == np.float64 else mx.complex64
    for x, y in [(a, b), (a, v), (v, b)]:
        out = np.asarray(mx.matmul(mx.array(x, dtype=mdt), mx.array(y, dtype=mdt), stream=mx.cpu))
        ref = np.matmul(x.astype(np.complex128), y.astype(np.complex128))
        assert out.dtype == dtype
        np.testing.assert_allclose(out, ref, rtol=0, atol=np.sqrt(300) * rtol * 50)


@pytest.mark.parametrize("batch,m,n,k", [(64, 8, 8, 8), (6, 200, 150, 120), (3, 1, 500, 400)])
def test_batched_products(batch, m, n, k):
    a = _rand((batch, m, k), 9)
    b = _rand((batch, k, n), 10)
    _close(mx.array(a) @ mx.array(b), _ref(a, b), k)
    # b shared by the batch: one tall product
    _close(mx.array(a) @ mx.array(b[0]), _ref(a, b[0]), k)


def test_k_zero_products_are_zero():
    out = mx.array(np.zeros((300, 0), np.float32)) @ mx.array(np.zeros((0, 1), np.float32))
    assert out.shape == (300, 1)
    assert not np.any(np.asarray(out))


def test_products_from_many_threads_at_once():
    # Each thread's products split over the one pool; regions queue, never mix.
    import threading
    a = _rand((500, 400), 11)
    b = _rand((400, 300), 12)
    ref = _ref(a, b)
    errors = []

    def work(i):
        # Each thread's own stream, named per op: `with mx.stream(...)` in
        # several threads at once would race on the process-wide default
        # device (each saves what another set, and the last exit may leave
        # the CPU the default in a GPU-default run).
        try:
            s = mx.new_stream(mx.cpu)
            for _ in range(5):
                product = mx.matmul(mx.array(a), mx.array(b), stream=s)
                out = np.asarray(mx.multiply(product, i + 1, stream=s))
                _close(out / (i + 1), ref, 400)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


# --- bfloat16 and float16 products --------------------------------------------------

def _half(x, dtype):
    # Values representable in the half type, as float32.
    return np.asarray(mx.array(x).astype(dtype).astype(mx.float32))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("m,n,k", [(5, 3, 2), (37, 45, 7), (128, 96, 385), (300, 200, 1000),
                                   (1, 700, 300), (700, 1, 300), (20, 2000, 33),
                                   (1, 129, 1024), (1030, 1, 1088), (1, 1, 67)])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_half_products_accumulate_in_float32(dtype, m, n, k, ta, tb):
    dt = getattr(mx, dtype)
    a = _half(_rand((k, m) if ta else (m, k), 13), dt)
    b = _half(_rand((n, k) if tb else (k, n), 14), dt)
    am = mx.array(a).astype(dt)
    bm = mx.array(b).astype(dt)
    out = (am.T if ta else am) @ (bm.T if tb else bm)
    assert out.dtype == dt
    ref = _ref(a.T if ta else a, b.T if tb else b)
    # One rounding of the float32 sum to the half type, plus float32
    # summation error: a product through float32 and a final rounding.
    eps = 2.0 ** -8 if dtype == "bfloat16" else 2.0 ** -11
    got = np.asarray(out.astype(mx.float32), dtype=np.float64)
    tol = eps * np.abs(ref) + np.sqrt(k) * 1e-5 * max(1.0, float(np.max(np.abs(ref)))) * 10
    assert np.all(np.abs(got - ref) <= tol)


@pytest.mark.parametrize("shape_a,shape_b,tb", [((40, 50), (50, 60), False),
                                                  ((3, 37, 45), (45, 70), False),
                                                  ((2, 33, 129), (2, 129, 65), True),
                                                  ((256, 256), (256, 256), False),
                                                  ((8, 2100), (2100, 16), False)])
def test_bfloat16_product_is_rounded_once(shape_a, shape_b, tb):
    # Multiples of 1/8 in [-2, 2]: every float32 sum is exact, so the product
    # must be exactly the bfloat16 rounding (nearest even) of the exact
    # product, ties included, whether it is rounded as its tiles are written
    # or through a float32 result (K past 2048), batched or transposed.
    # The CPU kernels' property: cuBLASLt may split K and round partial sums
    # (on the H200, K = 2100 differed in a few elements), so the CPU stream.
    rng = np.random.default_rng(17)
    a = rng.integers(-16, 17, size=shape_a).astype(np.float32) / 8
    b = rng.integers(-16, 17, size=shape_b).astype(np.float32) / 8
    bm = mx.array(np.swapaxes(b, -1, -2).copy()).astype(mx.bfloat16)
    bm = mx.swapaxes(bm, -1, -2) if tb else mx.array(b).astype(mx.bfloat16)
    out = mx.matmul(mx.array(a).astype(mx.bfloat16), bm, stream=mx.cpu)
    assert out.dtype == mx.bfloat16
    want = mx.array(np.matmul(a.astype(np.float64), b).astype(np.float32)).astype(mx.bfloat16)
    assert np.array_equal(np.asarray(out.astype(mx.float32)), np.asarray(want.astype(mx.float32)))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_products_batched_and_special_values(dtype):
    dt = getattr(mx, dtype)
    a = _half(_rand((4, 50, 70), 15), dt)
    b = _half(_rand((4, 70, 40), 16), dt)
    a[1, 3, 5] = np.inf
    b[2, 7, 9] = np.nan
    out = np.asarray((mx.array(a).astype(dt) @ mx.array(b).astype(dt)).astype(mx.float32))
    ref = np.matmul(a, b)
    assert np.array_equal(np.isnan(out), np.isnan(ref))
    assert np.array_equal(np.isinf(out), np.isinf(ref))
    finite = np.isfinite(ref)
    eps = 2.0 ** -8 if dtype == "bfloat16" else 2.0 ** -11
    assert np.all(np.abs(out[finite] - ref[finite]) <= eps * np.abs(ref[finite]) + 1e-3)
