"""The examples of the specification (seed 000, sections 0 to 5), with their
documented results.  GPU streams of the seed are replaced by CPU streams: this
machine has no GPU.  Where the seed and MLX 0.32.4 disagree (``shape`` is a
tuple, not a list), the installed MLX decides.
"""

import gc
import math

import numpy as np
import pytest

from _backend import IS_MLX, expected_default_device, mx
from _helpers import assert_array


# --- section 0: orientation ---------------------------------------------------


def test_thirty_second_demo():
    a = mx.array([1, 2, 3, 4])
    assert a.shape == (4,)
    assert isinstance(a.shape, tuple)
    assert a.dtype == mx.int32
    b = mx.array([1.0, 2.0, 3.0, 4.0])
    assert b.dtype == mx.float32
    c = a + b
    mx.eval(c)
    assert str(c) == "array([2, 4, 6, 8], dtype=float32)"
    assert repr(c) == "array([2, 4, 6, 8], dtype=float32)"


def test_transform_demo():
    x = mx.array(0.0)
    assert repr(mx.sin(x)) == "array(0, dtype=float32)"
    assert repr(mx.grad(mx.sin)(x)) == "array(1, dtype=float32)"
    assert repr(mx.grad(mx.grad(mx.sin))(x)) == "array(-0, dtype=float32)"


def test_defaults():
    assert mx.array(1).dtype == mx.int32
    assert mx.array(1.0).dtype == mx.float32
    assert mx.default_device() == expected_default_device()
    assert mx.default_stream(mx.default_device()).device == mx.default_device()


def test_five_ideas_one_liners():
    a = mx.array([1.0, 2.0])
    b = mx.array([3.0, 4.0])
    assert mx.add(a, b, stream=mx.cpu).tolist() == [4.0, 6.0]
    c = a + b
    mx.eval(c)
    assert c.tolist() == [4.0, 6.0]
    # grad(vmap(grad(f))): d/dx sum_i sin'(x_i) = -sin(x)
    x = mx.array([0.1, 0.5, 1.0])
    g = mx.grad(lambda v: mx.sum(mx.vmap(mx.grad(mx.sin))(v)))(x)
    assert_array(g, -np.sin(np.array([0.1, 0.5, 1.0])), "float32", rtol=1e-5, atol=1e-6)


# --- section 1: per-operation placement ---------------------------------------


def test_per_operation_placement():
    a = mx.random.normal((100,))
    b = mx.random.normal((100,))
    ref = np.array(a) + np.array(b)
    # stream= accepts a device type, a Device and a Stream
    for where in (mx.cpu, mx.Device(mx.cpu), mx.default_stream(mx.cpu), mx.new_stream(mx.cpu)):
        assert_array(mx.add(a, b, stream=where), ref, "float32")


def test_cross_stream_dependency():
    a = mx.random.normal((100,))
    b = mx.random.normal((100,))
    other = mx.new_stream(mx.cpu)
    c = mx.add(a, b, stream=mx.cpu)
    d = mx.add(a, c, stream=other)  # depends on c, computed on another stream
    mx.eval(d)
    an, bn = np.array(a), np.array(b)
    assert_array(d, an + (an + bn), "float32")
    assert_array(c, an + bn, "float32")


def test_placement_as_tuning_knob():
    def fun(a, b, d1, d2):
        x = mx.matmul(a, b, stream=d1)
        for _ in range(500):
            b = mx.exp(b, stream=d2)
        return x, b

    a = mx.random.uniform(shape=(64, 16))
    b = mx.random.uniform(shape=(16, 4))
    x, e = fun(a, b, mx.cpu, mx.new_stream(mx.cpu))
    mx.eval(x, e)
    an, bn = np.array(a, dtype=np.float64), np.array(b, dtype=np.float64)
    assert_array(x, an @ bn, "float32", rtol=1e-5, atol=1e-5)
    # exp iterated overflows to +inf for every element of [0, 1)
    expected = bn
    with np.errstate(over="ignore"):
        for _ in range(500):
            expected = np.exp(expected)
    assert_array(e, expected, "float32")


def test_memory_report_example(restore_limits):
    # small allocations (random keys, scalars) come and go around the big one
    slack = 4096
    gc.collect()
    mx.synchronize()
    mx.clear_cache()
    base_active = mx.get_active_memory()
    x = mx.random.normal((256, 1024))
    mx.eval(x)
    nbytes = 256 * 1024 * 4
    active = mx.get_active_memory()
    assert active >= base_active + nbytes - slack
    assert mx.get_peak_memory() >= active
    del x
    # active drops; the freed buffer goes to the cache
    assert mx.get_active_memory() <= active - nbytes + slack
    assert mx.get_cache_memory() >= nbytes
    mx.clear_cache()
    assert mx.get_cache_memory() == 0


