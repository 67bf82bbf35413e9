"""mx.fast on GPU streams against the CPU's fused kernels, values and
gradients. rms_norm, layer_norm and rope have GPU kernels (backend/cuda/
fast.cpp; their gradients are composites of ops with GPU kernels) and so has
attention's forward (attention.cpp; its gradient on a GPU stream is the
composite's, test_cuda_attention.py); the other fast ops take the CPU
fallback. GPU tests skip where no GPU is present."""

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


def both(f, rtol=1e-5, atol=1e-5):
    g, c = f(mx.gpu), f(mx.cpu)
    mx.eval(g, c)
    g = [g] if not isinstance(g, (list, tuple)) else g
    c = [c] if not isinstance(c, (list, tuple)) else c
    for x, y in zip(g, c):
        np.testing.assert_allclose(np.array(x.astype(mx.float32)), np.array(y.astype(mx.float32)),
                                   rtol=rtol, atol=atol)


def rnd(shape, seed, dtype=mx.float32):
    return mx.array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32)).astype(
        dtype)


@pytest.mark.parametrize("dtype,tol", [(mx.float32, 1e-5), (mx.float16, 2e-3), (mx.bfloat16, 2e-2)])
def test_norms_on_gpu_match_cpu(dtype, tol):
    x, w, b = rnd((4, 9, 256), 0, dtype), rnd((256,), 1, dtype), rnd((256,), 2, dtype)
    both(lambda s: mx.fast.rms_norm(x, w, 1e-5, stream=s), tol, tol)
    both(lambda s: mx.fast.rms_norm(x, None, 1e-5, stream=s), tol, tol)
    both(lambda s: mx.fast.layer_norm(x, w, b, 1e-5, stream=s), tol, tol)
    both(lambda s: mx.fast.layer_norm(x, None, None, 1e-5, stream=s), tol, tol)


@pytest.mark.parametrize("traditional", [False, True])
def test_rope_on_gpu_matches_cpu(traditional):
    x = rnd((2, 4, 16, 64), 3)
    both(lambda s: mx.fast.rope(x, 64, traditional=traditional, base=10000.0, scale=1.0,
                                offset=3, stream=s))
    both(lambda s: mx.fast.rope(x, 32, traditional=traditional, base=10000.0, scale=0.5,
                                offset=0, stream=s))


@pytest.mark.parametrize("mask", [None, "causal", "array"])
def test_sdpa_on_gpu_matches_cpu(mask):
    q, k, v = rnd((2, 8, 16, 64), 4), rnd((2, 2, 20, 64), 5), rnd((2, 2, 20, 64), 6)
    m = rnd((16, 20), 7) > 0 if mask == "array" else mask
    both(lambda s: mx.fast.scaled_dot_product_attention(q, k, v, scale=0.125, mask=m, stream=s),
         1e-4, 1e-5)


def test_fast_gradients_on_gpu_match_cpu():
    x, w = rnd((3, 5, 128), 8), rnd((128,), 9)

    def loss(x, w, s):
        with mx.stream(s):
            y = mx.fast.rms_norm(x, w, 1e-6)
            y = mx.fast.layer_norm(y, w, None, 1e-6)
            return (y * y).sum()

    both(lambda s: mx.grad(lambda x, w: loss(x, w, s), argnums=(0, 1))(x, w), 1e-4, 1e-4)


@pytest.mark.parametrize("dtype,tol", [(mx.float32, 1e-5), (mx.float16, 2e-3), (mx.bfloat16, 2e-2),
                                       (mx.float64, 1e-12)])
def test_norms_of_long_rows_and_strided_inputs(dtype, tol):
    # Rows longer than a block, a transposed input (copied first), one row.
    x, w, b = rnd((3, 5000), 10, dtype), rnd((5000,), 11, dtype), rnd((5000,), 12, dtype)
    both(lambda s: mx.fast.rms_norm(x, w, 1e-5, stream=s), tol, tol)
    both(lambda s: mx.fast.layer_norm(x * 3 + 1, w, b, 1e-5, stream=s), tol, tol)
    xt = mx.swapaxes(rnd((6, 2, 40), 13, dtype), 0, 2)
    both(lambda s: mx.fast.rms_norm(xt, rnd((6,), 14, dtype), 1e-4, stream=s), tol, tol)
    both(lambda s: mx.fast.layer_norm(xt, None, rnd((6,), 15, dtype), 1e-4, stream=s), tol, tol)
    both(lambda s: mx.fast.layer_norm(rnd((7,), 16, dtype), None, None, 1e-5, stream=s), tol, tol)


