"""Loom's additions to compile, beyond MLX: the seed 003 leak fixed, an
inspectable and bounded cache, the recompile-churn warning, compile modes from
Python, and the equivalence check. All Loom-only."""

import gc
import os
import subprocess
import sys
import warnings
from functools import partial

import numpy as np
import pytest

from _backend import mx

pytestmark = pytest.mark.loom_only


def _settle():
    gc.collect()
    mx.synchronize()


def _info(fun_name):
    return [f for f in mx.compile_cache_info() if f["function"].endswith(fun_name)]


def test_seed_003_repro_returns_to_baseline():
    # The report's exact reproduction, 200 build/drop cycles: 0 bytes retained.
    BLOCKS, DIM, BATCH = 24, 512, 8
    x0 = mx.random.normal((BATCH, DIM))
    mx.eval(x0)

    def make_forward(weights):
        def forward(x):
            for w in weights:
                h = x @ w
                a, b = mx.split(h, 2, axis=-1)
                x = mx.concatenate([b, a], axis=-1)
            return x

        return forward

    retained = []
    for cycle in range(200):
        mx.synchronize()
        base = mx.get_active_memory()
        weights = [mx.random.normal((DIM, DIM)) for _ in range(BLOCKS)]
        fwd = make_forward(weights)
        mx.eval(weights)
        fn = mx.compile(fwd)
        out = fn(x0)
        mx.eval(out)
        del out
        del fn, fwd, weights
        gc.collect()
        mx.synchronize()
        retained.append(mx.get_active_memory() - base)
    assert max(retained) == 0, retained[:10]


def test_concatenate_split_chains_match_eager():
    def f(x):
        for _ in range(5):
            a, b, c = mx.split(x, 3, axis=1)
            x = mx.concatenate([c * 2, a - 1, mx.exp(b)], axis=1)
        return x

    x = mx.random.normal((4, 9)) * 0.1
    np.testing.assert_allclose(np.array(mx.compile(f)(x)), np.array(f(x)), rtol=1e-5)


def test_cache_info_and_clear():
    def cached_fn(x, k):
        return x * k

    f = mx.compile(cached_fn)
    x = mx.array([1.0, 2.0])
    f(x, 1)
    f(x, 1)
    f(x, 2)
    (info,) = _info("cached_fn")
    assert info["entries"] == 2 and info["hits"] == 1 and info["misses"] == 2
    assert any("argument 1 (int)" in r for r in info["retrace_reasons"])
    mx.clear_compile_cache()
    (info,) = _info("cached_fn")
    assert info["entries"] == 0
    assert f(x, 3).tolist() == [3.0, 6.0]


def test_entries_erased_when_compiled_function_dies():
    def dying_fn(x):
        return x + 1

    f = mx.compile(dying_fn)
    f(mx.array(1.0))
    assert _info("dying_fn")[0]["entries"] == 1
    del f
    gc.collect()
    assert not _info("dying_fn")


def test_lru_cap_bounds_entries_and_memory():
    old = mx.get_compile_cache_max_entries()
    mx.set_compile_cache_max_entries(16)
    try:
        w = mx.random.normal((256, 256))
        mx.eval(w)

        def capped_fn(x, c):
            return (x @ w) * c

        f = mx.compile(capped_fn)
        x = mx.random.normal((4, 256))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _settle()
            for c in range(1000):
                mx.eval(f(x, c))
        _settle()
        (info,) = _info("capped_fn")
        assert info["entries"] <= 16
        assert info["misses"] == 1000
        base = mx.get_active_memory()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for c in range(1000, 1200):
                mx.eval(f(x, c))
        _settle()
        assert mx.get_active_memory() <= base
    finally:
        mx.set_compile_cache_max_entries(old)


def test_churn_warning_names_argument():
    def churning_fn(x, position):
        return x + position

    f = mx.compile(churning_fn)
    x = mx.array(1.0)
    with pytest.warns(UserWarning, match=r"argument 1 \(int\) changed") as record:
        for position in range(12):
            f(x, position)
    assert sum("retraced" in str(w.message) for w in record) == 1