# --- section 2: lazy evaluation -----------------------------------------------


def _materialised(base, nbytes):
    return mx.get_active_memory() - base >= nbytes


def test_recording_allocates_nothing_until_eval():
    n = 1 << 18
    a = mx.random.uniform(shape=(n,))
    b = mx.random.uniform(shape=(n,))
    mx.eval(a, b)
    mx.synchronize()
    base = mx.get_active_memory()
    c = a + b  # no arithmetic has happened
    d = mx.exp(c)
    e = d * d
    assert c.shape == (n,) and e.dtype == mx.float32  # shape/dtype are known eagerly
    assert mx.get_active_memory() == base
    mx.eval(e)
    assert _materialised(base, n * 4)
    an, bn = np.array(a, dtype=np.float64), np.array(b, dtype=np.float64)
    assert_array(e, np.exp(an + bn) ** 2, "float32", rtol=1e-5)


def test_only_what_is_used_is_computed():
    n = 1 << 18
    x = mx.random.uniform(shape=(n,))
    mx.eval(x)
    mx.synchronize()

    def fun(x):
        a = x + 1
        b = mx.exp(mx.exp(a)) * 3  # the "expensive" branch
        return a, b

    base = mx.get_active_memory()
    y, _ = fun(x)
    mx.eval(y)
    # only a's buffer is alive: b's chain never ran (its intermediates would
    # have been freed anyway, so check the result through values and memory)
    # A GPU keeps a device copy of x once an op there has read it.
    mirror = x.nbytes if mx.default_device() == mx.Device(mx.gpu) else 0
    assert mx.get_active_memory() - base < 2 * n * 4 + mirror
    assert_array(y, np.array(x) + 1, "float32")


def test_implicit_evaluation_triggers(capsys):
    a = mx.array([1.0, 2.0, 3.0])
    b = mx.array([10.0, 20.0, 30.0])
    print(a + b)
    assert capsys.readouterr().out == "array([11, 22, 33], dtype=float32)\n"
    assert np.array(a * 2).tolist() == [2.0, 4.0, 6.0]
    assert memoryview(a + 1).tolist() == [2.0, 3.0, 4.0]
    assert (mx.sum(a) + 1).item() == 7.0
    assert (a - 1).tolist() == [0.0, 1.0, 2.0]
    y = mx.sum(a) - 5
    assert bool(y > 0) is True
    if y > 0:  # a scalar array in control flow evaluates it
        branch = "positive"
    else:
        branch = "negative"
    assert branch == "positive"


def test_eval_twice_is_a_noop_and_eval_takes_trees():
    x = mx.array([1.0, 2.0])
    y = x * 3
    mx.eval(y)
    mx.eval(y)
    assert y.tolist() == [3.0, 6.0]
    tree = {"a": x + 1, "b": [x * 2, (x - 1,)], "step": 3, "name": "ignored"}
    mx.eval(tree)
    mx.eval(tree, x + 5, [x * 7], None, 4)
    assert tree["a"].tolist() == [2.0, 3.0]
    assert tree["b"][0].tolist() == [2.0, 4.0]
    assert tree["b"][1][0].tolist() == [0.0, 1.0]
    assert mx.eval() is None


def test_async_eval():
    x = mx.array(1.0)
    y = mx.exp(x)
    assert mx.async_eval(y) is None
    assert repr(y) == "array(2.71828, dtype=float32)"
    z = [mx.exp(x) + i for i in range(3)]
    mx.async_eval(z)
    mx.eval(z)
    assert [round(v.item(), 4) for v in z] == [2.7183, 3.7183, 4.7183]


def test_control_flow_on_array_values_with_grad():
    def fun(x):
        y = mx.sum(x)
        if y > 0:
            z = mx.sum(x * x)
        else:
            z = mx.sum(-x)
        return z

    assert mx.grad(fun)(mx.array([1.0, 2.0])).tolist() == [2.0, 4.0]
    assert mx.grad(fun)(mx.array([-1.0, -2.0])).tolist() == [-1.0, -1.0]


# --- section 3: when to evaluate ----------------------------------------------


