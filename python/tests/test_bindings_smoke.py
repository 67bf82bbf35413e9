"""Smoke tests of the loom.core bindings: one or two checks per area, with
expectations taken from MLX 0.32.4. The full suite lives in the other
python/tests/test_*.py files."""

import pickle
import threading

import numpy as np
import pytest

import loom.core as mx


# --- construction, dtypes and printing ---------------------------------------


def test_python_scalars_get_mlx_default_dtypes():
    assert mx.array(True).dtype == mx.bool_
    assert mx.array(3).dtype == mx.int32
    assert mx.array(2**40).dtype == mx.int64
    assert mx.array(3.0).dtype == mx.float32
    assert mx.array(1 + 2j).dtype == mx.complex64


def test_nested_lists_promote_and_ragged_lists_raise():
    a = mx.array([[1, 2.5], [3, 4]])
    assert a.shape == (2, 2) and a.dtype == mx.float32
    assert mx.array([True, 2]).dtype == mx.int32
    with pytest.raises(ValueError, match="non-uniform length"):
        mx.array([[1, 2], [3]])
    with pytest.raises(ValueError, match="Invalid type str"):
        mx.array([1, "a"])


def test_numpy_input_float64_narrows_to_float32_like_mlx():
    a = mx.array(np.arange(6, dtype=np.float64).reshape(2, 3)[:, ::2])
    assert a.dtype == mx.float32
    assert a.tolist() == [[0.0, 2.0], [3.0, 5.0]]
    assert mx.array(np.array([1, 2], dtype=np.int64)).dtype == mx.int64
    assert mx.array(np.array([1.5]), mx.float64).dtype == mx.float64


def test_repr_matches_mlx_format():
    assert repr(mx.array([2, 4, 6, 8], dtype=mx.float32)) == "array([2, 4, 6, 8], dtype=float32)"
    assert repr(mx.array(3)) == "array(3, dtype=int32)"
    assert repr(mx.array([1.123456789, 1e10])) == "array([1.12346, 1e+10], dtype=float32)"
    assert repr(mx.array([float("nan"), float("inf"), True])) == "array([nan, inf, 1], dtype=float32)"
    assert repr(mx.array([[1, 2], [3, 4]])) == "array([[1, 2],\n       [3, 4]], dtype=int32)"
    assert repr(mx.array([True, False])) == "array([True, False], dtype=bool)"
    assert repr(mx.array(list(range(10)))) == "array([0, 1, 2, ..., 7, 8, 9], dtype=int32)"
    assert repr(mx.array([1 + 2j, 3 - 4.5j])) == "array([1+2j, 3-4.5j], dtype=complex64)"
    with mx.printoptions(precision=2):
        assert repr(mx.array([1.23456])) == "array([1.23], dtype=float32)"


def test_dtype_objects():
    assert repr(mx.float32) == "loom.core.float32"
    assert mx.float16.size == 2
    assert len({mx.float32, mx.float32, mx.int32}) == 2
    assert mx.issubdtype(mx.float32, mx.floating)
    assert not mx.issubdtype(mx.float64, mx.float32)
    assert mx.issubdtype(mx.uint8, mx.integer)
    assert repr(mx.finfo(mx.float16)) == "finfo(min=-65504, max=65504, dtype=float16)"
    assert repr(mx.iinfo(mx.uint8)) == "iinfo(min=0, max=255, dtype=uint8)"
    with pytest.raises(ValueError):
        mx.finfo(mx.int32)


# --- Python protocol --------------------------------------------------------------


