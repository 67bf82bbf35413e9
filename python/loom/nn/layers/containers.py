"""Sequential."""

from __future__ import annotations

from .base import Module


class Sequential(Module):
    """Calls its modules (or any callables) in order, each on the previous output."""

    def __init__(self, *modules):
        super().__init__()
        self.layers = list(modules)

    def __call__(self, x):
        for m in self.layers:
            x = m(x)
        return x
