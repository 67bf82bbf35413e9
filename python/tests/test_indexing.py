"""Basic indexing (__getitem__) against NumPy: integers, slices with steps
(negative too), None, Ellipsis and their combinations, on views."""

import numpy as np
import pytest

import _backend
from _backend import mx
from _helpers import assert_array


class _Keys:
    def __getitem__(self, key):
        return key


K = _Keys()

INDICES = [
    K[0],
    K[-1],
    K[2],
    K[1, 2],
    K[-1, -2, -3],
    K[1, 2, 3],
    K[:],
    K[1:3],
    K[-3:],
    K[:-1],
    K[::2],
    K[1::2],
    K[::-1],
    K[::-2],
    K[3:0:-1],
    K[-1:-4:-2],
    K[10:],
    K[:100],
    K[-100:2],
    K[2:2],
    K[3:1],
    K[:, 1],
    K[:, ::-1],
    K[:, :, ::3],
    K[1:, -2:, 1::2],
    K[None],
    K[:, None],
    K[None, 1, None],
    K[..., 1],
    K[..., ::-1],
    K[1, ...],
    K[1, ..., 2],
    K[..., None],
    K[None, ..., None, 0],
    K[...],
    K[0, :, None, ::-2],
    K[::-1, 1, ::2],
    K[-1, 2:0:-1, ...],
]


@pytest.mark.parametrize("key", INDICES, ids=repr)
def test_basic_indexing(key):
    an = np.arange(4 * 5 * 6, dtype=np.int32).reshape(4, 5, 6)
    assert_array(mx.array(an)[key], an[key], "int32")


@pytest.mark.parametrize(
    "view",
    [lambda v: v.transpose(2, 0, 1), lambda v: v[::-1, 1:, ::2], lambda v: v[:, None].squeeze(1)],
    ids=["transposed", "sliced", "expand-squeeze"],
)
@pytest.mark.parametrize("key", [K[1], K[::-1, 0], K[..., 1:], K[None, :, -1], K[1:3, ::2, None]], ids=repr)
def test_indexing_views(view, key):
    an = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    assert_array(view(mx.array(an))[key], view(an)[key], "float32")


def test_chained_indexing_and_use_in_ops():
    an = np.arange(24, dtype=np.float32).reshape(4, 6)
    a = mx.array(an)
    b = a[1:][::2][:, ::-1][0]
    assert_array(b, an[1:][::2][:, ::-1][0], "float32")
    assert_array(a[::2] + a[1::2], an[::2] + an[1::2], "float32")
    assert_array(mx.sum(a[:, ::-3], axis=0), an[:, ::-3].sum(axis=0), "float32")


def test_indexing_0d_results_and_empty_arrays():
    a = mx.arange(6).reshape(2, 3)
    x = a[1, 2]
    assert x.shape == () and x.item() == 5
    assert a[0][1].item() == 1
    assert a[2:].shape == (0, 3)
    assert a[:, 3:].shape == (2, 0)
    e = mx.zeros((0, 3))
    assert e[:, 1].shape == (0,)
    assert e[::-1].shape == (0, 3)
    s = mx.array(7)
    assert s[None].tolist() == [7]
    assert s[...].item() == 7


def test_indexing_with_mx_int_scalar():
    a = mx.arange(10)
    # a 0-d integer array indexes like an int; the result is a 0-d array
    assert a[mx.array(3)].item() == 3


def test_too_many_indices_raises():
    with pytest.raises(ValueError):
        mx.ones((2, 3))[0, 0, 0]
    with pytest.raises(ValueError):
        mx.array(3)[0]


# --- scatter of whole rows (x.at[idx].op(v) on a table): repeated rows
# combine in order, every reduction, negative indices, other layouts ----------

