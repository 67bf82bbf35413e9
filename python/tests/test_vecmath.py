"""Accuracy of the float32 transcendental kernels: ulp errors against the
float64 NumPy/SciPy result over many magnitudes (subnormals to the overflow
threshold, huge arguments for sin/cos/tan), the special values, the
float16/bfloat16 paths, every layout the eager kernel takes (dense, donated
in place, strided, broadcast) and compiled against eager."""

import numpy as np
import pytest
from scipy import special

from _backend import mx
from _helpers import round_to

TINY = 2.0**-149  # the smallest float32 subnormal


def magnitudes(lo_exp, hi_exp, signed=True, per_binade=200, seed=0):
    """float32 values spread over every binade 2^lo_exp .. 2^hi_exp."""
    r = np.random.default_rng(seed)
    e = np.arange(lo_exp, hi_exp + 1, dtype=np.float64)
    x = (r.uniform(1.0, 2.0, (len(e), per_binade)) * np.exp2(e)[:, None]).ravel()
    if signed:
        x = np.concatenate([x, -x])
    return x.astype(np.float32)


def ulp_errors(got, ref):
    """|got - ref| in units of the float32 ulp at ref (ref in float64)."""
    with np.errstate(over="ignore"):
        ref32 = ref.astype(np.float32)
    finite = np.isfinite(ref32) & np.isfinite(got)
    mag = np.abs(np.where(finite, ref32, np.float32(1)))
    ulp = np.maximum(np.spacing(mag).astype(np.float64), TINY)
    return np.where(finite, np.abs(got.astype(np.float64) - ref) / ulp, 0.0)


def sigmoid64(x):
    return special.expit(x)


def erfinv64(x):
    # SciPy returns +0 for -0; erfinv is odd, and MLX (like Loom) keeps the sign.
    return np.where(x == 0, x, special.erfinv(x))


# name, float64 reference, (lo_exp, hi_exp, signed) of the wide inputs,
# Loom's ulp bound there, (lo_exp, hi_exp) of the inputs every
# implementation (MLX included) handles within 4 ulp.
OPS = [
    ("exp", np.exp, (-149, 7, True), 2.0, (-20, 5)),
    ("expm1", np.expm1, (-149, 7, True), 1.0, (-20, 5)),
    ("log", np.log, (-149, 127, False), 2.0, (-126, 127)),
    ("log1p", np.log1p, (-149, 127, False), 1.0, (-20, 60)),
    ("log2", np.log2, (-149, 127, False), 2.0, (-126, 127)),
    ("log10", np.log10, (-149, 127, False), 2.5, (-126, 127)),
    ("sin", np.sin, (-149, 127, True), 1.0, (-20, 12)),
    ("cos", np.cos, (-149, 127, True), 1.0, (-20, 12)),
    ("tan", np.tan, (-149, 127, True), 1.0, (-20, 12)),
    ("tanh", np.tanh, (-149, 7, True), 2.0, (-20, 5)),
    ("sinh", np.sinh, (-149, 7, True), 1.0, (-20, 5)),
    ("cosh", np.cosh, (-149, 7, True), 1.0, (-20, 5)),
    ("erf", special.erf, (-149, 3, True), 2.0, (-20, 2)),
    ("sigmoid", sigmoid64, (-149, 7, True), 2.5, (-20, 5)),
    ("arcsin", np.arcsin, (-149, -1, True), 1.0, (-20, -1)),
    ("arccos", np.arccos, (-149, -1, True), 1.0, (-20, -1)),
    ("arctan", np.arctan, (-149, 127, True), 1.0, (-20, 20)),
    ("arcsinh", np.arcsinh, (-149, 127, True), 1.0, (-20, 20)),
    ("arccosh", np.arccosh, (0, 127, False), 1.0, (0, 20)),
    ("arctanh", np.arctanh, (-149, -1, True), 1.0, (-20, -1)),
    ("erfinv", erfinv64, (-149, -1, True), 1.0, (-20, -2)),
]
NAMES = [o[0] for o in OPS]
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, TINY, -TINY, 1.0, -1.0,
                     np.finfo(np.float32).max, -np.finfo(np.float32).max,
                     np.finfo(np.float32).tiny, 88.72, 89.5, -87.5, -104.0, 1e30, -1e30],
                    dtype=np.float32)


def reference(ref, x):
    with np.errstate(all="ignore"):
        return ref(x.astype(np.float64))


def reference32(ref, x):
    """The float64 reference rounded to float32 (overflowing to inf)."""
    with np.errstate(all="ignore"):
        return ref(x.astype(np.float64)).astype(np.float32)


