"""Threads: independent graphs evaluated concurrently from two Python threads,
and the thread affinity of streams (seed section 10.4)."""

import re

import numpy as np
import pytest

from _backend import mx
from _helpers import run_threads as _run_threads

AFFINITY_MESSAGE = r"There is no Stream\(cpu, \d+\) in current thread"


def _graph(seed, n=64, steps=50):
    """A graph built and evaluated entirely by the calling thread."""
    rng = np.random.default_rng(seed)
    an = (rng.uniform(-1, 1, size=(n, n)) * 0.1).astype(np.float32)  # contractive: no chaos
    bn = rng.uniform(-1, 1, size=(n,)).astype(np.float32)
    a, b = mx.array(an), mx.array(bn)
    x, xn = b, bn.astype(np.float64)
    for _ in range(steps):
        x = mx.tanh(a @ x + 0.5)
        xn = np.tanh(an.astype(np.float64) @ xn + 0.5)
    mx.eval(x)
    return np.array(x), xn


def test_two_threads_evaluate_independent_graphs():
    results = {}

    def worker(name, seed, own_stream):
        def run():
            if own_stream:
                s = mx.new_stream(mx.cpu)
                with mx.stream(s):
                    for i in range(5):
                        results[(name, i)] = _graph(seed + i)
            else:
                for i in range(5):
                    results[(name, i)] = _graph(seed + i)

        return run

    _run_threads([worker("own-stream", 100, True), worker("default-stream", 200, False)])
    assert len(results) == 10
    for key, (got, expected) in results.items():
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, err_msg=str(key))


def test_threads_with_transforms_and_random_keys():
    results = {}

    def worker(name, seed):
        def run():
            key = mx.random.key(seed)
            w = mx.random.normal((16,), key=key)
            xs = mx.random.normal((32, 16), key=mx.random.split(key)[0])
            g = mx.vmap(mx.grad(lambda w, x: mx.sum(mx.tanh(w * x))), in_axes=(None, 0))(w, xs)
            loss, dw = mx.value_and_grad(lambda w: mx.mean(mx.square(xs @ w)))(w)
            mx.eval(g, loss, dw)
            results[name] = (np.array(w), np.array(xs), np.array(g), loss.item(), np.array(dw))

        return run

    _run_threads([worker("a", 1), worker("b", 2)])
    for name, (w, xs, g, loss, dw) in results.items():
        w64, xs64 = w.astype(np.float64), xs.astype(np.float64)
        np.testing.assert_allclose(g, xs64 * (1 - np.tanh(w64 * xs64) ** 2), rtol=1e-4, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(loss, np.mean((xs64 @ w64) ** 2), rtol=1e-4)
        np.testing.assert_allclose(dw, 2 * xs64.T @ (xs64 @ w64) / 32, rtol=1e-4, atol=1e-5)
    # same seed, same numbers, whatever thread drew them
    again = {}

    def redo():
        again["w"] = np.array(mx.random.normal((16,), key=mx.random.key(1)))

    _run_threads([redo])
    assert np.array_equal(again["w"], results["a"][0])


def test_stream_created_in_one_thread_fails_in_another():
    s = mx.new_stream(mx.cpu)
    seen = {}

    def worker():
        try:
            y = mx.add(mx.array(1), mx.array(2), stream=s)
            mx.eval(y)
            seen["value"] = y.item()
        except RuntimeError as e:
            seen["error"] = str(e)

    _run_threads([worker])
    assert "value" not in seen, "a stream was usable from a thread that did not create it"
    assert "error" in seen
    assert re.search(AFFINITY_MESSAGE, seen["error"]), seen["error"]
    # the creating thread can still use it
    assert mx.add(mx.array(1), mx.array(2), stream=s).item() == 3


def test_stream_created_in_a_worker_fails_in_the_main_thread():
    box = {}

    def make():
        box["stream"] = mx.new_stream(mx.cpu)

    _run_threads([make])
    with pytest.raises(RuntimeError, match=AFFINITY_MESSAGE):
        y = mx.add(mx.array(1), mx.array(2), stream=box["stream"])
        mx.eval(y)


def test_stream_context_from_another_thread_fails():
    s = mx.new_stream(mx.cpu)
    seen = {}
    device = mx.default_device()

    def worker():
        try:
            with mx.stream(s):
                y = mx.array(1) + 2
                mx.eval(y)
                seen["value"] = y.item()
        except RuntimeError as e:
            seen["error"] = str(e)

    _run_threads([worker])
    assert "value" not in seen and "in current thread" in seen["error"]
    # The refused context left the default device as it was (with the GPU as
    # default it had switched the process to the CPU).
    assert mx.default_device() == device


def test_thread_local_stream_works_in_every_thread():
    tl = mx.new_thread_local_stream(mx.cpu)
    results = []

    def worker():
        y = mx.add(mx.array(1), mx.array(2), stream=tl)
        mx.eval(y)
        results.append(y.item())

    _run_threads([worker, worker])
    assert results == [3, 3]
    assert mx.add(mx.array(1), mx.array(2), stream=tl).item() == 3


def test_evaluated_arrays_can_be_shared_across_threads():
    a = mx.arange(10).astype(mx.float32)
    mx.eval(a)
    results = {}

    def worker(k):
        def run():
            results[k] = (a * k).tolist()

        return run

    _run_threads([worker(2), worker(3)])
    assert results[2] == [2.0 * i for i in range(10)]
    assert results[3] == [3.0 * i for i in range(10)]


# --- several threads evaluating one lazy graph (issue 7, defect 1) ----------
# MLX refuses this ("There is no Stream(cpu, 0) in current thread"); Loom makes
# it safe: each node is claimed by one thread, the others wait for it.


def _chain_sum():
    x = mx.arange(1000).astype(mx.float32)
    for _ in range(20):
        x = x + 1
    return mx.sum(x)  # 499500 + 20 * 1000; a node run twice gives 520500


@pytest.mark.loom_only
def test_readers_of_one_lazy_array_see_one_evaluation():
    for _ in range(50):
        s = _chain_sum()
        seen = []
        _run_threads([lambda: seen.append(s.item())] * 4)
        assert seen == [519500.0] * 4


@pytest.mark.loom_only
def test_async_eval_racing_item():
    for _ in range(50):
        s = _chain_sum()
        seen = []
        _run_threads([lambda: mx.async_eval(s)] + [lambda: seen.append(s.item())] * 2)
        assert seen == [519500.0] * 2
        assert s.item() == 519500.0


@pytest.mark.loom_only
def test_lazy_parameter_shared_by_eight_workers():
    rng = np.random.default_rng(0)
    wn = rng.standard_normal((32, 32)).astype(np.float32)
    xs = [rng.standard_normal((32,)).astype(np.float32) for _ in range(8)]
    for _ in range(5):
        w = mx.tanh(mx.array(wn) * 0.5)  # built by this thread, evaluated by the workers
        out = [None] * 8

        def worker(t):
            def run():
                out[t] = np.array(w @ mx.array(xs[t]))

            return run

        _run_threads([worker(t) for t in range(8)])
        w_ref = np.array(mx.tanh(mx.array(wn) * 0.5))
        for t in range(8):
            np.testing.assert_array_equal(out[t], np.array(mx.array(w_ref) @ mx.array(xs[t])))
