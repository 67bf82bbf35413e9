"""The array object: attributes, scalar conversion, printing, Python protocols,
operators (reflected and in-place) and NumPy interoperability."""

import numpy as np
import pytest

from _backend import mx
from _helpers import assert_array, dt, dtype_name

# --- attributes -----------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype, itemsize",
    [("bool", 1), ("uint8", 1), ("int16", 2), ("int32", 4), ("int64", 8), ("float16", 2), ("bfloat16", 2), ("float32", 4), ("float64", 8), ("complex64", 8)],
)
def test_attributes_per_dtype(dtype, itemsize):
    a = mx.zeros((2, 3), dtype=dt(dtype))
    assert a.shape == (2, 3) and isinstance(a.shape, tuple)
    assert a.dtype == dt(dtype)
    assert a.ndim == 2
    assert a.size == 6
    assert a.itemsize == itemsize
    assert a.nbytes == 6 * itemsize
    assert dt(dtype).size == itemsize
    assert str(a.dtype).endswith("." + dtype)


def test_attributes_of_special_shapes():
    s = mx.array(3)
    assert s.shape == () and s.ndim == 0 and s.size == 1 and s.nbytes == 4
    e = mx.zeros((0, 3))
    assert e.shape == (0, 3) and e.ndim == 2 and e.size == 0 and e.nbytes == 0
    t = mx.zeros((2, 3)).T
    assert t.shape == (3, 2) and t.size == 6 and t.nbytes == 24
    # nbytes is the logical size, even for a broadcast view
    assert mx.broadcast_to(mx.array(1.0), (100,)).nbytes == 400
    assert mx.ones((2, 3, 4)).T.shape == (4, 3, 2)


def test_dtype_objects():
    assert mx.float32 == mx.float32
    assert mx.float32 != mx.float16
    assert isinstance(mx.float32, mx.Dtype)
    assert mx.issubdtype(mx.float32, mx.floating)
    assert mx.issubdtype(mx.int32, mx.integer)
    assert not mx.issubdtype(mx.int32, mx.floating)
    assert mx.array([1.0]).dtype == mx.float32
    assert mx.bool_ == mx.array(True).dtype


# --- item / tolist / scalar conversion -------------------------------------------


def test_item():
    assert mx.array(3).item() == 3 and type(mx.array(3).item()) is int
    assert mx.array(3.5).item() == 3.5 and type(mx.array(3.5).item()) is float
    assert mx.array(True).item() is True
    assert mx.array([[5]]).item() == 5  # any one-element array
    assert mx.array([1.0], dtype=mx.float16).item() == 1.0
    assert mx.array([200], dtype=mx.uint8).item() == 200
    assert mx.array(1.5, dtype=mx.bfloat16).item() == 1.5
    assert mx.array(1 + 2j).item() == 1 + 2j
    assert (mx.array([1, 2]) * 3)[1].item() == 6  # evaluates


def test_item_of_non_scalar_raises():
    with pytest.raises(ValueError, match="length-1"):
        mx.array([1, 2]).item()
    with pytest.raises(ValueError):
        mx.zeros((0,)).item()


