"""Recurrent layers: RNN, GRU, LSTM over ``(N, L, D)`` or ``(L, D)`` inputs.

The input projection of every step is one matmul up front; the loop over
time does only the hidden-state products.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import loom.core as mx

from .activations import tanh
from .base import Module


def _uniform(scale, shape):
    return mx.random.uniform(low=-scale, high=scale, shape=shape)


class RNN(Module):
    """Elman RNN: ``h_t = nonlinearity(W_xh x_t + W_hh h_{t-1} + b)`` (default tanh).

    Returns the hidden states of every step, ``(N, L, hidden_size)``.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: Optional[Callable] = None,
    ):
        super().__init__()
        self.nonlinearity = nonlinearity or tanh
        if not callable(self.nonlinearity):
            raise ValueError(f"Nonlinearity must be callable. Current value: {nonlinearity}.")
        scale = 1.0 / math.sqrt(hidden_size)
        self.hidden_size = hidden_size
        self.Wxh = _uniform(scale, (hidden_size, input_size))
        self.Whh = _uniform(scale, (hidden_size, hidden_size))
        self.bias = _uniform(scale, (hidden_size,)) if bias else None

    def _extra_repr(self):
        return (
            f"input_dims={self.Wxh.shape[1]}, hidden_size={self.hidden_size}, "
            f"nonlinearity={self.nonlinearity}, bias={self.bias is not None}"
        )

    def __call__(self, x, hidden=None):
        x = mx.addmm(self.bias, x, self.Wxh.T) if self.bias is not None else x @ self.Wxh.T
        states = []
        for t in range(x.shape[-2]):
            h = x[..., t, :]
            if hidden is not None:
                h = mx.addmm(h, hidden, self.Whh.T)
            hidden = self.nonlinearity(h)
            states.append(hidden)
        return mx.stack(states, axis=-2)


class GRU(Module):
    """Gated recurrent unit (gates r, z, n in that order, as PyTorch).

    Returns the hidden states of every step, ``(N, L, hidden_size)``.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__()
        self.hidden_size = hidden_size
        scale = 1.0 / math.sqrt(hidden_size)
        self.Wx = _uniform(scale, (3 * hidden_size, input_size))
        self.Wh = _uniform(scale, (3 * hidden_size, hidden_size))
        self.b = _uniform(scale, (3 * hidden_size,)) if bias else None
        self.bhn = _uniform(scale, (hidden_size,)) if bias else None

    def _extra_repr(self):
        return (
            f"input_dims={self.Wx.shape[1]}, "
            f"hidden_size={self.hidden_size}, bias={self.b is not None}"
        )

    def __call__(self, x, hidden=None):
        H = self.hidden_size
        x = mx.addmm(self.b, x, self.Wx.T) if self.b is not None else x @ self.Wx.T
        x_rz, x_n = x[..., :-H], x[..., -H:]
        states = []
        for t in range(x.shape[-2]):
            rz = x_rz[..., t, :]
            n = x_n[..., t, :]
            if hidden is not None:
                h_proj = hidden @ self.Wh.T
                h_rz, h_n = h_proj[..., :-H], h_proj[..., -H:]
                if self.bhn is not None:
                    h_n = h_n + self.bhn
                rz = rz + h_rz
            r, z = mx.split(mx.sigmoid(rz), 2, axis=-1)
            if hidden is not None:
                n = n + r * h_n
            elif self.bhn is not None:
                n = n + r * self.bhn
            n = mx.tanh(n)
            hidden = (1 - z) * n + z * hidden if hidden is not None else (1 - z) * n
            states.append(hidden)
        return mx.stack(states, axis=-2)


class LSTM(Module):
    """Long short-term memory (gates i, f, g, o in that order).

    Returns ``(hidden_states, cell_states)`` of every step, each ``(N, L, hidden_size)``.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__()
        self.hidden_size = hidden_size
        scale = 1.0 / math.sqrt(hidden_size)
        self.Wx = _uniform(scale, (4 * hidden_size, input_size))
        self.Wh = _uniform(scale, (4 * hidden_size, hidden_size))
        self.bias = _uniform(scale, (4 * hidden_size,)) if bias else None

    def _extra_repr(self):
        return (
            f"input_dims={self.Wx.shape[1]}, "
            f"hidden_size={self.hidden_size}, bias={self.bias is not None}"
        )

    def __call__(self, x, hidden=None, cell=None):
        x = mx.addmm(self.bias, x, self.Wx.T) if self.bias is not None else x @ self.Wx.T
        hiddens, cells = [], []
        for t in range(x.shape[-2]):
            gates = x[..., t, :]
            if hidden is not None:
                gates = mx.addmm(gates, hidden, self.Wh.T)
            i, f, g, o = mx.split(gates, 4, axis=-1)
            i, f, g, o = mx.sigmoid(i), mx.sigmoid(f), mx.tanh(g), mx.sigmoid(o)
            cell = f * cell + i * g if cell is not None else i * g
            hidden = o * mx.tanh(cell)
            hiddens.append(hidden)
            cells.append(cell)
        return mx.stack(hiddens, axis=-2), mx.stack(cells, axis=-2)
