"""mx.compile: the seed's §6-§9 examples verbatim, the §8.2 cache key row by
row (traces counted with a Python side effect), §9.2's recompile table,
constants, state capture, composition with the transforms, threads, and
fuzzed element-wise chains compiled vs eager. Runs on loom.core and on
mlx.core (LOOM_TEST_ORACLE=mlx)."""

import functools
import math
import random
import threading
from functools import partial

import numpy as np
import pytest

from _backend import IS_MLX, mx


def close(a, b, tol=1e-5):
    return np.allclose(np.array(a), np.array(b), rtol=tol, atol=tol, equal_nan=True)


class Counter:
    """A function that counts how often Python runs it (= traces)."""

    def __init__(self, fn):
        self.fn = fn
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.fn(*args, **kwargs)


# --- §6.1 ---------------------------------------------------------------


def test_seed_6_1_basic():
    def fun(x, y):
        return mx.exp(-x) + y

    x = mx.array(1.0)
    y = mx.array(2.0)
    assert repr(fun(x, y)) == "array(2.36788, dtype=float32)"
    compiled_fun = mx.compile(fun)
    assert repr(compiled_fun(x, y)) == "array(2.36788, dtype=float32)"


def test_signature_and_bad_fun():
    with pytest.raises(TypeError):
        mx.compile(3)


def test_decorator_and_partial():
    @mx.compile
    def f(x):
        return x * 2 + 1

    assert f(mx.array(3.0)).item() == 7.0

    def g(x, scale):
        return x * scale

    h = mx.compile(functools.partial(g, scale=mx.array(4.0)))
    assert h(mx.array(2.0)).item() == 8.0


# --- §6.3 ---------------------------------------------------------------


def gelu(x):
    return x * (1 + mx.erf(x / math.sqrt(2))) / 2


def test_seed_6_3_gelu_matches_eager():
    x = mx.random.uniform(shape=(32, 100, 64))
    assert close(mx.compile(gelu)(x), gelu(x), 1e-6)


# --- §6.4 / §6.6 ------------------------------------------------------------


def test_seed_6_4_disable_compile_allows_print(capsys):
    @mx.compile
    def fun(x):
        z = -x
        print(z)  # Okay with compile disabled
        return mx.exp(z)

    mx.disable_compile()
    try:
        out = fun(mx.array(5.0))
    finally:
        mx.enable_compile()
    assert close(out, np.exp(-5.0))
    assert "array(-5, dtype=float32)" in capsys.readouterr().out


@pytest.mark.loom_only
@pytest.mark.parametrize("action", ["print", "item", "tolist", "numpy", "bool"])
def test_evaluating_inside_trace_raises(action):
    # MLX crashes here (seed §6.4); Loom raises an error naming compile.
    def fun(x):
        z = -x
        if action == "print":
            print(z)
        elif action == "item":
            z.item()
        elif action == "tolist":
            z.tolist()
        elif action == "numpy":
            np.array(z)
        else:
            bool(z)
        return mx.exp(z)

    with pytest.raises(Exception, match=r"compile"):
        mx.compile(fun)(mx.array(5.0))


@pytest.mark.loom_only
def test_seed_6_6_escaped_placeholder_raises():
    state = []

    @mx.compile
    def fun(x, y):
        z = x + y
        state.append(z)
        return mx.exp(z)

    out = fun(mx.array(1.0), mx.array(2.0))
    assert close(out, np.exp(3.0))
    with pytest.raises(Exception, match=r"compile"):
        print(state)


def test_side_effects_run_once():
    calls = []

    @mx.compile
    def fun(x):
        calls.append(1)
        return x + 1

    for _ in range(3):
        fun(mx.array(1.0))
    assert len(calls) == 1


# --- §7 ---------------------------------------------------------------------


