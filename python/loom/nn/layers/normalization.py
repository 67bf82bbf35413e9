"""Normalisation layers: LayerNorm, RMSNorm, GroupNorm, BatchNorm, InstanceNorm.

All take channels-last inputs ``(N, ..., C)``.
"""

from __future__ import annotations

from typing import Tuple

import loom.core as mx

from ._fast import layer_norm, rms_norm
from .base import Module


def _check_eps(name: str, eps: float) -> None:
    if eps <= 0.0:
        raise ValueError(f"[{name}] 'eps' must be positive but got {eps}.")


class InstanceNorm(Module):
    """Normalises each channel of each example over its spatial positions."""

    def __init__(self, dims: int, eps: float = 1e-5, affine: bool = False):
        super().__init__()
        _check_eps("InstanceNorm", eps)
        if affine:
            self.weight = mx.ones((dims,))
            self.bias = mx.zeros((dims,))
        self.dims = dims
        self.eps = eps

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x: mx.array) -> mx.array:
        if x.ndim < 3:
            raise ValueError(
                f"InstanceNorm expects inputs with at least 3 dimensions"
                f" (N, ..., C) but the input has {x.ndim} dimensions."
            )
        axes = tuple(range(1, x.ndim - 1))
        mean = mx.mean(x, axis=axes, keepdims=True)
        var = mx.var(x, axis=axes, keepdims=True)
        x = (x - mean) * mx.rsqrt(var + self.eps)
        return (self.weight * x + self.bias) if "weight" in self else x


class LayerNorm(Module):
    """Normalises the last axis; learned scale (and shift) when ``affine`` (and ``bias``)."""

    def __init__(self, dims: int, eps: float = 1e-5, affine: bool = True, bias: bool = True):
        super().__init__()
        _check_eps("LayerNorm", eps)
        if affine:
            self.weight = mx.ones((dims,))
            if bias:
                self.bias = mx.zeros((dims,))
        self.eps = eps
        self.dims = dims

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x):
        weight = self["weight"] if "weight" in self else None
        bias = self["bias"] if "bias" in self else None
        return layer_norm(x, weight, bias, self.eps)


class RMSNorm(Module):
    """Divides the last axis by its root mean square and applies a learned scale."""

    def __init__(self, dims: int, eps: float = 1e-5):
        super().__init__()
        _check_eps("RMSNorm", eps)
        self.weight = mx.ones((dims,))
        self.eps = eps

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, eps={self.eps}"

    def __call__(self, x):
        return rms_norm(x, self["weight"], self.eps)


class GroupNorm(Module):
    """Normalises groups of channels over all positions of each example.

    MLX's default groups channels by ``channel % num_groups``;
    ``pytorch_compatible=True`` groups consecutive channels as PyTorch does.
    """

    def __init__(
        self,
        num_groups: int,
        dims: int,
        eps: float = 1e-5,
        affine: bool = True,
        pytorch_compatible: bool = False,
    ):
        super().__init__()
        _check_eps("GroupNorm", eps)
        if num_groups <= 0:
            raise ValueError(f"The number of groups ({num_groups}) must be a positive integer.")
        if dims <= 0:
            raise ValueError(f"The number of features ({dims}) must be a positive integer.")
        if dims % num_groups != 0:
            raise ValueError(
                f"The number of features ({dims}) must be evenly divisible"
                f" by the number of groups ({num_groups})."
            )
        if affine:
            self.bias = mx.zeros((dims,))
            self.weight = mx.ones((dims,))
        self.num_groups = num_groups
        self.dims = dims
        self.eps = eps
        self.pytorch_compatible = pytorch_compatible

    def _extra_repr(self):
        return (
            f"{self.num_groups}, {self.dims}, eps={self.eps}, "
            f"affine={'weight' in self}, pytorch_compatible={self.pytorch_compatible}"
        )

    def _normalize(self, x, axis):
        mean = mx.mean(x, axis=axis, keepdims=True)
        var = mx.var(x, axis=axis, keepdims=True)
        return (x - mean) * mx.rsqrt(var + self.eps)

    def __call__(self, x):
        batch, *rest, dims = x.shape
        g = self.num_groups
        if self.pytorch_compatible:
            y = x.reshape(batch, -1, g, dims // g)
            y = self._normalize(y, (1, 3))
        else:
            y = x.reshape(batch, -1, g)
            y = self._normalize(y, 1)
        y = y.reshape(batch, *rest, dims)
        return (self.weight * y + self.bias) if "weight" in self else y


class BatchNorm(Module):
    """Normalises each channel over the batch (and spatial) axes.

    In training it uses the batch statistics and updates ``running_mean`` and
    ``running_var`` (unbiased) with ``momentum``; in eval mode it uses the
    running statistics. The running statistics are frozen parameters: state
    that is saved and loaded but never trained.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
    ):
        super().__init__()
        _check_eps("BatchNorm", eps)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = mx.ones((num_features,))
            self.bias = mx.zeros((num_features,))
        if self.track_running_stats:
            self.running_mean = mx.zeros((num_features,))
            self.running_var = mx.ones((num_features,))
            self.freeze(keys=["running_mean", "running_var"], recurse=False)

    def unfreeze(self, *args, **kwargs):
        super().unfreeze(*args, **kwargs)
        if self.track_running_stats:
            self.freeze(keys=["running_mean", "running_var"], recurse=False)
        return self

    def _extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, "
            f"momentum={self.momentum}, affine={'weight' in self}, "
            f"track_running_stats={self.track_running_stats}"
        )

    def _calc_stats(self, x: mx.array, ddof: int = 0) -> Tuple[mx.array, mx.array]:
        axes = tuple(range(0, x.ndim - 1))
        return mx.mean(x, axis=axes), mx.var(x, axis=axes, ddof=ddof)

    def __call__(self, x: mx.array) -> mx.array:
        if x.ndim < 2 or x.ndim > 4:
            raise ValueError(
                f"Expected input tensor to have 2, 3 or 4 dimensions, but got {x.ndim}"
            )
        if self.training:
            count = 1
            for size in x.shape[:-1]:
                count *= size
            if count == 1:
                raise ValueError("BatchNorm training requires more than one value per channel.")
        mean, var = self._calc_stats(x)
        if self.training and self.track_running_stats:
            mu = self.momentum
            _, unbiased_var = self._calc_stats(x, ddof=1)
            self.running_mean = (1 - mu) * self.running_mean + mu * mean
            self.running_var = (1 - mu) * self.running_var + mu * unbiased_var
        elif self.track_running_stats:
            mean, var = self.running_mean, self.running_var
        x = (x - mean) * mx.rsqrt(var + self.eps)
        return (self.weight * x + self.bias) if "weight" in self else x