@pytest.mark.loom_only
@pytest.mark.parametrize("name,ref,wide,bound,common", OPS, ids=NAMES)
def test_ulp_wide_range(name, ref, wide, bound, common):
    # Loom's kernels: subnormal inputs and results, the overflow threshold,
    # and (sin/cos/tan) arguments up to 3e38.
    x = magnitudes(*wide)
    # The bounds are the CPU kernels' (the GPU uses CUDA's math library).
    got = np.array(getattr(mx, name)(mx.array(x), stream=mx.cpu))
    err = ulp_errors(got, reference(ref, x))
    worst = int(np.argmax(err))
    assert err[worst] <= bound, f"{name}({x[worst]!r}) is {err[worst]:.2f} ulp off"


@pytest.mark.parametrize("name,ref,wide,bound,common", OPS, ids=NAMES)
def test_common_range_to_mlx_tolerance(name, ref, wide, bound, common):
    # The tolerance MLX's own results meet over ordinary magnitudes.
    lo, hi = common
    x = magnitudes(lo, hi, signed=wide[2], seed=1)
    got = np.array(getattr(mx, name)(mx.array(x)))
    np.testing.assert_allclose(got, reference(ref, x), rtol=5e-6, atol=1e-6)


@pytest.mark.parametrize("name,ref,wide,bound,common", OPS, ids=NAMES)
def test_infinities_and_nan(name, ref, wide, bound, common):
    x = np.array([np.inf, -np.inf, np.nan, 1.0, -1.0, 1e30, -1e30, np.finfo(np.float32).max],
                 np.float32)
    got = np.array(getattr(mx, name)(mx.array(x)))
    want = reference32(ref, x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))


@pytest.mark.loom_only
@pytest.mark.parametrize("name,ref,wide,bound,common", OPS, ids=NAMES)
def test_special_values(name, ref, wide, bound, common):
    # Signed zeros, subnormals and the overflow threshold, as NumPy has them.
    x = SPECIALS
    got = np.array(getattr(mx, name)(mx.array(x), stream=mx.cpu))  # the CPU kernels' bounds
    want = reference32(ref, x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))
    finite = np.isfinite(want) & ~zero
    err = ulp_errors(got[finite], reference(ref, x[finite]))
    assert err.max() <= bound


@pytest.mark.loom_only
@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_huge_arguments_exact(name):
    # Past 2^40 the kernels reduce through the C library's double routine;
    # the result is the correctly rounded float32 one up to half an ulp.
    x = magnitudes(35, 127, per_binade=50)
    got = np.array(getattr(mx, name)(mx.array(x), stream=mx.cpu))  # the CPU kernels' reduction
    err = ulp_errors(got, reference(getattr(np, name), x))
    assert err.max() <= 0.51


