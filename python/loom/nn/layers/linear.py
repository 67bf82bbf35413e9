"""Affine layers: Identity, Linear, Bilinear."""

from __future__ import annotations

import math
from typing import Any, Optional

import loom.core as mx

from .base import Module


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def __call__(self, x: mx.array) -> mx.array:
        return x


class Linear(Module):
    """``y = x W^T + b``; ``W`` is ``(output_dims, input_dims)``.

    Weights and bias start uniform in ``[-1/sqrt(input_dims), 1/sqrt(input_dims)]``.
    """

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True) -> None:
        super().__init__()
        scale = math.sqrt(1.0 / input_dims)
        self.weight = mx.random.uniform(low=-scale, high=scale, shape=(output_dims, input_dims))
        if bias:
            self.bias = mx.random.uniform(low=-scale, high=scale, shape=(output_dims,))

    def _extra_repr(self) -> str:
        return (
            f"input_dims={self.weight.shape[1]}, "
            f"output_dims={self.weight.shape[0]}, bias={'bias' in self}"
        )

    def __call__(self, x: mx.array) -> mx.array:
        if "bias" in self:
            return mx.addmm(self["bias"], x, self["weight"].T)
        return x @ self["weight"].T

    def to_quantized(
        self,
        group_size: Optional[int] = None,
        bits: Optional[int] = None,
        mode: str = "affine",
        quantize_input: bool = False,
    ) -> Module:
        """A :class:`QuantizedLinear` copy (a :class:`QQLinear` with ``quantize_input``)."""
        from .quantized import QQLinear, QuantizedLinear

        if quantize_input:
            return QQLinear.from_linear(self, group_size, bits, mode)
        return QuantizedLinear.from_linear(self, group_size, bits, mode)


class Bilinear(Module):
    """``y_i = x1^T W_i x2 + b_i``; ``W`` is ``(output_dims, input2_dims, input1_dims)``."""

    def __init__(
        self, input1_dims: int, input2_dims: int, output_dims: int, bias: bool = True
    ) -> None:
        super().__init__()
        scale = math.sqrt(1.0 / input1_dims)
        self.weight = mx.random.uniform(
            low=-scale, high=scale, shape=(output_dims, input2_dims, input1_dims)
        )
        if bias:
            self.bias = mx.random.uniform(low=-scale, high=scale, shape=(output_dims,))

    def _extra_repr(self) -> str:
        out, in2, in1 = self.weight.shape
        return (
            f"input1_dims={in1}, input2_dims={in2}, output_dims={out}, bias={'bias' in self}"
        )

    def __call__(self, x1: mx.array, x2: mx.array) -> mx.array:
        out, in2, in1 = self.weight.shape
        batch_shape = x1.shape[:-1]
        # Contract x1 first (one matmul for all outputs), then x2 per example.
        y = x1.reshape(-1, in1) @ self.weight.reshape(out * in2, in1).T
        y = y.reshape(-1, out, in2).swapaxes(-2, -1)
        y = (x2.reshape(-1, 1, in2) @ y).squeeze(1)
        y = y.reshape(*batch_shape, out)
        if "bias" in self:
            y = y + self.bias
        return y