def test_evaluating_every_step_loop():
    a = mx.array([1.0, 2.0])
    b = mx.array([0.5, 0.25])
    an, bn = np.array([1.0, 2.0]), np.array([0.5, 0.25])
    for _ in range(100):
        a = a + b
        mx.eval(a)
        b = b * 2
        mx.eval(b)
        an, bn = an + bn, bn * 2
    assert_array(a, an, "float32")
    assert_array(b, bn, "float32")


def _regression_problem():
    key = mx.random.key(0)
    k1, k2 = mx.random.split(key)
    xs = mx.random.normal((64, 4), key=k1)
    true_w = mx.array([1.0, -2.0, 0.5, 3.0])
    ys = xs @ true_w + 0.01 * mx.random.normal((64,), key=k2)
    return xs, ys, true_w


def _loss_fn(params, xs, ys):
    pred = xs @ params["w"] + params["b"]
    return mx.mean(mx.square(pred - ys))


def test_training_loop_with_one_eval_per_step():
    xs, ys, true_w = _regression_problem()
    params = {"w": mx.zeros((4,)), "b": mx.array(0.0)}
    value_and_grad_fn = mx.value_and_grad(_loss_fn)
    losses = []
    for _ in range(100):
        loss, grads = value_and_grad_fn(params, xs, ys)
        params = {k: params[k] - 0.1 * grads[k] for k in params}
        mx.eval(loss, params)
        losses.append(loss.item())
    assert losses[-1] < 1e-3 < losses[0]
    assert all(b <= a + 1e-7 for a, b in zip(losses, losses[1:]))
    assert np.allclose(np.array(params["w"]), np.array(true_w), atol=0.02)


def test_partial_evaluation_gives_the_same_numbers():
    xs, ys, _ = _regression_problem()
    value_and_grad_fn = mx.value_and_grad(_loss_fn)

    def run(partial):
        params = {"w": mx.zeros((4,)), "b": mx.array(0.0)}
        seen = []
        for _ in range(20):
            loss, grads = value_and_grad_fn(params, xs, ys)
            params = {k: params[k] - 0.1 * grads[k] for k in params}
            if partial:
                seen.append(loss.item())  # forward pass evaluated here
                mx.eval(loss, params)  # then backward + update
            else:
                mx.eval(loss, params)
                seen.append(loss.item())
        return seen, np.array(params["w"])

    l1, w1 = run(True)
    l2, w2 = run(False)
    assert l1 == l2
    assert np.array_equal(w1, w2)


def test_shape_mismatch_is_caught_at_record_time_not_at_print():
    def some_projection(x):
        return x * 2

    def build(x):
        h = some_projection(x)
        h = mx.reshape(h, (-1, 128))
        h = h @ mx.random.normal((256, 64))  # incompatible
        return h

    def train_step(x):
        h = build(x)
        for _ in range(12):
            h = mx.tanh(h) + h
        return mx.sum(h)

    with pytest.raises(ValueError, match=r"\(128,128\).*\(256,64\)"):
        train_step(mx.random.normal((32, 512)))


def test_eval_bisection_helper():
    x = mx.random.normal((4, 256))
    h = x * 2
    mx.eval(h)
    h = mx.reshape(h, (-1, 128))
    mx.eval(h)
    h = h @ mx.random.normal((128, 64))
    mx.eval(h)
    assert h.shape == (8, 64)


def test_functional_cache_state_is_evaluated_each_step():
    pooled = mx.zeros((1, 0))
    for step in range(50):
        px = mx.full((1, 1), float(step))
        pooled = mx.concatenate([pooled, px], axis=1)
        token = mx.sum(pooled)
        mx.eval(token, pooled)
    assert pooled.shape == (1, 50)
    assert pooled.tolist() == [[float(i) for i in range(50)]]
    assert token.item() == sum(range(50))


# --- section 4: transforms ----------------------------------------------------


def _seed_loss(w, x, y):
    return mx.mean(mx.square(w * x - y))


def _seed_wxy():
    return mx.array(1.0), mx.array([0.5, -0.5]), mx.array([1.5, -1.5])


def test_grad_example():
    w, x, y = _seed_wxy()
    dloss_dw = mx.grad(_seed_loss)(w, x, y)
    assert repr(dloss_dw) == "array(-1, dtype=float32)"
    dloss_dx = mx.grad(_seed_loss, argnums=1)(w, x, y)
    assert repr(dloss_dx) == "array([-1, 1], dtype=float32)"


