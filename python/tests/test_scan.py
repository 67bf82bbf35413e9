"""cumsum, cumprod, cummax, cummin and logcumsumexp against NumPy: axes,
reverse, inclusive, dtypes, array methods, gradients (finite differences),
jvp and vmap."""

import numpy as np
import pytest

from _backend import mx
from _helpers import assert_array, from_numpy, to_numpy

import test_gradients_fd as fd


def _np_scan(op, x, axis, reverse, inclusive):
    if axis is None:
        x = x.reshape(-1)
        axis = 0
    if reverse:
        x = np.flip(x, axis)
    funcs = {
        "cumsum": np.cumsum,
        "cumprod": np.cumprod,
        "cummax": lambda v, axis: np.maximum.accumulate(v, axis=axis),
        "cummin": lambda v, axis: np.minimum.accumulate(v, axis=axis),
        "logcumsumexp": lambda v, axis: np.logaddexp.accumulate(v, axis=axis),
    }
    out = funcs[op](x, axis=axis)
    if not inclusive:
        ident = {"cumsum": 0, "cumprod": 1, "logcumsumexp": -np.inf}
        if op in ident:
            first = np.full_like(np.take(out, [0], axis=axis), ident[op])
        else:
            info = np.finfo(out.dtype) if np.issubdtype(out.dtype, np.floating) else np.iinfo(out.dtype)
            edge = -np.inf if np.issubdtype(out.dtype, np.floating) else info.min
            if op == "cummin":
                edge = np.inf if np.issubdtype(out.dtype, np.floating) else info.max
            first = np.full_like(np.take(out, [0], axis=axis), edge)
        out = np.concatenate([first, np.take(out, range(0, x.shape[axis] - 1), axis=axis)], axis=axis)
    if reverse:
        out = np.flip(out, axis)
    return out


OPS = ["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axis", [0, 1, -1, None])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("inclusive", [True, False])
def test_scans_match_numpy(op, axis, reverse, inclusive):
    x = np.random.default_rng(0).uniform(0.5, 1.5, size=(4, 6)).astype(np.float32)
    out = getattr(mx, op)(mx.array(x), axis=axis, reverse=reverse, inclusive=inclusive)
    expected = _np_scan(op, x.astype(np.float64), axis, reverse, inclusive).astype(np.float32)
    assert_array(out, expected, "float32", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "cummax", "cummin"])
@pytest.mark.parametrize("dtype", ["int32", "uint8", "int64", "float16", "bfloat16"])
def test_scan_dtypes(op, dtype):
    x = np.random.default_rng(1).integers(1, 4, size=(3, 5))
    a = from_numpy(x, dtype)
    out = getattr(mx, op)(a, axis=1)
    assert out.dtype == a.dtype
    expected = _np_scan(op, to_numpy(a).astype(np.float64), 1, False, True)
    np.testing.assert_allclose(to_numpy(out).astype(np.float64), expected, rtol=2e-2)


def test_scan_dtype_rules():
    assert mx.cumsum(mx.array([True, True])).tolist() == [1, 2]
    assert mx.cumsum(mx.array([True, True])).dtype == mx.int32
    assert mx.cumprod(mx.array([True, False])).dtype == mx.bool_
    assert mx.cummax(mx.array([True, False])).tolist() == [True, True]
    assert mx.logcumsumexp(mx.array([1, 2])).dtype == mx.float32
    assert mx.cumsum(mx.array([1, 2], dtype=mx.int8)).dtype == mx.int8
    assert mx.cumsum(mx.arange(6).reshape(2, 3), dtype=mx.float32).dtype == mx.float32
    assert mx.cumsum(mx.array(3)).tolist() == [3]
    assert mx.cumsum(mx.array([1, 2, 3]), reverse=True, inclusive=False).tolist() == [5, 3, 0]


def test_nan_propagates_in_cummax():
    out = mx.cummax(mx.array([1.0, float("nan"), 0.0]))
    assert np.isnan(np.array(out)[1:]).all() and np.array(out)[0] == 1.0


def test_array_methods():
    a = mx.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert a.cumsum(axis=1).tolist() == np.cumsum(np.arange(6).reshape(2, 3), axis=1).tolist()
    assert a.cumprod().tolist() == np.cumprod(np.arange(6)).tolist()
    assert a.cummax(axis=0, reverse=True).tolist() == [[3, 4, 5], [3, 4, 5]]
    assert a.cummin(inclusive=False, axis=1).tolist()[0][1:] == [0, 0]
    assert_array(a.logcumsumexp(axis=1), np.logaddexp.accumulate(np.arange(6).reshape(2, 3), axis=1), "float32")


