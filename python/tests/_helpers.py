"""Small helpers shared by the test files: dtype tables and NumPy comparisons."""

import threading

import numpy as np

from _backend import mx

# MLX dtype name -> NumPy dtype used for the float64 reference and for checks.
# bfloat16 has no NumPy counterpart; it is compared through float32.
NP_DTYPE = {
    "bool": np.bool_,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "float16": np.float16,
    "bfloat16": np.float32,
    "float32": np.float32,
    "float64": np.float64,
}

# Tolerances for comparing a result in the given dtype with a float64 reference.
TOL = {
    "float16": dict(rtol=2e-3, atol=2e-3),
    "bfloat16": dict(rtol=1.6e-2, atol=1.6e-2),
    "float32": dict(rtol=2e-6, atol=2e-6),
    # MLX computes some float64 transcendental functions at float32 precision
    "float64": dict(rtol=1e-6, atol=1e-7),
}

FLOAT_DTYPES = ("float16", "bfloat16", "float32")
INT_DTYPES = ("uint8", "int32", "int64")


def dt(name):
    """The module's dtype object for a dtype name ('bool' maps to bool_)."""
    return getattr(mx, "bool_" if name == "bool" else name)


def dtype_name(dtype):
    """'float32' for mx.float32 (the repr is 'mlx.core.float32' / 'loom.core.float32')."""
    return str(dtype).rsplit(".", 1)[-1]


def is_float(name):
    return name in ("float16", "bfloat16", "float32", "float64")


def to_numpy(a):
    """A NumPy copy of an array, bfloat16 going through float32."""
    if dtype_name(a.dtype) == "bfloat16":
        a = a.astype(mx.float32)
    return np.array(a)


def from_numpy(x, dtype_name_):
    """An array of the given dtype holding the values of NumPy array x."""
    if dtype_name_ == "bfloat16":
        return mx.array(np.asarray(x, dtype=np.float32)).astype(mx.bfloat16)
    if dtype_name_ == "float64":  # NumPy float64 would become float32
        return mx.array(np.asarray(x, dtype=np.float64), dtype=mx.float64)
    return mx.array(np.asarray(x, dtype=NP_DTYPE[dtype_name_]))


def round_to(x, dtype_name_):
    """x (NumPy) rounded to the precision of an MLX dtype, returned as float64."""
    if dtype_name_ == "bfloat16":
        return to_numpy(from_numpy(x, "bfloat16")).astype(np.float64)
    return np.asarray(x).astype(NP_DTYPE[dtype_name_]).astype(np.float64)


def assert_array(actual, expected, dtype=None, rtol=None, atol=None, equal_nan=True):
    """Check an array against a NumPy reference: shape, dtype, then values.

    ``dtype`` is an MLX dtype name; float results get the tolerance of that
    dtype unless rtol/atol are given, other results must match exactly.
    """
    expected = np.asarray(expected)
    assert isinstance(actual.shape, tuple), type(actual.shape)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if dtype is not None:
        assert dtype_name(actual.dtype) == dtype, (actual.dtype, dtype)
    name = dtype_name(actual.dtype)
    got = to_numpy(actual)
    if is_float(name):
        tol = dict(TOL[name])
        if rtol is not None:
            tol["rtol"] = rtol
        if atol is not None:
            tol["atol"] = atol
        np.testing.assert_allclose(
            got.astype(np.float64), expected.astype(np.float64), equal_nan=equal_nan, **tol
        )
    else:
        np.testing.assert_array_equal(got, expected.astype(got.dtype))


def rng(seed=0):
    return np.random.default_rng(seed)


def run_python(code, env=None, timeout=300):
    """Run ``code`` in a fresh interpreter with the same array module.

    A crash there (a stack overflow, an abort) fails the test that asked for it
    instead of killing the whole test session.  ``from _backend import mx``
    works inside the snippet.
    """
    import os
    import subprocess
    import sys
    import textwrap

    tests_dir = os.path.dirname(os.path.abspath(__file__))
    prelude = f"import sys\nsys.path.insert(0, {tests_dir!r})\n"
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


def run_threads(targets):
    """Runs each target in its own thread; re-raises the first error, fails on a hang."""
    errors = []

    def wrap(fn):
        def run():
            try:
                fn()
            except BaseException as e:  # reported to the main thread
                errors.append(e)

        return run

    threads = [threading.Thread(target=wrap(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    if errors:
        raise errors[0]
