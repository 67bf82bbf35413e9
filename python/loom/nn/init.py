"""Parameter initialisers: each function returns ``initializer(array) -> array``.

The initializer reads only the shape of its argument and returns a new
array of that shape in ``dtype``.
"""

from __future__ import annotations

import math
from typing import Callable, Literal

import numpy as np

import loom.core as mx


def constant(value: float, dtype: mx.Dtype = mx.float32) -> Callable[[mx.array], mx.array]:
    """Every element ``value``."""

    def initializer(a: mx.array) -> mx.array:
        return mx.full(a.shape, value, dtype=dtype)

    return initializer


def normal(
    mean: float = 0.0, std: float = 1.0, dtype: mx.Dtype = mx.float32
) -> Callable[[mx.array], mx.array]:
    """Samples of ``N(mean, std^2)``."""

    def initializer(a: mx.array) -> mx.array:
        return mx.random.normal(shape=a.shape, scale=std, loc=mean, dtype=dtype)

    return initializer


def uniform(
    low: float = 0.0, high: float = 1.0, dtype: mx.Dtype = mx.float32
) -> Callable[[mx.array], mx.array]:
    """Samples of ``U[low, high)``."""

    def initializer(a: mx.array) -> mx.array:
        return mx.random.uniform(low, high, a.shape, dtype=dtype)

    return initializer


def identity(dtype: mx.Dtype = mx.float32) -> Callable[[mx.array], mx.array]:
    """The identity matrix (square 2-D arrays only)."""

    def initializer(arr: mx.array) -> mx.array:
        if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
            raise ValueError(f"The input array must be a square matrix but got shape {arr.shape}.")
        return mx.eye(n=arr.shape[0], dtype=dtype)

    return initializer


def _fans(x: mx.array):
    """(fan_in, fan_out) of an ``(out, ..., in)`` weight: the receptive field multiplies both."""
    if x.ndim < 2:
        raise ValueError(
            "Glorot / He initialization requires at least 2 dimensional input"
            f" but input with {x.ndim} dimensions."
        )
    receptive = 1
    for d in x.shape[1:-1]:
        receptive *= d
    return x.shape[-1] * receptive, x.shape[0] * receptive


def glorot_normal(dtype: mx.Dtype = mx.float32) -> Callable[[mx.array, float], mx.array]:
    """Normal with std ``gain * sqrt(2 / (fan_in + fan_out))``."""

    def initializer(a: mx.array, gain: float = 1.0) -> mx.array:
        fan_in, fan_out = _fans(a)
        std = gain * math.sqrt(2.0 / (fan_in + fan_out))
        return mx.random.normal(shape=a.shape, scale=std, dtype=dtype)

    return initializer


def glorot_uniform(dtype: mx.Dtype = mx.float32) -> Callable[[mx.array, float], mx.array]:
    """Uniform in ``±gain * sqrt(6 / (fan_in + fan_out))``."""

    def initializer(a: mx.array, gain: float = 1.0) -> mx.array:
        fan_in, fan_out = _fans(a)
        limit = gain * math.sqrt(6.0 / (fan_in + fan_out))
        return mx.random.uniform(-limit, limit, a.shape, dtype=dtype)

    return initializer


def _fan(a: mx.array, mode: str) -> int:
    fan_in, fan_out = _fans(a)
    if mode == "fan_in":
        return fan_in
    if mode == "fan_out":
        return fan_out
    raise ValueError(f"Invalid mode: {mode}. Valid modes are: fan_in, fan_out")


def he_normal(
    dtype: mx.Dtype = mx.float32,
) -> Callable[[mx.array, Literal["fan_in", "fan_out"], float], mx.array]:
    """Normal with std ``gain / sqrt(fan)``."""

    def initializer(a: mx.array, mode: Literal["fan_in", "fan_out"] = "fan_in", gain: float = 1.0):
        std = gain / math.sqrt(_fan(a, mode))
        return mx.random.normal(shape=a.shape, scale=std, dtype=dtype)

    return initializer


def he_uniform(
    dtype: mx.Dtype = mx.float32,
) -> Callable[[mx.array, Literal["fan_in", "fan_out"], float], mx.array]:
    """Uniform in ``±gain * sqrt(3 / fan)``."""

    def initializer(a: mx.array, mode: Literal["fan_in", "fan_out"] = "fan_in", gain: float = 1.0):
        limit = gain * math.sqrt(3.0 / _fan(a, mode))
        return mx.random.uniform(-limit, limit, a.shape, dtype=dtype)

    return initializer


def sparse(
    sparsity: float, mean: float = 0.0, std: float = 1.0, dtype: mx.Dtype = mx.float32
) -> Callable[[mx.array], mx.array]:
    """Normal samples with ``ceil(sparsity * cols)`` random entries of each row set to zero."""

    def initializer(a: mx.array) -> mx.array:
        if a.ndim != 2:
            raise ValueError("Only tensors with 2 dimensions are supported")
        rows, cols = a.shape
        num_zeros = int(math.ceil(sparsity * cols))
        # The zero positions: the first num_zeros of a random permutation per
        # row, drawn from loom's generator so mx.random.seed governs them.
        order = np.argsort(np.array(mx.random.uniform(shape=a.shape)), axis=1)
        keep = np.ones((rows, cols), dtype=np.float32)
        np.put_along_axis(keep, order[:, :num_zeros], 0.0, axis=1)
        values = mx.random.normal(shape=a.shape, scale=std, loc=mean, dtype=dtype)
        return values * mx.array(keep).astype(dtype)

    return initializer


def orthogonal(gain: float = 1.0, dtype: mx.Dtype = mx.float32) -> Callable[[mx.array], mx.array]:
    """A (semi-)orthogonal matrix scaled by ``gain``: Q of the QR of a normal matrix, signs fixed by R's diagonal."""

    def initializer(a: mx.array) -> mx.array:
        if a.ndim != 2:
            raise ValueError(
                f"Orthogonal initialization requires a 2D array but got a {a.ndim}D array."
            )
        rows, cols = a.shape
        n = max(rows, cols)
        # The QR runs in NumPy: an initializer is never differentiated, and
        # loom.core has no linalg yet. The samples come from loom's generator.
        sample = np.array(mx.random.normal(shape=(n, n))).astype(np.float64)
        q, r = np.linalg.qr(sample)
        q = q * np.sign(np.diag(r))
        q = q[:rows, :cols] * gain
        return mx.array(q.astype(np.float32)).astype(dtype)

    return initializer