def test_errors():
    with pytest.raises(IndexError):
        mx.cumsum(mx.zeros((2, 3)), axis=3)


def test_long_cumsum():
    x = np.random.default_rng(2).uniform(-1, 1, size=3_000_000).astype(np.float32)
    out = np.array(mx.cumsum(mx.array(x)))
    np.testing.assert_allclose(out, np.cumsum(x.astype(np.float64)), rtol=1e-3, atol=2e-2)


# --- derivatives against finite differences ---------------------------------

def _case(op, axis, reverse, inclusive, sampler):
    def ref(x):
        return _np_scan(op, x, axis, reverse, inclusive)
    return fd.Case(
        f"{op}-axis{axis}-{'rev' if reverse else 'fwd'}-{'inc' if inclusive else 'exc'}",
        lambda x: getattr(mx, op)(x, axis=axis, reverse=reverse, inclusive=inclusive),
        ref,
        [((3, 4), sampler)],
    )


def _with_zeros(rng, shape):
    x = rng.uniform(0.5, 1.5, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    x[0, 1] = 0.0
    x[2, 2] = 0.0
    x[2, 3] = 0.0
    return x


CASES = []
for op, sampler in [("cumsum", fd.U), ("cumprod", fd.uniform(0.5, 1.5)), ("cummax", fd.distinct),
                    ("cummin", fd.distinct), ("logcumsumexp", fd.U)]:
    for axis in (0, 1):
        for reverse in (False, True):
            for inclusive in (True, False):
                if op in ("logcumsumexp", "cummax", "cummin") and not inclusive:
                    continue  # the first output is infinite: no finite reference
                CASES.append(_case(op, axis, reverse, inclusive, sampler))
CASES.append(_case("cumprod", 1, False, True, _with_zeros))
CASES.append(_case("cumprod", 1, True, False, _with_zeros))


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_grad_matches_finite_differences(case):
    values = fd._inputs(case)
    loss, loss_ref = fd._scalarised(case, fd._weights(case, values))
    g = mx.grad(loss)(*fd._mx(values))
    fd._check(g, fd._fd_gradient(loss_ref, values, 0), "grad")


# MLX 0.32.4 has no jvp for cumprod/cummax/cummin; Loom does.
JVP_CASES = [c if c.name.startswith(("cumsum", "logcumsumexp")) else pytest.param(c, marks=pytest.mark.loom_only)
             for c in CASES]


@pytest.mark.parametrize("case", JVP_CASES, ids=repr)
def test_jvp_matches_finite_differences(case):
    values = fd._inputs(case, seed=2)
    rng = np.random.default_rng(3)
    t = rng.uniform(-1, 1, size=values[0].shape).astype(np.float32).astype(np.float64)
    _, (jt,) = mx.jvp(case.fn, fd._mx(values), fd._mx([t]))
    expected = (case.ref(values[0] + fd.EPS * t) - case.ref(values[0] - fd.EPS * t)) / (2 * fd.EPS)
    fd._check(jt, expected, "tangent")


@pytest.mark.parametrize("case", CASES[::3], ids=repr)
def test_vmap_of_grad_matches_finite_differences(case):
    per_example = [fd._inputs(case, seed=10 + b) for b in range(3)]
    loss, loss_ref = fd._scalarised(case, fd._weights(case, per_example[0], seed=4))
    xs = np.stack([v[0] for v in per_example])
    grads = mx.vmap(mx.grad(loss))(mx.array(xs.astype(np.float32)))
    expected = np.stack([fd._fd_gradient(loss_ref, [xs[b]], 0) for b in range(3)])
    fd._check(grads, expected, "vmap(grad)")


def test_cumulative_aliases():
    a = mx.arange(6).reshape(2, 3)
    assert mx.cumulative_sum(a).tolist() == [0, 1, 3, 6, 10, 15]
    assert mx.cumulative_prod(mx.array([1, 2, 3]), axis=0, reverse=True).tolist() == [6, 6, 3]
    assert mx.cumulative_sum(mx.array([1, 2], dtype=mx.int8), dtype=mx.float32).dtype == mx.float32


# --- float32 sums: the vectorised and chunked-parallel paths ------------------

@pytest.mark.parametrize("n", [1, 7, 15, 16, 17, 33, 1000, (1 << 16) + 3, (1 << 18) + 21, 1 << 19])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("inclusive", [True, False])
def test_float32_cumsum_lengths(n, reverse, inclusive):
    # 2^18 elements and more run as chained parallel chunks of 2^16; shorter
    # rows run the vector loop with a scalar tail of n % 16 elements.
    x = np.random.default_rng(n).uniform(-1, 1, size=n).astype(np.float32)
    out = np.array(mx.cumsum(mx.array(x), reverse=reverse, inclusive=inclusive))
    ref = _np_scan("cumsum", x.astype(np.float64), 0, reverse, inclusive)
    assert out.dtype == np.float32 and out.shape == (n,)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=2e-2 if n > 100_000 else 1e-4)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("inclusive", [True, False])
