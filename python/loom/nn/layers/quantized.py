"""Quantized layers (MLX's QuantizedLinear, QuantizedEmbedding, QQLinear) and
``quantize``, which swaps a model's layers for them in place."""

from __future__ import annotations

import math
from typing import Callable, Optional, Union

import loom.core as mx
from loom.utils import tree_map_with_path

from .base import Module


def _defaults(mode: str, group_size: Optional[int], bits: Optional[int]) -> tuple[int, int]:
    """The group size and width ``mx.quantize`` picks for ``mode`` when not given."""
    table = {"affine": (64, 4), "mxfp4": (32, 4), "mxfp8": (32, 8), "nvfp4": (16, 4)}
    g, b = table.get(mode, (64, 4))
    return (g if group_size is None else group_size, b if bits is None else bits)


def quantize(
    model: Module,
    group_size: Optional[int] = None,
    bits: Optional[int] = None,
    *,
    mode: str = "affine",
    quantize_input: bool = False,
    class_predicate: Optional[Callable[[str, Module], Union[bool, dict]]] = None,
) -> None:
    """Replace, in place, the sub-modules of ``model`` that define
    ``to_quantized`` (or those ``class_predicate(path, module)`` accepts; a dict
    it returns overrides the ``to_quantized`` arguments) by quantized ones."""
    if class_predicate is None:

        def class_predicate(_path: str, m: Module) -> bool:
            return hasattr(m, "to_quantized")

    def maybe_quantize(path: str, m):
        if not isinstance(m, Module):
            return m
        decision = class_predicate(path, m)
        if not decision:
            return m
        if not hasattr(m, "to_quantized"):
            raise ValueError(f"Unable to quantize model of type {type(m)}")
        kwargs = {
            "group_size": group_size,
            "bits": bits,
            "mode": mode,
            "quantize_input": quantize_input,
        }
        if isinstance(decision, dict):
            kwargs.update(decision)
        return m.to_quantized(**kwargs)

    leaves = model.leaf_modules()
    leaves = tree_map_with_path(maybe_quantize, leaves, is_leaf=Module.is_module)
    model.update_modules(leaves)


class QuantizedEmbedding(Module):
    """:class:`Embedding` with its table quantized (frozen, like MLX's).

    ``weight`` holds the packed codes, ``scales`` (and, for affine
    quantization, ``biases``) one entry per ``group_size`` elements of a row.
    """

    def __init__(
        self,
        num_embeddings: int,
        dims: int,
        group_size: Optional[int] = None,
        bits: Optional[int] = None,
        mode: str = "affine",
    ) -> None:
        super().__init__()
        self.group_size, self.bits = _defaults(mode, group_size, bits)
        self.mode = mode
        scale = math.sqrt(1 / dims)
        weight = mx.random.normal(shape=(num_embeddings, dims), scale=scale)
        self.weight, self.scales, *biases = mx.quantize(weight, group_size, bits, mode=mode)
        self.biases = biases[0] if biases else None
        self.num_embeddings = num_embeddings
        self.dims = dims
        self.freeze()

    def __call__(self, x: mx.array) -> mx.array:
        return mx.dequantize(
            self["weight"][x],
            scales=self["scales"][x],
            biases=None if self.get("biases") is None else self["biases"][x],
            group_size=self.group_size,
            bits=self.bits,
            mode=self.mode,
        )

    def as_linear(self, x: mx.array) -> mx.array:
        """``x @ weight.T`` with the quantized table (tied output projection)."""
        return mx.quantized_matmul(
            x,
            self["weight"],
            scales=self["scales"],
            biases=self.get("biases"),
            transpose=True,
            group_size=self.group_size,
            bits=self.bits,
            mode=self.mode,
        )

    def _extra_repr(self) -> str:
        return (
            f"{self.num_embeddings}, {self.dims}, group_size={self.group_size}, "
            f"bits={self.bits}, mode={self.mode}"
        )

    @classmethod
    def from_embedding(
        cls,
        embedding_layer: Module,
        group_size: Optional[int] = None,
        bits: Optional[int] = None,
        mode: str = "affine",
    ) -> "QuantizedEmbedding":
        """A quantized copy of an :class:`Embedding` layer."""
        num_embeddings, dims = embedding_layer.weight.shape
        ql = cls(num_embeddings, dims, group_size, bits, mode=mode)
        ql.weight, ql.scales, *biases = mx.quantize(
            embedding_layer.weight, group_size, bits, mode=mode
        )
        ql.biases = biases[0] if biases else None
        return ql


