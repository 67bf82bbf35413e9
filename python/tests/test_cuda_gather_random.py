"""GPU kernels of the third cut, against the CPU: Gather and Scatter (take,
embeddings, take_along_axis/put_along_axis, array indexing, .at[] updates with
repeated indices, out-of-range indices raising as on the CPU) and RandomBits
(Threefry bits and uniform samples bit-identical to the CPU, normal samples
within one float ulp). GPU tests skip where no GPU is present."""

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

DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32",
          "int64", "uint64", "bool_", "complex64"]


def on_both(f):
    """f(stream) on the GPU and on the CPU, as NumPy arrays."""
    g, c = f(mx.gpu), f(mx.cpu)
    mx.eval(g, c)
    as_np = lambda a: np.array(a.astype(mx.float32)) if a.dtype == mx.bfloat16 else np.array(a)
    return as_np(g), as_np(c)


def sample(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    h = rng.integers(-20, 20, size=shape)
    a = mx.array(h)
    if dtype == "bool_":
        return a > 0
    if dtype == "complex64":
        return a.astype(mx.complex64) * mx.array(1 - 2j, dtype=mx.complex64)
    if dtype.startswith("uint"):
        a = mx.abs(a)
    return a.astype(getattr(mx, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_take_and_embedding_rows_match_cpu(dtype):
    table = sample((50, 33), dtype)
    idx = mx.array(np.random.default_rng(1).integers(-50, 50, size=(7, 13)).astype(np.int32))
    g, c = on_both(lambda s: mx.take(table, idx, axis=0, stream=s))
    np.testing.assert_array_equal(g, c)
    g, c = on_both(lambda s: mx.take(table, idx % 33, axis=1, stream=s))
    np.testing.assert_array_equal(g, c)
    g, c = on_both(lambda s: mx.take(table, idx, stream=s))  # flattened
    np.testing.assert_array_equal(g, c)


@pytest.mark.parametrize("idx_dtype", ["int8", "uint8", "int16", "int32", "int64", "uint32"])
def test_index_dtypes_and_strided_sources(idx_dtype):
    a = mx.transpose(mx.arange(6 * 5 * 4, dtype=mx.float32).reshape(6, 5, 4), (2, 0, 1))
    idx = mx.array([3, 0, 2, 2, 1], dtype=getattr(mx, idx_dtype))
    for axis in (0, 1, 2):
        g, c = on_both(lambda s: mx.take(a, idx, axis=axis, stream=s))
        np.testing.assert_array_equal(g, c)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_take_along_axis_and_put_along_axis(axis):
    rng = np.random.default_rng(axis + 3)
    a = mx.array(rng.standard_normal((6, 7, 8)).astype(np.float32))
    shape = [6, 7, 8]
    shape[axis] = 5
    idx = mx.array(rng.integers(0, [6, 7, 8][axis], size=shape).astype(np.int64))
    g, c = on_both(lambda s: mx.take_along_axis(a, idx, axis=axis, stream=s))
    np.testing.assert_array_equal(g, c)
    vals = mx.array(rng.standard_normal(shape).astype(np.float32))
    uniq = mx.argsort(mx.array(rng.standard_normal([6, 7, 8]).astype(np.float32)), axis=axis)
    sl = [slice(None)] * 3
    sl[axis] = slice(0, 5)
    uniq = uniq[tuple(sl)]  # distinct positions: a plain put has one answer
    g, c = on_both(lambda s: mx.put_along_axis(a, uniq, vals, axis=axis, stream=s))
    np.testing.assert_array_equal(g, c)


def test_array_indexing_several_axes():
    a = mx.arange(4 * 5 * 6 * 3, dtype=mx.int32).reshape(4, 5, 6, 3)
    i = mx.array([[0, 3], [2, -1]])
    j = mx.array([1, 4])
    with mx.stream(mx.gpu):
        g1, g2, g3 = a[i, :, j], a[:, i], a[1:3, j, ::2]
    with mx.stream(mx.cpu):
        c1, c2, c3 = a[i, :, j], a[:, i], a[1:3, j, ::2]
    for g, c in ((g1, c1), (g2, c2), (g3, c3)):
        np.testing.assert_array_equal(np.array(g), np.array(c))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int8", "uint8",
                                   "int16", "int32", "int64", "uint32", "uint64", "bool_"])
@pytest.mark.parametrize("op", ["add", "multiply", "maximum", "minimum", "set"])
def test_at_updates_with_repeated_indices(dtype, op):
    if dtype == "bool_" and op == "multiply":
        pytest.skip("bool has no multiply update (the same on the CPU)")
    base = sample((10, 3), dtype, seed=2)
    # Small integers: sums and products are exact in every dtype, so any
    # order of the atomic updates gives the CPU's result.
    upd = sample((12, 3), dtype, seed=3)
    if dtype not in ("bool_",):
        upd = (mx.abs(upd.astype(mx.int32)) % 3 + 1).astype(base.dtype)
    idx = mx.array([0, 3, 3, 9, 0, 5, 3, -1, 2, 2, 2, 7])
    if op == "set":
        idx = mx.array([0, 3, 1, 9, 4, 5, 6, -2, 2])  # distinct: one answer
        upd = upd[:9]
    g, c = on_both(lambda s: _at(base, idx, upd, op, s))
    np.testing.assert_array_equal(g, c)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "int64", "bool_", "complex64"])