def test_float32_cumsum_rows_and_inner_axis(reverse, inclusive):
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, size=(37, 53)).astype(np.float32)
    for axis in (0, 1):
        out = mx.cumsum(mx.array(x), axis=axis, reverse=reverse, inclusive=inclusive)
        ref = _np_scan("cumsum", x.astype(np.float64), axis, reverse, inclusive)
        np.testing.assert_allclose(np.array(out), ref, rtol=1e-5, atol=1e-5)
    # A transposed (non-contiguous) input.
    xt = mx.array(x).T
    out = mx.cumsum(xt, axis=1, reverse=reverse, inclusive=inclusive)
    ref = _np_scan("cumsum", x.T.astype(np.float64), 1, reverse, inclusive)
    np.testing.assert_allclose(np.array(out), ref, rtol=1e-5, atol=1e-5)


def test_float32_cumsum_nan_inf_and_empty():
    n = (1 << 18) + 100
    x = np.ones(n, dtype=np.float32)
    x[70_000] = np.nan  # in the second chunk: every later chunk sees it through the carry
    out = np.array(mx.cumsum(mx.array(x)))
    assert np.all(out[:70_000] == np.arange(1, 70_001, dtype=np.float32))
    assert np.all(np.isnan(out[70_000:]))
    x = np.array([1, np.inf, 2, -np.inf, 3] * 5, dtype=np.float32)
    np.testing.assert_array_equal(np.array(mx.cumsum(mx.array(x))), np.cumsum(x))
    assert np.array(mx.cumsum(mx.zeros((0,)))).shape == (0,)
    assert np.array(mx.cumsum(mx.zeros((3, 0)), axis=1)).shape == (3, 0)


def test_float32_cumsum_long_row_exact_and_deterministic():
    # Integers below 2^24 add exactly in float32, so every chunk's carry (the
    # look-back over chunk totals) is checked bit for bit; repeated calls give
    # the same bits whichever thread summed which chunk.
    n = (1 << 20) + 5
    x = np.ones(n, dtype=np.float32)
    for reverse in (False, True):
        for inclusive in (True, False):
            out = np.array(mx.cumsum(mx.array(x), reverse=reverse, inclusive=inclusive))
            ref = _np_scan("cumsum", x.astype(np.float64), 0, reverse, inclusive)
            np.testing.assert_array_equal(out, ref.astype(np.float32))
    y = np.random.default_rng(11).standard_normal(3 << 20).astype(np.float32)
    a = mx.array(y)
    first = np.array(mx.cumsum(a))
    for _ in range(4):
        np.testing.assert_array_equal(np.array(mx.cumsum(a)), first)


# --- float32 running max/min: the vectorised row loop -------------------------

@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("n", [1, 5, 15, 16, 17, 33, 1000, 4099])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("inclusive", [True, False])
def test_float32_cummax_cummin_lengths(op, n, reverse, inclusive):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    x[::7] = np.round(x[::7])  # ties
    out = np.array(getattr(mx, op)(mx.array(x), reverse=reverse, inclusive=inclusive))
    np.testing.assert_array_equal(out, _np_scan(op, x, 0, reverse, inclusive))


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("reverse", [False, True])
def test_float32_cummax_cummin_nan_inf_rows_and_views(op, reverse):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((37, 53)).astype(np.float32)
    x[3, 20] = np.nan  # from there on (in scan order) the row is NaN
    x[5, 40] = np.inf
    x[6, 10] = -np.inf
    x[8, 0:17] = np.nan
    for axis in (0, 1):
        out = np.array(getattr(mx, op)(mx.array(x), axis=axis, reverse=reverse))
        np.testing.assert_array_equal(out, _np_scan(op, x, axis, reverse, True))
    # Transposed and strided inputs.
    out = np.array(getattr(mx, op)(mx.array(x).T, axis=1, reverse=reverse))
    np.testing.assert_array_equal(out, _np_scan(op, x.T, 1, reverse, True))
    out = np.array(getattr(mx, op)(mx.array(x)[:, ::3], axis=1, reverse=reverse))
    np.testing.assert_array_equal(out, _np_scan(op, x[:, ::3], 1, reverse, True))
