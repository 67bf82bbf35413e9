"""Function export and import (seed §12.6-12.7): export_function,
import_function, exporter, the callback form and export_to_dot.

Runs against MLX too (LOOM_TEST_ORACLE=mlx); Loom's extras (format versions,
the random-initialiser warning, file objects) are marked loom_only.
"""

import gc
import io
import os
import pathlib
import warnings

import numpy as np
import pytest

from _backend import IS_MLX, mx


def _np(a):
    return np.array(a.astype(mx.float32) if a.dtype == mx.bfloat16 else a)


def test_seed_add_example(tmp_path):
    # seed §12.6, verbatim
    path = str(tmp_path / "add.mlxfn")

    def fun(x, y):
        return x + y

    x = mx.array(1.0)
    y = mx.array(1.0)
    mx.export_function(path, fun, x, y)
    add_fun = mx.import_function(path)
    out, = add_fun(mx.array(1.0), mx.array(2.0))
    assert isinstance(add_fun(x, y), tuple)
    assert out.item() == 3.0 and out.dtype == mx.float32
    with pytest.raises(ValueError, match="No imported function found"):
        add_fun(mx.array(1), mx.array(3.0))
    with pytest.raises(ValueError, match="No imported function found"):
        add_fun(mx.array([1.0, 2.0]), mx.array(3.0))


def test_keyword_contract(tmp_path):
    path = str(tmp_path / "add.mlxfn")
    x, y = mx.array(1.0), mx.array(2.0)
    mx.export_function(path, lambda x, y: x + y, x, y=y)
    f = mx.import_function(path)
    assert f(x, y=y)[0].item() == 3.0
    assert f((x,), {"y": y})[0].item() == 3.0
    for call in (lambda: f(x, y), lambda: f(x, z=y), lambda: f(x)):
        with pytest.raises(ValueError, match="No imported function found"):
            call()


def test_tuple_and_dict_inputs(tmp_path):
    path = str(tmp_path / "f.mlxfn")
    a, b = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])
    mx.export_function(path, lambda a, b, c: a * b + c, (a, b), {"c": a})
    f = mx.import_function(path)
    assert f(a, b, c=a)[0].tolist() == [4.0, 10.0]


def test_bad_inputs_and_outputs(tmp_path):
    path = str(tmp_path / "f.mlxfn")
    x = mx.array(1.0)
    with pytest.raises(ValueError, match="Inputs can either be"):
        mx.export_function(path, lambda a, n: a * n, x, 3)
    with pytest.raises(ValueError, match="Inputs can either be"):
        mx.export_function(path, lambda a, n: a * n, x, n=3)
    with pytest.raises(ValueError, match="Outputs can be either"):
        mx.export_function(path, lambda a: {"o": a}, x)
    with pytest.raises(ValueError, match="Outputs can be either"):
        mx.export_function(path, lambda a: 3.0, x)


def test_multiple_outputs_and_ops(tmp_path):
    path = str(tmp_path / "m.mlxfn")
    w = mx.array(np.arange(12, dtype=np.float32).reshape(3, 4) / 10)

    def fun(x):
        h = x @ w
        a, b = mx.split(h, 2, axis=1)
        s = mx.softmax(a, axis=-1)
        idx = mx.argmax(b, axis=1)
        return [mx.sum(s * 2.0, axis=0, keepdims=True), b.T.astype(mx.float16), idx,
                mx.cumsum(h, axis=1), mx.sort(h, axis=0), h[::2, 1:3]]

    x = mx.array(np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32))
    mx.export_function(path, fun, x)
    f = mx.import_function(path)
    x2 = mx.array(np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32))
    got = f(x2)
    want = fun(x2)
    assert len(got) == len(want)
    for g, e in zip(got, want):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(_np(g), _np(e), rtol=1e-5, atol=1e-6)


