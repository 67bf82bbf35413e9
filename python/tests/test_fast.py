"""mx.fast: each fused op against a NumPy float64 reference (forward) and
against the gradient of its composite written with ordinary ops (backward);
masks, grouped-query heads, sinks, dtypes, errors and leaks."""

import gc
import os

import numpy as np
import pytest

from _backend import mx

RNG = np.random.default_rng(11)


def randn(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def close(a, b, rtol=2e-5, atol=2e-5):
    np.testing.assert_allclose(np.array(a.astype(mx.float32)), b, rtol=rtol, atol=atol)


# --- references ------------------------------------------------------------------------


def np_rms(x, w, eps):
    x = x.astype(np.float64)
    y = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return y * w if w is not None else y


def np_layer(x, w, b, eps):
    x = x.astype(np.float64)
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


def np_rope(x, dims, traditional, base, scale, offset, freqs=None):
    x = x.astype(np.float64)
    T = x.shape[-2]
    half = dims // 2
    inv = base ** (-np.arange(half) / half) if freqs is None else 1.0 / freqs
    off = np.asarray(offset).reshape(-1)
    pos = (off[:, None] + np.arange(T)[None, :]) * scale  # (1 or B, T)
    theta = pos[..., None] * inv  # (1 or B, T, half)
    theta = theta.reshape((theta.shape[0],) + (1,) * (x.ndim - 3) + theta.shape[1:])
    c, s = np.cos(theta), np.sin(theta)
    out = x.copy()
    if traditional:
        a, b = x[..., 0:dims:2], x[..., 1:dims:2]
        out[..., 0:dims:2] = a * c - b * s
        out[..., 1:dims:2] = a * s + b * c
    else:
        a, b = x[..., :half], x[..., half:dims]
        out[..., :half] = a * c - b * s
        out[..., half:dims] = a * s + b * c
    return out


def np_sdpa(q, k, v, scale, mask=None, sinks=None):
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    r = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, r, 1), np.repeat(v, r, 1)
    s = q @ k.swapaxes(-1, -2) * scale
    if isinstance(mask, str):
        tq, tk = s.shape[-2:]
        s = np.where(np.arange(tk)[None, :] <= np.arange(tq)[:, None] + (tk - tq), s, -np.inf)
    elif mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    if sinks is not None:
        col = np.broadcast_to(np.asarray(sinks, np.float64)[None, :, None, None], s.shape[:-1] + (1,))
        s = np.concatenate([col, s], -1)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    if sinks is not None:
        p = p[..., 1:]
    return p @ v


def mx_sdpa(q, k, v, scale, mask=None, sinks=None):
    """The composite with this module's own ops (reference for gradients)."""
    r = q.shape[1] // k.shape[1]
    if r > 1:
        k, v = mx.repeat(k, r, 1), mx.repeat(v, r, 1)
    s = (q @ k.swapaxes(-1, -2)) * scale
    if isinstance(mask, str):
        tq, tk = s.shape[-2:]
        keep = mx.arange(tk)[None, :] <= mx.arange(tq)[:, None] + (tk - tq)
        s = mx.where(keep, s, mx.array(-np.inf))
    elif mask is not None:
        s = mx.where(mask, s, mx.array(-np.inf)) if mask.dtype == mx.bool_ else s + mask
    if sinks is not None:
        col = mx.broadcast_to(sinks[None, :, None, None], s.shape[:-1] + (1,))
        p = mx.softmax(mx.concatenate([col, s], -1), axis=-1)[..., 1:]
    else:
        p = mx.softmax(s, axis=-1)
    return p @ v


