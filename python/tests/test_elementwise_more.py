"""The trigonometric/hyperbolic family, arctan2, expm1, erfinv, real/imag and
complex log2/log10: values against NumPy/SciPy over the dtypes MLX supports,
special values, dtype rules and errors, gradients against finite
differences, jvp and vmap."""

import numpy as np
import pytest
from scipy import special

from _backend import mx
from _helpers import assert_array, from_numpy, rng, round_to

# name, NumPy reference, domain of the test inputs, accepts complex64
UNARY = [
    ("sinh", np.sinh, (-3.0, 3.0), True),
    ("cosh", np.cosh, (-3.0, 3.0), True),
    ("tan", np.tan, (-1.4, 1.4), True),
    ("arcsin", np.arcsin, (-0.99, 0.99), True),
    ("arccos", np.arccos, (-0.99, 0.99), True),
    ("arctan", np.arctan, (-5.0, 5.0), True),
    ("arcsinh", np.arcsinh, (-5.0, 5.0), True),
    ("arccosh", np.arccosh, (1.01, 5.0), True),
    ("arctanh", np.arctanh, (-0.99, 0.99), True),
    ("expm1", np.expm1, (-3.0, 3.0), False),
    ("erfinv", special.erfinv, (-0.999, 0.999), False),
]
NAMES = [u[0] for u in UNARY]
ALIASES = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
           "acosh": "arccosh", "atanh": "arctanh", "atan2": "arctan2"}


@pytest.mark.parametrize("name,ref,domain,cplx", UNARY, ids=NAMES)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_unary_values(name, ref, domain, cplx, dtype):
    x = rng(1).uniform(*domain, size=(7, 9))
    xr = round_to(x, dtype)
    out = getattr(mx, name)(from_numpy(xr, dtype))
    assert_array(out, round_to(ref(xr), dtype), dtype=dtype)


@pytest.mark.parametrize("name,ref,domain,cplx", UNARY, ids=NAMES)
def test_unary_float32_tight(name, ref, domain, cplx):
    # float32 results within a few ulp of the float64 reference.
    x = rng(2).uniform(*domain, size=4096).astype(np.float32)
    out = np.array(getattr(mx, name)(mx.array(x)))
    np.testing.assert_allclose(out, ref(x.astype(np.float64)), rtol=4e-6, atol=1e-7)


@pytest.mark.parametrize("name,ref,domain,cplx", [u for u in UNARY if u[3]],
                         ids=[u[0] for u in UNARY if u[3]])
