"""Transforms over a module's trainable parameters."""

from __future__ import annotations

from functools import wraps
from typing import Callable, Optional

import loom.core as mx

from .layers.base import Module

__all__ = ["value_and_grad", "checkpoint"]


def value_and_grad(model: Module, fn: Callable) -> Callable:
    """Make ``fn(*args)`` return ``(value, gradients)`` for ``model``'s trainable parameters.

    The gradients form a tree shaped like ``model.trainable_parameters()``.
    The wrapped function installs the parameters it is differentiated with
    into the model (``model.update``) before calling ``fn``, which is how the
    transform's tracers reach ``model(x)``.
    """

    def with_parameters(params, *args, **kwargs):
        model.update(params)
        return fn(*args, **kwargs)

    transformed = mx.value_and_grad(with_parameters)

    @wraps(fn)
    def wrapped(*args, **kwargs):
        return transformed(model.trainable_parameters(), *args, **kwargs)

    return wrapped


def checkpoint(module: Module, fn: Optional[Callable] = None) -> Callable:
    """Like ``mx.checkpoint``, over ``fn`` (default: the module's ``__call__``).

    The module's trainable parameters are inputs of the checkpointed function,
    so their gradients flow through the recomputation.
    """
    if fn is None:
        fn = module

    def with_parameters(params, *args, **kwargs):
        module.update(params)
        return fn(*args, **kwargs)

    checkpointed = mx.checkpoint(with_parameters)

    @wraps(fn)
    def wrapped(*args, **kwargs):
        return checkpointed(module.trainable_parameters(), *args, **kwargs)

    return wrapped