def test_value_and_grad_example():
    w, x, y = _seed_wxy()
    loss, dloss_dw = mx.value_and_grad(_seed_loss)(w, x, y)
    assert repr(loss) == "array(1, dtype=float32)"
    assert repr(dloss_dw) == "array(-1, dtype=float32)"


def test_grad_argnums_sequence():
    w, x, y = _seed_wxy()
    g = mx.grad(_seed_loss, argnums=(0, 2))(w, x, y)
    assert isinstance(g, tuple) and len(g) == 2
    assert repr(g[0]) == "array(-1, dtype=float32)"
    assert repr(g[1]) == "array([1, -1], dtype=float32)"
    g = mx.grad(_seed_loss, argnums=[0, 1])(w, x, y)
    assert isinstance(g, tuple) and len(g) == 2
    # a one-element sequence gives the bare gradient, like an int
    for one in ([1], (1,)):
        g = mx.grad(_seed_loss, argnums=one)(w, x, y)
        assert repr(g) == "array([-1, 1], dtype=float32)"


def test_grad_argnames():
    w, x, y = _seed_wxy()

    def loss(w, x=None, y=None):
        return mx.mean(mx.square(w * x - y))

    positional, by_name = mx.grad(loss, argnames="x")(w, x=x, y=y)
    assert positional is None
    assert list(by_name) == ["x"]
    assert repr(by_name["x"]) == "array([-1, 1], dtype=float32)"

    positional, by_name = mx.grad(loss, argnames=["x", "y"])(w, x=x, y=y)
    assert positional is None
    assert sorted(by_name) == ["x", "y"]
    assert by_name["y"].tolist() == [1.0, -1.0]

    value, (dw, by_name) = mx.value_and_grad(loss, argnums=0, argnames="y")(w, x=x, y=y)
    assert value.item() == 1.0
    assert repr(dw) == "array(-1, dtype=float32)"
    assert by_name["y"].tolist() == [1.0, -1.0]


def test_value_and_grad_auxiliary_outputs():
    def forward(params, inputs):
        return params["w"] * inputs

    def lasso(params, inputs, targets, a=1.0, b=1.0):
        outputs = forward(params, inputs)
        mse = (outputs - targets).square().mean()
        l1 = mx.abs(outputs - targets).mean()
        loss = a * mse + b * l1
        return loss, mse, l1

    w, x, y = _seed_wxy()
    (loss, mse, l1), grads = mx.value_and_grad(lasso)({"w": w}, x, y)
    assert loss.item() == 2.0 and mse.item() == 1.0 and l1.item() == 1.0
    # gradient of the first output only: d(mse)/dw + d(l1)/dw = -1 + -0.5
    assert repr(grads["w"]) == "array(-1.5, dtype=float32)"
    # grad itself refuses a tuple-valued function
    with pytest.raises(ValueError, match="scalar"):
        mx.grad(lasso)({"w": w}, x, y)


def test_grad_through_pytrees():
    def loss_fn(params, x, y):
        w, b = params["weight"], params["bias"]
        h = w * x + b
        return mx.mean(mx.square(h - y))

    params = {"weight": mx.array(1.0), "bias": mx.array(0.0)}
    _, x, y = _seed_wxy()
    grads = mx.grad(loss_fn)(params, x, y)
    assert str(grads) == "{'weight': array(-1, dtype=float32), 'bias': array(0, dtype=float32)}"


def test_grad_through_nested_lists_and_tuples():
    def f(p):
        a, (b, c) = p[0], p[1]
        return mx.sum(a * a) + mx.sum(b * c) + c[0]

    p = [mx.array([1.0, 2.0]), (mx.array([3.0]), mx.array([4.0]))]
    g = mx.grad(f)(p)
    assert isinstance(g, list) and isinstance(g[1], tuple)
    assert g[0].tolist() == [2.0, 4.0]
    assert g[1][0].tolist() == [4.0]
    assert g[1][1].tolist() == [4.0]


def test_stop_gradient():
    x = mx.array([1.0, 2.0])
    y = mx.stop_gradient(x)
    assert y.tolist() == [1.0, 2.0]
    g = mx.grad(lambda a: mx.sum(mx.stop_gradient(a) * a))(x)
    assert g.tolist() == [1.0, 2.0]
    g = mx.grad(lambda a: mx.sum(mx.stop_gradient(a * a)))(x)
    assert g.tolist() == [0.0, 0.0]