def test_seed_7_1_captured_arrays_are_frozen():
    state = [mx.array(1.0)]

    @mx.compile
    def fun(x):
        return x + state[0]

    assert repr(fun(mx.array(1.0))) == "array(2, dtype=float32)"
    state[0] = mx.array(5.0)
    assert repr(fun(mx.array(1.0))) == "array(2, dtype=float32)"


def test_seed_7_2_state_as_argument():
    state = [mx.array(1.0)]

    @mx.compile
    def fun(x, state):
        return x + state[0]

    assert repr(fun(mx.array(1.0), state)) == "array(2, dtype=float32)"
    state[0] = mx.array(5.0)
    assert repr(fun(mx.array(1.0), state)) == "array(6, dtype=float32)"


def test_seed_7_3_inputs():
    state = [mx.array(1.0)]

    @partial(mx.compile, inputs=state)
    def fun(x):
        return x + state[0]

    assert repr(fun(mx.array(1.0))) == "array(2, dtype=float32)"
    state[0] = mx.array(5.0)
    assert repr(fun(mx.array(1.0))) == "array(6, dtype=float32)"


def test_seed_7_3_outputs():
    state = []

    @partial(mx.compile, outputs=state)
    def fun(x, y):
        z = x + y
        state.append(z)
        return mx.exp(z)

    fun(mx.array(1.0), mx.array(2.0))
    assert repr(state) == "[array(3, dtype=float32)]"


def test_outputs_updated_on_every_call():
    state = {"count": mx.array(0), "note": "non-array leaves are ignored"}

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x):
        state["count"] = state["count"] + 1
        return x * 2

    for i in range(4):
        step(mx.array(1.0))
    assert state["count"].item() == 4


def test_seed_7_4_training_step_converges_like_eager():
    mx.random.seed(0)
    x = mx.random.uniform(shape=(4, 10))
    y = mx.array([0, 1, 0, 1])

    def make():
        params = {"w": mx.zeros((10, 1)), "b": mx.zeros((1,))}
        moments = {"w": mx.zeros((10, 1)), "b": mx.zeros((1,))}
        return params, moments

    def loss_fn(params, x, y):
        logits = (x @ params["w"] + params["b"]).squeeze()
        # binary cross entropy with logits
        return mx.mean(mx.logaddexp(0.0, logits) - y * logits)

    def run(compiled):
        params, moments = make()
        state = [params, moments]

        def step(x, y):
            loss, grads = mx.value_and_grad(loss_fn)(params, x, y)
            for k in params:
                moments[k] = 0.8 * moments[k] + grads[k]
                params[k] = params[k] - 0.1 * moments[k]
            return loss

        if compiled:
            step = partial(mx.compile, inputs=state, outputs=state)(step)
        losses = []
        for _ in range(10):
            loss = step(x, y)
            mx.eval(state)
            losses.append(loss.item())
        return losses

    eager = run(False)
    compiled = run(True)
    assert np.allclose(eager, compiled, rtol=1e-5, atol=1e-6)
    assert compiled[-1] < compiled[0]


