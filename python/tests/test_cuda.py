"""The CUDA backend: device discovery, residency (host-built data used by GPU
ops and read back), element-wise kernels against the CPU, streams and events
across CPU and GPU, the CPU fallback, device memory statistics, out-of-memory
recovery and leaks.

Tests that need a GPU skip with the reason printed where none is present (this
machine and CI); scripts/gpu.sh runs them on the device machine.
"""

import gc
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from _backend import IS_MLX, mx

HAS_GPU = mx.is_available(mx.gpu)
needs_gpu = pytest.mark.skipif(
    not HAS_GPU, reason="no GPU here: the CUDA backend found no device (run scripts/gpu.sh)"
)


def test_backend_modules_agree_with_is_available():
    assert mx.cuda.is_available() == mx.is_available(mx.gpu)
    assert mx.metal.is_available() is False


def test_default_device_is_gpu_when_present():
    # Without LOOM_TEST_DEVICE the default follows the hardware; the suite may
    # have switched it, so only check that it is a device that exists.
    assert mx.is_available(mx.default_device())
    if not HAS_GPU:
        assert mx.device_count(mx.gpu) == 0
        assert mx.device_info(mx.gpu) == {}


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU")
def test_gpu_stream_without_gpu_raises():
    with pytest.raises((ValueError, RuntimeError)):
        mx.new_stream(mx.gpu)


@needs_gpu
def test_device_info_keys():
    info = mx.device_info(mx.gpu)
    assert isinstance(info["device_name"], str) and info["device_name"]
    assert info["architecture"].startswith("sm_")
    assert info["total_memory"] > 0


@needs_gpu
def test_host_built_array_feeds_gpu_op_and_reads_back():
    rng = np.random.default_rng(0)
    host = rng.standard_normal((257, 33)).astype(np.float32)
    a = mx.array(host)
    b = mx.exp(a, stream=mx.gpu) + 1
    np.testing.assert_allclose(np.array(b), np.exp(host) + 1, rtol=1e-5, atol=1e-6)
    assert b.item() if b.size == 1 else True
    assert float(mx.sum(b, stream=mx.gpu).item()) == pytest.approx(float((np.exp(host) + 1).sum()), rel=1e-4)


UNARY = ["abs", "negative", "square", "sqrt", "exp", "log", "sin", "cos", "tanh", "sigmoid",
         "floor", "ceil", "erf", "expm1", "log2", "log10", "arcsin", "arctan", "sinh"]


@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_gpu_matches_cpu(name, dtype):
    if dtype == "float64" and IS_MLX:
        pytest.skip("MLX has no float64 on the GPU")
    rng = np.random.default_rng(1)
    x = mx.array(rng.uniform(0.1, 0.9, (64, 129)).astype(np.float32)).astype(getattr(mx, dtype))
    f = getattr(mx, name)
    g = f(x, stream=mx.gpu)
    c = f(x, stream=mx.cpu)
    tol = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1e-2}[dtype]
    np.testing.assert_allclose(np.array(g.astype(mx.float32)), np.array(c.astype(mx.float32)),
                               rtol=tol, atol=tol)


BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "equal",
          "less", "greater_equal", "logical_and", "floor_divide", "remainder", "arctan2"]


@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "uint8", "int64", "bool_"])
@pytest.mark.parametrize("name", BINARY)
def test_binary_gpu_matches_cpu_with_broadcasting(name, dtype):
    rng = np.random.default_rng(2)
    a = mx.array(rng.integers(1, 9, (16, 1, 37)).astype(np.float32)).astype(getattr(mx, dtype))
    b = mx.array(rng.integers(1, 9, (5, 37)).astype(np.float32)).astype(getattr(mx, dtype))
    f = getattr(mx, name)
    try:
        c = f(a, b, stream=mx.cpu)
        mx.eval(c)
    except (ValueError, TypeError):
        pytest.skip(f"{name} does not take {dtype}")
    g = f(a, b, stream=mx.gpu)
    tol = {"float16": 2e-3, "bfloat16": 1e-2}.get(dtype, 1e-5)
    np.testing.assert_allclose(np.array(g.astype(mx.float32)), np.array(c.astype(mx.float32)),
                               rtol=tol, atol=tol)
    assert g.dtype == c.dtype


@needs_gpu
def test_strided_views_and_where_on_gpu():
    x = mx.arange(24, dtype=mx.float32).reshape(4, 6)
    t = mx.transpose(x)[1:, ::2]
    y = mx.where(t > 5, t, -t, stream=mx.gpu)
    tn = np.arange(24, dtype=np.float32).reshape(4, 6).T[1:, ::2]
    np.testing.assert_array_equal(np.array(y), np.where(tn > 5, tn, -tn))


