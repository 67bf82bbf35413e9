"""GPU kernels of gemm_util.cpp and backend/cuda/creation.cpp: matmuls through
cuBLASLt (float16/bfloat16, float32 under LOOM_CUDA_TF32=1) and cuBLAS
(strict float32, float64, broadcast batches) against a float64 reference,
over shapes that take the timed-candidate path, batches, transposed and
misaligned views; device memory back to its baseline after them (the
workspace is returned); Arange, Linspace and Eye bit for bit against the CPU
with no CPU fallback. GPU tests skip where no GPU is present."""

import gc
import os
import subprocess
import sys

import numpy as np
import pytest

from _backend import mx

HAS_GPU = mx.is_available(mx.gpu)
pytestmark = pytest.mark.skipif(
    not HAS_GPU, reason="no GPU here: the CUDA backend found no device (run scripts/gpu.sh)"
)

HERE = os.path.dirname(os.path.abspath(__file__))


def to_np(a):
    return np.array(a.astype(mx.float32)) if a.dtype == mx.bfloat16 else np.array(a)


def rel_err(out, ref):
    out = np.asarray(out, dtype=np.float64)
    assert np.isfinite(out).all()
    return np.linalg.norm(out - ref) / np.linalg.norm(ref)


# --- matmul --------------------------------------------------------------------

TOL = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-5, "float64": 1e-12}


def operands(dtype, shape_a, shape_b, seed):
    rng = np.random.default_rng(seed)
    a = mx.array(rng.standard_normal(shape_a).astype(np.float32)).astype(getattr(mx, dtype))
    b = mx.array(rng.standard_normal(shape_b).astype(np.float32)).astype(getattr(mx, dtype))
    # The reference sees the operands as rounded to the dtype.
    return a, b, to_np(a).astype(np.float64), to_np(b).astype(np.float64)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("m,k,n", [(1, 64, 1), (7, 33, 129), (128, 256, 64), (1024, 1024, 1024),
                                   (1536, 2048, 1024)])
def test_matmul_matches_float64_reference(dtype, m, k, n):
    a, b, ra, rb = operands(dtype, (m, k), (k, n), m + k + n)
    out = mx.matmul(a, b, stream=mx.gpu)
    assert out.dtype == getattr(mx, dtype)
    assert rel_err(to_np(out), ra @ rb) < TOL[dtype]
    # The shape's plan is cached: a second product with fresh data is as right.
    a2, b2, ra2, rb2 = operands(dtype, (m, k), (k, n), m + k + n + 1)
    assert rel_err(to_np(mx.matmul(a2, b2, stream=mx.gpu)), ra2 @ rb2) < TOL[dtype]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_batched_transposed_and_broadcast_products(dtype):
    a, b, ra, rb = operands(dtype, (6, 96, 80), (6, 80, 112), 3)
    c, d, rc, rd = operands(dtype, (6, 96, 112), (6, 112, 80), 4)
    cases = [
        (a, b, ra, rb),
        # a transposed per batch: (6, 80, 96) @ (6, 96, 112)
        (mx.swapaxes(a, 1, 2), c, np.swapaxes(ra, 1, 2), rc),
        # b transposed per batch: (6, 96, 80) @ (6, 80, 112)
        (a, mx.swapaxes(d, 1, 2), ra, np.swapaxes(rd, 1, 2)),
        (a, b[0], ra, rb[0]),  # b broadcast over the batch
        (a[0], b, ra[0], rb),  # a broadcast over the batch
    ]
    for x, y, rx, ry in cases:
        out = mx.matmul(x, y, stream=mx.gpu)
        assert rel_err(to_np(out), rx @ ry) < TOL[dtype]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_misaligned_operands(dtype):
    # Views starting one element in: 2-byte aligned pointers and odd leading
    # dimensions (cuBLASLt's heuristic must be told, or it picks 16-byte kernels).
    a, b, ra, rb = operands(dtype, (257, 301), (301, 263), 5)
    x, y = a[1:, 1:], b[1:, 2:]
    out = mx.matmul(x, y, stream=mx.gpu)
    assert rel_err(to_np(out), ra[1:, 1:] @ rb[1:, 2:]) < TOL[dtype]


