"""``nn``, ``optim`` and ``utils`` of the package under test (loom's or, with
``LOOM_TEST_ORACLE=mlx``, MLX's), beside ``_backend.mx``."""

import importlib

from _backend import IS_MLX, mx  # noqa: F401  (mx imported first: it sets up the path)

_PACKAGE = "mlx" if IS_MLX else "loom"

nn = importlib.import_module(f"{_PACKAGE}.nn")
optim = importlib.import_module(f"{_PACKAGE}.optimizers")
utils = importlib.import_module(f"{_PACKAGE}.utils")
