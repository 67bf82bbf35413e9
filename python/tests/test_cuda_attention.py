"""Attention on GPU streams against the CPU: the tensor-core forward
(float16/bfloat16, head sizes 64 and 128; backend/cuda/attention.cpp) with
every mask kind, sinks, grouped heads, strided views and ragged tiles, and
the gradients (on a GPU stream, the fused tensor-core backward for
float16/bfloat16 with head sizes 64 and 128, elsewhere the composite's,
built from ops with GPU kernels). GPU tests skip where no GPU is present."""

import os
import subprocess
import sys

import numpy as np
import pytest

from _backend import mx

HAS_GPU = mx.is_available(mx.gpu)
pytestmark = pytest.mark.skipif(
    not HAS_GPU, reason="no GPU here: the CUDA backend found no device (run scripts/gpu.sh)"
)

sdpa = mx.fast.scaled_dot_product_attention


def rnd(shape, seed, dtype=mx.float32):
    return mx.array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32)).astype(
        dtype)


def close(g, c, tol):
    mx.eval(g, c)
    np.testing.assert_allclose(np.array(g.astype(mx.float32)), np.array(c.astype(mx.float32)),
                               rtol=tol, atol=tol)


HALF = [(mx.float16, 4e-3), (mx.bfloat16, 3e-2)]


@pytest.mark.parametrize("dtype,tol", HALF)
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("lq,lk", [(1, 300), (64, 64), (130, 77), (40, 200), (200, 131)])
def test_tensor_core_forward_matches_cpu(dtype, tol, D, lq, lk):
    # Ragged query blocks and key tiles, causal with Lq != Lk (rows that see
    # no key weigh all equally), grouped heads, (B, L, H, D) -> (B, H, L, D)
    # views, masks of both kinds, sinks.
    q = mx.swapaxes(rnd((2, lq, 4, D), 1, dtype), 1, 2)
    k = mx.swapaxes(rnd((2, lk, 2, D), 2, dtype), 1, 2)
    v = mx.swapaxes(rnd((2, lk, 2, D), 3, dtype), 1, 2)
    scale = D ** -0.5
    for mask in (None, "causal", rnd((lq, lk), 4) > 0.3, rnd((4, lq, lk), 5, dtype)):
        f = lambda s: sdpa(q, k, v, scale=scale, mask=mask, stream=s)  # noqa: E731
        close(f(mx.gpu), f(mx.cpu), 2 * tol if mask is not None else tol)
    sinks = rnd((4,), 6, dtype)
    for mask in (None, "causal"):
        f = lambda s: sdpa(q, k, v, scale=scale, mask=mask, sinks=sinks, stream=s)  # noqa: E731
        close(f(mx.gpu), f(mx.cpu), tol)


@pytest.mark.parametrize("dtype,tol", HALF)
def test_tensor_core_forward_against_float32(dtype, tol):
    # Several full key tiles and large scores: the online rescaling, against
    # the float32 result of the same rounded inputs.
    q, k, v = (rnd((1, 4, 333, 128), 10 + i, dtype) for i in range(3))
    q = q * 3
    for mask in (None, "causal"):
        g = sdpa(q, k, v, scale=0.1, mask=mask, stream=mx.gpu)
        c = sdpa(*(x.astype(mx.float32) for x in (q, k, v)), scale=0.1, mask=mask, stream=mx.cpu)
        close(g, c, tol)


@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16])
def test_tensor_core_all_masked_rows_and_broadcast_heads(dtype):
    q, k, v = rnd((1, 2, 70, 64), 20, dtype), rnd((1, 1, 90, 64), 21, dtype), rnd((1, 1, 90, 64),
                                                                                  22, dtype)
    mask = mx.zeros((70, 90), dtype=mx.bool_)  # every key masked: equal weights, no NaN
    f = lambda s: sdpa(q, k, v, scale=0.1, mask=mask, stream=s)  # noqa: E731
    g = f(mx.gpu)
    assert not np.isnan(np.array(g.astype(mx.float32))).any()
    close(g, f(mx.cpu), 3e-2)
    # A key/value head broadcast to every query head (stride 0).
    kb = mx.broadcast_to(k, (1, 2, 90, 64))
    f = lambda s: sdpa(q, kb, kb, scale=0.1, mask="causal", stream=s)  # noqa: E731
    close(f(mx.gpu), f(mx.cpu), 3e-2)


@pytest.mark.parametrize("dtype,tol", [(mx.float32, 2e-4), (mx.float16, 2e-2)])
@pytest.mark.parametrize("mask", [None, "causal", "bool", "additive", "sinks"])
def test_gradients_on_gpu_match_cpu(dtype, tol, mask):
    q = rnd((2, 4, 37, 64), 30, dtype)
    k, v = rnd((2, 2, 45, 64), 31, dtype), rnd((2, 2, 45, 64), 32, dtype)
    cot = rnd((2, 4, 37, 64), 33, dtype)
    m = {"bool": rnd((37, 45), 34) > 0, "additive": rnd((4, 37, 45), 35, dtype),
         "causal": "causal"}.get(mask)
    sinks = rnd((4,), 36, dtype) if mask == "sinks" else None

    def grads(s):
        def loss(q, k, v, *rest):
            with mx.stream(s):
                o = sdpa(q, k, v, scale=0.125, mask=m, sinks=rest[0] if rest else None)
                return (o * cot).astype(mx.float32).sum()

        args = (q, k, v) + ((sinks,) if sinks is not None else ())
        return mx.grad(loss, argnums=tuple(range(len(args))))(*args)

    for g, c in zip(grads(mx.gpu), grads(mx.cpu)):
        close(g, c, tol)