def test_random_inside_compiled_advances_with_state():
    mx.random.seed(3)
    state = [mx.random.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def sample(x):
        return x + mx.random.uniform(shape=(4,))

    a = sample(mx.zeros((4,)))
    b = sample(mx.zeros((4,)))
    assert not np.allclose(np.array(a), np.array(b))


# --- §7.5 -------------------------------------------------------------------


def test_seed_7_5_argument_types():
    f = mx.compile(lambda x, s: x * 2)
    with pytest.raises(ValueError) as e:
        f(mx.array(1.0), np.ones(2))
    assert str(e.value) == (
        "[compile] Function arguments must be trees of arrays or constants "
        "(floats, ints, strings, or None), but received type ndarray."
    )


def test_trees_in_and_out():
    @mx.compile
    def f(d, l, t, **kw):
        return {"a": [d["x"] + l[0], (t[1] * 2,)], "k": kw["z"] - 1, "c": 1}

    out = f({"x": mx.array(1.0)}, [mx.array(2.0)], (None, mx.array(3.0)), z=mx.array(5.0))
    assert out["a"][0].item() == 3.0
    assert out["a"][1][0].item() == 6.0
    assert out["k"].item() == 4.0
    assert out["c"] == 1


@pytest.mark.parametrize("value", [1, 2.5, "relu", None, True])
def test_constants_of_each_type(value):
    def fun(x, c):
        if c is None:
            return x
        if isinstance(c, str):
            return mx.maximum(x, 0) if c == "relu" else x
        return x * c

    f = mx.compile(fun)
    x = mx.array([-1.0, 2.0])
    assert close(f(x, value), fun(x, value))


# --- §8.2 / §8.3: the cache key row by row ------------------------------------


def test_key_same_callable_hits():
    fun = Counter(lambda x, y: x + y)
    compiled_fun = mx.compile(fun)
    x, y = mx.array(1.0), mx.array(2.0)
    compiled_fun(x, y)
    compiled_fun(x, y)
    mx.compile(fun)(x, y)
    assert fun.calls == 1


def test_key_new_lambda_misses():
    calls = []
    a = mx.array(1.0)
    for _ in range(5):
        mx.compile(lambda x: (calls.append(1), mx.exp(mx.abs(x)))[1])(a)
    assert len(calls) == 5


def test_key_default_stream():
    fun = Counter(lambda x: x * 2)
    f = mx.compile(fun)
    x = mx.array(1.0)
    f(x)
    with mx.stream(mx.new_stream(mx.cpu)):
        f(x)
    f(x)
    assert fun.calls == 2


@pytest.mark.parametrize(
    "first,second,retrace",
    [
        ((mx.float32, (4,)), (mx.float32, (8,)), True),  # shape
        ((mx.float32, (4,)), (mx.float32, (2, 4)), True),  # ndim
        ((mx.float32, (4,)), (mx.float16, (4,)), True),  # dtype
        ((mx.float32, (4,)), (mx.float32, (4,)), False),  # same
    ],
)
def test_key_per_input(first, second, retrace):
    fun = Counter(lambda x: x + 1)
    f = mx.compile(fun)
    f(mx.zeros(first[1], dtype=first[0]))
    f(mx.zeros(second[1], dtype=second[0]))
    assert fun.calls == (2 if retrace else 1)


def test_key_number_of_inputs():
    fun = Counter(lambda *xs: sum(xs[1:], xs[0]))
    f = mx.compile(fun)
    f(mx.array(1.0), mx.array(2.0))
    f(mx.array(1.0), mx.array(2.0), mx.array(3.0))
    assert fun.calls == 2


def test_key_constants():
    fun = Counter(lambda x, c: x * 2 if c is None else x)
    f = mx.compile(fun)
    x = mx.array(1.0)
    for c in [1, 1, 2, 2.0, 2.0, "a", "a", "b", None, None]:
        f(x, c)
    # distinct: 1, 2, 2.0, "a", "b", None
    assert fun.calls == 6


# --- §9 -----------------------------------------------------------------------


def test_seed_9_1_shapeless():
    fun = Counter(lambda x, y: mx.abs(x + y))
    compiled_fun = mx.compile(fun, shapeless=True)
    assert compiled_fun(mx.array(1.0), mx.array(-2.0)).item() == 1.0
    out = compiled_fun(mx.array([1.0, -6.0]), mx.array([-2.0, 3.0]))
    assert out.tolist() == [1.0, 3.0]
    assert fun.calls == 2  # the ndim changed (0 -> 1)
    compiled_fun(mx.array([1.0, 2.0, 3.0]), mx.array([1.0, 2.0, 3.0]))
    assert fun.calls == 2


@pytest.mark.parametrize(
    "change,shapeless,retrace",
    [
        ("shape", False, True),
        ("shape", True, False),
        ("ndim", False, True),
        ("ndim", True, True),
        ("dtype", False, True),
        ("dtype", True, True),
        ("count", False, True),
        ("count", True, True),
        ("const", False, True),
        ("const", True, True),
        ("stream", False, True),
        ("stream", True, True),
    ],
)
def test_seed_9_2_recompile_table(change, shapeless, retrace):
    fun = Counter(lambda x, *rest: mx.abs(x) + sum(r for r in rest if not isinstance(r, int)))
    f = mx.compile(fun, shapeless=shapeless)
    f(mx.zeros((4,)), 1)
    if change == "shape":
        f(mx.zeros((8,)), 1)
    elif change == "ndim":
        f(mx.zeros((2, 4)), 1)
    elif change == "dtype":
        f(mx.zeros((4,), dtype=mx.bfloat16), 1)
    elif change == "count":
        f(mx.zeros((4,)), 1, mx.zeros((4,)))
    elif change == "const":
        f(mx.zeros((4,)), 2)
    else:
        with mx.stream(mx.new_stream(mx.cpu)):
            f(mx.zeros((4,)), 1)
    assert fun.calls == (2 if retrace else 1)


def test_seed_9_3_reshape_with_shape_arithmetic_raises():
    def fun(x):
        return x.reshape(x.shape[0] * x.shape[1], -1)

    compiled_fun = mx.compile(fun, shapeless=True)
    if IS_MLX:
        compiled_fun(mx.random.uniform(shape=(2, 3, 4)))
        with pytest.raises(ValueError):
            out = compiled_fun(mx.random.uniform(shape=(5, 5, 3)))
            mx.eval(out)
        return
    # Loom keys the shapes the trace read, warns once, and gets it right.
    with pytest.warns(UserWarning, match=r"read the shape of array input"):
        compiled_fun(mx.random.uniform(shape=(2, 3, 4)))
    x = mx.random.uniform(shape=(5, 5, 3))
    assert compiled_fun(x).shape == (25, 3)


def test_seed_9_3_flatten_works():
    def fun(x):
        return x.flatten(0, 1)

    compiled_fun = mx.compile(fun, shapeless=True)
    compiled_fun(mx.random.uniform(shape=(2, 3, 4)))
    x = mx.random.uniform(shape=(5, 5, 3))
    out = compiled_fun(x)
    assert out.shape == (25, 3)
    assert close(out, np.array(x).reshape(25, 3))


def test_shapeless_scalar_on_the_left_follows_the_new_shape():
    # `2 * x` broadcasts the scalar to the traced shape; a later call with
    # another shape must not return (or read) the traced shape. Also through
    # a transposed input, an array scalar, several outputs and a smaller shape
    # after a larger one (Loom's optimizers run Adam's step this way).
    def step(g, m, lr):
        m = 0.9 * m + 0.1 * g
        return 1 - lr * m, 2 * mx.square(g), m

    compiled = mx.compile(step, shapeless=True)
    rng = np.random.default_rng(3)
    for shape in [(3, 4), (5, 6), (64, 64), (20, 64), (1, 7), (4, 3)]:
        g_np = rng.normal(size=shape[::-1]).astype(np.float32)
        m_np = rng.normal(size=shape).astype(np.float32)
        g, m, lr = mx.array(g_np).T, mx.array(m_np), mx.array(0.5)
        got = compiled(g, m, lr)
        want = step(g, m, lr)
        for a, b in zip(got, want):
            assert a.shape == shape
            np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-6, atol=1e-6)
    doubled = mx.compile(lambda x: 2 * x, shapeless=True)
    assert doubled(mx.ones((3, 4))).shape == (3, 4)
    assert doubled(mx.ones((5, 6))).tolist() == [[2.0] * 6] * 5