@pytest.mark.parametrize("name", ["sin", "cos", "tan", "log1p", "expm1", "tanh", "exp"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_inputs(name, dtype):
    # float16/bfloat16 compute in float32 and round once.
    ref = dict((o[0], o[1]) for o in OPS)[name]
    hi = 11.0 if dtype == "float16" and name in ("exp", "expm1") else 30.0
    lo = 0.0 if name == "log1p" else -hi
    x = round_to(np.random.default_rng(3).uniform(lo, hi, 3000), dtype)
    out = getattr(mx, name)(mx.array(x.astype(np.float32)).astype(getattr(mx, dtype)))
    assert out.dtype == getattr(mx, dtype)
    want = round_to(reference(ref, x.astype(np.float32)), dtype)
    got = np.array(out.astype(mx.float32))
    # One rounding to the half type: at most one half-type ulp apart.
    spacing = 2.0**-10 if dtype == "float16" else 2.0**-7
    np.testing.assert_allclose(got, want, rtol=spacing * 1.01, atol=1e-6)


def mixed_trig_input(n=5000, huge=True):
    # Ordinary arguments with a few huge ones, inf and NaN scattered among
    # them, so that some pieces take the C library for a few elements.
    r = np.random.default_rng(4)
    x = r.uniform(-50.0, 50.0, n).astype(np.float32)
    idx = r.choice(n, 40, replace=False)
    if huge:
        x[idx[:30]] = r.uniform(1e12, 1e30, 30).astype(np.float32) * r.choice([-1, 1], 30)
    x[idx[30:35]] = np.inf
    x[idx[35:]] = np.nan
    return x


@pytest.mark.parametrize("huge", [pytest.param(True, marks=pytest.mark.loom_only), False],
                         ids=["huge", "ordinary"])
@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_layouts(name, huge):
    x = mixed_trig_input(huge=huge)
    f = getattr(mx, name)
    want = reference32(getattr(np, name), x)
    a = mx.array(x)
    # dense
    np.testing.assert_allclose(np.array(f(a)), want, rtol=3e-7, atol=1e-7)
    # a temporary input whose buffer the kernel reuses for its output
    np.testing.assert_allclose(np.array(f(a * 1.0)), want, rtol=3e-7, atol=1e-7)
    # strided (every other element) and reversed views
    np.testing.assert_allclose(np.array(f(a[::2])), want[::2], rtol=3e-7, atol=1e-7)
    np.testing.assert_allclose(np.array(f(a[::-1])), want[::-1], rtol=3e-7, atol=1e-7)
    # a transposed 2-D view: the kernel walks runs of a collapsed layout
    m = x[:4900].reshape(70, 70)
    mt = mx.array(m).T
    np.testing.assert_allclose(np.array(f(mt)), want[:4900].reshape(70, 70).T, rtol=3e-7,
                               atol=1e-7)
    # a broadcast scalar
    v = np.float32(1e20 if huge else 7.5)
    b = mx.broadcast_to(mx.array(v), (3, 5))
    np.testing.assert_allclose(np.array(f(b)), np.full((3, 5), getattr(np, name)(np.float64(v)),
                                                        np.float32), rtol=3e-7)


@pytest.mark.loom_only
@pytest.mark.parametrize("name", ["sin", "cos", "tan", "log1p", "expm1", "sinh", "cosh", "erf",
                                  "tanh", "exp", "log", "sigmoid", "arcsin", "arccos", "arctan",
                                  "arcsinh", "arccosh", "arctanh"])
def test_compiled_matches_eager_exactly(name):
    # One implementation: the fused tile executor runs the same kernels, so
    # the bits agree (huge arguments and specials included).
    x = np.concatenate([mixed_trig_input(3000), SPECIALS])
    if name in ("log1p", "log", "arccosh"):
        x = np.abs(x)
    if name in ("arcsin", "arccos", "arctanh"):
        x = (x / np.float32(40)).astype(np.float32)  # mostly inside [-1, 1]
    f = getattr(mx, name)

    def fn(v):
        return f(v * 1.0) + 0.0

    a = mx.array(x)
    eager = np.array(fn(a))
    compiled = np.array(mx.compile(fn)(a))
    np.testing.assert_array_equal(compiled.view(np.uint32), eager.view(np.uint32))


def test_log1p_small_and_negative():
    x = np.array([1e-30, -1e-30, 1e-8, -1e-8, 1e-3, -0.5, -0.999999, -1.0, -1.5, 3.0],
                 np.float32)
    got = np.array(mx.log1p(mx.array(x)))
    want = reference(np.log1p, x)
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=3e-7)
    assert np.isneginf(got[7]) and np.isnan(got[8])


def test_log1p_float64_and_complex():
    x = np.array([1e-300, 1e-10, 0.5, 100.0])
    got = np.array(mx.log1p(mx.array(x, dtype=mx.float64), stream=mx.cpu))
    np.testing.assert_allclose(got, np.log1p(x), rtol=1e-15)
    z = np.array([0.5 + 0.5j, -0.25 + 1j], np.complex64)
    np.testing.assert_allclose(np.array(mx.log1p(mx.array(z))), np.log1p(z.astype(np.complex128)),
                               rtol=1e-5)


def test_log1p_gradient():
    x = mx.array(np.array([0.0, 0.5, 3.0, -0.5], np.float32))
    g = mx.grad(lambda v: mx.log1p(v).sum())(x)
    np.testing.assert_allclose(np.array(g), 1.0 / (1.0 + np.array(x)), rtol=1e-6)


# --- the vectorised inverse functions: edges, arctan2, layouts -------------

def test_inverse_functions_domain_edges():
    x = np.array([1.0, -1.0, np.nextafter(np.float32(1), np.float32(0)),
                  -np.nextafter(np.float32(1), np.float32(0)), np.nextafter(np.float32(1), np.float32(2)),
                  -1.5, 0.0, -0.0, TINY, 0.5, -0.5], np.float32)
    for name, ref in [("arcsin", np.arcsin), ("arccos", np.arccos), ("arctanh", np.arctanh),
                      ("erfinv", erfinv64), ("arccosh", np.arccosh)]:
        got = np.array(getattr(mx, name)(mx.array(x)))
        want = reference(ref, x)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want), err_msg=name)
        fin = np.isfinite(want)
        assert ulp_errors(got[fin], want[fin]).max() <= 1.0, name
        np.testing.assert_array_equal(np.signbit(got[fin]), np.signbit(want[fin]), err_msg=name)


