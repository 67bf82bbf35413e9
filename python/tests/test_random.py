"""mx.random: seed, key, split, uniform, normal and the global state --
shapes, dtypes, determinism and moments."""

import numpy as np
import pytest

from _backend import mx
from _helpers import dtype_name


def test_key():
    k = mx.random.key(0)
    assert k.shape == (2,) and k.dtype == mx.uint32
    assert k.tolist() == [0, 0]
    assert mx.random.key(5).tolist() == [0, 5]
    assert mx.random.key(2**40).tolist() == [256, 0]  # high word, low word


def test_split():
    k = mx.random.key(5)
    pair = mx.random.split(k)
    assert pair.shape == (2, 2) and pair.dtype == mx.uint32
    a, b = mx.random.split(k)
    assert a.shape == (2,) and a.dtype == mx.uint32
    assert a.tolist() != b.tolist()
    assert mx.random.split(k).tolist() == pair.tolist()  # deterministic
    three = mx.random.split(k, 3)
    assert three.shape == (3, 2)
    assert len({tuple(r) for r in three.tolist()}) == 3
    assert mx.random.split(k, num=4).shape == (4, 2)
    assert mx.random.split(k, 1).shape == (1, 2)


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (0, 4), [4, 1, 2]])
@pytest.mark.parametrize("dtype", [None, "float32", "float16", "bfloat16"])
def test_uniform_shapes_and_dtypes(shape, dtype):
    kwargs = {} if dtype is None else {"dtype": getattr(mx, dtype)}
    a = mx.random.uniform(shape=shape, key=mx.random.key(1), **kwargs)
    assert a.shape == tuple(shape)
    assert dtype_name(a.dtype) == (dtype or "float32")
    v = np.array(a.astype(mx.float32))
    assert np.all((v >= 0) & (v < 1))


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (0, 4)])
@pytest.mark.parametrize("dtype", [None, "float32", "float16", "bfloat16", "float64"])
def test_normal_shapes_and_dtypes(shape, dtype):
    kwargs = {} if dtype is None else {"dtype": getattr(mx, dtype)}
    a = mx.random.normal(shape, key=mx.random.key(1), **kwargs)
    assert a.shape == tuple(shape)
    assert dtype_name(a.dtype) == (dtype or "float32")
    assert np.all(np.isfinite(np.array(a.astype(mx.float32))))


def test_defaults_are_scalars():
    assert mx.random.uniform().shape == ()
    assert mx.random.normal().shape == ()
    assert mx.random.uniform().dtype == mx.float32


def test_integer_dtypes_are_rejected():
    with pytest.raises(ValueError):
        mx.random.uniform(shape=(2,), dtype=mx.int32)
    with pytest.raises(ValueError):
        mx.random.normal(shape=(2,), dtype=mx.int32)


def test_determinism_with_a_key():
    k = mx.random.key(7)
    a = mx.random.uniform(shape=(5,), key=k)
    b = mx.random.uniform(shape=(5,), key=k)
    assert a.tolist() == b.tolist()
    n1 = mx.random.normal((5,), key=k)
    n2 = mx.random.normal((5,), key=k)
    assert n1.tolist() == n2.tolist()
    c = mx.random.uniform(shape=(5,), key=mx.random.key(8))
    assert a.tolist() != c.tolist()
    k1, k2 = mx.random.split(k)
    assert mx.random.uniform(shape=(5,), key=k1).tolist() != mx.random.uniform(shape=(5,), key=k2).tolist()


def test_seed_determinism_and_global_draws_differ():
    mx.random.seed(3)
    a = mx.random.uniform(shape=(4,))
    b = mx.random.uniform(shape=(4,))
    mx.random.seed(3)
    c = mx.random.uniform(shape=(4,))
    d = mx.random.uniform(shape=(4,))
    assert a.tolist() == c.tolist() and b.tolist() == d.tolist()
    assert a.tolist() != b.tolist()
    mx.random.seed(4)
    assert mx.random.uniform(shape=(4,)).tolist() != a.tolist()


def test_global_state():
    state = mx.random.state
    assert len(state) == 1
    mx.random.seed(3)
    k = mx.random.state[0]
    assert k.dtype == mx.uint32 and k.shape == (2,)
    assert k.tolist() == mx.random.key(3).tolist()
    mx.random.uniform()
    assert mx.random.state[0].tolist() != k.tolist()  # a draw advances the state
    # drawing with an explicit key leaves the global state alone
    before = mx.random.state[0].tolist()
    mx.random.uniform(key=mx.random.key(0))
    mx.random.normal((3,), key=mx.random.key(0))
    assert mx.random.state[0].tolist() == before


def test_uniform_bounds_and_broadcasting():
    k = mx.random.key(2)
    a = mx.random.uniform(-1, 1, (1000,), key=k)
    v = np.array(a)
    assert v.min() >= -1 and v.max() < 1 and v.min() < -0.9 and v.max() > 0.9
    b = mx.random.uniform(low=mx.array([0.0, 10.0]), high=mx.array([1.0, 11.0]), shape=(500, 2), key=k)
    v = np.array(b)
    assert np.all((v[:, 0] >= 0) & (v[:, 0] < 1)) and np.all((v[:, 1] >= 10) & (v[:, 1] < 11))
    with pytest.raises(ValueError):
        mx.random.uniform(low=mx.array([0.0, 10.0]), high=mx.array([1.0, 11.0]), shape=(3,), key=k)


def test_uniform_moments():
    v = np.array(mx.random.uniform(shape=(200_000,), key=mx.random.key(11)), dtype=np.float64)
    assert abs(v.mean() - 0.5) < 0.005
    assert abs(v.var() - 1 / 12) < 0.002
    hist, _ = np.histogram(v, bins=10, range=(0, 1))
    assert np.all(np.abs(hist / len(v) - 0.1) < 0.005)


def test_normal_moments():
    v = np.array(mx.random.normal((200_000,), key=mx.random.key(12)), dtype=np.float64)
    assert abs(v.mean()) < 0.01
    assert abs(v.var() - 1) < 0.02
    assert abs(np.mean(v**3)) < 0.03  # skew
    assert abs(np.mean(v**4) - 3) < 0.1  # kurtosis
    assert abs(np.mean(np.abs(v) < 1) - 0.6827) < 0.005
    w = np.array(mx.random.normal((100_000,), loc=5.0, scale=2.0, key=mx.random.key(13)), dtype=np.float64)
    assert abs(w.mean() - 5) < 0.03 and abs(w.std() - 2) < 0.03


def test_random_with_stream():
    a = mx.random.normal((2, 2), key=mx.random.key(0), stream=mx.cpu)
    b = mx.random.normal((2, 2), key=mx.random.key(0))
    if mx.default_device().type == mx.cpu:
        assert a.tolist() == b.tolist()
    else:  # the GPU's logarithm may be an ulp off glibc's logf (docs/cuda.md)
        np.testing.assert_allclose(np.array(b), np.array(a), rtol=2e-6, atol=2e-6)
