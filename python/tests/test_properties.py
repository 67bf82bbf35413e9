"""Property-based tests (hypothesis) of op invariants against NumPy: random
shapes, dtypes, strided views and broadcasting for the element-wise,
reduction and shape families. Bounded and derandomized, so every run of the
suite draws the same examples."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from _backend import mx

settings.register_profile("loom", max_examples=60, deadline=None, derandomize=True,
                          database=None)
settings.load_profile("loom")

DTYPES = {
    "float32": (np.float32, mx.float32),
    "int32": (np.int32, mx.int32),
    "int64": (np.int64, mx.int64),
    "uint8": (np.uint8, mx.uint8),
    "float16": (np.float16, mx.float16),
}
FLOATS = ["float32", "float16"]


def _values(dtype):
    np_dtype = DTYPES[dtype][0]
    if np.issubdtype(np_dtype, np.floating):
        return st.floats(-8, 8, width=16 if np_dtype == np.float16 else 32)
    info = np.iinfo(np_dtype)
    return st.integers(max(info.min, -100), min(info.max, 100))


@st.composite
def arrays(draw, dtype=None, shape=None, min_dims=0, max_dims=4, min_side=0):
    """A NumPy array and the same values as a loom/MLX array, often a strided
    or transposed view rather than a fresh contiguous buffer."""
    dtype = dtype or draw(st.sampled_from(sorted(DTYPES)))
    if shape is None:
        shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                                      max_side=5))
    layout = draw(st.sampled_from(["plain", "strided", "transposed"]))
    if layout == "strided":
        big = tuple(2 * s for s in shape)
        base = draw(hnp.arrays(DTYPES[dtype][0], big, elements=_values(dtype)))
        index = tuple(slice(None, None, 2) for _ in shape)
        return base[index], mx.array(base)[index] if shape else mx.array(base)
    if layout == "transposed" and len(shape) >= 2:
        base = draw(hnp.arrays(DTYPES[dtype][0], shape[::-1], elements=_values(dtype)))
        return base.T, mx.array(base).T
    base = draw(hnp.arrays(DTYPES[dtype][0], shape, elements=_values(dtype)))
    return base, mx.array(base)


def _check(got, expected, dtype):
    got = np.array(got)
    assert got.shape == expected.shape
    if dtype == "float16":
        np.testing.assert_allclose(got.astype(np.float32), expected.astype(np.float32),
                                   rtol=2e-3, atol=2e-3)
    elif dtype == "float32":
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, expected)


# --- element-wise ------------------------------------------------------------

@st.composite
def broadcastable_pair(draw):
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4,
                                                    max_side=4))
    a = draw(arrays(dtype=dtype, shape=shapes.input_shapes[0]))
    b = draw(arrays(dtype=dtype, shape=shapes.input_shapes[1]))
    return dtype, a, b


BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@given(case=broadcastable_pair())
def test_binary_matches_numpy(name, case):
    dtype, (an, a), (bn, b) = case
    with np.errstate(over="ignore"):
        expected = BINARY[name](an, bn)
    _check(getattr(mx, name)(a, b), expected.astype(an.dtype), dtype)


@pytest.mark.parametrize("name", ["equal", "less", "greater_equal"])
@given(case=broadcastable_pair())
def test_comparisons_match_numpy(name, case):
    _, (an, a), (bn, b) = case
    got = getattr(mx, name)(a, b)
    assert got.dtype == mx.bool_
    np.testing.assert_array_equal(np.array(got), getattr(np, name)(an, bn))


@pytest.mark.parametrize("name", ["abs", "negative", "square"])
@given(case=arrays())
def test_unary_matches_numpy(name, case):
    an, a = case
    dtype = str(an.dtype)
    with np.errstate(over="ignore"):
        expected = getattr(np, name)(an)
    _check(getattr(mx, name)(a), expected, dtype)


@pytest.mark.parametrize("name", ["exp", "tanh", "sin", "sqrt"])
@given(case=arrays(dtype="float32"))
def test_float_unary_matches_numpy(name, case):
    an, a = case
    if name == "sqrt":
        an, a = np.abs(an), mx.abs(a)
    _check(getattr(mx, name)(a), getattr(np, name)(an.astype(np.float64)).astype(np.float32),
           "float32")


@given(case=broadcastable_pair())
def test_add_commutes_and_subtract_inverts(case):
    dtype, (an, a), (bn, b) = case
    np.testing.assert_array_equal(np.array(a + b), np.array(b + a))
    if dtype in ("int32", "int64"):
        np.testing.assert_array_equal(np.array((a + b) - b), np.broadcast_to(an, (an + bn).shape))


# --- reductions --------------------------------------------------------------

@st.composite
def reduction_case(draw, dtypes=None):
    dtype = draw(st.sampled_from(dtypes or sorted(DTYPES)))
    # Non-empty: MLX 0.32.4 returns garbage for some int32 sums of empty
    # strided views (an oracle bug, not a property to pin).
    an, a = draw(arrays(dtype=dtype, min_dims=1, min_side=1))
    axes = draw(st.lists(st.integers(0, an.ndim - 1), unique=True, max_size=an.ndim))
    keepdims = draw(st.booleans())
    return dtype, an, a, tuple(axes) if axes else None, keepdims


@given(case=reduction_case(dtypes=["float32", "int32", "int64"]))
def test_sum_matches_numpy(case):
    dtype, an, a, axes, keepdims = case
    _check(mx.sum(a, axis=axes, keepdims=keepdims), np.sum(an, axis=axes, keepdims=keepdims),
           dtype)


@pytest.mark.parametrize("name", ["max", "min"])
@given(case=reduction_case())
def test_max_min_match_numpy(name, case):
    dtype, an, a, axes, keepdims = case
    _check(getattr(mx, name)(a, axis=axes, keepdims=keepdims),
           getattr(np, name)(an, axis=axes, keepdims=keepdims), dtype)


@given(case=reduction_case(dtypes=["float32"]))
def test_mean_is_sum_over_count(case):
    _, an, a, axes, keepdims = case
    _check(mx.mean(a, axis=axes, keepdims=keepdims),
           np.mean(an.astype(np.float64), axis=axes, keepdims=keepdims).astype(np.float32),
           "float32")


@given(case=reduction_case(dtypes=["int32", "uint8"]))
def test_all_any_match_numpy(case):
    _, an, a, axes, keepdims = case
    np.testing.assert_array_equal(np.array(mx.all(a, axis=axes, keepdims=keepdims)),
                                  np.all(an, axis=axes, keepdims=keepdims))
    np.testing.assert_array_equal(np.array(mx.any(a, axis=axes, keepdims=keepdims)),
                                  np.any(an, axis=axes, keepdims=keepdims))


# --- shapes ------------------------------------------------------------------

@given(case=arrays(min_dims=1), data=st.data())
def test_reshape_round_trips(case, data):
    an, a = case
    target = data.draw(st.permutations(an.shape))
    _check(mx.reshape(a, tuple(target)), an.reshape(tuple(target)), str(an.dtype))
    flat = mx.reshape(a, (-1,))
    _check(flat, an.reshape(-1), str(an.dtype))
    _check(mx.reshape(flat, an.shape), an, str(an.dtype))


@given(case=arrays(min_dims=1), data=st.data())
def test_transpose_matches_numpy_and_inverts(case, data):
    an, a = case
    perm = data.draw(st.permutations(range(an.ndim)))
    t = mx.transpose(a, perm)
    _check(t, np.transpose(an, perm), str(an.dtype))
    _check(mx.transpose(t, list(np.argsort(perm))), an, str(an.dtype))


@given(case=arrays(min_dims=1), data=st.data())
def test_slicing_matches_numpy(case, data):
    an, a = case
    index = tuple(
        slice(data.draw(st.integers(-n - 1, n + 1)), data.draw(st.integers(-n - 1, n + 1)),
              data.draw(st.sampled_from([1, 2, -1, 3])))
        for n in an.shape
    )
    _check(a[index], an[index], str(an.dtype))


@given(data=st.data())
def test_concatenate_and_split_round_trip(data):
    dtype = data.draw(st.sampled_from(sorted(DTYPES)))
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4))
    axis = data.draw(st.integers(0, len(shape) - 1))
    parts = []
    for _ in range(data.draw(st.integers(1, 3))):
        s = list(shape)
        s[axis] = data.draw(st.integers(0, 3))
        parts.append(data.draw(arrays(dtype=dtype, shape=tuple(s))))
    got = mx.concatenate([p[1] for p in parts], axis=axis)
    expected = np.concatenate([p[0] for p in parts], axis=axis)
    _check(got, expected, dtype)
    bounds = list(np.cumsum([p[0].shape[axis] for p in parts])[:-1])
    for (pn, _), piece in zip(parts, mx.split(got, bounds, axis=axis)):
        _check(piece, pn, dtype)


@given(case=arrays(max_dims=3), data=st.data())
def test_expand_dims_squeeze_and_broadcast_to(case, data):
    an, a = case
    axis = data.draw(st.integers(-an.ndim - 1, an.ndim))
    e = mx.expand_dims(a, axis)
    _check(e, np.expand_dims(an, axis), str(an.dtype))
    _check(mx.squeeze(e, axis), an, str(an.dtype))
    target = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2))) + tuple(
        n if n != 1 else data.draw(st.integers(1, 3)) for n in an.shape
    )
    _check(mx.broadcast_to(a, target), np.broadcast_to(an, target), str(an.dtype))
