"""NumPy and DLPack interchange (issue 12, seed 12.3-12.5): importing any
DLPack producer (copies on the CPU, strides honoured), exporting arrays to
NumPy / PyTorch / JAX consumers, bfloat16, and views of arrays inside grad."""

import gc
import warnings

import numpy as np
import pytest

from _backend import IS_MLX, mx


class LegacyProducer:
    """A DLPack producer from before DLPack 1.0: __dlpack__ takes no
    max_version and returns an unversioned capsule."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x

    def __dlpack__(self, stream=None):
        return self.x.__dlpack__()

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


# --- importing --------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
              np.uint64, np.float16, np.float32]
)
def test_from_dlpack_keeps_numpy_dtypes(dtype):
    x = (np.arange(12) % 5).astype(dtype).reshape(3, 4)
    a = mx.from_dlpack(x)
    assert a.shape == (3, 4)
    np.testing.assert_array_equal(np.array(a), x)
    assert np.array(a).dtype == x.dtype


def test_from_dlpack_narrows_float64_like_array():
    x = np.linspace(0, 1, 5)
    assert mx.from_dlpack(x).dtype == mx.float32
    assert mx.array(x).dtype == mx.float32
    np.testing.assert_allclose(np.array(mx.from_dlpack(x)), x, rtol=1e-6)


@pytest.mark.parametrize(
    "view",
    [
        lambda x: x[:, ::2],
        lambda x: x.T,
        lambda x: x[1],
        lambda x: np.broadcast_to(x[:1], (3, 4)),
    ],
)
def test_from_dlpack_honours_strides(view):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = view(x)
    np.testing.assert_array_equal(np.array(mx.from_dlpack(v)), v)
    np.testing.assert_array_equal(np.array(mx.array(v)), v)


@pytest.mark.loom_only
def test_from_dlpack_accepts_negative_strides():
    # MLX refuses them ("Cannot convert DLPack arrays with negative strides");
    # a copy has no reason to.
    x = np.arange(12, dtype=np.float32).reshape(3, 4)[::-1, 1:]
    np.testing.assert_array_equal(np.array(mx.from_dlpack(x)), x)


def test_from_dlpack_copies_on_the_cpu():
    x = np.arange(6, dtype=np.float32)
    a = mx.from_dlpack(x)
    b = mx.asarray(x)
    c = mx.from_dlpack(x, copy=True)
    x[0] = 100
    assert a[0].item() == 0 and b[0].item() == 0 and c[0].item() == 0


def test_from_dlpack_copy_false_raises():
    with pytest.raises(ValueError, match=r"Cannot import a CPU array without a copy"):
        mx.from_dlpack(np.arange(3, dtype=np.float32), copy=False)


def test_from_dlpack_reads_unversioned_capsules():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)[:, ::2]
    a = mx.from_dlpack(LegacyProducer(x))
    np.testing.assert_array_equal(np.array(a), x)


def test_array_constructor_reads_a_dlpack_only_producer():
    x = np.arange(4, dtype=np.float32)
    a = mx.array(LegacyProducer(x))
    np.testing.assert_array_equal(np.array(a), x)


def test_imported_array_outlives_the_producer():
    x = np.arange(1000, dtype=np.float32)
    a = mx.from_dlpack(x)
    del x
    gc.collect()
    for _ in range(3):
        np.ones(1000, dtype=np.float32) * 7  # reuse the freed memory
    assert mx.sum(a).item() == sum(range(1000))


# --- exporting ---------------------------------------------------------------------


def test_numpy_from_dlpack_round_trip():
    a = mx.arange(12, dtype=mx.float32).reshape(3, 4)
    x = np.from_dlpack(a)
    np.testing.assert_array_equal(x, np.arange(12, dtype=np.float32).reshape(3, 4))
    b = mx.from_dlpack(x)
    assert mx.array_equal(a, b).item()


def test_export_evaluates_a_lazy_array_first():
    a = mx.exp(mx.zeros((64, 64))) * 3  # unevaluated
    x = np.from_dlpack(a)
    np.testing.assert_allclose(x, np.full((64, 64), 3.0, dtype=np.float32))


def test_export_of_a_strided_array_keeps_its_layout():
    a = mx.arange(12, dtype=mx.int32).reshape(3, 4)
    t = mx.transpose(a)
    s = a[:, ::2]
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(12).reshape(3, 4).T)
    np.testing.assert_array_equal(np.from_dlpack(s), np.arange(12).reshape(3, 4)[:, ::2])


def test_exported_view_keeps_the_array_alive():
    x = np.from_dlpack(mx.arange(1000, dtype=mx.float32) * 2)
    gc.collect()
    junk = [mx.ones((1000,)) * 5 for _ in range(4)]
    mx.eval(junk)
    np.testing.assert_array_equal(x, np.arange(1000, dtype=np.float32) * 2)


def test_numpy_view_without_copy_shares_memory():
    a = mx.arange(3)
    v = np.array(a, copy=False)
    assert not v.flags.owndata
    v[0] = 7
    assert a[0].item() == 7


def test_bfloat16_to_numpy_raises():
    a = mx.array([1.0, 2.0], dtype=mx.bfloat16)
    with pytest.raises((ValueError, TypeError, BufferError)):
        np.array(a)
    np.testing.assert_array_equal(np.array(a.astype(mx.float32)), [1.0, 2.0])


@pytest.mark.loom_only
def test_bfloat16_to_numpy_message_suggests_astype():
    a = mx.array([1.0, 2.0], dtype=mx.bfloat16)
    with pytest.raises(ValueError, match=r"bfloat16.*astype"):
        np.array(a)


# --- beyond MLX (seed 12.4): views inside grad --------------------------------------


@pytest.mark.loom_only
def test_numpy_view_inside_grad_is_read_only():
    def f(x):
        x_view = np.array(x, copy=False)
        x_view[:] *= x_view  # the seed's silent failure: must raise instead
        return x.sum()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="read-only"):
            mx.value_and_grad(f)(mx.array([3.0]))


@pytest.mark.loom_only
def test_conversion_inside_grad_warns_that_the_gradient_stops():
    def f(x):
        y = mx.array(np.array(x) ** 2)
        return y.sum()

    with pytest.warns(UserWarning, match="no gradient flows"):
        mx.grad(f)(mx.array([3.0]))

    def g(x):
        return x * x.item()

    with pytest.warns(UserWarning, match="no gradient flows"):
        mx.grad(lambda x: g(x).sum())(mx.array([2.0]))


@pytest.mark.loom_only
def test_views_outside_grad_stay_writable_and_silent():
    a = mx.arange(3, dtype=mx.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        v = np.array(a, copy=False)
        a.item() if a.size == 1 else a.tolist()
    assert v.flags.writeable


# --- optional peers -----------------------------------------------------------------


def test_torch_round_trip():
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).T
    a = mx.array(t)
    np.testing.assert_array_equal(np.array(a), t.numpy())
    a2 = mx.from_dlpack(t)
    t[0, 0] = 100
    assert a[0, 0].item() == 0 and a2[0, 0].item() == 0
    b = mx.arange(5, dtype=mx.float32)
    mx.eval(b)
    shared = torch.as_tensor(b)
    assert shared.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_torch_bfloat16_both_ways():
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16)
    a = mx.array(t)
    assert a.dtype == mx.bfloat16
    assert a.astype(mx.float32).tolist() == [1.5, -2.0, 3.25]
    back = torch.from_dlpack(a)
    assert back.dtype == torch.bfloat16
    assert back.float().tolist() == [1.5, -2.0, 3.25]


def test_jax_round_trip():
    jnp = pytest.importorskip("jax.numpy")
    import jax

    # On the host: the buffer protocol (what mx.array reads) serves CPU arrays.
    b = jax.device_put(jnp.arange(6, dtype=jnp.float32).reshape(2, 3), jax.devices("cpu")[0])
    c = mx.array(b)
    np.testing.assert_array_equal(np.array(c), np.arange(6, dtype=np.float32).reshape(2, 3))
    a = mx.arange(3)
    np.testing.assert_array_equal(np.asarray(jnp.array(a)), [0, 1, 2])


def test_tensorflow_routes():
    # Seed §12.5's TensorFlow route (an explicit memoryview), and DLPack both
    # ways. Runs where tensorflow is installed (not in requirements-dev.txt:
    # checked in session 6 with tensorflow-cpu 2.21.0 in a scratch venv).
    tf = pytest.importorskip("tensorflow")
    a = mx.arange(3)
    b = tf.constant(memoryview(a))
    c = mx.array(b)
    assert c.dtype == mx.int32 and c.tolist() == [0, 1, 2]
    t = tf.constant([[1.5, 2.0], [3.0, 4.0]])
    assert mx.from_dlpack(t).tolist() == [[1.5, 2.0], [3.0, 4.0]]
    assert mx.asarray(t).dtype == mx.float32
    x = mx.array([[1.5, -2.0], [3.0, 4.0]]) * 2
    back = tf.experimental.dlpack.from_dlpack(x.__dlpack__())  # evaluates x first
    assert back.numpy().tolist() == [[3.0, -4.0], [6.0, 8.0]]


def test_large_numpy_buffers_copy_exactly():
    # Buffers of 4 MiB and more are copied in 1 MiB pieces over the CPU pool:
    # a size off the piece grid and distinct values catch a misplaced piece.
    for n in (5_000_011, (4 << 20) // 4):
        src = np.arange(n, dtype=np.float32)
        np.testing.assert_array_equal(np.array(mx.array(src)), src)
    strided = np.arange(3 * 2_000_003, dtype=np.float32)[::3]
    np.testing.assert_array_equal(np.array(mx.array(strided)), strided)