def _atan2_grid():
    r = np.random.default_rng(8)
    mags = magnitudes(-149, 127, per_binade=20, seed=9)
    y = r.permutation(mags)
    # Half unrelated magnitudes, half near y (angles near pi/4 and 3pi/4).
    near = np.clip(y[len(mags) // 2:] * r.uniform(0.5, 2.0, len(mags) - len(mags) // 2),
                   -3e38, 3e38).astype(np.float32)
    x = np.concatenate([r.permutation(mags[: len(mags) // 2]), near])
    sv = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, TINY], np.float32)
    ys, xs = np.meshgrid(sv, sv)
    return np.concatenate([y, ys.ravel()]), np.concatenate([x, xs.ravel()])


def test_arctan2_ulp_and_specials():
    y, x = _atan2_grid()
    got = np.array(mx.arctan2(mx.array(y), mx.array(x)))
    with np.errstate(all="ignore"):
        want = np.arctan2(y.astype(np.float64), x.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=5e-6, atol=1e-30)
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))


@pytest.mark.loom_only
def test_arctan2_within_one_ulp():
    y, x = _atan2_grid()
    # The CPU kernel's bound (CUDA's atan2f is within 2 ulp: 1.51 on an H200).
    got = np.array(mx.arctan2(mx.array(y), mx.array(x), stream=mx.cpu))
    with np.errstate(all="ignore"):
        want = np.arctan2(y.astype(np.float64), x.astype(np.float64))
    assert ulp_errors(got, want).max() <= 1.0


@pytest.mark.parametrize("name", ["arcsin", "arctan", "arcsinh", "arctanh", "erfinv"])
def test_inverse_functions_layouts_and_halves(name):
    ref = dict((o[0], o[1]) for o in OPS)[name]
    x = np.random.default_rng(12).uniform(-0.99, 0.99, 4097).astype(np.float32)
    want = reference32(ref, x)
    a = mx.array(x)
    f = getattr(mx, name)
    np.testing.assert_allclose(np.array(f(a)), want, rtol=3e-7, atol=1e-30)
    np.testing.assert_allclose(np.array(f(a[::3])), want[::3], rtol=3e-7, atol=1e-30)
    np.testing.assert_allclose(np.array(f(a[::-1])), want[::-1], rtol=3e-7, atol=1e-30)
    m = mx.array(x[:4096].reshape(64, 64)).T
    np.testing.assert_allclose(np.array(f(m)), want[:4096].reshape(64, 64).T, rtol=3e-7,
                               atol=1e-30)
    for dtype, spacing in (("float16", 2.0**-10), ("bfloat16", 2.0**-7)):
        xh = round_to(x, dtype)
        out = f(mx.array(xh.astype(np.float32)).astype(getattr(mx, dtype)))
        assert out.dtype == getattr(mx, dtype)
        np.testing.assert_allclose(np.array(out.astype(mx.float32)),
                                   round_to(reference(ref, xh.astype(np.float32)), dtype),
                                   rtol=spacing * 1.01, atol=1e-6)


# --- float64 exp and log: vectorised kernels within 1 ulp -------------------

def magnitudes64(lo_exp, hi_exp, signed=True, per_binade=40, seed=0):
    r = np.random.default_rng(seed)
    e = np.arange(lo_exp, hi_exp + 1, dtype=np.float64)
    x = (r.uniform(1.0, 2.0, (len(e), per_binade)) * np.exp2(e)[:, None]).ravel()
    return np.concatenate([x, -x]) if signed else x


def ulp_errors64(got, x, ref):
    """|got - ref(x)| in float64 ulps, ref evaluated in long double."""
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.longdouble))
        want64 = want.astype(np.float64)
    finite = np.isfinite(want64) & np.isfinite(got)
    sp = np.maximum(np.spacing(np.abs(np.where(finite, want64, 1.0))), 5e-324)
    err = np.abs(got.astype(np.longdouble) - np.where(finite, want, 0)) / sp
    return np.where(finite, err, 0.0).astype(np.float64), want64


