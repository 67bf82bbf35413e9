"""matmul and the shape ops (reshape transpose broadcast_to expand_dims squeeze
concatenate split) against NumPy, including views and empty arrays."""

import numpy as np
import pytest

from _backend import mx
from _helpers import assert_array, from_numpy, round_to

# --- matmul ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [
        ((2, 3), (3, 4)),
        ((1, 5), (5, 1)),
        ((7, 16), (16, 9)),
        ((2, 3, 4), (2, 4, 5)),  # batched
        ((2, 1, 3, 4), (5, 4, 2)),  # broadcast batch dims
        ((3, 4), (2, 4, 5)),
        ((1, 3, 4), (4, 2)),
        ((3,), (3, 4)),  # 1-D on the left
        ((2, 3, 4), (4,)),  # 1-D on the right
        ((3,), (3,)),  # dot product: 0-d result
        ((0, 3), (3, 4)),  # empty
        ((2, 0), (0, 3)),  # empty contraction: zeros
        ((2, 3, 0), (2, 0, 4)),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_matmul(dtype, shape_a, shape_b):
    rng = np.random.default_rng(0)
    an = round_to(rng.uniform(-1, 1, size=shape_a), dtype)
    bn = round_to(rng.uniform(-1, 1, size=shape_b), dtype)
    out = mx.matmul(from_numpy(an, dtype), from_numpy(bn, dtype))
    tol = {"float32": 1e-5, "float64": 1e-6, "float16": 1e-2, "bfloat16": 5e-2}[dtype]
    assert_array(out, an @ bn, dtype, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "make",
    [
        lambda a, b: (a.T, b),
        lambda a, b: (a, b.T),
        lambda a, b: (a.T, b.T),
        lambda a, b: (a[::2], b),
        lambda a, b: (a, b[:, ::-1]),
        lambda a, b: (a[1:, 1:], b[1:, ::2]),
    ],
    ids=["aT", "bT", "both-T", "a-step", "b-reversed", "offsets"],
)
def test_matmul_non_contiguous(make):
    rng = np.random.default_rng(1)
    an = rng.uniform(-1, 1, size=(6, 6)).astype(np.float32)
    bn = rng.uniform(-1, 1, size=(6, 6)).astype(np.float32)
    x, y = make(mx.array(an), mx.array(bn))
    xn, yn = make(an.astype(np.float64), bn.astype(np.float64))
    if x.shape[-1] != y.shape[0]:
        y, yn = y[: x.shape[-1]], yn[: x.shape[-1]]
    assert_array(x @ y, xn @ yn, "float32", rtol=1e-5, atol=1e-5)


def test_matmul_batched_views():
    rng = np.random.default_rng(2)
    an = rng.uniform(-1, 1, size=(3, 4, 5)).astype(np.float32)
    bn = rng.uniform(-1, 1, size=(3, 4, 6)).astype(np.float32)
    a, b = mx.array(an), mx.array(bn)
    out = mx.matmul(mx.transpose(a, (0, 2, 1)), b)
    assert_array(out, np.transpose(an, (0, 2, 1)).astype(np.float64) @ bn, "float32", rtol=1e-5, atol=1e-5)
    row = mx.broadcast_to(mx.array(an[0]), (3, 4, 5))
    assert_array(mx.matmul(mx.transpose(row, (0, 2, 1)), b), np.broadcast_to(an[0].T, (3, 5, 4)).astype(np.float64) @ bn, "float32", rtol=1e-5, atol=1e-5)


def test_matmul_mixed_dtypes_and_operator():
    a = mx.ones((2, 3), dtype=mx.float16)
    b = mx.ones((3, 2))
    out = a @ b
    assert out.dtype == mx.float32 and out.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    assert (mx.ones((3,)) @ mx.ones((3,))).item() == 3.0


