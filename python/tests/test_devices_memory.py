"""Devices, streams and the memory API (seed sections 10 and 1.5) on a
machine with a CPU and no GPU."""

import gc
import threading

import pytest

from _backend import expected_default_device, mx

# --- devices ------------------------------------------------------------------------


def test_device_types_and_devices():
    assert mx.cpu == mx.DeviceType.cpu and mx.gpu == mx.DeviceType.gpu
    assert sorted(mx.DeviceType.__members__) == ["cpu", "gpu"]
    d = mx.Device(mx.cpu)
    assert d == mx.Device(mx.cpu, 0) == mx.Device(mx.DeviceType.cpu)
    assert d.type == mx.cpu
    assert d == mx.cpu  # a device compares equal to its type's device 0
    assert repr(d) == str(d) == "Device(cpu, 0)"
    assert repr(mx.Device(mx.gpu)) == "Device(gpu, 0)"
    assert d != mx.Device(mx.gpu)


def test_default_device_is_the_cpu():
    # The CPU unless a GPU is present (then the GPU, as MLX's CUDA wheel).
    assert mx.default_device() == expected_default_device()


def test_availability_and_counts():
    assert mx.is_available(mx.cpu) is True
    assert mx.is_available(mx.Device(mx.cpu)) is True
    assert mx.device_count(mx.cpu) == 1
    assert mx.is_available(mx.gpu) is (mx.device_count(mx.gpu) > 0)


def test_device_info():
    for info in (mx.device_info(), mx.device_info(mx.Device(mx.cpu)), mx.device_info(mx.cpu)):
        assert isinstance(info, dict)
        assert isinstance(info["device_name"], str) and info["device_name"]
        assert isinstance(info["architecture"], str) and info["architecture"]
        assert all(isinstance(k, str) and isinstance(v, (str, int)) for k, v in info.items())
    # free_memory moves with whatever else runs on the device (other test
    # workers share the GPU); every other key describes the device itself.
    def fixed(info):
        return {k: v for k, v in info.items() if k != "free_memory"}

    assert fixed(mx.device_info()) == fixed(mx.device_info(mx.default_device()))


@pytest.mark.skipif(mx.is_available(mx.gpu), reason="this machine has a GPU")
def test_gpu_requests_fail_clearly_without_a_gpu():
    with pytest.raises(ValueError, match="gpu"):
        mx.new_stream(mx.gpu)
    with pytest.raises(ValueError, match="gpu"):
        mx.default_stream(mx.gpu)
    with pytest.raises(ValueError, match="gpu"):
        mx.set_default_device(mx.gpu)
    with pytest.raises(ValueError, match="gpu"):
        mx.add(mx.array(1), mx.array(2), stream=mx.gpu)
    assert mx.default_device() == mx.Device(mx.cpu)


def test_set_default_device(restore_default_stream):
    mx.set_default_device(mx.cpu)
    assert mx.default_device() == mx.Device(mx.cpu)
    mx.set_default_device(mx.Device(mx.cpu))
    assert (mx.array([1, 2]) + 1).tolist() == [2, 3]


# --- streams ------------------------------------------------------------------------


def test_stream_objects():
    s = mx.default_stream(mx.cpu)
    assert isinstance(s, mx.Stream)
    assert s.device == mx.Device(mx.cpu)
    assert s == mx.default_stream(mx.Device(mx.cpu))
    if mx.default_device() == mx.Device(mx.cpu):
        assert s == mx.default_stream(mx.default_device())
    assert repr(s).startswith("Stream(Device(cpu, 0), ")
    n = mx.new_stream(mx.cpu)
    assert isinstance(n, mx.Stream) and n.device == mx.Device(mx.cpu)
    assert n != s and n != mx.new_stream(mx.cpu)
    with pytest.raises(AttributeError):
        n.device = mx.Device(mx.cpu)  # read-only
    with pytest.raises(TypeError):
        mx.Stream(mx.cpu)  # streams come from new_stream


def test_thread_local_and_thread_unsafe_streams():
    tl = mx.new_thread_local_stream(mx.cpu)
    assert isinstance(tl, mx.ThreadLocalStream)
    assert not isinstance(tl, mx.Stream)
    assert tl.device == mx.Device(mx.cpu)
    assert mx.add(mx.array(1), mx.array(2), stream=tl).item() == 3
    with mx.stream(tl):
        assert (mx.array(2) * 3).item() == 6
    u = mx.new_thread_unsafe_stream(mx.cpu)
    assert isinstance(u, mx.Stream)
    assert mx.add(mx.array(1), mx.array(2), stream=u).item() == 3


def test_stream_argument_forms():
    a, b = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])
    for s in (mx.cpu, mx.Device(mx.cpu), mx.default_stream(mx.cpu), mx.new_stream(mx.cpu), None):
        assert mx.add(a, b, stream=s).tolist() == [4.0, 6.0]
        assert mx.zeros((2,), stream=s).tolist() == [0.0, 0.0]
        assert mx.sum(a, stream=s).item() == 3.0


def test_stream_context_manager(restore_default_stream):
    outer = mx.default_stream(mx.cpu)
    s = mx.new_stream(mx.cpu)
    with mx.stream(s):
        assert mx.default_stream(mx.cpu) == s
        assert mx.default_device() == mx.Device(mx.cpu)
        y = mx.array([1, 2]) + 1
    assert mx.default_stream(mx.cpu) == outer
    assert y.tolist() == [2, 3]
    with mx.stream(mx.cpu):
        assert mx.default_device() == mx.Device(mx.cpu)
        z = mx.exp(mx.array(0.0))
    assert z.item() == 1.0
    with pytest.raises(TypeError):
        mx.stream()