def test_scalar_conversions_and_errors():
    assert mx.array(3).item() == 3
    assert int(mx.array(2.5)) == 2 and float(mx.array(3)) == 3.0
    assert bool(mx.array([[0]])) is False
    with pytest.raises(ValueError, match="Only length-1 arrays"):
        bool(mx.array([1, 2]))
    with pytest.raises(TypeError, match="0-dimensional"):
        len(mx.array(3))
    assert mx.array([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]


def test_numpy_views_share_memory_and_copies_do_not():
    a = mx.array([1.0, 2.0, 3.0])
    view = np.array(a, copy=False)
    view[0] = 100
    assert a.tolist() == [100.0, 2.0, 3.0]
    copy = np.array(a)
    copy[1] = 50
    assert a.tolist()[1] == 2.0
    assert memoryview(mx.array([1], mx.int64)).format == "q"
    with pytest.raises(ValueError, match="bfloat16"):
        np.array(mx.array([1.0], mx.bfloat16))


def test_pickle_round_trip_keeps_dtype():
    for dtype in (mx.float32, mx.bfloat16, mx.int8):
        a = mx.array([1, 2], dtype)
        b = pickle.loads(pickle.dumps(a))
        assert b.dtype == dtype and b.tolist() == a.tolist()


def test_getitem_bounds_and_types():
    a = mx.array([[1, 2, 3], [4, 5, 6]])
    with pytest.raises(IndexError, match="out of bounds"):
        a[2]
    with pytest.raises(ValueError, match="Too many indices"):
        a[0, 0, 0]
    with pytest.raises(ValueError, match="single ellipsis"):
        a[..., ...]
    with pytest.raises(ValueError, match="Cannot index"):
        a["x"]


def test_basic_indexing_gives_numpy_results():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    a = mx.array(x)
    for index in [0, -1, (1, 2), (slice(None), 1), slice(None, None, -1),
                  (Ellipsis, 0), (None, 0, Ellipsis, None), (slice(1, None), slice(None, None, 2), -1)]:
        assert np.array_equal(np.array(a[index]), x[index]), index


def test_setitem_rebinds_the_array():
    a = mx.arange(12).reshape(3, 4)
    b = a
    a[1:, ::2] = mx.array([[1], [2]])
    assert a.tolist() == [[0, 1, 2, 3], [1, 5, 1, 7], [2, 9, 2, 11]]
    assert b is a
    a[0] = 2.7  # cast to the array's dtype
    assert a[0].tolist() == [2, 2, 2, 2]


# --- ops and weak typing ---------------------------------------------------------------


def test_python_scalars_are_weakly_typed():
    i8 = mx.array([1], mx.int8)
    assert (i8 + 2).dtype == mx.int8
    assert (i8 + 2.5).dtype == mx.float32
    assert (mx.array([1], mx.float16) + 2.5).dtype == mx.float16
    assert (2 - mx.array([1, 2])).tolist() == [1, 0]
    with pytest.raises(ValueError, match="overflow"):
        i8 + 300
    with pytest.raises(ValueError, match="Cannot perform addition"):
        mx.array([1]) + "a"
    assert (mx.array([1]) == "a") is False


def test_inplace_operators_update_the_same_object():
    x = mx.array([1, 2, 3])
    y = x
    x += 1
    assert y is x and y.tolist() == [2, 3, 4]
    with pytest.raises(ValueError, match="In place division"):
        x /= 2


def test_module_ops_signatures():
    x = mx.array([[1.0, 2.0], [3.0, 4.0]])
    assert mx.sum(x, axis=0).tolist() == [4.0, 6.0]
    assert x.sum(1, True).shape == (2, 1)
    assert x.reshape(4).shape == (4,) and x.reshape((1, 4)).shape == (1, 4)
    assert mx.add(x, 1, stream=mx.cpu).tolist() == [[2.0, 3.0], [4.0, 5.0]]
    with pytest.raises(TypeError):
        mx.add(x, 1, mx.cpu)  # stream is keyword-only
    assert mx.arange(5).dtype == mx.int32 and mx.arange(0.5, 3).tolist() == [0.5, 1.5, 2.5]
    assert (x @ x).tolist() == [[7.0, 10.0], [15.0, 22.0]]


# --- devices, streams, memory, random ----------------------------------------------


def test_devices_and_streams():
    assert mx.cpu == mx.DeviceType.cpu
    has_gpu = mx.is_available(mx.gpu)
    # With a GPU the default device is the GPU, as on MLX's CUDA wheel.
    assert mx.default_device() == mx.Device(mx.gpu if has_gpu else mx.cpu)
    assert repr(mx.default_stream(mx.cpu)) .startswith("Stream(Device(cpu, 0), ")
    assert mx.is_available(mx.cpu)
    if not has_gpu:
        with pytest.raises(ValueError, match="gpu"):
            mx.new_stream(mx.gpu)
        with pytest.raises(ValueError, match="gpu"):
            mx.add(mx.array(1), 1, stream=mx.gpu)
    s = mx.new_stream(mx.cpu)
    with mx.stream(s):
        assert mx.default_stream(mx.default_device()) == s
    assert mx.default_stream(mx.default_device()) != s


def test_thread_local_stream_is_per_thread():
    tl = mx.new_thread_local_stream(mx.cpu)
    seen = []

    def work():
        with mx.stream(tl):
            seen.append(repr(mx.default_stream(mx.cpu)))
        seen.append(mx.add(mx.array(1), 2, stream=tl).item())

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen.count(3) == 2
    streams = [s for s in seen if isinstance(s, str)]
    assert len(set(streams)) == 2


def test_peak_memory_region():
    mx.eval(mx.array([0]))
    with mx.peak_memory() as small:
        a = mx.array(np.zeros(1000, np.float32))
    with mx.peak_memory() as big:
        b = mx.array(np.zeros(1 << 20, np.float32))
        del b
    assert big.peak - big.start >= 4 << 20
    assert small.peak - small.start < big.peak - big.start
    assert mx.get_peak_memory() >= big.peak
    del a


def test_random_module():
    import sys

    assert sys.modules["loom.core.random"] is mx.random
    mx.random.seed(3)
    assert mx.random.state[0].tolist() == mx.random.key(3).tolist()
    x = mx.random.uniform(shape=(2, 3))
    assert x.shape == (2, 3) and x.dtype == mx.float32
    assert mx.random.split(mx.random.key(0), 3).shape == (3, 2)


def test_eval_and_errors_map_to_python_types():
    x = mx.array([1.0, 2.0]) * 2
    mx.eval({"a": [x], "b": 3})
    with pytest.raises(ValueError):
        mx.reshape(x, (3,))
    with pytest.raises(IndexError):
        mx.sum(x, axis=3)