# --- composition ------------------------------------------------------------


def test_compile_of_vmap_of_grad():
    def loss(w, x):
        return mx.sum(mx.tanh(x * w) ** 2)

    w = mx.array([0.5, -1.0, 2.0])
    xs = mx.random.normal((5, 3))
    per_example = mx.vmap(mx.grad(loss), in_axes=(None, 0))
    want = per_example(w, xs)
    got = mx.compile(per_example)(w, xs)
    assert close(got, want, 1e-5)


def test_grad_of_compiled():
    def f(x):
        return mx.sum(mx.sin(x) * mx.exp(x) + x * x)

    x = mx.array([0.1, 0.7, -1.2])
    cf = mx.compile(f)
    assert close(mx.grad(cf)(x), mx.grad(f)(x), 1e-5)
    assert close(mx.grad(cf)(x), mx.grad(f)(x), 1e-5)


@pytest.mark.parametrize("order", ["jvp", "vjp", "vmap", "checkpoint", "value_and_grad"])
def test_transforms_of_compiled(order):
    def f(x):
        return mx.sin(x) * 2 + mx.exp(-x)

    cf = mx.compile(f)
    x = mx.array([0.3, -0.4, 1.5])
    if order == "jvp":
        (a,), (ta,) = mx.jvp(cf, [x], [mx.ones_like(x)])
        (b,), (tb,) = mx.jvp(f, [x], [mx.ones_like(x)])
        assert close(a, b) and close(ta, tb)
    elif order == "vjp":
        _, (ca,) = mx.vjp(cf, [x], [mx.ones_like(x)])
        _, (cb,) = mx.vjp(f, [x], [mx.ones_like(x)])
        assert close(ca, cb)
    elif order == "vmap":
        xs = mx.random.normal((4, 3))
        assert close(mx.vmap(cf)(xs), mx.vmap(f)(xs))
    elif order == "checkpoint":
        g = lambda x: mx.sum(mx.checkpoint(cf)(x))
        assert close(mx.grad(g)(x), mx.grad(lambda x: mx.sum(f(x)))(x))
    else:
        va, ga = mx.value_and_grad(lambda x: mx.sum(cf(x)))(x)
        vb, gb = mx.value_and_grad(lambda x: mx.sum(f(x)))(x)
        assert close(va, vb) and close(ga, gb)