@pytest.mark.parametrize("dtype,tol", [(mx.float32, 2e-5), (mx.float16, 2e-3), (mx.bfloat16, 2e-2)])
def test_rope_variants_on_gpu(dtype, tol):
    # A transposed (B, H, T, D) view as attention makes it, features past
    # dims copied, one offset per batch entry, given frequencies, backwards.
    q = mx.swapaxes(rnd((2, 24, 4, 96), 17, dtype), 1, 2)
    both(lambda s: mx.fast.rope(q, 64, traditional=False, base=10000.0, scale=1.0, offset=7,
                                stream=s), tol, tol)
    off = mx.array([0, 5])
    both(lambda s: mx.fast.rope(q, 32, traditional=True, base=500.0, scale=2.0, offset=off,
                                stream=s), tol, tol)
    freqs = mx.exp(mx.arange(16, dtype=mx.float32) * 0.3)
    both(lambda s: mx.fast.rope(q, 32, traditional=False, base=None, scale=1.0, offset=2,
                                freqs=freqs, stream=s), tol, tol)

    def grad_of(s):
        return mx.grad(lambda x: (mx.fast.rope(x, 64, traditional=False, base=10000.0, scale=1.0,
                                               offset=1, stream=s) ** 2).sum())(q)

    both(grad_of, 10 * tol, 10 * tol)


def test_norms_and_rope_run_on_gpu_kernels():
    # Not the CPU fallback: it warns once per primitive when it runs.
    code = (
        "from _backend import mx\n"
        "x = mx.random.normal((4, 8, 64), key=mx.random.key(0))\n"
        "w = mx.ones((64,))\n"
        "with mx.stream(mx.gpu):\n"
        "    outs = [mx.fast.rms_norm(x, w, 1e-5), mx.fast.layer_norm(x, w, w, 1e-5),\n"
        "            mx.fast.rope(x.reshape(4, 1, 8, 64), 64, traditional=False, base=1e4,\n"
        "                         scale=1.0, offset=0),\n"
        "            mx.fast.scaled_dot_product_attention(x.reshape(4, 1, 8, 64), x.reshape(4, 1, 8,\n"
        "                64), x.reshape(4, 1, 8, 64), scale=0.125, mask='causal')]\n"
        "mx.eval(outs)\n"
        "print('ok')\n"
    )
    env = dict(os.environ)
    env.pop("LOOM_CUDA_FALLBACK_WARN", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=os.path.dirname(os.path.abspath(__file__)), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout
    for name in ("RMSNorm", "LayerNorm", "RoPE", "ScaledDotProductAttention"):
        assert f"warning: {name}" not in r.stderr, r.stderr


@pytest.mark.parametrize("dtype,tol", [(mx.float32, 2e-5), (mx.float16, 3e-3), (mx.bfloat16, 2e-2)])
@pytest.mark.parametrize("lq,lk", [(1, 300), (100, 100), (130, 77), (40, 200)])
def test_sdpa_kernel_shapes_masks_and_sinks(dtype, tol, lq, lk):
    # Several key tiles, a query block not full, causal with Lq != Lk (rows
    # that see no key weigh all equally), grouped heads, sinks, masks of
    # both kinds, transposed (B, L, H, D) -> (B, H, L, D) views.
    q = mx.swapaxes(rnd((2, lq, 4, 64), 20, dtype), 1, 2)
    k = mx.swapaxes(rnd((2, lk, 2, 64), 21, dtype), 1, 2)
    v = mx.swapaxes(rnd((2, lk, 2, 32), 22, dtype), 1, 2)
    f = mx.fast.scaled_dot_product_attention
    both(lambda s: f(q, k, v, scale=0.125, stream=s), tol, tol)
    both(lambda s: f(q, k, v, scale=0.125, mask="causal", stream=s), tol, tol)
    bmask = rnd((lq, lk), 23) > 0.3
    both(lambda s: f(q, k, v, scale=0.2, mask=bmask, stream=s), tol, tol)
    amask = rnd((4, lq, lk), 24, dtype)
    both(lambda s: f(q, k, v, scale=0.2, mask=amask, stream=s), 2 * tol, 2 * tol)
    sinks = rnd((4,), 25, dtype)
    both(lambda s: f(q, k, v, scale=0.125, mask="causal", sinks=sinks, stream=s), tol, tol)


def test_sdpa_large_head_and_all_masked_rows():
    q, k, v = rnd((1, 2, 33, 128), 26), rnd((1, 2, 70, 128), 27), rnd((1, 2, 70, 256), 28)
    mask = mx.zeros((33, 70), dtype=mx.bool_)  # every key masked: equal weights, no NaN
    f = mx.fast.scaled_dot_product_attention
    both(lambda s: f(q, k, v, scale=0.1, mask=mask, stream=s), 2e-5, 2e-5)
    both(lambda s: f(q, k, v, scale=0.1, stream=s), 2e-5, 2e-5)
