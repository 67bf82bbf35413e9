"""Upsample: nearest, linear and cubic interpolation of channels-last inputs
``(N, *spatial, C)``, with MLX's index conventions.

Every mode is separable, so each spatial axis is resampled by one dense
``(out, in)`` interpolation matrix built on the host from the shapes alone
(one matmul per axis): no gather op is needed, and the gradient is the
transposed matrix. The sample positions and weights are computed in float32,
as MLX does, so the same source pixels are chosen.
"""

from __future__ import annotations

import math
from typing import Literal, Tuple, Union

import numpy as np

import loom.core as mx

from .base import Module


def _positions(N: int, scale: float, align_corners: bool) -> np.ndarray:
    """Source coordinate of each of the ``int(scale * N)`` outputs."""
    M = int(scale * N)
    m = np.arange(M, dtype=np.float32)
    if align_corners:
        return m * np.float32((N - 1) / max(M - 1, 1))
    step = np.float32(1 / scale)
    start = np.float32(((M - 1) * (1 / scale) - N + 1) / 2)
    return m * step - start


def _nearest(N: int, scale: float) -> np.ndarray:
    M = int(scale * N)
    m = np.arange(M, dtype=np.float32)
    if M > N:
        idx = np.round((m + np.float32(0.5)) * np.float32(N / M) - np.float32(0.5))
    else:
        idx = m * np.float32(N / M)
    # A slightly negative position rounds to index 0.
    W = np.zeros((M, N), np.float32)
    W[np.arange(M), np.clip(idx, 0, None).astype(np.int64)] = 1
    return W


def _linear(N: int, scale: float, align_corners: bool) -> np.ndarray:
    pos = np.clip(_positions(N, scale, align_corners), 0, N - 1)
    left, right = np.floor(pos), np.ceil(pos)
    w = pos - left
    W = np.zeros((len(pos), N), np.float32)
    rows = np.arange(len(pos))
    np.add.at(W, (rows, left.astype(np.int64)), 1 - w)
    np.add.at(W, (rows, right.astype(np.int64)), w)
    return W


