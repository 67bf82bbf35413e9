"""Array creation: from Python scalars, lists and NumPy; zeros, ones, full,
arange, linspace, eye, identity, *_like and astype -- checked against NumPy."""

import numpy as np
import pytest

from _backend import mx
from _helpers import NP_DTYPE, assert_array, dt, dtype_name, to_numpy


# --- mx.array from Python values ----------------------------------------------


@pytest.mark.parametrize(
    "value, dtype, shape",
    [
        (3, "int32", ()),
        (-7, "int32", ()),
        (2**31 - 1, "int32", ()),
        (2**40, "int64", ()),
        (3.5, "float32", ()),
        (True, "bool", ()),
        (1 + 2j, "complex64", ()),
        ([1, 2, 3], "int32", (3,)),
        ([1, 2.5], "float32", (2,)),
        ([True, False], "bool", (2,)),
        ([True, 2], "int32", (2,)),
        ((1, 2), "int32", (2,)),
        ([[1, 2], [3, 4], [5, 6]], "int32", (3, 2)),
        ([[[1.0]], [[2.0]]], "float32", (2, 1, 1)),
        ([], "float32", (0,)),
        ([[], []], "float32", (2, 0)),
    ],
)
def test_array_from_python(value, dtype, shape):
    a = mx.array(value)
    assert a.shape == shape
    assert dtype_name(a.dtype) == dtype
    if dtype != "complex64":
        assert_array(a, np.array(value, dtype=NP_DTYPE[dtype]), dtype)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"])
def test_array_from_python_with_dtype(dtype):
    values = [[0, 1, 2], [3, 4, 5]]
    a = mx.array(values, dtype=dt(dtype))
    assert dtype_name(a.dtype) == dtype
    assert_array(a, np.array(values).astype(NP_DTYPE[dtype]), dtype)
    b = mx.array(3, dt(dtype))  # dtype is also positional
    assert dtype_name(b.dtype) == dtype and b.shape == ()


def test_array_from_float_with_integer_dtype_truncates():
    assert mx.array(1.5, dtype=mx.int32).item() == 1
    assert mx.array([1.7, -1.7], dtype=mx.int32).tolist() == [1, -1]


def test_array_from_arrays():
    a = mx.array([1, 2])
    assert mx.array(a, dtype=mx.float32).tolist() == [1.0, 2.0]
    stacked = mx.array([mx.array([1.0, 2.0]), mx.array([3.0, 4.0])])
    assert stacked.shape == (2, 2) and stacked.dtype == mx.float32
    assert stacked.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    scalars = mx.array([mx.array(1), mx.array(2)])
    assert scalars.tolist() == [1, 2] and scalars.dtype == mx.int32


def test_array_from_ragged_list_raises():
    with pytest.raises(ValueError):
        mx.array([[1, 2], [3]])


# --- mx.array from NumPy --------------------------------------------------------


@pytest.mark.parametrize(
    "np_dtype, dtype",
    [
        (np.bool_, "bool"),
        (np.uint8, "uint8"),
        (np.uint16, "uint16"),
        (np.uint32, "uint32"),
        (np.int8, "int8"),
        (np.int16, "int16"),
        (np.int32, "int32"),
        (np.int64, "int64"),
        (np.float16, "float16"),
        (np.float32, "float32"),
        (np.float64, "float32"),  # float64 becomes float32 by default
    ],
)
def test_array_from_numpy_dtype_mapping(np_dtype, dtype):
    x = np.arange(6).reshape(2, 3).astype(np_dtype)
    a = mx.array(x)
    assert dtype_name(a.dtype) == dtype
    assert a.shape == (2, 3)
    assert_array(a, x, dtype)


def test_numpy_float64_scalars_become_float32():
    assert mx.array(np.float64(1.5)).dtype == mx.float32
    assert mx.array(np.array(1.5)).dtype == mx.float32
    # ... unless float64 is asked for
    a = mx.array(np.array([1.5, 2.0]), dtype=mx.float64)
    assert a.dtype == mx.float64
    assert a.tolist() == [1.5, 2.0]


def test_float64_round_trip_is_lossy():
    x = np.array([0.1, 1 / 3])
    back = np.array(mx.array(x))
    assert back.dtype == np.float32
    assert np.array_equal(back, x.astype(np.float32))
    assert not np.array_equal(back.astype(np.float64), x)