def np_gdn(q, k, v, g, b, state=None, mask=None):
    q, k, v, g, b = (np.asarray(t, np.float64) for t in (q, k, v, g, b))
    B, T, Hk, Dk = q.shape
    Hv, Dv = v.shape[2], v.shape[3]
    q, k = np.repeat(q, Hv // Hk, 2), np.repeat(k, Hv // Hk, 2)
    S = np.zeros((B, Hv, Dv, Dk)) if state is None else np.asarray(state, np.float64)
    ys = []
    for t in range(T):
        old = S
        gt = g[:, t, :, None, None] if g.ndim == 3 else g[:, t, :, None, :]
        S = S * gt
        kv = (S * k[:, t, :, None, :]).sum(-1)
        d = (v[:, t] - kv) * b[:, t, :, None]
        S = S + k[:, t, :, None, :] * d[..., None]
        y = (S * q[:, t, :, None, :]).sum(-1)
        if mask is not None:
            m = np.asarray(mask)[:, t]
            S = np.where(m[:, None, None, None], S, old)
            y = np.where(m[:, None, None], y, 0)
        ys.append(y)
    return np.stack(ys, 1), S


# --- rms_norm / layer_norm -----------------------------------------------------------


@pytest.mark.parametrize("dtype,tol", [("float32", 2e-5), ("float16", 4e-3), ("bfloat16", 3e-2)])
def test_rms_norm_values(dtype, tol):
    x, w = randn(4, 5, 64), randn(64)
    d = getattr(mx, dtype)
    got = mx.fast.rms_norm(mx.array(x).astype(d), mx.array(w).astype(d), 1e-5)
    assert got.dtype == d
    close(got, np_rms(x, w, 1e-5), rtol=tol, atol=tol)
    close(mx.fast.rms_norm(mx.array(x), None, 1e-5), np_rms(x, None, 1e-5))
    # non-contiguous input, promoted weight
    got = mx.fast.rms_norm(mx.array(x).swapaxes(0, 1), mx.array(w).astype(mx.float16), 1e-5)
    assert got.dtype == mx.float32
    close(got, np_rms(x.swapaxes(0, 1), w.astype(np.float16), 1e-5), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype,tol", [("float32", 2e-5), ("float16", 4e-3), ("bfloat16", 3e-2)])
def test_layer_norm_values(dtype, tol):
    x, w, b = randn(4, 5, 48) + 3, randn(48), randn(48)
    d = getattr(mx, dtype)
    got = mx.fast.layer_norm(mx.array(x).astype(d), mx.array(w).astype(d), mx.array(b).astype(d), 1e-5)
    close(got, np_layer(x, w, b, 1e-5), rtol=tol, atol=tol * 4)
    close(mx.fast.layer_norm(mx.array(x), None, None, 1e-5), np_layer(x, None, None, 1e-5), 1e-4, 1e-4)
    close(mx.fast.layer_norm(mx.array(x), None, mx.array(b), 1e-5), np_layer(x, None, b, 1e-5), 1e-4, 1e-4)


def test_norm_gradients_match_composites():
    x, w, b = mx.array(randn(3, 4, 16)), mx.array(randn(16)), mx.array(randn(16))

    def rms_ref(x, w):
        return x * mx.rsqrt(mx.mean(x * x, axis=-1, keepdims=True) + 1e-5) * w

    def ln_ref(x, w, b):
        mu = mx.mean(x, axis=-1, keepdims=True)
        var = mx.var(x, axis=-1, keepdims=True)
        return (x - mu) * mx.rsqrt(var + 1e-5) * w + b

    ct = mx.array(randn(3, 4, 16))
    f = lambda x, w: (mx.fast.rms_norm(x, w, 1e-5) * ct).sum()
    g = lambda x, w: (rms_ref(x, w) * ct).sum()
    for a, e in zip(mx.grad(f, argnums=(0, 1))(x, w), mx.grad(g, argnums=(0, 1))(x, w)):
        close(a, np.array(e), 1e-4, 1e-4)
    f = lambda x, w, b: (mx.fast.layer_norm(x, w, b, 1e-5) * ct).sum()
    g = lambda x, w, b: (ln_ref(x, w, b) * ct).sum()
    for a, e in zip(mx.grad(f, argnums=(0, 1, 2))(x, w, b), mx.grad(g, argnums=(0, 1, 2))(x, w, b)):
        close(a, np.array(e), 1e-4, 1e-4)
    # forward mode and vmap
    t = mx.array(randn(3, 4, 16))
    _, jf = mx.jvp(lambda x: mx.fast.rms_norm(x, w, 1e-5), [x], [t])
    _, jg = mx.jvp(lambda x: rms_ref(x, w), [x], [t])
    close(jf[0], np.array(jg[0]), 1e-4, 1e-4)
    got = mx.vmap(lambda x: mx.fast.layer_norm(x, w, b, 1e-5), in_axes=1)(x)
    close(got, np.array(ln_ref(x.moveaxis(1, 0), w, b)), 1e-4, 1e-4)


def test_norm_errors():
    x = mx.ones((2, 3, 8))
    with pytest.raises(ValueError, match=r"\[rms_norm\] \(\*weight\) must have the same size"):
        mx.fast.rms_norm(x, mx.ones(7), 1e-5)
    with pytest.raises(ValueError, match=r"\[rms_norm\] \(\*weight\) must have 1 dimension"):
        mx.fast.rms_norm(x, mx.ones((1, 8)), 1e-5)
    with pytest.raises(ValueError, match=r"\[rms_norm\] Received unsupported type int32"):
        mx.fast.rms_norm(x.astype(mx.int32), None, 1e-5)
    with pytest.raises(ValueError, match=r"\[layer_norm\] bias must have the same size"):
        mx.fast.layer_norm(x, None, mx.ones(7), 1e-5)


# --- rope ----------------------------------------------------------------------------


@pytest.mark.parametrize("traditional", [False, True])
@pytest.mark.parametrize("dims", [8, 6])
@pytest.mark.parametrize("offset", [0, 5, "array"])
def test_rope_values(traditional, dims, offset):
    x = randn(2, 3, 7, 8)
    off = mx.array([1, 4]) if offset == "array" else offset
    ref_off = np.array([1, 4]) if offset == "array" else offset
    got = mx.fast.rope(mx.array(x), dims, traditional=traditional, base=10000.0, scale=0.5, offset=off)
    close(got, np_rope(x, dims, traditional, 10000.0, 0.5, ref_off), 1e-4, 1e-4)


def test_rope_freqs_dtypes_and_gradient():
    x = randn(2, 5, 8)
    freqs = np.array([1.0, 2.0, 10.0, 100.0], np.float32)
    got = mx.fast.rope(mx.array(x), 8, traditional=False, base=None, scale=1.0, offset=mx.array(3), freqs=mx.array(freqs))
    close(got, np_rope(x, 8, False, None, 1.0, 3, freqs), 1e-4, 1e-4)
    h = mx.fast.rope(mx.array(x).astype(mx.float16), 8, traditional=True, base=10.0, scale=1.0, offset=2)
    assert h.dtype == mx.float16
    close(h, np_rope(x, 8, True, 10.0, 1.0, 2), 4e-3, 4e-3)
    ct = mx.array(randn(2, 5, 8))
    f = lambda a: (mx.fast.rope(a, 8, traditional=False, base=10.0, scale=1.0, offset=2) * ct).sum()
    g = mx.grad(f)(mx.array(x))
    # the rotation is orthogonal: the gradient is the inverse rotation of ct
    back = np_rope(np.array(ct), 8, False, 10.0, -1.0, 2)
    close(g, back, 1e-4, 1e-4)


def test_rope_errors():
    x = mx.ones((2, 3, 8))
    kw = dict(traditional=False, scale=1.0, offset=0)
    with pytest.raises(ValueError, match=r"\[rope\] Only one of base or freqs"):
        mx.fast.rope(x, 8, base=10.0, freqs=mx.ones(4), **kw)
    with pytest.raises(ValueError, match=r"\[rope\] Neither base nor freqs"):
        mx.fast.rope(x, 8, base=None, **kw)
    with pytest.raises(ValueError, match=r"\[rope\] dims must be even but got 7"):
        mx.fast.rope(x, 7, base=1.0, **kw)
    with pytest.raises(ValueError, match=r"\[rope\] Input must have at least 3 dimensions"):
        mx.fast.rope(mx.ones((8,)), 8, base=1.0, **kw)
    with pytest.raises(ValueError, match=r"\[rope\] offset must be an integer"):
        mx.fast.rope(x, 8, base=1.0, traditional=False, scale=1.0, offset=mx.array(1.5))


# --- attention -----------------------------------------------------------------------

B, NQ, NKV, TQ, TK, D = 2, 4, 2, 5, 7, 8
MASKS = ["none", "causal", "bool", "additive"]


def make_mask(kind):
    if kind == "none":
        return None, None
    if kind == "causal":
        return "causal", "causal"
    if kind == "bool":
        m = RNG.random((TQ, TK)) > 0.3
        m[:, 0] = True  # no row fully masked
        return mx.array(m), m
    m = randn(B, 1, TQ, TK)
    return mx.array(m), m


@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize("sinks", [False, True])
def test_sdpa_values(kind, sinks):
    q, k, v = randn(B, NQ, TQ, D), randn(B, NKV, TK, D), randn(B, NKV, TK, D)
    s = randn(NQ) if sinks else None
    mask, ref_mask = make_mask(kind)
    got = mx.fast.scaled_dot_product_attention(
        mx.array(q), mx.array(k), mx.array(v), scale=0.35, mask=mask,
        sinks=mx.array(s) if sinks else None)
    close(got, np_sdpa(q, k, v, 0.35, ref_mask, s), 1e-5, 1e-5)


@pytest.mark.parametrize("kind", MASKS)
def test_sdpa_gradients_match_composite(kind):
    q, k, v = mx.array(randn(B, NQ, TQ, D)), mx.array(randn(B, NKV, TK, D)), mx.array(randn(B, NKV, TK, D))
    s = mx.array(randn(NQ))
    mask, _ = make_mask(kind)
    ct = mx.array(randn(B, NQ, TQ, D))
    f = lambda q, k, v, s: (mx.fast.scaled_dot_product_attention(q, k, v, scale=0.35, mask=mask, sinks=s) * ct).sum()
    g = lambda q, k, v, s: (mx_sdpa(q, k, v, 0.35, mask, s) * ct).sum()
    got = mx.grad(f, argnums=(0, 1, 2, 3))(q, k, v, s)
    expected = mx.grad(g, argnums=(0, 1, 2, 3))(q, k, v, s)
    for a, e in zip(got, expected):
        close(a, np.array(e), 1e-4, 1e-4)


def test_sdpa_half_precision_and_long_rows():
    q, k, v = randn(1, 2, 64, 16), randn(1, 2, 300, 16), randn(1, 2, 300, 16)
    got = mx.fast.scaled_dot_product_attention(
        mx.array(q).astype(mx.float16), mx.array(k).astype(mx.float16), mx.array(v).astype(mx.float16),
        scale=0.25, mask="causal")
    assert got.dtype == mx.float16
    close(got, np_sdpa(q, k, v, 0.25, "causal"), 5e-3, 5e-3)
    out = mx.fast.scaled_dot_product_attention(mx.array(q), mx.array(k), mx.array(v)[..., :4], scale=0.25)
    assert out.shape == (1, 2, 64, 4)


def test_sdpa_errors():
    q, k, v = mx.ones((B, NQ, TQ, D)), mx.ones((B, NKV, TK, D)), mx.ones((B, NKV, TK, D))
    f = mx.fast.scaled_dot_product_attention
    with pytest.raises(ValueError, match=r"invalid mask option 'foo'"):
        f(q, k, v, scale=1.0, mask="foo")
    with pytest.raises(ValueError, match=r"n_heads must be a multiple of n_kv_heads"):
        f(q[:, :3], k, v, scale=1.0)
    with pytest.raises(ValueError, match=r"query, keys expected to have matching last dimension"):
        f(q, k[..., :4], v, scale=1.0)
    with pytest.raises(ValueError, match=r"expected to be rank 4"):
        f(q[0], k[0], v[0], scale=1.0)
    with pytest.raises(ValueError, match=r"Mask type must promote to output type float16"):
        f(q.astype(mx.float16), k.astype(mx.float16), v.astype(mx.float16), scale=1.0, mask=mx.ones((TQ, TK)))
    with pytest.raises(ValueError, match=r"Received invalid shape for sinks"):
        f(q, k, v, scale=1.0, sinks=mx.ones((3,)))
    with pytest.raises(ValueError, match=r"expected to have at most rank 4"):
        f(q, k, v, scale=1.0, mask=mx.ones((1, 1, 1, TQ, TK)))


# --- cross entropy ---------------------------------------------------------------------


def test_cross_entropy_values_and_gradient():
    logits, t = randn(3, 4, 10), RNG.integers(0, 10, (3, 4)).astype(np.int32)
    l64 = logits.astype(np.float64)
    m = l64.max(-1, keepdims=True)
    lse = (np.log(np.exp(l64 - m).sum(-1, keepdims=True)) + m)[..., 0]
    ref = lse - np.take_along_axis(l64, t[..., None], -1)[..., 0]
    got = mx.fast.cross_entropy(mx.array(logits), mx.array(t))
    assert got.dtype == mx.float32
    close(got, ref, 1e-5, 1e-5)
    assert mx.fast.cross_entropy(mx.array(logits).astype(mx.bfloat16), mx.array(t)).dtype == mx.float32
    ct = mx.array(randn(3, 4))
    f = lambda x: (mx.fast.cross_entropy(x, mx.array(t)) * ct).sum()
    g = lambda x: ((mx.logsumexp(x, axis=-1) - mx.take_along_axis(x, mx.array(t)[..., None], -1)[..., 0]) * ct).sum()
    close(mx.grad(f)(mx.array(logits)), np.array(mx.grad(g)(mx.array(logits))), 1e-5, 1e-5)
    with pytest.raises(ValueError, match=r"\[cross_entropy\] targets shape \(2,4\) does not match"):
        mx.fast.cross_entropy(mx.ones((2, 3, 8)), mx.zeros((2, 4), dtype=mx.int32))
    with pytest.raises(ValueError, match=r"\[cross_entropy\] targets must be integer class indices"):
        mx.fast.cross_entropy(mx.ones((2, 3, 8)), mx.zeros((2, 3)))


# --- gated delta -----------------------------------------------------------------------


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("gate_per_key", [False, True])
def test_gated_delta_update(with_state, with_mask, gate_per_key):
    Bz, T, Hk, Hv, Dk, Dv = 2, 6, 2, 4, 8, 5
    q, k, v = randn(Bz, T, Hk, Dk), randn(Bz, T, Hk, Dk, scale=0.3), randn(Bz, T, Hv, Dv)
    g = RNG.uniform(0.5, 1.0, (Bz, T, Hv) + ((Dk,) if gate_per_key else ())).astype(np.float32)
    b = RNG.uniform(0, 1, (Bz, T, Hv)).astype(np.float32)
    s0 = randn(Bz, Hv, Dv, Dk) if with_state else None
    m = RNG.random((Bz, T)) > 0.3 if with_mask else None
    y, s = mx.fast.gated_delta_update(
        mx.array(q), mx.array(k), mx.array(v), mx.array(g), mx.array(b),
        mx.array(s0) if with_state else None, mx.array(m) if with_mask else None)
    ry, rs = np_gdn(q, k, v, g, b, s0, m)
    assert s.dtype == mx.float32 and y.shape == (Bz, T, Hv, Dv) and s.shape == (Bz, Hv, Dv, Dk)
    close(y, ry, 1e-4, 1e-4)
    close(s, rs, 1e-4, 1e-4)


def test_gated_delta_gradient_and_dtype():
    Bz, T, H, Dk, Dv = 1, 4, 2, 4, 3
    q, k, v = mx.array(randn(Bz, T, H, Dk)), mx.array(randn(Bz, T, H, Dk, scale=0.3)), mx.array(randn(Bz, T, H, Dv))
    g = mx.array(RNG.uniform(0.5, 1.0, (Bz, T, H)).astype(np.float32))
    b = mx.array(RNG.uniform(0, 1, (Bz, T, H)).astype(np.float32))

    def ref(q):
        S = mx.zeros((Bz, H, Dv, Dk))
        ys = []
        for t in range(T):
            S = S * g[:, t, :, None, None]
            kt = k[:, t, :, None, :]
            d = (v[:, t] - (S * kt).sum(-1)) * b[:, t, :, None]
            S = S + kt * d[..., None]
            ys.append((S * q[:, t, :, None, :]).sum(-1))
        return mx.stack(ys, 1).sum()

    got = mx.grad(lambda q: mx.fast.gated_delta_update(q, k, v, g, b)[0].sum())(q)
    close(got, np.array(mx.grad(ref)(q)), 1e-4, 1e-4)
    y, s = mx.fast.gated_delta_update(q.astype(mx.bfloat16), k.astype(mx.bfloat16), v.astype(mx.bfloat16),
                                      g.astype(mx.bfloat16), b.astype(mx.bfloat16))
    assert y.dtype == mx.bfloat16 and s.dtype == mx.float32


def mx_gdn(q, k, v, g, b, state, mask):
    """The delta rule step by step with ordinary ops (the composite)."""
    Hk, Hv = q.shape[2], v.shape[2]
    q, k = mx.repeat(q, Hv // Hk, 2), mx.repeat(k, Hv // Hk, 2)
    S = state
    ys = []
    for t in range(q.shape[1]):
        old = S
        gt = g[:, t, :, None, None] if g.ndim == 3 else g[:, t, :, None, :]
        S = S * gt
        kt = k[:, t, :, None, :]
        d = (v[:, t] - (S * kt).sum(-1)) * b[:, t, :, None]
        S = S + kt * d[..., None]
        y = (S * q[:, t, :, None, :]).sum(-1)
        if mask is not None:
            m = mask[:, t]
            S = mx.where(m[:, None, None, None], S, old)
            y = mx.where(m[:, None, None], y, mx.zeros_like(y))
        ys.append(y)
    return mx.stack(ys, 1), S


def gdn_case(seed, gate_per_key, with_mask, Hk=2, Hv=4, T=7):
    rng = np.random.default_rng(seed)
    Bz, Dk, Dv = 2, 6, 5
    args = [rng.standard_normal((Bz, T, Hk, Dk)), rng.standard_normal((Bz, T, Hk, Dk)) * 0.3,
            rng.standard_normal((Bz, T, Hv, Dv)),
            rng.uniform(0.5, 1.0, (Bz, T, Hv) + ((Dk,) if gate_per_key else ())),
            rng.uniform(0, 1, (Bz, T, Hv)), rng.standard_normal((Bz, Hv, Dv, Dk))]
    mask = rng.random((Bz, T)) > 0.3 if with_mask else None
    cy = rng.standard_normal((Bz, T, Hv, Dv))
    cs = rng.standard_normal((Bz, Hv, Dv, Dk))
    return [a.astype(np.float32) for a in args], mask, cy.astype(np.float32), cs.astype(np.float32)


@pytest.mark.parametrize("gate_per_key", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("heads", [(2, 4), (3, 3)])
def test_gated_delta_vjp_matches_composite_gradient(gate_per_key, with_mask, heads):
    args, mask, cy, cs = gdn_case(5, gate_per_key, with_mask, *heads)
    m = mx.array(mask) if mask is not None else None
    cy, cs = mx.array(cy), mx.array(cs)

    def loss(fn):
        def f(*a):
            y, S = fn(*a)
            return (y * cy).sum() + (S * cs).sum()
        return f

    fused = loss(lambda *a: mx.fast.gated_delta_update(*a, m))
    ref = loss(lambda *a: mx_gdn(*a, m))
    xs = [mx.array(a) for a in args]
    got = mx.grad(fused, argnums=tuple(range(6)))(*xs)
    want = mx.grad(ref, argnums=tuple(range(6)))(*xs)
    for gi, wi in zip(got, want):
        assert gi.shape == wi.shape and gi.dtype == mx.float32
        close(gi, np.array(wi), 2e-4, 2e-4)


def test_gated_delta_vjp_matches_finite_differences():
    args, mask, cy, cs = gdn_case(6, True, True, 1, 2, 5)

    def np_loss(a):
        y, S = np_gdn(*a, mask)
        return float((y * cy).sum() + (S * cs).sum())

    m, my, ms = mx.array(mask), mx.array(cy), mx.array(cs)

    def f(*a):
        y, S = mx.fast.gated_delta_update(*a, m)
        return (y * my).sum() + (S * ms).sum()

    grads = mx.grad(f, argnums=tuple(range(6)))(*[mx.array(a) for a in args])
    rng = np.random.default_rng(7)
    eps = 1e-4
    for i, gi in enumerate(grads):
        d = rng.standard_normal(args[i].shape)
        plus = [np.asarray(a, np.float64) for a in args]
        minus = [np.asarray(a, np.float64) for a in args]
        plus[i] = plus[i] + eps * d
        minus[i] = minus[i] - eps * d
        fd = (np_loss(plus) - np_loss(minus)) / (2 * eps)
        an = float((np.array(gi, np.float64) * d).sum())
        assert abs(fd - an) <= 1e-3 * max(1.0, abs(fd)), (i, fd, an)


def test_gated_delta_vjp_long_sequence_and_half_precision():
    # T = 40 crosses several recomputation chunks of the backward kernel.
    args, mask, cy, cs = gdn_case(8, False, True, 2, 2, 40)
    m = mx.array(mask)
    for dt, tol in [(mx.float32, 5e-4), (mx.bfloat16, 5e-2)]:
        xs = [mx.array(a).astype(dt) for a in args[:5]] + [mx.array(args[5])]

        def f(fn):
            return lambda *a: (fn(*a)[0].astype(mx.float32) * mx.array(cy)).sum()

        got = mx.grad(f(lambda *a: mx.fast.gated_delta_update(*a, m)), argnums=(0, 1, 4))(*xs)
        want = mx.grad(f(lambda *a: mx_gdn(*[t.astype(mx.float32) for t in a], m)),
                       argnums=(0, 1, 4))(*xs)
        for gi, wi in zip(got, want):
            assert gi.dtype == dt
            close(gi, np.array(wi.astype(mx.float32)), tol, tol)


def test_gated_delta_vjp_under_vmap_and_second_order():
    args, _, cy, _ = gdn_case(9, False, False, 1, 1, 4)
    xs = [mx.array(a) for a in args]

    def f(q, k):
        return (mx.fast.gated_delta_update(q, k, *xs[2:])[0] * mx.array(cy)).sum()

    def r(q, k):
        return (mx_gdn(q, k, *xs[2:], None)[0] * mx.array(cy)).sum()

    qs = mx.stack([xs[0], xs[0] * 0.5, -xs[0]])
    got = mx.vmap(mx.grad(f), in_axes=(0, None))(qs, xs[1])
    for i in range(3):
        close(got[i], np.array(mx.grad(r)(qs[i], xs[1])), 1e-4, 1e-4)
    # d/dk of (d/dq f) . u: the backward's own gradient (through its composite).
    u = mx.array(np.random.default_rng(3).standard_normal(args[0].shape).astype(np.float32))
    h = mx.grad(lambda k: (mx.grad(f)(xs[0], k) * u).sum())(xs[1])
    hr = mx.grad(lambda k: (mx.grad(r)(xs[0], k) * u).sum())(xs[1])
    close(h, np.array(hr), 1e-4, 1e-4)


# --- custom kernels ---------------------------------------------------------------------


def test_custom_kernels_raise_without_their_backends():
    k = mx.fast.metal_kernel(name="a", input_names=["x"], output_names=["y"], source="")
    with pytest.raises(RuntimeError, match=r"\[metal_kernel\] No Metal back-end"):
        k(inputs=[mx.ones(2)], grid=(1, 1, 1), threadgroup=(1, 1, 1), output_shapes=[(2,)],
          output_dtypes=[mx.float32])
    with pytest.raises(RuntimeError, match=r"\[cuda_kernel\] No CUDA back-end"):
        mx.fast.cuda_kernel(name="a", input_names=["x"], output_names=["y"], source="")


@pytest.mark.loom_only
def test_fast_ops_do_not_leak():
    w = mx.array(randn(16))

    def cycle():
        x = mx.array(randn(2, 4, 8, 16))
        f = lambda x: (mx.fast.scaled_dot_product_attention(x, x, x, scale=0.25, mask="causal").sum()
                       + mx.fast.rms_norm(x, w, 1e-5).sum() + mx.fast.layer_norm(x, w, w, 1e-5).sum()
                       + mx.fast.rope(x, 16, traditional=False, base=1e4, scale=1.0, offset=1).sum())
        mx.eval(mx.value_and_grad(f)(x))
        mx.eval(mx.fast.gated_delta_update(x, x, x, x[..., 0], x[..., 0]))
        gd = lambda q: mx.fast.gated_delta_update(q, x * 0.1, x, mx.sigmoid(x[..., 0]), x[..., 1])[0].sum()
        mx.eval(mx.grad(gd)(x), mx.vmap(mx.grad(gd))(x[None]))

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


# --- transforms through the composite: vmap and jvp ------------------------------------


def test_fast_ops_vmap_matches_a_loop():
    xs = mx.array(randn(3, 2, 4, 5, 8))
    ops = {
        "sdpa": lambda a: mx.fast.scaled_dot_product_attention(a, a, a, scale=0.3, mask="causal"),
        "rope": lambda a: mx.fast.rope(a, 8, traditional=False, base=10.0, scale=1.0, offset=1),
        "rms": lambda a: mx.fast.rms_norm(a, None, 1e-5),
        "ce": lambda a: mx.fast.cross_entropy(a, mx.zeros(a.shape[:-1], dtype=mx.int32)),
        "gdn": lambda a: mx.fast.gated_delta_update(a, a * 0.3, a, mx.sigmoid(a[..., 0]), mx.sigmoid(a[..., 1]))[0],
    }
    for name, f in ops.items():
        got = mx.vmap(f)(xs)
        expected = mx.stack([f(xs[i]) for i in range(3)])
        close(got, np.array(expected), 1e-4, 1e-4)


def test_fast_ops_jvp_matches_finite_differences():
    x = mx.array(randn(2, 4, 5, 8))
    t = mx.array(randn(2, 4, 5, 8))
    ops = [
        lambda a: mx.fast.scaled_dot_product_attention(a, a, a, scale=0.3),
        lambda a: mx.fast.rope(a, 8, traditional=True, base=10.0, scale=1.0, offset=1),
        lambda a: mx.fast.layer_norm(a, None, None, 1e-5),
    ]
    h = 1e-3
    for f in ops:
        _, (tangent,) = mx.jvp(f, [x], [t])
        fd = (np.array(f(x + h * t), np.float64) - np.array(f(x - h * t), np.float64)) / (2 * h)
        close(tangent, fd, 2e-2, 2e-2)


def test_sdpa_many_query_blocks():
    # Long key rows make the kernel split the queries into blocks (the last
    # one partial): values and gradients must not depend on the split.
    q, k, v = randn(1, 4, 150, 8), randn(1, 2, 2100, 8), randn(1, 2, 2100, 8)
    s = randn(4)
    got = mx.fast.scaled_dot_product_attention(
        mx.array(q), mx.array(k), mx.array(v), scale=0.3, mask="causal", sinks=mx.array(s))
    close(got, np_sdpa(q, k, v, 0.3, "causal", s), 1e-5, 1e-5)
    ct = mx.array(randn(1, 4, 150, 8))
    f = lambda q, k, v: (mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask="causal") * ct).sum()
    g = lambda q, k, v: (mx_sdpa(q, k, v, 0.3, "causal") * ct).sum()
    args = (mx.array(q), mx.array(k), mx.array(v))
    for a, e in zip(mx.grad(f, argnums=(0, 1, 2))(*args), mx.grad(g, argnums=(0, 1, 2))(*args)):
        close(a, np.array(e), 1e-4, 1e-4)


def test_sdpa_fully_masked_rows_weigh_keys_equally():
    # MLX masks with the lowest finite value: a row with every key masked
    # averages the values (or, with a sink, gives everything to the sink).
    v = mx.arange(8.0).reshape(1, 1, 2, 4)
    q, k = mx.ones((1, 1, 3, 4)), mx.ones((1, 1, 2, 4))
    expected = [[2, 3, 4, 5], [0, 1, 2, 3], [2, 3, 4, 5]]
    got = mx.fast.scaled_dot_product_attention(q, k, v, scale=1.0, mask="causal")
    np.testing.assert_allclose(np.array(got)[0, 0], expected, atol=1e-6)
    m = mx.array([[False, False], [True, False], [True, True]])
    got = mx.fast.scaled_dot_product_attention(q, k, v, scale=1.0, mask=m)
    np.testing.assert_allclose(np.array(got)[0, 0], expected, atol=1e-6)
    got = mx.fast.scaled_dot_product_attention(
        q[:, :, :1] * 3, mx.eye(4)[None, None, :2], v, scale=1.0,
        mask=mx.array([[False, False]]), sinks=mx.array([0.5]))
    np.testing.assert_allclose(np.array(got), np.zeros((1, 1, 1, 4)), atol=1e-6)
    got = mx.fast.scaled_dot_product_attention(q, k[:, :, :0], v[:, :, :0], scale=1.0)
    np.testing.assert_array_equal(np.array(got), np.zeros((1, 1, 3, 4)))


@pytest.mark.parametrize("tq, tk", [(300, 120), (90, 2100)])
def test_sdpa_causal_blocks_skip_hidden_keys(tq, tk):
    # Causal query blocks multiply only the keys their last row can see; with
    # more queries than keys the first rows see none and weigh every key
    # equally. Grouped heads, several blocks, values and all gradients.
    q, k, v = randn(2, 4, tq, 8), randn(2, 2, tk, 8), randn(2, 2, tk, 8)
    ct = mx.array(randn(2, 4, tq, 8))
    args = (mx.array(q), mx.array(k), mx.array(v))

    def reference(q, k, v):  # masked scores at the lowest finite value, as MLX
        k, v = mx.repeat(k, 2, 1), mx.repeat(v, 2, 1)
        s = (q @ k.swapaxes(-1, -2)) * 0.3
        keep = mx.arange(tk)[None, :] <= mx.arange(tq)[:, None] + (tk - tq)
        s = mx.where(keep, s, mx.array(np.finfo(np.float32).min))
        return mx.softmax(s, axis=-1) @ v

    got = mx.fast.scaled_dot_product_attention(*args, scale=0.3, mask="causal")
    close(got, np.array(reference(*args)), 1e-5, 1e-5)
    f = lambda q, k, v: (mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask="causal") * ct).sum()
    g = lambda q, k, v: (reference(q, k, v) * ct).sum()
    for a, e in zip(mx.grad(f, argnums=(0, 1, 2))(*args), mx.grad(g, argnums=(0, 1, 2))(*args)):
        close(a, np.array(e), 1e-4, 1e-4)


def test_sdpa_gradients_without_queries():
    q, k, v = mx.zeros((1, 2, 0, 4)), mx.array(randn(1, 2, 5, 4)), mx.array(randn(1, 2, 5, 4))
    f = lambda q, k, v: mx.fast.scaled_dot_product_attention(q, k, v, scale=0.5).sum()
    dq, dk, dv = mx.grad(f, argnums=(0, 1, 2))(q, k, v)
    assert dq.shape == (1, 2, 0, 4)
    np.testing.assert_array_equal(np.array(dk), np.zeros((1, 2, 5, 4)))
    np.testing.assert_array_equal(np.array(dv), np.zeros((1, 2, 5, 4)))


def test_sdpa_gradients_of_fully_masked_boolean_rows():
    # A row with every key masked weighs them equally; its scores are
    # constants, so nothing flows back to q or k through them.
    q, k, v = (mx.array(randn(1, 2, 4, 8)) for _ in range(3))
    m = RNG.random((4, 4)) > 0.4
    m[1] = False
    m[2, 0] = True
    ct = mx.array(randn(1, 2, 4, 8))

    def reference(q, k, v):
        s = mx.where(mx.array(m), (q @ k.swapaxes(-1, -2)) * 0.5, mx.array(np.finfo(np.float32).min))
        return mx.softmax(s, axis=-1) @ v

    f = lambda q, k, v: (mx.fast.scaled_dot_product_attention(q, k, v, scale=0.5, mask=mx.array(m)) * ct).sum()
    g = lambda q, k, v: (reference(q, k, v) * ct).sum()
    for a, e in zip(mx.grad(f, argnums=(0, 1, 2))(q, k, v), mx.grad(g, argnums=(0, 1, 2))(q, k, v)):
        close(a, np.array(e), 1e-4, 1e-4)


@pytest.mark.parametrize("mask", [None, "causal"])
def test_sdpa_gradients_one_kv_head(mask):
    # A single (batch, kv head) pair, fewer tasks than threads: the backward
    # runs its blocks one after another with each product split over the pool.
    q, k, v = randn(1, 4, 150, 8), randn(1, 1, 2100, 8), randn(1, 1, 2100, 8)
    s = mx.array(randn(4))
    ct = mx.array(randn(1, 4, 150, 8))
    args = (mx.array(q), mx.array(k), mx.array(v), s)
    f = lambda q, k, v, s: (mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask=mask, sinks=s) * ct).sum()
    g = lambda q, k, v, s: (mx_sdpa(q, k, v, 0.3, mask, s) * ct).sum()
    got = mx.grad(f, argnums=(0, 1, 2, 3))(*args)
    expected = mx.grad(g, argnums=(0, 1, 2, 3))(*args)
    for a, e in zip(got, expected):
        close(a, np.array(e), 1e-4, 1e-4)


# Shapes with 16+ query rows per head run Loom's float32 register tiles
# (where the CPU has AVX-512): query rows off the tile heights, keys off
# the 32-key tiles, head sizes off 16 lanes and value heads wider than 64.
# The tiles give each (batch, head) task a thread and step aside when the
# tasks are fewer than the pool's threads: a batch of one per CPU keeps them on.
TILE_BATCH = max(2, int(os.environ.get("LOOM_NUM_THREADS") or os.cpu_count() or 2))
TILE_SHAPES = [
    # (tq, tk, d, dv, nq, nkv)
    (37, 53, 24, 72, 4, 2),
    (130, 130, 64, 64, 2, 2),
    (29, 300, 8, 20, 3, 1),
    (17, 20, 40, 40, 2, 1),
]


@pytest.mark.parametrize("shape", TILE_SHAPES)
@pytest.mark.parametrize("kind", MASKS)
def test_sdpa_tiles_values_and_gradients(shape, kind):
    tq, tk, d, dv, nq, nkv = shape
    b = TILE_BATCH
    q, k, v = randn(b, nq, tq, d), randn(b, nkv, tk, d), randn(b, nkv, tk, dv)
    s = randn(nq)
    if kind == "causal":
        mask, ref_mask = "causal", "causal"
    elif kind == "bool":
        ref_mask = RNG.random((tq, tk)) > 0.3
        ref_mask[:, 0] = True
        mask = mx.array(ref_mask)
    elif kind == "additive":
        ref_mask = randn(b, 1, tq, tk)
        mask = mx.array(ref_mask)
    else:
        mask, ref_mask = None, None
    args = (mx.array(q), mx.array(k), mx.array(v), mx.array(s))
    got = mx.fast.scaled_dot_product_attention(*args[:3], scale=0.3, mask=mask, sinks=args[3])
    close(got, np_sdpa(q, k, v, 0.3, ref_mask, s), 1e-4, 1e-4)
    ct = mx.array(randn(b, nq, tq, dv))
    f = lambda q, k, v, s: (mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask=mask, sinks=s) * ct).sum()
    g = lambda q, k, v, s: (mx_sdpa(q, k, v, 0.3, mask, s) * ct).sum()
    got = mx.grad(f, argnums=(0, 1, 2, 3))(*args)
    expected = mx.grad(g, argnums=(0, 1, 2, 3))(*args)
    for a, e in zip(got, expected):
        close(a, np.array(e), 2e-4, 2e-4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sdpa_tiles_half_precision_gradients(dtype):
    # Half inputs compute in float32 (the tiles) and round once at the end.
    dt = getattr(mx, dtype)
    b = TILE_BATCH
    q, k, v = randn(b, 2, 40, 32), randn(b, 2, 70, 32), randn(b, 2, 70, 32)
    ct = randn(b, 2, 40, 32)
    args = [mx.array(t).astype(dt) for t in (q, k, v)]
    got = mx.fast.scaled_dot_product_attention(*args, scale=0.2, mask="causal")
    assert got.dtype == dt
    tol = 2e-2 if dtype == "bfloat16" else 3e-3
    exact = [np.array(a.astype(mx.float32)) for a in args]
    close(got, np_sdpa(*exact, 0.2, "causal"), tol, tol)
    f = lambda q, k, v: (mx.fast.scaled_dot_product_attention(q, k, v, scale=0.2, mask="causal") * mx.array(ct).astype(dt)).sum()
    g = lambda q, k, v: (mx_sdpa(q, k, v, 0.2, "causal") * mx.array(ct)).sum()
    got = mx.grad(f, argnums=(0, 1, 2))(*args)
    expected = mx.grad(g, argnums=(0, 1, 2))(*[mx.array(t) for t in exact])
    for a, e in zip(got, expected):
        assert a.dtype == dt
        close(a, np.array(e), 8 * tol, 8 * tol)