def test_plain_scatter_with_repeats_keeps_the_last_write_as_the_cpu(dtype):
    # x[idx] = v with repeated rows: the last write to a row wins, whole (the
    # CPU's rule; before, elements of different writes mixed within a row).
    rng = np.random.default_rng(5)
    base = sample((40, 67), dtype, seed=6)
    upd = sample((3000, 67), dtype, seed=7)
    idx = mx.array(rng.integers(-40, 40, size=3000).astype(np.int32))
    g, c = on_both(lambda s: _at(base, idx, upd, "set", s))
    np.testing.assert_array_equal(g, c)
    # Two index arrays (targets over two axes), element-wise updates.
    base3 = sample((9, 8, 5), dtype, seed=8)
    i = mx.array(rng.integers(0, 9, size=(50, 20)).astype(np.int64))
    j = mx.array(rng.integers(-8, 8, size=(50, 20)).astype(np.int64))
    v = sample((50, 20, 5), dtype, seed=9)

    def two_axes(s):
        with mx.stream(s):
            out = mx.array(base3)
            out[i, j] = v
            return out

    g, c = on_both(two_axes)
    np.testing.assert_array_equal(g, c)


def test_put_along_axis_with_repeats_keeps_the_last_write():
    rng = np.random.default_rng(11)
    a = mx.array(rng.standard_normal((16, 300)).astype(np.float32))
    idx = mx.array(rng.integers(0, 300, size=(16, 2000)).astype(np.int32))
    vals = mx.array(rng.standard_normal((16, 2000)).astype(np.float32))
    g, c = on_both(lambda s: mx.put_along_axis(a, idx, vals, axis=1, stream=s))
    np.testing.assert_array_equal(g, c)


def _at(base, idx, upd, op, s):
    with mx.stream(s):
        if op == "set":  # x[idx] = v: a plain scatter
            out = mx.array(base)
            out[idx] = upd
            return out
        return getattr(base.at[idx], op)(upd)


def test_scatter_add_of_complex_and_float_sums():
    base = mx.zeros((8,), dtype=mx.complex64)
    idx = mx.array([1, 1, 7, 0, 1])
    upd = mx.array([1 + 2j, 3 - 1j, 2j, 5, -1], dtype=mx.complex64)
    g, c = on_both(lambda s: _at(base, idx, upd, "add", s))
    np.testing.assert_array_equal(g, c)
    # Many float updates to few places: the order differs, the sum agrees closely.
    rng = np.random.default_rng(9)
    big = mx.array(rng.standard_normal((100000, 4)).astype(np.float32))
    tgt = mx.array(rng.integers(0, 17, size=100000).astype(np.int32))
    g, c = on_both(lambda s: _at(mx.zeros((17, 4)), tgt, big, "add", s))
    np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-3)


