"""save / savez / savez_compressed / save_safetensors / load.

Round trips over dtypes x shapes x formats, cross-checks with NumPy's own
readers and writers (so files written by MLX, which follow the same formats,
load bit-identically), MLX's errors, and Loom's extras: malformed files
raise errors naming the file and the format without allocating what they
claim, and saving to a path is atomic.
"""

import io
import json
import os
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _backend import IS_MLX, mx

ALL_DTYPES = [
    "bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32",
    "int64", "float16", "bfloat16", "float32", "float64", "complex64",
]
SHAPES = [(), (0,), (5,), (2, 3), (2, 0, 3), (3, 1, 4)]


def make(dtype, shape, seed=0):
    """An array of `dtype` with distinct values, and its NumPy reference."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bool_":
        ref = rng.integers(0, 2, n).astype(np.bool_)
    elif dtype == "complex64":
        ref = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    elif dtype in ("float16", "float32", "float64", "bfloat16"):
        ref = rng.standard_normal(n).astype(np.float32 if dtype == "bfloat16" else dtype)
    else:
        info = np.iinfo(dtype)
        ref = rng.integers(max(info.min, -1000), min(info.max, 1000), n).astype(dtype)
    ref = ref.reshape(shape)
    if dtype == "bfloat16":
        return mx.array(ref).astype(mx.bfloat16), ref
    return mx.array(ref, dtype=getattr(mx, dtype)), ref


def same(a, b):
    """Equal dtype, shape and bits."""
    assert a.dtype == b.dtype
    assert a.shape == b.shape
    if a.dtype == mx.bfloat16:  # exact: bfloat16 is float32's upper half
        a, b = a.astype(mx.float32), b.astype(mx.float32)
    np.testing.assert_array_equal(np.array(a), np.array(b))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_npy_round_trip(tmp_path, dtype, shape):
    a, _ = make(dtype, shape)
    mx.save(str(tmp_path / "a"), a)
    assert (tmp_path / "a.npy").exists()
    same(mx.load(str(tmp_path / "a.npy")), a)


@pytest.mark.parametrize("dtype", [d for d in ALL_DTYPES if d != "bfloat16"])
def test_npy_read_by_numpy(tmp_path, dtype):
    a, ref = make(dtype, (3, 4))
    mx.save(tmp_path / "a.npy", a)
    got = np.load(tmp_path / "a.npy")
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("dtype", [d for d in ALL_DTYPES if d != "bfloat16"])
def test_npy_written_by_numpy(tmp_path, dtype):
    _, ref = make(dtype, (2, 3, 4), seed=1)
    variants = {"c": ref, "fortran": np.asfortranarray(ref)}
    if dtype != "complex64":  # see test_npy_big_endian_complex64
        variants["bigendian"] = ref.astype(ref.dtype.newbyteorder(">"))
    for name, x in variants.items():
        np.save(tmp_path / f"{name}.npy", x)
        got = mx.load(str(tmp_path / f"{name}.npy"))
        np.testing.assert_array_equal(np.array(got), ref, err_msg=name)


@pytest.mark.loom_only
@pytest.mark.parametrize("version", [(2, 0), (3, 0)])
def test_npy_format_versions_2_and_3(tmp_path, version):
    # MLX reads version 1.0 only; NumPy writes 2.0 for headers over 64 KiB.
    _, ref = make("float32", (3, 4))
    with open(tmp_path / "v.npy", "wb") as f:
        np.lib.format.write_array(f, ref, version=version)
    np.testing.assert_array_equal(np.array(mx.load(str(tmp_path / "v.npy"))), ref)


@pytest.mark.loom_only
def test_npy_big_endian_complex64(tmp_path):
    # Each half of a complex number is swapped on its own (MLX 0.32.4 swaps
    # the 8 bytes whole, exchanging the real and imaginary parts).
    _, ref = make("complex64", (2, 3))
    np.save(tmp_path / "c.npy", ref.astype(">c8"))
    np.testing.assert_array_equal(np.array(mx.load(str(tmp_path / "c.npy"))), ref)


def test_npy_zero_d_and_empty_from_numpy(tmp_path):
    np.save(tmp_path / "s.npy", np.float32(2.5))
    s = mx.load(str(tmp_path / "s.npy"))
    assert s.shape == () and s.item() == 2.5
    np.save(tmp_path / "e.npy", np.zeros((0, 3), np.int16))
    e = mx.load(str(tmp_path / "e.npy"))
    assert e.shape == (0, 3) and e.dtype == mx.int16


def test_save_appends_extension_and_accepts_path(tmp_path):
    a = mx.array([1.0, 2.0])
    mx.save(str(tmp_path / "b.txt"), a)
    assert (tmp_path / "b.txt.npy").exists()
    mx.save(tmp_path / "c", a)
    assert (tmp_path / "c.npy").exists()
    same(mx.load(tmp_path / "c.npy"), a)


def test_saving_evaluates_lazy_and_strided_arrays(tmp_path):
    x = mx.arange(12).reshape(3, 4)
    lazy = (x * 2 + 1).T[::2]
    mx.save(str(tmp_path / "l"), lazy)
    np.testing.assert_array_equal(
        np.load(tmp_path / "l.npy"), (np.arange(12).reshape(3, 4) * 2 + 1).T[::2]
    )
    b = mx.broadcast_to(mx.array([1, 2, 3]), (2, 3))
    mx.save_safetensors(str(tmp_path / "b"), {"b": b})
    same(mx.load(str(tmp_path / "b.safetensors"))["b"], mx.array([[1, 2, 3], [1, 2, 3]]))


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_round_trip_all_dtypes(tmp_path, compressed):
    save = mx.savez_compressed if compressed else mx.savez
    arrays = {f"k{i}.{d}": make(d, (3, 2), seed=i)[0] for i, d in enumerate(ALL_DTYPES)}
    arrays["émpty"] = mx.zeros((0, 4))
    arrays["scalar"] = mx.array(7, dtype=mx.int64)
    save(str(tmp_path / "z"), **arrays)
    got = mx.load(str(tmp_path / "z.npz"))
    assert set(got) == set(arrays)
    for k, v in arrays.items():
        same(got[k], v)


def test_npz_positional_names_and_numpy_interop(tmp_path):
    a, b = mx.array([1.0]), mx.array([2, 3], dtype=mx.int8)
    mx.savez(str(tmp_path / "p"), a, a, b=b)
    with np.load(tmp_path / "p.npz") as z:
        assert sorted(z.files) == ["arr_0", "arr_1", "b"]
        np.testing.assert_array_equal(z["b"], np.array([2, 3], np.int8))
    got = mx.load(str(tmp_path / "p.npz"))
    assert sorted(got) == ["arr_0", "arr_1", "b"]
    with pytest.raises(ValueError, match="Cannot use un-named variables and keyword arr_0"):
        mx.savez(str(tmp_path / "q"), a, arr_0=a)

    np.savez(tmp_path / "n.npz", x=np.arange(5), y=np.ones((2, 2), np.float16))
    np.savez_compressed(tmp_path / "nc.npz", x=np.arange(5.0), ü=np.eye(3, dtype=np.complex64))
    n = mx.load(str(tmp_path / "n.npz"))
    np.testing.assert_array_equal(np.array(n["x"]), np.arange(5))
    assert n["y"].dtype == mx.float16
    nc = mx.load(str(tmp_path / "nc.npz"))
    np.testing.assert_array_equal(np.array(nc["ü"]), np.eye(3, dtype=np.complex64))


# float64 is a safetensors dtype ("F64") that MLX 0.32.4 refuses to write.
@pytest.mark.parametrize(
    "dtype",
    [d if d != "float64" else pytest.param(d, marks=pytest.mark.loom_only) for d in ALL_DTYPES],
)
def test_safetensors_round_trip(tmp_path, dtype):
    a, _ = make(dtype, (2, 3))
    e, _ = make(dtype, (0, 2))
    s, _ = make(dtype, ())
    arrays = {"model.layers.0.weight": a, "empty": e, "scalar": s, "ünï": a}
    mx.save_safetensors(str(tmp_path / "w"), arrays, {"format": "mlx", "k": "ü"})
    got, meta = mx.load(str(tmp_path / "w.safetensors"), return_metadata=True)
    assert meta == {"format": "mlx", "k": "ü"}
    assert set(got) == set(arrays)
    for k, v in arrays.items():
        same(got[k], v)


def test_safetensors_layout_follows_the_spec(tmp_path):
    a = mx.array([1.0, 2.0])
    b = mx.array(3, dtype=mx.bfloat16)
    mx.save_safetensors(tmp_path / "s.safetensors", {"a": a, "b.c": b}, {"k": "v"})
    raw = (tmp_path / "s.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    assert header["__metadata__"] == {"k": "v"}
    assert header["a"]["dtype"] == "F32" and header["a"]["shape"] == [2]
    assert header["b.c"]["dtype"] == "BF16" and header["b.c"]["shape"] == []
    begin, end = header["a"]["data_offsets"]
    data = raw[8 + n :]
    np.testing.assert_array_equal(np.frombuffer(data[begin:end], "<f4"), [1.0, 2.0])
    begin, end = header["b.c"]["data_offsets"]
    assert data[begin:end] == b"\x40\x40"  # bfloat16 3.0


def test_safetensors_written_by_hand_loads(tmp_path):
    # As the reference writer lays it out: header padded with spaces.
    x = np.arange(6, dtype="<i2").reshape(2, 3)
    header = json.dumps(
        {"__metadata__": {"a": "b"}, "x": {"dtype": "I16", "shape": [2, 3], "data_offsets": [0, 12]}}
    ).encode()
    header += b" " * (-len(header) % 8)
    (tmp_path / "h.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + x.tobytes())
    got, meta = mx.load(str(tmp_path / "h.safetensors"), return_metadata=True)
    np.testing.assert_array_equal(np.array(got["x"]), x)
    assert meta == {"a": "b"}


def test_load_format_argument_and_errors(tmp_path):
    a = mx.array([1.0])
    mx.save(str(tmp_path / "a"), a)
    mx.save_safetensors(str(tmp_path / "s"), {"a": a})
    same(mx.load(str(tmp_path / "a.npy"), format="npy"), a)
    same(mx.load(str(tmp_path / "s.safetensors"), "safetensors", False)["a"], a)
    with pytest.raises(ValueError, match=r"\[load\] Unknown file format foo"):
        mx.load(str(tmp_path / "a.npy"), format="foo")
    with pytest.raises(ValueError, match=r"\[load\] Could not infer file format from extension"):
        mx.load(str(tmp_path / "a"))
    with pytest.raises(ValueError, match=r"\[load\] Unknown file format txt"):
        mx.load(str(tmp_path / "a.txt"))
    with pytest.raises(RuntimeError, match=r"\[load\] Failed to open file"):
        mx.load(str(tmp_path / "missing.npy"))
    with pytest.raises(ValueError, match=r"\[load\] metadata not supported for format npy"):
        mx.load(str(tmp_path / "a.npy"), return_metadata=True)
    mx.savez(str(tmp_path / "z"), a)
    with pytest.raises(ValueError, match=r"\[load\] metadata not supported for format npz"):
        mx.load(str(tmp_path / "z.npz"), return_metadata=True)
    with pytest.raises(TypeError):
        mx.load(file=str(tmp_path / "a.npy"))  # positional-only
    with pytest.raises(ValueError, match="Metadata must be a dictionary with string keys and values"):
        mx.save_safetensors(str(tmp_path / "m"), {"a": a}, {"k": 1})
    with pytest.raises(TypeError):
        mx.save_safetensors(str(tmp_path / "m"), [a])
    with pytest.raises(TypeError):
        mx.save(str(tmp_path / "m"), 3)


def test_object_arrays_are_refused(tmp_path):
    np.save(tmp_path / "o.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match=r"Unsupported array protocol type-string: \|O"):
        mx.load(str(tmp_path / "o.npy"))
    np.save(tmp_path / "u.npy", np.array(["ab"]))
    with pytest.raises(ValueError, match="Unsupported array protocol type-string: <U2"):
        mx.load(str(tmp_path / "u.npy"))


def test_truncated_files_raise(tmp_path):
    np.save(tmp_path / "f.npy", np.arange(8.0))
    raw = (tmp_path / "f.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(raw[:-4])
    # MLX reads lazily and raises on evaluation; Loom raises in load.
    with pytest.raises(RuntimeError):
        mx.eval(mx.load(str(tmp_path / "t.npy")))
    (tmp_path / "t.safetensors").write_bytes(b"hello")
    with pytest.raises(RuntimeError):
        mx.eval(mx.load(str(tmp_path / "t.safetensors")))
    (tmp_path / "t.npz").write_bytes(b"hello")
    with pytest.raises(ValueError, match="Input must be a zip file"):
        mx.load(str(tmp_path / "t.npz"))


def test_file_objects(tmp_path):
    a = mx.arange(6).reshape(2, 3)
    for save, fmt in [(mx.save, "npy"), (mx.savez, "npz")]:
        buf = io.BytesIO()
        if fmt == "npy":
            save(buf, a)
        else:
            save(buf, a, b=a)
        buf.seek(0)
        got = mx.load(buf, format=fmt)
        same(got if fmt == "npy" else got["b"], a)
    buf = io.BytesIO()
    mx.save_safetensors(buf, {"a": a})
    buf.seek(0)
    same(mx.load(buf, format="safetensors")["a"], a)
    with open(tmp_path / "f.npy", "wb") as f:
        mx.save(f, a)
    with open(tmp_path / "f.npy", "rb") as f:
        same(mx.load(f), a)


def test_bad_file_arguments(tmp_path):
    a = mx.array([1])
    with pytest.raises(ValueError, match=r"\[save\] Input must be a file-like object, or string"):
        mx.save(3, a)
    with pytest.raises(ValueError, match=r"\[save_safetensors\] Input must be a file-like object"):
        mx.save_safetensors(3, {"a": a})
    with pytest.raises(
        ValueError, match=r"\[load\] Input must be a file-like object opened in binary mode, or string"
    ):
        mx.load(3)


@settings(max_examples=40, deadline=None)
@given(
    dtype=st.sampled_from(ALL_DTYPES),
    shape=st.lists(st.integers(0, 4), max_size=4).map(tuple),
    fmt=st.sampled_from(["npy", "npz", "npzc", "safetensors"]),
    seed=st.integers(0, 2**16),
)
def test_round_trip_property(tmp_path_factory, dtype, shape, fmt, seed):
    if IS_MLX and fmt == "safetensors" and dtype == "float64":
        fmt = "npy"  # MLX cannot write float64 safetensors (test_safetensors_round_trip)
    d = tmp_path_factory.mktemp("prop")
    a, _ = make(dtype, shape, seed)
    if fmt == "npy":
        mx.save(str(d / "x"), a)
        got = mx.load(str(d / "x.npy"))
    elif fmt.startswith("npz"):
        (mx.savez_compressed if fmt == "npzc" else mx.savez)(str(d / "x"), k=a)
        got = mx.load(str(d / "x.npz"))["k"]
    else:
        mx.save_safetensors(str(d / "x"), {"k": a})
        got = mx.load(str(d / "x.safetensors"))["k"]
    same(got, a)


def test_safetensors_package_interop(tmp_path):
    # The reference implementation (the `safetensors` package, NumPy back end)
    # reads what we write and writes what we read.
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    # NumPy has no bfloat16; MLX 0.32.4 neither reads nor writes F64 (Loom
    # does: test_safetensors_package_float64).
    names = [d for d in ALL_DTYPES if d not in ("bfloat16", "complex64", "float64")]
    refs = {d: make(d, (3, 4), seed=i)[1] for i, d in enumerate(names)}
    refs["empty"] = np.zeros((0, 2), np.float32)
    save_file(refs, str(tmp_path / "ref.safetensors"), metadata={"format": "np"})
    got, meta = mx.load(str(tmp_path / "ref.safetensors"), return_metadata=True)
    assert meta == {"format": "np"}
    for k, ref in refs.items():
        assert got[k].shape == ref.shape
        np.testing.assert_array_equal(np.array(got[k]), ref)

    ours = {k: mx.array(v, dtype=getattr(mx, k)) for k, v in refs.items() if k != "empty"}
    mx.save_safetensors(str(tmp_path / "ours"), ours, {"who": "us"})
    back = load_file(str(tmp_path / "ours.safetensors"))
    assert set(back) == set(ours)
    for k in ours:
        np.testing.assert_array_equal(back[k], refs[k])
    with safe_open(str(tmp_path / "ours.safetensors"), framework="numpy") as f:
        assert f.metadata() == {"who": "us"}


@pytest.mark.loom_only
def test_safetensors_package_float64(tmp_path):
    from safetensors.numpy import load_file, save_file

    ref = np.arange(6, dtype=np.float64).reshape(2, 3) / 7
    save_file({"x": ref}, str(tmp_path / "r.safetensors"))
    got = mx.load(str(tmp_path / "r.safetensors"))["x"]
    assert got.dtype == mx.float64
    np.testing.assert_array_equal(np.array(got), ref)
    mx.save_safetensors(str(tmp_path / "o"), {"x": got})
    np.testing.assert_array_equal(load_file(str(tmp_path / "o.safetensors"))["x"], ref)


# --- Loom extras ----------------------------------------------------------------


def _safetensors(header, data=b""):
    h = json.dumps(header).encode() if isinstance(header, dict) else header
    return struct.pack("<Q", len(h)) + h + data


@pytest.mark.loom_only
@pytest.mark.parametrize(
    "raw, what",
    [
        (b"abc", "truncated header"),
        (struct.pack("<Q", 10**12) + b"{}", "truncated header"),
        (_safetensors(b'{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                      b'"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4),
         "duplicate key 't'"),
        (_safetensors({"t": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4),
         "unsupported dtype 'Q4'"),
        (_safetensors({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4),
         "out of range"),
        (_safetensors({"t": {"dtype": "F32", "shape": [10**6, 10**6],
                             "data_offsets": [0, 4 * 10**12]}}, b"\0" * 8),
         "out of range"),
        (_safetensors(b"{oops"), "not valid JSON"),
    ],
)
def test_malformed_safetensors_errors(tmp_path, raw, what):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(raw)
    with pytest.raises(RuntimeError) as e:
        mx.load(str(p))
    assert "Invalid safetensors file" in str(e.value) and str(p) in str(e.value)
    assert what in str(e.value)


@pytest.mark.loom_only
def test_huge_npy_header_does_not_allocate(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((4, 4), np.float32))
    raw = (tmp_path / "a.npy").read_bytes().replace(b"(4, 4)", b"(1000000, 1000000)")
    (tmp_path / "h.npy").write_bytes(raw)
    mx.reset_peak_memory()
    before = mx.get_active_memory()
    with pytest.raises(RuntimeError, match="Invalid npy file .*h.npy.*declares 4000000000000 bytes"):
        mx.load(str(tmp_path / "h.npy"))
    assert mx.get_peak_memory() - before < 1 << 20


@pytest.mark.loom_only
def test_corrupt_npz_member_is_detected(tmp_path):
    mx.savez(str(tmp_path / "z"), x=mx.arange(100, dtype=mx.float32))
    raw = bytearray((tmp_path / "z.npz").read_bytes())
    raw[300] ^= 0xFF
    (tmp_path / "c.npz").write_bytes(bytes(raw))
    with pytest.raises(RuntimeError, match="Invalid npz file .*CRC-32 mismatch"):
        mx.load(str(tmp_path / "c.npz"))


_FAILING_SAVE = r"""
import resource, signal, sys
import loom.core as mx
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    mx.save_safetensors(sys.argv[1], {"w": mx.zeros((100000,))})
except RuntimeError as e:
    print("failed:", e)
