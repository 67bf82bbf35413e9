"""Neural-network layers, losses and initialisers over ``loom.core`` (MLX's ``mlx.nn``).

Not yet here (they need ops loom.core does not have): the quantized layers
and ``quantize``.
"""

from . import init, losses
from .layers import *  # noqa: F401,F403
from .utils import checkpoint, value_and_grad