def test_higher_order_derivatives():
    d2fdx2 = mx.grad(mx.grad(mx.sin))
    assert repr(d2fdx2(mx.array(mx.pi / 2))) == "array(-1, dtype=float32)"
    d3 = mx.grad(mx.grad(mx.grad(lambda x: x * x * x)))
    assert d3(mx.array(2.0)).item() == 6.0
    d4 = mx.grad(mx.grad(mx.grad(mx.grad(mx.exp))))
    assert math.isclose(d4(mx.array(1.0)).item(), math.e, rel_tol=1e-6)


def test_vjp_and_jvp_examples():
    outs, vjps = mx.vjp(mx.sin, (mx.array(1.0),), (mx.array(1.0),))
    assert isinstance(outs, list) and isinstance(vjps, list)
    assert repr(outs[0]) == "array(0.841471, dtype=float32)"
    assert repr(vjps[0]) == "array(0.540302, dtype=float32)"
    outs, jvps = mx.jvp(mx.sin, (mx.array(1.0),), (mx.array(1.0),))
    assert repr(outs[0]) == "array(0.841471, dtype=float32)"
    assert repr(jvps[0]) == "array(0.540302, dtype=float32)"


def test_vjp_jvp_multiple_inputs_and_outputs():
    def f(a, b):
        return a * b, a + b

    a, b = mx.array(2.0), mx.array(3.0)
    outs, vjps = mx.vjp(f, [a, b], [mx.array(1.0), mx.array(1.0)])
    assert [o.item() for o in outs] == [6.0, 5.0]
    assert [v.item() for v in vjps] == [4.0, 3.0]
    outs, jvps = mx.jvp(f, [a, b], [mx.array(1.0), mx.array(0.0)])
    assert [o.item() for o in outs] == [6.0, 5.0]
    assert [t.item() for t in jvps] == [3.0, 1.0]


def test_vmap_example():
    xs = mx.random.uniform(shape=(64, 10))
    ys = mx.random.uniform(shape=(10, 64))

    def naive_add(xs, ys):
        return [xs[i] + ys[:, i] for i in range(xs.shape[0])]

    vmap_add = mx.vmap(lambda x, y: x + y, in_axes=(0, 1))
    out = vmap_add(xs, ys)
    assert out.shape == (64, 10)
    assert_array(out, np.stack([np.array(v) for v in naive_add(xs, ys)]), "float32")
    assert_array(out, np.array(xs) + np.array(ys).T, "float32")


def test_vmap_shared_weights_in_axes_none():
    def single_example_loss(w, x, y):
        return mx.square(mx.sum(w * x) - y)

    w = mx.random.normal((16,))
    xs = mx.random.normal((32, 16))
    ys = mx.random.normal((32,))
    per_example = mx.vmap(single_example_loss, in_axes=(None, 0, 0))
    losses = per_example(w, xs, ys)
    mx.eval(losses)
    assert losses.shape == (32,)
    wn, xn, yn = (np.array(v, dtype=np.float64) for v in (w, xs, ys))
    assert_array(losses, (xn @ wn - yn) ** 2, "float32", rtol=1e-5, atol=1e-5)


def test_vmap_out_axes():
    x = mx.arange(6).reshape(3, 2)
    assert mx.vmap(lambda v: v * 2, out_axes=1)(x).tolist() == [[0, 4, 8], [2, 6, 10]]
    a, s = mx.vmap(lambda v: (v, mx.sum(v)), out_axes=(1, 0))(x)
    assert a.tolist() == [[0, 2, 4], [1, 3, 5]]
    assert s.tolist() == [1, 5, 9]


def test_vmap_in_axes_trees():
    tree = {"a": mx.ones((3, 2)), "b": mx.array([1.0, 2.0])}
    out = mx.vmap(lambda d, x: d["a"] + d["b"] + x, in_axes=({"a": 0, "b": None}, 0))(
        tree, mx.array([[0.0], [10.0], [20.0]])
    )
    assert out.tolist() == [[2.0, 3.0], [12.0, 13.0], [22.0, 23.0]]
    out = mx.vmap(lambda p, q: p[0] + p[1] + q, in_axes=([0, None], None))(
        [mx.ones((3, 2)), mx.array([1.0, 2.0])], mx.array(1.0)
    )
    assert out.tolist() == [[3.0, 4.0]] * 3


def test_composition_per_example_gradients():
    def f(w, x):
        return mx.sum(mx.tanh(w * x))

    g = mx.grad(f)
    per_example_grads = mx.vmap(g, in_axes=(None, 0))
    w = mx.random.normal((8,))
    xs = mx.random.normal((64, 8))
    out = per_example_grads(w, xs)
    mx.eval(out)
    assert out.shape == (64, 8)
    wn, xn = np.array(w, dtype=np.float64), np.array(xs, dtype=np.float64)
    assert_array(out, xn * (1 - np.tanh(wn * xn) ** 2), "float32", rtol=1e-5, atol=1e-6)