def test_churn_warning_for_shapes():
    f = mx.compile(lambda x: x * 2)
    with pytest.warns(UserWarning, match=r"shape of array input 0"):
        for n in range(1, 12):
            f(mx.zeros((n,)))


def test_set_compile_mode_bisects():
    def f(x):
        return mx.exp(x) * 2 + mx.exp(x)

    x = mx.array([0.5, 1.5])
    want = np.exp(np.array([0.5, 1.5])) * 3
    try:
        for mode in ["no_fuse", "no_simplify", "disabled", "enabled"]:
            mx.set_compile_mode(mode)
            assert mx.get_compile_mode() == mode
            np.testing.assert_allclose(np.array(mx.compile(f)(x)), want, rtol=1e-6)
        with pytest.raises(ValueError, match=r"\[set_compile_mode\]"):
            mx.set_compile_mode("fast")
    finally:
        mx.set_compile_mode("enabled")


@pytest.mark.parametrize("mode", ["no_fuse", "no_simplify", "enabled"])
def test_shapeless_scalar_broadcasts_in_every_mode(mode):
    # Unfused nodes and fused regions alike follow the new shape when a
    # scalar was broadcast to the traced one (`0.9 * m`, `lr * m`).
    def step(g, m, lr):
        m = 0.9 * m + 0.1 * g
        return m - lr * m / (mx.sqrt(mx.abs(m)) + 1e-8), m

    try:
        mx.set_compile_mode(mode)
        compiled = mx.compile(step, shapeless=True)
        for shape in [(64, 64), (20, 64), (3, 100)]:
            g = mx.random.normal(shape[::-1]).T
            m, lr = mx.random.normal(shape), mx.array(0.25)
            got, want = compiled(g, m, lr), step(g, m, lr)
            for a, b in zip(got, want):
                assert a.shape == shape
                np.testing.assert_array_equal(np.array(a), np.array(b))
    finally:
        mx.set_compile_mode("enabled")


@pytest.mark.parametrize("size", [7, 1000, 5000, 3 * 1024 * 1024 + 5])
def test_fused_outputs_take_over_dying_inputs(size):
    # A region's output may take the buffer of an input that dies with the
    # node; every op must still read that input's old values (here `a` is
    # read by the last op, after `y`, which may reuse a's buffer, is made).
    def f(a, b, c):
        y = a * 2 + c
        z = (a + b) * y - a
        return y, z, b * c

    compiled = mx.compile(f)
    rng = np.random.default_rng(5)
    a_np, b_np, c_np = (rng.normal(size=size).astype(np.float32) for _ in range(3))
    want = [np.array(w) for w in f(mx.array(a_np), mx.array(b_np), mx.array(c_np))]
    for _ in range(3):
        # Temporaries nobody else holds: donatable when the node runs.
        got = compiled(mx.array(a_np) + 0, mx.array(b_np) * 1, mx.array(c_np) - 0)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.array(g), w)
    # An input passed twice is read by both slots, never overwritten early.
    got = mx.compile(lambda a, b: (a * 3, a + b))(*(2 * [mx.array(a_np) + 0]))
    np.testing.assert_array_equal(np.array(got[0]), a_np * 3)
    np.testing.assert_array_equal(np.array(got[1]), a_np + a_np)


def test_check_mode_checks_each_entry_once():
    state = [mx.array(1.0)]

    def frozen(x):
        return x + state[0]

    f = mx.compile(frozen, check=True)
    assert f(mx.array(1.0)).item() == 2.0
    state[0] = mx.array(5.0)
    # a new entry (new shape) is checked on its first call: it traces with
    # the new value, so it agrees...
    assert f(mx.array([1.0])).tolist() == [6.0]


