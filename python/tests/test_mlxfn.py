"""Functions exported by MLX 0.32.4 (.mlxfn) imported by import_function.

The fixtures in fixtures/mlxfn were written by MLX itself (make_fixtures.py,
run with the MLX wheel): each <case>.mlxfn holds the exported function and
<case>.npz the inputs it was called with and MLX's outputs. Loom must read
the file and compute the same outputs. The comparisons run against MLX too
(LOOM_TEST_ORACLE=mlx: MLX reads its own files); Loom's error messages and
memory checks are loom_only.
"""

from __future__ import annotations

import contextlib
import gc
import glob
import os
import shutil

import numpy as np
import pytest

from _backend import IS_MLX, mx

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mlxfn")
CASES = sorted(os.path.basename(p)[:-6] for p in glob.glob(os.path.join(HERE, "*.mlxfn")))

# Partition leaves the order of elements around the kth unspecified: those
# outputs are compared as sets per row, and at the kth position.
PARTITIONED = {("sort", 2): (1, 1), ("sort", 3): (0, 0)}
# Outputs of transcendental or reordered float arithmetic.
LOOSE = {"fast", "unary", "unary_pos", "mlp", "quantized", "conv", "conv2d", "scan", "reduce",
         "linalg", "eig", "fft", "hadamard", "hand_sdpa", "hand_sdpa_causal", "hand_sdpa_mask", "hand_rope",
         "hand_rope_traditional", "hand_layer_norm", "hand_rms_norm", "transformer"}


def _np(a):
    return np.array(a.astype(mx.float32) if a.dtype == mx.bfloat16 else a)


def _calls(data):
    k = 0
    while any(name.startswith(f"t{k}_") for name in data.files):
        prefix = f"t{k}_"
        pos = sorted((n for n in data.files if n.startswith(prefix + "pos_")),
                     key=lambda n: int(n.rsplit("_", 1)[1]))
        outs = sorted((n for n in data.files if n.startswith(prefix + "out_")),
                      key=lambda n: int(n.rsplit("_", 1)[1]))
        kws = {n[len(prefix + "kw_"):]: data[n] for n in data.files if n.startswith(prefix + "kw_")}
        yield [data[n] for n in pos], kws, [data[n] for n in outs]
        k += 1


CPU_ONLY = {"eig", "linalg"}  # fixtures calling mx.linalg


def test_fixtures_present():
    assert len(CASES) >= 30, CASES


# hand_*: fast primitives in MLX's layout, which MLX cannot run on the CPU
# (make_fixtures.py says why): Loom-only.
@pytest.mark.parametrize("case", [
    pytest.param(c, marks=pytest.mark.loom_only) if c.startswith("hand_") else c for c in CASES])
def test_mlx_exported_function_runs(case):
    # mx.linalg runs on the CPU only (MLX's rule): those cases pin the stream,
    # for the import (which traces the function) and for each call.
    def cpu_if_linalg():
        return mx.stream(mx.cpu) if case in CPU_ONLY else contextlib.nullcontext()

    with cpu_if_linalg():
        f = mx.import_function(os.path.join(HERE, case + ".mlxfn"))
    data = np.load(os.path.join(HERE, case + ".npz"))
    ncalls = 0
    for args, kwargs, expected in _calls(data):
        ncalls += 1
        with cpu_if_linalg():
            outs = f(*[mx.array(a) for a in args], **{k: mx.array(v) for k, v in kwargs.items()})
        assert isinstance(outs, tuple) and len(outs) == len(expected)
        for i, (o, e) in enumerate(zip(outs, expected)):
            got = _np(o)
            assert got.shape == e.shape, (case, i, got.shape, e.shape)
            if (case, i) in PARTITIONED:
                kth, axis = PARTITIONED[(case, i)]
                if np.issubdtype(got.dtype, np.integer):  # argpartition: compare the values
                    got = np.take_along_axis(args[0], got.astype(np.int64), axis)
                    e = np.take_along_axis(args[0], e.astype(np.int64), axis)
                np.testing.assert_array_equal(np.sort(got, axis), np.sort(e, axis))
                np.testing.assert_array_equal(np.take(got, kth, axis), np.take(e, kth, axis))
                continue
            if o.dtype == mx.bfloat16 or o.dtype == mx.float16:
                np.testing.assert_allclose(got, e, rtol=1e-2, atol=1e-2, err_msg=f"{case}[{i}]")
            elif np.issubdtype(e.dtype, np.floating):
                tol = 2e-4 if case in LOOSE else 1e-5
                np.testing.assert_allclose(got, e, rtol=tol, atol=tol, err_msg=f"{case}[{i}]")
            else:
                np.testing.assert_array_equal(got, e, err_msg=f"{case}[{i}]")
    assert ncalls >= 1