def test_checkpoint():
    def f(x):
        return mx.sum(mx.sin(x) * x)

    x = mx.array([1.0, 2.0])
    g = mx.grad(mx.checkpoint(f))(x)
    xn = np.array([1.0, 2.0])
    assert_array(g, np.cos(xn) * xn + np.sin(xn), "float32")
    assert mx.checkpoint(lambda v: v * 2)(x).tolist() == [2.0, 4.0]
    value, (ga, gb) = mx.value_and_grad(
        mx.checkpoint(lambda a, b: mx.sum(a * b)), argnums=(0, 1)
    )(mx.array([1.0, 2.0]), mx.array([3.0, 4.0]))
    assert value.item() == 11.0
    assert ga.tolist() == [3.0, 4.0] and gb.tolist() == [1.0, 2.0]


# --- section 5: custom_function -----------------------------------------------


def _seed_custom_function():
    @mx.custom_function
    def f(x, y):
        return mx.sin(x) * y

    @f.vjp
    def f_vjp(primals, cotangent, output):
        x, y = primals
        return cotangent * mx.cos(x) * y, cotangent * mx.sin(x)

    @f.jvp
    def f_jvp(primals, tangents):
        x, y = primals
        dx, dy = tangents
        return dx * mx.cos(x) * y + dy * mx.sin(x)

    @f.vmap
    def f_vmap(inputs, axes):
        x, y = inputs
        ax, ay = axes
        if ay != ax and ax is not None:
            y = y.swapaxes(ay, ax)
        return mx.sin(x) * y, (ax or ay)

    return f


def test_custom_function_shape_of_it():
    f = _seed_custom_function()
    assert isinstance(f, mx.custom_function)
    x, y = mx.array(1.0), mx.array(2.0)
    assert repr(f(x, y)) == "array(1.68294, dtype=float32)"
    assert repr(mx.grad(f)(x, y)) == "array(1.0806, dtype=float32)"
    assert repr(mx.grad(f, argnums=1)(x, y)) == "array(0.841471, dtype=float32)"
    outs, tans = mx.jvp(f, [x, y], [mx.array(1.0), mx.array(0.0)])
    assert repr(outs[0]) == "array(1.68294, dtype=float32)"
    assert repr(tans[0]) == "array(1.0806, dtype=float32)"
    out = mx.vmap(f)(mx.array([0.0, 1.0, 2.0]), mx.array([1.0, 2.0, 3.0]))
    assert repr(out) == "array([0, 1.68294, 2.72789], dtype=float32)"


def test_custom_function_rules_are_used():
    """Each custom rule replaces the default one (the results prove which ran)."""

    @mx.custom_function
    def f(x):
        return x * x

    @f.vjp
    def f_vjp(primals, cotangent, output):
        return (cotangent * 100.0,)

    @f.jvp
    def f_jvp(primals, tangents):
        return tangents * 7.0

    @f.vmap
    def f_vmap(inputs, axes):
        return inputs * inputs + 1000.0, axes

    assert f(mx.array(3.0)).item() == 9.0
    assert mx.grad(f)(mx.array(3.0)).item() == 100.0
    assert mx.jvp(f, [mx.array(3.0)], [mx.array(1.0)])[1][0].item() == 7.0
    assert mx.vmap(f)(mx.array([1.0, 2.0])).tolist() == [1001.0, 1004.0]


def test_custom_function_vjp_may_return_a_bare_array():
    @mx.custom_function
    def f(x):
        return x * x

    @f.vjp
    def f_vjp(primals, cotangent, output):
        return cotangent * 100.0

    assert mx.grad(f)(mx.array(3.0)).item() == 100.0


def test_custom_function_undefined_rules_fall_back():
    @mx.custom_function
    def f(x):
        return x * x

    assert mx.grad(f)(mx.array(3.0)).item() == 6.0
    outs, tans = mx.jvp(f, [mx.array(3.0)], [mx.array(1.0)])
    assert outs[0].item() == 9.0 and tans[0].item() == 6.0
    assert mx.vmap(f)(mx.array([1.0, 2.0])).tolist() == [1.0, 4.0]

    @mx.custom_function
    def g(x):
        return x * x

    @g.vjp
    def g_vjp(primals, cotangent, output):
        return (cotangent * 100.0,)

    # only the vjp is custom: jvp still differentiates the forward
    assert mx.jvp(g, [mx.array(3.0)], [mx.array(1.0)])[1][0].item() == 6.0


