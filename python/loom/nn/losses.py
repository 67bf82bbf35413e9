"""Loss functions, with MLX's ``reduction`` argument (``'none'``, ``'mean'``, ``'sum'``).

Each function's default reduction is MLX's (it differs between losses).
"""

from __future__ import annotations

import math
from typing import Literal, Optional, get_args

import loom.core as mx

Reduction = Literal["none", "mean", "sum"]


def _reduce(loss: mx.array, reduction: Reduction = "none") -> mx.array:
    if reduction not in get_args(Reduction):
        raise ValueError(f"Invalid reduction. Must be one of {get_args(Reduction)}.")
    if reduction == "mean":
        return mx.mean(loss)
    if reduction == "sum":
        return mx.sum(loss)
    return loss


def _apply_weights(loss: mx.array, weights: Optional[mx.array]) -> mx.array:
    if weights is None:
        return loss
    if weights.shape != loss.shape:
        raise ValueError(
            f"Weights with shape {weights.shape} is not the same as "
            f"output loss with shape {loss.shape}."
        )
    return loss * weights


def _pick(values: mx.array, indices: mx.array, axis: int) -> mx.array:
    """``values`` at class ``indices`` along ``axis`` (which is dropped)."""
    return mx.take_along_axis(values, mx.expand_dims(indices, axis), axis).squeeze(axis)


def _same_shape(name_a, a, name_b, b):
    if a.shape != b.shape:
        raise ValueError(
            f"{name_a} shape {a.shape} does not match {name_b} shape {b.shape}."
        )


def cross_entropy(
    logits: mx.array,
    targets: mx.array,
    weights: Optional[mx.array] = None,
    axis: int = -1,
    label_smoothing: float = 0.0,
    reduction: Reduction = "none",
) -> mx.array:
    """Cross entropy of ``logits`` against class indices or class probabilities.

    ``targets`` with the logits' rank are probabilities; one rank less, class
    indices. ``label_smoothing`` mixes in the uniform distribution.
    """
    if label_smoothing < 0 or label_smoothing >= 1:
        raise ValueError(f"Label smoothing must be in [0, 1), got {label_smoothing}.")
    as_probs = targets.ndim == logits.ndim
    expected = list(logits.shape)
    if not as_probs:
        expected.pop(axis)
    if targets.shape != tuple(expected):
        raise ValueError(
            f"Targets shape {targets.shape} does not match logits shape {logits.shape}."
        )
    # No max shift here: logsumexp is one stable primitive, and a shift would cost a
    # reduction and a full-size subtraction (and its gradient) per call, as MLX does not.
    if as_probs:
        score = mx.sum(logits * targets, axis=axis)
    else:
        score = _pick(logits, targets, axis)
    lse = mx.logsumexp(logits, axis=axis)
    if label_smoothing > 0:
        loss = lse - (1 - label_smoothing) * score - label_smoothing * logits.mean(axis=axis)
    else:
        loss = lse - score
    return _reduce(_apply_weights(loss, weights), reduction)


def binary_cross_entropy(
    inputs: mx.array,
    targets: mx.array,
    weights: Optional[mx.array] = None,
    with_logits: bool = True,
    reduction: Reduction = "mean",
) -> mx.array:
    """Binary cross entropy of logits (or probabilities, ``with_logits=False``)."""
    if inputs.shape != targets.shape:
        raise ValueError(
            f"Inputs shape {inputs.shape} does not match targets shape {targets.shape}."
        )
    if with_logits:
        loss = mx.logaddexp(0.0, inputs) - inputs * targets
    else:
        # log is clipped at -100 so a probability of exactly 0 or 1 stays finite.
        log_p = mx.clip(mx.log(inputs), a_min=-100, a_max=None)
        log_not_p = mx.clip(mx.log(1 - inputs), a_min=-100, a_max=None)
        loss = -(targets * log_p + (1 - targets) * log_not_p)
    return _reduce(_apply_weights(loss, weights), reduction)


def l1_loss(predictions: mx.array, targets: mx.array, reduction: Reduction = "mean") -> mx.array:
    """Absolute error."""
    _same_shape("Predictions", predictions, "targets", targets)
    return _reduce(mx.abs(predictions - targets), reduction)


def mse_loss(predictions: mx.array, targets: mx.array, reduction: Reduction = "mean") -> mx.array:
    """Squared error."""
    _same_shape("Predictions", predictions, "targets", targets)
    return _reduce(mx.square(predictions - targets), reduction)


def nll_loss(
    inputs: mx.array, targets: mx.array, axis: int = -1, reduction: Reduction = "none"
) -> mx.array:
    """Negative log likelihood of class ``targets`` under log-probabilities ``inputs``."""
    return _reduce(-_pick(inputs, targets, axis), reduction)