@pytest.mark.parametrize("count", [100, 1024, 5000])
@pytest.mark.parametrize("op", ["add", "multiply", "maximum", "minimum", "set"])
def test_scatter_rows_in_parallel(count, op):
    rng = np.random.default_rng(count)
    rows, cols = 300, 33
    x = rng.uniform(0.5, 1.5, size=(rows, cols)).astype(np.float32)
    idx = rng.integers(-rows, rows, size=count).astype(np.int32)  # repeats and negatives
    v = rng.uniform(0.5, 1.5, size=(count, cols)).astype(np.float32)
    if op == "set":
        out = mx.array(x)
        out[mx.array(idx)] = mx.array(v)
    else:
        out = getattr(mx.array(x).at[mx.array(idx)], op)(mx.array(v))
    ref = x.copy()
    if op == "set" and _backend.IS_MLX and mx.default_device() == mx.gpu:
        # On MLX's GPU one of the writes to a repeated row wins, not
        # necessarily the last (Loom's GPU keeps the last, as the CPU).
        got = np.array(out)
        for r in range(rows):
            writes = [v[i] for i in range(count) if idx[i] % rows == r]
            want = writes if writes else [x[r]]
            assert any(np.array_equal(got[r], w) for w in want), f"row {r} is none of its writes"
        return
    if op == "set":
        for i, r in enumerate(idx):  # the last write to a row wins
            ref[r] = v[i]
    else:
        ufunc = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum}[op]
        ufunc.at(ref, idx, v)
    np.testing.assert_allclose(np.array(out), ref, rtol=1e-5, equal_nan=True)


@pytest.mark.loom_only  # MLX's scatter maximum/minimum may drop a NaN
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_scatter_rows_in_parallel_nan(op):
    x = np.ones((64, 16), dtype=np.float32)
    idx = np.arange(4096) % 64
    v = np.full((4096, 16), 2.0 if op == "maximum" else 0.0, dtype=np.float32)
    v[100, 5] = np.nan  # row 36: later updates to it must not clear the NaN
    ref = x.copy()
    getattr(np, op).at(ref, idx, v)
    out = getattr(mx.array(x).at[mx.array(idx)], op)(mx.array(v))
    np.testing.assert_array_equal(np.array(out), ref)


def test_scatter_rows_other_layouts():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((50, 4, 6)).astype(np.float32)
    idx = rng.integers(0, 50, size=2000)
    v = rng.standard_normal((2000, 4, 6)).astype(np.float32)
    ref = x.copy()
    np.add.at(ref, idx, v)
    np.testing.assert_allclose(np.array(mx.array(x).at[mx.array(idx)].add(mx.array(v))), ref, rtol=1e-4, atol=1e-4)
    # Indexing a later axis: blocks are not whole rows (the serial path).
    idx1 = rng.integers(0, 6, size=3000)
    v1 = rng.standard_normal((50, 4, 3000)).astype(np.float32)
    ref1 = x.copy()
    np.add.at(ref1, (slice(None), slice(None), idx1), v1)
    np.testing.assert_allclose(np.array(mx.array(x).at[:, :, mx.array(idx1)].add(mx.array(v1))), ref1,
                               rtol=1e-4, atol=1e-3)
    # Integer rows wrap around as NumPy's.
    xi = np.arange(64 * 8, dtype=np.int32).reshape(64, 8)
    ii = rng.integers(0, 64, size=4096)
    vi = np.full((4096, 8), 2**30, dtype=np.int32)
    refi = xi.copy()
    np.add.at(refi, ii, vi)
    np.testing.assert_array_equal(np.array(mx.array(xi).at[mx.array(ii)].add(mx.array(vi))), refi)
    # Non-contiguous updates and an empty index.
    vt = mx.array(np.ascontiguousarray(v[:, :, 0].T)).T
    ref2 = x[:, :, 0].copy()
    np.add.at(ref2, idx, v[:, :, 0])
    np.testing.assert_allclose(np.array(mx.array(x[:, :, 0]).at[mx.array(idx)].add(vt)), ref2, rtol=1e-4, atol=1e-4)
    empty = mx.array(x).at[mx.array(np.zeros(0, dtype=np.int32))].add(mx.zeros((0, 4, 6)))
    np.testing.assert_array_equal(np.array(empty), x)