def test_custom_function_multiple_outputs_and_vjp_arguments():
    seen = {}

    @mx.custom_function
    def f(x):
        return x * 2, x * 3

    @f.vjp
    def f_vjp(primals, cotangents, outputs):
        seen["primals"] = primals
        seen["cotangents"] = cotangents
        seen["outputs"] = outputs
        return (cotangents[0] * 2 + cotangents[1] * 3,)

    g = mx.grad(lambda x: sum(f(x)))(mx.array(1.0))
    assert g.item() == 5.0
    assert isinstance(seen["cotangents"], tuple) and len(seen["cotangents"]) == 2
    assert isinstance(seen["outputs"], tuple)
    assert [o.item() for o in seen["outputs"]] == [2.0, 3.0]
    # a single primal is passed bare, not in a tuple
    assert seen["primals"].item() == 1.0


def test_custom_function_rule_arguments_single_and_multiple_inputs():
    seen = {}

    @mx.custom_function
    def one(x):
        return x * x

    @one.vjp
    def one_vjp(primals, cotangent, output):
        seen["vjp"] = (primals, cotangent, output)
        return cotangent * 2 * primals

    @one.jvp
    def one_jvp(primals, tangents):
        seen["jvp"] = (primals, tangents)
        return tangents * 2 * primals

    @one.vmap
    def one_vmap(inputs, axes):
        seen["vmap"] = (inputs, axes)
        return inputs * inputs, axes

    x = mx.array(3.0)
    assert mx.grad(one)(x).item() == 6.0
    p, c, o = seen["vjp"]
    assert (p.item(), c.item(), o.item()) == (3.0, 1.0, 9.0)
    assert mx.jvp(one, [x], [mx.array(1.0)])[1][0].item() == 6.0
    p, t = seen["jvp"]
    assert (p.item(), t.item()) == (3.0, 1.0)
    assert mx.vmap(one)(mx.array([1.0, 2.0])).tolist() == [1.0, 4.0]
    i, a = seen["vmap"]
    assert i.tolist() == [1.0, 2.0] and a == 0

    @mx.custom_function
    def two(x, y):
        return x * y

    @two.vjp
    def two_vjp(primals, cotangent, output):
        seen["vjp2"] = (primals, cotangent, output)
        x, y = primals
        return cotangent * y, cotangent * x

    @two.jvp
    def two_jvp(primals, tangents):
        seen["jvp2"] = (primals, tangents)
        return tangents[0] * primals[1] + tangents[1] * primals[0]

    @two.vmap
    def two_vmap(inputs, axes):
        seen["vmap2"] = (inputs, axes)
        return inputs[0] * inputs[1], axes[0]

    a, b = mx.array(2.0), mx.array(5.0)
    assert [g.item() for g in mx.grad(two, argnums=(0, 1))(a, b)] == [5.0, 2.0]
    p, c, o = seen["vjp2"]
    assert isinstance(p, tuple) and len(p) == 2
    assert (c.item(), o.item()) == (1.0, 10.0)
    assert mx.jvp(two, [a, b], [mx.array(1.0), mx.array(1.0)])[1][0].item() == 7.0
    assert isinstance(seen["jvp2"][0], tuple) and isinstance(seen["jvp2"][1], tuple)
    out = mx.vmap(two, in_axes=(0, None))(mx.array([1.0, 2.0]), mx.array(3.0))
    assert out.tolist() == [3.0, 6.0]
    inputs, axes = seen["vmap2"]
    assert isinstance(inputs, tuple) and axes == (0, None)


def test_custom_function_jvp_tangent_may_be_none():
    seen = {}

    @mx.custom_function
    def h(x, y):
        return x * y

    @h.jvp
    def h_jvp(primals, tangents):
        seen["tangents"] = tangents
        return tangents[0] * primals[1]

    outs, tans = mx.jvp(lambda x: h(x, mx.array(5.0)), [mx.array(2.0)], [mx.array(1.0)])
    assert outs[0].item() == 10.0 and tans[0].item() == 5.0
    assert seen["tangents"][1] is None