def _keys(x: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with parameter ``a``."""
    inner = ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    outer = (((x - 5) * x + 8) * x - 4) * a
    return np.where(x <= 1.0, inner, np.where(x <= 2.0, outer, 0.0))


def _cubic(N: int, scale: float, align_corners: bool) -> np.ndarray:
    pos = _positions(N, scale, align_corners)
    base = np.floor(pos)
    W = np.zeros((len(pos), N), np.float32)
    rows = np.arange(len(pos))
    # Taps at floor-1 .. floor+2; taps outside the input repeat the edge.
    for k in (-1, 0, 1, 2):
        tap = base + k
        weight = _keys(np.abs(pos - tap), -0.75).astype(np.float32)
        np.add.at(W, (rows, np.clip(tap, 0, N - 1).astype(np.int64)), weight)
    return W


def _antialiased(N: int, scale: float, kernel, radius: float) -> np.ndarray:
    """Filter taps widened by ``1/scale`` when downsampling, normalised to sum to one."""
    pos = _positions(N, scale, False)
    stretch = 1.0 / scale if scale < 1 else 1.0
    taps = math.ceil(radius * stretch) + 1
    W = np.zeros((len(pos), N), np.float32)
    rows = np.arange(len(pos))
    idx_all, w_all = [], []
    for k in range(-taps + 1, taps):
        idx = np.floor(pos) + k
        w = kernel(np.abs(pos - idx) / stretch)
        idx_all.append(idx)
        w_all.append(np.where((idx >= 0) & (idx < N), w, 0.0))
    total = sum(w_all)
    total = np.where(total > 0, total, 1.0)
    for idx, w in zip(idx_all, w_all):
        np.add.at(W, (rows, np.clip(idx, 0, N - 1).astype(np.int64)), (w / total).astype(np.float32))
    return W


def _matrix(mode: str, N: int, scale: float, align_corners: bool, antialias: bool) -> np.ndarray:
    if mode == "nearest":
        return _nearest(N, scale)
    if mode == "linear":
        if antialias:
            return _antialiased(N, scale, lambda d: np.maximum(1.0 - d, 0.0), 1.0)
        return _linear(N, scale, align_corners)
    if antialias:
        return _antialiased(N, scale, lambda d: _keys(d, -0.5), 2.0)
    return _cubic(N, scale, align_corners)


def _resample(x: mx.array, mode: str, scale_factor: Tuple, align_corners: bool, antialias: bool):
    dims = x.ndim - 2
    if dims != len(scale_factor):
        raise ValueError("A scale needs to be provided for each spatial dimension")
    for axis, scale in enumerate(scale_factor, start=1):
        W = _matrix(mode, x.shape[axis], scale, align_corners, antialias)
        moved = mx.swapaxes(x, axis, -1)
        x = mx.swapaxes(moved @ mx.array(W.T).astype(x.dtype), axis, -1)
    return x


def _check_antialias(align_corners: bool, antialias: bool) -> None:
    if antialias and align_corners:
        raise ValueError(
            "[Upsample] antialias=True with align_corners=True is not "
            "supported. Use align_corners=False for antialiased interpolation."
        )


def upsample_nearest(x: mx.array, scale_factor: Tuple):
    """Nearest-neighbour resampling of ``(N, *spatial, C)``."""
    return _resample(x, "nearest", scale_factor, False, False)


def upsample_linear(x: mx.array, scale_factor: Tuple, align_corners: bool = False, antialias: bool = False):
    """(Bi/tri)linear resampling of ``(N, *spatial, C)``."""
    _check_antialias(align_corners, antialias)
    return _resample(x, "linear", scale_factor, align_corners, antialias)


def upsample_cubic(x: mx.array, scale_factor: Tuple, align_corners: bool = False, antialias: bool = False):
    """(Bi/tri)cubic resampling of ``(N, *spatial, C)``."""
    _check_antialias(align_corners, antialias)
    return _resample(x, "cubic", scale_factor, align_corners, antialias)


class Upsample(Module):
    """Resamples the spatial axes of ``(N, *spatial, C)`` inputs by ``scale_factor``."""

    def __init__(
        self,
        scale_factor: Union[float, Tuple],
        mode: Literal["nearest", "linear", "cubic"] = "nearest",
        align_corners: bool = False,
        antialias: bool = False,
    ):
        super().__init__()
        if mode not in ["nearest", "linear", "cubic"]:
            raise ValueError(f"[Upsample] Got unsupported upsampling algorithm: {mode}")
        if antialias and mode == "nearest":
            raise ValueError(
                "[Upsample] Antialiasing is not supported for nearest neighbor upsampling"
            )
        if isinstance(scale_factor, (list, tuple)):
            scale_factor = tuple(map(float, scale_factor))
        else:
            scale_factor = float(scale_factor)
        _check_antialias(align_corners, antialias)
        self.scale_factor = scale_factor
        self.mode = mode
        self.align_corners = align_corners
        self.antialias = antialias

    def _extra_repr(self) -> str:
        text = f"scale_factor={self.scale_factor}, mode={self.mode!r}, align_corners={self.align_corners}"
        return text + (", antialias=True" if self.antialias else "")

    def __call__(self, x: mx.array) -> mx.array:
        dims = x.ndim - 2
        if dims <= 0:
            raise ValueError(
                f"[Upsample] The input should have at least 1 spatial "
                f"dimension which means it should be at least 3D but "
                f"{x.ndim}D was provided"
            )
        scale = self.scale_factor
        if isinstance(scale, tuple):
            if len(scale) != dims:
                raise ValueError(
                    f"[Upsample] One scale per spatial dimension is required but "
                    f"scale_factor={scale} and the number of spatial "
                    f"dimensions were {dims}"
                )
        else:
            scale = (scale,) * dims
        return _resample(x, self.mode, scale, self.align_corners, self.antialias)
