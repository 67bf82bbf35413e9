"""The CUDA backend, session 10 review: bfloat16 rounding on the device (the
packed hardware conversion) bit for bit against the CPU and the integer
form, in eager kernels and fused regions, NaN payloads included; the device
pool's cache report after clear_cache() while live arrays hold part of a pool
chunk; timed GEMM candidates giving the same products as untimed ones.

GPU tests skip with the reason printed where no GPU is present (this machine
and CI); scripts/gpu.sh runs them on the device machine.
"""

import gc
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


def _bf16_bits_reference(f32):
    """float32 -> bfloat16 bits: round to nearest even; a NaN keeps its sign
    and top payload bits, made quiet (the CPU's rule)."""
    u = f32.view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    return np.where(nan, (u >> 16) | 0x40, rounded).astype(np.uint16)


def _patterns(n, seed):
    """float32 bit patterns: random ones, ties at every exponent, subnormals,
    the largest finite values (rounding up to inf), infinities and NaNs with
    payloads of both signs."""
    rng = np.random.default_rng(seed)
    u = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    exps = np.arange(256, dtype=np.uint32) << 23
    ties = np.concatenate([exps | 0x8000, exps | 0x18000, exps | 0x7FFF, exps | 0x8001])
    special = np.array([0, 0x80000000, 1, 0x8001, 0x7FFF, 0x807FFFFF, 0x7F7FFFFF, 0x7F7F8000,
                        0x7F7F7FFF, 0xFF7F8000, 0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00000,
                        0x7FFFFFFF, 0xFFC00001, 0x7F8A0000, 0xFFA5A5A5], dtype=np.uint32)
    bits = np.concatenate([u, ties, ties | 0x80000000, special])
    return bits.view(np.float32)


def test_bfloat16_cast_rounds_as_the_cpu_bit_for_bit():
    x = _patterns(1 << 20, 0)
    a = mx.array(x)
    with mx.stream(mx.gpu):
        g = a.astype(mx.bfloat16).view(mx.uint16)
    with mx.stream(mx.cpu):
        c = a.astype(mx.bfloat16).view(mx.uint16)
    want = _bf16_bits_reference(x)
    np.testing.assert_array_equal(np.array(c), want)
    np.testing.assert_array_equal(np.array(g), want)


def _bf16_from_bits(bits):
    return mx.array(bits.astype(np.uint16)).view(mx.bfloat16)


def test_fused_bfloat16_region_matches_eager_bit_for_bit():
    # Every intermediate rounds to bfloat16 inside a fused kernel as an eager
    # kernel's store does: the same bits, NaN payloads that pass through a
    # select or a negation included.
    rng = np.random.default_rng(1)
    n = (1 << 16) + 3
    a_bits = rng.integers(0, 1 << 16, size=n).astype(np.uint16)
    b_bits = rng.integers(0, 1 << 16, size=n).astype(np.uint16)
    # plenty of ordinary values too (random bits are mostly huge or tiny)
    a_bits[::2] = np.array(rng.standard_normal(n)[::2], dtype=np.float32).view(np.uint32) >> 16
    b_bits[1::2] = np.array(rng.standard_normal(n)[1::2], dtype=np.float32).view(np.uint32) >> 16
    a, b = _bf16_from_bits(a_bits), _bf16_from_bits(b_bits)

    def f(x, y):
        s = x * y + x
        t = mx.where(x > y, x, -y) * 0.75
        u = mx.sqrt(mx.abs(x)) / (y + 1e-3)
        return s, t, u, -mx.where(x < y, x, y)

    with mx.stream(mx.gpu):
        eager = f(a, b)
        fused = mx.compile(f)(a, b)
        mx.eval(eager, fused)
    for e, u in zip(eager, fused):
        np.testing.assert_array_equal(np.array(u.view(mx.uint16)), np.array(e.view(mx.uint16)))


def test_adam_update_fused_matches_unfused_bit_for_bit():
    # The optimizer's compiled AdamW update against the same ops uncompiled,
    # in bfloat16 on the GPU.
    import loom.optimizers as optim

    rng = np.random.default_rng(2)
    shape = (257, 129)
    p0 = rng.standard_normal(shape).astype(np.float32)
    grads = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]

    def run(disable):
        with mx.stream(mx.gpu):
            opt = optim.AdamW(learning_rate=1e-2, bias_correction=True)
            params = {"w": mx.array(p0).astype(mx.bfloat16)}
            opt.init(params)
            for g in grads:
                gb = {"w": mx.array(g).astype(mx.bfloat16)}
                if disable:
                    mx.disable_compile()
                try:
                    params = opt.apply_gradients(gb, params)
                finally:
                    if disable:
                        mx.enable_compile()
                mx.eval(params, opt.state)
            return np.array(params["w"].view(mx.uint16))

    np.testing.assert_array_equal(run(False), run(True))


def test_cache_reads_zero_after_clear_cache_while_arrays_hold_part_of_a_chunk(restore_limits):
    gc.collect()
    mx.synchronize()
    with mx.stream(mx.gpu):
        # 128 KiB: past the small-block cache, from the pool's chunk
        keep = mx.random.normal((128, 256))
        mx.eval(keep)
        mx.clear_cache()
        assert mx.get_cache_memory() == 0
        x = mx.random.normal((256, 1024))
        mx.eval(x)
        del x
        gc.collect()
        assert mx.get_cache_memory() >= 256 * 1024 * 4
        mx.clear_cache()
        assert mx.get_cache_memory() == 0
        # the live array is intact, and new work reuses the pool as before
        y = keep * 2
        mx.eval(y)
        np.testing.assert_allclose(np.array(y), np.array(keep) * 2)
        assert mx.get_cache_memory() <= 32 << 20
    del keep, y


def test_timed_gemm_candidates_give_the_products_of_untimed_ones():
    # A product large enough to time cuBLASLt's candidates, in a fresh
    # process with and without timing: both equal the CPU's to bfloat16
    # accuracy (the algorithms may differ in the last bits).
    code = (
        "import numpy as np, loom.core as mx\n"
        "r = np.random.default_rng(5)\n"
        "a = r.standard_normal((1024, 1024)).astype(np.float32)\n"
        "b = r.standard_normal((1024, 1024)).astype(np.float32)\n"
        "x, y = mx.array(a).astype(mx.bfloat16), mx.array(b).astype(mx.bfloat16)\n"
        "with mx.stream(mx.gpu):\n"
        "    outs = [mx.matmul(x, y) for _ in range(3)]\n"
        "    mx.eval(outs)\n"
        "ref = np.array(x.astype(mx.float32)) @ np.array(y.astype(mx.float32))\n"
        "for o in outs:\n"
        "    err = np.linalg.norm(np.array(o.astype(mx.float32)) - ref) / np.linalg.norm(ref)\n"
        "    assert err < 1e-2, err\n"
        "print('ok')\n"
    )
    for tune in ("1", "0"):
        env = dict(os.environ, LOOM_CUDA_GEMM_TUNE=tune)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0 and "ok" in r.stdout, (tune, r.stdout, r.stderr)