@pytest.mark.parametrize(
    "view",
    [
        lambda x: x.T,
        lambda x: x[::2],
        lambda x: x[1:, 1::2],
        lambda x: np.broadcast_to(x[:1], x.shape),
    ],
    ids=["transpose", "step", "offset", "broadcast"],
)
def test_array_from_non_contiguous_numpy(view):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    v = view(x)
    assert_array(mx.array(v), v, "float32")


def test_array_from_numpy_is_a_copy():
    x = np.arange(4, dtype=np.float32)
    a = mx.array(x)
    x[0] = 100
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_array_from_numpy_with_dtype():
    a = mx.array(np.array([1.5, -2.5]), dtype=mx.float16)
    assert a.dtype == mx.float16 and a.tolist() == [1.5, -2.5]
    b = mx.array(np.array([1, 2], dtype=np.int64), dtype=mx.float32)
    assert b.dtype == mx.float32 and b.tolist() == [1.0, 2.0]


def test_seed_numpy_conversion_example():
    a = mx.arange(3)
    b = np.array(a)
    c = mx.array(b)
    assert b.tolist() == [0, 1, 2]
    assert c.tolist() == [0, 1, 2]
    assert c.dtype == mx.int32


# --- zeros / ones / full ------------------------------------------------------


@pytest.mark.parametrize("fn, value", [("zeros", 0), ("ones", 1)])
@pytest.mark.parametrize("shape", [3, (2, 3), [4], (), [], (0, 3), (2, 1, 2)])
def test_zeros_ones(fn, value, shape):
    a = getattr(mx, fn)(shape)
    expected_shape = (shape,) if isinstance(shape, int) else tuple(shape)
    assert a.shape == expected_shape
    assert a.dtype == mx.float32
    assert_array(a, np.full(expected_shape, value, dtype=np.float32), "float32")


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32"])
def test_zeros_ones_dtype(dtype):
    z = mx.zeros((2, 2), dtype=dt(dtype))
    o = mx.ones((2, 2), dt(dtype))
    assert dtype_name(z.dtype) == dtype and dtype_name(o.dtype) == dtype
    assert_array(z, np.zeros((2, 2)), dtype)
    assert_array(o, np.ones((2, 2)), dtype)


@pytest.mark.parametrize(
    "shape, value, dtype, expected_dtype",
    [
        ((2,), 3, None, "int32"),
        ((2,), 3.0, None, "float32"),
        (2, True, None, "bool"),
        ((2, 3), 7, mx.float16, "float16"),
        ((), 5, None, "int32"),
        ((3, 0), 1.0, None, "float32"),
        ((2,), -2, mx.float32, "float32"),
    ],
)
def test_full(shape, value, dtype, expected_dtype):
    a = mx.full(shape, value) if dtype is None else mx.full(shape, value, dtype=dtype)
    np_shape = (shape,) if isinstance(shape, int) else shape
    assert a.shape == np_shape
    assert_array(a, np.full(np_shape, value).astype(NP_DTYPE[expected_dtype]), expected_dtype)


def test_full_broadcasts_an_array_value():
    a = mx.full((2, 2), mx.array([1, 2]))
    assert a.dtype == mx.int32
    assert a.tolist() == [[1, 2], [1, 2]]
    with pytest.raises(ValueError):
        mx.full((2,), mx.ones((3,)))


def test_negative_shape_raises():
    with pytest.raises(ValueError):
        mx.zeros((-1,))
    with pytest.raises(ValueError):
        mx.full((2, -3), 1.0)


# --- arange ------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs, dtype, expected",
    [
        ((5,), {}, "int32", np.arange(5)),
        ((2, 5), {}, "int32", np.arange(2, 5)),
        ((5, 0, -2), {}, "int32", np.arange(5, 0, -2)),
        ((0, -3), {}, "int32", np.arange(0, -3)),
        ((3.0,), {}, "float32", np.arange(3.0)),
        ((0.0, 5), {}, "float32", np.arange(0.0, 5)),
        ((0, 5, 0.5), {}, "float32", np.arange(0, 5, 0.5)),
        ((0.5, 3), {}, "float32", np.arange(0.5, 3)),
        ((0, 1, 0.3), {}, "float32", np.arange(0, 1, 0.3)),
        ((5,), {"dtype": mx.float32}, "float32", np.arange(5)),
        ((10,), {"dtype": mx.float16}, "float16", np.arange(10)),
        ((5,), {"step": 2}, "int32", np.arange(0, 5, 2)),
        ((), {"start": 1, "stop": 4}, "int32", np.arange(1, 4)),
        ((10, 0, -3), {"dtype": mx.int64}, "int64", np.arange(10, 0, -3)),
    ],
)
def test_arange(args, kwargs, dtype, expected):
    assert_array(mx.arange(*args, **kwargs), expected, dtype, rtol=1e-6, atol=1e-6)


