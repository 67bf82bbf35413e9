"""sort, argsort, partition, argpartition and topk against NumPy: dtypes,
axes, NaN placement, stability, errors, gradients and vmap."""

import numpy as np
import pytest

from _backend import mx
from _helpers import assert_array, from_numpy, to_numpy

DTYPES = ["float32", "float16", "bfloat16", "int32", "uint8", "int64", "bool"]


def _data(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype in ("uint8",):
        return rng.integers(0, 50, size=shape)
    if dtype.startswith("int"):
        return rng.integers(-50, 50, size=shape)
    return rng.integers(-20, 20, size=shape) / 4.0  # exact in every float dtype, with ties


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_sort_matches_numpy(dtype, axis):
    x = _data(dtype, (7, 9))
    a = from_numpy(x, dtype)
    expected = np.sort(to_numpy(a), axis=axis)
    out = mx.sort(a, axis=axis)
    assert_array(out, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, -1, None])
def test_argsort_is_stable(dtype, axis):
    x = to_numpy(from_numpy(_data(dtype, (6, 11)), dtype))
    out = mx.argsort(from_numpy(x, dtype), axis=axis)
    assert out.dtype == mx.uint32
    expected = np.argsort(x, axis=axis, kind="stable")
    assert np.array_equal(np.array(out), expected)


def test_sort_nan_last():
    x = np.array([3.0, np.nan, 1.0, -np.inf, np.inf, np.nan, -2.0], np.float32)
    out = np.array(mx.sort(mx.array(x)))
    assert np.array_equal(out, np.sort(x), equal_nan=True)
    idx = np.array(mx.argsort(mx.array(x)))
    assert np.array_equal(idx, np.argsort(x, kind="stable"))


def test_sort_non_contiguous_and_large():
    x = np.random.default_rng(3).normal(size=(300, 40)).astype(np.float32)
    a = mx.array(x).T
    assert_array(mx.sort(a, axis=1), np.sort(x.T, axis=1), "float32")
    big = np.random.default_rng(4).normal(size=200_000).astype(np.float32)
    assert_array(mx.sort(mx.array(big)), np.sort(big), "float32")
    idx = np.array(mx.argsort(mx.array(big)))
    assert np.array_equal(idx, np.argsort(big, kind="stable"))


@pytest.mark.parametrize("kth", [0, 3, -1, 8])
@pytest.mark.parametrize("axis", [0, 1])
def test_partition_property(kth, axis):
    x = np.random.default_rng(5).integers(-10, 10, size=(9, 9)).astype(np.float32)
    out = np.array(mx.partition(mx.array(x), kth, axis=axis))
    idx = np.array(mx.argpartition(mx.array(x), kth, axis=axis))
    k = kth % 9
    ref = np.sort(x, axis=axis)
    kth_vals = np.take(ref, k, axis=axis)
    assert np.array_equal(np.take(out, k, axis=axis), kth_vals)
    lo = np.take(out, range(0, k), axis=axis)
    hi = np.take(out, range(k + 1, 9), axis=axis)
    kv = np.expand_dims(kth_vals, axis)
    assert (lo <= kv).all() and (hi >= kv).all()
    assert np.array_equal(np.sort(out, axis=axis), ref)
    assert np.array_equal(np.sort(np.take_along_axis(x, idx.astype(np.int64), axis=axis), axis=axis), ref)
    assert np.array_equal(np.take(np.take_along_axis(x, idx.astype(np.int64), axis=axis), k, axis=axis), kth_vals)


@pytest.mark.parametrize("axis", [0, -1])
def test_topk(axis):
    x = np.random.default_rng(6).normal(size=(6, 10)).astype(np.float32)
    out = np.array(mx.topk(mx.array(x), 3, axis=axis))
    expected = np.take(np.sort(x, axis=axis), range(x.shape[axis] - 3, x.shape[axis]), axis=axis)
    assert np.array_equal(np.sort(out, axis=axis), expected)
    assert mx.topk(mx.array(x), 0).shape == (6, 0)


def test_errors():
    a = mx.zeros((2, 3))
    with pytest.raises(IndexError):
        mx.sort(a, axis=2)
    with pytest.raises(IndexError):
        mx.sort(mx.array(3.0))
    with pytest.raises(ValueError):
        mx.partition(a, 5)
    with pytest.raises(ValueError):
        mx.topk(a, 4)
    with pytest.raises(ValueError):
        mx.topk(a, -1)


def test_sort_gradient_and_jvp():
    x = np.array([[0.3, -1.2, 2.0, 0.7], [1.5, 0.1, -0.4, 0.9]], np.float32)
    w = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]], np.float32)
    g = mx.grad(lambda v: (mx.sort(v, axis=1) * mx.array(w)).sum())(mx.array(x))
    order = np.argsort(x, axis=1)
    expected = np.zeros_like(x)
    np.put_along_axis(expected, order, w, axis=1)
    assert_array(g, expected, "float32")
    t = np.arange(8, dtype=np.float32).reshape(2, 4)
    _, (jt,) = mx.jvp(lambda v: mx.sort(v, axis=1), [mx.array(x)], [mx.array(t)])
    assert_array(jt, np.take_along_axis(t, order, axis=1), "float32")


