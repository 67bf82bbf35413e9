"""The fused ops the layers need (``mx.fast`` in MLX), with composite fallbacks.

When ``loom.core.fast`` provides an op it is used, as MLX's layers do; until
then these compositions of core ops compute the same function (statistics in
float32 for half-precision inputs, as the fused kernels do) and are
differentiable through the ordinary rules.
"""

from __future__ import annotations

import math
from typing import Optional, Union

import loom.core as mx

_fast = getattr(mx, "fast", None)


def _has(name: str) -> bool:
    return _fast is not None and hasattr(_fast, name)


def _upcast(x: mx.array) -> mx.array:
    return x.astype(mx.float32) if x.dtype in (mx.float16, mx.bfloat16) else x


def layer_norm(
    x: mx.array, weight: Optional[mx.array], bias: Optional[mx.array], eps: float
) -> mx.array:
    """Normalise the last axis to zero mean and unit variance, then scale and shift."""
    if _has("layer_norm"):
        return _fast.layer_norm(x, weight, bias, eps)
    xf = _upcast(x)
    mean = mx.mean(xf, axis=-1, keepdims=True)
    var = mx.var(xf, axis=-1, keepdims=True)
    y = ((xf - mean) * mx.rsqrt(var + eps)).astype(x.dtype)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def rms_norm(x: mx.array, weight: Optional[mx.array], eps: float) -> mx.array:
    """Divide the last axis by its root mean square, then scale."""
    if _has("rms_norm"):
        return _fast.rms_norm(x, weight, eps)
    xf = _upcast(x)
    y = (xf * mx.rsqrt(mx.mean(mx.square(xf), axis=-1, keepdims=True) + eps)).astype(x.dtype)
    return y * weight if weight is not None else y


def rope(
    x: mx.array,
    dims: int,
    *,
    traditional: bool,
    base: Optional[float],
    scale: float,
    offset: Union[int, mx.array],
    freqs: Optional[mx.array] = None,
) -> mx.array:
    """Rotary position embedding of the first ``dims`` features of ``(..., L, D)`` inputs.

    Position ``p`` (``offset``, ``offset + 1``, ...) rotates feature pair ``i`` by
    ``p * scale * base ** (-2i / dims)``. Pairs are adjacent features with
    ``traditional``, else feature ``i`` and ``i + dims / 2``.
    """
    if _has("rope"):
        return _fast.rope(
            x, dims, traditional=traditional, base=base, scale=scale, offset=offset, freqs=freqs
        )
    L = x.shape[-2]
    half = dims // 2
    if freqs is None:
        inv_freq = mx.exp(mx.arange(0, half, dtype=mx.float32) * (-2.0 * math.log(base) / dims))
    else:
        inv_freq = 1.0 / freqs.astype(mx.float32)
    positions = mx.arange(L, dtype=mx.float32) + offset
    theta = (positions * scale)[:, None] * inv_freq[None, :]
    cos, sin = mx.cos(theta), mx.sin(theta)
    rotated, rest = x[..., :dims], x[..., dims:]
    xf = _upcast(rotated)
    if traditional:
        pairs = xf.reshape(*xf.shape[:-1], half, 2)
        a, b = pairs[..., 0], pairs[..., 1]
        out = mx.stack([a * cos - b * sin, a * sin + b * cos], axis=-1).reshape(xf.shape)
    else:
        a, b = xf[..., :half], xf[..., half:]
        out = mx.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)
    out = out.astype(x.dtype)
    if dims < x.shape[-1]:
        out = mx.concatenate([out, rest], axis=-1)
    return out


def scaled_dot_product_attention(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    *,
    scale: float,
    mask: Union[None, str, mx.array] = None,
) -> mx.array:
    """``softmax(scale * q k^T + mask) v`` over ``(B, heads, L, D)`` inputs.

    ``k``/``v`` may have fewer heads than ``q`` (grouped-query attention); a
    boolean mask keeps where True, ``"causal"`` masks future positions.
    """
    if _has("scaled_dot_product_attention"):
        return _fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
    n_q, n_kv = q.shape[1], k.shape[1]
    if n_q != n_kv:
        if n_q % n_kv != 0:
            raise ValueError(
                f"[scaled_dot_product_attention] The number of query heads ({n_q}) must be "
                f"a multiple of the number of key/value heads ({n_kv})."
            )
        k = mx.repeat(k, n_q // n_kv, axis=1)
        v = mx.repeat(v, n_q // n_kv, axis=1)
    scores = (q * scale) @ k.swapaxes(-1, -2)
    if isinstance(mask, str):
        if mask != "causal":
            raise ValueError(f"[scaled_dot_product_attention] Invalid mask type '{mask}'.")
        L, S = scores.shape[-2], scores.shape[-1]
        future = mx.arange(L)[:, None] + (S - L) < mx.arange(S)[None, :]
        scores = mx.where(future, mx.array(-float("inf"), scores.dtype), scores)
    elif mask is not None:
        if mask.dtype == mx.bool_:
            scores = mx.where(mask, scores, mx.array(-float("inf"), scores.dtype))
        else:
            scores = scores + mask.astype(scores.dtype)
    weights = mx.softmax(scores.astype(mx.float32), axis=-1).astype(q.dtype)
    return weights @ v