def test_shapeless(tmp_path):
    path = str(tmp_path / "abs.mlxfn")
    mx.export_function(path, mx.abs, mx.array([0.0]), shapeless=True)
    f = mx.import_function(path)
    assert f(mx.array([-1.0, 2.0, -3.0]))[0].tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="No imported function found"):
        f(mx.array([[-4.0]]))  # the number of dimensions still keys
    with pytest.raises(ValueError, match="No imported function found"):
        f(mx.array([1, 2]))  # and the dtype


def test_exporter_several_traces(tmp_path):
    path = str(tmp_path / "fun.mlxfn")
    w = mx.ones((256, 256))

    def fun(x, y=None):
        out = x @ w
        return out if y is None else out + y

    with mx.exporter(path, fun) as exporter:
        exporter(mx.ones((1, 256)))
        exporter(mx.ones((2, 256)), y=mx.array(1.0))
    single = str(tmp_path / "one.mlxfn")
    mx.export_function(single, fun, mx.ones((1, 256)))
    # The 256 KiB weight is stored once for both traces.
    assert os.path.getsize(path) < os.path.getsize(single) + 64 * 1024
    f = mx.import_function(path)
    assert f(mx.ones((1, 256)))[0].shape == (1, 256)
    assert f(mx.ones((2, 256)), y=mx.array(1.0))[0][0, 0].item() == 257.0


def test_metadata(tmp_path):
    path = str(tmp_path / "m.mlxfn")
    mx.export_function(path, lambda x: x * 2, mx.array(1.0), metadata='{"dims": 4}')
    f, meta = mx.import_function(path, return_metadata=True)
    assert meta == '{"dims": 4}'
    assert f(mx.array(2.0))[0].item() == 4.0
    mx.export_function(path, lambda x: x * 2, mx.array(1.0))
    assert mx.import_function(path, return_metadata=True)[1] == ""
    with pytest.raises(ValueError, match="metadata"):
        mx.export_function(lambda d: None, lambda x: x, mx.array(1.0), metadata="m")


def test_callback_form():
    records = []
    w = mx.array([[1.0, 2.0], [3.0, 4.0]])

    def fun(x, y):
        a, b = mx.split(x @ w, 2, axis=1)
        return mx.sum(a, axis=0, keepdims=True) * y, mx.transpose(b)

    mx.export_function(records.append, fun, mx.ones((2, 2)), y=mx.array(2.0))
    types = [r["type"] for r in records]
    assert types[:4] == ["inputs", "keyword_inputs", "outputs", "constants"]
    assert set(types[4:]) == {"primitive"}
    inputs = records[0]["inputs"]
    assert [(s, d) for _, s, d in inputs] == [((2, 2), mx.float32), ((), mx.float32)]
    assert records[1]["keywords"] == [("y", inputs[1][0])]
    assert [(s, d) for _, s, d in records[2]["outputs"]] == [((1, 1), mx.float32),
                                                             ((1, 2), mx.float32)]
    consts = records[3]["constants"]
    assert any(np.array_equal(np.array(c), np.array(w)) for _, c in consts)
    names = [r["name"] for r in records[4:]]
    assert names[0] == "Matmul" and "Split" in names and "Transpose" in names
    split = next(r for r in records if r.get("name") == "Split")
    assert len(split["outputs"]) == 2
    # Values flow by name: every primitive input is an input, a constant or
    # an earlier primitive's output.
    known = {n for n, _, _ in inputs} | {n for n, _ in consts}
    for r in records[4:]:
        for n, _, _ in r["inputs"]:
            assert n in known
        known |= {n for n, _, _ in r["outputs"]}
    assert {n for n, _, _ in records[2]["outputs"]} <= known


def test_imported_functions_transform(tmp_path):
    path = str(tmp_path / "f.mlxfn")
    mx.export_function(path, lambda x: mx.sum(mx.sin(x) * x), mx.zeros((3,)))
    f = mx.import_function(path)
    x = mx.array([0.5, 1.0, 2.0])
    g = mx.grad(lambda x: f(x)[0])(x)
    np.testing.assert_allclose(np.array(g), np.cos(x) * np.array(x) + np.sin(x), rtol=1e-5)
    compiled = mx.compile(f)
    assert abs(compiled(x)[0].item() - f(x)[0].item()) < 1e-5
    per_row = mx.vmap(lambda r: f(r)[0])(mx.stack([x, 2 * x]))
    assert per_row.shape == (2,)
    assert abs(per_row[1].item() - f(2 * x)[0].item()) < 1e-4


