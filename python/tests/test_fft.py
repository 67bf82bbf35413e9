"""mx.fft and hadamard_transform against NumPy/SciPy: every length class
(powers of two, mixed radix, primes, large primes through Bluestein), axes,
sizes, norms, dtypes, views, round trips, Parseval, the short-time
transforms, errors, gradients (finite differences, vjp/jvp/vmap) and leaks.
On Loom every numeric test runs on both FFT engines (FFTW when it loads, and
Loom's own mixed-radix + Bluestein)."""

import ctypes.util
import gc

import numpy as np
import pytest

from _backend import IS_LOOM, IS_MLX, mx

ENGINES = ["auto", "native"] if IS_LOOM else ["default"]


@pytest.fixture(params=ENGINES)
def engine(request):
    if IS_LOOM:
        mx.fft._set_backend(request.param)
        yield request.param
        mx.fft._set_backend("auto")
    else:
        yield request.param


def rng(seed=0):
    return np.random.default_rng(seed)


def crand(shape, seed=0):
    g = rng(seed)
    return (g.standard_normal(shape) + 1j * g.standard_normal(shape)).astype(np.complex64)


def rrand(shape, seed=0):
    return rng(seed).standard_normal(shape).astype(np.float32)


def close(actual, expected, rtol=2e-4):
    """Float32 FFT accuracy: errors scale with the largest magnitude."""
    got = np.array(actual)
    expected = np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    scale = max(1.0, float(np.abs(expected).max()) if expected.size else 1.0)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * scale)


LENGTHS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 25, 31, 32, 37, 49, 64, 97, 100, 127, 128,
           210, 243, 256, 509, 1000, 1021, 1024, 2026, 4103]
LARGE = [2**16, 3**9, 10007, 65537, 2**20 + 7]


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("op", ["fft", "ifft"])
def test_complex_1d_all_lengths(engine, op, n):
    x = crand((3, n), seed=n)
    close(getattr(mx.fft, op)(mx.array(x)), getattr(np.fft, op)(x.astype(np.complex128)))


