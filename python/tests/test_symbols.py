"""Loom shares a process with NumPy, SciPy and the other array libraries
(issue 13): it must export only its own symbols, and work when they were
loaded first, with their own OpenBLAS and C++ runtime builds."""

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from _backend import IS_MLX

HERE = os.path.dirname(os.path.abspath(__file__))


def test_works_after_numpy_scipy_and_friends_are_loaded():
    pytest.importorskip("scipy")
    code = """
        import importlib, sys
        import numpy as np
        import scipy.linalg, scipy.special, scipy.fft
        for name in ("torch", "jax"):  # when installed, load them first too
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        from _backend import mx
        rng = np.random.default_rng(0)
        a = rng.standard_normal((64, 64)).astype(np.float32)
        x = mx.array(a)
        print(x[:2, :2])
        got = np.array(x @ x.T)
        np.testing.assert_allclose(got, a @ a.T, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(np.array(mx.erf(x)), scipy.special.erf(a), rtol=1e-5, atol=1e-6)
        spd = a @ a.T + 64 * np.eye(64, dtype=np.float32)
        np.testing.assert_allclose(np.array(mx.sum(mx.array(spd) * 2)), spd.sum() * 2, rtol=1e-5)
        lu = scipy.linalg.lu_factor(spd)  # SciPy's LAPACK, after Loom's
        np.testing.assert_allclose(scipy.linalg.lu_solve(lu, spd[:, 0]), np.eye(64)[:, 0], atol=1e-4)
        assert mx.array([1, 2, 3]).tolist() == [1, 2, 3]
        print("ok")
    """
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("ok")


def _loaded_libloom():
    from _backend import mx

    mx.array(1)  # the module and its library are loaded
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if re.search(r"/libloom[^/]*\.so", path):
                return path
    return None


@pytest.mark.loom_only
@pytest.mark.skipif(shutil.which("nm") is None or not sys.platform.startswith("linux"),
                    reason="needs nm and /proc (Linux binutils)")
def test_libloom_exports_only_loom_symbols():
    lib = _loaded_libloom()
    assert lib is not None, "libloom.so is not loaded"
    out = subprocess.run(["nm", "-D", "--defined-only", "-C", lib], capture_output=True,
                         text=True, check=True).stdout
    foreign = []
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) < 3 or parts[1] in ("A",):  # version nodes
            continue
        name = parts[2]
        if "loom::" not in name and name not in ("_init", "_fini"):
            foreign.append(name)
    assert not foreign, f"{len(foreign)} foreign symbols exported, e.g. {foreign[:10]}"