def test_compile_of_grad_and_custom_function():
    @mx.custom_function
    def square(x):
        return x * x

    @square.vjp
    def square_vjp(primals, cotangent, output):
        return 2 * primals[0] * cotangent

    f = mx.grad(lambda x: mx.sum(square(x) + mx.sin(x)))
    x = mx.array([1.0, 2.0])
    assert close(mx.compile(f)(x), f(x))


# --- multi-output primitives, concatenate/split (MLX #3932) -----------------


def test_multi_output_split_concatenate():
    def f(x):
        a, b = mx.split(x, 2, axis=-1)
        c = mx.concatenate([b * 2, a + 1], axis=-1)
        d, e, g = mx.split(c, 3, axis=0)
        return mx.concatenate([g, e, d], axis=0) * 3

    x = mx.random.normal((6, 8))
    assert close(mx.compile(f)(x), f(x))


def test_multi_output_unused_sibling():
    def f(x):
        a, _ = mx.split(x, 2)
        return mx.exp(a) + 1

    x = mx.arange(8, dtype=mx.float32)
    assert close(mx.compile(f)(x), f(x))


# --- threads ------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:.*retraced")
def test_threads_share_a_compiled_function():
    f = mx.compile(lambda x, y: mx.tanh(x) * y + 1)
    errors = []
    results = {}

    def worker(i):
        try:
            for k in range(5):
                x = mx.random.normal((i + 1, k + 2))
                y = mx.random.normal((i + 1, k + 2))
                out = f(x, y)
                want = np.tanh(np.array(x)) * np.array(y) + 1
                results[(i, k)] = np.allclose(np.array(out), want, rtol=1e-5, atol=1e-5)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 40 and all(results.values())


# --- fuzzed element-wise chains ---------------------------------------------

UNARY = [mx.abs, mx.negative, mx.exp, mx.sin, mx.cos, mx.tanh, mx.sigmoid, mx.square]
BINARY = [mx.add, mx.subtract, mx.multiply, mx.maximum, mx.minimum]


