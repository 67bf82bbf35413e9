"""Embedding: a lookup table of ``num_embeddings`` vectors of size ``dims``."""

from __future__ import annotations

import math

import loom.core as mx

from .base import Module


class Embedding(Module):
    """Maps integer ids to rows of ``weight`` (``(num_embeddings, dims)``, normal with std ``1/sqrt(dims)``)."""

    def __init__(self, num_embeddings: int, dims: int):
        super().__init__()
        scale = math.sqrt(1 / dims)
        self.weight = mx.random.normal(shape=(num_embeddings, dims), scale=scale)

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, {self.weight.shape[1]}"

    def __call__(self, x):
        return self.weight[x]

    def as_linear(self, x):
        """``x @ weight.T``: use the table as an output projection (tied weights)."""
        return x @ self.weight.T

    def to_quantized(self, group_size=None, bits=None, mode="affine", quantize_input=False):
        """A :class:`QuantizedEmbedding` copy (inputs are ids: ``quantize_input`` is refused)."""
        from .quantized import QuantizedEmbedding

        if quantize_input:
            raise ValueError("Quantized input is not supported.")
        return QuantizedEmbedding.from_embedding(self, group_size, bits, mode)