def test_set_default_stream(restore_default_stream):
    s = mx.new_stream(mx.cpu)
    mx.set_default_stream(s)
    assert mx.default_stream(mx.cpu) == s
    assert (mx.array([1]) + 1).tolist() == [2]


def test_synchronize_forms():
    x = mx.exp(mx.ones((1000,)))
    mx.async_eval(x)
    assert mx.synchronize() is None
    assert mx.synchronize(mx.cpu) is None
    assert mx.synchronize(mx.Device(mx.cpu)) is None
    assert mx.synchronize(mx.default_stream(mx.cpu)) is None
    s = mx.new_stream(mx.cpu)
    y = mx.add(x, 1, stream=s)
    mx.async_eval(y)
    mx.synchronize(s)
    assert abs(y[0].item() - 3.718282) < 1e-5


def test_clear_streams_in_a_thread():
    result = {}

    def worker():
        try:
            s = mx.new_stream(mx.cpu)
            result["before"] = mx.add(mx.array(1), mx.array(2), stream=s).item()
            mx.clear_streams()
            # the default stream comes back; the cleared one is gone
            result["after"] = (mx.array(2) * 3).item()
            try:
                mx.add(mx.array(1), mx.array(2), stream=s).item()
            except RuntimeError as e:
                result["cleared"] = str(e)
        except Exception as e:  # reported to the main thread below
            result["error"] = repr(e)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert "error" not in result, result
    assert result["before"] == 3 and result["after"] == 6
    assert "in current thread" in result["cleared"]


# --- memory -------------------------------------------------------------------------

SLACK = 4096  # small allocations (random keys, scalars) that come and go


def _settle():
    gc.collect()
    mx.synchronize()


def test_memory_function_types(restore_limits):
    for fn in (mx.get_active_memory, mx.get_peak_memory, mx.get_cache_memory, mx.get_memory_limit):
        v = fn()
        assert isinstance(v, int) and v >= 0, fn
    assert mx.reset_peak_memory() is None
    assert mx.clear_cache() is None


def test_active_memory_tracks_allocations(restore_limits):
    _settle()
    base = mx.get_active_memory()
    n = 1 << 20
    x = mx.full((n,), 2.0) + 0
    assert mx.get_active_memory() <= base + SLACK  # recorded, not allocated
    mx.eval(x)
    assert mx.get_active_memory() >= base + 4 * n - SLACK
    del x
    _settle()
    assert mx.get_active_memory() <= base + SLACK


def test_peak_memory_is_a_high_water_mark(restore_limits):
    _settle()
    mx.reset_peak_memory()
    p0 = mx.get_peak_memory()
    sizes = [1 << 16, 1 << 18, 1 << 17]
    peaks = []
    for n in sizes:
        x = mx.zeros((n,)) + 1
        mx.eval(x)
        peaks.append(mx.get_peak_memory())
        assert mx.get_peak_memory() >= mx.get_active_memory()
        assert mx.get_peak_memory() >= 4 * n
        del x
    assert p0 <= peaks[0] <= peaks[1] <= peaks[2]  # never decreases
    assert peaks[2] == peaks[1]  # a smaller allocation does not raise it
    mx.reset_peak_memory()
    assert mx.get_peak_memory() < peaks[1]
    y = mx.zeros((1 << 16,)) + 1
    mx.eval(y)
    assert mx.get_peak_memory() >= 4 * (1 << 16)


def test_freed_buffers_go_to_the_cache_and_clear_cache_empties_it(restore_limits):
    mx.set_cache_limit(1 << 30)
    _settle()
    mx.clear_cache()
    assert mx.get_cache_memory() == 0
    x = mx.zeros((1 << 20,)) + 1
    mx.eval(x)
    active = mx.get_active_memory()
    del x
    _settle()
    assert mx.get_active_memory() <= active - 4 * (1 << 20) + SLACK
    assert mx.get_cache_memory() >= 4 * (1 << 20)
    mx.clear_cache()
    assert mx.get_cache_memory() == 0


def test_cache_limit(restore_limits):
    _settle()
    mx.clear_cache()
    mx.set_cache_limit(0)  # 0 disables the cache
    x = mx.zeros((1 << 18,)) + 1
    mx.eval(x)
    del x
    _settle()
    assert mx.get_cache_memory() == 0
    mx.set_cache_limit(1 << 20)
    y = mx.zeros((1 << 20,)) + 1  # 4 MiB: larger than the cache limit
    mx.eval(y)
    del y
    _settle()
    assert mx.get_cache_memory() <= 1 << 20


def test_set_limits_return_previous_values(restore_limits):
    memory_limit, cache_limit = restore_limits
    assert mx.get_memory_limit() == memory_limit
    assert mx.set_memory_limit(123456789) == memory_limit
    assert mx.get_memory_limit() == 123456789
    assert mx.set_memory_limit(memory_limit) == 123456789
    assert mx.set_cache_limit(4096) == cache_limit
    assert mx.set_cache_limit(cache_limit) == 4096
    previous_wired = mx.set_wired_limit(0)
    assert isinstance(previous_wired, int) and previous_wired >= 0


def test_seed_memory_report_pattern(restore_limits):
    mx.set_cache_limit(1 << 30)

    def report():
        return mx.get_active_memory(), mx.get_cache_memory(), mx.get_peak_memory()

    _settle()
    mx.clear_cache()
    x = mx.random.normal((512, 512))
    mx.eval(x)
    active, cache, peak = report()
    del x
    _settle()
    active2, cache2, _ = report()
    assert active2 <= active - 512 * 512 * 4 + SLACK  # active drops
    assert cache2 >= cache + 512 * 512 * 4 - SLACK  # cache does not
    mx.clear_cache()
    assert mx.get_cache_memory() == 0
    assert peak >= active
