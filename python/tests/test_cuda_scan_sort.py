"""GPU Scan and Sort kernels against the CPU: cumsum/cumprod/cummax/cummin
along every axis, reversed and exclusive, integer wrap-around, NaN; sort and
argsort (stable order, NaN last) along every axis. GPU tests skip where no
GPU is present."""

import numpy as np
import pytest

from _backend import mx

HAS_GPU = mx.is_available(mx.gpu)
pytestmark = pytest.mark.skipif(
    not HAS_GPU, reason="no GPU here: the CUDA backend found no device (run scripts/gpu.sh)"
)


def both(f):
    g, c = f(mx.gpu), f(mx.cpu)
    mx.eval(g, c)
    cv = lambda a: np.array(a.astype(mx.float32)) if a.dtype == mx.bfloat16 else np.array(a)
    return cv(g), cv(c)


SCANS = {"cumsum": mx.cumsum, "cumprod": mx.cumprod, "cummax": mx.cummax, "cummin": mx.cummin}


@pytest.mark.parametrize("name", list(SCANS))
@pytest.mark.parametrize("shape,axis", [((1000,), 0), ((7, 300), 1), ((7, 300), 0), ((4, 5, 6), 1),
                                        ((3, 5000), 1), ((2, 65), -1), ((64, 3), 1)])
@pytest.mark.parametrize("reverse,inclusive", [(False, True), (True, True), (False, False),
                                               (True, False)])
def test_scans_match_cpu_int32(name, shape, axis, reverse, inclusive):
    rng = np.random.default_rng(len(shape) * 7 + axis)
    h = rng.integers(-3, 4, size=shape).astype(np.int32)
    x = mx.array(h)
    f = SCANS[name]
    g, c = both(lambda s: f(x, axis=axis, reverse=reverse, inclusive=inclusive, stream=s))
    np.testing.assert_array_equal(g, c)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int8", "uint8",
                                   "int16", "uint16", "int64", "uint32", "uint64", "bool_"])
@pytest.mark.parametrize("name", list(SCANS))
def test_scans_match_cpu_every_dtype(dtype, name):
    rng = np.random.default_rng(11)
    h = rng.integers(0, 3, size=(5, 777))
    x = mx.array(h).astype(getattr(mx, dtype))
    f = SCANS[name]
    for axis in (0, 1):
        g, c = both(lambda s: f(x, axis=axis, stream=s))
        if dtype in ("float16", "bfloat16") and name in ("cumsum", "cumprod"):
            np.testing.assert_allclose(g, c, rtol=2e-2)
        else:
            np.testing.assert_array_equal(g, c)


def test_float_cumsum_close_and_nan_sticks():
    rng = np.random.default_rng(3)
    x = mx.array(rng.standard_normal((3, 100000)).astype(np.float32))
    g, c = both(lambda s: mx.cumsum(x, axis=1, stream=s))
    np.testing.assert_allclose(g, c, rtol=1e-3, atol=1e-2)
    y = mx.array([1.0, 3.0, float("nan"), 5.0, -1.0])
    for f in (mx.cummax, mx.cummin, mx.cumsum):
        g, c = both(lambda s: f(y, stream=s))
        np.testing.assert_array_equal(g, c)


def test_integer_cumsum_wraps_like_the_cpu():
    x = mx.array([100, 100, 100, -128, 127], dtype=mx.int8)
    g, c = both(lambda s: mx.cumsum(x, stream=s))
    np.testing.assert_array_equal(g, c)
    x = mx.full((300,), 2**31 - 5, dtype=mx.int32)
    g, c = both(lambda s: mx.cumsum(x, stream=s))
    np.testing.assert_array_equal(g, c)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int8", "uint8",
                                   "int32", "int64", "uint64", "bool_"])
@pytest.mark.parametrize("shape,axis", [((1,), 0), ((5,), 0), ((17, 33), 1), ((17, 33), 0),
                                        ((4096,), 0), ((3, 1000, 2), 1), ((8, 2049), -1)])
def test_sort_and_argsort_match_cpu(dtype, shape, axis):
    rng = np.random.default_rng(sum(shape) + axis)
    h = rng.integers(-5, 6, size=shape)  # many ties: argsort must be the stable order
    x = mx.array(h).astype(getattr(mx, dtype))
    g, c = both(lambda s: mx.sort(x, axis=axis, stream=s))
    np.testing.assert_array_equal(g, c)
    g, c = both(lambda s: mx.argsort(x, axis=axis, stream=s))
    np.testing.assert_array_equal(g, c)


def test_sort_nan_last_and_long_rows_fall_back():
    x = mx.array([3.0, float("nan"), -1.0, float("inf"), float("-inf"), 0.0, float("nan"), -0.0])
    g, c = both(lambda s: mx.sort(x, stream=s))
    np.testing.assert_array_equal(g, c)
    g, c = both(lambda s: mx.argsort(x, stream=s))
    np.testing.assert_array_equal(g, c)
    big = mx.array(np.random.default_rng(0).standard_normal(10000).astype(np.float32))
    g, c = both(lambda s: mx.argsort(big, stream=s))  # past the GPU row limit: the CPU
    np.testing.assert_array_equal(g, c)
