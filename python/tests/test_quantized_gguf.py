"""GGUF quantized tensors: Q4_0, Q4_1 and Q8_0 load into affine quantization
(group 32) as MLX's loader does (``name``, ``<base>.scales``, ``<base>.biases``
with ``<base>`` the name without ``.weight``); Q2_K, Q4_K and Q6_K are
dequantized to float16, as MLX does, and Loom warns about it.

Files are written here byte by byte (the GGUF v3 layout), so the test needs
no gguf package. data/mlx_gguf_kquants.npz holds MLX's float16 decoding of
random K-quant blocks (made by data/make_quantized_fixtures.py, KQUANTS=1)."""

import os
import struct
import warnings

import numpy as np
import pytest

from _backend import IS_MLX, mx

Q4_0, Q4_1, Q8_0, Q2_K, Q4_K, Q6_K = 2, 3, 8, 10, 12, 14
KBLOCK = {Q2_K: 84, Q4_K: 144, Q6_K: 210}


def write_gguf(path, tensors):
    """tensors: (name, ggml type, dims innermost first, raw bytes)."""
    align = 32
    out = bytearray(b"GGUF") + struct.pack("<IQQ", 3, len(tensors), 0)
    offset, blobs = 0, []
    for name, t, dims, raw in tensors:
        nb = name.encode()
        out += struct.pack("<Q", len(nb)) + nb + struct.pack("<I", len(dims))
        out += struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", t, offset)
        blobs.append((offset, raw))
        offset = (offset + len(raw) + align - 1) // align * align
    out += b"\0" * ((-len(out)) % align)
    data = bytearray(offset)
    for off, raw in blobs:
        data[off : off + len(raw)] = raw
    with open(path, "wb") as f:
        f.write(bytes(out + data))