def close_rel(g, c, tol):
    # Gradients sum many rounded products: the error against the largest
    # reference entry (a plain rtol fails on entries near 0).
    mx.eval(g, c)
    g, c = np.array(g.astype(mx.float32)), np.array(c.astype(mx.float32))
    assert g.shape == c.shape and not np.isnan(g).any()
    assert np.abs(g - c).max() <= tol * max(np.abs(c).max(), 1e-3), np.abs(g - c).max()


def attention_grads(q, k, v, cot, scale, mask, sinks, stream, dtype):
    def loss(q, k, v, *rest):
        with mx.stream(stream):
            o = sdpa(q, k, v, scale=scale, mask=mask, sinks=rest[0] if rest else None)
            return (o * cot.astype(dtype)).astype(mx.float32).sum()

    args = tuple(x.astype(dtype) for x in (q, k, v))
    if sinks is not None:
        args += (sinks.astype(dtype),)
    return mx.grad(loss, argnums=tuple(range(len(args))))(*args)


@pytest.mark.parametrize("dtype,tol", [(mx.float16, 1e-2), (mx.bfloat16, 3e-2)])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("lq,lk", [(1, 77), (64, 64), (130, 77), (77, 200)])
@pytest.mark.parametrize("mask", [None, "causal", "bool", "additive", "sinks", "causal_sinks"])
def test_fused_backward_matches_cpu_float32(dtype, tol, D, lq, lk, mask):
    # The tensor-core backward (statistics pass, dK/dV per key block, dQ by
    # atomics) against the CPU's gradients of the same rounded inputs in
    # float32: grouped heads (4 query heads on 2), ragged query and key
    # tiles, causal with Lq > Lk (rows that see no key), rows of a boolean
    # mask with every key masked.
    q = rnd((2, 4, lq, D), 40, dtype)
    k, v = rnd((2, 2, lk, D), 41, dtype), rnd((2, 2, lk, D), 42, dtype)
    cot = rnd((2, 4, lq, D), 43, dtype)
    keep = np.random.default_rng(44).random((lq, lk)) > 0.3
    keep[lq // 2] = False
    m = {"bool": mx.array(keep), "additive": rnd((4, lq, lk), 45, dtype), "causal": "causal",
         "causal_sinks": "causal"}.get(mask)
    sinks = rnd((4,), 46, dtype) if mask in ("sinks", "causal_sinks") else None
    scale = D ** -0.5
    g = attention_grads(q, k, v, cot, scale, m, sinks, mx.gpu, dtype)
    cm = m.astype(mx.float32) if isinstance(m, mx.array) and m.dtype != mx.bool_ else m
    c = attention_grads(q, k, v, cot, scale, cm, sinks, mx.cpu, mx.float32)
    for gi, ci in zip(g, c):
        close_rel(gi, ci, tol)


@pytest.mark.parametrize("dtype,tol", [(mx.float16, 1e-2), (mx.bfloat16, 3e-2)])
def test_fused_backward_long_rows_and_strided_cotangent(dtype, tol):
    # Several key blocks and query tiles per block, large scores (the
    # statistics' rescaling), a transposed view as the cotangent.
    q = rnd((1, 2, 333, 128), 50, dtype) * 3
    k, v = rnd((1, 2, 333, 128), 51, dtype), rnd((1, 2, 333, 128), 52, dtype)
    cot = mx.swapaxes(rnd((1, 333, 2, 128), 53, dtype), 1, 2)
    for mask in (None, "causal"):
        g = attention_grads(q, k, v, cot, 0.1, mask, None, mx.gpu, dtype)
        c = attention_grads(q, k, v, cot, 0.1, mask, None, mx.cpu, mx.float32)
        for gi, ci in zip(g, c):
            close_rel(gi, ci, tol)


@pytest.mark.loom_only
def test_composite_backward_matches_cpu():
    # LOOM_CUDA_ATTN_FUSED_VJP=0 swaps the fused backward for the composite
    # (matmuls and a softmax): the gradient tests above again, in a process
    # that takes it.
    env = dict(os.environ, LOOM_CUDA_ATTN_FUSED_VJP="0")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        os.path.abspath(__file__), "-k", "fused_backward and not composite"],
                       env=env, capture_output=True, text=True, timeout=600,
                       cwd=os.path.dirname(os.path.abspath(__file__)))
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_gradient_runs_on_gpu_kernels():
    # Not the CPU fallback: it warns once per primitive when it runs (the
    # fused backward, ScaledDotProductAttentionVJP, included).
    code = (
        "from _backend import mx\n"
        "q = mx.random.normal((2, 4, 32, 64), key=mx.random.key(0)).astype(mx.bfloat16)\n"
        "def loss(q):\n"
        "    with mx.stream(mx.gpu):\n"
        "        o = mx.fast.scaled_dot_product_attention(q, q, q, scale=0.125, mask='causal')\n"
        "        return o.astype(mx.float32).sum()\n"
        "mx.eval(mx.grad(loss)(q))\n"
        "print('ok')\n"
    )
    env = dict(os.environ)
    env.pop("LOOM_CUDA_FALLBACK_WARN", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=os.path.dirname(os.path.abspath(__file__)), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout
    assert "warning: ScaledDotProductAttention" not in r.stderr, r.stderr