def test_arange_zero_step_raises():
    with pytest.raises(ValueError, match="step"):
        mx.arange(0, 10, 0)


# --- linspace ----------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs, dtype",
    [
        ((0, 1, 5), {}, "float32"),
        ((0, 1), {}, "float32"),
        ((1, 0, 3), {}, "float32"),
        ((-2.5, 7.5, 11), {}, "float32"),
        ((0, 1, 1), {}, "float32"),
        ((0, 1, 0), {}, "float32"),
        ((0, 10, 3), {"dtype": mx.int32}, "int32"),
        ((0, 1, 2), {"dtype": mx.int32}, "int32"),
        ((0, 1, 9), {"dtype": mx.float16}, "float16"),
    ],
)
def test_linspace(args, kwargs, dtype):
    a = mx.linspace(*args, **kwargs)
    expected = np.linspace(*args)
    assert_array(a, expected.astype(NP_DTYPE[dtype]), dtype, rtol=1e-6, atol=1e-6)


def test_linspace_default_num_and_errors():
    assert mx.linspace(0, 1).shape == (50,)
    with pytest.raises(ValueError):
        mx.linspace(0, 1, -1)


# --- eye / identity ----------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs",
    [((2,), {}), ((2, 3), {}), ((3,), {"k": 1}), ((3, 2, -1), {}), ((4, 4, 2), {}), ((3,), {"k": 5}), ((0,), {})],
)
def test_eye(args, kwargs):
    assert_array(mx.eye(*args, **kwargs), np.eye(*args, **kwargs), "float32")


def test_eye_dtype_and_identity():
    assert_array(mx.eye(2, dtype=mx.int32), np.eye(2, dtype=np.int32), "int32")
    assert_array(mx.identity(3), np.identity(3), "float32")
    assert_array(mx.identity(2, dtype=mx.bool_), np.identity(2, dtype=bool), "bool")
    with pytest.raises(ValueError):
        mx.eye(-1)


# --- *_like ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bool", "int32", "float16", "bfloat16", "float32"])
def test_zeros_like_ones_like(dtype):
    base = mx.ones((2, 3), dtype=dt(dtype)).T  # a non-contiguous view
    z, o = mx.zeros_like(base), mx.ones_like(base)
    assert z.shape == o.shape == (3, 2)
    assert_array(z, np.zeros((3, 2)), dtype)
    assert_array(o, np.ones((3, 2)), dtype)


# --- astype ------------------------------------------------------------------


@pytest.mark.parametrize(
    "values, src, dst",
    [
        ([1.7, -1.7, 2.5, -0.0], "float32", "int32"),
        ([0, 2, -1], "int32", "bool"),
        ([0.0, 0.5, -3.0], "float32", "bool"),
        ([True, False], "bool", "float32"),
        ([300, -1, 7], "int32", "uint8"),
        ([1.5, 65504.0, -2.0], "float32", "float16"),
        ([1.5, 3.25, -2.0], "float32", "bfloat16"),
        ([1.5, 3.25], "float16", "float32"),
        ([2**40, -3], "int64", "float32"),
        ([1.25, -7.5], "float32", "float64"),
        ([200, 3], "uint8", "int8"),
    ],
)
def test_astype(values, src, dst):
    x = np.array(values, dtype=NP_DTYPE[src])
    a = mx.array(x) if src != "bfloat16" else mx.array(x).astype(mx.bfloat16)
    b = a.astype(dt(dst))
    assert dtype_name(b.dtype) == dst
    if dst == "bfloat16":
        # exactly representable inputs round-trip
        assert to_numpy(b).tolist() == x.astype(np.float32).tolist()
    else:
        assert_array(b, x.astype(NP_DTYPE[dst]), dst)


def test_astype_of_views_and_same_dtype():
    a = mx.arange(12).reshape(3, 4)
    assert_array(a.T.astype(mx.float32), np.arange(12).reshape(3, 4).T, "float32")
    assert_array(a[:, ::-2].astype(mx.int64), np.arange(12).reshape(3, 4)[:, ::-2], "int64")
    same = a.astype(mx.int32)
    assert same.tolist() == a.tolist() and same.dtype == mx.int32
    assert mx.astype(a, mx.float16).dtype == mx.float16
