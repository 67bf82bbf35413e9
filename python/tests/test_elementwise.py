"""Element-wise ops against NumPy: dtypes, type promotion, broadcasting,
non-contiguous views (transposes, strided and reversed slices, broadcasts),
0-d and empty arrays."""

import math

import numpy as np
import pytest

from _backend import mx
from _helpers import NP_DTYPE, assert_array, dt, dtype_name, from_numpy, round_to

# --- layouts ------------------------------------------------------------------
# Each layout makes a (3, 4)-shaped (or empty / 0-d) operand from a base NumPy
# array, applying the same view to the MLX array and to the NumPy array.

LAYOUTS = {
    "contiguous": ((3, 4), lambda a: a),
    "transposed": ((4, 3), lambda a: a.T),
    "strided": ((6, 8), lambda a: a[::2, 1::2]),
    "reversed": ((3, 4), lambda a: a[::-1, ::-1]),
    "broadcast": ((1, 4), None),  # broadcast_to (3, 4)
    "empty": ((0, 4), lambda a: a),
    "scalar": ((), lambda a: a),
}


def make_operand(values_fn, dtype, layout, seed=0):
    """(mx array, float64 NumPy reference) in the given layout and dtype."""
    base_shape, view = LAYOUTS[layout]
    base = round_to(values_fn(np.random.default_rng(seed), base_shape), dtype)
    a = from_numpy(base, dtype)
    if view is None:
        return mx.broadcast_to(a, (3, 4)), np.broadcast_to(base, (3, 4))
    return view(a), view(base)


def uniform(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, size=shape)


def integers(lo, hi):
    return lambda rng, shape: rng.integers(lo, hi, size=shape).astype(np.float64)


# --- unary ops ------------------------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])

UNARY = {
    # name: (reference, float domain, int domain, keeps integer dtype)
    "negative": (np.negative, uniform(-3, 3), integers(-5, 6), True),
    "abs": (np.abs, uniform(-3, 3), integers(-5, 6), True),
    "square": (np.square, uniform(-3, 3), integers(-5, 6), True),
    "exp": (np.exp, uniform(-3, 3), integers(-3, 4), False),
    "log": (np.log, uniform(0.1, 5), integers(1, 10), False),
    "sqrt": (np.sqrt, uniform(0.1, 5), integers(0, 10), False),
    "sin": (np.sin, uniform(-3, 3), integers(-5, 6), False),
    "cos": (np.cos, uniform(-3, 3), integers(-5, 6), False),
    "tanh": (np.tanh, uniform(-3, 3), integers(-5, 6), False),
    "erf": (_erf, uniform(-2, 2), integers(-2, 3), False),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), uniform(-5, 5), integers(-5, 6), False),
}

UNARY_DTYPES = ["float32", "float16", "bfloat16", "int32"]


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", UNARY_DTYPES)
@pytest.mark.parametrize("op", list(UNARY))
def test_unary(op, dtype, layout):
    ref, float_domain, int_domain, keeps_int = UNARY[op]
    domain = int_domain if dtype == "int32" else float_domain
    a, an = make_operand(domain, dtype, layout)
    out = getattr(mx, op)(a)
    expected_dtype = dtype if (dtype != "int32" or keeps_int) else "float32"
    tol = {"rtol": 1e-5, "atol": 1e-6} if expected_dtype == "float32" else {}
    assert_array(out, ref(an), expected_dtype, **tol)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int64", "float64"])
@pytest.mark.parametrize("op", ["negative", "abs", "square", "exp", "sqrt"])
def test_unary_more_dtypes(op, dtype):
    ref, float_domain, int_domain, keeps_int = UNARY[op]
    if dtype == "float64":
        domain = float_domain
    elif dtype == "uint8":
        domain = integers(0, 10)
    else:
        domain = int_domain
    a, an = make_operand(domain, dtype, "contiguous")
    out = getattr(mx, op)(a)
    if dtype == "float64" or keeps_int:
        expected_dtype = dtype
    else:
        expected_dtype = "float32"
    expected = ref(an)
    if expected_dtype in ("uint8", "int8", "int64"):
        expected = expected.astype(NP_DTYPE[expected_dtype])  # uint8 negation wraps
    tol = {"rtol": 1e-5, "atol": 1e-6} if expected_dtype == "float32" else {}
    assert_array(out, expected, expected_dtype, **tol)


