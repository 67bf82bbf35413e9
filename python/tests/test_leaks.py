"""Leak tests: build a graph, evaluate it, drop everything, repeat; active
memory must come back to its baseline every cycle (0 bytes retained).

The first is seed 003's reproduction in its eager form (no compile): weights
evaluated outside the forward, a forward with split (a multi-output op) and
concatenate over them, the output evaluated, everything dropped.
"""

import gc

import pytest

from _backend import mx

SEED_CYCLES = 200  # seed 003's reproduction runs the full 200 cycles
CYCLES = 50


def _settle():
    gc.collect()
    mx.synchronize()


def assert_no_leak(cycle, cycles=CYCLES, warmup=3):
    """Run ``cycle`` repeatedly; every run must leave active memory at baseline."""
    for _ in range(warmup):  # lazily created state (random key, caches) settles
        cycle()
    _settle()
    base = mx.get_active_memory()
    retained = []
    for _ in range(cycles):
        cycle()
        _settle()
        retained.append(mx.get_active_memory() - base)
    leaking = [(i, r) for i, r in enumerate(retained) if r != 0]
    assert not leaking, f"bytes retained after cycles (first 10): {leaking[:10]}"


BLOCKS, DIM, BATCH = 24, 64, 8


def _make_forward(weights):
    def forward(x):
        for w in weights:
            h = x @ w
            a, b = mx.split(h, 2, axis=-1)  # multi-output primitive
            x = mx.concatenate([b, a], axis=-1)
        return x

    return forward


@pytest.fixture(scope="module")
def x0():
    x = mx.random.normal((BATCH, DIM), key=mx.random.key(0))
    mx.eval(x)
    return x


def test_seed_003_eager_split_concatenate(x0):
    def cycle():
        weights = [mx.random.normal((DIM, DIM)) * 0.1 for _ in range(BLOCKS)]
        fwd = _make_forward(weights)
        mx.eval(weights)  # evaluated outside the forward
        out = fwd(x0)
        mx.eval(out)
        assert out.shape == (BATCH, DIM)
        del out, fwd, weights

    assert_no_leak(cycle, cycles=SEED_CYCLES)


def test_seed_003_eager_with_slices(x0):
    def forward(weights, x):
        for w in weights:
            h = x @ w
            half = h.shape[-1] // 2
            x = mx.concatenate([h[..., half:], h[..., :half]], axis=-1)
        return x

    def cycle():
        weights = [mx.random.normal((DIM, DIM)) * 0.1 for _ in range(BLOCKS)]
        mx.eval(weights)
        out = forward(weights, x0)
        mx.eval(out)
        del out, weights

    assert_no_leak(cycle)


def test_unevaluated_graph_dropped(x0):
    def cycle():
        weights = [mx.random.normal((DIM, DIM)) for _ in range(4)]
        out = _make_forward(weights)(x0)
        del out, weights  # never evaluated

    assert_no_leak(cycle)


def test_partially_evaluated_graph_dropped(x0):
    def cycle():
        weights = [mx.random.normal((DIM, DIM)) * 0.1 for _ in range(4)]
        h = x0 @ weights[0]
        a, b = mx.split(h, 2, axis=-1)
        mx.eval(a)  # only one sibling evaluated
        out = mx.concatenate([b, a], axis=-1) @ weights[1]
        del h, a, b, out, weights

    assert_no_leak(cycle)


def _loss(params, x):
    h = x @ params["w1"]
    a, b = mx.split(h, 2, axis=-1)
    h = mx.concatenate([mx.tanh(a), b * b], axis=-1)
    return mx.mean(mx.square(h @ params["w2"]))


def _params():
    return {"w1": mx.random.normal((DIM, DIM)) * 0.1, "w2": mx.random.normal((DIM, 4)) * 0.1}