"""


@pytest.mark.loom_only
def test_failed_save_leaves_previous_file_intact(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    mx.save_safetensors(str(path), {"w": mx.ones((8,))})
    before = path.read_bytes()
    out = subprocess.run(
        [sys.executable, "-c", _FAILING_SAVE, str(path)], capture_output=True, text=True, check=True
    )
    assert "failed: [save_safetensors] Failed to write file" in out.stdout, out.stdout + out.stderr
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]  # no temp file left behind
    same(mx.load(str(path))["w"], mx.ones((8,)))


# --- GGUF -------------------------------------------------------------------------

GGUF_DTYPES = ["int8", "int16", "int32", "float16", "float32"]


@pytest.mark.parametrize("dtype", GGUF_DTYPES)
@pytest.mark.parametrize("shape", [(), (5,), (2, 3), (2, 3, 4)])
def test_gguf_round_trip(tmp_path, dtype, shape):
    a, _ = make(dtype, shape)
    mx.save_gguf(str(tmp_path / "g"), {"blk.0.attn_q.weight": a, "ü": a})
    got = mx.load(str(tmp_path / "g.gguf"))
    assert set(got) == {"blk.0.attn_q.weight", "ü"}
    same(got["blk.0.attn_q.weight"], a)
    same(mx.load(str(tmp_path / "g.gguf"), format="gguf")["ü"], a)


def test_gguf_metadata(tmp_path):
    meta = {
        "general.name": "tiny",
        "tokenizer.tokens": ["a", "b", "ü"],
        "n": mx.array(3),
        "f": mx.array(2.5),
        "v": mx.array([1, 2, 3]),
        "u8": mx.array(1, dtype=mx.uint8),
        "flag": mx.array(True),
    }
    mx.save_gguf(tmp_path / "m.gguf", {"w": mx.ones((2, 3))}, meta)
    arrays, got = mx.load(str(tmp_path / "m.gguf"), return_metadata=True)
    same(arrays["w"], mx.ones((2, 3)))
    assert set(got) == set(meta)
    assert got["general.name"] == "tiny"
    assert got["tokenizer.tokens"] == ["a", "b", "ü"]
    for k in ("n", "f", "v", "u8", "flag"):
        same(got[k], meta[k])


def test_gguf_errors(tmp_path):
    with pytest.raises(RuntimeError, match=r"\[save_gguf\] dtype uint8 is not supported"):
        mx.save_gguf(str(tmp_path / "e"), {"a": mx.ones((2,), dtype=mx.uint8)})
    with pytest.raises(RuntimeError, match="Cannot save arrays with more than one dimension"):
        mx.save_gguf(str(tmp_path / "e"), {"a": mx.ones((2,))}, {"m": mx.ones((2, 2))})


@pytest.mark.loom_only
def test_gguf_bfloat16_and_layout(tmp_path):
    a, _ = make("bfloat16", (3, 4))
    mx.save_gguf(str(tmp_path / "b"), {"w": a})
    same(mx.load(str(tmp_path / "b.gguf"))["w"], a)
    raw = (tmp_path / "b.gguf").read_bytes()
    assert raw[:4] == b"GGUF" and struct.unpack("<I", raw[4:8])[0] == 3
    # the tensor description lists dimensions innermost first: (4, 3)
    name_at = raw.index(b"w\x02\x00\x00\x00")
    assert struct.unpack("<QQ", raw[name_at + 5 : name_at + 21]) == (4, 3)
    assert len(raw) % 32 == 0


def _gguf(tensors, kv=b"", n_kv=0):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), n_kv) + kv
    for name, dims, ggml_type, offset in tensors:
        out += struct.pack("<Q", len(name)) + name + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ggml_type, offset)
    return out + b"\0" * (-len(out) % 32)


@pytest.mark.loom_only
@pytest.mark.parametrize(
    "raw, what",
    [
        (b"GGUF\x03\x00", "truncated header"),
        (b"GGML" + b"\0" * 40, "does not start with 'GGUF'"),
        (b"GGUF" + struct.pack("<IQQ", 3, 10**15, 0) + b"\0" * 16, "more than the file holds"),
        (_gguf([(b"q", [32], 6, 0)]) + b"\0" * 32, "ggml type Q5_0"),
        (_gguf([(b"q", [48], 2, 0)]) + b"\0" * 64, "not a multiple of 32"),
        (_gguf([(b"t", [10**6, 10**6], 0, 0)]) + b"\0" * 64, "lies beyond"),
        (_gguf([(b"t", [4], 0, 0), (b"t", [4], 0, 32)]) + b"\0" * 64, "duplicate tensor name 't'"),
        (_gguf([], struct.pack("<Q", 10**12) + b"k", 1), "runs past the end"),
    ],
)
def test_malformed_gguf_errors(tmp_path, raw, what):
    p = tmp_path / "bad.gguf"
    p.write_bytes(raw)
    with pytest.raises(RuntimeError) as e:
        mx.load(str(p))
    assert "Invalid gguf file" in str(e.value) and what in str(e.value), str(e.value)


# --- GGUF against the `gguf` package (llama.cpp's reader and writer) ---------------

def _gguf_package():
    # A test requirement of Loom (requirements-dev.txt); the oracle's
    # environment may lack it.
    if IS_MLX:
        return pytest.importorskip("gguf")
    import gguf

    return gguf


def test_gguf_read_by_gguf_package(tmp_path):
    gguf = _gguf_package()
    arrays = {"tok_embd.weight": make("float32", (6, 4))[0], "blk.0.ffn.weight": make("float16", (3, 8))[0],
              "ids": make("int32", (5,))[0], "ü": make("int8", (2, 2, 3))[0]}
    mx.save_gguf(str(tmp_path / "x.gguf"), arrays, {"general.name": "tiny", "n": mx.array(7)})
    reader = gguf.GGUFReader(str(tmp_path / "x.gguf"))
    assert reader.fields["general.name"].contents() == "tiny"
    assert reader.fields["n"].contents() == 7
    got = {t.name: t for t in reader.tensors}
    assert set(got) == set(arrays)
    for name, a in arrays.items():
        t = got[name]
        # GGUF lists dimensions innermost first.
        assert tuple(int(d) for d in t.shape)[::-1] == a.shape
        np.testing.assert_array_equal(np.asarray(t.data).reshape(a.shape), np.array(a))


def test_gguf_written_by_gguf_package(tmp_path):
    gguf = _gguf_package()
    rng = np.random.default_rng(5)
    f32 = rng.standard_normal((4, 64)).astype(np.float32)
    f16 = rng.standard_normal((2, 32)).astype(np.float16)
    q8 = rng.standard_normal((3, 64)).astype(np.float32)
    q4 = rng.standard_normal((2, 128)).astype(np.float32)
    Q = gguf.GGMLQuantizationType
    w = gguf.GGUFWriter(str(tmp_path / "y.gguf"), "llama")
    w.add_string("general.name", "made by gguf")
    w.add_uint32("ctx", 128)
    w.add_tensor("a.weight", f32)
    w.add_tensor("b.weight", f16)
    w.add_tensor("q8.weight", gguf.quants.quantize(q8, Q.Q8_0), raw_dtype=Q.Q8_0)
    w.add_tensor("q4.weight", gguf.quants.quantize(q4, Q.Q4_0), raw_dtype=Q.Q4_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    arrays, meta = mx.load(str(tmp_path / "y.gguf"), return_metadata=True)
    assert meta["general.name"] == "made by gguf" and meta["ctx"].item() == 128
    np.testing.assert_array_equal(np.array(arrays["a.weight"]), f32)
    np.testing.assert_array_equal(np.array(arrays["b.weight"]), f16)
    # Q8_0 / Q4_0 load as MLX's affine quantization (codes, scales, biases)
    # that dequantizes to what llama.cpp's own dequantization gives.
    for name, src, qtype, bits in (("q8", q8, Q.Q8_0, 8), ("q4", q4, Q.Q4_0, 4)):
        want = gguf.quants.dequantize(gguf.quants.quantize(src, qtype), qtype)
        got = mx.dequantize(arrays[name + ".weight"], arrays[name + ".scales"], arrays[name + ".biases"],
                            group_size=32, bits=bits)
        # (in float16, the dtype of the scales, as MLX)
        assert got.dtype == mx.float16
        np.testing.assert_allclose(np.array(got.astype(mx.float32)), want, rtol=1e-3, atol=1e-3)


def test_load_takes_a_stream(tmp_path):
    # load(file, format=None, return_metadata=False, stream=None): the
    # stream (or device) is accepted by keyword in every format.
    a = mx.arange(6, dtype=mx.float32).reshape(2, 3)
    for name, save in [("a.npy", lambda p: mx.save(p, a)),
                       ("a.npz", lambda p: mx.savez(p, a=a)),
                       ("a.safetensors", lambda p: mx.save_safetensors(p, {"a": a})),
                       ("a.gguf", lambda p: mx.save_gguf(p, {"a": a}))]:
        path = str(tmp_path / name)
        save(path)
        for stream in (mx.cpu, mx.default_stream(mx.cpu)):
            got = mx.load(path, stream=stream)
            same(got if isinstance(got, mx.array) else got["a"], a)
