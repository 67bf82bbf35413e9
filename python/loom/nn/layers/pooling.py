"""Pooling layers: MaxPool1d/2d/3d and AvgPool1d/2d/3d over channels-last inputs.

A window of ``kernel_size`` taps moves by ``stride`` (default: the kernel
size) over the input padded by ``padding`` on both sides (with -inf for max
pooling, 0 for average pooling, whose padded taps count in the mean, as
MLX's do). Output length per axis: ``(L + 2 * padding - kernel) // stride + 1``.
"""

from __future__ import annotations

import itertools
import math
from typing import Optional, Tuple, Union

import loom.core as mx

from .base import Module


def _per_axis(name: str, what: str, value, n: int) -> tuple:
    if isinstance(value, int):
        return (value,) * n
    if isinstance(value, tuple) and len(value) == n and all(isinstance(v, int) for v in value):
        return value
    raise ValueError(f"[{name}] '{what}' must be an integer or a tuple containing {n} integers")


class _Pool(Module):
    _dims = 1
    _max = True

    def __init__(self, kernel_size, stride, padding) -> None:
        super().__init__()
        name = type(self).__name__
        n = self._dims
        self._kernel_size = _per_axis(name, "kernel_size", kernel_size, n)
        self._stride = (self._kernel_size if stride is None
                        else _per_axis(name, "stride", stride, n))
        self._padding = _per_axis(name, "padding", padding, n)

    def _extra_repr(self) -> str:
        return (f"kernel_size={self._kernel_size}, stride={self._stride}, "
                f"padding={self._padding}")

    def __call__(self, x: mx.array) -> mx.array:
        n = self._dims
        if x.ndim - 2 != n:
            raise ValueError(
                "To extract sliding windows the window shapes and strides must have the same "
                f"number of spatial dimensions as the signal but the signal has {x.ndim - 2} "
                f"dims and the window shape has {n} and strides have {n}.")
        if any(self._padding):
            fill = float("-inf") if self._max else 0.0
            x = mx.pad(x, [(0, 0)] + [(p, p) for p in self._padding] + [(0, 0)],
                       constant_values=fill)
        k, s = self._kernel_size, self._stride
        spatial = x.shape[1:-1]
        out = [max(0, (length - kk) // ss + 1) for length, kk, ss in zip(spatial, k, s)]
        if k == s and all(o > 0 for o in out):
            # Non-overlapping windows: crop to whole windows, give each window
            # its own axes and reduce them.
            x = x[(slice(None),) + tuple(slice(0, o * kk) for o, kk in zip(out, k))]
            shape = [x.shape[0]]
            for o, kk in zip(out, k):
                shape += [o, kk]
            x = x.reshape(shape + [x.shape[-1]])
            axes = [2 + 2 * i for i in range(n)]
            return mx.max(x, axis=axes) if self._max else mx.mean(x, axis=axes)
        # Overlapping or gapped windows: combine one strided view per tap.
        result = None
        for tap in itertools.product(*(range(kk) for kk in k)):
            view = x[(slice(None),) + tuple(
                slice(t, t + (o - 1) * ss + 1, ss) if o > 0 else slice(0, 0)
                for t, o, ss in zip(tap, out, s))]
            if result is None:
                result = view
            elif self._max:
                result = mx.maximum(result, view)
            else:
                result = result + view
        return result if self._max else result / math.prod(k)


class MaxPool1d(_Pool):
    """Max pooling over ``(N, L, C)`` inputs."""

    _dims, _max = 1, True

    def __init__(self, kernel_size: Union[int, Tuple[int]],
                 stride: Optional[Union[int, Tuple[int]]] = None,
                 padding: Union[int, Tuple[int]] = 0) -> None:
        super().__init__(kernel_size, stride, padding)


class MaxPool2d(_Pool):
    """Max pooling over ``(N, H, W, C)`` inputs."""

    _dims, _max = 2, True

    def __init__(self, kernel_size: Union[int, Tuple[int, int]],
                 stride: Optional[Union[int, Tuple[int, int]]] = None,
                 padding: Optional[Union[int, Tuple[int, int]]] = 0) -> None:
        super().__init__(kernel_size, stride, padding)


class MaxPool3d(_Pool):
    """Max pooling over ``(N, D, H, W, C)`` inputs."""

    _dims, _max = 3, True

    def __init__(self, kernel_size: Union[int, Tuple[int, int, int]],
                 stride: Optional[Union[int, Tuple[int, int, int]]] = None,
                 padding: Optional[Union[int, Tuple[int, int, int]]] = 0) -> None:
        super().__init__(kernel_size, stride, padding)


class AvgPool1d(_Pool):
    """Average pooling over ``(N, L, C)`` inputs."""

    _dims, _max = 1, False

    def __init__(self, kernel_size: Union[int, Tuple[int]],
                 stride: Optional[Union[int, Tuple[int]]] = None,
                 padding: Union[int, Tuple[int]] = 0) -> None:
        super().__init__(kernel_size, stride, padding)


class AvgPool2d(_Pool):
    """Average pooling over ``(N, H, W, C)`` inputs."""

    _dims, _max = 2, False

    def __init__(self, kernel_size: Union[int, Tuple[int, int]],
                 stride: Optional[Union[int, Tuple[int, int]]] = None,
                 padding: Optional[Union[int, Tuple[int, int]]] = 0) -> None:
        super().__init__(kernel_size, stride, padding)


class AvgPool3d(_Pool):
    """Average pooling over ``(N, D, H, W, C)`` inputs."""

    _dims, _max = 3, False

    def __init__(self, kernel_size: Union[int, Tuple[int, int, int]],
                 stride: Optional[Union[int, Tuple[int, int, int]]] = None,
                 padding: Optional[Union[int, Tuple[int, int, int]]] = 0) -> None:
        super().__init__(kernel_size, stride, padding)
