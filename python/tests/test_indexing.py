"""Basic indexing (__getitem__) against NumPy: integers, slices with steps
(negative too), None, Ellipsis and their combinations, on views."""

import numpy as np
import pytest

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
