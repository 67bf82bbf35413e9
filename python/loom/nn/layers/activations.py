"""Activation functions and their module forms."""

from __future__ import annotations

import math
from typing import Any

import loom.core as mx

from .base import Module

_SQRT_2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def sigmoid(x):
    """``1 / (1 + exp(-x))``."""
    return mx.sigmoid(x)


def relu(x):
    """``max(x, 0)``."""
    return mx.maximum(x, 0)


def relu2(x):
    """``max(x, 0) ** 2``."""
    return mx.square(mx.maximum(x, 0))


def relu6(x):
    """``min(max(x, 0), 6)``."""
    return mx.minimum(mx.maximum(x, 0), 6.0)


def leaky_relu(x, negative_slope=0.01):
    """``max(negative_slope * x, x)``."""
    return mx.maximum(negative_slope * x, x)


def log_softmax(x, axis=-1):
    """``x - logsumexp(x)`` along ``axis``, shifted by the max for stability."""
    x = x - mx.stop_gradient(mx.max(x, axis=axis, keepdims=True))
    return x - mx.logsumexp(x, axis=axis, keepdims=True)


def elu(x, alpha=1.0):
    """``x`` where positive, else ``alpha * (exp(x) - 1)``."""
    return mx.where(x > 0, x, alpha * (mx.exp(x) - 1))


def softmax(x, axis=-1):
    """``exp(x) / sum(exp(x))`` along ``axis``."""
    return mx.softmax(x, axis=axis)


def softplus(x):
    """``log(1 + exp(x))``."""
    return mx.logaddexp(x, 0)


def softsign(x):
    """``x / (1 + |x|)``."""
    return mx.divide(x, 1 + mx.abs(x))


def softshrink(x, lambd: float = 0.5):
    """``x - sign(x) * lambd`` where ``|x| > lambd``, else 0."""
    return mx.where(mx.abs(x) > lambd, x - mx.sign(x) * lambd, 0)


def celu(x, alpha=1.0):
    """``max(0, x) + alpha * (exp(min(0, x) / alpha) - 1)``."""
    return mx.maximum(x, 0.0) + alpha * (mx.exp(mx.minimum(x, 0.0) / alpha) - 1)


def silu(x):
    """``x * sigmoid(x)`` (swish)."""
    return x * mx.sigmoid(x)


def log_sigmoid(x):
    """``log(sigmoid(x))``, computed as ``-softplus(-x)``."""
    return -softplus(-x)


def gelu(x) -> mx.array:
    """``x * Phi(x)`` with the exact Gaussian CDF."""
    return x * (1 + mx.erf(x / _SQRT_2)) / 2


def gelu_approx(x):
    """GELU with the tanh approximation."""
    return 0.5 * x * (1 + mx.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3)))


def gelu_fast_approx(x):
    """GELU as ``x * sigmoid(1.702 x)``."""
    return x * mx.sigmoid(1.702 * x)


def glu(x: mx.array, axis: int = -1) -> mx.array:
    """Gated linear unit: split ``x`` in halves ``a, b`` along ``axis``; ``a * sigmoid(b)``."""
    a, b = mx.split(x, indices_or_sections=2, axis=axis)
    return a * mx.sigmoid(b)


def step(x: mx.array, threshold: float = 0.0):
    """1 where ``x >= threshold``, else 0."""
    return mx.where(x >= threshold, 1, 0)


def selu(x):
    """Scaled ELU (alpha 1.67326, scale 1.0507)."""
    return elu(x, 1.67326) * 1.0507


def prelu(x: mx.array, alpha: mx.array) -> mx.array:
    """``max(0, x) + alpha * min(0, x)`` with a learned ``alpha``."""
    return mx.maximum(0, x) + alpha * mx.minimum(0, x)


def mish(x: mx.array) -> mx.array:
    """``x * tanh(softplus(x))``."""
    return x * mx.tanh(softplus(x))


def hardswish(x):
    """``x * min(max(x + 3, 0), 6) / 6``."""
    return x * mx.minimum(mx.maximum(x + 3, 0), 6) / 6


def hard_tanh(x, min_val=-1.0, max_val=1.0):
    """``x`` clipped to ``[min_val, max_val]``."""
    return mx.minimum(mx.maximum(x, min_val), max_val)