def test_gradient_of_take_is_a_gpu_scatter_add():
    w = mx.array(np.random.default_rng(4).standard_normal((20, 8)).astype(np.float32))
    idx = mx.array([1, 4, 4, 19, 0, 4])

    def loss(w):
        return (mx.take(w, idx, axis=0) ** 2).sum()

    with mx.stream(mx.gpu):
        g = mx.grad(loss)(w)
    with mx.stream(mx.cpu):
        c = mx.grad(loss)(w)
    np.testing.assert_allclose(np.array(g), np.array(c), rtol=1e-6)


def test_out_of_range_indices_raise_on_the_gpu():
    a = mx.arange(10, dtype=mx.float32)
    host_idx = mx.array([1, 12, 3])
    with pytest.raises(RuntimeError, match=r"\[gather\] Index 12 is out of bounds for axis 0 "
                                           r"with size 10"):
        mx.eval(mx.take(a, host_idx, stream=mx.gpu))
    # Indices computed on the GPU: the kernel flags them.
    dev_idx = mx.add(mx.array([1, 2, 3]), mx.array([0, 20, 0]), stream=mx.gpu)
    mx.eval(dev_idx)
    with pytest.raises(RuntimeError, match=r"Index 22 is out of bounds for axis 0 with size 10"):
        mx.eval(mx.take(a, dev_idx, stream=mx.gpu))
    with pytest.raises(RuntimeError, match=r"is out of bounds for axis 0 with size 10"):
        with mx.stream(mx.gpu):
            mx.eval(a.at[dev_idx].add(1.0))
    # The stream goes on working.
    np.testing.assert_array_equal(np.array(mx.take(a, mx.array([9, -10]), stream=mx.gpu)), [9, 0])


def test_empty_gathers_and_scatters():
    a = mx.arange(12, dtype=mx.float32).reshape(3, 4)
    e = mx.array([], dtype=mx.int32)
    g, c = on_both(lambda s: mx.take(a, e, axis=0, stream=s))
    assert g.shape == c.shape == (0, 4)
    g, c = on_both(lambda s: _at(a, e, mx.zeros((0, 4)), "add", s))
    np.testing.assert_array_equal(g, c)


@pytest.mark.parametrize("shape", [(), (1,), (3,), (7, 5), (2, 3, 4), (1001,), (64, 33)])
def test_random_bits_identical_to_cpu(shape):
    for seed in (0, 1, 7, 123456789, 2**32 - 1):
        key = mx.random.key(seed)
        for width in (1, 2, 4):
            g, c = on_both(lambda s: mx.random.bits(shape, width, key=key, stream=s))
            np.testing.assert_array_equal(g, c)
        g, c = on_both(lambda s: mx.random.split(key, 5, stream=s))
        np.testing.assert_array_equal(g, c)


def test_random_bits_with_many_keys():
    keys = mx.random.split(mx.random.key(42), 37)
    for shape in ((3,), (4, 5), (11,)):
        g, c = on_both(lambda s: _bits_per_key(keys, shape, s))
        np.testing.assert_array_equal(g, c)


def _bits_per_key(keys, shape, s):
    # vmap over the keys batches them into one RandomBits of 37 keys.
    return mx.vmap(lambda k: mx.random.bits(shape, 4, key=k, stream=s))(keys)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_random_uniform_identical_to_cpu(dtype):
    for seed in (0, 3, 99):
        key = mx.random.key(seed)
        for shape in ((5,), (257, 3), (100000,)):
            g, c = on_both(lambda s: mx.random.uniform(shape=shape, dtype=getattr(mx, dtype),
                                                       key=key, stream=s))
            np.testing.assert_array_equal(g, c)
            assert (g < 1).all() and (g >= 0).all()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "complex64"])