def run_child(code, **env_vars):
    env = dict(os.environ)
    env.pop("LOOM_CUDA_FALLBACK_WARN", None)
    env.update(env_vars)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=HERE, timeout=180)
    assert r.returncode == 0, r.stderr
    return r


MODE_CODE = (
    "import numpy as np\n"
    "from _backend import mx\n"
    "rng = np.random.default_rng(0)\n"
    "for dt, size in (('float32', 1024), ('float16', 1024), ('bfloat16', 2048)):\n"
    "    h = rng.standard_normal((2, size, size)).astype(np.float32)\n"
    "    x = mx.array(h).astype(getattr(mx, dt))\n"
    "    r = np.array(x.astype(mx.float32)).astype(np.float64)\n"
    "    out = np.array(mx.matmul(x[0], x[1], stream=mx.gpu).astype(mx.float32))\n"
    "    ref = r[0] @ r[1]\n"
    "    print(dt, np.linalg.norm(out - ref) / np.linalg.norm(ref))\n"
)


@pytest.mark.parametrize("env", [{"LOOM_CUDA_TF32": "1"}, {"LOOM_CUDA_LT": "0"},
                                 {"LOOM_CUDA_GEMM_TUNE": "0"}])
def test_gemm_modes(env):
    r = run_child(MODE_CODE, **env)
    errs = dict(line.split() for line in r.stdout.strip().splitlines())
    f32_tol = 5e-3 if env.get("LOOM_CUDA_TF32") == "1" else 1e-5
    assert float(errs["float32"]) < f32_tol
    assert float(errs["float16"]) < TOL["float16"]
    assert float(errs["bfloat16"]) < TOL["bfloat16"]


def test_tf32_is_off_by_default():
    # Strict float32: the error of a 1024^3 product stays far under TF32's.
    r = run_child(MODE_CODE)
    errs = dict(line.split() for line in r.stdout.strip().splitlines())
    assert float(errs["float32"]) < 1e-5


def test_device_memory_returns_to_baseline_after_matmuls():
    rng = np.random.default_rng(9)
    xs = [mx.array(rng.standard_normal((1024, 1024)).astype(np.float32)).astype(dt)
          for dt in (mx.float16, mx.bfloat16)]
    mx.eval(xs)

    def cycle():
        outs = [mx.matmul(x, x, stream=mx.gpu) for x in xs]
        outs += [mx.matmul(mx.stack([x, x]), x, stream=mx.gpu) for x in xs]
        mx.eval(outs)

    for _ in range(2):
        cycle()
    gc.collect()
    mx.synchronize()
    base = mx.get_active_memory()
    for _ in range(5):
        cycle()
        gc.collect()
        mx.synchronize()
        assert mx.get_active_memory() == base


# --- creation ----------------------------------------------------------------

INT_DTYPES = ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"]
FLOAT_DTYPES = ["float16", "bfloat16", "float32", "float64"]


def same_bits(make):
    g, c = make(mx.gpu), make(mx.cpu)
    mx.eval(g, c)
    assert g.dtype == c.dtype and g.shape == c.shape
    # bfloat16 to float32 is exact: equal float32 bits are equal bfloat16 bits.
    np.testing.assert_array_equal(to_np(g).view(np.uint8), to_np(c).view(np.uint8))


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("start,stop,step", [(0, 1000, 1), (5, -300, -3), (-7.5, 9000.2, 2.7),
                                             (250, 100000, 257)])
def test_arange_integer_dtypes_bit_identical(dtype, start, stop, step):
    # Unsigned types with negative values and steps wrap as on the CPU.
    same_bits(lambda s: mx.arange(start, stop, step, dtype=getattr(mx, dtype), stream=s))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("start,stop,step", [(0, 1000, 1), (0.1, 7000.3, 0.37), (3, -2, -0.001),
                                             (-1e6, 1e6, 123.456789)])
