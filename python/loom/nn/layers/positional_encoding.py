"""Position encodings: RoPE, SinusoidalPositionalEncoding, ALiBi."""

from __future__ import annotations

import math
from typing import Optional

import loom.core as mx

from ._fast import rope
from .base import Module


class RoPE(Module):
    """Rotary position embedding of the first ``dims`` features of ``(..., L, D)`` inputs."""

    def __init__(self, dims: int, traditional: bool = False, base: float = 10000, scale: float = 1.0):
        super().__init__()
        self.dims = dims
        self.traditional = traditional
        self.base = base
        self.scale = scale

    def _extra_repr(self):
        return f"{self.dims}, traditional={self.traditional}"

    def __call__(self, x, offset: int = 0):
        return rope(
            x, self.dims, traditional=self.traditional, base=self.base, scale=self.scale, offset=offset
        )


class SinusoidalPositionalEncoding(Module):
    """``[sin(x * f), cos(x * f)]`` for ``dims / 2`` frequencies from ``max_freq`` down to ``min_freq``.

    The frequencies are geometric; the result is scaled by ``scale``
    (default ``sqrt(2 / dims)``). ``full_turns`` multiplies them by ``2 pi``.
    """

    def __init__(
        self,
        dims: int,
        min_freq: float = 0.0001,
        max_freq: float = 1,
        scale: Optional[float] = None,
        cos_first: bool = False,
        full_turns: bool = False,
    ):
        super().__init__()
        if dims <= 0 or dims % 2 != 0:
            raise ValueError(
                f"[SinusoidalPositionalEncoding] dims must be positive and even but got {dims}."
            )
        half = dims // 2
        if half == 1:
            one_zero = mx.array([1.0])
        else:
            one_zero = 1 - mx.arange(0, half) / (half - 1)
        log_min, log_max = math.log(min_freq), math.log(max_freq)
        self._sigmas = mx.exp(one_zero * (log_max - log_min) + log_min)
        if full_turns:
            self._sigmas = self._sigmas * (2 * math.pi)
        self.scale = scale if scale is not None else (2 / dims) ** 0.5
        self.cos_first = cos_first

    def __call__(self, x):
        y = x[..., None] * self._sigmas
        parts = [mx.cos(y), mx.sin(y)] if self.cos_first else [mx.sin(y), mx.cos(y)]
        y = mx.concatenate(parts, axis=-1)
        if self.scale != 1:
            y = y * self.scale
        return y


class ALiBi(Module):
    """Adds attention biases linear in the query-key distance, one slope per head."""

    @staticmethod
    def create_alibi_matrix(
        q_sequence_length: int,
        k_sequence_length: int,
        num_heads: int,
        offset: int = 0,
        dtype: mx.Dtype = mx.float32,
    ) -> mx.array:
        q = mx.arange(offset, q_sequence_length)
        k = mx.arange(0, k_sequence_length)
        distance = -mx.abs(q[:, None] - k[None, :])[None, None]
        slopes = ALiBi.create_alibi_slope(num_heads=num_heads, dtype=dtype)
        return (distance * slopes).astype(dtype)

    @staticmethod
    def create_alibi_slope(num_heads: int, dtype: mx.Dtype = mx.float32) -> mx.array:
        def slopes(n: int):
            if math.log2(n).is_integer():
                start = 2 ** (-(2 ** -(math.log2(n) - 3)))
                return [start ** (i + 1) for i in range(n)]
            # Not a power of two: the slopes of the next lower power, then every
            # other slope of the next higher one.
            lower = 2 ** math.floor(math.log2(n))
            return slopes(lower) + slopes(2 * lower)[0::2][: n - lower]

        return mx.array(slopes(num_heads), dtype=dtype)[:, None, None]

    def __call__(self, attention_scores: mx.array, offset: int = 0, mask: Optional[mx.array] = None):
        bias = ALiBi.create_alibi_matrix(
            q_sequence_length=attention_scores.shape[-2] + offset,
            k_sequence_length=attention_scores.shape[-1],
            num_heads=attention_scores.shape[1],
            offset=offset,
            dtype=attention_scores.dtype,
        )
        if mask is not None:
            bias = bias + mask
        return attention_scores + bias
