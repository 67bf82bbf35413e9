"""Writes mlx_quantized.npz: inputs and MLX 0.32.4's quantize/dequantize
outputs, for the bit-exactness tests of test_quantized.py.

Run with the MLX wheel (the peers environment):
    /work/peers/bin/python python/tests/data/make_quantized_fixtures.py
Half-precision values are stored as their float32 values (exact)."""

import os

import mlx.core as mx
import numpy as np

DTYPES = {"float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}


def inputs(rng: np.random.Generator) -> np.ndarray:
    # Rows of very different magnitudes and offsets, a zero row, a constant
    # row and one with a single outlier: every branch of the scale choice.
    rows = [rng.standard_normal(256) * s + o for s, o in
            [(1, 0), (1e-3, 0), (1e3, 0), (0.5, 3), (2, -7), (1, 0)]]
    rows.append(np.zeros(256))
    rows.append(np.full(256, 0.3))
    outlier = rng.standard_normal(256) * 0.01
    outlier[::37] = 9.0
    rows.append(outlier)
    return np.stack(rows).astype(np.float32)


def f32(a: mx.array) -> np.ndarray:
    return np.array(a.astype(mx.float32)) if a.dtype != mx.uint8 else np.array(a)


def main() -> None:
    rng = np.random.default_rng(20261130)
    out = {}
    for name, dt in DTYPES.items():
        w = mx.array(inputs(rng)).astype(dt)
        out[f"w_{name}"] = f32(w)
        for gs in (32, 64, 128):
            for bits in (1, 2, 3, 4, 5, 6, 8):
                q, s, b = mx.quantize(w, gs, bits)
                key = f"affine_{name}_{gs}_{bits}"
                out[key + "_q"] = np.array(q)
                out[key + "_s"] = f32(s)
                out[key + "_b"] = f32(b)
                out[key + "_d"] = f32(mx.dequantize(q, s, b, gs, bits))
        for mode in ("mxfp4", "mxfp8", "nvfp4"):
            q, s = mx.quantize(w, mode=mode)
            key = f"{mode}_{name}"
            out[key + "_q"] = np.array(q)
            out[key + "_s"] = np.array(s)
            out[key + "_d"] = f32(mx.dequantize(q, s, mode=mode))
            out[key + "_d32"] = f32(mx.dequantize(q, s, mode=mode, dtype=mx.float32))
    # nvfp4 with a global scale (float32 input: bit-exact; see the tests).
    w = mx.array(out["w_float32"])
    gscale = mx.array(np.float32(np.abs(out["w_float32"][:6]).max()))
    q, s = mx.quantize(w[:6], mode="nvfp4", global_scale=gscale)
    out["nvfp4_global_scale"] = np.array(gscale)
    out["nvfp4_global_q"] = np.array(q)
    out["nvfp4_global_s"] = np.array(s)
    out["nvfp4_global_d32"] = f32(
        mx.dequantize(q, s, mode="nvfp4", global_scale=gscale, dtype=mx.float32)
    )
    # Gradient of quantize's scales and biases (MLX differentiates its composite).
    w = mx.array(out["w_float32"])
    cs = mx.array(rng.standard_normal((w.shape[0], 4)).astype(np.float32))
    cb = mx.array(rng.standard_normal((w.shape[0], 4)).astype(np.float32))
    out["grad_cs"], out["grad_cb"] = np.array(cs), np.array(cb)
    for bits in (1, 4):
        def f(w):
            _, s, b = mx.quantize(w, 64, bits)
            return (s * cs).sum() + (b * cb).sum()
        out[f"grad_quantize_{bits}"] = np.array(mx.grad(f)(w))
    # Ties: values on a quarter grid times a per-row factor land exactly
    # between codes often; nvfp4 with a global scale on every dtype (half
    # inputs divide in their own type first, a rounding that decides ties).
    ties = (rng.integers(-24, 25, (16, 512)) / 4 *
            rng.choice([1, 0.5, 3, 1 / 3, 7, 1e-3], (16, 1))).astype(np.float32)
    for name, dt in DTYPES.items():
        w = mx.array(ties).astype(dt)
        out[f"ties_{name}"] = f32(w)
        for gs in (32, 64, 128):
            for bits in (1, 2, 3, 4, 5, 6, 8):
                q, s, b = mx.quantize(w, gs, bits)
                key = f"ties_affine_{name}_{gs}_{bits}"
                out[key + "_q"], out[key + "_s"], out[key + "_b"] = np.array(q), f32(s), f32(b)
        for mode in ("mxfp4", "mxfp8", "nvfp4"):
            q, s = mx.quantize(w, mode=mode)
            out[f"ties_{mode}_{name}_q"], out[f"ties_{mode}_{name}_s"] = np.array(q), np.array(s)
        for src in ("ties", "w"):
            x = w if src == "ties" else mx.array(out[f"w_{name}"]).astype(dt)
            for i, mul in enumerate((0.37, 1.0, 2.5)):
                g = mx.array(np.float32(np.abs(np.array(x.astype(mx.float32))).max() * mul))
                q, s = mx.quantize(x, mode="nvfp4", global_scale=g)
                key = f"{src}_nvfp4_global{i}_{name}"
                out[key + "_g"], out[key + "_q"], out[key + "_s"] = np.array(g), np.array(q), np.array(s)
                # MLX returns float32 here whatever dtype is asked for.
                out[key + "_d"] = np.array(mx.dequantize(q, s, mode="nvfp4", global_scale=g,
                                                         dtype=dt))
    # Non-finite and huge values in one element of a row (a zero row and a
    # tiny one too): the fp modes' scales and codes around them.
    base = np.linspace(-1, 1, 128).astype(np.float32)
    special = []
    for value in [np.nan, np.inf, -np.inf, 0.0, 1e-40, 6e-8, 65504.0, 3e38, -1e-3]:
        row = base.copy()
        row[5] = value
        special.append(row)
    special += [np.zeros(128, np.float32), np.full(128, 1e-30, np.float32)]
    special = np.stack(special)
    out["special"] = special
    for name, dt in DTYPES.items():
        w = mx.array(special).astype(dt)
        for mode in ("mxfp4", "mxfp8", "nvfp4"):
            q, s = mx.quantize(w, mode=mode)
            out[f"special_{mode}_{name}_q"], out[f"special_{mode}_{name}_s"] = np.array(q), np.array(s)
        q, s = mx.quantize(w, mode="nvfp4", global_scale=mx.array(np.float32(2.0)))
        out[f"special_nvfp4g_{name}_q"], out[f"special_nvfp4g_{name}_s"] = np.array(q), np.array(s)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlx_quantized.npz")
    np.savez_compressed(path, **out)
    print(path, len(out), "arrays")


if __name__ == "__main__":
    main()


def kquant_fixture() -> None:
    """mlx_gguf_kquants.npz: random Q2_K/Q4_K/Q6_K blocks and MLX's float16
    decoding of them (MLX dequantizes these types on load)."""
    import sys
    import tempfile

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from test_quantized_gguf import kquant_blocks, write_gguf

    rng = np.random.default_rng(1)
    out = {}
    tensors = []
    for name, t in [("q2_k", 10), ("q4_k", 12), ("q6_k", 14)]:
        raw = kquant_blocks(t, 3 * 512, rng)
        out[name + "_raw"] = np.frombuffer(raw, np.uint8)
        tensors.append((name, t, [512, 3], raw))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.gguf")
        write_gguf(path, tensors)
        for k, v in mx.load(path).items():
            out[k + "_mlx"] = np.array(v.astype(mx.float32))
    dest = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlx_gguf_kquants.npz")
    np.savez_compressed(dest, **out)
    print(dest)


if __name__ == "__main__" and os.environ.get("KQUANTS"):
    kquant_fixture()
