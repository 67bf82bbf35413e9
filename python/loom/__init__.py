"""Loom: lazy arrays, composable function transforms and an MLX-compatible API.

``import loom.core as mx`` gives the array API of ``mlx.core``.
"""

from pkgutil import extend_path as _extend_path

# In-tree development: with PYTHONPATH=python:build/python the compiled
# extension lives in build/python/loom/ while the Python sources stay here;
# extending the package path lets `loom.core` be found in either place.
__path__ = _extend_path(__path__, __name__)

from . import core  # noqa: E402

__version__ = core.__version__