def hard_shrink(x, lambd=0.5):
    """``x`` where ``|x| > lambd``, else 0."""
    return mx.where(mx.abs(x) > lambd, x, 0)


def softmin(x, axis=-1):
    """``softmax(-x)`` along ``axis``."""
    return mx.softmax(-x, axis=axis)


def tanh(x):
    """Hyperbolic tangent."""
    return mx.tanh(x)


def _stateless(fn, doc):
    """A module class whose call is ``fn(x)``."""

    class Activation(Module):
        def __call__(self, x):
            return fn(x)

    Activation.__doc__ = doc
    return Activation


class Sigmoid(_stateless(sigmoid, "Applies :func:`sigmoid`.")):
    pass


class Mish(_stateless(mish, "Applies :func:`mish`.")):
    pass


class ReLU(_stateless(relu, "Applies :func:`relu`.")):
    pass


class ReLU2(_stateless(relu2, "Applies :func:`relu2`.")):
    pass


class ReLU6(_stateless(relu6, "Applies :func:`relu6`.")):
    pass


class Softmax(_stateless(softmax, "Applies :func:`softmax` on the last axis.")):
    pass


class Softplus(_stateless(softplus, "Applies :func:`softplus`.")):
    pass


class Softsign(_stateless(softsign, "Applies :func:`softsign`.")):
    pass


class SiLU(_stateless(silu, "Applies :func:`silu`.")):
    pass


class LogSoftmax(_stateless(log_softmax, "Applies :func:`log_softmax` on the last axis.")):
    pass


class LogSigmoid(_stateless(log_sigmoid, "Applies :func:`log_sigmoid`.")):
    pass


class Tanh(_stateless(tanh, "Applies :func:`tanh`.")):
    pass


class Hardswish(_stateless(hardswish, "Applies :func:`hardswish`.")):
    pass


class SELU(_stateless(selu, "Applies :func:`selu`.")):
    pass


class HardTanh(_stateless(hard_tanh, "Applies :func:`hard_tanh` on [-1, 1].")):
    pass


class Softmin(_stateless(softmin, "Applies :func:`softmin` on the last axis.")):
    pass


class GLU(Module):
    """Applies :func:`glu` along ``axis``."""

    def __init__(self, axis: int = -1):
        super().__init__()
        self.axis = axis

    def __call__(self, x) -> Any:
        return glu(x=x, axis=self.axis)


class LeakyReLU(Module):
    """Applies :func:`leaky_relu`."""

    def __init__(self, negative_slope=1e-2):
        super().__init__()
        self._negative_slope = negative_slope

    def __call__(self, x):
        return leaky_relu(x, self._negative_slope)


class ELU(Module):
    """Applies :func:`elu`."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self._alpha = alpha

    def __call__(self, x):
        return elu(x, self._alpha)


class CELU(Module):
    """Applies :func:`celu`."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self._alpha = alpha

    def __call__(self, x):
        return celu(x, self._alpha)


class Softshrink(Module):
    """Applies :func:`softshrink`."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def __call__(self, x):
        return softshrink(x, self.lambd)


class HardShrink(Module):
    """Applies :func:`hard_shrink`."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def __call__(self, x):
        return hard_shrink(x, self.lambd)


class Step(Module):
    """Applies :func:`step` with ``threshold``."""

    def __init__(self, threshold: float = 0.0):
        super().__init__()
        self.threshold = threshold

    def __call__(self, x: mx.array):
        return step(x, self.threshold)


class PReLU(Module):
    """:func:`prelu` with a learned slope per channel (``num_parameters``), starting at ``init``."""

    def __init__(self, num_parameters=1, init=0.25):
        super().__init__()
        self.weight = mx.full([num_parameters], init)

    def __call__(self, x: mx.array):
        return prelu(x, self.weight)


class GELU(Module):
    """GELU; ``approx``: ``'none'`` (erf), ``'precise'``/``'tanh'`` (tanh form) or ``'fast'`` (sigmoid form)."""

    def __init__(self, approx="none"):
        super().__init__()
        allowed = ["none", "precise", "tanh", "fast"]
        if approx not in allowed:
            raise ValueError(f"The approximation should be in {allowed} but '{approx}' was given")
        self._approx = approx

    def __call__(self, x):
        if self._approx == "none":
            return gelu(x)
        if self._approx in ("precise", "tanh"):
            return gelu_approx(x)
        return gelu_fast_approx(x)