def test_unary_special_values():
    x = mx.array([0.0, -0.0, float("inf"), -float("inf"), float("nan")])
    assert np.array_equal(np.array(mx.exp(x)), np.exp(np.array(x)), equal_nan=True)
    assert np.array_equal(np.array(mx.tanh(x)), np.tanh(np.array(x)), equal_nan=True)
    assert np.array_equal(np.array(mx.sigmoid(x)), np.array([0.5, 0.5, 1.0, 0.0, np.nan], dtype=np.float32), equal_nan=True)
    assert np.array_equal(np.array(mx.abs(x)), np.abs(np.array(x)), equal_nan=True)
    assert np.array_equal(np.array(mx.erf(x)), np.array([0.0, -0.0, 1.0, -1.0, np.nan], dtype=np.float32), equal_nan=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        assert np.array_equal(np.array(mx.log(x)), np.log(np.array(x)), equal_nan=True)
        assert np.array_equal(np.array(mx.sqrt(x)), np.sqrt(np.array(x)), equal_nan=True)
    assert repr(mx.negative(mx.array(0.0))) == "array(-0, dtype=float32)"


def test_negative_of_bool_raises():
    with pytest.raises(ValueError):
        mx.negative(mx.array([True, False]))


def test_unary_methods():
    a = mx.array([[1.0, 4.0], [9.0, 16.0]])
    assert a.sqrt().tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert a.square().tolist() == [[1.0, 16.0], [81.0, 256.0]]
    assert (-a).abs().tolist() == a.tolist()
    assert_array(a.exp(), np.exp(np.array(a, dtype=np.float64)), "float32", rtol=1e-6)
    assert_array(a.log(), np.log(np.array(a, dtype=np.float64)), "float32", rtol=1e-6)
    assert_array(a.sin(), np.sin(np.array(a, dtype=np.float64)), "float32", rtol=1e-5)
    assert_array(a.cos(), np.cos(np.array(a, dtype=np.float64)), "float32", rtol=1e-5, atol=1e-6)


# --- binary ops -----------------------------------------------------------------

BINARY = {
    # name: (reference, float domains (a, b), int domains (a, b))
    "add": (np.add, (uniform(-3, 3), uniform(-3, 3)), (integers(-9, 10), integers(-9, 10))),
    "subtract": (np.subtract, (uniform(-3, 3), uniform(-3, 3)), (integers(-9, 10), integers(-9, 10))),
    "multiply": (np.multiply, (uniform(-3, 3), uniform(-3, 3)), (integers(-9, 10), integers(-9, 10))),
    "divide": (np.divide, (uniform(-3, 3), uniform(0.5, 3)), (integers(-9, 10), integers(1, 10))),
    "power": (np.power, (uniform(0.1, 3), uniform(-2, 2)), (integers(-3, 4), integers(0, 4))),
    "maximum": (np.maximum, (uniform(-3, 3), uniform(-3, 3)), (integers(-9, 10), integers(-9, 10))),
    "minimum": (np.minimum, (uniform(-3, 3), uniform(-3, 3)), (integers(-9, 10), integers(-9, 10))),
    "equal": (np.equal, (integers(-2, 3), integers(-2, 3)), (integers(-2, 3), integers(-2, 3))),
    "not_equal": (np.not_equal, (integers(-2, 3), integers(-2, 3)), (integers(-2, 3), integers(-2, 3))),
    "less": (np.less, (integers(-2, 3), integers(-2, 3)), (integers(-2, 3), integers(-2, 3))),
    "less_equal": (np.less_equal, (integers(-2, 3), integers(-2, 3)), (integers(-2, 3), integers(-2, 3))),
    "greater": (np.greater, (integers(-2, 3), integers(-2, 3)), (integers(-2, 3), integers(-2, 3))),
    "greater_equal": (np.greater_equal, (integers(-2, 3), integers(-2, 3)), (integers(-2, 3), integers(-2, 3))),
}
COMPARISONS = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}

LAYOUT_PAIRS = [
    ("contiguous", "contiguous"),
    ("transposed", "strided"),
    ("reversed", "contiguous"),
    ("broadcast", "transposed"),
    ("scalar", "strided"),
    ("contiguous", "scalar"),
    ("empty", "empty"),
]


def binary_dtype(op, dtype):
    if op in COMPARISONS:
        return "bool"
    if op == "divide" and dtype == "int32":
        return "float32"
    return dtype


