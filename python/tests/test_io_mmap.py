"""Lazy, memory-mapped loading of .npy and .safetensors files (issue 12).

`load(path)` maps the file and returns arrays over the mapping: it reads the
header only, an array's pages are read when it is first used, the mapping is
released with the last array over it, in-place writes to an array never
reach the file, and a file replaced by a later save (rename: a new inode)
leaves the arrays of the old one intact. Loom-only: MLX reads files eagerly.
"""

from __future__ import annotations

import gc
import os
import time

import numpy as np
import pytest

from _backend import mx

pytestmark = pytest.mark.loom_only


def _maps(path: str) -> int:
    real = os.path.realpath(path)
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if line.rstrip().endswith(real))


def _big(n: int = 4 << 20) -> np.ndarray:
    return np.arange(n, dtype=np.float32) * 0.5


@pytest.mark.parametrize("fmt", ["npy", "safetensors"])
def test_load_maps_lazily_and_unmaps_on_drop(tmp_path, fmt):
    ref = _big()
    path = str(tmp_path / f"w.{fmt}")
    if fmt == "npy":
        mx.save(path, mx.array(ref))
    else:
        mx.save_safetensors(path, {"w": mx.array(ref), "b": mx.array(ref[:10])})
    gc.collect()
    active = mx.get_active_memory()
    t = time.perf_counter()
    loaded = mx.load(path)
    took = time.perf_counter() - t
    a = loaded if fmt == "npy" else loaded["w"]
    # Nothing was copied into Loom's pool: the arrays are views of the mapping.
    assert mx.get_active_memory() - active < ref.nbytes // 4
    assert took < 0.5
    assert _maps(path) >= 1
    np.testing.assert_array_equal(np.array(a), ref)
    assert (a * 2).max().item() == float(ref[-1] * 2)
    del a, loaded
    gc.collect()
    assert _maps(path) == 0


def test_mapping_outlives_the_dict_and_keeps_values(tmp_path):
    path = str(tmp_path / "w.safetensors")
    mx.save_safetensors(path, {"a": mx.arange(1000, dtype=mx.float32), "b": mx.ones((3, 4))})
    b = mx.load(path)["b"]
    gc.collect()
    assert _maps(path) >= 1
    assert b.sum().item() == 12.0
    del b
    gc.collect()
    assert _maps(path) == 0


@pytest.mark.parametrize("fmt", ["npy", "safetensors"])
def test_replacing_the_file_keeps_mapped_arrays(tmp_path, fmt):
    path = str(tmp_path / f"w.{fmt}")
    old = np.arange(64 * 1024, dtype=np.float32)
    save = (lambda p, a: mx.save(p, a)) if fmt == "npy" else (
        lambda p, a: mx.save_safetensors(p, {"w": a}))
    get = (lambda d: d) if fmt == "npy" else (lambda d: d["w"])
    save(path, mx.array(old))
    a = get(mx.load(path))  # no page touched yet
    save(path, mx.array(-old))  # atomic: temp file + rename, a new inode
    np.testing.assert_array_equal(np.array(a), old)
    np.testing.assert_array_equal(np.array(get(mx.load(path))), -old)


def test_writes_to_a_mapped_array_stay_private(tmp_path):
    path = str(tmp_path / "w.npy")
    ref = np.arange(1024, dtype=np.float32)
    mx.save(path, mx.array(ref))
    before = open(path, "rb").read()
    a = mx.load(path)
    a[3] = 100.0
    a += 1  # may run in place on the mapped storage
    mx.eval(a)
    assert a[3].item() == 101.0
    del a
    gc.collect()
    assert open(path, "rb").read() == before
    np.testing.assert_array_equal(np.array(mx.load(path)), ref)


def test_unaligned_and_swapped_data_are_copied(tmp_path):
    # A big-endian .npy is byte-swapped into a buffer; nothing maps it.
    path = str(tmp_path / "be.npy")
    ref = np.arange(12, dtype=">f4").reshape(3, 4)
    np.save(path, ref)
    a = mx.load(path)
    gc.collect()
    np.testing.assert_array_equal(np.array(a), ref.astype(np.float32))
    # Fortran order maps (a transposed view of the mapping).
    path = str(tmp_path / "f.npy")
    ref = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    np.save(path, ref)
    np.testing.assert_array_equal(np.array(mx.load(path)), ref)


def test_load_drop_cycles_return_to_baseline(tmp_path):
    path = str(tmp_path / "w.safetensors")
    mx.save_safetensors(path, {f"p{i}": mx.full((256, 256), float(i)) for i in range(8)})

    def cycle():
        d = mx.load(path)
        mx.eval(sum(v.sum() for v in d.values()))

    cycle()
    gc.collect()
    base = mx.get_active_memory()
    for _ in range(50):
        cycle()
    gc.collect()
    assert mx.get_active_memory() <= base + 4096
    assert _maps(path) == 0


def test_file_objects_still_read_eagerly(tmp_path):
    path = str(tmp_path / "w.npy")
    mx.save(path, mx.arange(10))
    with open(path, "rb") as f:
        a = mx.load(f)
    assert _maps(path) == 0
    assert a.tolist() == list(range(10))