def test_custom_function_vmap_with_unbatched_argument():
    @mx.custom_function
    def f(x, y):
        return mx.sin(x) * y

    @f.vmap
    def f_vmap(inputs, axes):
        x, y = inputs
        ax, ay = axes
        assert ay is None
        return mx.sin(x) * y, ax

    out = mx.vmap(f, in_axes=(0, None))(mx.array([0.0, 1.0, 2.0]), mx.array(3.0))
    assert_array(out, np.sin([0.0, 1.0, 2.0]) * 3, "float32")


def _captured_g(x, y):
    @mx.custom_function
    def f(x):
        return x * y

    @f.vjp
    def f_vjp(x, dx, fx):
        raise ValueError("Abort!")

    return f(x)


def test_custom_function_captured_array_gradient_is_zero():
    x, y = mx.array(2.0), mx.array(3.0)
    assert _captured_g(x, y).item() == 6.0
    with pytest.raises(ValueError, match="Abort!"):
        mx.grad(_captured_g)(x, y)
    g = mx.grad(_captured_g, argnums=1)(x, y)
    assert repr(g) == "array(0, dtype=float32)"


@pytest.mark.loom_only
def test_custom_function_capture_warning():
    x, y = mx.array(2.0), mx.array(3.0)
    with pytest.warns(Warning, match=r"(?i)captur.*custom_function|custom_function.*captur"):
        g = mx.grad(_captured_g, argnums=1)(x, y)
    assert g.item() == 0.0


def test_custom_function_correct_form_gets_a_cotangent():
    @mx.custom_function
    def op(x, scale):
        return x * scale

    @op.vjp
    def op_vjp(primals, cotangent, output):
        x, scale = primals
        return cotangent * scale, cotangent * x

    def finite_diff_check(fn, args, argnum, eps=1e-3):
        analytic = mx.grad(fn, argnums=argnum)(*args)
        hi, lo = list(args), list(args)
        hi[argnum] = args[argnum] + eps
        lo[argnum] = args[argnum] - eps
        numeric = (fn(*hi) - fn(*lo)) / (2 * eps)
        mx.eval(analytic, numeric)
        return float(analytic.item()), float(numeric.item())

    a, n = finite_diff_check(op, (mx.array(2.0), mx.array(3.0)), argnum=1)
    assert a == 2.0
    assert abs(a - n) < 1e-2
    a, n = finite_diff_check(op, (mx.array(2.0), mx.array(3.0)), argnum=0)
    assert a == 3.0
    assert abs(a - n) < 1e-2


def test_numpy_view_write_is_invisible_to_autodiff():
    def f(x):
        x_view = np.array(x, copy=False)
        x_view[:] *= x_view
        return x.sum()

    x = mx.array([3.0])
    if IS_MLX:
        y, df = mx.value_and_grad(f)(x)
        assert y.item() == 9.0
        assert df.item() == 1.0  # the seed's silent failure
    else:
        # Beyond MLX (issue 12): the view of a differentiated array is
        # read-only, so the write raises instead of giving a wrong gradient.
        with pytest.warns(UserWarning, match="no gradient flows"):
            with pytest.raises(ValueError, match="read-only"):
                mx.value_and_grad(f)(x)


def test_numpy_round_trip_breaks_the_graph():
    def f(x):
        return mx.array(np.array(x) ** 2).sum()

    if IS_MLX:
        assert mx.grad(f)(mx.array([3.0])).item() == 0.0
    else:
        # Loom warns that the gradient stops at the conversion (issue 12).
        with pytest.warns(UserWarning, match="no gradient flows"):
            assert mx.grad(f)(mx.array([3.0])).item() == 0.0


def test_nested_vmap_and_grad_of_vmap():
    xn = np.arange(6, dtype=np.float32).reshape(2, 3)
    yn = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    outer = mx.vmap(mx.vmap(lambda x, y: x * y + 1, in_axes=(0, 0)), in_axes=(0, None))
    assert_array(outer(mx.array(xn), mx.array(yn)), xn * yn + 1, "float32")
    # a batched matrix-vector product written as a doubly vmapped dot product
    dot = mx.vmap(mx.vmap(lambda r, c: mx.sum(r * c), in_axes=(0, None)), in_axes=(None, 1))
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    n = np.arange(8, dtype=np.float32).reshape(4, 2)
    assert_array(dot(mx.array(m), mx.array(n)), (m @ n).T, "float32")
    # grad of a function that uses vmap inside
    g = mx.grad(lambda w: mx.sum(mx.vmap(lambda x: mx.sin(w * x))(mx.array(xn))))(mx.array(0.5))
    assert_array(g, np.sum(xn * np.cos(0.5 * xn.astype(np.float64))), "float32", rtol=1e-5)