def test_matmul_errors():
    with pytest.raises(ValueError, match=r"\(2,3\).*\(4,5\)"):
        mx.matmul(mx.ones((2, 3)), mx.ones((4, 5)))
    with pytest.raises(ValueError):
        mx.matmul(mx.array(1.0), mx.ones((3,)))
    with pytest.raises(ValueError):
        mx.matmul(mx.ones((2, 3), dtype=mx.int32), mx.ones((3, 2), dtype=mx.int32))
    with pytest.raises(ValueError):
        mx.matmul(mx.ones((2, 2, 3)), mx.ones((3, 3, 2)))  # batch dims do not broadcast


def test_matmul_error_message_matches_mlx():
    with pytest.raises(ValueError) as info:
        mx.matmul(mx.ones((2, 3)), mx.ones((4, 5)))
    assert str(info.value) == (
        "[matmul] Last dimension of first input with shape (2,3) must match second "
        "to last dimension of second input with shape (4,5)."
    )


# --- reshape --------------------------------------------------------------------


@pytest.mark.parametrize(
    "src, view, shape",
    [
        ((6,), None, (2, 3)),
        ((6,), None, (2, -1)),
        ((2, 3, 4), None, (-1,)),
        ((2, 3, 4), None, (4, 3, 2)),
        ((2, 3), "T", (6,)),
        ((4, 6), "step", (2, 6)),
        ((4, 6), "reversed", (24,)),
        ((2, 3), None, (1, 2, 1, 3, 1)),
        ((0, 3), None, (3, 0)),
        ((1,), None, ()),
        ((), None, (1, 1)),
    ],
)
def test_reshape(src, view, shape):
    an = np.arange(int(np.prod(src))).reshape(src).astype(np.float32)
    a = mx.array(an)
    if view == "T":
        a, an = a.T, an.T
    elif view == "step":
        a, an = a[::2, :], an[::2, :]
    elif view == "reversed":
        a, an = a[::-1, ::-1], an[::-1, ::-1]
    assert_array(mx.reshape(a, shape), np.reshape(an, shape), "float32")
    assert_array(a.reshape(shape), np.reshape(an, shape), "float32")
    if len(shape) > 0:
        assert_array(a.reshape(*shape), np.reshape(an, shape), "float32")


def test_reshape_errors():
    with pytest.raises(ValueError, match=r"6.*\(4\)"):
        mx.reshape(mx.ones((2, 3)), (4,))
    with pytest.raises(ValueError):
        mx.reshape(mx.arange(6), (-1, -1))
    with pytest.raises(ValueError):
        mx.reshape(mx.zeros((0, 3)), (0, -1))  # -1 is ambiguous for an empty array


# --- transpose --------------------------------------------------------------------


@pytest.mark.parametrize("axes", [None, (0, 1, 2), (2, 0, 1), (1, -1, 0), (-1, -2, -3)], ids=str)
def test_transpose(axes):
    an = np.arange(24).reshape(2, 3, 4).astype(np.int32)
    a = mx.array(an)
    expected = np.transpose(an, axes)
    assert_array(mx.transpose(a, axes) if axes is not None else mx.transpose(a), expected, "int32")
    if axes is not None:
        assert_array(a.transpose(*axes), expected, "int32")
        assert_array(a.transpose(axes), expected, "int32")
    assert_array(a[:, ::-1].transpose(), np.transpose(an[:, ::-1]), "int32")


def test_transpose_and_swapaxes_shortcuts():
    an = np.arange(6).reshape(2, 3)
    a = mx.array(an)
    assert a.T.shape == (3, 2)
    assert a.T.tolist() == an.T.tolist()
    assert mx.array(5).T.item() == 5
    assert mx.swapaxes(mx.ones((2, 3, 4)), 0, 2).shape == (4, 3, 2)
    assert mx.array(an).T.T.tolist() == an.tolist()


def test_transpose_errors():
    a = mx.ones((2, 3))
    with pytest.raises(IndexError):
        mx.transpose(a, (0, 2))
    with pytest.raises(ValueError):
        mx.transpose(a, (0, 0))


# --- broadcast_to / expand_dims / squeeze -----------------------------------------