@pytest.mark.parametrize("layouts", LAYOUT_PAIRS, ids=lambda p: f"{p[0]}-{p[1]}")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32"])
@pytest.mark.parametrize("op", list(BINARY))
def test_binary(op, dtype, layouts):
    ref, float_domains, int_domains = BINARY[op]
    domains = int_domains if dtype == "int32" else float_domains
    a, an = make_operand(domains[0], dtype, layouts[0], seed=1)
    b, bn = make_operand(domains[1], dtype, layouts[1], seed=2)
    out = getattr(mx, op)(a, b)
    expected_dtype = binary_dtype(op, dtype)
    tol = {"rtol": 1e-5, "atol": 1e-6} if expected_dtype == "float32" else {}
    assert_array(out, ref(an, bn), expected_dtype, **tol)


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [
        ((3, 1), (1, 4)),
        ((2, 3, 4), (4,)),
        ((2, 1, 4), (3, 1)),
        ((), (2, 3)),
        ((1,), (0,)),
        ((5, 1, 1), (1, 2, 1)),
        ((0, 3), (1, 3)),
    ],
)
@pytest.mark.parametrize("op", ["add", "multiply", "maximum", "less"])
def test_binary_broadcasting(op, shape_a, shape_b):
    rng = np.random.default_rng(3)
    an = rng.integers(-5, 5, size=shape_a).astype(np.float32)
    bn = rng.integers(-5, 5, size=shape_b).astype(np.float32)
    out = getattr(mx, op)(mx.array(an), mx.array(bn))
    expected = getattr(np, op)(an, bn)
    assert_array(out, expected, "bool" if op == "less" else "float32")


def test_binary_with_python_scalars():
    a = mx.array([1.0, 2.0, 4.0])
    assert mx.add(a, 1).tolist() == [2.0, 3.0, 5.0]
    assert mx.add(1, a).tolist() == [2.0, 3.0, 5.0]
    assert mx.subtract(10, a).tolist() == [9.0, 8.0, 6.0]
    assert mx.divide(1, a).tolist() == [1.0, 0.5, 0.25]
    assert mx.power(2, a).tolist() == [2.0, 4.0, 16.0]
    assert mx.power(a, 0.5).tolist() == [1.0, math.sqrt(2.0), 2.0] or np.allclose(
        np.array(mx.power(a, 0.5)), np.sqrt([1.0, 2.0, 4.0])
    )
    assert mx.maximum(a, 2).tolist() == [2.0, 2.0, 4.0]
    assert mx.minimum(2.5, a).tolist() == [1.0, 2.0, 2.5]
    assert mx.add(2, 3).item() == 5 and mx.add(2, 3).dtype == mx.int32
    assert mx.multiply(2.0, 3).dtype == mx.float32


def test_integer_division_and_power_semantics():
    assert mx.divide(mx.array([7, -7]), mx.array([2, 2])).tolist() == [3.5, -3.5]
    assert (mx.array([-7, 7]) // 2).tolist() == [-4, 3]
    assert (mx.array([-7, 7]) % 3).tolist() == [2, 1]
    assert (mx.array([-7.0, 7.0]) % 3).tolist() == [2.0, 1.0]
    assert mx.power(mx.array([2, 3]), mx.array([3, 2])).tolist() == [8, 9]
    assert (mx.array(2.0) ** -1).item() == 0.5


def test_binary_special_values():
    nan, inf = float("nan"), float("inf")
    a = mx.array([nan, 1.0, inf, -inf, 0.0])
    b = mx.array([1.0, nan, 1.0, 0.0, -0.0])
    an, bn = np.array(a), np.array(b)
    for op in ("maximum", "minimum", "add", "multiply"):
        with np.errstate(invalid="ignore"):
            expected = getattr(np, op)(an, bn)
        assert np.array_equal(np.array(getattr(mx, op)(a, b)), expected, equal_nan=True), op
    for op in ("equal", "not_equal", "less", "greater_equal"):
        assert np.array(getattr(mx, op)(a, b)).tolist() == getattr(np, op)(an, bn).tolist(), op
    with np.errstate(divide="ignore", invalid="ignore"):
        assert np.array_equal(np.array(mx.divide(a, b)), an / bn, equal_nan=True)


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match=r"\(2,3\).*\(4,5\)"):
        mx.add(mx.ones((2, 3)), mx.ones((4, 5)))
    with pytest.raises(ValueError):
        mx.ones((3,)) * mx.ones((4,))


# --- type promotion -------------------------------------------------------------