class QuantizedLinear(Module):
    """:class:`Linear` with a quantized weight: ``y = x W^T + b`` through
    ``mx.quantized_matmul``. The quantized parameters are frozen (as in MLX);
    the bias of a layer made by :meth:`from_linear` stays trainable."""

    def __init__(
        self,
        input_dims: int,
        output_dims: int,
        bias: bool = True,
        group_size: Optional[int] = None,
        bits: Optional[int] = None,
        mode: str = "affine",
    ) -> None:
        super().__init__()
        self.group_size, self.bits = _defaults(mode, group_size, bits)
        self.mode = mode
        scale = math.sqrt(1 / input_dims)
        weight = mx.random.uniform(low=-scale, high=scale, shape=(output_dims, input_dims))
        self.weight, self.scales, *biases = mx.quantize(weight, group_size, bits, mode=mode)
        self.biases = biases[0] if biases else None
        if bias:
            self.bias = mx.zeros((output_dims,))
        self.freeze()

    def _extra_repr(self) -> str:
        out_dims, in_dims = self.weight.shape
        in_dims = in_dims * 32 // self.bits
        return (
            f"input_dims={in_dims}, output_dims={out_dims}, bias={'bias' in self}, "
            f"group_size={self.group_size}, bits={self.bits}, mode={self.mode}"
        )

    def __call__(self, x: mx.array) -> mx.array:
        x = mx.quantized_matmul(
            x,
            self["weight"],
            scales=self["scales"],
            biases=self.get("biases"),
            transpose=True,
            group_size=self.group_size,
            bits=self.bits,
            mode=self.mode,
        )
        if "bias" in self:
            x = x + self["bias"]
        return x

    @classmethod
    def from_linear(
        cls,
        linear_layer: Module,
        group_size: Optional[int] = None,
        bits: Optional[int] = None,
        mode: str = "affine",
    ) -> "QuantizedLinear":
        """A quantized copy of a :class:`Linear` layer."""
        output_dims, input_dims = linear_layer.weight.shape
        ql = cls(input_dims, output_dims, False, group_size, bits, mode=mode)
        ql.weight, ql.scales, *biases = mx.quantize(
            linear_layer.weight, group_size, bits, mode=mode
        )
        ql.biases = biases[0] if biases else None
        if "bias" in linear_layer:
            ql.bias = linear_layer.bias
        return ql


class QQLinear(Module):
    """A linear layer (no bias) whose input and weight are both quantized
    (``mx.qqmm``; modes ``"nvfp4"`` and ``"mxfp8"``).

    In training mode the weight is kept in full precision and quantized on
    the fly, so it receives gradients; :meth:`eval` stores it quantized and
    frozen, :meth:`train` restores a full-precision copy (dequantized).
    """

    def __init__(
        self,
        input_dims: int,
        output_dims: int,
        group_size: Optional[int] = None,
        bits: Optional[int] = None,
        mode: str = "nvfp4",
    ) -> None:
        super().__init__()
        self.group_size, self.bits = _defaults(mode, group_size, bits)
        self.mode = mode
        scale = math.sqrt(1 / input_dims)
        self.weight = mx.random.uniform(low=-scale, high=scale, shape=(output_dims, input_dims))
        self._quantized = False

    def _extra_repr(self) -> str:
        out_dims, in_dims = self.weight.shape
        if self._quantized:
            in_dims = in_dims * 32 // self.bits
        return (
            f"input_dims={in_dims}, output_dims={out_dims}, "
            f"group_size={self.group_size}, bits={self.bits}, mode={self.mode}"
        )

    def quantize(self) -> None:
        """Store the weight quantized (and frozen)."""
        if not self._quantized:
            self.weight, self.scales = mx.quantize(
                self.weight, self.group_size, self.bits, mode=self.mode
            )
            self._quantized = True
            self.freeze()

    def dequantize(self) -> None:
        """Store the weight in full precision again (and trainable)."""
        if self._quantized:
            self.weight = mx.dequantize(
                self.weight,
                scales=self.scales,
                group_size=self.group_size,
                bits=self.bits,
                mode=self.mode,
                dtype=mx.float32,
            )
            del self["scales"]
            self._quantized = False
            self.unfreeze()

    def _set_training_mode(self, mode: bool) -> None:
        super()._set_training_mode(mode)
        if mode:
            self.dequantize()
        else:
            self.quantize()

    def __call__(self, x: mx.array) -> mx.array:
        return mx.qqmm(
            x,
            self["weight"],
            scales=self.get("scales"),
            group_size=self.group_size,
            bits=self.bits,
            mode=self.mode,
        )

    @classmethod
    def from_linear(
        cls,
        linear_layer: Module,
        group_size: Optional[int] = None,
        bits: Optional[int] = None,
        mode: str = "nvfp4",
    ) -> "QQLinear":
        """A :class:`QQLinear` with the weight of a bias-free :class:`Linear`."""
        if "bias" in linear_layer:
            raise NotImplementedError("QQLinear does not support bias yet.")
        output_dims, input_dims = linear_layer.weight.shape
        ql = cls(input_dims, output_dims, group_size, bits, mode=mode)
        ql.weight = linear_layer.weight
        ql._set_training_mode(linear_layer.training)
        return ql