def test_module_parameters_as_inputs(tmp_path):
    # seed §12.7's parameterised form
    path = str(tmp_path / "model.mlxfn")
    w = mx.array(np.random.default_rng(2).standard_normal((4, 4)).astype(np.float32))
    mx.eval(w)

    def call(x, **params):
        return x @ params["weight"].T

    mx.export_function(path, call, (mx.zeros(4),), {"weight": w})
    f = mx.import_function(path)
    x = mx.array([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(np.array(f(x, weight=w)[0]), np.array(w) @ np.array(x), rtol=1e-5)


def test_export_to_dot(tmp_path):
    path = str(tmp_path / "g.dot")
    x, y = mx.array(1.0), mx.array(2.0)
    mx.export_to_dot(path, mx.exp(x + y) * x, x=x, y=y)
    text = open(path).read()
    assert text.startswith("digraph {")
    assert '"x"' in text and '"y"' in text
    assert "Add" in text and "Exp" in text and "Multiply" in text
    assert "rank=sink" in text
    buf = io.StringIO()
    mx.export_to_dot(buf, mx.exp(x + y))
    assert "Exp" in buf.getvalue()


# --- Loom's extras -----------------------------------------------------------------


@pytest.mark.loom_only
def test_random_initialiser_warns(tmp_path):
    # seed §12.7: the parameters were never evaluated before export
    w = mx.random.normal((4, 4))

    def call(x):
        return x @ w

    with pytest.warns(UserWarning, match=r"mx\.eval\(model\.parameters\(\)\)"):
        mx.export_function(str(tmp_path / "m.loomfn"), call, mx.zeros((4,)))
    # The values exported are the values the array has.
    f = mx.import_function(str(tmp_path / "m.loomfn"))
    x = mx.array([1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(np.array(f(x)[0]), np.array(x @ w), rtol=1e-6)
    mx.eval(w)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mx.export_function(str(tmp_path / "n.loomfn"), call, mx.zeros((4,)))


@pytest.mark.loom_only
def test_versioned_format_refuses_clearly(tmp_path):
    path = tmp_path / "f.loomfn"
    mx.export_function(str(path), lambda x: -x, mx.array(1.0))
    data = path.read_bytes()
    assert data[:8] == b"LOOMFUNC"
    newer = bytearray(data)
    newer[8] = 7
    (tmp_path / "newer.loomfn").write_bytes(bytes(newer))
    with pytest.raises(RuntimeError, match="format version 7"):
        mx.import_function(str(tmp_path / "newer.loomfn"))
    (tmp_path / "junk.loomfn").write_bytes(b"garbage")
    with pytest.raises(RuntimeError, match="not a Loom function file|too short"):
        mx.import_function(str(tmp_path / "junk.loomfn"))
    with pytest.raises(RuntimeError, match="truncated|exceeds the file"):
        (tmp_path / "cut.loomfn").write_bytes(data[:-3])
        mx.import_function(str(tmp_path / "cut.loomfn"))
    renamed = data.replace(b"Negative", b"Negativf")
    (tmp_path / "unknown.loomfn").write_bytes(renamed)
    with pytest.raises(RuntimeError, match="'Negativf'"):
        mx.import_function(str(tmp_path / "unknown.loomfn"))


@pytest.mark.loom_only
def test_paths_and_file_objects(tmp_path):
    p = tmp_path / "f.loomfn"
    mx.export_function(p, lambda x: x + 1, mx.array(1.0))
    assert mx.import_function(p)(mx.array(2.0))[0].item() == 3.0
    buf = io.BytesIO()
    mx.export_function(buf, lambda x: x * 3, mx.array(1.0))
    buf.seek(0)
    assert mx.import_function(buf)(mx.array(2.0))[0].item() == 6.0


@pytest.mark.loom_only
def test_callback_state_by_name():
    records = []
    mx.export_function(records.append, lambda x: mx.sum(x, axis=1, keepdims=True), mx.ones((2, 3)))
    node = records[-1]
    assert node["name"] == "Sum"
    assert node["state"] == {"axes": (1,), "keepdims": True}
    assert node["arguments"] == [(1,), True]


@pytest.mark.loom_only
def test_export_compiled_inner_function(tmp_path):
    inner = mx.compile(lambda x: mx.exp(x) * 2 + 1)
    path = str(tmp_path / "c.loomfn")
    mx.export_function(path, lambda x: inner(x) - 1, mx.zeros((8,)))
    f = mx.import_function(path)
    x = mx.linspace(0, 1, 8)
    np.testing.assert_allclose(np.array(f(x)[0]), np.exp(np.array(x)) * 2, rtol=1e-6)


@pytest.mark.loom_only
def test_export_import_cycles_do_not_leak(tmp_path):
    path = str(tmp_path / "leak.loomfn")
    w = mx.ones((64, 64))
    mx.eval(w)

    def cycle():
        mx.export_function(path, lambda x: mx.split(x @ w, 2, axis=1)[1], mx.ones((4, 64)))
        f = mx.import_function(path)
        mx.eval(f(mx.ones((4, 64)))[0])
        del f

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


def test_shapeless_with_constant_operands(tmp_path):
    path = str(tmp_path / "s.mlxfn")
    mx.export_function(path, lambda x: mx.abs(x) * 2 + 1, mx.array([-1.0]), shapeless=True)
    f = mx.import_function(path)
    assert f(mx.array([-1.0, 2.0, -3.0]))[0].tolist() == [3.0, 5.0, 7.0]
    mx.export_function(path, lambda x: x.flatten(0, 1) * 2, mx.ones((2, 3, 4)), shapeless=True)
    g = mx.import_function(path)
    out = g(mx.ones((5, 5, 3)))[0]
    assert out.shape == (25, 3)
    assert np.array_equal(np.array(out), np.full((25, 3), 2.0, np.float32))


def _primitive_names(fun, *args, shapeless=False):
    names = []

    def callback(record):
        if record["type"] == "primitive":
            names.append(record["name"])

    mx.export_function(callback, fun, *args, shapeless=shapeless)
    return names


def test_export_traces_through_compile(tmp_path):
    # MLX's export sees a compiled function's ops, never a fused region: the
    # callback lists them and the file holds them.
    inner = mx.compile(lambda x: mx.exp(x) * 2 + x)
    names = _primitive_names(lambda x: inner(x) - 1, mx.zeros((2, 3)))
    assert "Compiled" not in names
    assert {"Exp", "Multiply", "Add", "Subtract"} <= set(names), names
    path = str(tmp_path / "c.mlxfn")
    mx.export_function(path, lambda x: inner(x) - 1, mx.zeros((2, 3)))
    x = mx.array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    got = mx.import_function(path)(x)[0]
    np.testing.assert_allclose(_np(got), np.exp(_np(x)) * 2 + _np(x) - 1, rtol=1e-6)


def test_export_gradient_function(tmp_path):
    # A gradient exports as the backward graph and imports as a function of
    # the primals (fast primitives included: Loom exports their VJP nodes).
    def loss(x, w):
        h = mx.fast.rms_norm(x @ w, mx.ones((4,)), 1e-5)
        q = h.reshape(1, 1, 3, 4)
        o = mx.fast.scaled_dot_product_attention(q, q, q, scale=0.5)
        return (mx.softmax(o, axis=-1) * mx.sin(h)).sum()

    g = mx.grad(loss, argnums=(0, 1))
    rng = np.random.default_rng(3)
    x = mx.array(rng.normal(size=(3, 5)).astype(np.float32))
    w = mx.array(rng.normal(size=(5, 4)).astype(np.float32))
    path = str(tmp_path / "g.mlxfn")
    mx.export_function(path, g, x, w)
    f = mx.import_function(path)
    x2, w2 = x * 0.5 + 0.1, w * 1.5
    for got, want in zip(f(x2, w2), g(x2, w2)):
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-4, atol=1e-5)
    vg = mx.value_and_grad(lambda x: loss(x, w))
    mx.export_function(path, vg, x)
    (value, grad_x) = mx.import_function(path)(x2)
    want_value, want_grad = vg(x2)
    np.testing.assert_allclose(value.item(), want_value.item(), rtol=1e-5)
    np.testing.assert_allclose(_np(grad_x), _np(want_grad), rtol=1e-4, atol=1e-5)


def test_shapeless_mean_and_var_count_new_shapes(tmp_path):
    # The divisor of mean/var follows the shape of each call (MLX's
    # NumberOfElements), in export and in compile.
    def stats(a):
        return [mx.mean(a, axis=0), mx.var(a), mx.std(a, axis=1, ddof=1),
                mx.mean(a, axis=1, keepdims=True)]

    path = str(tmp_path / "m.mlxfn")
    mx.export_function(path, stats, mx.ones((3, 4)), shapeless=True)
    f = mx.import_function(path)
    compiled = mx.compile(stats, shapeless=True)
    compiled(mx.ones((3, 4)))
    assert "NumberOfElements" in _primitive_names(stats, mx.ones((3, 4)), shapeless=True)
    assert "NumberOfElements" not in _primitive_names(stats, mx.ones((3, 4)))
    rng = np.random.default_rng(4)
    # (A dimension that becomes 1: test_export_shapeless.py, Loom only.)
    for shape in [(3, 4), (5, 2), (6, 3), (2, 9)]:
        x = rng.normal(size=shape).astype(np.float32)
        want = [x.mean(axis=0), x.var(), x.std(axis=1, ddof=1), x.mean(axis=1, keepdims=True)]
        for outs in (f(mx.array(x)), compiled(mx.array(x))):
            for got, w in zip(outs, want):
                assert got.shape == w.shape
                np.testing.assert_allclose(_np(got), w, rtol=1e-5, atol=1e-6)
    grads = mx.grad(mx.compile(lambda a: mx.mean(a * a), shapeless=True))
    grads(mx.ones((3,)))
    np.testing.assert_allclose(_np(grads(mx.ones((5,)))), np.full(5, 0.4, np.float32), rtol=1e-6)


@pytest.mark.loom_only
def test_export_mlxfn_round_trip_and_refusals(tmp_path):
    # Loom extra: MLX's own layout (fixtures/mlxfn/loom_*.mlxfn are read by
    # MLX's wheel in the oracle run of test_mlxfn.py).
    path = tmp_path / "f.mlxfn"
    fun = lambda a, b: [mx.softmax(a @ b, axis=-1), (a * 2).sum(axis=0)]
    a, b = mx.ones((2, 3)), mx.ones((3, 4))
    mx.export_mlxfn(path, fun, a, b)
    raw = path.read_bytes()
    assert raw[:14] == b"\x06\x00\x00\x00\x00\x00\x00\x000.32.4"
    for got, want in zip(mx.import_function(str(path))(a, b), fun(a, b)):
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-6)
    # A primitive the writer does not map is named, and the file is untouched.
    with pytest.raises(ValueError, match="Cannot write the primitive FFT in MLX's .mlxfn"):
        mx.export_mlxfn(path, lambda x: mx.fft.rfft(x), a)
    assert path.read_bytes() == raw
    with pytest.raises(ValueError, match="shapeless"):
        mx.export_mlxfn(path, lambda x: x * 2, a, shapeless=True)


@pytest.mark.loom_only
def test_export_mlxfn_cycles_do_not_leak(tmp_path):
    path = str(tmp_path / "leak.mlxfn")
    w = mx.ones((64, 64))
    mx.eval(w)

    def cycle():
        mx.export_mlxfn(path, lambda x: mx.fast.rms_norm(x @ w, None, 1e-5).sum(axis=0), mx.ones((4, 64)))
        f = mx.import_function(path)
        mx.eval(f(mx.ones((4, 64)))[0])
        del f

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
