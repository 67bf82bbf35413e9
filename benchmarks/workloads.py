"""The workloads, written once for every implementation.

A workload's ``build(fw)`` makes its inputs with the adapter ``fw`` (see
``frameworks.py``) and returns a call without arguments; the runner times that
call followed by ``fw.sync`` of what it returns. ``build`` raises
``Pending`` when Loom lacks a feature and ``NotApplicable`` when a peer does.

This module imports only the standard library at the top, so the parent
process (which never loads a framework) can list workloads and their sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

F32 = 4
MIB = 1 << 20


@dataclass(frozen=True)
class Workload:
    name: str
    group: str
    build: Callable
    bytes: Optional[int] = None  # least bytes read + written by one call
    flops: Optional[int] = None  # floating-point operations of one call
    ops: Optional[int] = None  # framework operations of one call (dispatch rows)
    limit: Optional[str] = None  # "copy" / "gemm": this row measures the machine's limit
    always: bool = False  # run even when --filter leaves it out (limits)
    note: str = ""

    @property
    def bound(self):
        if self.bytes:
            return "memory"
        if self.flops:
            return "compute"
        return None


GROUPS = {
    "limits": "Machine limits",
    "dispatch": "Dispatch overhead",
    "memory": "Memory-bound",
    "compute": "Arithmetic-bound",
    "vmap": "vmap (seed §4.7)",
    "streams": "Streams (seed §1.4)",
    "random": "Random generation",
    "linalg": "Linear algebra (LAPACK)",
    "training": "Training",
    "fft": "FFT (issue 10)",
    "io": "Saving and loading (issue 12)",
}


def _human(n):
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def _shape(shape):
    return "×".join(str(s) for s in shape)


# --- limits -------------------------------------------------------------------
def build_copy(n):
    def build(fw):
        x = fw.rand((n,))
        if fw.family == "numpy":
            out = fw.np.empty_like(x)
            return lambda: fw.np.copyto(out, x)
        if fw.family == "torch":
            out = fw.torch.empty_like(x)
            return lambda: out.copy_(x)
        return lambda: fw.copy_op(x)

    return build


# --- dispatch -----------------------------------------------------------------
def _scalar(fw, value):
    return fw.input(fw.np.array(value, dtype=fw.np.float32))


def build_scalar_chain(length):
    def build(fw):
        x0 = _scalar(fw, 1.0)
        y = _scalar(fw, 0.5)

        def call():
            x = x0
            for _ in range(length):
                x = x + y
            return x

        return call

    return build


def build_eval_loop(iterations, eval_every_op):
    """Seed §3.1: a = a + b; eval(a); b = b * 2; eval(b)."""

    def build(fw):
        a0 = _scalar(fw, 1.0)
        b0 = _scalar(fw, 1.0)
        sync = fw.sync

        def call():
            a, b = a0, b0
            for _ in range(iterations):
                a = a + b
                if eval_every_op:
                    sync(a)
                b = b * 2
                if eval_every_op:
                    sync(b)
            return a, b

        return call

    return build


# --- memory-bound ---------------------------------------------------------------
def build_unary(n, op, dtype="float32"):
    def build(fw):
        x = fw.rand((n,), dtype)
        fn = fw.erf if op == "erf" else getattr(fw.m, op)
        return lambda: fn(x)

    return build


def build_add(n):
    def build(fw):
        a, b = fw.rand((n,)), fw.rand((n,))
        return lambda: a + b

    return build


def build_multiply_add(n):
    def build(fw):
        a, b, c = fw.rand((n,)), fw.rand((n,)), fw.rand((n,))
        return lambda: a * b + c

    return build


def gelu_of(fw):
    """Seed §6.3: x * (1 + erf(x / sqrt(2))) / 2."""
    erf = fw.erf
    root2 = math.sqrt(2)

    def gelu(x):
        return x * (1 + erf(x / root2)) / 2

    return gelu


def build_gelu(shape, compiled):
    def build(fw):
        gelu = gelu_of(fw)
        if fw.family == "numpy":
            fw.erf(None)  # raises NotApplicable: numpy has no erf
        x = fw.rand(shape)
        fn = fw.compile(gelu) if compiled else gelu
        return lambda: fn(x)

    return build


def _ten_op_chain(v):
    """A 10-op element-wise function (issue 8's compile targets)."""
    for k in range(5):
        v = v * (1.0 + k / 8) + 0.25
    return v


def build_compile_first_call(size):
    """Trace + passes + kernel preparation + run: a fresh function per call."""

    def build(fw):
        if fw.family == "numpy":
            fw.compile(None)  # raises NotApplicable: numpy has no compiler
        if fw.family == "torch":
            raise fw.unsupported("fast first compile (torch.compile takes seconds)")
        x = fw.rand((size,))

        def call():
            def fresh(v):
                return _ten_op_chain(v)

            return fw.compile(fresh)(x)

        return call

    return build


def build_compile_cache_hit(size):
    """A compiled 10-op function called again on a tiny input: the cache
    lookup and dispatch, next to the eager call of the same ops."""

    def build(fw):
        if fw.family == "numpy":
            fw.compile(None)
        x = fw.rand((size,))
        fn = fw.compile(_ten_op_chain)
        return lambda: fn(x)

    return build


def build_reduction(shape, kind, axis):
    def build(fw):
        x = fw.rand(shape)
        if kind == "sum":
            return lambda: fw.sum(x, axis=axis)
        if kind == "max":
            return lambda: fw.max(x, axis=axis)
        return lambda: fw.argmax(x, axis=axis)

    return build


def build_softmax(shape):
    def build(fw):
        x = fw.rand(shape)
        return lambda: fw.softmax(x, axis=-1)

    return build


def build_transpose_copy(shape):
    def build(fw):
        x = fw.rand(shape)
        return lambda: fw.transpose_copy(x)

    return build


def build_concatenate(shape, axis):
    def build(fw):
        a, b = fw.rand(shape), fw.rand(shape)
        return lambda: fw.concatenate([a, b], axis=axis)

    return build


# --- arithmetic-bound ------------------------------------------------------------
def build_matmul(batch, n, dtype):
    def build(fw):
        shape = (batch, n, n) if batch else (n, n)
        if fw.family == "numpy" and dtype == "bfloat16":
            raise fw.unsupported("bfloat16")
        a, b = fw.rand(shape, dtype), fw.rand(shape, dtype)
        matmul = fw.m.matmul
        return lambda: matmul(a, b)

    return build


# --- linear algebra (issue 10) ---------------------------------------------------------
def build_linalg(kind, n):
    """svd (full U and Vt) or eigh (values and vectors) of one n x n float32
    matrix, on the CPU; eigh's input is symmetric."""

    def build(fw):
        host = fw.rng.standard_normal((n, n), dtype=fw.np.float32)
        if kind == "eigh":
            host = host + host.T
        a = fw.input(host)
        if fw.family == "mlx":
            m = fw.m
            fn = getattr(m.linalg, kind)
            return lambda: fn(a, stream=m.cpu)
        if fw.family == "numpy":
            return lambda: getattr(fw.np.linalg, kind)(a)
        if fw.family == "torch":
            return lambda: getattr(fw.torch.linalg, kind)(a)
        if fw.family == "jax":
            return lambda: getattr(fw.m.linalg, kind)(a)
        raise fw.unsupported(kind)

    return build


def build_matvec(n, bits):
    """x (1, n) times w (n, n) transposed: float32, or w quantized (affine,
    group 64) through quantized_matmul (MLX's API: mlx and loom only)."""

    def build(fw):
        w, x = fw.rand((n, n)), fw.rand((1, n))
        matmul = fw.m.matmul
        if bits is None:
            wt = w.T
            return lambda: matmul(x, wt)
        if fw.family != "mlx":
            raise fw.unsupported("quantized_matmul")
        q, s, b = fw.m.quantize(w, 64, bits)
        fw.m.eval(q, s, b)
        qmm = fw.m.quantized_matmul
        return lambda: qmm(x, q, s, b, transpose=True, group_size=64, bits=bits)

    return build


# --- FFT (issue 10) ----------------------------------------------------------------
def build_fft(shape, kind):
    def build(fw):
        x = fw.randn(shape)
        fft = fw.m.fft
        if kind == "rfft":
            return lambda: fft.rfft(x)
        return lambda: fft.fft2(x)

    return build


def fft_flops(n, real):
    """The conventional count 5 n log2 n (half for a real input)."""
    return int((2.5 if real else 5.0) * n * math.log2(n))


# --- vmap (seed §4.7) --------------------------------------------------------------
def build_vmap(kind, rows, cols):
    def build(fw):
        xs = fw.rand((rows, cols))
        ys = fw.rand((cols, rows))
        if kind == "naive":
            return lambda: [xs[i] + ys[:, i] for i in range(rows)]
        if kind == "vmap":
            vmap_add = fw.vmap(lambda x, y: x + y, in_axes=(0, 1))
            return lambda: vmap_add(xs, ys)
        return lambda: xs + ys.T

    return build


# --- streams (seed §1.4) -----------------------------------------------------------
def build_streams(two_streams, exps):
    def build(fw):
        a = fw.rand((4096, 512))
        b0 = fw.rand((512, 4))
        if not two_streams:
            m = fw.m

            def one_stream():
                x = m.matmul(a, b0)
                b = b0
                for _ in range(exps):
                    b = m.exp(b)
                return x, b

            return one_stream
        if fw.family != "mlx":
            raise fw.unsupported("streams on the CPU")
        mx = fw.m
        new_stream = fw.need("new_stream")
        if fw.device == "gpu":
            d1, d2 = new_stream(mx.gpu), new_stream(mx.cpu)
        else:
            d1, d2 = new_stream(mx.cpu), new_stream(mx.cpu)

        def two():
            x = mx.matmul(a, b0, stream=d1)
            b = b0
            for _ in range(exps):
                b = mx.exp(b, stream=d2)
            return x, b

        return two

    return build


# --- random ------------------------------------------------------------------------
def build_random(n, kind):
    def build(fw):
        fn = fw.random_normal if kind == "normal" else fw.random_uniform
        return lambda: fn((n,))

    return build


# --- training ----------------------------------------------------------------------
def _mlp_params(fw, dims):
    np = fw.np
    params = []
    for fan_in, fan_out in zip(dims[:-1], dims[1:]):
        scale = 1.0 / math.sqrt(fan_in)
        w = fw.rng.uniform(-scale, scale, (fan_in, fan_out)).astype(np.float32)
        params += [fw.input(w), fw.input(np.zeros(fan_out, np.float32))]
    return params


def mlp_loss_of(fw):
    def loss(params, x, y):
        h = x
        for i in range(0, len(params), 2):
            h = h @ params[i] + params[i + 1]
            if i + 2 < len(params):
                h = fw.relu(h)
        return fw.mean(fw.m.square(h - y))

    return loss


def build_mlp_value_and_grad(batch, dims):
    def build(fw):
        params = _mlp_params(fw, dims)
        x, y = fw.randn((batch, dims[0])), fw.randn((batch, dims[-1]))
        value_and_grad = fw.value_and_grad(mlp_loss_of(fw))
        return lambda: value_and_grad(params, x, y)

    return build


def build_mlp_adam_step(batch, dims):
    def build(fw):
        x, y = fw.randn((batch, dims[0])), fw.randn((batch, dims[-1]))
        if fw.family == "mlx":
            return _mlx_adam_step(fw, dims, x, y)
        if fw.family == "torch":
            return _torch_adam_step(fw, dims, x, y)
        if fw.family == "jax":
            return _jax_adam_step(fw, dims, x, y)
        raise fw.unsupported("automatic differentiation")

    return build


def _mlx_adam_step(fw, dims, x, y):
    nn, optim, mx = fw.need("nn"), fw.need("optimizers"), fw.m
    layers = []
    for fan_in, fan_out in zip(dims[:-1], dims[1:]):
        layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    mx.eval(model.parameters())

    def loss_fn(model, x, y):
        return mx.mean(mx.square(model(x) - y))

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    optimizer = optim.Adam(learning_rate=1e-3)

    def step():
        loss, grads = loss_and_grad(model, x, y)
        optimizer.update(model, grads)
        return loss, model.parameters(), optimizer.state

    return step


def _torch_adam_step(fw, dims, x, y):
    torch = fw.torch
    layers = []
    for fan_in, fan_out in zip(dims[:-1], dims[1:]):
        layers += [torch.nn.Linear(fan_in, fan_out), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1]).to(fw.dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = torch.mean(torch.square(model(x) - y))
        loss.backward()
        optimizer.step()
        return loss

    return step


def _jax_adam_step(fw, dims, x, y):
    jax, jnp = fw.jax, fw.m
    value_and_grad = jax.value_and_grad(mlp_loss_of(fw))
    tree_map = jax.tree_util.tree_map
    params = _mlp_params(fw, dims)
    state = {"params": params, "m": tree_map(jnp.zeros_like, params),
             "v": tree_map(jnp.zeros_like, params), "t": 0}
    lr, beta1, beta2, eps = 1e-3, 0.9, 0.999, 1e-8

    def step():
        loss, grads = value_and_grad(state["params"], x, y)
        state["t"] += 1
        t = state["t"]
        m = tree_map(lambda m, g: beta1 * m + (1 - beta1) * g, state["m"], grads)
        v = tree_map(lambda v, g: beta2 * v + (1 - beta2) * g * g, state["v"], grads)
        c1, c2 = 1 - beta1**t, 1 - beta2**t
        state["params"] = tree_map(
            lambda p, m, v: p - lr * (m / c1) / (jnp.sqrt(v / c2) + eps), state["params"], m, v)
        state["m"], state["v"] = m, v
        return loss, state["params"], m, v

    return step


def transformer_block_of(fw, heads):
    """A pre-norm block: attention then an erf-GELU MLP, from core ops only."""
    reshape = fw.m.reshape
    gelu = gelu_of(fw)

    def layer_norm(x, g, b):
        mu = fw.mean(x, axis=-1, keepdims=True)
        xc = x - mu
        var = fw.mean(xc * xc, axis=-1, keepdims=True)
        return xc * fw.rsqrt(var + 1e-5) * g + b

    def block(params, x):
        g1, b1, wq, wk, wv, wo, g2, b2, w1, c1, w2, c2 = params
        batch, length, dim = x.shape
        head_dim = dim // heads

        def split_heads(t):
            return fw.swapaxes(reshape(t, (batch, length, heads, head_dim)), 1, 2)

        h = layer_norm(x, g1, b1)
        q, k, v = split_heads(h @ wq), split_heads(h @ wk), split_heads(h @ wv)
        scores = (q @ fw.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(head_dim))
        attn = fw.swapaxes(fw.softmax(scores, axis=-1) @ v, 1, 2)
        x = x + reshape(attn, (batch, length, dim)) @ wo
        h = layer_norm(x, g2, b2)
        return x + gelu(h @ w1 + c1) @ w2 + c2

    def loss(params, x):
        out = block(params, x)
        return fw.mean(out * out)

    return loss


def build_transformer(batch, length, dim, heads, hidden, compiled=False):
    def build(fw):
        np = fw.np

        def weight(fan_in, fan_out):
            scale = 1.0 / math.sqrt(fan_in)
            return fw.input(fw.rng.uniform(-scale, scale, (fan_in, fan_out)).astype(np.float32))

        def vec(n, value):
            return fw.input(np.full(n, value, np.float32))

        params = [vec(dim, 1.0), vec(dim, 0.0), weight(dim, dim), weight(dim, dim),
                  weight(dim, dim), weight(dim, dim), vec(dim, 1.0), vec(dim, 0.0),
                  weight(dim, hidden), vec(hidden, 0.0), weight(hidden, dim), vec(dim, 0.0)]
        x = fw.randn((batch, length, dim))
        value_and_grad = fw.value_and_grad(transformer_block_of(fw, heads))
        if compiled:
            value_and_grad = fw.compile(value_and_grad)
        return lambda: value_and_grad(params, x)

    return build


def build_attention(batch, heads, length, head_dim, fused):
    """Forward and backward of softmax(q k^T / sqrt(d)) v: the library's fused
    attention, or the same function written with core ops."""

    def build(fw):
        scale = 1.0 / math.sqrt(head_dim)
        shape = (batch, heads, length, head_dim)
        q, k, v = fw.randn(shape), fw.randn(shape), fw.randn(shape)

        def attention(q, k, v):
            if fused:
                return fw.sdpa(q, k, v, scale)
            return fw.softmax((q @ fw.swapaxes(k, -1, -2)) * scale, axis=-1) @ v

        if fused:
            attention(q, k, v)  # raises NotApplicable before any timing

        def loss(params):
            out = attention(*params)
            return fw.sum(out * out)

        value_and_grad = fw.value_and_grad(loss)
        return lambda: value_and_grad([q, k, v])

    return build


def build_gated_delta(batch, length, heads, dim, fused=True):
    """Forward and backward of the gated delta rule: mx.fast.gated_delta_update,
    or the same recurrence written step by step with core ops (mlx/loom only)."""

    def build(fw):
        if fw.family != "mlx":
            raise fw.unsupported("gated_delta_update")
        m = fw.m
        shape = (batch, length, heads, dim)
        # Keys of unit norm keep the recurrence stable (beta |k|^2 < 2).
        q, v = fw.randn(shape), fw.randn(shape)
        k = fw.randn(shape) * (1.0 / math.sqrt(dim))
        g = m.sigmoid(fw.randn((batch, length, heads)) + 3.0)
        beta = m.sigmoid(fw.randn((batch, length, heads)))
        m.eval(k, g, beta)

        def composite(q, k, v):
            state = m.zeros((batch, heads, dim, dim))
            ys = []
            for t in range(length):
                state = state * g[:, t, :, None, None]
                kt = k[:, t, :, None, :]
                delta = (v[:, t] - (state * kt).sum(-1)) * beta[:, t, :, None]
                state = state + kt * delta[..., None]
                ys.append((state * q[:, t, :, None, :]).sum(-1))
            return m.stack(ys, 1)

        def loss(params):
            if fused:
                y = m.fast.gated_delta_update(*params, g, beta)[0]
            else:
                y = composite(*params)
            return m.sum(y * y)

        value_and_grad = m.value_and_grad(loss)
        return lambda: value_and_grad([q, k, v])

    return build


def gated_delta_flops(batch, length, heads, dim):
    """About 8 d^2 per step forward (decay, S k, update, S q) and twice that back."""
    return 3 * 8 * batch * length * heads * dim * dim


def attention_flops(batch, heads, length, head_dim):
    forward = 4 * batch * heads * length * length * head_dim
    return 3 * forward  # the backward is twice the forward


def transformer_flops(batch, length, dim, heads, hidden):
    tokens = batch * length
    forward = 2 * tokens * (4 * dim * dim + 2 * dim * hidden) + 4 * batch * length * length * dim
    return 3 * forward  # backward costs about twice the forward


# --- the list ------------------------------------------------------------------------
def build_conv2d(batch, size, channels, backward):
    """conv2d 3×3, stride 1, padding 1, channels-last for Loom/MLX/JAX (NHWC,
    OHWI weights) and torch's channels_last memory format (NCHW view over NHWC
    data, which its oneDNN path prefers). With ``backward``: the gradients of
    sum(conv * g) for the input and the weight, the forward included."""

    def build(fw):
        x_host = fw.rng.standard_normal((batch, size, size, channels), dtype=fw.np.float32)
        w_host = (fw.rng.standard_normal((channels, 3, 3, channels), dtype=fw.np.float32)
                  / (3 * channels ** 0.5))
        if fw.family == "mlx":
            m = fw.m
            x, w = fw.input(x_host), fw.input(w_host)
            if not backward:
                return lambda: m.conv2d(x, w, padding=1)
            grad = m.value_and_grad(lambda a, b: m.sum(m.conv2d(a, b, padding=1)),
                                    argnums=(0, 1))
            return lambda: grad(x, w)
        if fw.family == "torch":
            torch = fw.torch
            F = torch.nn.functional
            x = fw.input(x_host).permute(0, 3, 1, 2)  # NCHW shape, NHWC memory
            w = fw.input(w_host).permute(0, 3, 1, 2).contiguous(
                memory_format=torch.channels_last)
            if not backward:
                def forward():
                    with torch.no_grad():
                        return F.conv2d(x, w, padding=1)
                return forward
            xg = x.detach().requires_grad_(True)
            wg = w.detach().requires_grad_(True)

            def step():
                xg.grad = None
                wg.grad = None
                F.conv2d(xg, wg, padding=1).sum().backward()
                return xg.grad, wg.grad
            return step
        if fw.family == "jax":
            jax = fw.jax
            x, w = fw.input(x_host), fw.input(w_host)
            dims = ("NHWC", "OHWI", "NHWC")

            def conv(a, b):
                return jax.lax.conv_general_dilated(a, b, (1, 1), ((1, 1), (1, 1)),
                                                    dimension_numbers=dims)
            if not backward:
                f = jax.jit(conv)
                return lambda: f(x, w)
            g = jax.jit(jax.grad(lambda a, b: conv(a, b).sum(), argnums=(0, 1)))
            return lambda: g(x, w)
        raise fw.unsupported("convolution")

    return build


# --- function export -------------------------------------------------------------
def build_export_roundtrip(ops, n):
    """export_function + import_function + the first call of a function of
    `ops` element-wise ops over `n` float32 values (MLX and Loom only)."""

    def build(fw):
        if fw.family != "mlx":
            raise fw.unsupported("export_function")
        export = fw.need("export_function")
        load = fw.need("import_function")
        import os
        import tempfile

        m = fw.m
        x = fw.rand((n,))
        path = os.path.join(tempfile.mkdtemp(prefix="bench_export_"), "fun.fn")

        def fun(x):
            for _ in range(ops // 2):
                x = m.sin(x) * 1.001
            return x

        def call():
            export(path, fun, x)
            return load(path)(x)[0]

        return call

    return build


# --- issue 9: scans, sorting, selection, gathers, einsum (kern9) ---------------------
def build_cumsum(n):
    def build(fw):
        x = fw.rand((n,))
        return lambda: fw.m.cumsum(x, axis=0)

    return build


def build_sort(n, indices):
    """sort / argsort of n float32; NumPy's default (unstable) argsort, the
    others' stable ones (MLX's argsort is stable)."""

    def build(fw):
        x = fw.rand((n,))
        m = fw.m
        if fw.family == "torch":
            if indices:
                return lambda: m.argsort(x, stable=True)
            return lambda: m.sort(x).values
        if indices:
            if fw.family == "jax":
                return lambda: m.argsort(x, stable=True)
            return lambda: m.argsort(x)
        return lambda: m.sort(x)

    return build


def _row_indices(fw, rows, count):
    host = fw.rng.integers(0, rows, size=count).astype(fw.np.int32)
    if fw.family == "torch":
        host = host.astype(fw.np.int64)  # index_select / index_add take int64
    return fw.input(host)


def build_take_rows(rows, cols, count):
    def build(fw):
        table, idx = fw.rand((rows, cols)), _row_indices(fw, rows, count)
        if fw.family == "torch":
            return lambda: fw.torch.index_select(table, 0, idx)
        return lambda: fw.m.take(table, idx, axis=0)

    return build


def build_add_at_rows(rows, cols, count):
    """x.at[idx].add(v) (a new array): repeated rows accumulate."""

    def build(fw):
        table, idx, v = fw.rand((rows, cols)), _row_indices(fw, rows, count), fw.rand((count, cols))
        if fw.family == "numpy":
            np = fw.np

            def call():
                out = table.copy()
                np.add.at(out, idx, v)
                return out

            return call
        if fw.family == "torch":
            return lambda: table.index_add(0, idx, v)
        return lambda: table.at[idx].add(v)

    return build


def build_topk(shape, k):
    def build(fw):
        x = fw.rand(shape)
        if fw.family == "torch":
            return lambda: fw.torch.topk(x, k, dim=-1).values
        if fw.family == "jax":
            return lambda: fw.jax.lax.top_k(x, k)[0]
        if fw.family == "numpy":
            np = fw.np
            return lambda: np.partition(x, shape[-1] - k, axis=-1)[..., -k:]
        return lambda: fw.m.topk(x, k, axis=-1)

    return build


def build_attention_scores(batch, heads, length, head_dim, einsum):
    """q k^T per head: einsum("bhqd,bhkd->bhqk") or the same batched matmul."""

    def build(fw):
        q, k = fw.rand((batch, heads, length, head_dim)), fw.rand((batch, heads, length, head_dim))
        if einsum:
            return lambda: fw.m.einsum("bhqd,bhkd->bhqk", q, k)
        kt = fw.swapaxes(k, -1, -2)
        matmul = fw.m.matmul
        return lambda: matmul(q, kt)

    return build


def build_reduce_last(shape, kind):
    def build(fw):
        x = fw.rand(shape)
        if fw.family == "torch":
            f = fw.torch.amax if kind == "max" else fw.torch.amin
            return lambda: f(x, dim=-1)
        f = getattr(fw.m, kind)
        return lambda: f(x, axis=-1)

    return build


def all_workloads(quick=False):
    """Every workload, sized for a full run or for --quick (a smoke run: the
    same workloads, smaller where a full-size call takes seconds)."""
    n = (16 if quick else 32) * MIB  # float32 values: 64/128 MiB, beyond any L3
    n_random = (4 if quick else 32) * MIB
    rows, cols = (4096, 4096) if quick else (8192, 4096)  # the same values as a matrix
    gelu_shape = (4, 1000, 4096) if quick else (32, 1000, 4096)
    gelu_values = math.prod(gelu_shape)
    square_sizes = (256, 1024) if quick else (256, 512, 1024, 2048, 4096)
    gemm_limit_size = 1024 if quick else 2048
    batched = (8, 512) if quick else (32, 512)
    half_sizes = (512,) if quick else (1024,)  # without a half kernel, 2048² takes minutes
    vmap_shape = (1024, 100) if quick else (4096, 100)  # seed §4.7: 4096 × 100
    dims, mlp_batch = ((784, 512, 512, 10), 64) if quick else ((784, 1024, 1024, 10), 256)
    tb = (1, 128, 256, 4, 1024) if quick else (4, 256, 512, 8, 2048)
    chain = 10_000
    w = []

    def add(*args, **kwargs):
        w.append(Workload(*args, **kwargs))

    # limits
    add(f"copy {_human(n)} f32", "limits", build_copy(n), bytes=2 * n * F32, limit="copy",
        always=True, note="into a preallocated buffer where the API allows; mlx/loom: a + 0")

    # dispatch overhead
    add("scalar add chain 10k, eval once", "dispatch", build_scalar_chain(chain), ops=chain)
    add("§3.1 loop 10k ops, eval every op", "dispatch", build_eval_loop(chain // 2, True), ops=chain)
    add("§3.1 loop 10k ops, eval once", "dispatch", build_eval_loop(chain // 2, False), ops=chain)

    # memory-bound
    tag = f"{_human(n)} f32"
    add(f"add {tag}", "memory", build_add(n), bytes=3 * n * F32)
    add(f"multiply-add {tag}", "memory", build_multiply_add(n), bytes=4 * n * F32)
    add(f"exp {tag}", "memory", build_unary(n, "exp"), bytes=2 * n * F32)
    add(f"erf {tag}", "memory", build_unary(n, "erf"), bytes=2 * n * F32)
    # issue 9: the float32 transcendentals at >= 80% of the copy rate
    for op in ("sin", "cos", "tanh", "log1p"):
        add(f"{op} {tag}", "memory", build_unary(n, op), bytes=2 * n * F32)
    # issue 9: the vectorised inverse functions and float64 exp/log (were the C library)
    add(f"arcsin {tag}", "memory", build_unary(n, "arcsin"), bytes=2 * n * F32)
    for op in ("exp", "log"):
        add(f"{op} {_human(n)} f64", "memory", build_unary(n, op, "float64"), bytes=2 * n * 8)
    gtag = _shape(gelu_shape)
    add(f"gelu {gtag} eager", "memory", build_gelu(gelu_shape, False), bytes=2 * gelu_values * F32)
    add(f"gelu {gtag} compiled", "memory", build_gelu(gelu_shape, True),
        bytes=2 * gelu_values * F32, note="mx.compile / torch.compile / jax.jit")
    add("compile first call, 10-op chain on 1K f32", "dispatch", build_compile_first_call(1024),
        ops=1, note="a fresh function per call: trace, passes, run")
    add("compile cache hit, 10-op chain on 16 f32", "dispatch", build_compile_cache_hit(16),
        ops=1, note="the same compiled function again")
    mtag = f"{rows}×{cols} f32"
    in_bytes = rows * cols * F32
    add(f"sum all {mtag}", "memory", build_reduction((rows, cols), "sum", None), bytes=in_bytes)
    add(f"sum axis 0 {mtag}", "memory", build_reduction((rows, cols), "sum", 0),
        bytes=in_bytes + cols * F32)
    add(f"sum axis 1 {mtag}", "memory", build_reduction((rows, cols), "sum", 1),
        bytes=in_bytes + rows * F32)
    add(f"max all {mtag}", "memory", build_reduction((rows, cols), "max", None), bytes=in_bytes)
    add(f"argmax axis 1 {mtag}", "memory", build_reduction((rows, cols), "argmax", 1),
        bytes=in_bytes + rows * 4)
    add(f"softmax last axis {mtag}", "memory", build_softmax((rows, cols)), bytes=2 * in_bytes)
    add(f"transpose-copy {mtag}", "memory", build_transpose_copy((rows, cols)),
        bytes=2 * in_bytes)
    half = (rows, cols // 2)
    add(f"concatenate 2×{_shape(half)} f32 axis 1", "memory", build_concatenate(half, 1),
        bytes=2 * in_bytes)

    # arithmetic-bound
    for size in square_sizes:
        add(f"matmul {size}² f32", "compute", build_matmul(0, size, "float32"),
            flops=2 * size**3, limit="gemm", always=(size == gemm_limit_size))
    batch, size = batched
    add(f"batched matmul {batch}×{size}² f32", "compute", build_matmul(batch, size, "float32"),
        flops=2 * batch * size**3)
    for dtype, short in (("bfloat16", "bf16"), ("float16", "f16")):
        for size in half_sizes:
            add(f"matmul {size}² {short}", "compute", build_matmul(0, size, dtype),
                flops=2 * size**3)

    # linear algebra (issue 10: within 1.2x of NumPy, the same LAPACK class)
    svd_n, eigh_n = (256, 512) if quick else (1024, 2048)
    add(f"svd {svd_n}² f32", "linalg", build_linalg("svd", svd_n), note="full U and Vt")
    add(f"eigh {eigh_n}² f32", "linalg", build_linalg("eigh", eigh_n), note="values and vectors")
    # quantized matrix-vector product (a decode step), against the float32 one
    qn = 4096
    add(f"matvec {qn}² f32 (batch 1)", "memory", build_matvec(qn, None), bytes=qn * qn * F32)
    for qbits in (4, 8):
        add(f"quantized_matmul {qbits}-bit {qn}² (batch 1)", "memory", build_matvec(qn, qbits),
            bytes=qn * qn * qbits // 8 + 2 * (qn * qn // 64) * F32,
            note="affine, group 64; mlx/loom only")
    # convolution: a ResNet stage's 3×3 conv (issue 10)
    cb, cs, cc = (8, 56, 64) if quick else (32, 56, 64)
    conv_flops = 2 * cb * cs * cs * cc * cc * 9
    ctag = f"conv2d ResNet stage B{cb} {cs}²×{cc}->{cc} 3×3"
    add(f"{ctag} fwd", "compute", build_conv2d(cb, cs, cc, False), flops=conv_flops,
        note="NHWC; torch: channels_last")
    add(f"{ctag} fwd+bwd", "compute", build_conv2d(cb, cs, cc, True), flops=3 * conv_flops,
        note="grad of input and weight")

    # vmap, seed §4.7
    vm = vmap_shape
    add(f"naive loop ({vm[0]} adds)", "vmap", build_vmap("naive", *vm), ops=3 * vm[0])
    add("vmap(x + y, in_axes=(0, 1))", "vmap", build_vmap("vmap", *vm))
    add("xs + ys.T", "vmap", build_vmap("broadcast", *vm))

    # streams, seed §1.4
    add("matmul + 500 exp, one stream", "streams", build_streams(False, 500), ops=501)
    add("matmul + 500 exp, two streams", "streams", build_streams(True, 500), ops=501)

    # random
    rtag = f"{_human(n_random)} f32"
    add(f"random normal {rtag}", "random", build_random(n_random, "normal"), bytes=n_random * F32)
    add(f"random uniform {rtag}", "random", build_random(n_random, "uniform"),
        bytes=n_random * F32)

    # FFT (issue 10's targets: within 1.2x of NumPy)
    fft_n, fft_side = 16 * MIB, 4096
    add(f"rfft {_human(fft_n)} f32", "fft", build_fft((fft_n,), "rfft"),
        flops=fft_flops(fft_n, True))
    add(f"fft2 {fft_side}² f32", "fft", build_fft((fft_side, fft_side), "fft2"),
        flops=fft_flops(fft_side * fft_side, False), note="real input, complex64 result")

    # training
    mlp_flops = 3 * 2 * mlp_batch * sum(a * b for a, b in zip(dims[:-1], dims[1:]))
    mlp_tag = f"MLP {'-'.join(map(str, dims))} batch {mlp_batch}"
    add(f"{mlp_tag} value_and_grad", "training", build_mlp_value_and_grad(mlp_batch, dims),
        flops=mlp_flops)
    add(f"{mlp_tag} Adam step", "training", build_mlp_adam_step(mlp_batch, dims),
        flops=mlp_flops, note="nn + optimizers (jax: Adam written with tree_map)")
    att = (2, 8, 512, 64) if quick else (4, 8, 1024, 64)
    att_tag = f"attention B{att[0]} H{att[1]} L{att[2]} D{att[3]} fwd+bwd"
    add(f"{att_tag} fused", "training", build_attention(*att, fused=True),
        flops=attention_flops(*att), note="mx.fast / torch scaled_dot_product_attention")
    add(f"{att_tag} unfused", "training", build_attention(*att, fused=False),
        flops=attention_flops(*att), note="softmax(q k^T) v from core ops")
    gd = (2, 128, 4, 64) if quick else (2, 512, 8, 128)
    gd_tag = f"gated_delta_update B{gd[0]} T{gd[1]} H{gd[2]} D{gd[3]} fwd+bwd"
    add(f"{gd_tag} fused", "training", build_gated_delta(*gd), flops=gated_delta_flops(*gd),
        note="mx.fast (mlx/loom only)")
    add(f"{gd_tag} composite", "training", build_gated_delta(*gd, fused=False),
        flops=gated_delta_flops(*gd), note="the recurrence step by step from core ops")
    add(f"transformer block B{tb[0]} L{tb[1]} D{tb[2]} fwd+bwd", "training",
        build_transformer(*tb), flops=transformer_flops(*tb))
    add(f"transformer block B{tb[0]} L{tb[1]} D{tb[2]} fwd+bwd compiled", "training",
        build_transformer(*tb, compiled=True), flops=transformer_flops(*tb),
        note="mx.compile / torch.compile / jax.jit of value_and_grad")
    # function export
    add("export + import + first call, 100 ops on 1K f32", "export",
        build_export_roundtrip(100, 1024), ops=100, note="export_function, import_function")
    # issue 9's targets (kern9): scans, sorting, selection, row gathers, einsum
    n_sort = (4 if quick else 16) * MIB
    add(f"cumsum {tag}", "memory", build_cumsum(n), bytes=2 * n * F32,
        note="target: >= 70% of the copy rate")
    add(f"sort {_human(n_sort)} f32", "memory", build_sort(n_sort, False), bytes=2 * n_sort * F32,
        note="target: >= NumPy")
    add(f"argsort {_human(n_sort)} f32", "memory", build_sort(n_sort, True),
        bytes=2 * n_sort * F32, note="stable (numpy: its default kind); target: >= NumPy")
    t_rows, t_cols = (256 * 1024 if quick else MIB), 64
    t_bytes = t_rows * t_cols * F32
    add(f"take {_human(t_rows)} rows of {_human(t_rows)}×{t_cols} f32", "memory",
        build_take_rows(t_rows, t_cols, t_rows), bytes=2 * t_bytes + t_rows * 4,
        note="torch: index_select; target: >= np.take")
    add(f"x.at[idx].add(v) {_human(t_rows)} rows of {_human(t_rows)}×{t_cols} f32", "memory",
        build_add_at_rows(t_rows, t_cols, t_rows), bytes=4 * t_bytes + t_rows * 4,
        note="a new array; numpy: copy + np.add.at, torch: index_add; target: >= NumPy")
    k_shape = (1024, 32000) if quick else (4096, 32000)
    add(f"topk k=8 {_shape(k_shape)} f32", "memory", build_topk(k_shape, 8),
        bytes=math.prod(k_shape) * F32, note="numpy: np.partition; target: >= PyTorch")
    e_dims = (4, 8, 512, 64) if quick else (8, 8, 1024, 64)
    e_flops = 2 * e_dims[0] * e_dims[1] * e_dims[2] ** 2 * e_dims[3]
    e_tag = f"B{e_dims[0]} H{e_dims[1]} L{e_dims[2]} D{e_dims[3]}"
    add(f"einsum bhqd,bhkd->bhqk {e_tag}", "compute", build_attention_scores(*e_dims, True),
        flops=e_flops, note="target: within 1.1x of the matmul row below")
    add(f"matmul q @ k^T {e_tag}", "compute", build_attention_scores(*e_dims, False),
        flops=e_flops)
    for kind in ("max", "min"):
        add(f"{kind} axis -1 {mtag}", "memory", build_reduce_last((rows, cols), kind),
            bytes=in_bytes + rows * F32)
    # saving and loading (issue 12): 1 GiB of weights (256 MiB quick)
    io_total = (256 if quick else 1024) * MIB
    for fmt, dtypes in (("safetensors", ("float32", "bfloat16")), ("npz", ("float32",))):
        for dtype in dtypes:
            tag = f"{_human(io_total)} {fmt} {'f32' if dtype == 'float32' else 'bf16'}"
            note = "numpy: safetensors.numpy / np.savez; torch: safetensors.torch"
            add(f"save {tag}", "io", build_io(fmt, io_total, dtype, "save"), bytes=io_total,
                note=note)
            add(f"load {tag} (returns)", "io", build_io(fmt, io_total, dtype, "load"),
                note="loom: lazy (mapped) for safetensors; np.load(npz) is lazy too")
            add(f"load {tag} + touch all", "io", build_io(fmt, io_total, dtype, "load+touch"),
                bytes=io_total, note="a sum of every array reads every page")
            if dtype == "float32":
                add(f"read() {tag} file (page cache)", "io",
                    build_io(fmt, io_total, dtype, "read"), bytes=io_total,
                    note="the page-cache read rate of the same file: numpy's worker")
    w += nn_training_workloads(quick)
    return w


def select(workloads, patterns):
    """Workloads whose name or group contains any pattern (case-insensitive),
    plus those that always run (the limits)."""
    if not patterns:
        return list(workloads)
    pats = [p.lower() for p in patterns]
    return [w for w in workloads
            if w.always or any(p in w.name.lower() or p == w.group for p in pats)]


# --- nn training steps (issue 11): the main job's LM, an LSTM, a ResNet block -------------
# Loom/MLX build them from nn + optimizers (the step compiled over model and optimizer
# state, as the main job does); PyTorch from torch.nn + torch.optim, eager.
def _lm_mlx(fw, dims, layers, context, batch):
    mx, nn, optim = fw.m, fw.need("nn"), fw.need("optimizers")
    from functools import partial

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(dims), nn.LayerNorm(dims)
            self.qkv = nn.Linear(dims, 3 * dims, bias=False)
            self.out = nn.Linear(dims, dims, bias=False)
            self.up, self.down = nn.Linear(dims, 4 * dims), nn.Linear(4 * dims, dims)

        def __call__(self, x):
            B, L, D = x.shape
            qkv = self.qkv(self.norm1(x)).reshape(B, L, 3, 4, D // 4).transpose(2, 0, 3, 1, 4)
            h = mx.fast.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], scale=(D // 4) ** -0.5,
                                                     mask="causal")
            x = x + self.out(h.transpose(0, 2, 1, 3).reshape(B, L, D))
            return x + self.down(nn.gelu(self.up(self.norm2(x))))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding, self.positions = nn.Embedding(256, dims), nn.Embedding(context, dims)
            self.blocks = [Block() for _ in range(layers)]
            self.norm = nn.LayerNorm(dims)

        def __call__(self, t):
            x = self.embedding(t) + self.positions(mx.arange(t.shape[1]))
            for b in self.blocks:
                x = b(x)
            return self.embedding.as_linear(self.norm(x))

    model = LM()
    optimizer = optim.AdamW(learning_rate=1e-3, bias_correction=True)
    optimizer.init(model.trainable_parameters())
    mx.eval(model.parameters(), optimizer.state)
    tokens = fw.np.asarray(fw.rng.integers(0, 256, (batch, context + 1)), dtype=fw.np.int32)
    x, y = mx.array(tokens[:, :-1]), mx.array(tokens[:, 1:])

    def loss_fn(model, x, y):
        return nn.losses.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1), reduction="mean")

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    state = [model.state, optimizer.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x, y):
        loss, grads = loss_and_grad(model, x, y)
        grads, _ = optim.clip_grad_norm(grads, 1.0)
        optimizer.update(model, grads)
        return loss

    return lambda: (step(x, y), model.state, optimizer.state)


def _lm_torch(fw, dims, layers, context, batch):
    torch = fw.torch
    tnn, F = torch.nn, torch.nn.functional

    class Block(tnn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = tnn.LayerNorm(dims), tnn.LayerNorm(dims)
            self.qkv = tnn.Linear(dims, 3 * dims, bias=False)
            self.out = tnn.Linear(dims, dims, bias=False)
            self.up, self.down = tnn.Linear(dims, 4 * dims), tnn.Linear(4 * dims, dims)

        def forward(self, x):
            B, L, D = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(B, L, 3, 4, D // 4).permute(2, 0, 3, 1, 4)
            h = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.out(h.transpose(1, 2).reshape(B, L, D))
            return x + self.down(F.gelu(self.up(self.norm2(x))))

    class LM(tnn.Module):
        def __init__(self):
            super().__init__()
            self.embedding, self.positions = tnn.Embedding(256, dims), tnn.Embedding(context, dims)
            self.blocks = tnn.ModuleList([Block() for _ in range(layers)])
            self.norm = tnn.LayerNorm(dims)

        def forward(self, t):
            x = self.embedding(t) + self.positions(torch.arange(t.shape[1], device=t.device))
            for b in self.blocks:
                x = b(x)
            return self.norm(x) @ self.embedding.weight.T

    model = LM().to(fw.dev)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    tokens = torch.from_numpy(fw.rng.integers(0, 256, (batch, context + 1))).to(fw.dev)
    x, y = tokens[:, :-1], tokens[:, 1:]

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss

    return step


def build_lm_step(dims, layers, context, batch):
    def build(fw):
        if fw.family == "mlx":
            return _lm_mlx(fw, dims, layers, context, batch)
        if fw.family == "torch":
            return _lm_torch(fw, dims, layers, context, batch)
        raise fw.unsupported("nn")

    return build


def lm_flops(dims, layers, context, batch):
    matmul = layers * (4 * dims * dims + 8 * dims * dims) + 256 * dims  # per token, forward
    attention = layers * 2 * context * dims  # causal: half of q k^T and p v
    return 3 * 2 * batch * context * (matmul + attention)


def build_lstm(batch, length, features, hidden):
    """Forward and backward of a one-layer LSTM over ``length`` steps (loss: sum of outputs)."""

    def build(fw):
        x_host = fw.rng.standard_normal((batch, length, features), dtype=fw.np.float32)
        if fw.family == "mlx":
            mx, nn = fw.m, fw.need("nn")
            lstm = nn.LSTM(features, hidden)
            mx.eval(lstm.parameters())
            x = fw.input(x_host)
            grad = nn.value_and_grad(lstm, lambda model, x: model(x)[0].sum())
            return lambda: grad(lstm, x)
        if fw.family == "torch":
            torch = fw.torch
            lstm = torch.nn.LSTM(features, hidden, batch_first=True).to(fw.dev)
            x = fw.input(x_host)

            def step():
                lstm.zero_grad(set_to_none=True)
                out = lstm(x)[0].sum()
                out.backward()
                return out
            return step
        raise fw.unsupported("nn.LSTM")

    return build


def lstm_flops(batch, length, features, hidden):
    return 3 * 2 * batch * length * 4 * hidden * (features + hidden)


def build_resnet_block(batch, size, channels):
    """One basic ResNet block (conv-BN-ReLU-conv-BN + identity, ReLU), training step:
    forward, backward, SGD with momentum. Channels-last for Loom/MLX, channels_last
    memory format for torch."""

    def build(fw):
        x_host = fw.rng.standard_normal((batch, size, size, channels), dtype=fw.np.float32)
        if fw.family == "mlx":
            mx, nn, optim = fw.m, fw.need("nn"), fw.need("optimizers")
            from functools import partial

            class ResBlock(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
                    self.bn1 = nn.BatchNorm(channels)
                    self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
                    self.bn2 = nn.BatchNorm(channels)

                def __call__(self, x):
                    h = nn.relu(self.bn1(self.conv1(x)))
                    return nn.relu(x + self.bn2(self.conv2(h)))

            model = ResBlock()
            optimizer = optim.SGD(learning_rate=1e-2, momentum=0.9)
            optimizer.init(model.trainable_parameters())
            mx.eval(model.parameters(), optimizer.state)
            x = fw.input(x_host)
            loss_and_grad = nn.value_and_grad(model, lambda m, x: mx.mean(mx.square(m(x))))
            state = [model.state, optimizer.state]

            @partial(mx.compile, inputs=state, outputs=state)
            def step(x):
                loss, grads = loss_and_grad(model, x)
                optimizer.update(model, grads)
                return loss

            return lambda: (step(x), model.state, optimizer.state)
        if fw.family == "torch":
            torch = fw.torch
            tnn = torch.nn

            class ResBlock(tnn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv1 = tnn.Conv2d(channels, channels, 3, padding=1, bias=False)
                    self.bn1 = tnn.BatchNorm2d(channels)
                    self.conv2 = tnn.Conv2d(channels, channels, 3, padding=1, bias=False)
                    self.bn2 = tnn.BatchNorm2d(channels)

                def forward(self, x):
                    h = torch.relu(self.bn1(self.conv1(x)))
                    return torch.relu(x + self.bn2(self.conv2(h)))

            model = ResBlock().to(fw.dev).to(memory_format=torch.channels_last)
            optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
            x = fw.input(x_host).permute(0, 3, 1, 2)  # NCHW shape over NHWC memory

            def step():
                optimizer.zero_grad(set_to_none=True)
                loss = torch.mean(torch.square(model(x)))
                loss.backward()
                optimizer.step()
                return loss
            return step
        raise fw.unsupported("nn.Conv2d")

    return build


def nn_training_workloads(quick=False):
    """The issue-11 rows: the main job's training step, an LSTM, a ResNet block."""
    w = []
    lm = (128, 3, 128, 32)
    w.append(Workload(f"LM step d{lm[0]} L{lm[1]} ctx{lm[2]} B{lm[3]} (main job)", "training",
                      build_lm_step(*lm), flops=lm_flops(*lm),
                      note="fwd+bwd+clip+AdamW; mlx/loom: compiled step"))
    ls = (16, 32, 128, 256) if quick else (32, 64, 128, 256)
    w.append(Workload(f"LSTM B{ls[0]} T{ls[1]} {ls[2]}->{ls[3]} fwd+bwd", "training",
                      build_lstm(*ls), flops=lstm_flops(*ls), note="nn.LSTM / torch.nn.LSTM"))
    rb = (4, 56, 64) if quick else (16, 56, 64)
    w.append(Workload(f"ResNet block B{rb[0]} {rb[1]}²×{rb[2]} train step", "training",
                      build_resnet_block(*rb), flops=3 * 2 * 2 * rb[0] * rb[1] ** 2 * rb[2] ** 2 * 9,
                      note="2 conv3×3 + BatchNorm + SGD momentum; torch channels_last"))
    return w


# --- saving and loading (issue 12) ----------------------------------------------
def _io_arrays(fw, total, dtype):
    """A dict of 64 MiB arrays (16 MiB quick) adding up to `total` bytes."""
    itemsize = 4 if dtype == "float32" else 2
    per = min(total, 64 * MIB)
    if fw.family == "numpy" and dtype != "float32":
        raise fw.unsupported(dtype)
    if fw.family == "jax":
        raise fw.unsupported("safetensors/npz I/O")
    return {f"layer{i}.weight": fw.rand((per // itemsize // 1024, 1024), dtype)
            for i in range(total // per)}


def _io_path(fmt):
    import atexit
    import os
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="bench_io_")
    atexit.register(shutil.rmtree, folder, True)
    return os.path.join(folder, "weights." + fmt)


def _io_save_fn(fw, fmt):
    if fw.family == "mlx":
        if fmt == "safetensors":
            return lambda path, d: fw.m.save_safetensors(path, d)
        return lambda path, d: fw.m.savez(path, **d)
    if fw.family == "numpy":
        if fmt == "safetensors":
            from safetensors.numpy import save_file
            return lambda path, d: save_file(d, path)
        return lambda path, d: fw.np.savez(path, **d)
    if fw.family == "torch" and fmt == "safetensors":
        from safetensors.torch import save_file
        return lambda path, d: save_file(d, path)
    raise fw.unsupported(f"{fmt} save")


def _io_load_fn(fw, fmt):
    """Returns load(path) -> dict of arrays (lazy where the library is)."""
    if fw.family == "mlx":
        return lambda path: fw.m.load(path)
    if fw.family == "numpy":
        if fmt == "safetensors":
            from safetensors.numpy import load_file
            return load_file
        return lambda path: fw.np.load(path)  # an NpzFile: members read on access
    if fw.family == "torch" and fmt == "safetensors":
        from safetensors.torch import load_file
        return load_file
    raise fw.unsupported(f"{fmt} load")


def _io_touch(fw, d):
    """Reads every byte of the loaded arrays (a sum per array)."""
    if fw.family == "numpy":
        return [d[k].sum() for k in (d.files if hasattr(d, "files") else d)]
    if fw.family == "torch":
        return [v.sum() for v in d.values()]
    sums = [v.sum() for v in d.values()]
    fw.sync(sums)
    return sums


def build_io(fmt, total, dtype, what):
    """what: "save", "load" (load returns), "load+touch" (every byte used) or
    "read" (the page-cache read rate of the same file: one read() into a
    buffer, the bound of any loader)."""
    import os as _os

    def build(fw):
        d = _io_arrays(fw, total, dtype)
        save = _io_save_fn(fw, fmt)
        path = _io_path(fmt)
        if what == "save":
            fw.sync(list(d.values()))
            return lambda: save(path, d)
        if what == "read":
            if fw.family != "numpy":
                raise fw.unsupported("a plain read() row (numpy's worker runs it)")
            save(path, d)
            buf = bytearray(_os.path.getsize(path))

            def read():
                with open(path, "rb", buffering=0) as f:
                    f.readinto(buf)
                return buf

            read()  # into the page cache
            return read
        load = _io_load_fn(fw, fmt)
        save(path, d)
        del d
        _io_touch(fw, load(path))  # warm the page cache
        if what == "load":
            return lambda: load(path)
        return lambda: _io_touch(fw, load(path))

    return build
