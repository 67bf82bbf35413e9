"""Convolution layers: Conv1d, Conv2d, Conv3d (channels last, as MLX)."""

from __future__ import annotations

import math
from typing import Union

import loom.core as mx

from .base import Module


def _tuple(value: Union[int, tuple], n: int) -> tuple:
    return (value,) * n if isinstance(value, int) else tuple(value)


def _init_weight(in_channels: int, out_channels: int, kernel_size: tuple) -> mx.array:
    # Uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)], fan_in = C_in * taps.
    scale = math.sqrt(1.0 / (in_channels * math.prod(kernel_size)))
    return mx.random.uniform(low=-scale, high=scale,
                             shape=(out_channels, *kernel_size, in_channels))


class Conv1d(Module):
    """1-D convolution over ``(N, L, C_in)`` inputs giving ``(N, L_out, C_out)``.

    The weight is ``(out_channels, kernel_size, in_channels // groups)``,
    uniform in ``±1/sqrt(in_channels // groups * kernel_size)``; the bias starts at 0.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = True) -> None:
        super().__init__()
        if in_channels % groups != 0:
            raise ValueError(f"The number of input channels ({in_channels}) must be divisible "
                             f"by the number of groups ({groups})")
        self.weight = _init_weight(in_channels // groups, out_channels, (kernel_size,))
        if bias:
            self.bias = mx.zeros((out_channels,))
        self.padding = padding
        self.dilation = dilation
        self.stride = stride
        self.groups = groups

    def _extra_repr(self) -> str:
        return (f"{self.weight.shape[-1] * self.groups}, {self.weight.shape[0]}, "
                f"kernel_size={self.weight.shape[1]}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, groups={self.groups}, "
                f"bias={'bias' in self}")

    def __call__(self, x: mx.array) -> mx.array:
        y = mx.conv1d(x, self.weight, self.stride, self.padding, self.dilation, self.groups)
        return y + self.bias if "bias" in self else y


class Conv2d(Module):
    """2-D convolution over ``(N, H, W, C_in)`` inputs giving ``(N, H_out, W_out, C_out)``.

    The weight is ``(out_channels, KH, KW, in_channels // groups)``.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Union[int, tuple],
                 stride: Union[int, tuple] = 1, padding: Union[int, tuple] = 0,
                 dilation: Union[int, tuple] = 1, groups: int = 1, bias: bool = True) -> None:
        super().__init__()
        if in_channels % groups != 0:
            raise ValueError(f"The number of input channels ({in_channels}) must be divisible "
                             f"by the number of groups ({groups})")
        kernel_size, stride, padding = (_tuple(v, 2) for v in (kernel_size, stride, padding))
        self.weight = _init_weight(in_channels // groups, out_channels, kernel_size)
        if bias:
            self.bias = mx.zeros((out_channels,))
        self.padding = padding
        self.stride = stride
        self.dilation = dilation
        self.groups = groups

    def _extra_repr(self) -> str:
        return (f"{self.weight.shape[-1] * self.groups}, {self.weight.shape[0]}, "
                f"kernel_size={self.weight.shape[1:3]}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, groups={self.groups}, "
                f"bias={'bias' in self}")

    def __call__(self, x: mx.array) -> mx.array:
        y = mx.conv2d(x, self.weight, self.stride, self.padding, self.dilation, self.groups)
        return y + self.bias if "bias" in self else y


class Conv3d(Module):
    """3-D convolution over ``(N, D, H, W, C_in)`` inputs.

    The weight is ``(out_channels, KD, KH, KW, in_channels)`` (no groups, as MLX).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Union[int, tuple],
                 stride: Union[int, tuple] = 1, padding: Union[int, tuple] = 0,
                 dilation: Union[int, tuple] = 1, bias: bool = True) -> None:
        super().__init__()
        kernel_size, stride, padding = (_tuple(v, 3) for v in (kernel_size, stride, padding))
        self.weight = _init_weight(in_channels, out_channels, kernel_size)
        if bias:
            self.bias = mx.zeros((out_channels,))
        self.padding = padding
        self.stride = stride
        self.dilation = dilation

    def _extra_repr(self) -> str:
        return (f"{self.weight.shape[-1]}, {self.weight.shape[0]}, "
                f"kernel_size={self.weight.shape[1:4]}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, bias={'bias' in self}")

    def __call__(self, x: mx.array) -> mx.array:
        y = mx.conv3d(x, self.weight, self.stride, self.padding, self.dilation)
        return y + self.bias if "bias" in self else y
