"""Shared pytest configuration for the loom.core suite.

The module under test is chosen in ``_backend`` (``loom.core`` by default,
``mlx.core`` with ``LOOM_TEST_ORACLE=mlx``).  Tests of Loom-only extras carry
the ``loom_only`` marker and are deselected when the oracle is MLX: MLX lacks
those features, so they are not failures to hide but tests that do not apply.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _backend  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "loom_only: a Loom extra that MLX does not have; deselected under "
        "LOOM_TEST_ORACLE=mlx",
    )


def pytest_collection_modifyitems(config, items):
    # LOOM_TEST_KEEP_LOOM_ONLY=1 keeps them, to see how MLX fails them
    if not _backend.IS_MLX or os.environ.get("LOOM_TEST_KEEP_LOOM_ONLY") == "1":
        return
    kept, deselected = [], []
    for item in items:
        (deselected if item.get_closest_marker("loom_only") else kept).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


# LOOM_TEST_DEVICE=gpu runs the whole suite with the GPU as the default device
# (=cpu forces the CPU where a GPU would be the default).
_TEST_DEVICE = os.environ.get("LOOM_TEST_DEVICE", "")
if _TEST_DEVICE:
    _dev = getattr(_backend.mx, _TEST_DEVICE)
    if not _backend.mx.is_available(_dev):
        raise pytest.UsageError(f"LOOM_TEST_DEVICE={_TEST_DEVICE} but that device is not available")
    _backend.mx.set_default_device(_dev)


# The bindings' smoke tests import loom itself and have no MLX counterpart.
collect_ignore = ["test_bindings_smoke.py"] if _backend.IS_MLX else []


def pytest_report_header(config):
    return (f"array module under test: {_backend.MODULE_NAME}, "
            f"default device: {_backend.mx.default_device()}")


@pytest.fixture
def mx():
    return _backend.mx


@pytest.fixture
def restore_limits():
    """Restore the memory and cache limits a test changes, even if it fails."""
    m = _backend.mx
    memory_limit = m.set_memory_limit(1 << 40)
    m.set_memory_limit(memory_limit)
    cache_limit = m.set_cache_limit(1 << 40)
    m.set_cache_limit(cache_limit)
    yield memory_limit, cache_limit
    m.set_memory_limit(memory_limit)
    m.set_cache_limit(cache_limit)


@pytest.fixture
def restore_default_stream():
    """Restore the default device and stream a test changes."""
    m = _backend.mx
    device = m.default_device()
    stream = m.default_stream(device)
    yield device, stream
    m.set_default_device(device)
    m.set_default_stream(stream)