def q4_blocks(kind, rows, cols, rng):
    """Raw Q4_0/Q4_1 blocks and the values they encode (ggml's definition)."""
    d = rng.uniform(0.01, 0.1, (rows, cols // 32)).astype(np.float16)
    m = rng.uniform(-1, 1, (rows, cols // 32)).astype(np.float16)
    q = rng.integers(0, 16, (rows, cols // 32, 32)).astype(np.uint8)
    qs = (q[..., :16] | (q[..., 16:] << 4)).astype(np.uint8)
    parts = []
    for r in range(rows):
        for g in range(cols // 32):
            head = d[r, g].tobytes() + (m[r, g].tobytes() if kind == Q4_1 else b"")
            parts.append(head + qs[r, g].tobytes())
    qf = q.astype(np.float32)
    if kind == Q4_1:
        val = qf * d[..., None].astype(np.float32) + m[..., None].astype(np.float32)
    else:
        val = (qf - 8) * d[..., None].astype(np.float32)
    return b"".join(parts), val.reshape(rows, cols)


def q8_blocks(rows, cols, rng):
    d = rng.uniform(0.01, 0.1, (rows, cols // 32)).astype(np.float16)
    q = rng.integers(-128, 128, (rows, cols // 32, 32)).astype(np.int8)
    raw = b"".join(d[r, g].tobytes() + q[r, g].tobytes()
                   for r in range(rows) for g in range(cols // 32))
    return raw, (q.astype(np.float32) * d[..., None].astype(np.float32)).reshape(rows, cols)


def kquant_blocks(t, n, rng):
    """Random K-quant blocks for n elements with sane float16 super-scales."""
    nb = KBLOCK[t]
    raw = rng.integers(0, 256, (n // 256, nb), dtype=np.uint8)
    d = rng.uniform(0.001, 0.05, (n // 256, 2)).astype(np.float16).view(np.uint8)
    if t == Q2_K:
        raw[:, 80:84] = d
    elif t == Q4_K:
        raw[:, 0:4] = d
    else:
        raw[:, 208:210] = d[:, :2]
    return raw.tobytes()


def q4_k_reference(raw):
    """ggml's dequantize_row_q4_K: sub-block pairs (low nibbles, high nibbles)
    with their own 6-bit scale and min each."""
    blocks = np.frombuffer(raw, np.uint8).reshape(-1, 144)
    out = []
    for b in blocks:
        d = float(b[0:2].view(np.float16)[0])
        dmin = float(b[2:4].view(np.float16)[0])
        sc, q = b[4:16].astype(int), b[16:]

        def scale_min(j):
            if j < 4:
                return sc[j] & 63, sc[j + 4] & 63
            return (sc[j + 4] & 15) | ((sc[j - 4] >> 6) << 4), (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4)

        y = []
        for chunk in range(4):
            qq = q[32 * chunk : 32 * chunk + 32].astype(np.float32)
            s1, m1 = scale_min(2 * chunk)
            s2, m2 = scale_min(2 * chunk + 1)
            y.append(np.float32(d * s1) * (qq.astype(np.uint8) & 15) - np.float32(dmin * m1))
            y.append(np.float32(d * s2) * (qq.astype(np.uint8) >> 4) - np.float32(dmin * m2))
        out.append(np.concatenate(y))
    return np.concatenate(out)


def test_q4_0_q4_1_q8_0_load_as_affine_quantization(tmp_path):
    rng = np.random.default_rng(0)
    r0, v0 = q4_blocks(Q4_0, 4, 64, rng)
    r1, v1 = q4_blocks(Q4_1, 4, 64, rng)
    r8, v8 = q8_blocks(4, 64, rng)
    rv, vv = q4_blocks(Q4_0, 1, 64, rng)
    path = str(tmp_path / "q.gguf")
    write_gguf(path, [("a.weight", Q4_0, [64, 4], r0), ("b.weight", Q4_1, [64, 4], r1),
                      ("c", Q8_0, [64, 4], r8), ("d.weight", Q4_0, [64], rv)])
    arrays = mx.load(path)
    assert sorted(arrays) == sorted([
        "a.weight", "a.scales", "a.biases", "b.weight", "b.scales", "b.biases",
        "c", "c.scales", "c.biases", "d.weight", "d.scales", "d.biases"])
    assert arrays["a.weight"].shape == (4, 8) and arrays["a.weight"].dtype == mx.uint32
    assert arrays["a.scales"].shape == (4, 2) and arrays["a.scales"].dtype == mx.float16
    assert arrays["c"].shape == (4, 16) and arrays["d.weight"].shape == (8,)
    for base, key, bits, ref in [("a", "a.weight", 4, v0), ("b", "b.weight", 4, v1),
                                 ("c", "c", 8, v8)]:
        got = mx.dequantize(arrays[key], arrays[base + ".scales"], arrays[base + ".biases"],
                            group_size=32, bits=bits, dtype=mx.float32)
        # Biases are float16 (-8 d, m, -128 d): exact for these scales.
        np.testing.assert_allclose(np.array(got), ref, rtol=2e-3, atol=1e-2)
    # The layout is MLX's: a quantized product works on it directly.
    x = mx.array(rng.standard_normal((2, 64)).astype(np.float32))
    y = mx.quantized_matmul(x, arrays["a.weight"], arrays["a.scales"].astype(mx.float32),
                            arrays["a.biases"].astype(mx.float32), group_size=32, bits=4)
    np.testing.assert_allclose(np.array(y), np.array(x) @ v0.T, rtol=1e-2, atol=5e-2)


KFIX = os.path.join(os.path.dirname(__file__), "data", "mlx_gguf_kquants.npz")


@pytest.mark.parametrize("name,t", [("q2_k", Q2_K), ("q6_k", Q6_K)])
def test_k_quants_dequantize_to_float16_like_mlx(tmp_path, name, t):
    fix = np.load(KFIX)
    path = str(tmp_path / "k.gguf")
    write_gguf(path, [(name, t, [512, 3], fix[name + "_raw"].tobytes())])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        arrays = mx.load(path)
    a = arrays[name]
    assert a.dtype == mx.float16 and a.shape == (3, 512)
    np.testing.assert_array_equal(np.array(a.astype(mx.float32)), fix[name + "_mlx"])
    if not IS_MLX:
        assert any("dequantized to float16" in str(w.message) for w in caught)


@pytest.mark.loom_only
def test_q4_k_follows_ggml_not_mlx(tmp_path):
    # MLX's loader scales the high nibbles of each Q4_K sub-block pair with
    # the low nibbles' scale; ggml (which wrote the file) gives each its own.
    fix = np.load(KFIX)
    raw = fix["q4_k_raw"].tobytes()
    path = str(tmp_path / "k.gguf")
    write_gguf(path, [("q4_k", Q4_K, [512, 3], raw)])
    with pytest.warns(UserWarning, match="Q4_K"):
        a = mx.load(path)["q4_k"]
    ref = q4_k_reference(raw).astype(np.float16).astype(np.float32).reshape(3, 512)
    np.testing.assert_allclose(np.array(a.astype(mx.float32)), ref, rtol=1e-3, atol=1e-3)
    assert not np.array_equal(ref, fix["q4_k_mlx"])


def test_quantized_row_length_must_fill_blocks(tmp_path):
    path = str(tmp_path / "bad.gguf")
    write_gguf(path, [("x", Q4_0, [48, 2], bytes(18 * 3))])
    with pytest.raises(Exception):
        mx.load(path)