@pytest.mark.parametrize(
    "src, shape",
    [((2,), (3, 2)), ((), (2,)), ((2, 1), (2, 4)), ((1, 3), (2, 2, 3)), ((2, 1), (2, 0)), ((3,), (3,))],
)
def test_broadcast_to(src, shape):
    an = np.arange(int(np.prod(src))).reshape(src).astype(np.float32) + 1
    assert_array(mx.broadcast_to(mx.array(an), shape), np.broadcast_to(an, shape), "float32")
    # a broadcast view feeds other ops correctly
    out = mx.broadcast_to(mx.array(an), shape) * 2
    assert_array(out, np.broadcast_to(an, shape) * 2, "float32")


def test_broadcast_to_errors():
    with pytest.raises(ValueError, match=r"\(2,3\).*\(3,3\)"):
        mx.broadcast_to(mx.ones((2, 3)), (3, 3))


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3, (0, 1), (0, -1), (1, 3)], ids=str)
def test_expand_dims(axis):
    an = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert_array(mx.expand_dims(mx.array(an), axis), np.expand_dims(an, axis), "int32")


def test_expand_dims_errors():
    with pytest.raises(IndexError):
        mx.expand_dims(mx.ones((2, 3)), 5)
    with pytest.raises(ValueError):
        mx.expand_dims(mx.ones((2, 3)), (0, 0))


@pytest.mark.parametrize("axis", [None, 0, 2, -1, (0, 2), (0, -1)], ids=str)
def test_squeeze(axis):
    an = np.arange(3, dtype=np.int32).reshape(1, 3, 1)
    a = mx.array(an)
    expected = np.squeeze(an, axis)
    assert_array(mx.squeeze(a, axis) if axis is not None else mx.squeeze(a), expected, "int32")
    assert_array(a.squeeze(axis) if axis is not None else a.squeeze(), expected, "int32")


def test_squeeze_errors():
    with pytest.raises(ValueError):
        mx.squeeze(mx.ones((2, 3)), 0)
    with pytest.raises(IndexError):
        mx.squeeze(mx.ones((1, 3)), 2)


# --- concatenate ------------------------------------------------------------------


@pytest.mark.parametrize(
    "shapes, axis",
    [
        ([(2,), (3,)], 0),
        ([(2, 1), (2, 2), (2, 3)], 1),
        ([(2, 1), (2, 2)], -1),
        ([(1, 3), (2, 3)], 0),
        ([(2, 3), (2, 3)], None),
        ([(0, 3), (2, 3)], 0),
        ([(2, 0), (2, 2)], 1),
        ([(2, 2, 2)], 2),
    ],
)
def test_concatenate(shapes, axis):
    parts = [np.arange(int(np.prod(s))).reshape(s).astype(np.float32) + 10 * i for i, s in enumerate(shapes)]
    out = mx.concatenate([mx.array(p) for p in parts], axis=axis)
    assert_array(out, np.concatenate(parts, axis=axis), "float32")


def test_concatenate_defaults_views_and_promotion():
    a = mx.arange(6).reshape(2, 3)
    an = np.arange(6).reshape(2, 3)
    assert_array(mx.concatenate([a, a.T.T]), np.concatenate([an, an]), "int32")
    assert_array(mx.concatenate([a.T, a[:, ::-1].T], axis=1), np.concatenate([an.T, an[:, ::-1].T], axis=1), "int32")
    out = mx.concatenate([mx.ones((2,), dtype=mx.int32), mx.zeros((1,))])
    assert out.dtype == mx.float32 and out.tolist() == [1.0, 1.0, 0.0]
    out = mx.concatenate((mx.array([1]), mx.array([2])))  # a tuple of arrays
    assert out.tolist() == [1, 2]


def test_concatenate_errors():
    with pytest.raises(ValueError, match=r"\(2,3\).*\(4,5\)"):
        mx.concatenate([mx.ones((2, 3)), mx.ones((4, 5))])
    with pytest.raises(ValueError):
        mx.concatenate([])