def test_tolist():
    assert mx.array([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert mx.array([1.5]).tolist() == [1.5]
    assert mx.array(2).tolist() == 2
    assert mx.array([True, False]).tolist() == [True, False]
    assert mx.array([1, 2], dtype=mx.bfloat16).tolist() == [1.0, 2.0]
    assert mx.array([1.1], dtype=mx.float16).tolist() == [1.099609375]
    assert mx.array([1, 2], dtype=mx.uint8).tolist() == [1, 2]
    assert mx.zeros((2, 0)).tolist() == [[], []]
    assert mx.arange(6).reshape(2, 3).T.tolist() == [[0, 3], [1, 4], [2, 5]]
    assert mx.arange(10)[::-3].tolist() == [9, 6, 3, 0]
    assert type(mx.array([1.0]).tolist()[0]) is float
    assert type(mx.array([1]).tolist()[0]) is int


def test_python_number_conversions():
    assert float(mx.array(2.5)) == 2.5
    assert int(mx.array(2.5)) == 2
    assert int(mx.array([[3]])) == 3
    assert complex(mx.array(2.5)) == 2.5 + 0j
    with pytest.raises(ValueError):
        float(mx.array([1, 2]))


# --- printing -------------------------------------------------------------------

REPRS = [
    ("mx.array(3)", "array(3, dtype=int32)"),
    ("mx.array(-1)", "array(-1, dtype=int32)"),
    ("mx.array(3.0)", "array(3, dtype=float32)"),
    ("mx.array(-0.0)", "array(-0, dtype=float32)"),
    ("mx.array(0.5)", "array(0.5, dtype=float32)"),
    ("mx.array(1 / 3)", "array(0.333333, dtype=float32)"),
    ("mx.array(3.14159265)", "array(3.14159, dtype=float32)"),
    ("mx.array(1e20)", "array(1e+20, dtype=float32)"),
    ("mx.array(1e-20)", "array(1e-20, dtype=float32)"),
    ("mx.array(True)", "array(True, dtype=bool)"),
    ("mx.array(float('nan'))", "array(nan, dtype=float32)"),
    ("mx.array(2**31 - 1)", "array(2147483647, dtype=int32)"),
    ("mx.array([True, False])", "array([True, False], dtype=bool)"),
    ("mx.array([1, 2, 3])", "array([1, 2, 3], dtype=int32)"),
    ("mx.array([1.5, 2, 3])", "array([1.5, 2, 3], dtype=float32)"),
    ("mx.array([-1, 10, -100])", "array([-1, 10, -100], dtype=int32)"),
    ("mx.array([0.1, 0.25])", "array([0.1, 0.25], dtype=float32)"),
    ("mx.array([1e10, 1.0])", "array([1e+10, 1], dtype=float32)"),
    ("mx.array([1e-5, 1.0])", "array([1e-05, 1], dtype=float32)"),
    ("mx.array([123456789.0])", "array([1.23457e+08], dtype=float32)"),
    ("mx.array([1e6, 1.5])", "array([1e+06, 1.5], dtype=float32)"),
    ("mx.array([float('nan'), float('inf'), -float('inf'), 1.0])", "array([nan, inf, -inf, 1], dtype=float32)"),
    ("mx.array([1, 2], dtype=mx.uint8)", "array([1, 2], dtype=uint8)"),
    ("mx.array([1, 2], dtype=mx.uint32)", "array([1, 2], dtype=uint32)"),
    ("mx.array([1, 2], dtype=mx.int64)", "array([1, 2], dtype=int64)"),
    ("mx.array([1, 2], dtype=mx.float16)", "array([1, 2], dtype=float16)"),
    ("mx.array([1, 2], dtype=mx.bfloat16)", "array([1, 2], dtype=bfloat16)"),
    ("mx.array([1.5], dtype=mx.float64)", "array([1.5], dtype=float64)"),
    ("mx.array([1 + 2j])", "array([1+2j], dtype=complex64)"),
    ("mx.array([])", "array([], dtype=float32)"),
    ("mx.zeros((0,))", "array([], dtype=float32)"),
    ("mx.zeros((0, 3))", "array([], dtype=float32)"),
    ("mx.zeros((2, 0))", "array([[],\n       []], dtype=float32)"),
    ("mx.array([[1, 2], [3, 4]])", "array([[1, 2],\n       [3, 4]], dtype=int32)"),
    ("mx.array([[1.0, 2], [3, 4]])", "array([[1, 2],\n       [3, 4]], dtype=float32)"),
    ("mx.array([[1.25, -2.5], [100.0, 3]])", "array([[1.25, -2.5],\n       [100, 3]], dtype=float32)"),
    ("mx.arange(4).reshape(2, 2).T", "array([[0, 2],\n       [1, 3]], dtype=int32)"),
    ("mx.arange(10)[::3]", "array([0, 3, 6, 9], dtype=int32)"),
    ("mx.arange(6)", "array([0, 1, 2, 3, 4, 5], dtype=int32)"),
    (
        "mx.arange(24).reshape(2, 3, 4)",
        "array([[[0, 1, 2, 3],\n        [4, 5, 6, 7],\n        [8, 9, 10, 11]],\n"
        "       [[12, 13, 14, 15],\n        [16, 17, 18, 19],\n        [20, 21, 22, 23]]], dtype=int32)",
    ),
    (
        "mx.arange(6).reshape(6, 1)",
        "array([[0],\n       [1],\n       [2],\n       [3],\n       [4],\n       [5]], dtype=int32)",
    ),
    # summarised: any dimension longer than 6 shows its first and last 3
    ("mx.array([1, 2, 3, 4, 5, 6, 7])", "array([1, 2, 3, ..., 5, 6, 7], dtype=int32)"),
    ("mx.arange(2000)", "array([0, 1, 2, ..., 1997, 1998, 1999], dtype=int32)"),
    ("mx.arange(2000).astype(mx.float32)", "array([0, 1, 2, ..., 1997, 1998, 1999], dtype=float32)"),
    ("mx.arange(8).astype(mx.float32) / 3", "array([0, 0.333333, 0.666667, ..., 1.66667, 2, 2.33333], dtype=float32)"),
    ("mx.array([True] * 2000)", "array([True, True, True, ..., True, True, True], dtype=bool)"),
    ("mx.ones((2, 7))", "array([[1, 1, 1, ..., 1, 1, 1],\n       [1, 1, 1, ..., 1, 1, 1]], dtype=float32)"),
    (
        "mx.ones((7, 2))",
        "array([[1, 1],\n       [1, 1],\n       [1, 1],\n       ...,\n       [1, 1],\n       [1, 1],\n       [1, 1]], dtype=float32)",
    ),
    (
        "mx.arange(10).reshape(10, 1)",
        "array([[0],\n       [1],\n       [2],\n       ...,\n       [7],\n       [8],\n       [9]], dtype=int32)",
    ),
    (
        "mx.arange(1000).reshape(100, 10)",
        "array([[0, 1, 2, ..., 7, 8, 9],\n       [10, 11, 12, ..., 17, 18, 19],\n       [20, 21, 22, ..., 27, 28, 29],\n"
        "       ...,\n       [970, 971, 972, ..., 977, 978, 979],\n       [980, 981, 982, ..., 987, 988, 989],\n"
        "       [990, 991, 992, ..., 997, 998, 999]], dtype=int32)",
    ),
    (
        "mx.arange(1000).reshape(10, 10, 10)[:2]",
        "array([[[0, 1, 2, ..., 7, 8, 9],\n        [10, 11, 12, ..., 17, 18, 19],\n        [20, 21, 22, ..., 27, 28, 29],\n"
        "        ...,\n        [70, 71, 72, ..., 77, 78, 79],\n        [80, 81, 82, ..., 87, 88, 89],\n"
        "        [90, 91, 92, ..., 97, 98, 99]],\n"
        "       [[100, 101, 102, ..., 107, 108, 109],\n        [110, 111, 112, ..., 117, 118, 119],\n"
        "        [120, 121, 122, ..., 127, 128, 129],\n        ...,\n        [170, 171, 172, ..., 177, 178, 179],\n"
        "        [180, 181, 182, ..., 187, 188, 189],\n        [190, 191, 192, ..., 197, 198, 199]]], dtype=int32)",
    ),
]


@pytest.mark.parametrize("expr, expected", REPRS, ids=[r[0] for r in REPRS])
def test_repr(expr, expected):
    a = eval(expr, {"mx": mx})
    assert repr(a) == expected
    assert str(a) == expected


def test_print_evaluates(capsys):
    a = mx.array([1.0, 2.0]) * 2
    print(a)
    assert capsys.readouterr().out == "array([2, 4], dtype=float32)\n"


# --- Python protocols ------------------------------------------------------------


def test_len():
    assert len(mx.zeros((4, 2))) == 4
    assert len(mx.zeros((0, 3))) == 0
    assert len(mx.arange(5)[::2]) == 3
    with pytest.raises(TypeError):
        len(mx.array(3))


def test_iter():
    items = list(mx.arange(3))
    assert [x.item() for x in items] == [0, 1, 2]
    assert all(x.shape == () for x in items)
    rows = [r.tolist() for r in mx.arange(6).reshape(3, 2)]
    assert rows == [[0, 1], [2, 3], [4, 5]]
    assert [r.tolist() for r in mx.arange(6).reshape(3, 2).T] == [[0, 2, 4], [1, 3, 5]]
    assert list(mx.zeros((0, 3))) == []
    a, b = mx.array([1.0, 2.0])  # unpacking
    assert (a.item(), b.item()) == (1.0, 2.0)
    with pytest.raises(TypeError):
        iter(mx.array(3))


def test_bool():
    assert bool(mx.array(True)) is True
    assert bool(mx.array(0)) is False
    assert bool(mx.array([0.5])) is True
    assert bool(mx.array([[0]])) is False
    assert bool(mx.array(1.0) > 0) is True
    with pytest.raises(ValueError):
        bool(mx.array([1, 2]))
    with pytest.raises(ValueError):
        bool(mx.zeros((0,)))


def test_comparison_with_non_arrays():
    a = mx.array([1, 2, 3])
    assert (a == [1, 2, 3]) is False  # lists are not arrays: plain Python equality
    with pytest.raises(TypeError):
        a == None  # noqa: E711
    assert a in [a]
    assert isinstance(hash(a), int)


# --- operators ------------------------------------------------------------------

A = np.array([1, 2, 3], dtype=np.int32)
F = np.array([1.0, 2.0, 4.0], dtype=np.float32)
B = np.array([True, False, True])

OPERATORS = [
    ("a + 1", [2, 3, 4], "int32"),
    ("1 + a", [2, 3, 4], "int32"),
    ("a - 1", [0, 1, 2], "int32"),
    ("1 - a", [0, -1, -2], "int32"),
    ("2 * a", [2, 4, 6], "int32"),
    ("a * 2", [2, 4, 6], "int32"),
    ("a / 2", [0.5, 1.0, 1.5], "float32"),
    ("2 / a", [2.0, 1.0, 2 / 3], "float32"),
    ("a ** 2", [1, 4, 9], "int32"),
    ("2 ** a", [2, 4, 8], "int32"),
    ("a // 2", [0, 1, 1], "int32"),
    ("7 // a", [7, 3, 2], "int32"),
    ("a % 2", [1, 0, 1], "int32"),
    ("7 % a", [0, 1, 1], "int32"),
    ("-a", [-1, -2, -3], "int32"),
    ("+a", [1, 2, 3], "int32"),
    ("abs(-a)", [1, 2, 3], "int32"),
    ("~a", [-2, -3, -4], "int32"),
    ("~b", [False, True, False], "bool"),
    ("a & 1", [1, 0, 1], "int32"),
    ("a | 4", [5, 6, 7], "int32"),
    ("a ^ 1", [0, 3, 2], "int32"),
    ("b & True", [True, False, True], "bool"),
    ("b | ~b", [True, True, True], "bool"),
    ("a << 1", [2, 4, 6], "int32"),
    ("a >> 1", [0, 1, 1], "int32"),
    ("a == 2", [False, True, False], "bool"),
    ("a != 2", [True, False, True], "bool"),
    ("a < 2", [True, False, False], "bool"),
    ("a <= 2", [True, True, False], "bool"),
    ("a > 2", [False, False, True], "bool"),
    ("a >= 2", [False, True, True], "bool"),
    ("2 < a", [False, False, True], "bool"),
    ("f + a", [2.0, 4.0, 7.0], "float32"),
    ("f / f", [1.0, 1.0, 1.0], "float32"),
    ("f // 2", [0.0, 1.0, 2.0], "float32"),
    ("f % 3", [1.0, 2.0, 1.0], "float32"),
    ("-f % 3", [2.0, 1.0, 2.0], "float32"),
    ("f ** 0.5", [1.0, 2**0.5, 2.0], "float32"),
    ("a + np.int64(2)", [3, 4, 5], "int32"),
    ("a + np.float64(1.5)", [2.5, 3.5, 4.5], "float32"),
    ("f + np.float32(1)", [2.0, 3.0, 5.0], "float32"),
    ("f @ f", 21.0, "float32"),
    ("a.T + a[::-1]", [4, 4, 4], "int32"),
]


@pytest.mark.parametrize("expr, expected, dtype", OPERATORS, ids=[o[0] for o in OPERATORS])
def test_operator(expr, expected, dtype):
    env = {"mx": mx, "np": np, "a": mx.array(A), "f": mx.array(F), "b": mx.array(B)}
    assert_array(eval(expr, env), np.array(expected), dtype)


def test_matmul_operator():
    a = mx.ones((2, 3))
    assert (a @ mx.ones((3,))).tolist() == [3.0, 3.0]
    assert (a @ a.T).tolist() == [[3.0, 3.0], [3.0, 3.0]]
    assert (mx.ones((4, 2, 3)) @ mx.ones((3, 5))).shape == (4, 2, 5)


def test_in_place_operators_update_the_same_object():
    a = mx.array([1, 2, 3])
    alias = a
    alias += 1
    assert alias is a
    assert a.tolist() == [2, 3, 4]
    f = mx.array([1.0, 2.0, 4.0])
    g = f
    g *= 2
    assert g is f and f.tolist() == [2.0, 4.0, 8.0]
    f -= 1
    f /= 2
    assert f.tolist() == [0.5, 1.5, 3.5]
    f **= 2
    assert f.tolist() == [0.25, 2.25, 12.25]
    i = mx.array([7, 8])
    i //= 2
    i %= 3
    assert i.tolist() == [0, 1]
    i |= 4
    i &= 5
    i ^= 1
    i <<= 1
    i >>= 1
    assert i.tolist() == [5, 4]
    m = mx.array([[1.0, 2.0]])
    m @= mx.array([[2.0], [3.0]])
    assert m.tolist() == [[8.0]]


def test_in_place_does_not_touch_other_arrays():
    a = mx.array([1.0, 2.0])
    b = a + 0
    a += 1
    assert b.tolist() == [1.0, 2.0]
    assert a.tolist() == [2.0, 3.0]


def test_in_place_integer_true_division_raises():
    a = mx.array([1, 2])
    with pytest.raises(ValueError):
        a /= 2
    assert a.tolist() == [1, 2]


def test_setitem():
    a = mx.arange(6).reshape(2, 3)
    a[:, 1] = 0
    assert a.tolist() == [[0, 0, 2], [3, 0, 5]]
    a[0] = mx.array([7, 8, 9])
    assert a.tolist() == [[7, 8, 9], [3, 0, 5]]
    a[1, ::2] = -1
    assert a.tolist() == [[7, 8, 9], [-1, 0, -1]]
    b = mx.arange(6).reshape(2, 3)
    row = b[0]
    b[0, 0] = 100  # earlier reads are unaffected
    assert row.tolist() == [0, 1, 2]
    assert b.tolist() == [[100, 1, 2], [3, 4, 5]]


def test_unsupported_operands():
    with pytest.raises(TypeError):
        1 << mx.array([1, 2])
    with pytest.raises(TypeError):
        [1.0, 2.0] @ mx.array([1.0, 2.0])
    with pytest.raises(TypeError):
        round(mx.array([1.5]))


# --- NumPy interoperability ---------------------------------------------------------


def test_numpy_conversion_copies():
    a = mx.array([1.0, 2.0, 3.0])
    c = np.array(a)
    assert c.flags.owndata
    assert c.dtype == np.float32
    c[0] = 9
    assert a.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    "dtype, np_dtype",
    [("bool", np.bool_), ("uint8", np.uint8), ("int32", np.int32), ("int64", np.int64), ("float16", np.float16), ("float32", np.float32), ("float64", np.float64)],
)
def test_numpy_conversion_dtypes(dtype, np_dtype):
    a = mx.array([0, 1, 1], dtype=dt(dtype))
    n = np.array(a)
    assert n.dtype == np_dtype
    assert n.tolist() == np.array([0, 1, 1], dtype=np_dtype).tolist()
    assert np.asarray(a).dtype == np_dtype


def test_numpy_conversion_of_views_and_lazy_arrays():
    a = mx.arange(12).reshape(3, 4)
    n = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert np.array_equal(np.array(a.T), n.T)
    assert np.array_equal(np.array(a[::2, ::-1]), n[::2, ::-1])
    assert np.array_equal(np.array(mx.broadcast_to(mx.array([1, 2]), (3, 2))), np.broadcast_to([1, 2], (3, 2)))
    assert np.array_equal(np.array(a * 2 + 1), n * 2 + 1)  # evaluates
    assert np.array(mx.zeros((0, 3))).shape == (0, 3)
    assert np.array(mx.array(5)).shape == ()


def test_numpy_view_with_copy_false_is_writable_and_shared():
    a = mx.arange(3)
    a_view = np.array(a, copy=False)
    assert a_view.flags.owndata is False
    assert a_view.flags.writeable
    a_view[0] = 1
    assert a[0].item() == 1
    assert a.tolist() == [1, 1, 2]


def test_numpy_memoryview_and_buffer():
    a = mx.array([[1, 2], [3, 4]], dtype=mx.int32)
    m = memoryview(a)
    assert m.shape == (2, 2) and m.format == "i" and m.itemsize == 4
    assert m.tolist() == [[1, 2], [3, 4]]


def test_bfloat16_to_numpy_raises():
    a = mx.array([1.0, 2.0], dtype=mx.bfloat16)
    with pytest.raises(ValueError, match="bfloat16"):
        np.array(a)
    # the documented way out
    assert np.array(a.astype(mx.float32)).tolist() == [1.0, 2.0]


def test_astype_method():
    a = mx.array([1.5, -2.5])
    assert a.astype(mx.int32).tolist() == [1, -2]
    assert dtype_name(a.astype(mx.float16).dtype) == "float16"
    assert a.astype(mx.float32) is not None
    with pytest.raises(TypeError):
        a.astype("float32")
