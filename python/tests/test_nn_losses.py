"""Every loss of nn.losses against a NumPy reference, over its reduction modes."""

import math

import numpy as np
import pytest

from _nn_backend import mx, nn

L = nn.losses
RNG = np.random.default_rng(3)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def reduce(loss, reduction):
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


def check(got, expected, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(np.array(got), expected, rtol=rtol, atol=atol)


def log_softmax(x, axis=-1):
    x = x - x.max(axis, keepdims=True)
    return x - np.log(np.exp(x).sum(axis, keepdims=True))


REDUCTIONS = ["none", "mean", "sum"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_indices_probs_smoothing_weights(reduction):
    logits = rand(4, 5).astype(np.float64)
    targets = np.array([0, 3, 4, 1])
    lsm = log_softmax(logits)
    nll = -lsm[np.arange(4), targets]
    check(L.cross_entropy(mx.array(logits.astype(np.float32)), mx.array(targets), reduction=reduction),
          reduce(nll, reduction))
    probs = np.eye(5)[targets] * 0.7 + 0.06
    check(L.cross_entropy(mx.array(logits.astype(np.float32)), mx.array(probs.astype(np.float32)),
                          reduction=reduction), reduce(-(lsm * probs).sum(-1), reduction))
    smoothed = 0.9 * nll + 0.1 * (-lsm.mean(-1))
    check(L.cross_entropy(mx.array(logits.astype(np.float32)), mx.array(targets), label_smoothing=0.1,
                          reduction=reduction), reduce(smoothed, reduction))
    w = np.array([1.0, 2.0, 0.5, 0.0])
    check(L.cross_entropy(mx.array(logits.astype(np.float32)), mx.array(targets),
                          weights=mx.array(w.astype(np.float32)), reduction=reduction),
          reduce(nll * w, reduction))


def test_cross_entropy_axis_and_errors():
    logits = rand(5, 3)
    targets = np.array([1, 0, 4])
    expected = -log_softmax(logits.astype(np.float64), axis=0)[targets, np.arange(3)]
    check(L.cross_entropy(mx.array(logits), mx.array(targets), axis=0), expected)
    assert L.cross_entropy(mx.array(rand(2, 3)), mx.array([0, 1])).shape == (2,)  # default "none"
    with pytest.raises(ValueError, match=r"Label smoothing must be in \[0, 1\), got 1.0"):
        L.cross_entropy(mx.array(rand(2, 3)), mx.array([0, 1]), label_smoothing=1.0)
    with pytest.raises(ValueError, match=r"Targets shape \(3,\) does not match logits shape \(2, 3\)"):
        L.cross_entropy(mx.array(rand(2, 3)), mx.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"Invalid reduction. Must be one of \('none', 'mean', 'sum'\)"):
        L.cross_entropy(mx.array(rand(2, 3)), mx.array([0, 1]), reduction="avg")
    with pytest.raises(ValueError, match=r"Weights with shape \(3,\) is not the same as output loss with shape \(2,\)"):
        L.cross_entropy(mx.array(rand(2, 3)), mx.array([0, 1]), weights=mx.ones((3,)))


def test_cross_entropy_gradient_is_softmax_minus_onehot():
    logits = rand(3, 4)
    targets = np.array([2, 0, 3])
    g = mx.grad(lambda z: L.cross_entropy(z, mx.array(targets), reduction="sum"))(mx.array(logits))
    check(g, np.exp(log_softmax(logits.astype(np.float64))) - np.eye(4)[targets])


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction):
    z = rand(6).astype(np.float64)
    y = np.array([0, 1, 1, 0, 1, 0], dtype=np.float64)
    expected = np.logaddexp(0, z) - z * y
    check(L.binary_cross_entropy(mx.array(z.astype(np.float32)), mx.array(y.astype(np.float32)),
                                 reduction=reduction), reduce(expected, reduction))
    p = 1 / (1 + np.exp(-z))
    probs_loss = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    check(L.binary_cross_entropy(mx.array(p.astype(np.float32)), mx.array(y.astype(np.float32)),
                                 with_logits=False, reduction=reduction), reduce(probs_loss, reduction), rtol=1e-3)


def test_binary_cross_entropy_default_mean_clip_and_errors():
    out = L.binary_cross_entropy(mx.array([0.0, 1.0]), mx.array([1.0, 0.0]), with_logits=False)
    check(out, 100.0)  # log(0) is clipped at -100
    check(L.binary_cross_entropy(mx.array([0.0]), mx.array([1.0])), math.log(2))
    with pytest.raises(ValueError, match=r"Inputs shape \(2,\) does not match targets shape \(3,\)"):
        L.binary_cross_entropy(mx.zeros((2,)), mx.zeros((3,)))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_regression_losses(reduction):
    p, t = rand(3, 4).astype(np.float64), rand(3, 4).astype(np.float64)
    P, T = mx.array(p.astype(np.float32)), mx.array(t.astype(np.float32))
    d = p - t
    check(L.l1_loss(P, T, reduction=reduction), reduce(np.abs(d), reduction))
    check(L.mse_loss(P, T, reduction=reduction), reduce(d**2, reduction))
    ad = np.abs(d)
    check(L.smooth_l1_loss(P, T, beta=0.5, reduction=reduction),
          reduce(np.where(ad < 0.5, 0.5 * ad**2 / 0.5, ad - 0.25), reduction))
    check(L.huber_loss(P, T, delta=0.7, reduction=reduction),
          reduce(np.where(ad <= 0.7, 0.5 * ad**2, 0.7 * (ad - 0.35)), reduction))
    check(L.log_cosh_loss(P, T, reduction=reduction), reduce(np.log(np.cosh(d)), reduction))
    var = np.abs(rand(3, 4)).astype(np.float64) + 0.1
    g = 0.5 * (np.log(var) + d**2 / var)
    check(L.gaussian_nll_loss(P, T, mx.array(var.astype(np.float32)), reduction=reduction), reduce(g, reduction))
    check(L.gaussian_nll_loss(P, T, mx.array(var.astype(np.float32)), full=True, reduction=reduction),
          reduce(g + 0.5 * math.log(2 * math.pi), reduction))


def test_regression_loss_defaults_and_errors():
    a, b = mx.array([1.0, 2.0]), mx.array([2.0, 4.0])
    check(L.l1_loss(a, b), 1.5)
    check(L.mse_loss(a, b), 2.5)
    check(L.smooth_l1_loss(a, b), (0.5 + 1.5) / 2)
    assert L.huber_loss(a, b).shape == (2,)
    assert L.log_cosh_loss(a, b).shape == (2,)
    with pytest.raises(ValueError, match=r"Predictions shape \(2,\) does not match targets shape \(1,\)"):
        L.mse_loss(a, mx.array([1.0]))
    with pytest.raises(ValueError, match=r"Inputs shape \(2,\) does not match vars shape \(1,\)"):
        L.gaussian_nll_loss(a, b, mx.array([1.0]))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_and_kl_div(reduction):
    lp = log_softmax(rand(4, 5).astype(np.float64))
    t = np.array([1, 0, 4, 2])
    check(L.nll_loss(mx.array(lp.astype(np.float32)), mx.array(t), reduction=reduction),
          reduce(-lp[np.arange(4), t], reduction))
    lq = log_softmax(rand(4, 5).astype(np.float64))
    check(L.kl_div_loss(mx.array(lp.astype(np.float32)), mx.array(lq.astype(np.float32)), reduction=reduction),
          reduce((np.exp(lq) * (lq - lp)).sum(-1), reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_triplet_hinge_cosine_margin(reduction):
    a, p, n = (rand(4, 3).astype(np.float64) for _ in range(3))
    A, P, N = (mx.array(v.astype(np.float32)) for v in (a, p, n))
    dist = lambda u, v: ((np.abs(u - v) ** 2).sum(-1) + 1e-6) ** 0.5  # noqa: E731
    check(L.triplet_loss(A, P, N, reduction=reduction),
          reduce(np.maximum(dist(a, p) - dist(a, n) + 1.0, 0), reduction))
    dist1 = lambda u, v: np.abs(u - v).sum(-1) + 1e-6  # noqa: E731
    check(L.triplet_loss(A, P, N, p=1, margin=0.5, reduction=reduction),
          reduce(np.maximum(dist1(a, p) - dist1(a, n) + 0.5, 0), reduction))
    y = np.sign(rand(4, 3)).astype(np.float64)
    check(L.hinge_loss(A, mx.array(y.astype(np.float32)), reduction=reduction),
          reduce(np.maximum(1 - a * y, 0), reduction))
    cos = (a * p).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(p, axis=1), 1e-8)
    check(L.cosine_similarity_loss(A, P, reduction=reduction), reduce(cos, reduction))
    t = np.sign(rand(4, 3))
    check(L.margin_ranking_loss(A, P, mx.array(t), margin=0.1, reduction=reduction),
          reduce(np.maximum(0, -t * (a - p) + 0.1), reduction))


def test_margin_ranking_shape_error():
    with pytest.raises(ValueError, match=r"The shapes of the arguments do not match. The provided shapes are "
                                         r"inputs1.shape=\(2,\), inputs2.shape=\(2,\), and targets.shape=\(3,\)."):
        L.margin_ranking_loss(mx.zeros((2,)), mx.zeros((2,)), mx.zeros((3,)))


def test_cross_entropy_is_stable_for_large_logits():
    # logsumexp carries the stability (no separate max shift): +-1e4 logits stay finite.
    logits = mx.array([[1e4, 0.0, -1e4], [-1e4, -1e4, 1e4]])
    targets = mx.array([1, 2])
    loss = L.cross_entropy(logits, targets)
    np.testing.assert_allclose(np.array(loss), [1e4, 0.0], rtol=1e-6, atol=1e-6)
    grad = mx.grad(lambda z: L.cross_entropy(z, targets, reduction="sum"))(logits)
    np.testing.assert_allclose(np.array(grad), [[1, -1, 0], [0, 0, 0]], atol=1e-6)