def gaussian_nll_loss(
    inputs: mx.array,
    targets: mx.array,
    vars: mx.array,
    full: bool = False,
    eps: float = 1e-6,
    reduction: Reduction = "mean",
) -> mx.array:
    """Negative log likelihood of ``targets`` under ``N(inputs, vars)`` (vars floored at ``eps``)."""
    if inputs.shape != targets.shape:
        raise ValueError(
            f"Inputs shape {inputs.shape} does not match targets shape {targets.shape}."
        )
    if inputs.shape != vars.shape:
        raise ValueError(f"Inputs shape {inputs.shape} does not match vars shape {vars.shape}.")
    vars = mx.maximum(vars, eps)
    loss = 0.5 * (mx.log(vars) + mx.square(targets - inputs) / vars)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def kl_div_loss(
    inputs: mx.array, targets: mx.array, axis: int = -1, reduction: Reduction = "none"
) -> mx.array:
    """KL divergence from log-probabilities ``targets`` to log-probabilities ``inputs``."""
    return _reduce(mx.sum(mx.exp(targets) * (targets - inputs), axis), reduction)


def smooth_l1_loss(
    predictions: mx.array, targets: mx.array, beta: float = 1.0, reduction: Reduction = "mean"
) -> mx.array:
    """Quadratic below ``beta`` (``0.5 d^2 / beta``), linear above (``|d| - beta / 2``)."""
    _same_shape("Predictions", predictions, "targets", targets)
    diff = mx.abs(predictions - targets)
    loss = mx.where(diff < beta, 0.5 * mx.square(diff) / beta, diff - 0.5 * beta)
    return _reduce(loss, reduction)


def triplet_loss(
    anchors: mx.array,
    positives: mx.array,
    negatives: mx.array,
    axis: int = -1,
    p: int = 2,
    margin: float = 1.0,
    eps: float = 1e-6,
    reduction: Reduction = "none",
) -> mx.array:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``p``-norm distances."""

    def distance(a, b):
        return mx.power(mx.power(mx.abs(a - b), p).sum(axis) + eps, 1.0 / p)

    loss = mx.maximum(distance(anchors, positives) - distance(anchors, negatives) + margin, 0)
    return _reduce(loss, reduction)


def hinge_loss(inputs: mx.array, targets: mx.array, reduction: Reduction = "none") -> mx.array:
    """``max(1 - inputs * targets, 0)`` for targets in {-1, 1}."""
    return _reduce(mx.maximum(1 - inputs * targets, 0), reduction)


def huber_loss(
    inputs: mx.array, targets: mx.array, delta: float = 1.0, reduction: Reduction = "none"
) -> mx.array:
    """Quadratic within ``delta``, linear (slope ``delta``) beyond."""
    abs_err = mx.abs(inputs - targets)
    quadratic = mx.minimum(abs_err, delta)
    linear = abs_err - quadratic
    return _reduce(0.5 * quadratic**2 + delta * linear, reduction)


def log_cosh_loss(inputs: mx.array, targets: mx.array, reduction: Reduction = "none") -> mx.array:
    """``log(cosh(inputs - targets))``, computed without overflow."""
    err = inputs - targets
    return _reduce(mx.logaddexp(err, -err) - math.log(2), reduction)


def cosine_similarity_loss(
    x1: mx.array, x2: mx.array, axis: int = 1, eps: float = 1e-8, reduction: Reduction = "none"
) -> mx.array:
    """Cosine similarity of ``x1`` and ``x2`` along ``axis`` (norms floored at ``eps``)."""
    n1 = mx.sqrt(mx.sum(mx.square(x1), axis=axis))
    n2 = mx.sqrt(mx.sum(mx.square(x2), axis=axis))
    loss = mx.sum(x1 * x2, axis=axis) / mx.maximum(n1 * n2, eps)
    return _reduce(loss, reduction)


def margin_ranking_loss(
    inputs1: mx.array,
    inputs2: mx.array,
    targets: mx.array,
    margin: float = 0.0,
    reduction: Reduction = "none",
) -> mx.array:
    """``max(0, -targets * (inputs1 - inputs2) + margin)``."""
    if not (inputs1.shape == inputs2.shape == targets.shape):
        raise ValueError(
            f"The shapes of the arguments do not match. The provided shapes are "
            f"inputs1.shape={inputs1.shape}, inputs2.shape={inputs2.shape}, and "
            f"targets.shape={targets.shape}."
        )
    return _reduce(mx.maximum(0, -targets * (inputs1 - inputs2) + margin), reduction)
