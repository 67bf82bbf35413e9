"""GPU kernels added in the second cut, against the CPU: Concatenate (strided
device copies), Softmax and LogSumExp over the last axis (NaN, infinities,
half precision). GPU tests skip where no GPU is present."""

import numpy as np
import pytest

from _backend import mx

HAS_GPU = mx.is_available(mx.gpu)
pytestmark = pytest.mark.skipif(
    not HAS_GPU, reason="no GPU here: the CUDA backend found no device (run scripts/gpu.sh)"
)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_concatenate_on_gpu_matches_cpu(axis):
    rng = np.random.default_rng(axis + 5)
    parts = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4, 5), (3, 4, 5), (3, 4, 5))]
    shape = list(parts[0].shape)
    shape[axis] = 2
    parts.append(rng.standard_normal(shape).astype(np.float32))
    arrays = [mx.array(p) for p in parts]
    out = mx.concatenate(arrays, axis=axis, stream=mx.gpu)
    np.testing.assert_array_equal(np.array(out), np.concatenate(parts, axis=axis))


def test_concatenate_on_gpu_with_empty_and_strided_parts():
    a = mx.arange(12, dtype=mx.int32).reshape(3, 4)
    empty = mx.zeros((3, 0), dtype=mx.int32)
    t = mx.transpose(mx.arange(12, dtype=mx.int32).reshape(4, 3))  # strided: CPU path
    out = mx.concatenate([a, empty, t, a], axis=1, stream=mx.gpu)
    ref = np.concatenate([np.arange(12).reshape(3, 4), np.arange(12).reshape(4, 3).T,
                          np.arange(12).reshape(3, 4)], axis=1)
    np.testing.assert_array_equal(np.array(out), ref)


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-6), ("float16", 2e-3), ("bfloat16", 1.6e-2),
                                       ("float64", 1e-12)])
@pytest.mark.parametrize("cols", [1, 7, 256, 1000, 5000])
def test_softmax_and_logsumexp_on_gpu_match_cpu(dtype, tol, cols):
    rng = np.random.default_rng(cols)
    h = (rng.standard_normal((9, cols)) * 4).astype(np.float32)
    x = mx.array(h).astype(getattr(mx, dtype))
    for f in (lambda a, s: mx.softmax(a, axis=-1, stream=s),
              lambda a, s: mx.logsumexp(a, axis=-1, stream=s)):
        g = np.array(f(x, mx.gpu).astype(mx.float32))
        c = np.array(f(x, mx.cpu).astype(mx.float32))
        np.testing.assert_allclose(g, c, rtol=tol, atol=tol)


def test_softmax_and_logsumexp_edge_values_on_gpu():
    inf, nan = float("inf"), float("nan")
    rows = [[1.0, 2.0, 3.0], [-inf, -inf, -inf], [inf, 1.0, 2.0], [nan, 1.0, 2.0],
            [-inf, 0.0, -inf], [5.0, 5.0, 5.0]]
    x = mx.array(rows)
    for f in (lambda s: mx.softmax(x, axis=-1, stream=s),
              lambda s: mx.logsumexp(x, axis=-1, stream=s)):
        np.testing.assert_allclose(np.array(f(mx.gpu)), np.array(f(mx.cpu)), rtol=1e-6,
                                   equal_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "uint8", "int64"])
@pytest.mark.parametrize("cols", [1, 31, 300, 4099])
def test_argmax_argmin_on_gpu_match_cpu(dtype, cols):
    rng = np.random.default_rng(cols)
    h = rng.integers(0, 50, size=(6, cols)).astype(np.float32)  # ties: the first index wins
    x = mx.array(h).astype(getattr(mx, dtype))
    for f in (mx.argmax, mx.argmin):
        for kw in ({"axis": -1}, {"axis": 1, "keepdims": True}, {}):
            g = f(x, stream=mx.gpu, **kw)
            c = f(x, stream=mx.cpu, **kw)
            assert g.dtype == c.dtype
            np.testing.assert_array_equal(np.array(g), np.array(c))


def test_argmax_with_nan_on_gpu_picks_the_first_nan():
    nan = float("nan")
    x = mx.array([[1.0, nan, 3.0, nan], [2.0, 2.0, 1.0, 0.0], [-1.0, -2.0, nan, 9.0]])
    for f in (mx.argmax, mx.argmin):
        np.testing.assert_array_equal(np.array(f(x, axis=1, stream=mx.gpu)),
                                      np.array(f(x, axis=1, stream=mx.cpu)))
