"""Neural-network layers, losses and initialisers over ``loom.core`` (MLX's ``mlx.nn``).

Every layer of ``mlx.nn`` 0.32.4 is here except the distributed (sharded) ones,
which come with ``mx.distributed``.
"""

from . import init, losses
from .layers import *  # noqa: F401,F403
from .utils import checkpoint, value_and_grad
