"""Reductions (sum mean max min argmax all any) and allclose / isclose /
array_equal against NumPy, over dtypes, axes, keepdims, views and empty arrays."""

import numpy as np
import pytest

from _backend import mx
from _helpers import assert_array, from_numpy, round_to

AXES = [None, 0, 1, 2, -1, -3, (0, 2), (-1, 0), (0, 1, 2), [1], ()]

SUM_DTYPE = {"bool": "int32", "uint8": "uint32", "int32": "int32", "int64": "int64", "float16": "float16", "bfloat16": "bfloat16", "float32": "float32"}
MEAN_DTYPE = {"bool": "float32", "uint8": "float32", "int32": "float32", "int64": "float32", "float16": "float16", "bfloat16": "bfloat16", "float32": "float32"}


def operand(dtype, view, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        base = rng.integers(0, 2, size=(4, 6, 5)).astype(np.float64)
    elif dtype in ("uint8",):
        base = rng.integers(0, 20, size=(4, 6, 5)).astype(np.float64)
    elif dtype in ("int32", "int64"):
        base = rng.integers(-20, 20, size=(4, 6, 5)).astype(np.float64)
    else:
        base = rng.uniform(-2, 2, size=(4, 6, 5))
    base = round_to(base, dtype)
    a = from_numpy(base, dtype)
    views = {
        "contiguous": lambda v: v[:2, :3],
        "transposed": lambda v: v.transpose(2, 0, 1)[:2, :3],
        "strided": lambda v: v[::2, ::-2, 1::2],
        "broadcast": lambda v: (v[:1, :1] if isinstance(v, np.ndarray) else v[:1, :1]),
    }
    fn = views[view]
    av, bv = fn(a), fn(base)
    if view == "broadcast":
        av, bv = mx.broadcast_to(av, (2, 3, 5)), np.broadcast_to(bv, (2, 3, 5))
    return av, bv


def np_axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "float16"])
def test_sum(dtype, axis, keepdims):
    a, an = operand(dtype, "contiguous")
    out = mx.sum(a, axis=axis, keepdims=keepdims)
    expected = np.sum(an, axis=np_axis(axis), keepdims=keepdims)
    # an empty axis list reduces nothing and keeps the input's dtype
    expected_dtype = dtype if axis == () else SUM_DTYPE[dtype]
    assert_array(out, expected, expected_dtype, rtol=1e-5, atol=1e-5 if dtype != "float16" else 1e-2)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int32", "float16"])
def test_mean(dtype, axis, keepdims):
    a, an = operand(dtype, "contiguous")
    out = mx.mean(a, axis=axis, keepdims=keepdims)
    expected = np.mean(an, axis=np_axis(axis), keepdims=keepdims)
    assert_array(out, expected, MEAN_DTYPE[dtype], rtol=1e-5, atol=1e-5 if dtype != "float16" else 1e-2)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "bfloat16"])
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min(op, dtype, axis, keepdims):
    a, an = operand(dtype, "contiguous")
    out = getattr(mx, op)(a, axis=axis, keepdims=keepdims)
    expected = getattr(np, op)(an, axis=np_axis(axis), keepdims=keepdims)
    assert_array(out, expected, dtype, rtol=0, atol=0)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, -2], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
@pytest.mark.parametrize("op", ["all", "any"])
def test_all_any(op, dtype, axis, keepdims):
    a, an = operand(dtype, "contiguous")
    if dtype != "bool":
        a, an = a * (a > 0.5), an * (an > 0.5)  # plenty of zeros
    out = getattr(mx, op)(a, axis=axis, keepdims=keepdims)
    expected = getattr(np, op)(an, axis=axis, keepdims=keepdims)
    assert_array(out, expected, "bool")


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, -3], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int32", "float16"])
def test_argmax(dtype, axis, keepdims):
    a, an = operand(dtype, "contiguous")
    out = mx.argmax(a, axis=axis, keepdims=keepdims)
    if axis is None:
        expected = np.argmax(an)
        if keepdims:
            expected = np.reshape(expected, (1,) * an.ndim)
    else:
        expected = np.argmax(an, axis=axis, keepdims=keepdims)
    assert_array(out, expected.astype(np.uint32), "uint32")


