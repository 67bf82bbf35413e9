"""Loom-only extras (docs/architecture.md, Evaluation and Memory): the peak_memory context
manager, LOOM_DEBUG=1 naming the Python line that built a failing node, and a
clear, recoverable out-of-memory error.  MLX has none of these, so the tests are
marked ``loom_only`` and deselected under the MLX oracle.  The custom_function
capture warning is tested in test_seed_examples.py."""

import re
import textwrap
import warnings

import pytest

from _backend import mx
from _helpers import run_python

MiB = 1 << 20


@pytest.mark.loom_only
def test_peak_memory_context_manager():
    n = 4 * MiB // 4
    with mx.peak_memory() as p:
        x = mx.zeros((n,)) + 1
        mx.eval(x)
    assert isinstance(p.peak, int)
    assert p.peak >= x.nbytes
    del x


@pytest.mark.loom_only
def test_peak_memory_reports_the_region():
    with mx.peak_memory() as small:
        y = mx.zeros((1024,)) + 1
        mx.eval(y)
    with mx.peak_memory() as big:
        x = mx.zeros((2 * MiB,)) + 1
        mx.eval(x)
        del x
    assert big.peak >= 8 * MiB
    assert small.peak >= y.nbytes
    assert small.peak < big.peak


def _oom_message_is_clear(message, requested, limit):
    # names the request (in bytes or MiB) and the pool's state (its limit)
    request_named = str(requested) in message or re.search(
        rf"{requested // MiB}(\.0+)?\s*Mi?B", message
    )
    state_named = "limit" in message.lower() and (
        str(limit) in message or re.search(rf"{limit // MiB}(\.0+)?\s*Mi?B", message)
    )
    return bool(request_named) and bool(state_named)


@pytest.mark.loom_only
def test_out_of_memory_is_a_clear_runtime_error_and_the_process_carries_on():
    result = run_python(
        f"""
        from _backend import mx
        small = mx.arange(10).astype(mx.float32)
        mx.eval(small)
        previous = mx.set_memory_limit({MiB})
        big = mx.zeros(({4 * MiB},)) + small[0]  # 16 MiB over a 1 MiB limit
        try:
            mx.eval(big)
        except RuntimeError as e:
            print("MESSAGE:", str(e).replace("\\n", " "))
        else:
            print("NO ERROR")
        mx.set_memory_limit(previous)
        print("SMALL:", small.tolist())
        again = mx.zeros(({4 * MiB},)) + small[1]
        mx.eval(again)
        print("AGAIN:", again[0].item(), again.shape[0])
        """
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)
    assert "MESSAGE" in lines, result.stdout
    assert _oom_message_is_clear(lines["MESSAGE"], 16 * MiB, MiB), lines["MESSAGE"]
    assert lines["SMALL"] == str([float(i) for i in range(10)])
    assert lines["AGAIN"] == f"1.0 {4 * MiB}"


@pytest.mark.loom_only
def test_loom_debug_names_the_line_that_built_the_failing_node(tmp_path):
    script = tmp_path / "loom_debug_case.py"
    source = textwrap.dedent(
        f"""\
        import sys
        sys.path.insert(0, {str(__import__("os").path.dirname(__file__))!r})
        from _backend import mx
        mx.set_memory_limit({MiB})
        x = mx.arange(8).astype(mx.float32)
        mx.eval(x)
        big = mx.zeros(({4 * MiB},)) + x[0]  # BUILT HERE
        total = mx.sum(big)
        try:
            mx.eval(total)
        except RuntimeError as e:
            print(str(e).replace("\\n", " "))
        """
    )
    script.write_text(source)
    built_line = next(i for i, line in enumerate(source.splitlines(), 1) if "BUILT HERE" in line)
    import subprocess
    import sys

    env = dict(__import__("os").environ, LOOM_DEBUG="1")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    message = result.stdout.strip()
    assert message, "evaluation did not fail"
    assert f"loom_debug_case.py:{built_line}" in message, message


def test_no_capture_warning_when_nothing_captured_is_differentiated():
    @mx.custom_function
    def op(x, scale):
        return x * scale

    @op.vjp
    def op_vjp(primals, cotangent, output):
        x, scale = primals
        return cotangent * scale, cotangent * x

    y = mx.array(3.0)

    def g(x):
        @mx.custom_function
        def f(x):
            return x * y  # y is captured but never differentiated

        @f.vjp
        def f_vjp(x, dx, fx):
            return dx * y

        return f(x)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert mx.grad(op, argnums=1)(mx.array(2.0), mx.array(3.0)).item() == 2.0
        assert mx.grad(g)(mx.array(2.0)).item() == 3.0
    assert not [w for w in caught if "captur" in str(w.message).lower()]
