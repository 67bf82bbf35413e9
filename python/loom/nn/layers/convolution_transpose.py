"""Transposed convolution layers: ConvTranspose1d, ConvTranspose2d, ConvTranspose3d."""

from __future__ import annotations

import math
from typing import Union

import loom.core as mx

from .base import Module
from .convolution import _tuple


class _ConvTranspose(Module):
    """Shared parameters of the transposed convolutions: the weight is
    ``(out_channels, *kernel_size, in_channels)``, uniform in
    ``±1/sqrt(in_channels * prod(kernel_size))``; the bias starts at 0."""

    _dims = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding,
                 dilation, output_padding, bias: bool) -> None:
        super().__init__()
        n = self._dims
        if n > 1:
            kernel_size, stride, padding, output_padding = (
                _tuple(v, n) for v in (kernel_size, stride, padding, output_padding))
        taps = math.prod(_tuple(kernel_size, n))
        scale = math.sqrt(1.0 / (in_channels * taps))
        self.weight = mx.random.uniform(low=-scale, high=scale,
                                        shape=(out_channels, *_tuple(kernel_size, n), in_channels))
        if bias:
            self.bias = mx.zeros((out_channels,))
        self.padding = padding
        self.dilation = dilation
        self.stride = stride
        self.output_padding = output_padding

    def _extra_repr(self) -> str:
        k = self.weight.shape[1] if self._dims == 1 else self.weight.shape[1:1 + self._dims]
        return (f"{self.weight.shape[-1]}, {self.weight.shape[0]}, kernel_size={k}, "
                f"stride={self.stride}, padding={self.padding}, dilation={self.dilation}, "
                f"output_padding={self.output_padding}, bias={'bias' in self}")


class ConvTranspose1d(_ConvTranspose):
    """1-D transposed convolution over ``(N, L, C_in)`` inputs."""

    _dims = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, output_padding: int = 0,
                 bias: bool = True) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         output_padding, bias)

    def __call__(self, x: mx.array) -> mx.array:
        y = mx.conv_transpose1d(x, self.weight, self.stride, self.padding, self.dilation,
                                self.output_padding)
        return y + self.bias if "bias" in self else y


class ConvTranspose2d(_ConvTranspose):
    """2-D transposed convolution over ``(N, H, W, C_in)`` inputs."""

    _dims = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Union[int, tuple],
                 stride: Union[int, tuple] = 1, padding: Union[int, tuple] = 0,
                 dilation: Union[int, tuple] = 1, output_padding: Union[int, tuple] = 0,
                 bias: bool = True) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         output_padding, bias)

    def __call__(self, x: mx.array) -> mx.array:
        y = mx.conv_transpose2d(x, self.weight, self.stride, self.padding, self.dilation,
                                self.output_padding)
        return y + self.bias if "bias" in self else y


class ConvTranspose3d(_ConvTranspose):
    """3-D transposed convolution over ``(N, D, H, W, C_in)`` inputs."""

    _dims = 3

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Union[int, tuple],
                 stride: Union[int, tuple] = 1, padding: Union[int, tuple] = 0,
                 dilation: Union[int, tuple] = 1, output_padding: Union[int, tuple] = 0,
                 bias: bool = True) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         output_padding, bias)

    def __call__(self, x: mx.array) -> mx.array:
        y = mx.conv_transpose3d(x, self.weight, self.stride, self.padding, self.dilation,
                                self.output_padding)
        return y + self.bias if "bias" in self else y
