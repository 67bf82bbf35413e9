"""Arrays saved by MLX 0.32.4 load in Loom bit-identically, and the reverse
(issue 12): every dtype MLX writes in each format (npy, npz, safetensors,
gguf), written by the MLX wheel of the oracle environment in a subprocess
and compared byte for byte.

Needs that wheel: LOOM_MLX_PYTHON, else /work/peers/bin/python (the
environment the contributing guide sets up for LOOM_TEST_ORACLE=mlx).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from _backend import mx

pytestmark = pytest.mark.loom_only

ORACLE = os.environ.get("LOOM_MLX_PYTHON", "/work/peers/bin/python")

# Runs in both processes: the arrays of one dtype, from NumPy values, with
# 0-d, empty and odd shapes, keys with dots and non-ASCII letters.
MAKE = r'''
import numpy as np

def make(m, dtype_name):
    rng = np.random.default_rng(sum(map(ord, dtype_name)))
    dt = getattr(m, dtype_name)
    out = {}
    for key, shape in (("model.w", (3, 5)), ("ünï", (2, 1, 4)), ("s", ()), ("e", (0, 3))):
        if dtype_name == "bool_":
            v = rng.normal(size=shape) > 0
        elif dtype_name.startswith("uint"):
            v = rng.integers(0, 250, size=shape).astype(dtype_name)
        elif dtype_name.startswith("int"):
            v = rng.integers(-120, 120, size=shape).astype(dtype_name)
        elif dtype_name == "complex64":
            v = (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(np.complex64)
        else:
            # float16/float32 exactly; bfloat16 and float64 through float32.
            v = (rng.normal(scale=40.0, size=shape)).astype(
                np.float16 if dtype_name == "float16" else np.float32)
        out[key] = m.array(v).astype(dt)
    return out

def save(m, fmt, path, arrays):
    # npy holds one array: "model.w".
    if fmt == "npy":
        m.save(path, arrays["model.w"])
    elif fmt == "npz":
        m.savez(path, **arrays)
    elif fmt == "safetensors":
        m.save_safetensors(path, arrays)
    else:
        m.save_gguf(path, arrays)

def raw(m, a):
    # The bytes of an array (bfloat16 as its bits), shape and dtype kept.
    if a.dtype == m.bfloat16:
        a = a.view(m.uint16)
    return np.array(a)
'''

DTYPES = ["bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
          "float16", "bfloat16", "float32", "float64", "complex64"]
FORMATS = ["npy", "npz", "safetensors", "gguf"]

# Writes every (format, dtype) MLX can write into a folder and lists them;
# or reads what Loom wrote and compares it with the same values.
ORACLE_SCRIPT = MAKE + r'''
import json, os, sys
import mlx.core as mx
mode, folder = sys.argv[1], sys.argv[2]
dtypes, formats = json.loads(sys.argv[3]), json.loads(sys.argv[4])
result = {}
for fmt in formats:
    for name in dtypes:
        arrays = make(mx, name)
        path = os.path.join(folder, f"{name}.{fmt}")
        if mode == "write":
            try:
                save(mx, fmt, path, arrays)
                result[f"{fmt}/{name}"] = "written"
            except Exception as e:
                result[f"{fmt}/{name}"] = "refused: " + str(e)[:80]
        elif os.path.exists(path):
            loaded = mx.load(path)
            want = {"model.w": arrays["model.w"]} if fmt == "npy" else arrays
            if fmt == "npy":
                loaded = {"model.w": loaded}
            same = set(loaded) == set(want) and all(
                loaded[k].dtype == want[k].dtype and raw(mx, loaded[k]).tobytes() == raw(mx, want[k]).tobytes()
                and loaded[k].shape == want[k].shape for k in want)
            result[f"{fmt}/{name}"] = "same" if same else "differs"
print(json.dumps(result))
'''


def _oracle(mode, folder):
    try:
        out = subprocess.run(
            [ORACLE, "-c", ORACLE_SCRIPT, mode, str(folder), json.dumps(DTYPES),
             json.dumps(FORMATS)], capture_output=True, text=True, timeout=300)
    except (FileNotFoundError, PermissionError):
        pytest.skip(f"the MLX oracle interpreter {ORACLE} is not installed")
    if out.returncode != 0 and "No module named 'mlx'" in out.stderr:
        pytest.skip(f"{ORACLE} has no mlx")
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _make():
    scope = {}
    exec(MAKE, scope)
    return scope["make"], scope["raw"], scope["save"]


def test_files_written_by_mlx_load_bit_identically(tmp_path):
    written = _oracle("write", tmp_path)
    make, raw, _ = _make()
    loaded_any = {fmt: 0 for fmt in FORMATS}
    for key, status in written.items():
        if status != "written":
            continue
        fmt, name = key.split("/")
        want = make(mx, name)
        path = str(tmp_path / f"{name}.{fmt}")
        got = mx.load(path)
        if fmt == "npy":
            got, want = {"model.w": got}, {"model.w": want["model.w"]}
        assert set(got) == set(want), key
        for k in want:
            assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, (key, k)
            assert raw(mx, got[k]).tobytes() == raw(mx, want[k]).tobytes(), (key, k)
        loaded_any[fmt] += 1
    # What MLX 0.32.4 writes: all 14 dtypes in npy and npz (bfloat16 too),
    # all but float64 in safetensors, and float16/float32/int8/int16/int32 in
    # gguf (it refuses bfloat16 there; Loom writes it).
    assert loaded_any == {"npy": 14, "npz": 14, "safetensors": 13, "gguf": 5}, written


def test_files_written_by_loom_load_in_mlx_bit_identically(tmp_path):
    make, _, save = _make()
    folder = tmp_path / "loom"
    folder.mkdir()
    mlx_writes = _oracle("write", tmp_path)
    expected = []
    for key, status in mlx_writes.items():
        if status != "written":
            continue
        fmt, name = key.split("/")
        arrays = make(mx, name)
        path = str(folder / f"{name}.{fmt}")
        save(mx, fmt, path, arrays)
        expected.append(key)
    read = _oracle("read", folder)
    assert sorted(read) == sorted(expected)
    assert {k: v for k, v in read.items() if v != "same"} == {}