@needs_gpu
def test_casts_on_gpu():
    x = mx.array([-2.5, -0.0, 0.5, 1.5, 3.0e4])
    for dt in (mx.float16, mx.bfloat16, mx.float64, mx.bool_):
        np.testing.assert_array_equal(np.array(x.astype(dt, stream=mx.gpu).astype(mx.float32)),
                                      np.array(x.astype(dt, stream=mx.cpu).astype(mx.float32)))
    i = mx.array([1, -2, 300], dtype=mx.int32)
    np.testing.assert_array_equal(np.array(i.astype(mx.uint8, stream=mx.gpu)),
                                  np.array(i.astype(mx.uint8, stream=mx.cpu)))


@needs_gpu
def test_ops_without_gpu_kernel_run_on_cpu_transparently():
    rng = np.random.default_rng(3)
    host = rng.standard_normal(1000).astype(np.float32)
    a = mx.exp(mx.array(host), stream=mx.gpu)  # device-resident
    s = mx.sort(a, stream=mx.gpu)  # falls back to the CPU if no GPU sort
    c = mx.cumsum(s, stream=mx.gpu)
    np.testing.assert_allclose(np.array(c), np.cumsum(np.sort(np.exp(host))), rtol=1e-4)


@needs_gpu
def test_matmul_and_reductions_on_gpu():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((64, 96)).astype(np.float32)
    b = rng.standard_normal((96, 48)).astype(np.float32)
    out = mx.matmul(mx.array(a), mx.array(b), stream=mx.gpu)
    np.testing.assert_allclose(np.array(out), a @ b, rtol=2e-2, atol=2e-2)
    s = mx.sum(mx.array(a), axis=1, stream=mx.gpu)
    np.testing.assert_allclose(np.array(s), a.sum(axis=1), rtol=1e-4, atol=1e-4)
    m = mx.argmax(mx.array(a), axis=0, stream=mx.gpu)
    np.testing.assert_array_equal(np.array(m), a.argmax(axis=0))


@needs_gpu
def test_cross_device_dependencies_are_automatic():
    # Seed §1.3: each op picks its device; data dependencies across devices
    # need no user action.
    a = mx.random.uniform(shape=(4096, 64))
    b = mx.random.uniform(shape=(64, 4096))
    c = mx.exp(a, stream=mx.gpu)
    d = mx.sum(c, axis=1, stream=mx.cpu)
    e = mx.multiply(d, 2, stream=mx.gpu)
    ref = 2 * np.exp(np.array(a)).sum(axis=1)
    np.testing.assert_allclose(np.array(e), ref, rtol=1e-4)
    s_gpu = mx.new_stream(mx.gpu)
    s_cpu = mx.new_stream(mx.cpu)
    x = mx.add(b, 1, stream=s_gpu)
    y = mx.multiply(x, 3, stream=s_cpu)
    z = mx.subtract(y, x, stream=s_gpu)
    np.testing.assert_allclose(np.array(z), 2 * (np.array(b) + 1), rtol=1e-6)
    mx.synchronize(s_gpu)


@needs_gpu
def test_async_eval_then_read_waits_for_the_kernel():
    x = mx.ones((1 << 22,))
    y = x
    for _ in range(20):
        y = mx.add(y, 1, stream=mx.gpu)
    mx.async_eval(y)
    assert float(y[0].item()) == 21.0
    assert float(mx.sum(y).item()) == 21.0 * (1 << 22)


@needs_gpu
def test_random_bits_identical_on_cpu_and_gpu():
    key = mx.random.key(7)
    for f in (lambda s: mx.random.uniform(shape=(1000,), key=key, stream=s),
              lambda s: mx.random.normal(shape=(33, 7), key=key, stream=s),
              lambda s: mx.random.bits(shape=(100,), key=key, stream=s)):
        # Normals: the GPU's logarithm may differ from glibc's logf by an ulp
        # (test_cuda_gather_random.py); bits and uniforms are identical.
        np.testing.assert_allclose(np.array(f(mx.gpu)), np.array(f(mx.cpu)), rtol=2e-6, atol=2e-6)
    for f in (lambda s: mx.random.uniform(shape=(1000,), key=key, stream=s),
              lambda s: mx.random.bits(shape=(100,), key=key, stream=s)):
        np.testing.assert_array_equal(np.array(f(mx.gpu)), np.array(f(mx.cpu)))


