"""Loom: lazy arrays, composable function transforms and an MLX-compatible API.

``import loom.core as mx`` gives the array API of ``mlx.core``.
"""

import os as _os
import sys as _sys
from pkgutil import extend_path as _extend_path

# In-tree development: with PYTHONPATH=python:build/python the compiled
# extension lives in build/python/loom/ while the Python sources stay here;
# extending the package path lets `loom.core` be found in either place.
__path__ = _extend_path(__path__, __name__)


def _import_core():
    # Op families are implemented in parallel; until every op declared in
    # loom/ops/*.h is defined in libloom, resolve its symbols on first call
    # rather than at load time so the rest of the API can be imported.
    flags = _sys.getdlopenflags()
    _sys.setdlopenflags((flags & ~_os.RTLD_NOW) | _os.RTLD_LAZY)
    try:
        from . import core
    finally:
        _sys.setdlopenflags(flags)
    return core


core = _import_core()
__version__ = core.__version__

del _import_core
