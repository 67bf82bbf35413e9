"""GPU launch paths of issue 13's speed work: tasks run on the evaluating thread
hold their completion signal back until the graph is scheduled, an eval waits
for the device on its own thread, large kernels launch there too, and kernels
are looked up without building their names. Each test checks values against
NumPy where a held-back signal, a stale kernel-cache entry or a missed wait
would show.

Tests that need a GPU skip with the reason printed where none is present.
"""

import threading

import numpy as np
import pytest

from _backend import mx

HAS_GPU = mx.is_available(mx.gpu)
needs_gpu = pytest.mark.skipif(
    not HAS_GPU, reason="no GPU here: the CUDA backend found no device (run scripts/gpu.sh)"
)


@needs_gpu
def test_eval_each_chain_of_scalar_adds():
    y = mx.zeros((16,), stream=mx.gpu)
    for _ in range(300):
        y = mx.add(y, 1.0, stream=mx.gpu)
        mx.eval(y)
    np.testing.assert_array_equal(np.array(y), np.full(16, 300.0, np.float32))


@needs_gpu
def test_chain_crossing_streams_in_one_eval():
    # GPU nodes run inline and hold their signal back; the CPU node waits on
    # it from the CPU worker, the last GPU node on the CPU node.
    x = mx.array(np.arange(32, dtype=np.float32))
    y = x
    for _ in range(50):
        y = mx.add(y, 1.0, stream=mx.gpu)
    z = mx.multiply(y, 2.0, stream=mx.cpu)
    w = mx.subtract(z, 3.0, stream=mx.gpu)
    mx.eval(w)
    np.testing.assert_array_equal(np.array(w), (np.arange(32) + 50.0) * 2 - 3)


@needs_gpu
def test_async_eval_then_consumers_on_both_devices():
    x = mx.array(np.ones((64,), np.float32))
    y = x
    for _ in range(40):
        y = mx.multiply(y, 1.5, stream=mx.gpu)
    mx.async_eval(y)
    c = mx.sum(y, stream=mx.cpu)
    g = mx.add(y, 1.0, stream=mx.gpu)
    mx.eval(c, g)
    expect = np.float32(1.5) ** 40
    np.testing.assert_allclose(np.array(g), np.full(64, expect + 1, np.float32), rtol=1e-6)
    assert abs(c.item() - 64 * expect) / (64 * expect) < 1e-6


@needs_gpu
def test_large_outputs_launched_by_the_evaluating_thread():
    rng = np.random.default_rng(3)
    host = rng.standard_normal((1 << 20,)).astype(np.float32)
    a = mx.array(host)
    b = mx.exp(mx.multiply(a, 0.5, stream=mx.gpu), stream=mx.gpu)
    c = mx.add(b, a, stream=mx.gpu)
    mx.eval(c)
    np.testing.assert_allclose(np.array(c), np.exp(host * 0.5) + host, rtol=1e-6, atol=1e-6)
    mx.synchronize()


@needs_gpu
def test_kernel_cache_keeps_dtypes_and_layouts_apart():
    rng = np.random.default_rng(4)
    base = rng.standard_normal((8, 12)).astype(np.float32)
    for dt in (mx.float32, mx.float16, mx.bfloat16):
        a = mx.array(base).astype(dt)
        cases = {
            "dense": a,
            "transposed": mx.transpose(a),
            "scalar": mx.array(2.0, dtype=dt),
        }
        for name, x in cases.items():
            got = mx.add(x, x, stream=mx.gpu)
            want = mx.add(x, x, stream=mx.cpu)
            np.testing.assert_array_equal(
                np.array(got.astype(mx.float32)), np.array(want.astype(mx.float32)), err_msg=name
            )


@needs_gpu
def test_fused_kernel_cache_per_region_shape():
    def f(x, y):
        return mx.tanh(x) * y + 1

    def g(x, y):
        return mx.tanh(x) - y * 2

    cf, cg = mx.compile(f), mx.compile(g)
    rng = np.random.default_rng(5)
    for dt in (mx.float32, mx.float16):
        x = mx.array(rng.standard_normal((33, 65)).astype(np.float32)).astype(dt)
        y = mx.array(rng.standard_normal((65,)).astype(np.float32)).astype(dt)
        with mx.stream(mx.gpu):
            outs = [cf(x, y), cg(x, y), cf(x, x), cg(y, y)]
        with mx.stream(mx.cpu):
            refs = [f(x, y), g(x, y), f(x, x), g(y, y)]
        for o, r in zip(outs, refs):
            np.testing.assert_allclose(
                np.array(o.astype(mx.float32)), np.array(r.astype(mx.float32)), rtol=2e-3, atol=2e-3
            )


@needs_gpu
def test_threads_evaluating_chains_on_one_gpu_stream():
    errors = []

    def work(k):
        try:
            y = mx.full((8,), float(k), stream=mx.gpu)
            for i in range(200):
                y = mx.add(y, 1.0, stream=mx.gpu)
                if i % 7 == 0:
                    mx.eval(y)
            mx.eval(y)
            if not np.array_equal(np.array(y), np.full(8, k + 200.0, np.float32)):
                errors.append((k, np.array(y)))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((k, e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