def test_partition_and_topk_gradients_follow_the_values():
    x = np.array([0.3, -1.2, 2.0, 0.7, 1.1], np.float32)
    g = mx.grad(lambda v: mx.topk(v, 2).sum())(mx.array(x))
    assert g.tolist() == [0.0, 0.0, 1.0, 0.0, 1.0]
    g = mx.grad(lambda v: (mx.partition(v, 1) ** 2).sum())(mx.array(x))
    assert_array(g, 2 * x, "float32")


def test_vmap_of_sorting():
    x = np.random.default_rng(8).normal(size=(3, 4, 5)).astype(np.float32)
    out = mx.vmap(lambda v: mx.sort(v, axis=0), in_axes=1)(mx.array(x))
    assert_array(out, np.stack([np.sort(x[:, b, :], axis=0) for b in range(4)]), "float32")
    out = mx.vmap(lambda v: mx.argsort(v))(mx.array(x))
    assert np.array_equal(np.array(out), np.argsort(x, axis=-1, kind="stable"))
    out = mx.vmap(lambda v: mx.topk(v, 2, axis=0))(mx.array(x))
    assert np.array_equal(np.sort(np.array(out), axis=1), np.sort(x, axis=1)[:, -2:, :])


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted(side):
    seq = np.array([1.0, 2.0, 2.0, 4.0, np.nan], np.float32)
    vals = np.array([[0.0, 2.0], [3.0, 5.0], [np.nan, 4.0]], np.float32)
    out = mx.searchsorted(mx.array(seq), mx.array(vals), side=side)
    assert out.dtype == mx.uint32
    assert np.array_equal(np.array(out), np.searchsorted(seq, vals, side=side))
    ints = mx.searchsorted(mx.array([1, 2, 2, 4]), mx.array([1.5, 2.0]), side=side)
    assert ints.tolist() == np.searchsorted([1, 2, 2, 4], [1.5, 2.0], side=side).tolist()


def test_searchsorted_errors_and_vmap():
    with pytest.raises(ValueError):
        mx.searchsorted(mx.array([[1, 2]]), mx.array([1]))
    with pytest.raises(ValueError):
        mx.searchsorted(mx.array([1, 2]), mx.array([1]), side="mid")
    seq = mx.array([0.0, 1.0, 2.0])
    out = mx.vmap(lambda v: mx.searchsorted(seq, v))(mx.array([[0.5, 1.5], [2.5, -1.0]]))
    assert out.tolist() == [[1, 2], [3, 0]]


@pytest.mark.parametrize("kth", [2, -3, 997])
def test_partition_of_long_rows_near_the_ends(kth):
    # Pivots among the few smallest or largest take the heap path in Loom.
    x = np.random.default_rng(9).integers(-30, 30, size=(5, 1000)).astype(np.float32)
    x[1, ::7] = np.nan
    k = kth % 1000
    for out in (np.array(mx.partition(mx.array(x), kth)),
                np.take_along_axis(x, np.array(mx.argpartition(mx.array(x), kth)).astype(np.int64), axis=-1)):
        ref = np.sort(x, axis=-1)
        assert np.array_equal(out[:, k], ref[:, k], equal_nan=True)
        assert np.array_equal(np.sort(out, axis=-1), ref, equal_nan=True)
        for r in range(5):
            pivot = ref[r, k]
            if not np.isnan(pivot):
                assert (out[r, :k] <= pivot).all()
                assert np.logical_or(out[r, k + 1:] >= pivot, np.isnan(out[r, k + 1:])).all()
    top = np.array(mx.topk(mx.array(x), 5))
    assert np.array_equal(np.sort(top, axis=-1), np.sort(x, axis=-1)[:, -5:], equal_nan=True)


def test_unique_matches_mlx_examples():
    a = mx.array([2, 1, 2, 3, 1])
    assert mx.unique(a, 3).tolist() == [1, 2, 3]
    assert mx.unique(a, 5).tolist() == [1, 2, 3, 1, 1]
    values, index, inverse, counts = mx.unique(a, 4, True, True, True, fill_value=0)
    assert values.tolist() == [1, 2, 3, 0]
    assert index.tolist() == [1, 0, 3, 1] and index.dtype == mx.uint32
    assert inverse.tolist() == [1, 0, 1, 2, 0] and inverse.dtype == mx.uint32
    assert counts.tolist() == [2, 2, 1, 0] and counts.dtype == mx.int32
    # truncated: the smallest `size` kept, inverse clamped
    values, index, inverse, counts = mx.unique(a, 2, True, True, True)
    assert values.tolist() == [1, 2] and inverse.tolist() == [1, 0, 1, 1, 0] and counts.tolist() == [2, 2]
    with pytest.raises(ValueError):
        mx.unique(mx.array([]), 2)


