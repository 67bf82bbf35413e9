"""Composite ops against NumPy: the differential defects of issue 6 (#2-#10,
#12-#18) and issue 7.7's composite errors, each with a regression test that
holds on Loom and on MLX 0.32.4."""

import math

import numpy as np
import pytest

from _backend import mx

INF = float("inf")
NAN = float("nan")


def np_of(a):
    return np.array(a)


def same_bits(got, want):
    """Equal values with equal signs of zero; NaN matches NaN."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok], want[ok]), (got, want)
    assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok])), (got, want)


# --- #2, #3: softmax and logsumexp of unsigned, bool and empty input -----------


def test_softmax_of_unsigned_and_bool_does_not_wrap():
    s = mx.softmax(mx.array([2, 1, 0], dtype=mx.uint8))
    assert s.dtype == mx.float32
    e = np.exp([2.0, 1.0, 0.0])
    np.testing.assert_allclose(np_of(s), e / e.sum(), rtol=1e-6)
    b = mx.softmax(mx.array([True, False]))
    np.testing.assert_allclose(np_of(b), [0.7310586, 0.2689414], rtol=1e-6)


def test_logsumexp_of_unsigned_and_bool():
    np.testing.assert_allclose(
        np_of(mx.logsumexp(mx.array([1, 0], dtype=mx.uint8))), np.logaddexp(1.0, 0.0), rtol=1e-6
    )
    np.testing.assert_allclose(
        np_of(mx.logsumexp(mx.array([True, False]))), np.logaddexp(1.0, 0.0), rtol=1e-6
    )


def test_softmax_of_empty_is_empty():
    for shape, axis in (((0,), None), ((0, 3), 1), ((2, 0), 1), ((0, 3), 0)):
        out = mx.softmax(mx.zeros(shape), axis=axis)
        assert out.shape == shape
        assert out.dtype == mx.float32


def test_logsumexp_of_empty_names_logsumexp():
    # issue 7.7: the error names the op the user called, not [max]/[sum]
    for shape, axis in (((0,), None), ((0, 3), 1), ((2, 0), 0)):
        with pytest.raises(ValueError, match=r"\[logsumexp\]"):
            mx.logsumexp(mx.zeros(shape), axis=axis)


def test_logsumexp_infinities_and_large_values():
    np.testing.assert_allclose(np_of(mx.logsumexp(mx.array([1e30, 1e30]))), 1e30, rtol=1e-6)
    assert np_of(mx.logsumexp(mx.array([-INF, -INF]))) == -INF
    assert np_of(mx.logsumexp(mx.array([INF, 1.0]))) == INF


@pytest.mark.loom_only
def test_logsumexp_keeps_small_terms():
    # MLX adds e^-7.25 onto 1.0 first and loses 6e-5 of it
    got = mx.logsumexp(mx.array([0.0, -7.25])).item()
    assert got == pytest.approx(np.logaddexp(0.0, -7.25), rel=3e-7)


# --- #4: count_nonzero ----------------------------------------------------------


def test_count_nonzero_dtypes_and_empty():
    c = mx.count_nonzero(mx.array(3.0))
    assert c.dtype == mx.int32 and c.item() == 1
    assert mx.count_nonzero(mx.array(True)).dtype == mx.int32
    assert mx.count_nonzero(mx.array([1.0, 0.0]), axis=()).tolist() == [1, 0]
    # issue 7.7: empty input counts nothing, with no [sum] error
    e = mx.count_nonzero(mx.zeros((0,)))
    assert e.dtype == mx.int32 and e.item() == 0
    assert mx.count_nonzero(mx.zeros((0, 3)), axis=1).shape == (0,)


# --- #5: var/std of complex -----------------------------------------------------


def test_var_std_of_complex_are_real():
    z = mx.array([1 + 1j, 3 + 2j])
    v = mx.var(z)
    assert v.dtype == mx.float32
    assert v.item() == pytest.approx(np.var(np.array([1 + 1j, 3 + 2j])))
    assert mx.std(z, ddof=1).item() == pytest.approx(np.std(np.array([1 + 1j, 3 + 2j]), ddof=1))
    assert mx.var(z, keepdims=True).shape == (1,)


# --- #7, #15, round numerics ------------------------------------------------------


def test_round_ties_to_even_large_values_and_sign_of_zero():
    x = np.array(
        [0.5, 1.5, 2.5, -0.5, -2.5, -0.4, 0.4, -0.0, 8388609.0, 16777215.0, 1e30, INF, -INF, NAN,
         1e-40, -1e-40],
        dtype=np.float32,
    )
    same_bits(np_of(mx.round(mx.array(x))), np.round(x))
    same_bits(np_of(mx.round(mx.array(-0.4))), np.round(np.float32(-0.4)))


def test_round_float64_and_decimals():
    if not hasattr(mx, "float64"):
        pytest.skip("no float64")
    x = np.array([2.5, 4503599627370497.0, -0.3, 0.125], dtype=np.float64)
    same_bits(np_of(mx.round(mx.array(x, dtype=mx.float64))), np.round(x))
    np.testing.assert_allclose(
        np_of(mx.round(mx.array([1.2345, 123.5]), 2)), [1.23, 123.5], rtol=1e-6
    )
    assert mx.round(mx.array([15, 25, -35], dtype=mx.int32), -1).tolist() == [20, 20, -40]


def test_round_complex64():
    r = mx.round(mx.array([1.5 + 2.5j, -0.4 + 3.6j]))
    assert r.dtype == mx.complex64
    assert np_of(r).tolist() == [2 + 2j, 4j]


# --- #17: logaddexp ----------------------------------------------------------------


def test_logaddexp_small_difference_and_float64():
    assert mx.logaddexp(0.0, -20.0).item() == pytest.approx(np.logaddexp(0.0, -20.0), rel=1e-6)
    if hasattr(mx, "float64"):
        a = mx.array(0.0, dtype=mx.float64)
        assert mx.logaddexp(a, -20.0).item() == pytest.approx(
            np.logaddexp(0.0, -20.0), rel=1e-12
        )


def test_logaddexp_infinities_and_nan():
    a = mx.array([-INF, INF, -INF, NAN, 1000.0, -INF])
    b = mx.array([-INF, INF, 3.0, 1.0, 1000.0, INF])
    with np.errstate(invalid="ignore"):
        want = np.logaddexp(np_of(a), np_of(b))
    got = np_of(mx.logaddexp(a, b))
    np.testing.assert_allclose(got, want, rtol=1e-6)


# --- #6, #18: log2/log10 ------------------------------------------------------------


@pytest.mark.parametrize("name", ["log2", "log10"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_log2_log10_within_half_an_ulp(name, dtype):
    # every positive finite value of the dtype against float64
    if dtype == "float16":
        bits = np.arange(1, 0x7C00, dtype=np.uint16)
        x = bits.view(np.float16).astype(np.float32)
        mant = 10
        emin = -14
    else:
        bits = np.arange(1, 0x7F80, dtype=np.uint32) << 16
        x = bits.astype(np.uint32).view(np.float32)
        mant = 7
        emin = -126
    got = np_of(getattr(mx, name)(mx.array(x).astype(getattr(mx, dtype))).astype(mx.float32))
    exact = getattr(np, name)(x.astype(np.float64))
    nz = exact != 0
    e = np.floor(np.log2(np.abs(exact[nz])))
    ulp = np.exp2(np.maximum(e, emin) - mant)
    err = np.abs(got[nz].astype(np.float64) - exact[nz]) / ulp
    assert err.max() <= 0.5002, (name, dtype, err.max())
    assert np.all(got[~nz] == 0)


@pytest.mark.parametrize("name", ["log2", "log10"])
def test_complex_log2_log10_at_zero_and_infinity(name):
    z = np.array([0j, complex(INF, 0), complex(-INF, 0), 1 + 1j], dtype=np.complex64)
    got = np_of(getattr(mx, name)(mx.array(z)))
    with np.errstate(divide="ignore"):
        want = getattr(np, name)(z)
    np.testing.assert_allclose(got.real, want.real, rtol=1e-6)
    np.testing.assert_allclose(got.imag, want.imag, rtol=1e-6)


# --- #8: linspace float64 -----------------------------------------------------------


def test_linspace_float64_is_computed_in_double():
    if not hasattr(mx, "float64"):
        pytest.skip("no float64")
    a = mx.linspace(0.1, 0.7, 7, dtype=mx.float64)
    assert a.dtype == mx.float64
    t = np.arange(7) / 6.0
    want = (1.0 - t) * 0.1 + t * 0.7  # MLX's formula, in double
    assert np_of(a).tolist() == want.tolist()
    np.testing.assert_allclose(np_of(a), np.linspace(0.1, 0.7, 7), rtol=1e-15)


# --- #9: vecdot conjugates ------------------------------------------------------------


def test_vecdot_conjugates_first_operand():
    a = np.array([1 + 1j, 2 - 1j], dtype=np.complex64)
    b = np.array([3 - 2j, 1j], dtype=np.complex64)
    got = mx.vecdot(mx.array(a), mx.array(b)).item()
    assert got == pytest.approx(np.vdot(a, b))
    assert mx.vecdot(mx.array([1 + 1j]), mx.array([1 + 1j])).item() == 2 + 0j


# --- #10: tanh gradient ---------------------------------------------------------------


def test_tanh_gradient_is_accurate_far_out():
    x = np.array([-12.0, -6.0, 6.0, 0.0, 0.5], dtype=np.float32)
    g = np_of(mx.vmap(mx.grad(mx.tanh))(mx.array(x)))
    want = 1.0 / np.cosh(x.astype(np.float64)) ** 2
    np.testing.assert_allclose(g, want, rtol=2e-6)


# --- #12: unstack / unflatten of empty arrays -----------------------------------------


def test_unstack_over_empty_axis_and_unflatten_of_empty():
    assert mx.unstack(mx.zeros((0, 3))) == ()
    assert mx.unstack(mx.zeros((3, 0)), axis=1) == ()
    parts = mx.unstack(mx.zeros((2, 0)))
    assert len(parts) == 2 and parts[0].shape == (0,)
    assert mx.unflatten(mx.zeros((0,)), 0, (-1, 2)).shape == (0, 2)
    assert mx.unflatten(mx.zeros((0, 4)), 1, (2, -1)).shape == (0, 2, 2)


# --- #13: array methods ------------------------------------------------------------------


def test_array_methods_log2_log10_log1p_round():
    a = mx.array([1.0, 8.0, 100.0])
    np.testing.assert_allclose(np_of(a.log2()), np.log2([1.0, 8.0, 100.0]), rtol=1e-6)
    np.testing.assert_allclose(np_of(a.log10()), np.log10([1.0, 8.0, 100.0]), rtol=1e-6)
    np.testing.assert_allclose(np_of(a.log1p()), np.log1p([1.0, 8.0, 100.0]), rtol=1e-6)
    assert mx.array([1.25, 2.5]).round().tolist() == [1.0, 2.0]
    assert mx.array([1.25, 2.5]).round(1).tolist() == pytest.approx([1.2, 2.5])
    assert mx.array([1.25]).round(decimals=1).tolist() == pytest.approx([1.2])


def test_conj_function_and_method():
    z = mx.array([1 + 2j, -3j])
    assert np_of(mx.conj(z)).tolist() == [1 - 2j, 3j]
    assert np_of(mx.conjugate(z)).tolist() == [1 - 2j, 3j]
    assert np_of(z.conj()).tolist() == [1 - 2j, 3j]
    assert mx.conj(mx.array([1, 2])).dtype == mx.int32


def test_log1p_is_accurate_for_small_values():
    x = np.array([1e-10, -1e-7, 1e-3, 1.0, 1e30, -1.0, INF, -INF, -2.0], dtype=np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.log1p(x.astype(np.float64))
    np.testing.assert_allclose(np_of(mx.log1p(mx.array(x))), want, rtol=2e-7)


# --- #14: logical ops with Python ints outside the dtype's range --------------------------


def test_logical_ops_take_truth_values_of_python_scalars():
    u = mx.array([1, 0], dtype=mx.uint8)
    assert mx.logical_and(u, 300).tolist() == [True, False]
    assert mx.logical_or(mx.array([0], dtype=mx.int8), -1000).tolist() == [True]
    assert mx.logical_xor(u, 256).tolist() == [False, True]
    assert mx.logical_and(u, 0.5).tolist() == [True, False]
    assert mx.logical_or(0, u).tolist() == [True, False]


# --- #16: result_type ------------------------------------------------------------------------


def test_result_type_rejects_python_scalars_with_value_error():
    with pytest.raises(ValueError, match=r"\[result_type\]"):
        mx.result_type(mx.array(1), 1.0)
    with pytest.raises(ValueError, match=r"\[can_cast\]"):
        mx.can_cast(1.0, mx.float32)
    assert mx.result_type(mx.array(1), mx.float32) == mx.float32


# --- issue 7.7: tri with a negative size --------------------------------------------------------


def test_tri_negative_size_is_empty():
    assert mx.tri(-2, 3).shape == (0, 3)
    assert mx.tri(2, -1).shape == (2, 0)
    assert mx.tri(3, 3, -1).tolist() == np.tri(3, 3, -1).tolist()


# --- other composites against NumPy ---------------------------------------------------------------


def test_shape_composites_match_numpy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = mx.array(a)
    assert np_of(mx.roll(x, 1)).tolist() == np.roll(a, 1).tolist()
    assert np_of(mx.roll(x, shift=(1, -1), axis=(0, 1))).tolist() == np.roll(
        a, (1, -1), (0, 1)
    ).tolist()
    assert np_of(mx.flip(x, 1)).tolist() == np.flip(a, 1).tolist()
    assert np_of(mx.tile(x, (2, 1))).tolist() == np.tile(a, (2, 1)).tolist()
    assert np_of(mx.repeat(x, 2, axis=0)).tolist() == np.repeat(a, 2, axis=0).tolist()
    for mode in ("constant", "edge", "reflect", "symmetric"):
        assert np_of(mx.pad(x, ((1, 2), (2, 1)), mode=mode)).tolist() == np.pad(
            a, ((1, 2), (2, 1)), mode=mode
        ).tolist()
    assert np_of(mx.tril(x, -1)).tolist() == np.tril(a, -1).tolist()
    assert np_of(mx.triu(x, 1)).tolist() == np.triu(a, 1).tolist()
    assert np_of(mx.diff(x, 2)).tolist() == np.diff(a, 2).tolist()
    assert np_of(mx.kron(x, mx.array([[1.0, 2.0]]))).tolist() == np.kron(a, [[1.0, 2.0]]).tolist()
    b = np.arange(8, dtype=np.float32).reshape(4, 2)
    np.testing.assert_allclose(
        np_of(mx.tensordot(x, mx.array(b), axes=1)), np.tensordot(a, b, axes=1), rtol=1e-6
    )


def test_clip_nan_to_num_trunc_match_numpy():
    a = np.array([-2.5, -0.2, 0.5, 3.0, NAN, INF, -INF], dtype=np.float32)
    x = mx.array(a)
    np.testing.assert_array_equal(np_of(mx.clip(x, -1.0, 1.0)), np.clip(a, -1.0, 1.0))
    np.testing.assert_array_equal(np_of(mx.nan_to_num(x)), np.nan_to_num(a))
    same_bits(np_of(mx.trunc(x)), np.trunc(a))


# --- property tests against NumPy over arbitrary float32 values ----------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

FLOATS = hnp.arrays(
    np.float32,
    hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=6),
    elements=st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True),
)
FINITE = hnp.arrays(
    np.float32,
    hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=6),
    elements=st.floats(-80, 80, width=32, allow_subnormal=True),
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(FLOATS)
def test_round_and_trunc_match_numpy_bit_for_bit(x):
    same_bits(np_of(mx.round(mx.array(x))).ravel(), np.round(x).ravel())
    same_bits(np_of(mx.trunc(mx.array(x))).ravel(), np.trunc(x).ravel())


@settings(max_examples=150, deadline=None, derandomize=True)
@given(FLOATS, FLOATS)
def test_logaddexp_matches_numpy(a, b):
    b = np.resize(b, a.shape)
    with np.errstate(all="ignore"):
        want = np.logaddexp(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    got = np_of(mx.logaddexp(mx.array(a), mx.array(b)))
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-37)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(FLOATS)
def test_log1p_matches_numpy(x):
    with np.errstate(all="ignore"):
        want = np.log1p(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(np_of(mx.log1p(mx.array(x))), want, rtol=3e-7, atol=1e-44)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(FINITE)
def test_softmax_logsumexp_var_match_numpy(x):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(
        # x - max rounds to float32 (ulp(80) / 2 = 4e-6 relative after exp)
        np_of(mx.softmax(mx.array(x), axis=-1)), e / e.sum(-1, keepdims=True), rtol=1e-5,
        atol=1e-30,
    )
    lse = np.log(np.exp(x64 - x64.max()).sum()) + x64.max()
    assert mx.logsumexp(mx.array(x)).item() == pytest.approx(lse, rel=2e-6, abs=2e-6)
    assert mx.var(mx.array(x)).item() == pytest.approx(np.var(x64), rel=1e-4, abs=1e-3)
