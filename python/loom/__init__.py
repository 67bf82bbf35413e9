"""Loom: lazy arrays, composable function transforms and an MLX-compatible API.

``import loom.core as mx`` gives the array API of ``mlx.core``.
"""

from pkgutil import extend_path as _extend_path

# In-tree development: with PYTHONPATH=python:build/python the compiled
# extension lives in build/python/loom/ while the Python sources stay here;
# extending the package path lets `loom.core` be found in either place.
__path__ = _extend_path(__path__, __name__)



def _point_at_cudnn() -> None:
    """Lets the CUDA backend find cuDNN in the nvidia-cudnn wheel, if installed.

    PyTorch and JAX install cuDNN as a Python package, off the loader's path;
    GPU convolutions use it when found (LOOM_CUDNN_PATH set by the user wins,
    LOOM_CUDNN=0 turns cuDNN off).
    """
    import os
    import sys

    if os.environ.get("LOOM_CUDNN_PATH"):
        return
    for entry in sys.path:
        lib = os.path.join(entry or ".", "nvidia", "cudnn", "lib", "libcudnn.so.9")
        if os.path.isfile(lib):
            os.environ["LOOM_CUDNN_PATH"] = lib
            return


_point_at_cudnn()

from . import core  # noqa: E402


def _register_fork_drain() -> None:
    """Makes os.fork() wait for queued work first, so the child sees it done.

    The child process has none of the stream workers: an array still queued
    when the process forks would never be computed there.
    """
    import os

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(before=core._drain_streams_for_fork)


_register_fork_drain()

__version__ = core.__version__