def test_mlx_traces_pick_by_shape():
    f = mx.import_function(os.path.join(HERE, "traces.mlxfn"))
    with pytest.raises(ValueError, match="No imported function found"):
        f(mx.ones((3, 3)), mx.ones((3, 3)))


def test_mlx_kwargs_contract():
    f = mx.import_function(os.path.join(HERE, "kwargs.mlxfn"))
    a = mx.ones((2, 3))
    with pytest.raises(ValueError, match="No imported function found"):
        f(a, mx.ones((3,)), mx.ones((2, 3)))


def test_mlx_imported_function_is_transformable():
    f = mx.import_function(os.path.join(HERE, "mlp.mlxfn"))
    x = mx.array(np.random.default_rng(1).normal(size=(5, 8)).astype(np.float32))

    def loss(x):
        return f(x)[0][:, 0].sum()

    g = mx.grad(loss)(x)
    eps = 1e-2
    d = np.zeros((5, 8), np.float32)
    d[2, 3] = eps
    num = (loss(x + mx.array(d)).item() - loss(x - mx.array(d)).item()) / (2 * eps)
    assert abs(_np(g)[2, 3] - num) < 1e-2
    batched = mx.vmap(lambda r: f(r)[0])(mx.stack([x, 2 * x]))
    np.testing.assert_allclose(_np(batched[1]), _np(f(2 * x)[0]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(mx.compile(lambda x: f(x)[0])(x)), _np(f(x)[0]), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.loom_only
def test_mlx_unknown_primitive_is_named(tmp_path):
    raw = open(os.path.join(HERE, "scalars.mlxfn"), "rb").read()
    assert b"Multiply" in raw
    bad = tmp_path / "bad.mlxfn"
    bad.write_bytes(raw.replace(b"Multiply", b"Multiplx"))
    with pytest.raises(Exception, match="MLX primitive 'Multiplx'"):
        mx.import_function(str(bad))


@pytest.mark.loom_only
def test_mlx_truncated_and_corrupt_files(tmp_path):
    raw = open(os.path.join(HERE, "matmul.mlxfn"), "rb").read()
    for n in (9, 20, 40, len(raw) // 2, len(raw) - 1):
        p = tmp_path / f"cut{n}.mlxfn"
        p.write_bytes(raw[:n])
        with pytest.raises(Exception, match=r"\[import_function\].*cut%d" % n):
            mx.import_function(str(p))
    p = tmp_path / "trailing.mlxfn"
    p.write_bytes(raw + b"\0")
    with pytest.raises(Exception, match="trailing bytes"):
        mx.import_function(str(p))


@pytest.mark.loom_only
def test_mlx_metadata_and_reexport(tmp_path):
    f = mx.import_function(os.path.join(HERE, "linear.mlxfn"))
    x = mx.ones((5, 3))
    # An imported MLX function exports again in Loom's own format.
    path = str(tmp_path / "again.mlxfn")
    mx.export_function(path, lambda x: f(x)[0], x)
    g = mx.import_function(path)
    np.testing.assert_allclose(_np(g(x)[0]), _np(f(x)[0]))
    assert open(path, "rb").read(8) == b"LOOMFUNC"


@pytest.mark.loom_only
def test_mlx_import_releases_memory():
    path = os.path.join(HERE, "mlp.mlxfn")
    x = mx.ones((5, 8))

    def cycle():
        f = mx.import_function(path)
        mx.eval(f(x)[0])
        del f

    cycle()
    gc.collect()
    base = mx.get_active_memory()
    for _ in range(20):
        cycle()
    gc.collect()
    assert mx.get_active_memory() <= base + 4096


def _mlxfn_bytes(in_shape, nodes, out_id):
    """A one-trace .mlxfn in MLX's layout (docs/export.md): input id 1, then
    `nodes` = [(id, input ids, name, state bytes, output shape)], f32."""
    import struct

    def s(b):
        return struct.pack("<Q", len(b)) + b

    def shape(sh):
        return struct.pack("<Q", len(sh)) + b"".join(struct.pack("<i", d) for d in sh)

    def ids(v):
        return struct.pack("<Q", len(v)) + b"".join(struct.pack("<Q", i) for i in v)

    f32 = struct.pack("<iB", 10, 4)
    body = struct.pack("<Q", 0) + ids([1]) + struct.pack("<Q", 1) + shape(in_shape) + f32
    body += ids([out_id]) + struct.pack("<Q", 1 + len(nodes)) + struct.pack("<QBB", 1, 0, 0)
    for nid, inputs, name, state, out in nodes:
        body += (struct.pack("<QB", nid, 1) + ids(inputs) + b"\0" * 12 + s(name) + state
                 + struct.pack("<Q", 0) + shape(out) + f32)
    return s(b"0.32.4") + struct.pack("<iB", 1, 0) + s(b"") + body


@pytest.mark.loom_only
def test_mlx_folded_constants_are_bounded(tmp_path):
    import struct

    # An arange of 2^30 floats that depends on no input would be computed at
    # import: a 200-byte file may not claim 4 GiB.
    big = (1 << 30,)
    p = tmp_path / "arange.mlxfn"
    p.write_bytes(_mlxfn_bytes((3,), [(2, [], b"Arange", struct.pack("<ddd", 0, 1 << 30, 1), big),
                                      (3, [2], b"Negative", b"", big)], 3))
    with pytest.raises(Exception, match="depend on no input"):
        mx.import_function(str(p))
    # The same graph, small, imports and runs.
    p = tmp_path / "small.mlxfn"
    p.write_bytes(_mlxfn_bytes((3,), [(2, [], b"Arange", struct.pack("<ddd", 0, 3, 1), (3,)),
                                      (3, [1, 2], b"Add", b"", (3,))], 3))
    f = mx.import_function(str(p))
    assert f(mx.array([1.0, 1.0, 1.0]))[0].tolist() == [1.0, 2.0, 3.0]


@pytest.mark.loom_only
def test_mlx_custom_kernel_is_refused_clearly(tmp_path):
    # MLX serialises mx.fast.metal_kernel / cuda_kernel nodes (their source
    # inside); Loom cannot run that source and says so before parsing it.
    p = tmp_path / "kernel.mlxfn"
    p.write_bytes(_mlxfn_bytes((3,), [(2, [1], b"CustomKernel", b"\x07" * 40, (3,))], 2))
    with pytest.raises(Exception, match="CustomKernel.*custom kernels"):
        mx.import_function(str(p))


@pytest.mark.loom_only
def test_mlx_shapeless_mean_counts_each_call():
    # MLX's shapeless mean/var hold NumberOfElements: the divisor follows the
    # shape of each call, whatever shapes the fixture's calls used.
    f = mx.import_function(os.path.join(HERE, "mean_shapeless.mlxfn"))
    x = np.random.default_rng(2).normal(size=(9, 5)).astype(np.float32)
    mean0, var, mean1 = f(mx.array(x))
    np.testing.assert_allclose(_np(mean0), x.mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var.item(), x.var(), rtol=1e-5)
    np.testing.assert_allclose(_np(mean1), x.mean(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