@pytest.mark.parametrize("n", LENGTHS)
def test_real_1d_all_lengths(engine, n):
    x = rrand((2, n), seed=n)
    out = mx.fft.rfft(mx.array(x))
    assert out.dtype == mx.complex64
    close(out, np.fft.rfft(x.astype(np.float64)))
    # irfft of odd and even output lengths from the same half spectrum
    spec = crand((2, n // 2 + 1), seed=n + 1)
    for m in {n, 2 * (spec.shape[-1] - 1), 2 * spec.shape[-1] - 1}:
        if m <= 0:
            continue
        got = mx.fft.irfft(mx.array(spec), n=m)
        assert got.dtype == mx.float32
        close(got, np.fft.irfft(spec.astype(np.complex128), n=m))


@pytest.mark.parametrize("n", LARGE)
def test_large_lengths(engine, n):
    x = crand((n,), seed=1)
    close(mx.fft.fft(mx.array(x)), np.fft.fft(x.astype(np.complex128)), rtol=5e-4)
    r = rrand((n,), seed=2)
    close(mx.fft.rfft(mx.array(r)), np.fft.rfft(r.astype(np.float64)), rtol=5e-4)
    close(mx.fft.irfft(mx.fft.rfft(mx.array(r)), n=n), r, rtol=5e-4)


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("op", ["fft", "ifft", "rfft", "irfft"])
def test_norms(engine, op, norm):
    x = crand((4, 10)) if op in ("fft", "ifft", "irfft") else rrand((4, 10))
    close(getattr(mx.fft, op)(mx.array(x), norm=norm), getattr(np.fft, op)(x, norm=norm))


@pytest.mark.parametrize("op", ["fft", "ifft", "rfft", "irfft"])
@pytest.mark.parametrize("n", [3, 8, 13, 40])
@pytest.mark.parametrize("axis", [0, 1, -1, -3])
def test_sizes_and_axes(engine, op, n, axis):
    x = crand((6, 5, 7)) if op != "rfft" else rrand((6, 5, 7))
    close(getattr(mx.fft, op)(mx.array(x), n=n, axis=axis), getattr(np.fft, op)(x, n=n, axis=axis))
    close(getattr(mx.fft, op)(mx.array(x), axis=axis), getattr(np.fft, op)(x, axis=axis))


@pytest.mark.parametrize("op", ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn"])
@pytest.mark.parametrize(
    "s,axes",
    [(None, None), (None, [0, 2]), (None, [-1, 0]), ((4, 6), [0, 1]), ((5, 3, 8), [2, 0, 1]),
     ((7,), [1]), (None, [1])],
)
def test_multi_axis(engine, op, s, axes):
    x = crand((6, 5, 7)) if not op.startswith("rfft") else rrand((6, 5, 7))
    if op.endswith("2") and axes is not None and len(axes) != 2:
        axes = [axes[0], (axes[0] + 1) % 3]
        s = None if s is None else (s[0], 4)
    kwargs = {} if axes is None and op.endswith("2") else {"axes": axes}
    if s is not None:
        kwargs["s"] = s
    close(getattr(mx.fft, op)(mx.array(x), **kwargs), getattr(np.fft, op)(x, **kwargs))


REAL_INPUT_CASES = (
    [(op, {"axis": a}) for op in ("fft", "ifft") for a in (0, 1, -1)]
    + [(op, {"axes": a}) for op in ("fft2", "ifft2") for a in ([0, 2], [2, 0], [-2, -1], [1, 0])]
    + [(op, {"axes": a}) for op in ("fftn", "ifftn") for a in (None, [0], [1], [0, 2], [0, 1, 2])]
)


@pytest.mark.parametrize("op,kwargs", REAL_INPUT_CASES, ids=str)
@pytest.mark.parametrize("shape", [(6, 5, 7), (4, 8, 1), (3, 2, 16)])
def test_complex_transforms_of_real_input(engine, op, kwargs, shape):
    # Real inputs of the complex transforms over every axis layout and
    # odd/even inner lengths.
    x = rrand(shape, seed=len(shape))
    got = getattr(mx.fft, op)(mx.array(x), **kwargs)
    assert got.dtype == mx.complex64
    close(got, getattr(np.fft, op)(x.astype(np.float64), **kwargs))


@pytest.mark.parametrize("shape,kwargs", [
    ((64, 96), {}), ((17, 33), {}), ((2, 31, 64), {"axes": [0, 2]}), ((5, 6, 7, 8), {}),
    ((12, 20), {"s": [9, 30]}), ((3, 16, 10), {"axes": [1, 2], "s": [20, 7]}),
])
def test_real_input_fft2_fftn_half_spectrum_path(engine, shape, kwargs):
    # The kernel transforms half the bins of a real input and mirrors the
    # rest; padding, cropping and odd/even lengths on every transformed axis.
    x = rrand(shape, seed=9)
    op = "fftn" if len(shape) > 2 and "axes" not in kwargs else "fft2"
    if op == "fft2" and len(shape) > 2 and "axes" not in kwargs:
        kwargs = {**kwargs, "axes": [-2, -1]}
    close(getattr(mx.fft, op)(mx.array(x), **kwargs), getattr(np.fft, op)(x.astype(np.float64), **kwargs))
    t = rrand(shape, seed=10)
    (_, (tan,)) = mx.jvp(lambda v: mx.fft.fft2(v, axes=[0, -1]), [mx.array(x)], [mx.array(t)])
    close(tan, np.fft.fft2(t.astype(np.float64), axes=[0, -1]))


def test_fft2_4d_and_views(engine):
    x = crand((3, 4, 6, 10))
    close(mx.fft.fft2(mx.array(x)), np.fft.fft2(x))
    # a transposed (non-contiguous) input
    xt = mx.array(x).transpose(2, 0, 3, 1)
    close(mx.fft.fftn(xt, axes=[0, 2]), np.fft.fftn(x.transpose(2, 0, 3, 1), axes=[0, 2]))
    r = rrand((8, 12))
    close(mx.fft.rfft(mx.array(r)[:, ::2]), np.fft.rfft(r[:, ::2]))
    close(mx.fft.irfft2(mx.array(x[0]).T), np.fft.irfft2(x[0].T))


def test_dtypes(engine):
    ints = np.arange(6, dtype=np.int32)
    out = mx.fft.fft(mx.array(ints))
    assert out.dtype == mx.complex64
    close(out, np.fft.fft(ints))
    assert mx.fft.rfft(mx.array(ints)).dtype == mx.complex64
    f64 = mx.array(np.linspace(0, 1, 9), dtype=mx.float64)
    assert mx.fft.fft(f64).dtype == mx.complex64
    assert mx.fft.rfft(f64).dtype == mx.complex64
    assert mx.fft.irfft(f64).dtype == mx.float32
    half = mx.array(np.linspace(0, 1, 8).astype(np.float16))
    close(mx.fft.fft(half), np.fft.fft(np.linspace(0, 1, 8).astype(np.float16).astype(np.float64)),
          rtol=1e-3)
    bf = mx.array(np.arange(8, dtype=np.float32)).astype(mx.bfloat16)
    close(mx.fft.rfft(bf), np.fft.rfft(np.arange(8)))
    b = mx.array([True, False, True])
    close(mx.fft.fft(b), np.fft.fft([1.0, 0.0, 1.0]))
    # rfft of a complex input transforms its real part
    c = crand((5,))
    close(mx.fft.rfft(mx.array(c)), np.fft.rfft(c.real))


def test_empty_axes_and_batches(engine):
    x = mx.ones((2, 3))
    out = mx.fft.fftn(x, axes=[])
    assert out.shape == (2, 3) and out.dtype == mx.float32
    empty = mx.fft.fft(mx.zeros((0, 4)), axis=1)
    assert empty.shape == (0, 4) and empty.dtype == mx.complex64
    assert mx.fft.rfft(mx.zeros((3, 0, 8))).shape == (3, 0, 5)


def test_round_trips_and_parseval(engine):
    for n in [16, 17, 30, 101, 1024, 10007]:
        x = crand((2, n), seed=n)
        X = mx.fft.fft(mx.array(x))
        close(mx.fft.ifft(X), x)
        # Parseval: sum |x|^2 = sum |X|^2 / n
        lhs = float(np.sum(np.abs(x) ** 2))
        rhs = float(mx.sum(mx.abs(X) ** 2).item()) / n
        assert abs(lhs - rhs) <= 1e-4 * lhs
        ortho = mx.fft.fft(mx.array(x), norm="ortho")
        assert abs(float(mx.sum(mx.abs(ortho) ** 2).item()) - lhs) <= 1e-4 * lhs
        r = rrand((3, n), seed=n)
        close(mx.fft.irfft(mx.fft.rfft(mx.array(r)), n=n), r)
    y = crand((6, 9, 4))
    close(mx.fft.ifftn(mx.fft.fftn(mx.array(y))), y)
    ry = rrand((6, 9, 5))
    close(mx.fft.irfftn(mx.fft.rfftn(mx.array(ry)), s=(6, 9, 5), axes=[0, 1, 2]), ry)


# --- frequencies and shifts -------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 5, 8, 33])
@pytest.mark.parametrize("d", [1.0, 0.5, 3.0])
def test_freqs(n, d):
    a = mx.fft.fftfreq(n, d)
    assert a.dtype == mx.float32
    np.testing.assert_allclose(np.array(a), np.fft.fftfreq(n, d), rtol=1e-6, atol=1e-7)
    b = mx.fft.rfftfreq(n, d=d)
    assert b.dtype == mx.float32
    np.testing.assert_allclose(np.array(b), np.fft.rfftfreq(n, d), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("axes", [None, 0, 1, [0, 2], (-1,), [2, 0, 1]])
def test_shifts(axes):
    x = np.arange(5 * 6 * 7).reshape(5, 6, 7).astype(np.int32)
    got = mx.fft.fftshift(mx.array(x), axes=axes)
    assert got.dtype == mx.int32
    np.testing.assert_array_equal(np.array(got), np.fft.fftshift(x, axes=axes))
    np.testing.assert_array_equal(
        np.array(mx.fft.ifftshift(mx.array(x), axes)), np.fft.ifftshift(x, axes=axes)
    )
    back = mx.fft.ifftshift(mx.fft.fftshift(mx.array(x), axes=axes), axes=axes)
    np.testing.assert_array_equal(np.array(back), x)


def test_shift_scalar():
    assert mx.fft.fftshift(mx.array(1.0)).shape == ()


# --- stft / istft -------------------------------------------------------------


def ref_stft(x, n_fft, hop=None, win=None, window=None, center=True, pad_mode="reflect",
             norm="backward", onesided=None):
    hop = hop or n_fft // 4
    w = np.ones(win or n_fft) if window is None else window
    left = (n_fft - len(w)) // 2
    wf = np.zeros(n_fft)
    wf[left:left + len(w)] = w
    if center:
        x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(n_fft // 2, n_fft // 2)], mode=pad_mode)
    frames = 1 + (x.shape[-1] - n_fft) // hop
    fr = np.stack([x[..., i * hop:i * hop + n_fft] * wf for i in range(frames)], -2)
    if onesided is None:
        onesided = not np.iscomplexobj(x)
    spec = (np.fft.rfft if onesided else np.fft.fft)(fr, axis=-1, norm=norm)
    return np.swapaxes(spec, -1, -2)


STFT_CASES = [
    dict(n_fft=16),
    dict(n_fft=16, hop_length=5, win_length=10),
    dict(n_fft=15, center=False),
    dict(n_fft=16, pad_mode="constant", norm="ortho"),
    dict(n_fft=16, pad_mode="edge", onesided=False),
    dict(n_fft=32, hop_length=8, window="hann"),
]


def _np_kwargs(kw):
    out = dict(kw)
    if "hop_length" in out:
        out["hop"] = out.pop("hop_length")
    if "win_length" in out:
        out["win"] = out.pop("win_length")
    return out


@pytest.mark.parametrize("kw", STFT_CASES, ids=str)
def test_stft_matches_reference(engine, kw):
    x = rrand((2, 100))
    kw = dict(kw)
    np_kw = _np_kwargs(kw)
    if kw.get("window") == "hann":
        w = np.hanning(kw["n_fft"]).astype(np.float32)
        kw["window"] = mx.array(w)
        np_kw["window"] = w
    got = mx.fft.stft(mx.array(x), **kw)
    assert got.dtype == mx.complex64
    close(got, ref_stft(x.astype(np.float64), **np_kw))


def test_stft_complex_input(engine):
    x = crand((50,))
    close(mx.fft.stft(mx.array(x), n_fft=8), ref_stft(x.astype(np.complex128), 8))


@pytest.mark.parametrize(
    "kw",
    [dict(n_fft=16), dict(n_fft=16, hop_length=4, window="hann"), dict(n_fft=16, center=False),
     dict(n_fft=15, hop_length=3, window="hann"), dict(n_fft=16, norm="ortho"),
     dict(n_fft=16, hop_length=5, win_length=10, window="hann10")],
    ids=str,
)
def test_istft_inverts_stft(engine, kw):
    x = rrand((2, 100))
    kw = dict(kw)
    if kw.get("window") == "hann":
        kw["window"] = mx.array(np.hanning(kw["n_fft"] + 2)[1:-1].astype(np.float32))
    elif kw.get("window") == "hann10":
        kw["window"] = mx.array(np.hanning(12)[1:-1].astype(np.float32))
        kw.pop("win_length")
    S = mx.fft.stft(mx.array(x), **kw)
    y = mx.fft.istft(S, **kw)
    assert y.dtype == mx.float32
    if kw.get("center", True):
        assert y.shape == x.shape
        close(y, x, rtol=1e-4)
    for length in (90, 120):
        z = mx.fft.istft(S, length=length, **kw)
        assert z.shape == (2, length)
    two = mx.fft.istft(mx.fft.stft(mx.array(x), n_fft=16, onesided=False), onesided=False)
    close(two, x, rtol=1e-4)


# --- errors --------------------------------------------------------------------


def test_errors():
    x = mx.ones((2, 3, 4))
    with pytest.raises(ValueError):
        mx.fft.fft(x, norm="bad")
    with pytest.raises(ValueError):
        mx.fft.fft(x, n=0)
    with pytest.raises(ValueError):
        mx.fft.rfft(x, n=-3)
    with pytest.raises(IndexError):
        mx.fft.fft(x, axis=3)
    with pytest.raises(IndexError):
        mx.fft.fft(mx.array(1.0))
    with pytest.raises(IndexError):
        mx.fft.fft2(mx.ones((3,)))
    with pytest.raises(ValueError):
        mx.fft.fftn(x, s=[4])  # s without axes
    with pytest.raises(ValueError):
        mx.fft.fftn(x, s=[4], axes=[0, 1])
    with pytest.raises(ValueError):
        mx.fft.fftn(x, axes=[0, 2, 0])
    with pytest.raises(ValueError):
        mx.fft.fftn(x, axes=[-1, 2])
    with pytest.raises(ValueError):
        mx.fft.irfft(mx.ones((1,)))  # default n = 0
    with pytest.raises(ValueError):
        mx.fft.fft(mx.zeros((0,)))
    with pytest.raises(ValueError):
        mx.fft.fftfreq(0)
    with pytest.raises(ValueError):
        mx.fft.rfftfreq(-1)
    with pytest.raises(ValueError):
        mx.fft.fftfreq(4, 0.0)
    with pytest.raises(IndexError):
        mx.fft.fftshift(x, axes=5)
    with pytest.raises(ValueError):
        mx.fft.stft(mx.ones((100,)), n_fft=0)
    with pytest.raises(ValueError):
        mx.fft.stft(mx.ones((100,)), n_fft=16, hop_length=0)
    with pytest.raises(ValueError):
        mx.fft.stft(mx.ones((100,)), n_fft=16, win_length=20)
    with pytest.raises(ValueError):
        mx.fft.stft(mx.ones((100,)), n_fft=16, window=mx.ones((16, 1)))
    with pytest.raises(ValueError):
        mx.fft.stft(mx.ones((100,)), n_fft=200, center=False)
    with pytest.raises(ValueError):
        mx.fft.stft(mx.ones((100,)), n_fft=16, pad_mode="wrap")
    with pytest.raises(ValueError):
        mx.fft.stft(mx.array(1.0), n_fft=16)
    S = mx.fft.stft(mx.ones((100,)), n_fft=16)
    with pytest.raises(ValueError):
        mx.fft.istft(S[0])
    with pytest.raises(ValueError):
        mx.fft.istft(S, n_fft=0)
    with pytest.raises(ValueError):
        mx.fft.istft(S, win_length=40)


@pytest.mark.loom_only
def test_error_messages_name_the_op():
    x = mx.ones((2, 3))
    with pytest.raises(ValueError, match=r"\[rfft\] Invalid norm"):
        mx.fft.rfft(x, norm="x")
    with pytest.raises(ValueError, match=r"\[fftn\] Invalid FFT output size requested \(2,-2\)"):
        mx.fft.fftn(x, s=[2, -2], axes=[0, 1])
    with pytest.raises(IndexError, match=r"\[fftn\] Invalid axis 3 for array with 2 dimensions"):
        mx.fft.fft(x, axis=3)
    with pytest.raises(ValueError, match=r"\[fft2\] `axes` should not be `None`"):
        mx.fft.fft2(x, s=(2, 2), axes=None)


# --- gradients -----------------------------------------------------------------


def fd_grad(f, x, eps=1e-3):
    """Central differences of a scalar function of a float64 NumPy array."""
    g = np.zeros_like(x)
    flat = x.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        hi = f(x)
        flat[i] = old - eps
        lo = f(x)
        flat[i] = old
        g.reshape(-1)[i] = (hi - lo) / (2 * eps)
    return g


def _real_loss(fn, w_re, w_im):
    def loss(x):
        y = fn(x)
        if y.dtype == mx.complex64:
            return mx.sum(mx.real(y) * w_re + mx.imag(y) * w_im)
        return mx.sum(y * w_re)
    return loss


REAL_INPUT_FNS = {
    "fft": lambda x: mx.fft.fft(x),
    "ifft_ortho": lambda x: mx.fft.ifft(x, norm="ortho"),
    "rfft": lambda x: mx.fft.rfft(x),
    "rfft_n": lambda x: mx.fft.rfft(x, n=9),
    "rfft_forward": lambda x: mx.fft.rfft(x, norm="forward"),
    "rfft2": lambda x: mx.fft.rfft2(x),
    "fftn": lambda x: mx.fft.fftn(x, s=(3, 5), axes=[0, 1]),
    "irfft_of_real": lambda x: mx.fft.irfft(x),
    "stft": lambda x: mx.fft.stft(x, n_fft=4, hop_length=2),
}


@pytest.mark.parametrize("name", sorted(REAL_INPUT_FNS))
def test_grad_real_input_fd(engine, name):
    fn = REAL_INPUT_FNS[name]
    shape = (10,) if name == "stft" else (4, 6)
    x = rrand(shape, seed=3).astype(np.float64)
    out_shape = fn(mx.array(x.astype(np.float32))).shape
    w_re = rrand(out_shape, seed=4)
    w_im = rrand(out_shape, seed=5)
    loss = _real_loss(fn, mx.array(w_re), mx.array(w_im))
    g = mx.grad(loss)(mx.array(x.astype(np.float32)))
    num = fd_grad(lambda v: float(loss(mx.array(v.astype(np.float32))).item()), x.copy())
    np.testing.assert_allclose(np.array(g), num, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("n", [None, 7, 8])
def test_grad_irfft_fd(engine, n):
    a = rrand((3, 5), seed=6).astype(np.float64)
    b = rrand((3, 5), seed=7).astype(np.float64)
    m = n or 8
    w = mx.array(rrand((3, m), seed=8))

    def loss(re, im):
        return mx.sum(mx.fft.irfft(re + 1j * im, n=n) * w)

    ga, gb = mx.grad(loss, argnums=(0, 1))(mx.array(a.astype(np.float32)), mx.array(b.astype(np.float32)))
    na = fd_grad(lambda v: float(loss(mx.array(v.astype(np.float32)), mx.array(b.astype(np.float32))).item()), a.copy())
    nb = fd_grad(lambda v: float(loss(mx.array(a.astype(np.float32)), mx.array(v.astype(np.float32))).item()), b.copy())
    np.testing.assert_allclose(np.array(ga), na, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(np.array(gb), nb, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("op", ["fft", "ifft"])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_vjp_complex_is_adjoint(engine, op, norm):
    # The vjp of a linear map is its conjugate transpose applied to the cotangent.
    x = crand((5, 6), seed=1)
    ct = crand((5, 6), seed=2)
    fn = lambda v: getattr(mx.fft, op)(v, norm=norm)
    (_, (g,)) = mx.vjp(fn, [mx.array(x)], [mx.array(ct)])
    expected = np.conj(getattr(np.fft, op)(np.conj(ct), norm=norm))
    close(g, expected)


def test_vjp_rfft_irfft_match_adjoints(engine):
    ct = crand((4,), seed=3)
    (_, (g,)) = mx.vjp(mx.fft.rfft, [mx.array(rrand((6,)))], [mx.array(ct)])
    close(g, np.real(np.fft.ifft(np.concatenate([ct, np.zeros(2)])) * 6))
    ct2 = rrand((6,), seed=4)
    (_, (g2,)) = mx.vjp(mx.fft.irfft, [mx.array(crand((4,)))], [mx.array(ct2)])
    expected = np.fft.rfft(ct2) / 6
    expected[1:-1] *= 2
    close(g2, expected)


def test_jvp_and_vmap(engine):
    x = crand((4, 8), seed=1)
    t = crand((4, 8), seed=2)
    (_, (tan,)) = mx.jvp(lambda v: mx.fft.fft2(v), [mx.array(x)], [mx.array(t)])
    close(tan, np.fft.fft2(t))
    r = rrand((4, 8), seed=3)
    tr = rrand((4, 8), seed=4)
    (_, (tan2,)) = mx.jvp(lambda v: mx.fft.rfft(v, norm="ortho"), [mx.array(r)], [mx.array(tr)])
    close(tan2, np.fft.rfft(tr, norm="ortho"))
    batched = crand((3, 4, 8), seed=5)
    close(mx.vmap(lambda v: mx.fft.fft(v, axis=0))(mx.array(batched)), np.fft.fft(batched, axis=1))
    close(mx.vmap(lambda v: mx.fft.fft2(v), in_axes=2)(mx.array(batched)),
          np.fft.fft2(np.moveaxis(batched, 2, 0)))
    rb = rrand((5, 6, 3), seed=6)
    close(mx.vmap(lambda v: mx.fft.rfft(v), in_axes=2)(mx.array(rb)),
          np.fft.rfft(np.moveaxis(rb, 2, 0)))
    hb = crand((5, 6, 4), seed=7)
    close(mx.vmap(lambda v: mx.fft.irfft(v, n=7), in_axes=1, out_axes=1)(mx.array(hb)),
          np.moveaxis(np.fft.irfft(np.moveaxis(hb, 1, 0), n=7), 0, 1))


def test_compiled_fft(engine):
    x = crand((8, 8))
    f = mx.compile(lambda v: mx.abs(mx.fft.fft2(v)) + mx.abs(mx.fft.fft2(v)))
    close(f(mx.array(x)), 2 * np.abs(np.fft.fft2(x)))


# --- Hadamard ------------------------------------------------------------------

# MLX's transforms of the identity for orders 12, 20, 28 (entries > 0 as bits,
# row-major, np.packbits): MLX 0.32.4's reference values.
MLX_TABLES = {
    12: "bff2aaec3896fb0a25cec989c3b962f0ea58",
    20: "83cc945c7426e2a177050f992842c642163212b110b58085acca610e510872884394429c821b65f05f2e8a"
        "bb64d1fa26cfc1",
    28: "80796b3403eb59211d5ec118eab609c751b05e1acd02f2d66c30262de08135670409ab38224d51c1326a0e"
        "099358604cdaa4ce0615365070a9b083854d841c2a6c20e95341074b980c39948f404ca47a0275239092ab"
        "188c857884652bc023295e01",
}


def sylvester(n):
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def hadamard_matrix(n):
    return np.array(mx.hadamard_transform(mx.eye(n), scale=1.0)).astype(np.float64)


@pytest.mark.parametrize("n", [1, 2, 4, 8, 64, 1024])
def test_hadamard_powers_of_two(n):
    x = rrand((3, n), seed=n)
    got = mx.hadamard_transform(mx.array(x))
    assert got.dtype == mx.float32
    close(got, x @ sylvester(n) / np.sqrt(n), rtol=1e-5)
    close(mx.hadamard_transform(mx.array(x), 0.5), x @ sylvester(n) * 0.5, rtol=1e-5)


@pytest.mark.parametrize("m", [12, 20, 28])
@pytest.mark.parametrize("k", [0, 1, 3])
def test_hadamard_m_orders(m, k):
    n = m * 2**k
    T = hadamard_matrix(n)
    np.testing.assert_allclose(T @ T.T, n * np.eye(n))
    if k == 0:
        assert np.packbits((T > 0).reshape(-1)).tobytes().hex() == MLX_TABLES[m]
    np.testing.assert_allclose(T, np.kron(hadamard_matrix(m), sylvester(2**k)))
    x = rrand((2, n), seed=n)
    close(mx.hadamard_transform(mx.array(x)), x @ T / np.sqrt(n), rtol=1e-5)


def test_hadamard_dtypes_and_shapes():
    x = np.arange(8, dtype=np.float32)
    h = mx.hadamard_transform(mx.array(x).astype(mx.float16))
    assert h.dtype == mx.float16
    close(h.astype(mx.float32), (x @ sylvester(8) / np.sqrt(8)).astype(np.float16), rtol=1e-3)
    assert mx.hadamard_transform(mx.array(x).astype(mx.bfloat16)).dtype == mx.bfloat16
    assert mx.hadamard_transform(mx.array(np.arange(8, dtype=np.int32))).dtype == mx.float32
    assert mx.hadamard_transform(mx.array(1.0)).shape == ()
    big = rrand((2, 3, 16))
    close(mx.hadamard_transform(mx.array(big)), big @ sylvester(16) / 4, rtol=1e-5)
    with pytest.raises(ValueError):
        mx.eval(mx.hadamard_transform(mx.ones((3,))))  # MLX raises at evaluation
    with pytest.raises(ValueError):
        mx.eval(mx.hadamard_transform(mx.ones((44,))))  # MLX raises at evaluation
    with pytest.raises(ValueError):
        mx.eval(mx.hadamard_transform(mx.ones((8,), dtype=mx.float64)))  # MLX raises at evaluation
    with pytest.raises(ValueError):
        mx.eval(mx.hadamard_transform(mx.zeros((0,))))  # MLX raises at evaluation


@pytest.mark.loom_only
def test_hadamard_rejects_orders_mlx_mishandles():
    # MLX 0.32.4 returns a non-orthogonal result for n = 36 and corrupts
    # memory for n = 60; Loom refuses every n that is not m * 2^k.
    for n in (36, 60, 72, 84):
        with pytest.raises(ValueError, match=r"\[hadamard\] Only supports"):
            mx.hadamard_transform(mx.ones((n,)))


@pytest.mark.parametrize("n", [8, 12])
def test_hadamard_grad(n):
    x = rrand((n,), seed=1).astype(np.float64)
    w = mx.array(rrand((n,), seed=2))
    loss = lambda v: mx.sum(mx.hadamard_transform(v, 0.7) * w)
    g = mx.grad(loss)(mx.array(x.astype(np.float32)))
    num = fd_grad(lambda v: float(loss(mx.array(v.astype(np.float32))).item()), x.copy())
    np.testing.assert_allclose(np.array(g), num, rtol=1e-2, atol=1e-2)
    (_, (t,)) = mx.jvp(lambda v: mx.hadamard_transform(v), [mx.array(x.astype(np.float32))],
                       [mx.array(np.ones(n, np.float32))])
    close(t, np.ones(n) @ hadamard_matrix(n) / np.sqrt(n), rtol=1e-5)
    b = rrand((n, 3), seed=3)
    close(mx.vmap(mx.hadamard_transform, in_axes=1)(mx.array(b)),
          b.T @ hadamard_matrix(n) / np.sqrt(n), rtol=1e-5)


@pytest.mark.loom_only
@pytest.mark.parametrize("n", [20, 28, 40])
def test_hadamard_grad_non_symmetric_orders(n):
    # T_20 and T_28 are not symmetric: the gradient is x -> x @ T^T (MLX
    # 0.32.4 applies T, a wrong gradient; Loom's is checked here).
    x = rrand((n,), seed=1).astype(np.float64)
    w = mx.array(rrand((n,), seed=2))
    loss = lambda v: mx.sum(mx.hadamard_transform(v) * w)
    g = mx.grad(loss)(mx.array(x.astype(np.float32)))
    num = fd_grad(lambda v: float(loss(mx.array(v.astype(np.float32))).item()), x.copy())
    np.testing.assert_allclose(np.array(g), num, rtol=1e-2, atol=1e-2)


# --- engines and memory (Loom only) ------------------------------------------


@pytest.mark.loom_only
def test_engines_agree_and_fftw_is_used_when_installed():
    has_fftw = ctypes.util.find_library("fftw3f") is not None
    mx.fft._set_backend("auto")
    try:
        assert mx.fft._backend() == ("fftw" if has_fftw else "native")
        x = crand((4, 3 * 5 * 7 * 11 + 2), seed=9)
        fast = np.array(mx.fft.fft(mx.array(x)))
        mx.fft._set_backend("native")
        assert mx.fft._backend() == "native"
        own = np.array(mx.fft.fft(mx.array(x)))
        np.testing.assert_allclose(own, fast, rtol=1e-4, atol=1e-3)
        with pytest.raises(ValueError, match="Unknown FFT backend"):
            mx.fft._set_backend("pocketfft")
    finally:
        mx.fft._set_backend("auto")


@pytest.mark.loom_only
def test_native_engine_env_switch():
    from _helpers import run_python

    code = (
        "import numpy as np\n"
        "from _backend import mx\n"
        "assert mx.fft._backend() == 'native', mx.fft._backend()\n"
        "x = np.random.default_rng(0).standard_normal(1009).astype(np.float32)\n"
        "np.testing.assert_allclose(np.array(mx.fft.rfft(mx.array(x))), np.fft.rfft(x), rtol=1e-3, atol=1e-3)\n"
    )
    result = run_python(code, env={"LOOM_FFT": "native"})
    assert result.returncode == 0, result.stderr


@pytest.mark.loom_only
def test_fft_graphs_do_not_leak():
    x = mx.array(crand((64, 64)))
    r = mx.array(rrand((4, 100)))

    def cycle():
        y = mx.fft.ifft2(mx.fft.fft2(x) * 2)
        g = mx.grad(lambda v: mx.sum(mx.abs(mx.fft.rfft(v)) ** 2))(r)
        s = mx.fft.istft(mx.fft.stft(r, n_fft=16), length=100)
        h = mx.hadamard_transform(r[:, :64])
        mx.eval(y, g, s, h)

    for _ in range(3):
        cycle()
    gc.collect()
    mx.synchronize()
    base = mx.get_active_memory()
    for _ in range(20):
        cycle()
        gc.collect()
        mx.synchronize()
        assert mx.get_active_memory() == base


@pytest.mark.parametrize("n", [1021, 2026])
def test_large_prime_factor_along_columns(engine, n):
    # Lengths with a large prime factor run Bluestein (on FFTW's transforms
    # when it is loaded), also along an inner axis and for the 2-D forms.
    x = crand((n, 5), seed=n)
    close(mx.fft.fft(mx.array(x), axis=0), np.fft.fft(x.astype(np.complex128), axis=0))
    r = rrand((n, 6), seed=n + 1)
    close(mx.fft.rfft2(mx.array(r)), np.fft.rfft2(r.astype(np.float64)))
    close(mx.fft.fft2(mx.array(r)), np.fft.fft2(r.astype(np.float64)))