def test_unary_complex(name, ref, domain, cplx):
    r = rng(3)
    z = (r.uniform(-0.9, 0.9, 64) + 1j * r.uniform(-0.9, 0.9, 64)).astype(np.complex64)
    out = getattr(mx, name)(mx.array(z))
    assert out.dtype == mx.complex64
    np.testing.assert_allclose(np.array(out), ref(z.astype(np.complex128)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["expm1", "erfinv"])
def test_real_only_rejects_complex(name):
    with pytest.raises(ValueError, match=rf"\[{name}\] Not supported for complex64"):
        getattr(mx, name)(mx.array([1 + 1j]))


def test_arctan2_rejects_complex():
    with pytest.raises(ValueError, match=r"\[arctan2\] Not supported for complex64"):
        mx.arctan2(mx.array([1 + 1j]), mx.array([1.0]))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("src", ["int32", "uint8", "bool"])
def test_integers_and_bool_promote_to_float32(name, src):
    x = np.array([0, 1, 0, 1]) if src == "bool" else np.array([0, 1, 2, 3])
    a = mx.array(x.astype(bool) if src == "bool" else x, dtype=getattr(mx, "bool_" if src == "bool" else src))
    out = getattr(mx, name)(a)
    assert out.dtype == mx.float32
    ref = dict((u[0], u[1]) for u in UNARY)[name]
    with np.errstate(all="ignore"):
        expected = ref(x.astype(np.float64))
    np.testing.assert_allclose(np.array(out), expected, rtol=1e-5, equal_nan=True)


def test_aliases_are_the_same_functions():
    for short, long in ALIASES.items():
        assert getattr(mx, short) is getattr(mx, long)


def test_special_values():
    inf, nan = np.inf, np.nan
    cases = {
        "sinh": [0.0, -0.0, inf, -inf, nan],
        "cosh": [0.0, inf, -inf, nan],
        "tan": [0.0, -0.0, nan],
        "arcsin": [1.0, -1.0, 1.5, -0.0, nan],
        "arccos": [1.0, -1.0, 1.5, nan],
        "arctan": [inf, -inf, -0.0, nan],
        "arcsinh": [inf, -inf, -0.0, nan],
        "arccosh": [1.0, 0.5, inf, nan],
        "arctanh": [1.0, -1.0, 2.0, -0.0, nan],
        "expm1": [inf, -inf, -0.0, 1e-10, 100.0, nan],
    }
    for name, vals in cases.items():
        x = np.array(vals, dtype=np.float32)
        got = np.array(getattr(mx, name)(mx.array(x)))
        with np.errstate(all="ignore"):
            want = getattr(np, name)(x)
        np.testing.assert_allclose(got, want, rtol=2e-6, equal_nan=True, err_msg=name)
        # Signs of zeros and infinities.
        np.testing.assert_array_equal(np.signbit(got[~np.isnan(want)]),
                                      np.signbit(want[~np.isnan(want)]), err_msg=name)


def test_erfinv_edges_and_tails():
    x = np.array([1.0, -1.0, 1.5, -2.0, 0.0, -0.0, np.nan], dtype=np.float32)
    got = np.array(mx.erfinv(mx.array(x)))
    np.testing.assert_array_equal(got[:4], [np.inf, -np.inf, np.nan, np.nan])
    assert got[4] == 0 and not np.signbit(got[4]) and np.signbit(got[5])
    assert np.isnan(got[6])
    # Tails: the float32 values nearest to +-1 and tiny inputs.
    t = np.array([1 - 2.0**-24, -(1 - 2.0**-24), 1 - 2.0**-20, 0.9999, 1e-30, -3e-8],
                 dtype=np.float32)
    np.testing.assert_allclose(np.array(mx.erfinv(mx.array(t))),
                               special.erfinv(t.astype(np.float64)), rtol=2e-6)


def test_arctan2_values_and_quadrants():
    r = rng(4)
    a = r.uniform(-3, 3, (5, 1)).astype(np.float32)
    b = r.uniform(-3, 3, (1, 6)).astype(np.float32)
    assert_array(mx.arctan2(mx.array(a), mx.array(b)), np.arctan2(a, b), dtype="float32")
    inf = np.inf
    ys = np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, inf, inf, -inf, 1.0, np.nan], np.float32)
    xs = np.array([0.0, 0.0, -0.0, -0.0, -inf, -inf, inf, -inf, 1.0, 0.0, 1.0], np.float32)
    got = np.array(mx.arctan2(mx.array(ys), mx.array(xs)))
    want = np.arctan2(ys, xs)
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    # Integers promote to float32; a Python scalar takes the array's dtype.
    assert mx.arctan2(mx.array([1, 2]), mx.array([3, 4])).dtype == mx.float32
    h = mx.arctan2(mx.array([1.0, 2.0], dtype=mx.float16), 2.0)
    assert h.dtype == mx.float16
    assert_array(h, np.arctan2(np.float16([1, 2]), np.float16(2)), dtype="float16")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_arctan2_half(dtype):
    r = rng(5)
    a = round_to(r.uniform(-3, 3, 50), dtype)
    b = round_to(r.uniform(-3, 3, 50), dtype)
    out = mx.arctan2(from_numpy(a, dtype), from_numpy(b, dtype))
    assert_array(out, round_to(np.arctan2(a, b), dtype), dtype=dtype)


def test_real_imag():
    z = np.array([1 + 2j, -3.5 - 0.25j, 0j], dtype=np.complex64)
    a = mx.array(z)
    for f in (mx.real, lambda t: t.real):
        assert_array(f(a), z.real, dtype="float32")
    for f in (mx.imag, lambda t: t.imag):
        assert_array(f(a), z.imag, dtype="float32")
    # Real inputs: the input itself and zeros of its dtype.
    for dtype in ("int32", "float16", "bool"):
        x = mx.array([1, 0, 1], dtype=getattr(mx, "bool_" if dtype == "bool" else dtype))
        assert mx.real(x).dtype == x.dtype and mx.imag(x).dtype == x.dtype
        assert mx.real(x).tolist() == x.tolist()
        assert not mx.any(mx.imag(x)).item()
    # Non-finite parts are taken as they are.
    w = mx.array(np.array([complex(np.inf, 1), complex(2, -np.inf)], dtype=np.complex64))
    np.testing.assert_array_equal(np.array(mx.real(w)), [np.inf, 2])
    np.testing.assert_array_equal(np.array(mx.imag(w)), [1, -np.inf])


def test_real_imag_gradients():
    z = mx.array([1 + 2j, 3 - 1j])
    g = mx.array([1.0, 2.0])
    (gr,) = mx.vjp(lambda t: mx.real(t), [z], [g])[1]
    (gi,) = mx.vjp(lambda t: mx.imag(t), [z], [g])[1]
    np.testing.assert_allclose(np.array(gr), [1 + 0j, 2 + 0j])
    np.testing.assert_allclose(np.array(gi), [1j, 2j])
    t = mx.array([1 + 3j, 2 + 5j])
    np.testing.assert_allclose(np.array(mx.jvp(mx.real, [z], [t])[1][0]), [1, 2])
    np.testing.assert_allclose(np.array(mx.jvp(mx.imag, [z], [t])[1][0]), [3, 5])