def test_random_normal_matches_cpu(dtype):
    key = mx.random.key(5)
    g, c = on_both(lambda s: mx.random.normal(shape=(200001,), dtype=getattr(mx, dtype), key=key,
                                              stream=s))
    # The logarithm is the one step that may differ: glibc's logf (the CPU's,
    # for MLX's values) is not correctly rounded in ~1.8% of these inputs,
    # the GPU's double log rounded to float is; one float ulp before the
    # polynomial.
    np.testing.assert_allclose(g, c, rtol=2e-6, atol=2e-6 if dtype in ("float32", "complex64")
                               else 1e-2)
    assert np.mean(g == c) > 0.95


def test_gather_scatter_random_scan_sort_and_slice_update_do_not_fall_back():
    code = (
        "from _backend import mx\n"
        "s = mx.gpu\n"
        "a = mx.arange(100, dtype=mx.float32).reshape(10, 10)\n"
        "i = mx.array([1, 2, 2])\n"
        "k = mx.random.key(0)\n"
        "outs = [mx.take(a, i, axis=0, stream=s), mx.take_along_axis(a, mx.zeros((10, 1), "
        "dtype=mx.int32), axis=1, stream=s), mx.random.uniform(shape=(4,), key=k, stream=s),\n"
        "        mx.random.normal(shape=(4,), key=k, stream=s),\n"
        "        mx.random.bits((5,), key=k, stream=s)]\n"
        "with mx.stream(s):\n"
        "    outs += [a.at[i].add(1.0), a.at[i].maximum(3.0), a[i, i], mx.cumsum(a, axis=0),\n"
        "             mx.cummax(a, axis=1), mx.sort(a, axis=0), mx.argsort(a, axis=1)]\n"
        "    b = mx.exp(a)\n"
        "    b[2:5, ::2] = 1.0\n"
        "    outs.append(b)\n"
        "mx.eval(outs)\n"
        "print('ok')\n"
    )
    env = dict(os.environ)
    env.pop("LOOM_CUDA_FALLBACK_WARN", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=os.path.dirname(__file__), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout
    for name in ("Gather", "Scatter", "Random", "Cum", "Sort", "ArgSort", "SliceUpdate"):
        assert f"warning: {name}" not in r.stderr, r.stderr


def _set_slice(base, key, v, s):
    with mx.stream(s):
        out = mx.array(base)
        out[key] = v
        return out


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "int64", "bool_", "complex64"])
def test_slice_update_on_gpu_matches_cpu(dtype):
    base = sample((6, 7, 8), dtype, seed=5)
    keys = [(slice(1, 4), slice(None), slice(2, 8, 3)), (slice(None, None, -2), 3),
            (Ellipsis, slice(0, 1)), (2, slice(6, 0, -1), slice(None))]
    for key in keys:
        region = np.zeros((6, 7, 8))[key].shape
        v = sample(region, dtype, seed=6)
        g, c = on_both(lambda s: _set_slice(base, key, v, s))
        np.testing.assert_array_equal(g, c)
        # A broadcast update and a transposed (strided) base.
        g, c = on_both(lambda s: _set_slice(mx.transpose(base, (0, 2, 1)).swapaxes(1, 2), key,
                                            sample((), dtype, seed=7), s))
        np.testing.assert_array_equal(g, c)


def test_kv_cache_style_updates_in_place_on_gpu():
    cache = mx.zeros((2, 4, 64, 16), stream=mx.gpu)
    mx.eval(cache)
    ref = np.zeros((2, 4, 64, 16), np.float32)
    for t in range(10):
        step = mx.full((2, 4, 1, 16), float(t + 1), stream=mx.gpu)
        with mx.stream(mx.gpu):
            cache[:, :, t:t + 1, :] = step
        mx.eval(cache)
        ref[:, :, t:t + 1, :] = t + 1
    np.testing.assert_array_equal(np.array(cache), ref)