def test_unique_against_numpy():
    x = np.random.default_rng(11).integers(0, 20, size=(6, 7)).astype(np.float32)
    u, idx, inv, cnt = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    values, index, inverse, counts = mx.unique(mx.array(x), len(u), True, True, True)
    assert np.array_equal(np.array(values), u)
    assert np.array_equal(np.array(index), idx)
    assert np.array_equal(np.array(inverse), inv.reshape(x.shape))
    assert np.array_equal(np.array(counts), cnt)
    # each NaN is its own element (MLX)
    nans = mx.unique(mx.array([3.0, float("nan"), 1.0, float("nan")]), 4)
    assert np.array_equal(np.array(nans), [1.0, 3.0, np.nan, np.nan], equal_nan=True)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_median(axis, keepdims):
    x = np.random.default_rng(12).normal(size=(4, 5, 6)).astype(np.float32)
    out = mx.median(mx.array(x), axis=axis, keepdims=keepdims)
    assert_array(out, np.median(x, axis=axis, keepdims=keepdims), "float32")


def test_median_dtypes_nan_and_errors():
    assert mx.median(mx.array([1, 2, 3, 4])).item() == 2.5
    assert mx.median(mx.array([1, 2, 3, 4])).dtype == mx.float32
    assert mx.median(mx.array([1.0, 2.0], dtype=mx.float16)).dtype == mx.float16
    assert np.isnan(mx.median(mx.array([1.0, float("nan"), 3.0, 4.0])).item())
    assert mx.median(mx.array([[1, 5], [2, 9]]), axis=0).tolist() == [1.5, 7.0]
    with pytest.raises(ValueError):
        mx.median(mx.array([]))
    with pytest.raises(IndexError):
        mx.median(mx.zeros((2, 3)), axis=5)


def test_minmax():
    lo, hi = mx.minmax(mx.array([3, 1, 2]))
    assert (lo.item(), hi.item()) == (1, 3)
    lo, hi = mx.minmax(mx.zeros((2, 3)), axis=1, keepdims=True)
    assert lo.shape == (2, 1) and hi.shape == (2, 1)


# --- topk's own selection (only k indices per row are made) -------------------

@pytest.mark.parametrize("shape,k,axis", [
    ((4, 1000), 8, -1),   # k small against the row: screened heap
    ((3, 997), 64, -1),   # the largest k the heap takes
    ((3, 997), 65, -1),   # one more: the partition fallback
    ((5, 40), 6, -1),     # 8k > n: the partition fallback
    ((37, 300), 7, 0),    # along an outer axis (strided rows)
    ((2, 3, 129), 2, 1),  # a middle axis, rows shorter than 8k
    ((17,), 16, 0),       # k close to n
    ((1, 1 << 16), 3, 1),
])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_topk_selection_paths(shape, k, axis, dtype):
    rng = np.random.default_rng(k)
    x = rng.integers(-50, 50, size=shape).astype(np.float32)  # many ties
    a = from_numpy(x, dtype)
    out = mx.topk(a, k, axis=axis)
    expected = np.take(np.sort(to_numpy(a), axis=axis), range(shape[axis] - k, shape[axis]), axis=axis)
    got = np.sort(to_numpy(out), axis=axis)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_topk_nan_non_contiguous_and_empty():
    x = np.random.default_rng(9).standard_normal((6, 500)).astype(np.float32)
    x[1, 17] = np.nan
    x[2, ::50] = np.nan  # 10 NaNs: more than k, so every kept value is NaN
    x[3, :] = np.inf
    out = to_numpy(mx.topk(mx.array(x), 4, axis=1))
    for r in range(6):
        np.testing.assert_array_equal(np.sort(out[r]), np.sort(x[r])[-4:])
    # A transposed input and a sliced one.
    t = mx.array(np.ascontiguousarray(x.T)).T
    np.testing.assert_array_equal(np.sort(to_numpy(mx.topk(t, 4, axis=1)), axis=1),
                                  np.sort(x, axis=1)[:, -4:])
    s = mx.array(x)[:, ::3]
    np.testing.assert_array_equal(np.sort(to_numpy(mx.topk(s, 3, axis=1)), axis=1),
                                  np.sort(x[:, ::3], axis=1)[:, -3:])
    assert mx.topk(mx.zeros((0, 9)), 2, axis=1).shape == (0, 2)
    # The gradient still reaches only the selected elements.
    g = np.array(mx.grad(lambda v: mx.topk(v, 3, axis=1).sum())(mx.array(x[4:6])))
    assert g.sum() == 6 and set(np.unique(g)) <= {0.0, 1.0}
