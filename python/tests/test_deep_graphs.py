"""Very deep graphs: a 200,000-node chain evaluates and is freed without a
crash.  Each case runs in a fresh interpreter so that a stack overflow fails
the test instead of killing the session."""

import pytest

from _helpers import run_python

N = 200_000


def _check(result):
    assert result.returncode == 0, (
        f"exit code {result.returncode}\nstdout:\n{result.stdout[-2000:]}\nstderr:\n{result.stderr[-2000:]}"
    )
    return result.stdout


def test_long_chain_evaluates_and_is_freed():
    out = _check(
        run_python(
            f"""
            import gc
            from _backend import mx
            mx.synchronize()
            base = mx.get_active_memory()
            x = mx.array(0.0)
            for _ in range({N}):
                x = x + 1
            mx.eval(x)
            assert x.item() == {N}.0, x.item()
            v = mx.zeros((4,))
            for _ in range({N}):
                v = v + 1
            assert v.tolist() == [{N}.0] * 4
            del x, v
            gc.collect()
            mx.synchronize()
            print("retained", mx.get_active_memory() - base)
            """
        )
    )
    assert "retained 0" in out


def test_long_unevaluated_chain_is_dropped():
    out = _check(
        run_python(
            f"""
            from _backend import mx
            y = mx.array(0)
            for _ in range({N}):
                y = y + 1
            del y
            print("dropped")
            """
        )
    )
    assert "dropped" in out


def test_long_chain_with_all_intermediates_alive():
    out = _check(
        run_python(
            f"""
            from _backend import mx
            xs = [mx.array(1.0)]
            for _ in range({N}):
                xs.append(xs[-1] + 1)
            mx.eval(xs[-1])
            print(xs[-1].item(), xs[100].item())
            del xs
            """
        )
    )
    assert out.split() == [f"{N + 1}.0", "101.0"]


@pytest.mark.loom_only
def test_grad_through_a_long_chain():
    # MLX 0.32.4 overflows its stack here (segmentation fault); Loom's graph
    # walks are iterative (docs/architecture.md), so the gradient must work.
    out = _check(
        run_python(
            f"""
            from _backend import mx
            def f(v):
                for _ in range({N}):
                    v = v * 1.0 + 1.0
                return v
            print(mx.grad(f)(mx.array(2.0)).item())
            """
        )
    )
    assert out.strip() == "1.0"