def test_argmax_ties_give_the_first_index():
    assert mx.argmax(mx.array([1, 3, 3, 2])).item() == 1
    assert mx.argmax(mx.array([[1, 5], [7, 2]])).item() == 2
    assert mx.argmax(mx.array([[1, 5], [7, 2]]), axis=0, keepdims=True).tolist() == [[1, 0]]


@pytest.mark.parametrize("view", ["transposed", "strided", "broadcast"])
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "argmax", "all", "any"])
def test_reductions_of_views(op, view):
    a, an = operand("float32", view)
    for axis in (None, 0, -1, (0, 2)):
        if op == "argmax" and isinstance(axis, tuple):
            continue
        out = getattr(mx, op)(a, axis=axis)
        expected = getattr(np, op)(an, axis=axis)
        if op == "argmax":
            assert_array(out, np.asarray(expected).astype(np.uint32), "uint32")
        elif op in ("all", "any"):
            assert_array(out, expected, "bool")
        else:
            assert_array(out, expected, "float32", rtol=1e-5, atol=1e-5)


def test_reductions_of_empty_arrays():
    z = mx.zeros((0, 3))
    assert_array(mx.sum(z, axis=0), np.zeros(3), "float32")
    assert_array(mx.sum(z), np.array(0.0), "float32")
    assert_array(mx.sum(z, axis=1), np.zeros(0), "float32")
    assert_array(mx.max(z, axis=1), np.zeros(0), "float32")
    assert mx.all(mx.zeros((0,))).item() is True
    assert mx.any(mx.zeros((0,))).item() is False
    assert np.isnan(mx.mean(mx.zeros((0,))).item())
    with pytest.raises(ValueError):
        mx.max(mx.zeros((0,)))
    with pytest.raises(ValueError):
        mx.min(mx.zeros((0, 3)), axis=0)
    with pytest.raises(ValueError):
        mx.argmax(mx.zeros((0,)))


def test_reductions_with_nan():
    a = mx.array([1.0, float("nan"), 3.0])
    assert np.isnan(mx.max(a).item())
    assert np.isnan(mx.min(a).item())
    assert np.isnan(mx.sum(a).item())


def test_reduction_methods_and_defaults():
    a = mx.array([[1.0, 2.0], [3.0, 4.0]])
    assert a.sum().item() == 10.0
    assert a.sum(axis=0).tolist() == [4.0, 6.0]
    assert a.mean(axis=1, keepdims=True).tolist() == [[1.5], [3.5]]
    assert a.max().item() == 4.0 and a.min(0).tolist() == [1.0, 2.0]
    assert a.argmax(axis=1).tolist() == [1, 1]
    assert (a > 0).all().item() is True and (a > 3).any().item() is True
    assert mx.sum(a, axis=[0, 1]).item() == 10.0
    assert mx.sum(a, (0, 1), True).shape == (1, 1)


def test_reduction_bad_axes():
    a = mx.ones((2, 3))
    with pytest.raises(IndexError):
        mx.sum(a, axis=2)
    with pytest.raises(IndexError):
        mx.sum(a, axis=-3)
    with pytest.raises(IndexError):
        mx.mean(a, axis=5)
    with pytest.raises(IndexError):
        mx.max(a, axis=(0, 2))
    with pytest.raises(IndexError):
        mx.argmax(a, axis=2)
    with pytest.raises(ValueError):
        mx.sum(a, axis=(0, 0))


# --- allclose / isclose / array_equal -------------------------------------------


def test_allclose():
    a = mx.array([1.0, 2.0, 3.0])
    assert mx.allclose(a, a + 1e-9).item() is True
    assert mx.allclose(a, a + 1e-3).item() is False
    assert mx.allclose(a, a + 1e-3, atol=1e-2).item() is True
    assert mx.allclose(a, a * (1 + 1e-3), rtol=1e-2).item() is True
    assert mx.allclose(mx.array([1.0]), mx.ones((2, 3))).item() is True  # broadcasts
    nan = mx.array([float("nan"), 1.0])
    assert mx.allclose(nan, nan).item() is False
    assert mx.allclose(nan, nan, equal_nan=True).item() is True
    inf = mx.array([float("inf")])
    assert mx.allclose(inf, inf).item() is True
    assert mx.allclose(mx.array([1, 2]), mx.array([1, 2])).item() is True
    assert mx.allclose(a, a).dtype == mx.bool_ and mx.allclose(a, a).shape == ()
    with pytest.raises(ValueError):
        mx.allclose(mx.ones((2, 3)), mx.ones((4, 5)))