def test_check_mode_reports_difference():
    calls = []

    def impure(x):
        calls.append(1)
        # differs between the traced run and the eager run beside it
        return x * len(calls)

    f = mx.compile(impure, check=True)
    with pytest.raises(RuntimeError, match=r"\[compile\] check: output 0"):
        f(mx.array([1.0, 2.0]))


def _run(code, **env):
    full = dict(os.environ, **env)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


COUNT_TRACES = """
import loom.core as mx
n = []
f = mx.compile(lambda x: (n.append(1), x + 1)[1])
{pre}
f(mx.array(1.0)); f(mx.array(1.0))
print(len(n))
"""


@pytest.mark.parametrize("var", ["MLX_DISABLE_COMPILE", "LOOM_DISABLE_COMPILE"])
def test_env_disables_and_enable_compile_overrides(var):
    assert _run(COUNT_TRACES.format(pre=""), **{var: "1"}) == "2"
    assert _run(COUNT_TRACES.format(pre="mx.enable_compile()"), **{var: "1"}) == "1"
    assert _run(COUNT_TRACES.format(pre=""), **{var: "0"}) == "1"


def test_fused_output_prints_like_any_array():
    f = mx.compile(lambda x: mx.tanh(x) * 2 + 1)
    assert repr(f(mx.array([0.0]))) == "array([1], dtype=float32)"


def test_shapeless_masked_mean_is_right_at_every_length():
    def masked_mean(x, mask):
        return mx.sum(x * mask, axis=1) / x.shape[1]

    f = mx.compile(masked_mean, shapeless=True)
    with pytest.warns(UserWarning, match=r"shapeless=True\) read the shape"):
        f(mx.ones((2, 4, 3)), mx.ones((2, 4, 3)))
    for length in (8, 16):
        x = mx.random.normal((2, length, 3))
        mask = mx.ones((2, length, 3))
        np.testing.assert_allclose(
            np.array(f(x, mask)), np.array(masked_mean(x, mask)), rtol=1e-5, atol=1e-6
        )


