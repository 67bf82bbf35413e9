"""Optimizers' first steps against hand-computed values, schedules, clipping,
MultiOptimizer, state handling, the seed's training loops, and a leak test."""

import gc
import math

import numpy as np
import pytest

from _nn_backend import mx, nn, optim

W = np.array([1.0, -2.0, 0.5], dtype=np.float64)
G = np.array([0.5, 1.0, -0.25], dtype=np.float64)


def steps(opt, n=1, w=W, g=G):
    """Run n updates of {'w': w} with constant gradient g; return the new w (float64)."""
    model = {"w": mx.array(w.astype(np.float32))}
    grads = {"w": mx.array(g.astype(np.float32))}
    for _ in range(n):
        model = opt.apply_gradients(grads, model)
        mx.eval(model, opt.state)
    return np.array(model["w"]).astype(np.float64)


def check(got, expected, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


def test_sgd_variants():
    check(steps(optim.SGD(0.1)), W - 0.1 * G)
    check(steps(optim.SGD(0.1, momentum=0.9), 2), W - 0.1 * G - 0.1 * 1.9 * G)
    check(steps(optim.SGD(0.1, momentum=0.9, dampening=0.5), 2), W - 0.1 * 0.5 * G - 0.1 * 0.95 * G)
    check(steps(optim.SGD(0.1, momentum=0.9, nesterov=True)), W - 0.1 * 1.9 * G)
    check(steps(optim.SGD(0.1, weight_decay=0.1)), W - 0.1 * (G + 0.1 * W))
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero dampening."):
        optim.SGD(0.1, nesterov=True)


def test_rmsprop_adagrad_adadelta():
    check(steps(optim.RMSprop(0.01)), W - 0.01 * G / (np.sqrt(0.01 * G**2) + 1e-8))
    v1 = 0.01 * G**2
    v2 = 0.99 * v1 + 0.01 * G**2
    w1 = W - 0.01 * G / (np.sqrt(v1) + 1e-8)
    check(steps(optim.RMSprop(0.01), 2), w1 - 0.01 * G / (np.sqrt(v2) + 1e-8))
    check(steps(optim.Adagrad(0.1), 2), W - 0.1 * G / (np.abs(G) + 1e-8) - 0.1 * G / (np.sqrt(2 * G**2) + 1e-8))
    v = 0.1 * G**2
    d = np.sqrt(1e-6) / np.sqrt(v + 1e-6) * G
    check(steps(optim.AdaDelta(1.0)), W - d, rtol=1e-4)
    with pytest.raises(ValueError, match="RMSprop alpha should be >=0, -1 was provided instead"):
        optim.RMSprop(0.1, alpha=-1)
    with pytest.raises(ValueError, match="Adagrad epsilon should be >0, 0 was provided instead"):
        optim.Adagrad(0.1, eps=0)
    with pytest.raises(ValueError, match="AdaDelta rho should be >=0, -0.5 was provided instead"):
        optim.AdaDelta(0.1, rho=-0.5)


def test_adam_family():
    lr = 0.01
    m, v = 0.1 * G, 0.001 * G**2
    check(steps(optim.Adam(lr)), W - lr * m / (np.sqrt(v) + 1e-8))
    check(steps(optim.Adam(lr, bias_correction=True)), W - lr * G / (np.abs(G) + 1e-8), rtol=1e-4)
    # Two bias-corrected steps with a constant gradient move by lr * sign(g) each time.
    check(steps(optim.Adam(lr, bias_correction=True), 2), W - 2 * lr * np.sign(G), rtol=1e-4)
    decayed = W * (1 - lr * 0.1)
    check(steps(optim.AdamW(lr, weight_decay=0.1)), decayed - lr * m / (np.sqrt(v) + 1e-8))
    assert optim.AdamW(lr).bias_correction is False
    check(steps(optim.Adamax(lr)), W - lr * 0.1 * G / (np.abs(G) + 1e-8))
    with pytest.raises(ValueError, match=r"Adam beta2 should be in \[0, 1\), 1.0 was provided instead"):
        optim.Adam(lr, betas=[0.9, 1.0])
    with pytest.raises(ValueError, match="Adam epsilon should be >=0, -1 was provided instead"):
        optim.Adam(lr, eps=-1)


def test_lion():
    check(steps(optim.Lion(0.01)), W - 0.01 * np.sign(G))
    check(steps(optim.Lion(0.01, weight_decay=0.5)), W * (1 - 0.005) - 0.01 * np.sign(G))
    opt = optim.Lion(0.01)
    steps(opt)
    check(np.array(opt.state["w"]["m"]), 0.01 * G)
    with pytest.raises(ValueError, match=r"Lion beta1 should be in \[0, 1\)"):
        optim.Lion(0.01, betas=[1.5, 0.9])


def np_adafactor_first_step(w, g):
    rms = lambda t: np.sqrt(np.mean(t**2))  # noqa: E731
    lr = max(1e-3, rms(w)) * 1e-2
    sq = g**2 + 1e-30
    if g.ndim >= 2:
        row, col = sq.mean(-1), sq.mean(-2)
        update = (1 / np.sqrt(row / row.mean(-1, keepdims=True)))[..., None] * (1 / np.sqrt(col))[..., None, :] * g
    else:
        update = g / np.sqrt(sq)
    update = update / max(1.0, rms(update))
    return w - lr * update


def test_adafactor_first_step_vector_and_matrix():
    check(steps(optim.Adafactor()), np_adafactor_first_step(W, G), rtol=1e-4)
    w2 = np.arange(6, dtype=np.float64).reshape(2, 3) / 5 - 0.3
    g2 = np.array([[0.1, -0.4, 0.3], [0.2, 0.5, -0.6]])
    check(steps(optim.Adafactor(), w=w2, g=g2), np_adafactor_first_step(w2, g2), rtol=1e-4)
    opt = optim.Adafactor(learning_rate=0.1, relative_step=False, scale_parameter=False, beta_1=0.9)
    steps(opt, w=w2, g=g2)
    assert set(opt.state["w"].keys()) == {"exp_avg_sq_row", "exp_avg_sq_col", "exp_avg"}


def np_newton_schulz(x, n=5):
    a, b, c = 3.4445, -4.7750, 2.0315
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    x = x / (np.linalg.norm(x) + 1e-7)
    for _ in range(n):
        A = x @ x.T
        x = a * x + (b * A + c * A @ A) @ x
    return x.T if tall else x


def test_muon():
    g = G + 0.01 * W  # weight decay 0.01 enters the gradient
    update = 0.05 * g * (1 - 0.95) / 0.05 + 0.95 * 0.05 * g  # nesterov: g(1-m) + m v, v = (1-m) g
    check(steps(optim.Muon(0.1)), W - 0.1 * update, rtol=1e-4)
    w2 = np.array([[0.5, -1.0, 0.2], [0.3, 0.8, -0.4], [1.0, 0.1, 0.0], [0.2, 0.2, 0.6]])
    g2 = np.array([[0.1, -0.4, 0.3], [0.2, 0.5, -0.6], [0.3, 0.1, 0.1], [-0.2, 0.0, 0.4]])
    gd = g2 + 0.01 * w2
    upd = np_newton_schulz(gd * 0.05 + 0.95 * 0.05 * gd)
    check(steps(optim.Muon(0.1), w=w2, g=g2), w2 - 0.1 * math.sqrt(4 / 3) * upd, rtol=1e-3, atol=1e-4)


def test_state_layout_init_and_learning_rate():
    opt = optim.Adam(learning_rate=1e-2)
    params = {"a": mx.zeros((2,)), "b": [mx.zeros((3,)), {"c": mx.zeros((1,))}]}
    opt.init(params)
    assert set(opt.state.keys()) == {"step", "learning_rate", "a", "b"}
    assert set(opt.state["b"][1]["c"].keys()) == {"m", "v"}
    assert opt.state["step"].dtype == mx.uint64 and opt.state["step"].item() == 0
    # init keeps existing state.
    opt.state["a"]["m"] = mx.ones((2,))
    opt.init(params)
    np.testing.assert_array_equal(np.array(opt.state["a"]["m"]), [1, 1])
    opt.learning_rate = 0.5
    assert opt.learning_rate.item() == 0.5
    opt.apply_gradients({"a": mx.ones((2,))}, params)
    assert opt.step.item() == 1


def test_schedules():
    s = mx.array(3)
    assert math.isclose(optim.exponential_decay(0.1, 0.9)(s).item(), 0.1 * 0.9**3, rel_tol=1e-6)
    assert math.isclose(optim.step_decay(0.1, 0.9, 2)(mx.array(5)).item(), 0.1 * 0.81, rel_tol=1e-6)
    cos = optim.cosine_decay(0.1, 10)
    assert math.isclose(cos(mx.array(5)).item(), 0.05, rel_tol=1e-5)
    assert abs(cos(mx.array(20)).item()) < 1e-7
    assert math.isclose(optim.cosine_decay(0.1, 10, end=0.02)(mx.array(10)).item(), 0.02, rel_tol=1e-5)
    lin = optim.linear_schedule(0.0, 1.0, 10)
    assert math.isclose(lin(mx.array(5)).item(), 0.5, rel_tol=1e-6) and lin(mx.array(20)).item() == 1.0
    warm = optim.join_schedules([optim.linear_schedule(0.0, 0.1, 10), optim.cosine_decay(0.1, 100)], [10])
    assert math.isclose(warm(mx.array(5)).item(), 0.05, rel_tol=1e-5)
    assert math.isclose(warm(mx.array(10)).item(), 0.1, rel_tol=1e-5)
    assert math.isclose(warm(mx.array(60)).item(), 0.05, rel_tol=1e-4)
    for make, msg in [
        (lambda: optim.step_decay(0.1, 0.9, 0), "step_size must be greater than 0, but got 0."),
        (lambda: optim.cosine_decay(0.1, 0), "decay_steps must be greater than 0, but got 0."),
        (lambda: optim.linear_schedule(0, 1, 0), "steps must be greater than 0, but got 0."),
        (lambda: optim.join_schedules([], []), "Must provide at least 1 schedule to join."),
        (lambda: optim.join_schedules([lin], [1]), "Received 1 boundaries but expected 0."),
    ]:
        with pytest.raises(ValueError, match=msg):
            make()


def test_scheduled_learning_rate_in_optimizer():
    opt = optim.SGD(learning_rate=optim.exponential_decay(1.0, 0.5))
    assert opt.learning_rate.item() == 1.0
    w = steps(opt, 3)
    # Steps use lr 1, 0.5, 0.25 (the schedule reads the step count before it increments).
    check(w, W - 1.75 * G)
    assert math.isclose(opt.learning_rate.item(), 0.25)


def test_clip_grad_norm():
    grads = {"a": mx.array([3.0, 0.0]), "b": [mx.array([[4.0]])]}
    clipped, norm = optim.clip_grad_norm(grads, max_norm=1.0)
    assert math.isclose(norm.item(), 5.0, rel_tol=1e-6)
    check(np.array(clipped["a"]), [0.6, 0.0], rtol=1e-5)
    check(np.array(clipped["b"][0]), [[0.8]], rtol=1e-5)
    same, norm = optim.clip_grad_norm(grads, max_norm=10.0)
    check(np.array(same["a"]), [3.0, 0.0])
    with pytest.raises(ValueError, match="max_norm should be >=0, -1 was provided instead"):
        optim.clip_grad_norm(grads, -1)


def test_multi_optimizer():
    opt = optim.MultiOptimizer([optim.SGD(0.1), optim.SGD(1.0)], [lambda name, g: "bias" in name])
    params = {"weight": mx.array([1.0]), "bias": mx.array([1.0])}
    grads = {"weight": mx.array([1.0]), "bias": mx.array([1.0])}
    new = opt.apply_gradients(grads, params)
    assert math.isclose(new["bias"].item(), 0.9, rel_tol=1e-6)
    assert math.isclose(new["weight"].item(), 0.0, abs_tol=1e-7)
    assert len(opt.state["states"]) == 2
    opt.learning_rate = 0.2
    assert opt.optimizers[1].learning_rate.item() == pytest.approx(0.2)
    with pytest.raises(ValueError, match="Given 0 filters but 1 needed."):
        optim.MultiOptimizer([optim.SGD(0.1), optim.SGD(0.1)])
    with pytest.raises(ValueError, match="Invalid state provided"):
        opt.state = {"states": []}


def test_update_model_and_seed_training_loop():
    mx.random.seed(0)
    x = mx.random.uniform(shape=(64, 2))
    y = (x.sum(axis=1) > 1.0).astype(mx.int32)
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = optim.AdamW(learning_rate=1e-2)

    def loss_fn(model, x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    loss_and_grad_fn = nn.value_and_grad(model, loss_fn)
    losses = []
    for _ in range(150):
        loss, grads = loss_and_grad_fn(model, x, y)
        optimizer.update(model, grads)
        mx.eval(model.parameters(), optimizer.state)
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    accuracy = (mx.argmax(model(x), axis=1) == y).astype(mx.float32).mean().item()
    assert accuracy > 0.9


def test_seed_7_4_training_step_uncompiled():
    x = mx.random.uniform(shape=(4, 10))
    y = mx.array([0, 1, 0, 1])
    model = nn.Linear(10, 1)
    optimizer = optim.SGD(learning_rate=0.1, momentum=0.8)

    def loss_fn(model, x, y):
        logits = model(x).squeeze()
        return nn.losses.binary_cross_entropy(logits, y)

    state = [model.state, optimizer.state]

    def step(x, y):
        loss_and_grad_fn = nn.value_and_grad(model, loss_fn)
        loss, grads = loss_and_grad_fn(model, x, y)
        optimizer.update(model, grads)
        return loss

    losses = []
    for it in range(10):
        loss = step(x, y)
        mx.eval(state)
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert state[0] is model and state[1] is optimizer.state


def test_training_keeps_active_memory_flat():
    """500 steps of nn.value_and_grad + Adam: active memory must not grow."""
    mx.random.seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
    optimizer = optim.Adam(learning_rate=1e-3)
    x = mx.random.normal((16, 8))
    y = mx.array(np.arange(16) % 4)
    loss_and_grad = nn.value_and_grad(model, lambda m, a, b: nn.losses.cross_entropy(m(a), b, reduction="mean"))

    def train_step():
        loss, grads = loss_and_grad(model, x, y)
        optimizer.update(model, grads)
        mx.eval(model.parameters(), optimizer.state, loss)

    for _ in range(10):
        train_step()
    gc.collect()
    mx.synchronize()
    baseline = mx.get_active_memory()
    for i in range(500):
        train_step()
        if i % 100 == 99:
            gc.collect()
            mx.synchronize()
            assert mx.get_active_memory() <= baseline + 4096, (i, mx.get_active_memory(), baseline)


def test_compiled_training_step_keeps_active_memory_flat():
    """500 steps of a step compiled over [model.state, optimizer.state] (the main job's form):
    clipping, AdamW and a schedule inside the compiled function; active memory stays flat."""
    from functools import partial

    mx.random.seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    schedule = optim.join_schedules([optim.linear_schedule(0.0, 1e-2, 10), optim.cosine_decay(1e-2, 500)], [10])
    optimizer = optim.AdamW(learning_rate=schedule)
    optimizer.init(model.trainable_parameters())
    x = mx.random.normal((16, 8))
    y = mx.array(np.arange(16) % 4)
    loss_and_grad = nn.value_and_grad(model, lambda m, a, b: nn.losses.cross_entropy(m(a), b, reduction="mean"))
    state = [model.state, optimizer.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def train_step(a, b):
        loss, grads = loss_and_grad(model, a, b)
        grads, norm = optim.clip_grad_norm(grads, 1.0)
        optimizer.update(model, grads)
        return loss, norm

    def run():
        loss, norm = train_step(x, y)
        mx.eval(loss, norm, model.state, optimizer.state)
        return loss.item()

    first = [run() for _ in range(10)][0]
    gc.collect()
    mx.synchronize()
    baseline = mx.get_active_memory()
    for i in range(500):
        last = run()
        if i % 100 == 99:
            gc.collect()
            mx.synchronize()
            assert mx.get_active_memory() <= baseline + 4096, (i, mx.get_active_memory(), baseline)
    assert last < 0.5 * first
    assert optimizer.state["step"].item() == 510


def _adam_runs(make_opt, shapes, dtype, n=3):
    """Parameters and state after n steps of make_opt() on a tree of `shapes`,
    with gradients that change every step (numpy arrays, for comparing)."""
    rng = np.random.default_rng(7)
    params = {f"p{i}": mx.array(rng.normal(size=s).astype(np.float32)).astype(dtype)
              for i, s in enumerate(shapes)}
    grads = [{k: mx.array(rng.normal(size=v.shape).astype(np.float32)).astype(dtype)
              for k, v in params.items()} for _ in range(n)]
    opt = make_opt()
    for g in grads:
        params = opt.apply_gradients(g, params)
        mx.eval(params, opt.state)
    def as_np(a):
        return np.array(a.astype(mx.float32))
    state = {k: {m: as_np(a) for m, a in v.items()} for k, v in opt.state.items() if k.startswith("p")}
    return {k: as_np(v) for k, v in params.items()}, state


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize(
    "make_opt",
    [
        lambda: optim.Adam(1e-2),
        lambda: optim.Adam(1e-2, betas=[0.8, 0.99], eps=1e-6, bias_correction=True),
        lambda: optim.AdamW(optim.exponential_decay(1e-2, 0.5), weight_decay=0.05),
        lambda: optim.AdamW(1e-2, weight_decay=0.0, bias_correction=True),
        lambda: optim.SGD(0.1),
        lambda: optim.SGD(optim.step_decay(0.1, 0.5, 1), momentum=0.9, weight_decay=0.01),
        lambda: optim.SGD(0.1, momentum=0.8, dampening=0.3),
        lambda: optim.SGD(0.1, momentum=0.9, nesterov=True),
        lambda: optim.RMSprop(1e-2, alpha=0.9),
        lambda: optim.Lion(1e-3),
        lambda: optim.Lion(1e-3, betas=[0.8, 0.95], weight_decay=0.1),
    ],
    ids=["adam", "adam-corrected", "adamw-scheduled", "adamw-corrected", "sgd",
         "sgd-momentum-decay", "sgd-dampening", "sgd-nesterov", "rmsprop", "lion", "lion-decay"],
)
def test_fused_step_same_bits_with_and_without_compile(make_opt, dtype):
    # Loom runs Adam's (SGD's, RMSprop's, Lion's) per-parameter update as one
    # compiled (fused) function;
    # it must give exactly what the op-by-op update gives, for every rank and
    # shape (one shapeless trace serves them all), with a schedule changing
    # the learning rate between steps.
    shapes = [(5,), (3, 7), (2, 3, 4), (1,), (64, 33), ()]
    dt = getattr(mx, dtype)
    fused = _adam_runs(make_opt, shapes, dt)
    mx.disable_compile()
    try:
        plain = _adam_runs(make_opt, shapes, dt)
    finally:
        mx.enable_compile()
    for k in fused[0]:
        np.testing.assert_array_equal(fused[0][k], plain[0][k], err_msg=k)
        assert fused[1][k].keys() == plain[1][k].keys()
        for m in fused[1][k]:
            np.testing.assert_array_equal(fused[1][k][m], plain[1][k][m], err_msg=f"{k}.{m}")


def test_adam_step_inside_compiled_step_and_grad():
    # The fused update nested in a user's compiled step (state captured) and
    # differentiated through (a meta-gradient of the updated parameter).
    from functools import partial

    w0 = np.array([[0.5, -1.0], [0.25, 2.0]], np.float32)
    g0 = np.array([[0.1, -0.3], [0.2, 0.05]], np.float32)
    results = []
    for compiled in (True, False):
        opt = optim.Adam(1e-1)
        params = {"w": mx.array(w0)}
        opt.init(params)
        state = [opt.state]

        def step(p, g):
            return opt.apply_gradients(g, p)

        run = partial(mx.compile, inputs=state, outputs=state)(step) if compiled else step
        for _ in range(3):
            params = run(params, {"w": mx.array(g0)})
            mx.eval(params, opt.state)
        results.append((np.array(params["w"]), np.array(opt.state["w"]["m"]), opt.step.item()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
    assert results[0][2] == results[1][2] == 3

    # Differentiated through (the parameter's new value as a function of the
    # old one): the same gradient compiled or not, and d sum(w'^2)/dw = 2 w'.
    def after_step(w):
        opt = optim.Adam(1e-1)
        new = opt.apply_gradients({"w": mx.array(g0)}, {"w": w})["w"]
        return (new * new).sum(), new

    grad_fn = mx.value_and_grad(after_step)
    (_, new), grad = grad_fn(mx.array(w0))
    mx.disable_compile()
    try:
        (_, new_plain), grad_plain = grad_fn(mx.array(w0))
    finally:
        mx.enable_compile()
    np.testing.assert_array_equal(np.array(grad), np.array(grad_plain))
    np.testing.assert_array_equal(np.array(new), np.array(new_plain))
    np.testing.assert_allclose(np.array(grad), 2 * np.array(new), rtol=1e-5)