PROMOTION_DTYPES = ["bool", "uint8", "uint32", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
# rows: first operand; columns: second operand (order of PROMOTION_DTYPES)
ADD_PROMOTION = {
    "bool": ["bool", "uint8", "uint32", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"],
    "uint8": ["uint8", "uint8", "uint32", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"],
    "uint32": ["uint32", "uint32", "uint32", "int64", "int64", "int64", "float16", "bfloat16", "float32", "float64"],
    "int8": ["int8", "int16", "int64", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"],
    "int32": ["int32", "int32", "int64", "int32", "int32", "int64", "float16", "bfloat16", "float32", "float64"],
    "int64": ["int64", "int64", "int64", "int64", "int64", "int64", "float16", "bfloat16", "float32", "float64"],
    "float16": ["float16", "float16", "float16", "float16", "float16", "float16", "float16", "float32", "float32", "float64"],
    "bfloat16": ["bfloat16", "bfloat16", "bfloat16", "bfloat16", "bfloat16", "bfloat16", "float32", "bfloat16", "float32", "float64"],
    "float32": ["float32"] * 9 + ["float64"],
    "float64": ["float64"] * 10,
}


@pytest.mark.parametrize("lhs", PROMOTION_DTYPES)
def test_promotion_table(lhs):
    a = mx.array([1], dtype=dt(lhs))
    for rhs, expected in zip(PROMOTION_DTYPES, ADD_PROMOTION[lhs]):
        b = mx.array([1], dtype=dt(rhs))
        assert dtype_name((a + b).dtype) == expected, (lhs, rhs)
        assert dtype_name(mx.maximum(a, b).dtype) == expected, (lhs, rhs)
        div = dtype_name((a / b).dtype)
        assert div == (expected if expected.startswith(("float", "bfloat")) else "float32"), (lhs, rhs)
        assert (a < b).dtype == mx.bool_


@pytest.mark.parametrize(
    "dtype, int_result, float_result",
    [
        ("bool", "int32", "float32"),
        ("uint8", "uint8", "float32"),
        ("int8", "int8", "float32"),
        ("int32", "int32", "float32"),
        ("int64", "int64", "float32"),
        ("float16", "float16", "float16"),
        ("bfloat16", "bfloat16", "bfloat16"),
        ("float32", "float32", "float32"),
        ("float64", "float64", "float64"),
    ],
)
def test_python_scalars_are_weakly_typed(dtype, int_result, float_result):
    x = mx.array([1], dtype=dt(dtype))
    assert dtype_name((x + 1).dtype) == int_result
    assert dtype_name((2 * x).dtype) == int_result
    assert dtype_name((x + 1.5).dtype) == float_result
    assert dtype_name((x / 2).dtype) == ("float32" if float_result == "float32" and int_result != "float32" else float_result)
    assert dtype_name((x + True).dtype) == dtype


# --- where ----------------------------------------------------------------------


@pytest.mark.parametrize("layouts", [("contiguous", "transposed"), ("broadcast", "strided"), ("scalar", "reversed"), ("empty", "empty")])
def test_where(layouts):
    c, cn = make_operand(integers(0, 2), "bool", layouts[0], seed=4)
    x, xn = make_operand(uniform(-3, 3), "float32", layouts[1], seed=5)
    y, yn = make_operand(uniform(-3, 3), "float32", "contiguous" if layouts[0] != "empty" else "empty", seed=6)
    assert_array(mx.where(c, x, y), np.where(cn, xn, yn), "float32")


def test_where_promotion_and_scalars():
    cond = mx.array([True, False, True])
    out = mx.where(cond, mx.array([1, 2, 3]), mx.array([0.5, 0.5, 0.5]))
    assert out.dtype == mx.float32 and out.tolist() == [1.0, 0.5, 3.0]
    out = mx.where(cond, 1, 0)
    assert out.dtype == mx.int32 and out.tolist() == [1, 0, 1]
    out = mx.where(cond, mx.array([1.0, 2.0, 3.0], dtype=mx.float16), 0.0)
    assert out.dtype == mx.float16 and out.tolist() == [1.0, 0.0, 3.0]
    out = mx.where(mx.array([[True], [False]]), mx.array([1, 2]), mx.array(-1))
    assert out.tolist() == [[1, 2], [-1, -1]]
    # a non-bool condition is tested for truth
    assert mx.where(mx.array([0, 2]), 1.0, 0.0).tolist() == [0.0, 1.0]
    with pytest.raises(ValueError):
        mx.where(cond, mx.ones((2,)), mx.ones((3,)))