def test_shapeless_without_shape_reads_stays_shapeless():
    n = []

    def f(x):
        n.append(1)
        return x.flatten(0, 1) * 2

    cf = mx.compile(f, shapeless=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cf(mx.ones((2, 3, 4)))
        cf(mx.ones((5, 5, 3)))
    assert len(n) == 1


def test_frozen_capture_warns_once():
    state = [mx.array(1.0)]

    def reads_state(x):
        return x + state[0]

    f = mx.compile(reads_state)
    assert f(mx.array(1.0)).item() == 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(mx.array(1.0))  # nothing replaced yet: silent
    state[0] = mx.array(5.0)
    with pytest.warns(UserWarning, match=r"captured the array at 'state\[0\]'") as record:
        assert f(mx.array(1.0)).item() == 2.0  # MLX's documented (frozen) value
        f(mx.array(1.0))
    assert len(record) == 1


def test_inputs_capture_does_not_warn():
    state = [mx.array(1.0)]

    @partial(mx.compile, inputs=state)
    def fun(x):
        return x + state[0]

    fun(mx.array(1.0))
    state[0] = mx.array(5.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fun(mx.array(1.0)).item() == 6.0


def test_compiled_function_in_a_reference_cycle_is_collected():
    def make():
        def cyclic_fn(x):
            return x + 1 if compiled is None else x * 2

        compiled = mx.compile(cyclic_fn)  # cyclic_fn's closure holds `compiled`
        return compiled

    f = make()
    f(mx.array(1.0))
    assert _info("cyclic_fn")
    del f
    gc.collect()
    assert not _info("cyclic_fn")


def test_random_without_captured_state_warns():
    def sampler(x):
        return x + mx.random.uniform(shape=(3,))

    f = mx.compile(sampler)
    with pytest.warns(UserWarning, match=r"without capturing mx.random.state"):
        a = f(mx.zeros((3,)))
    b = f(mx.zeros((3,)))
    # MLX's behaviour, now announced: the same numbers on every call
    assert np.array_equal(np.array(a), np.array(b))


def test_compiled_dropout_training_advances_random_state():
    # §7.4's note: with mx.random.state captured, dropout masks differ per step.
    from _nn_backend import nn

    mx.random.seed(0)
    drop = nn.Dropout(0.5)
    state = [mx.random.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def apply(x):
        return drop(x)

    x = mx.ones((64,))
    masks = [np.array(apply(x)) for _ in range(3)]
    assert not np.array_equal(masks[0], masks[1])
    assert not np.array_equal(masks[1], masks[2])


@pytest.mark.parametrize("shape", [(5,), (1000, 1031), (3, 1024, 1025)])
def test_fused_float32_chain_is_bitwise_eager(shape):
    # The fused float32 loop runs the op table's own functors, the ones the
    # eager kernels run: the same bits, also with outputs large enough to be
    # streamed to memory and sizes that leave partial chunks.
    x = mx.random.normal(shape)
    y = mx.random.normal(shape[-1:])

    def f(x, y):
        g = x * (1 + mx.erf(x / 1.4142135)) / 2
        h = mx.log(mx.abs(g) + 1) * mx.sigmoid(y) - mx.tanh(x) / (2 + mx.exp(-mx.abs(y)))
        return h, g, mx.maximum(h, y) - mx.sqrt(mx.square(x) + 0.5)

    want = f(x, y)
    got = mx.compile(f)(x, y)
    for w, g in zip(want, got):
        assert np.array_equal(np.array(g), np.array(w))


# Divisors a fused float32 loop may turn into a multiplication (normal powers
# of two) and ones it must not (a subnormal power whose reciprocal overflows,
# the largest power, non-powers, zero, infinities, NaN).
DIVISORS = [2.0, 0.5, -4.0, 2.0**-126, 2.0**127, 2.0**-149, 2.0**-130, 3.0, 1.4142135, 0.0,
            -0.0, float("inf"), float("nan")]


@pytest.mark.parametrize("divisor", DIVISORS)
def test_fused_division_by_scalar_is_bitwise_eager(divisor):
    # Quotients that are subnormal, overflow, or divide specials: the same
    # bits as the eager division whichever loop the fused region runs.
    tiny = np.float32(2.0**-149)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -tiny, 3.4e38, -3.4e38,
                        1.1754944e-38, 1e-30, 7.0], np.float32)
    rng = np.random.default_rng(3)
    x = np.concatenate([special, rng.standard_normal(5000).astype(np.float32)
                        * np.exp2(rng.integers(-140, 127, 5000)).astype(np.float32)])
    a = mx.array(x)

    def f(v):
        return (v * 1.0) / divisor + 0.0

    want = np.array(f(a)).view(np.uint32)
    got = np.array(mx.compile(f)(a)).view(np.uint32)
    np.testing.assert_array_equal(got, want)


def test_fused_erf_pieces_mixing_ranges_are_bitwise_eager():
    # erf's block runs only the small-argument polynomial on pieces whose
    # values all lie below its split: pieces entirely below, entirely above,
    # mixed, with NaN or infinities, and a partial last piece.
    split = np.float32(0.921875)
    below = np.nextafter(split, np.float32(0))
    pieces = [np.full(256, below, np.float32), np.full(256, split, np.float32),
              np.linspace(-0.9, 0.9, 256, dtype=np.float32),
              np.linspace(-5, 5, 256, dtype=np.float32),
              np.array([0.1] * 255 + [np.nan], np.float32),
              np.array([0.1] * 128 + [-np.inf] + [0.2] * 127, np.float32),
              np.array([-0.0, 0.0, 1e-45, -1e-45] * 10, np.float32)]
    x = mx.array(np.concatenate(pieces))

    def f(v):
        return mx.erf(v * 1.0) + 0.0

    want = np.array(f(x))
    got = np.array(mx.compile(f)(x))
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("shape", [(5, 3), (64, 1031), (4, 256, 2048)])
def test_fused_gelu_backward_is_bitwise_eager(shape):
    # The backward region recomputes gelu's x / sqrt(2) from x and reads
    # 1 + erf(.), which the forward region writes (erf is costly): the eager bits,
    # forward and backward, with outputs small, partial-chunk and large
    # (streamed stores: test_streamed_region_outputs_are_bitwise_eager).
    x = mx.random.normal(shape)
    ct = mx.random.normal(shape)

    def f(x, ct):
        a = x * 1.5 + 0.25
        return mx.vjp(lambda v: [v * (1 + mx.erf(v / 1.4142135)) / 2], [a], [ct])

    want = f(x, ct)
    got = mx.compile(f)(x, ct)
    for w, g in zip(want[0] + want[1], got[0] + got[1]):
        np.testing.assert_array_equal(np.array(g).view(np.uint32), np.array(w).view(np.uint32))


def test_fused_layer_norm_gradient_is_bitwise_eager():
    # The scale's broadcast is read by the forward product and by the
    # gradient's: each region reads the (512,) scale itself.
    x = mx.random.normal((8, 64, 512))
    g = mx.random.uniform(shape=(512,)) + 0.5

    def loss(x, g):
        mu = mx.mean(x, axis=-1, keepdims=True)
        xc = x - mu
        var = mx.mean(xc * xc, axis=-1, keepdims=True)
        return mx.sum(mx.square(xc * mx.rsqrt(var + 1e-5) * g))

    vg = mx.value_and_grad(loss, argnums=(0, 1))
    want_value, want_grads = vg(x, g)
    value, grads = mx.compile(vg)(x, g)
    assert np.array_equal(np.array(value), np.array(want_value))
    for got, want in zip(grads, want_grads):
        np.testing.assert_array_equal(np.array(got), np.array(want))


@pytest.mark.parametrize("rows,width", [(7, 300), (9, 1024), (5, 1500), (3, 2048), (4, 5000)])
def test_fused_vector_broadcast_is_bitwise_eager(rows, width):
    # A bias broadcast over rows is read in place (rows of at least a chunk,
    # chunks that cross a row's end gathered) or from one repeated copy of a
    # shorter row; a strided vector (a matrix's column) is gathered.
    x = mx.random.normal((2, rows, width))
    bias = mx.random.normal((width,))
    column = mx.random.normal((width, 3))[:, 1]

    def f(x, bias, column):
        return (x + bias) * 2 - mx.exp(column * 0.5), (x * column + 1) / bias

    want = f(x, bias, column)
    got = mx.compile(f)(x, bias, column)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(np.array(g).view(np.uint32), np.array(w).view(np.uint32))


STREAMED_REGIONS = """
import numpy as np
import loom.core as mx
x = mx.random.normal((3, 1000))
ct = mx.random.normal((3, 1000))
bias = mx.random.normal((1000,))

def f(x, ct, bias):
    a = x * 1.5 + bias
    grads = mx.vjp(lambda v: [v * (1 + mx.erf(v / 1.4142135)) / 2], [a], [ct])
    return grads[0] + grads[1] + [(a + 1) * 2]

want = f(x, ct, bias)
got = mx.compile(f)(x, ct, bias)
print(all(np.array_equal(np.array(g).view(np.uint32), np.array(w).view(np.uint32))
          for w, g in zip(want, got)))
"""


def test_streamed_region_outputs_are_bitwise_eager():
    # Outputs larger than an eighth of the last-level cache are written with
    # streaming stores; LOOM_COMPILE_STREAM_BYTES=4096 makes every output of
    # these regions (12 KB, a partial last chunk, one taking over a dying
    # input's buffer) take that path: the values are the eager bits.
    assert _run(STREAMED_REGIONS, LOOM_COMPILE_STREAM_BYTES="4096") == "True"
    assert _run(STREAMED_REGIONS) == "True"