def test_arange_float_dtypes_bit_identical(dtype, start, stop, step):
    same_bits(lambda s: mx.arange(start, stop, step, dtype=getattr(mx, dtype), stream=s))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("start,stop,num", [(0, 1, 50), (-3.3, 17.1, 1), (1e3, -2.5, 100003),
                                            (0.1, 0.7, 2)])
def test_linspace_bit_identical(dtype, start, stop, num):
    same_bits(lambda s: mx.linspace(start, stop, num, dtype=getattr(mx, dtype), stream=s))


@pytest.mark.parametrize("dtype", INT_DTYPES + FLOAT_DTYPES + ["bool_", "complex64"])
@pytest.mark.parametrize("n,m,k", [(5, 5, 0), (4, 7, 2), (7, 4, -2), (3, 3, 5), (300, 200, -13)])
def test_eye_bit_identical(dtype, n, m, k):
    same_bits(lambda s: mx.eye(n, m, k, dtype=getattr(mx, dtype), stream=s))


def test_creation_runs_on_gpu_kernels():
    # Not the CPU fallback: it warns once per primitive when it runs.
    code = (
        "from _backend import mx\n"
        "with mx.stream(mx.gpu):\n"
        "    outs = [mx.arange(0, 100, 3, dtype=mx.uint16), mx.arange(0.5, 9.0, 0.25),\n"
        "            mx.linspace(0, 1, 11), mx.linspace(0, 1, 11, dtype=mx.bfloat16),\n"
        "            mx.eye(6, 4, 1, dtype=mx.int32)]\n"
        "mx.eval(outs)\n"
        "print('ok')\n"
    )
    r = run_child(code)
    assert "ok" in r.stdout
    for name in ("Arange", "Linspace", "Eye"):
        assert f"warning: {name} " not in r.stderr, r.stderr


# --- column reductions (the bias gradient's shape) ---------------------------


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64"])
@pytest.mark.parametrize("shape", [(1024, 4096), (1000, 37), (33, 5), (4097, 3, 7), (64, 1)])
def test_sum_max_min_prod_over_leading_axes_match_reference(dtype, shape):
    rng = np.random.default_rng(sum(shape))
    h = rng.standard_normal(shape).astype(np.float32)
    x = mx.array(h).astype(getattr(mx, dtype))
    r = to_np(x).astype(np.float64)
    axes = (0,) if len(shape) == 2 else (0, 1)
    tol = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1e-2}[dtype]
    out = to_np(mx.sum(x, axis=axes, stream=mx.gpu)).astype(np.float64)
    ref = r.sum(axis=axes)
    assert np.abs(out - ref).max() <= tol * (np.abs(r).sum(axis=axes).max() + 1)
    # Max and Min are exact whatever the order.
    np.testing.assert_array_equal(to_np(mx.max(x, axis=axes, stream=mx.gpu)), r.max(axis=axes))
    np.testing.assert_array_equal(to_np(mx.min(x, axis=axes, stream=mx.gpu)), r.min(axis=axes))
    small = mx.array((1 + 0.01 * h[:64]).astype(np.float32)).astype(getattr(mx, dtype))
    rs = to_np(small).astype(np.float64)
    pout = to_np(mx.prod(small, axis=axes, stream=mx.gpu)).astype(np.float64)
    assert np.abs(pout / rs.prod(axis=axes) - 1).max() < 20 * tol


def test_column_max_keeps_nan_like_the_cpu():
    h = np.random.default_rng(2).standard_normal((2048, 300)).astype(np.float32)
    h[1500, 7] = np.nan
    h[3, 200] = np.nan
    x = mx.array(h)
    g, c = mx.max(x, axis=0, stream=mx.gpu), mx.max(x, axis=0, stream=mx.cpu)
    np.testing.assert_array_equal(np.array(g), np.array(c))
    assert np.isnan(np.array(g)[[7, 200]]).all()