def test_complex_log2_log10_match_numpy():
    inf, nan = np.inf, np.nan
    z = np.array([complex(inf, 0), complex(-inf, 0), 0j, complex(inf, inf),
                  complex(-inf, -inf), complex(nan, 0), 1e-3 + 0j, 2 - 3j, complex(0, inf)],
                 dtype=np.complex64)
    for name in ("log2", "log10"):
        got = np.array(getattr(mx, name)(mx.array(z)))
        with np.errstate(all="ignore"):
            want = getattr(np, name)(z.astype(np.complex128))
        np.testing.assert_allclose(got.real, want.real, rtol=1e-6, equal_nan=True, err_msg=name)
        np.testing.assert_allclose(got.imag, want.imag, rtol=1e-6, atol=1e-7, equal_nan=True,
                                   err_msg=name)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_real_log2_log10(dtype):
    x = round_to(rng(6).uniform(0.01, 100, 300), dtype)
    for name in ("log2", "log10"):
        assert_array(getattr(mx, name)(from_numpy(x, dtype)),
                     round_to(getattr(np, name)(x), dtype), dtype=dtype)
    got = np.array(mx.log10(mx.array(np.float32([0, -1, np.inf, np.nan]))))
    np.testing.assert_array_equal(got, [-np.inf, np.nan, np.inf, np.nan])


# --- derivatives ---

def _fd(f, x, eps=1e-6):
    return (f(x + eps) - f(x - eps)) / (2 * eps)


DIFF = UNARY + [("log2", np.log2, (0.3, 3.0), True), ("log10", np.log10, (0.3, 3.0), True)]


@pytest.mark.parametrize("name,ref,domain,cplx", DIFF, ids=[u[0] for u in DIFF])
def test_grad_jvp_vmap_match_finite_differences(name, ref, domain, cplx):
    lo, hi = domain
    margin = 0.05 * (hi - lo)
    x = rng(7).uniform(lo + margin, hi - margin, (3, 4))
    want = _fd(ref, x)
    f = getattr(mx, name)
    xm = mx.array(x.astype(np.float32))
    g = mx.grad(lambda t: mx.sum(f(t)))(xm)
    np.testing.assert_allclose(np.array(g), want, rtol=2e-4, atol=2e-5)
    _, (t,) = mx.jvp(f, [xm], [mx.ones_like(xm)])
    np.testing.assert_allclose(np.array(t), want, rtol=2e-4, atol=2e-5)
    v = mx.vmap(mx.grad(lambda t: mx.sum(f(t))))(xm)
    np.testing.assert_allclose(np.array(v), want, rtol=2e-4, atol=2e-5)
    vv = mx.vmap(f, in_axes=1)(xm)
    np.testing.assert_allclose(np.array(vv), ref(x.astype(np.float32)).T, rtol=5e-6, atol=1e-7)


def test_arctan2_gradients_and_vmap():
    r = rng(8)
    a = r.uniform(-2, 2, (3, 4))
    b = r.uniform(0.3, 2, (3, 4)) * r.choice([-1, 1], (3, 4))
    am, bm = mx.array(a.astype(np.float32)), mx.array(b.astype(np.float32))
    ga, gb = mx.grad(lambda p, q: mx.sum(mx.arctan2(p, q)), argnums=(0, 1))(am, bm)
    np.testing.assert_allclose(np.array(ga), _fd(lambda t: np.arctan2(t, b), a), rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(np.array(gb), _fd(lambda t: np.arctan2(a, t), b), rtol=2e-4, atol=2e-5)
    _, (t,) = mx.jvp(mx.arctan2, [am, bm], [mx.ones_like(am), mx.zeros_like(bm)])
    np.testing.assert_allclose(np.array(t), _fd(lambda t: np.arctan2(t, b), a), rtol=2e-4, atol=2e-5)
    v = mx.vmap(mx.arctan2, in_axes=(0, 1))(am, mx.array(b.T.astype(np.float32)))
    np.testing.assert_allclose(np.array(v), np.arctan2(a, b), rtol=2e-6, atol=1e-7)


def test_complex_gradient_convention():
    # Reverse mode conjugates the derivative (MLX): d sinh(z) -> conj(cosh z).
    z = np.array([0.3 + 0.4j, -0.2 + 0.1j], dtype=np.complex64)
    _, (g,) = mx.vjp(mx.sinh, [mx.array(z)], [mx.ones((2,), dtype=mx.complex64)])
    np.testing.assert_allclose(np.array(g), np.conj(np.cosh(z)), rtol=1e-5)
    _, (t,) = mx.jvp(mx.arctan, [mx.array(z)], [mx.ones((2,), dtype=mx.complex64)])
    np.testing.assert_allclose(np.array(t), 1 / (1 + z.astype(np.complex128) ** 2), rtol=1e-5)


def test_noncontiguous_and_empty():
    x = rng(9).uniform(-0.9, 0.9, (6, 8)).astype(np.float32)
    xm = mx.array(x)
    for name in ("arcsin", "sinh", "erfinv", "expm1"):
        ref = dict((u[0], u[1]) for u in UNARY)[name]
        assert_array(getattr(mx, name)(xm.T[::2]), ref(x.T[::2].astype(np.float64)),
                     dtype="float32")
        assert getattr(mx, name)(mx.zeros((0, 3))).shape == (0, 3)
    assert mx.arctan2(mx.zeros((0, 3)), mx.ones((1, 3))).shape == (0, 3)