def _random_chain(rng, n_ops):
    program = []
    for _ in range(n_ops):
        if rng.random() < 0.5:
            program.append(("u", rng.randrange(len(UNARY)), rng.randrange(1 << 30)))
        else:
            program.append(("b", rng.randrange(len(BINARY)), rng.randrange(1 << 30)))
    return program


def _run_chain(program, inputs):
    values = list(inputs)
    for kind, op, pick in program:
        if kind == "u":
            v = values[pick % len(values)]
            out = UNARY[op](mx.clip(v, -3, 3) if UNARY[op] is mx.exp else v)
        else:
            a = values[pick % len(values)]
            b = values[(pick // 7) % len(values)]
            out = BINARY[op](a, b)
        values.append(out)
    # the last value and one intermediate escape
    return values[-1], values[len(values) // 2]


@pytest.mark.parametrize("seed", range(12))
def test_fuzzed_elementwise_chains(seed):
    rng = random.Random(seed)
    shapes = [(3, 1, 5), (1, 4, 5), (5,), (3, 4, 5), (1,), ()]
    dtypes = [mx.float32, mx.float32, mx.float16, mx.bfloat16]
    inputs = []
    for i in range(3):
        shape = shapes[rng.randrange(len(shapes))]
        dt = dtypes[rng.randrange(len(dtypes))]
        inputs.append((mx.random.normal(shape) if shape else mx.random.normal(())).astype(dt))
    program = _run_chain.__defaults__ and None
    program = _random_chain(rng, rng.randint(1, 40))
    fun = lambda *xs: _run_chain(program, xs)
    want = fun(*inputs)
    got = mx.compile(fun)(*inputs)
    for w, g in zip(want, got):
        assert g.shape == w.shape and g.dtype == w.dtype
        tol = 1e-5 if w.dtype == mx.float32 else 2e-2
        assert close(g.astype(mx.float32), w.astype(mx.float32), tol)


def test_large_fused_chain_with_views():
    # Non-contiguous inputs and broadcasts across many tiles.
    x = mx.random.normal((300, 257)).T
    y = mx.random.normal((300,))
    f = lambda x, y: mx.tanh(x * y + 1) * mx.exp(-x * x) - y
    assert close(mx.compile(f)(x, y), f(x, y), 1e-5)


# Every float32 table op the fused chunk loop runs, with scalar operands on
# either side, an op of scalars only, an escaping intermediate, an escaping
# broadcast and a long chain whose chunk buffers are reused.
FLOAT_CHAIN_SIZES = [(7,), (1000, 1031), (3, 1024, 1025)]


def _float_chain(x, y):
    r = math.sqrt(2)
    g = x * (1 + mx.erf(x / r)) / 2
    s = (mx.array(3.0) * 2 + 1) / 4  # scalars only
    t = mx.sqrt(mx.abs(g) + s) - mx.rsqrt(mx.square(y) + 1) * mx.reciprocal(2 + mx.sigmoid(x))
    u = mx.log(mx.exp(mx.tanh(t)) + 1) - mx.maximum(x, y) * mx.minimum(-x, 0.5)
    v = u
    for k in range(12):
        v = v * 0.5 + mx.sin(v) * (k + 1) - mx.cos(y) / (k + 2)
    b = mx.broadcast_to(y, x.shape)
    return v, g, b, s


@pytest.mark.parametrize("shape", FLOAT_CHAIN_SIZES)
def test_float32_chain_of_table_ops_matches_eager(shape):
    x = mx.random.normal(shape)
    y = mx.random.normal(shape[-1:])
    want = _float_chain(x, y)
    got = mx.compile(_float_chain)(x, y)
    assert len(got) == len(want)
    for w, g in zip(want, got):
        assert g.shape == w.shape and g.dtype == w.dtype == mx.float32
        assert close(g, w, 1e-5)


def test_compiled_function_keeps_the_name():
    def named(x):
        return x

    assert mx.compile(named).__name__ == "named"


def test_seed_7_4_canonical_training_step_with_nn_and_optimizers():
    # The seed's snippet verbatim (nn.Linear, nn.losses, optim.SGD), compiled and
    # eager from the same initial parameters: the same losses, falling.
    from _nn_backend import nn, optim

    mx.random.seed(0)
    x = mx.random.uniform(shape=(4, 10))
    y = mx.array([0, 1, 0, 1])

    def loss_fn(model, x, y):
        logits = model(x).squeeze()
        return nn.losses.binary_cross_entropy(logits, y)

    def train(compiled):
        mx.random.seed(1)
        model = nn.Linear(10, 1)
        optimizer = optim.SGD(learning_rate=0.1, momentum=0.8)
        state = [model.state, optimizer.state]

        def step(x, y):
            loss_and_grad_fn = nn.value_and_grad(model, loss_fn)
            loss, grads = loss_and_grad_fn(model, x, y)
            optimizer.update(model, grads)
            return loss

        if compiled:
            step = partial(mx.compile, inputs=state, outputs=state)(step)
        losses = []
        for it in range(10):
            loss = step(x, y)
            mx.eval(state)
            losses.append(loss.item())
        return losses

    eager = train(False)
    compiled = train(True)
    assert np.allclose(eager, compiled, rtol=1e-5, atol=1e-6)
    assert compiled[-1] < compiled[0]


# --- training graphs: forward and backward in one compiled function -------


def _layer_norm(x, g, b):
    mu = mx.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    var = mx.mean(xc * xc, axis=-1, keepdims=True)
    return xc * mx.rsqrt(var + 1e-5) * g + b


def _block_loss(params, x):
    # A pre-norm MLP block: the layer norm's scale is read by the forward
    # product and by its gradient, and gelu's intermediates by the backward.
    g, b, w1, c1, w2, c2 = params
    h = _layer_norm(x, g, b)
    a = h @ w1 + c1
    out = x + (a * (1 + mx.erf(a / math.sqrt(2))) / 2) @ w2 + c2
    return mx.mean(out * out)


@pytest.mark.parametrize("shape", [(2, 7, 16), (3, 33, 64)])
def test_compiled_training_block_matches_eager(shape):
    rng = np.random.default_rng(0)
    dim, hidden = shape[-1], 4 * shape[-1]
    params = [mx.array(rng.uniform(0.5, 1.5, dim).astype(np.float32)),
              mx.array(rng.uniform(-0.1, 0.1, dim).astype(np.float32)),
              mx.array((rng.standard_normal((dim, hidden)) / math.sqrt(dim)).astype(np.float32)),
              mx.array(rng.uniform(-0.1, 0.1, hidden).astype(np.float32)),
              mx.array((rng.standard_normal((hidden, dim)) / math.sqrt(hidden)).astype(np.float32)),
              mx.array(rng.uniform(-0.1, 0.1, dim).astype(np.float32))]
    x = mx.array(rng.standard_normal(shape).astype(np.float32))
    vg = mx.value_and_grad(_block_loss)
    want_loss, want_grads = vg(params, x)
    cvg = mx.compile(vg)
    for _ in range(2):  # the trace, then a cache hit
        loss, grads = cvg(params, x)
        assert close(loss, want_loss, 1e-5)
        for got, want in zip(grads, want_grads):
            assert close(got, want, 1e-4)


def test_compiled_gelu_value_and_grad_matches_eager():
    x = mx.random.normal((37, 1029))

    def loss(v):
        return mx.sum(v * (1 + mx.erf(v / math.sqrt(2))) / 2 * mx.cos(v))

    want_value, want_grad = mx.value_and_grad(loss)(x)
    value, grad = mx.compile(mx.value_and_grad(loss))(x)
    assert close(value, want_value, 1e-4)
    assert close(grad, want_grad, 1e-5)