@pytest.mark.loom_only
@pytest.mark.parametrize("name,wide", [("exp", (-1074, 9, True)), ("log", (-1074, 1023, False))])
def test_float64_ulp_wide_range(name, wide):
    if np.finfo(np.longdouble).nmant < 60:
        pytest.skip("needs an extended long double for the reference")
    x = magnitudes64(*wide)
    x = np.concatenate([x, [709.78, 709.79, -708.4, -745.1, -745.2, 1e-300, 5e-324, 1.7e308]])
    x = np.abs(x) if name == "log" else x
    got = np.array(getattr(mx, name)(mx.array(x, dtype=mx.float64), stream=mx.cpu))
    assert got.dtype == np.float64
    err, want = ulp_errors64(got, x, getattr(np, name))
    worst = int(np.argmax(err))
    assert err[worst] <= 1.0, f"{name}({x[worst]!r}) is {err[worst]:.2f} ulp off"
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))


@pytest.mark.loom_only  # MLX 0.32.4 computes float64 exp in float32 precision on the CPU
@pytest.mark.parametrize("name", ["exp", "log"])
def test_float64_specials_and_layouts(name):
    f = getattr(mx, name)
    s = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 5e-324, 1.7e308, 710.0, -746.0])
    got = np.array(f(mx.array(s, dtype=mx.float64), stream=mx.cpu))
    with np.errstate(all="ignore"):
        want = getattr(np, name)(s)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = ~np.isnan(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=3e-16, atol=0)
    x = np.random.default_rng(5).uniform(0.01, 50.0, 3001)
    a = mx.array(x, dtype=mx.float64)
    want = getattr(np, name)(x)
    for view, ref in ((a, want), (a[::2], want[::2]), (a[::-1], want[::-1])):
        np.testing.assert_allclose(np.array(f(view, stream=mx.cpu)), ref, rtol=3e-16)


# --- block forms: fused range checks, pieces, tails ---------------------------

def _pieces_of(f, a, n, step):
    return np.concatenate([np.array(f(a[i:i + step])) for i in range(0, n, step)])


@pytest.mark.loom_only
@pytest.mark.parametrize("name", ["sin", "cos", "tan", "tanh"])
def test_block_forms_agree_with_elementwise_pieces(name):
    # The block forms decide per piece (1024 elements for sin/cos/tan, 256 for
    # tanh) whether to run the short form: sin/cos/tan check the range inside
    # the loop and redo a piece's huge/inf/NaN elements (unless the output is
    # the input, which is checked first), tanh skips its pre-pass after a
    # piece that needed the full formula. Whatever the path, every element
    # must get the bits it gets alone. Runs of small arguments alternate with
    # runs holding a few large/huge ones, at odd offsets and lengths.
    r = np.random.default_rng(11)
    n = 50_003
    x = r.uniform(-0.8, 0.8, n).astype(np.float32)
    for start in range(0, n, 2900):
        if (start // 2900) % 2:
            idx = start + r.choice(min(2900, n - start), 5, replace=False)
            x[idx] = r.uniform(-30.0, 30.0, 5)
            if name != "tanh":
                x[idx[0]] = np.float32(3e20)
                x[idx[1]] = np.inf
            x[idx[2]] = np.nan
    f = getattr(mx, name)
    # The CPU kernels' block forms, every op on the CPU (a GPU's sinf has bounds
    # of its own, and its arithmetic rewrites NaN payloads).
    with mx.stream(mx.cpu):
        want = np.array([np.array(f(mx.array(x[i:i + 1])))[0] for i in range(0, n, 97)])
        a = mx.array(x)
        for got in (np.array(f(a)), np.array(f(a * 1.0)), _pieces_of(f, a, n, 1000 + 3)):
            np.testing.assert_array_equal(got[::97].view(np.uint32), want.view(np.uint32))
        np.testing.assert_array_equal(np.array(f(a)).view(np.uint32),
                                      np.array(f(a * 1.0)).view(np.uint32))
        fin = np.isfinite(x) & (np.abs(x) < 1e4)
        ref = reference(getattr(np, name), x[fin])
        assert ulp_errors(np.array(f(a))[fin], ref).max() <= (2.0 if name == "tanh" else 1.0)


@pytest.mark.loom_only
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_cos_near_multiples_of_half_pi(name):
    # The floats nearest to k pi/2 (k up to 2^20), where the reduced argument
    # is smallest and the sign of the result (sin: parity of k; cos: of k + 1)
    # is decided by the reduction: within 1 ulp of float64.
    k = np.arange(1, 1 << 20, 7, dtype=np.float64)
    c = (k * np.pi / 2).astype(np.float32)
    x = np.concatenate([c, np.nextafter(c, np.float32(np.inf)), np.nextafter(c, np.float32(0)), -c])
    got = np.array(getattr(mx, name)(mx.array(x), stream=mx.cpu))
    err = ulp_errors(got, reference(getattr(np, name), x))
    assert err.max() <= 1.0
