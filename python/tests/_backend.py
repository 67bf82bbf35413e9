"""Selects the array module under test.

By default the suite tests ``loom.core``.  With ``LOOM_TEST_ORACLE=mlx`` it runs
against ``mlx.core`` instead, so that every expectation written here is checked
against MLX's real behaviour.  Test files do ``from _backend import mx``.
"""

import importlib
import os
import sys

ORACLE = os.environ.get("LOOM_TEST_ORACLE", "").strip().lower()
if ORACLE not in ("", "loom", "mlx"):
    raise RuntimeError(
        f"LOOM_TEST_ORACLE={ORACLE!r}: expected 'mlx' (or unset / 'loom')"
    )

IS_MLX = ORACLE == "mlx"
IS_LOOM = not IS_MLX
MODULE_NAME = "mlx.core" if IS_MLX else "loom.core"

_REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _import_loom():
    try:
        return importlib.import_module(MODULE_NAME)
    except ImportError:
        # An in-tree build (python/README.md): the package sources are in
        # python/ and the extension in build/python/.  The failed attempt may
        # have cached the repository's C++ folder loom/ as a namespace
        # package: forget it before retrying.
        for name in [n for n in sys.modules if n == "loom" or n.startswith("loom.")]:
            del sys.modules[name]
        for candidate in (
            os.path.join(_REPO_ROOT, "build", "python"),
            os.path.join(_REPO_ROOT, "python"),
        ):
            if os.path.isdir(os.path.join(candidate, "loom")) and candidate not in sys.path:
                sys.path.insert(0, candidate)
        importlib.invalidate_caches()
        return importlib.import_module(MODULE_NAME)


mx = importlib.import_module(MODULE_NAME) if IS_MLX else _import_loom()


def expected_default_device():
    """The default device the suite runs with: LOOM_TEST_DEVICE when set
    (conftest.py switches to it), else the GPU when one is present (as MLX's
    CUDA wheel), else the CPU."""
    forced = os.environ.get("LOOM_TEST_DEVICE", "")
    if forced:
        return mx.Device(getattr(mx, forced))
    return mx.Device(mx.gpu if mx.is_available(mx.gpu) else mx.cpu)