def _exit_cleanly_many_times(code, runs):
    """Runs `code` in `runs` interpreters at once (the load makes exit races
    likelier) and checks each ended with status 0 after printing "bye"."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.abspath(__file__)) + os.pathsep + env.get(
        "PYTHONPATH", "")
    env["LOOM_CUDA_FALLBACK_WARN"] = "0"
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(runs)]
    results = [(p.communicate(timeout=120), p.returncode) for p in procs]
    failed = [(rc, err[-1500:]) for (out, err), rc in results if rc != 0 or out.strip() != "bye"]
    assert not failed, f"{len(failed)} of {runs} runs did not exit cleanly: {failed[0]}"


@needs_gpu
def test_interpreter_exit_with_daemon_threads_on_the_gpu():
    # Daemon threads still launching kernels (GEMMs through cuBLAS, kernels
    # built by NVRTC), allocating and reading back while the interpreter
    # exits: exit() tears cuBLAS, NVRTC and the CUDA runtime down under them.
    # This crashed in 2 of 12 runs on an H200 before the exit gate
    # (backend/cuda/exit_gate.cpp); 16 runs at once catch it.
    _exit_cleanly_many_times("""
        import threading, time
        from _backend import mx
        started = threading.Barrier(4)
        def work(seed):
            a = mx.random.normal((384, 384), key=mx.random.key(seed), stream=mx.gpu)
            started.wait()
            n = 0
            while True:
                n += 1
                with mx.stream(mx.gpu):
                    b = mx.take(a, mx.array([1, 2]), axis=0) * (n % 7)
                    mx.eval(a @ a, mx.exp(a).sum(), b)
                    b.tolist()
        for i in range(3):
            threading.Thread(target=work, args=(i,), daemon=True).start()
        started.wait()
        time.sleep(0.3)
        print("bye")
    """, 16)


@needs_gpu
def test_interpreter_exit_after_ordinary_gpu_use():
    # No daemon threads: arrays alive at exit, a refused allocation, work
    # queued and not waited for. Stream workers and their completion
    # threads wind down while exit() runs (a completion thread destroying
    # its events under the runtime's teardown crashed the process).
    _exit_cleanly_many_times("""
        from _backend import mx
        small = mx.arange(10).astype(mx.float32)
        mx.eval(small)
        previous = mx.set_memory_limit(1 << 20)
        try:
            mx.eval(mx.zeros((1 << 22,)) + small[0])
        except RuntimeError:
            pass
        mx.set_memory_limit(previous)
        s = mx.new_stream(mx.gpu)
        a = mx.random.normal((512, 512), key=mx.random.key(1))
        kept = [a @ a, mx.sum(mx.exp(a), stream=s), mx.cumsum(a, axis=1)]
        mx.async_eval(kept)
        print("bye")
    """, 16)


@needs_gpu
def test_eight_threads_drive_gpu_streams():
    errors = []
    results = [None] * 8

    def work(i):
        try:
            s = mx.new_stream(mx.gpu)
            x = mx.full((1000,), float(i))
            for _ in range(50):
                x = mx.add(x, 1.0, stream=s)
            results[i] = float(mx.sum(x, stream=s).item())
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert results == [1000.0 * (i + 50) for i in range(8)]


@needs_gpu
def test_gpu_out_of_memory_is_a_clear_error_and_recoverable(restore_limits):
    mx.synchronize()
    mx.set_memory_limit(1 << 30)
    with pytest.raises(RuntimeError, match="(?i)memory"):
        # a broadcast view allocates nothing: the 2 GiB output is the request
        big = mx.broadcast_to(mx.array(1.0), (1 << 29,))
        mx.eval(mx.add(big, 1, stream=mx.gpu))
    mx.set_memory_limit(restore_limits[0])
    ok = mx.add(mx.ones((1024,)), 1, stream=mx.gpu)
    assert float(mx.sum(ok).item()) == 2048.0


@needs_gpu
def test_device_memory_returns_to_baseline():
    def cycle():
        a = mx.exp(mx.ones((256, 1024)), stream=mx.gpu)
        b = mx.multiply(a, a, stream=mx.gpu)
        mx.eval(b)
        return float(b[0, 0].item())

    for _ in range(3):
        cycle()
    gc.collect()
    mx.synchronize()
    base = mx.get_active_memory()
    for _ in range(30):
        cycle()
        gc.collect()
        mx.synchronize()
        assert mx.get_active_memory() == base
    mx.clear_cache()


def test_metal_module_is_absent_but_its_memory_names_forward(capfd):
    # As MLX's Linux wheels: the deprecated mx.metal memory functions forward
    # to the top-level ones and say so on stderr.
    assert mx.metal.get_active_memory() == mx.get_active_memory()
    assert mx.metal.get_cache_memory() == mx.get_cache_memory()
    assert mx.metal.device_info() == {}
    old = mx.metal.set_cache_limit(1 << 30)
    assert mx.set_cache_limit(old) == 1 << 30
    assert mx.metal.start_capture("trace.gputrace") is None
    assert mx.metal.stop_capture() is None
    err = capfd.readouterr().err
    assert "mx.metal.get_active_memory is deprecated" in err


@pytest.mark.loom_only
def test_cudnn_is_looked_for_in_the_nvidia_wheel(tmp_path):
    # PyTorch and JAX install cuDNN as the nvidia-cudnn wheel, off the loader's
    # path; importing Loom points LOOM_CUDNN_PATH at it (a user's value wins).
    lib = tmp_path / "nvidia" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcudnn.so.9").write_bytes(b"")
    code = "import os, loom.core; print(os.environ.get('LOOM_CUDNN_PATH', ''))"
    env = {k: v for k, v in os.environ.items() if k != "LOOM_CUDNN_PATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path)] + sys.path)
    found = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=60)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == str(lib / "libcudnn.so.9")
    env["LOOM_CUDNN_PATH"] = "/elsewhere/libcudnn.so.9"
    kept = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert kept.stdout.strip() == "/elsewhere/libcudnn.so.9"
