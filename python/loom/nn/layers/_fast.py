"""The fused ops the layers call: ``loom.core.fast``, as MLX's layers call ``mx.fast``.

Each is one node with its own CPU kernel and gradient (``loom/primitives/fast.h``);
the composite each matches is written out in ``python/tests/test_fast.py``.
"""

from loom.core.fast import layer_norm, rms_norm, rope, scaled_dot_product_attention

__all__ = ["layer_norm", "rms_norm", "rope", "scaled_dot_product_attention"]