def test_grad_and_value_and_grad(x0):
    def cycle():
        params = _params()
        mx.eval(params)
        grads = mx.grad(_loss)(params, x0)
        mx.eval(grads)
        loss, grads2 = mx.value_and_grad(_loss)(params, x0)
        mx.eval(loss, grads2)
        second = mx.grad(mx.grad(lambda v: mx.sum(mx.sin(v) * v)))(mx.array(0.5))
        mx.eval(second)
        del params, grads, loss, grads2, second

    assert_no_leak(cycle)


def test_training_steps(x0):
    def cycle():
        params = _params()
        step = mx.value_and_grad(_loss)
        for _ in range(3):
            loss, grads = step(params, x0)
            params = {k: params[k] - 0.1 * grads[k] for k in params}
            mx.eval(loss, params)
        del params, loss, grads, step

    assert_no_leak(cycle)


def test_vmap(x0):
    def cycle():
        w = mx.random.normal((DIM,))
        per_example = mx.vmap(lambda w, x: mx.sum(mx.tanh(w * x)), in_axes=(None, 0))(w, x0)
        grads = mx.vmap(mx.grad(lambda w, x: mx.sum(mx.tanh(w * x))), in_axes=(None, 0))(w, x0)
        mx.eval(per_example, grads)
        del w, per_example, grads

    assert_no_leak(cycle)


def test_vjp_and_jvp(x0):
    def f(x, w):
        a, b = mx.split(x @ w, 2, axis=-1)
        return mx.concatenate([mx.sin(a), b], axis=-1)

    def cycle():
        w = mx.random.normal((DIM, DIM))
        outs, vjps = mx.vjp(f, [x0, w], [mx.ones((BATCH, DIM))])
        mx.eval(outs, vjps)
        outs2, jvps = mx.jvp(f, [x0, w], [mx.ones((BATCH, DIM)), mx.zeros((DIM, DIM))])
        mx.eval(outs2, jvps)
        del w, outs, vjps, outs2, jvps

    assert_no_leak(cycle)


def test_checkpoint(x0):
    def block(w, x):
        a, b = mx.split(x @ w, 2, axis=-1)
        return mx.concatenate([mx.tanh(a), b], axis=-1)

    def loss(w, x):
        ckpt = mx.checkpoint(block)
        return mx.sum(ckpt(w, ckpt(w, x)))

    def cycle():
        w = mx.random.normal((DIM, DIM)) * 0.1
        mx.eval(w)
        value, g = mx.value_and_grad(loss)(w, x0)
        mx.eval(value, g)
        del w, value, g

    assert_no_leak(cycle)


def test_custom_function(x0):
    def cycle():
        scale = mx.random.normal((DIM,))

        @mx.custom_function
        def f(x, s):
            return mx.sin(x) * s

        @f.vjp
        def f_vjp(primals, cotangent, output):
            x, s = primals
            return cotangent * mx.cos(x) * s, mx.sum(cotangent * mx.sin(x), axis=0)

        @f.jvp
        def f_jvp(primals, tangents):
            x, s = primals
            dx, ds = tangents
            return dx * mx.cos(x) * s + ds * mx.sin(x)

        @f.vmap
        def f_vmap(inputs, axes):
            x, s = inputs
            return mx.sin(x) * s, axes[0]

        g = mx.grad(lambda x, s: mx.sum(f(x, s)), argnums=(0, 1))(x0, scale)
        _, t = mx.jvp(f, [x0, scale], [mx.ones_like(x0), mx.zeros_like(scale)])
        v = mx.vmap(f, in_axes=(0, None))(x0, scale)
        mx.eval(g, t, v)

    assert_no_leak(cycle)


def test_async_eval_then_drop(x0):
    def cycle():
        w = mx.random.normal((DIM, DIM))
        out = _make_forward([w, w])(x0)
        mx.async_eval(out)
        mx.eval(out)
        del w, out

    assert_no_leak(cycle)


def test_numpy_views_released(x0):
    import numpy as np

    def cycle():
        a = mx.random.normal((DIM, DIM)) + 1
        v = np.array(a, copy=False)
        c = np.array(a)
        assert v.shape == c.shape
        del a, v, c

    assert_no_leak(cycle)