def test_isclose():
    a = mx.array([1.0, 2.0, float("nan"), float("inf"), -float("inf"), 0.0])
    b = mx.array([1.0 + 1e-9, 2.1, float("nan"), float("inf"), float("inf"), 1e-9])
    an, bn = np.array(a), np.array(b)
    assert mx.isclose(a, b).tolist() == np.isclose(an, bn).tolist()
    assert mx.isclose(a, b, equal_nan=True).tolist() == np.isclose(an, bn, equal_nan=True).tolist()
    assert mx.isclose(a, b, rtol=0.1).tolist() == np.isclose(an, bn, rtol=0.1).tolist()
    assert mx.isclose(a, b, atol=0.0, rtol=0.0).tolist() == np.isclose(an, bn, atol=0, rtol=0).tolist()
    out = mx.isclose(mx.ones((2, 1)), mx.ones((3,)))
    assert out.shape == (2, 3) and out.dtype == mx.bool_


def test_array_equal():
    a = mx.array([1, 2, 3])
    assert mx.array_equal(a, mx.array([1, 2, 3])).item() is True
    assert mx.array_equal(a, mx.array([1, 2, 4])).item() is False
    # values are compared across dtypes
    assert mx.array_equal(a, mx.array([1.0, 2.0, 3.0])).item() is True
    # different shapes are simply not equal (no broadcasting, no error)
    assert mx.array_equal(a, mx.array([1, 2])).item() is False
    assert mx.array_equal(mx.ones((2, 3)), mx.ones((4, 5))).item() is False
    nan = mx.array([float("nan"), 1.0])
    assert mx.array_equal(nan, nan).item() is False
    assert mx.array_equal(nan, nan, equal_nan=True).item() is True
    assert mx.array_equal(mx.zeros((0,)), mx.zeros((0,))).item() is True
    t = mx.arange(6).reshape(2, 3)
    assert mx.array_equal(t.T, mx.array(np.arange(6).reshape(2, 3).T)).item() is True


# --- float32 max/min along contiguous rows: one vector pass per row, NaN
# tracked apart from the accumulators ------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 10, 15, 16, 17, 63, 64, 65, 100, 1000, 4099])
@pytest.mark.parametrize("op", ["max", "min"])
def test_float32_row_extremes(n, op):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((37, n)).astype(np.float32)
    x[3, rng.integers(0, n)] = np.nan       # one NaN anywhere in the row
    x[5, n - 1] = np.nan                    # in the masked tail
    x[6, 0] = np.nan                        # first
    x[7, :] = np.nan                        # all
    x[8, :] = -np.inf if op == "max" else np.inf
    x[9, n // 2] = np.inf if op == "max" else -np.inf
    ref = getattr(np, op)(x, axis=1)
    assert_array(getattr(mx, op)(mx.array(x), axis=1), ref)
    assert_array(getattr(mx, op)(mx.array(x), axis=-1, keepdims=True), ref[:, None])
    # The whole array, and rows of a sliced (strided) view.
    assert_array(getattr(mx, op)(mx.array(x)), getattr(np, op)(x))
    if n > 2:
        assert_array(getattr(mx, op)(mx.array(x)[:, 1:-1], axis=1), getattr(np, op)(x[:, 1:-1], axis=1))
    # Columns of the transpose reduce along a strided axis (another path).
    assert_array(getattr(mx, op)(mx.array(x).T, axis=0), ref)


def test_float32_row_extremes_signed_zeros_and_empty_rows():
    x = np.array([[0.0, -0.0, -1.0], [-0.0, 0.0, -2.0]], dtype=np.float32)
    assert_array(mx.max(mx.array(x), axis=1), np.array([0.0, 0.0], dtype=np.float32))
    assert mx.max(mx.zeros((0, 5)), axis=1).shape == (0,)