# --- split ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, indices_or_sections, axis",
    [
        ((6,), 3, 0),
        ((6,), 1, 0),
        ((6,), [1, 4], 0),
        ((6,), [2, 10], 0),
        ((6,), [4, 2], 0),
        ((6,), [], 0),
        ((2, 6), 2, 1),
        ((2, 6), [1], -1),
        ((4, 3), 2, 0),
        ((4, 3), 2, -2),
        ((0, 4), 2, 1),
    ],
)
def test_split(shape, indices_or_sections, axis):
    an = np.arange(int(np.prod(shape))).reshape(shape).astype(np.int32)
    parts = mx.split(mx.array(an), indices_or_sections, axis=axis)
    expected = np.split(an, indices_or_sections, axis=axis)
    assert isinstance(parts, list)
    assert len(parts) == len(expected)
    for p, e in zip(parts, expected):
        assert_array(p, e, "int32")


def test_split_of_views_and_default_axis():
    an = np.arange(24, dtype=np.int32).reshape(4, 6)
    a = mx.array(an)
    for p, e in zip(mx.split(a.T, 2), np.split(an.T, 2)):
        assert_array(p, e, "int32")
    for p, e in zip(mx.split(a[::-1, 1::2], [1, 2], axis=1), np.split(an[::-1, 1::2], [1, 2], axis=1)):
        assert_array(p, e, "int32")
    first, second = mx.split(mx.arange(4), 2)
    assert first.tolist() == [0, 1] and second.tolist() == [2, 3]


def test_split_errors():
    a = mx.ones((2, 3))
    with pytest.raises(ValueError):
        mx.split(a, 4, axis=1)
    with pytest.raises(ValueError):
        mx.split(a, 0)
    with pytest.raises(IndexError):
        mx.split(a, 2, axis=3)


# --- transposing copies: the tiled path (a source dimension and a different
# destination dimension both contiguous) and the run loop it falls back to ---

TRANSPOSE_SHAPES = [(8, 8), (9, 7), (7, 9), (64, 64), (65, 130), (3, 1000), (1000, 3), (257, 129)]


@pytest.mark.parametrize("shape", TRANSPOSE_SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "int32", "float16", "int8", "int64", "bool"])
def test_transpose_copy_tiles(shape, dtype):
    rng = np.random.default_rng(sum(shape))
    x = (rng.uniform(-100, 100, size=shape) > 0) if dtype == "bool" else rng.uniform(-100, 100, size=shape)
    a = from_numpy(x, dtype)
    expected = np.array(a).T
    assert_array(mx.contiguous(a.T), expected)
    assert_array(mx.reshape(a.T, (-1,)), expected.reshape(-1))


@pytest.mark.parametrize("perm", [(2, 0, 1), (1, 2, 0), (0, 2, 1), (2, 1, 0)])
def test_transpose_copy_3d_planes(perm):
    x = np.arange(5 * 33 * 40, dtype=np.float32).reshape(5, 33, 40)
    assert_array(mx.contiguous(mx.transpose(mx.array(x), perm)), np.transpose(x, perm))


def test_transpose_copy_views_and_conversions():
    x = np.random.default_rng(3).standard_normal((131, 77)).astype(np.float32)
    a = mx.array(x)
    # Strided (sliced) source: its contiguous dimension is the one tiles read.
    assert_array(mx.contiguous(a[::2, 1:].T), x[::2, 1:].T)
    assert_array(mx.contiguous(a[:, ::3].T), x[:, ::3].T)  # no contiguous dimension
    # Converting while transposing.
    assert_array(a.T.astype(mx.float16), x.T.astype(np.float16))
    assert_array(a.T.astype(mx.int32), x.T.astype(np.int32))
    # Into a strided destination (slice update).
    y = mx.zeros((80, 140))
    y[2:79, 3:134] = a.T
    ref = np.zeros((80, 140), dtype=np.float32)
    ref[2:79, 3:134] = x.T
    assert_array(y, ref)
    # Broadcast source (a zero stride) and NaN values pass through unchanged.
    z = np.full((40, 50), np.nan, dtype=np.float32)
    z[::3] = 1.5
    assert_array(mx.contiguous(mx.array(z).T), z.T)
    assert_array(mx.contiguous(mx.broadcast_to(mx.array(x[:1]), (20, 77)).T), np.broadcast_to(x[:1], (20, 77)).T)
    assert np.array(mx.contiguous(mx.zeros((0, 9)).T)).shape == (9, 0)
