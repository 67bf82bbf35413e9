"""A few GPU timings for scripts/gpu.sh (median of repeats, after warm-up;
device work is synchronised before each clock read)."""

import statistics
import sys
import time

import numpy as np

import loom.core as mx


def bench(fn, repeat=20, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        mx.synchronize()
        t = time.perf_counter()
        fn()
        mx.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def overheads():
    """Launch overhead and host-to-device upload only (for variant runs)."""
    g = mx.gpu
    host = np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32)

    def host_built_upload():
        m = mx.array(host)
        mx.eval(mx.add(m, 0.0, stream=g))

    print(f"  host-built 4096^2 + upload + add: {bench(host_built_upload, repeat=5, warmup=1):.2f} ms")
    small = mx.ones((16,), stream=g)
    mx.eval(small)

    def chain(each):
        y = small
        for _ in range(1000):
            y = mx.add(y, 1.0, stream=g)
            if each:
                mx.eval(y)
        mx.eval(y)

    print(f"  1000 chained tiny adds: eval once {bench(lambda: chain(False), repeat=5):.2f}, "
          f"eval each {bench(lambda: chain(True), repeat=3):.2f} us/op")
    tiny = mx.ones((16,), stream=mx.cpu)

    def cpu_chain(each):
        y = tiny
        for _ in range(1000):
            y = mx.add(y, 1.0, stream=mx.cpu)
            if each:
                mx.eval(y)
        mx.eval(y)

    print(f"  the same on the CPU (host overhead alone): eval once "
          f"{bench(lambda: cpu_chain(False), repeat=5):.2f}, "
          f"eval each {bench(lambda: cpu_chain(True), repeat=3):.2f} us/op")


def kernels():
    """Gather/scatter, random, scan and sort: GPU next to the CPU."""
    rng = np.random.default_rng(1)
    table = mx.array(rng.standard_normal((50000, 1024)).astype(np.float32))
    tokens = mx.array(rng.integers(0, 50000, size=(8, 1024)).astype(np.int32))
    upd = mx.array(rng.standard_normal((8192, 1024)).astype(np.float32))
    flat = mx.reshape(tokens, (-1,))
    big = mx.zeros((1 << 24,))
    pos = mx.array(rng.integers(0, 1 << 24, size=1 << 22).astype(np.int32))
    vals = mx.array(rng.standard_normal(1 << 22).astype(np.float32))
    x = mx.array(rng.standard_normal((64, 1 << 16)).astype(np.float32))
    rows = mx.array(rng.standard_normal((4096, 1024)).astype(np.float32))
    key = mx.random.key(0)
    mx.eval(table, tokens, upd, flat, x, rows, big, pos, vals)
    cases = [
        ("embedding take (8,1024) of 50000x1024 f32", lambda s: mx.take(table, tokens, axis=0,
                                                                        stream=s)),
        ("scatter-add 8192 rows into 50000x1024 f32", lambda s: _at_add(table, flat, upd, s)),
        ("scatter-set 8192 rows into 50000x1024 f32", lambda s: _set_rows(table, flat, upd, s)),
        ("scatter-set 2^22 elements of 2^24 f32", lambda s: _set_rows(big, pos, vals, s)),
        ("random.uniform 2^26 f32", lambda s: mx.random.uniform(shape=(1 << 26,), key=key,
                                                                stream=s)),
        ("random.normal 2^26 f32", lambda s: mx.random.normal(shape=(1 << 26,), key=key,
                                                              stream=s)),
        ("cumsum (64, 65536) f32 last axis", lambda s: mx.cumsum(x, axis=1, stream=s)),
        ("cumsum (64, 65536) f32 axis 0", lambda s: mx.cumsum(x, axis=0, stream=s)),
        ("sort (4096, 1024) f32 rows", lambda s: mx.sort(rows, axis=1, stream=s)),
        ("argsort (4096, 1024) f32 rows", lambda s: mx.argsort(rows, axis=1, stream=s)),
    ]
    for name, f in cases:
        g = bench(lambda: mx.eval(f(mx.gpu)), repeat=10, warmup=2)
        c = bench(lambda: mx.eval(f(mx.cpu)), repeat=3, warmup=1)
        print(f"{name}: gpu {g:.3f} ms, cpu {c:.2f} ms ({c / g:.0f}x)")


def fast():
    """mx.fast on the GPU next to the CPU, and attention next to PyTorch's SDPA."""
    rng = np.random.default_rng(2)
    x = mx.array(rng.standard_normal((8, 1024, 4096)).astype(np.float32))
    w = mx.array(rng.standard_normal((4096,)).astype(np.float32))
    q = mx.array(rng.standard_normal((4, 16, 1024, 128)).astype(np.float32))
    qb = q.astype(mx.bfloat16)
    mx.eval(x, w, q, qb)
    sdpa = mx.fast.scaled_dot_product_attention
    cases = [
        ("rms_norm (8,1024,4096) f32", lambda s: mx.fast.rms_norm(x, w, 1e-5, stream=s), 2),
        ("layer_norm (8,1024,4096) f32", lambda s: mx.fast.layer_norm(x, w, w, 1e-5, stream=s), 2),
        ("rope (4,16,1024,128) f32", lambda s: mx.fast.rope(q, 128, traditional=False,
                                                            base=10000.0, scale=1.0, offset=0,
                                                            stream=s), 2),
        ("sdpa causal (4,16,1024,128) f32", lambda s: sdpa(q, q, q, scale=128 ** -0.5,
                                                           mask="causal", stream=s), 1),
        ("sdpa (4,16,1024,128) f32", lambda s: sdpa(q, q, q, scale=128 ** -0.5, stream=s), 1),
        ("sdpa causal (4,16,1024,128) bf16", lambda s: sdpa(qb, qb, qb, scale=128 ** -0.5,
                                                            mask="causal", stream=s), 1),
    ]
    for name, f, cpu_reps in cases:
        g = bench(lambda: mx.eval(f(mx.gpu)), repeat=10, warmup=2)
        c = bench(lambda: mx.eval(f(mx.cpu)), repeat=cpu_reps, warmup=0)
        print(f"{name}: gpu {g:.3f} ms, cpu {c:.2f} ms ({c / g:.0f}x)")
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return
    tq = torch.tensor(np.array(q), device="cuda")
    tx = torch.tensor(np.array(x), device="cuda")
    tw = torch.tensor(np.array(w), device="cuda")
    tqb = tq.bfloat16()

    def tbench(fn, repeat=10, warmup=2):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        return statistics.median(times) * 1e3

    for name, fn in (
        ("torch rms_norm (8,1024,4096) f32", lambda: F.rms_norm(tx, (4096,), tw, 1e-5)),
        ("torch layer_norm (8,1024,4096) f32", lambda: F.layer_norm(tx, (4096,), tw, tw, 1e-5)),
        ("torch sdpa causal (4,16,1024,128) f32",
         lambda: F.scaled_dot_product_attention(tq, tq, tq, is_causal=True)),
        ("torch sdpa (4,16,1024,128) f32", lambda: F.scaled_dot_product_attention(tq, tq, tq)),
        ("torch sdpa causal (4,16,1024,128) bf16",
         lambda: F.scaled_dot_product_attention(tqb, tqb, tqb, is_causal=True)),
    ):
        print(f"{name}: {tbench(fn):.3f} ms")


def gemm():
    """Matmul rates (cuBLASLt for the half types; LOOM_CUDA_LT=0 compares with
    cuBLAS's strided-batched GEMM) next to PyTorch's, on random data, with
    device events around 20 back-to-back products (median of 5 such runs)."""
    rng = np.random.default_rng(3)
    cases = [(mx.bfloat16, 8192), (mx.float16, 4096), (mx.bfloat16, 4096), (mx.float16, 8192),
             (mx.bfloat16, 1024), (mx.float32, 4096)]
    try:
        import torch
    except ImportError:
        torch = None
    for dt, n in cases:
        h = rng.standard_normal((2, n, n)).astype(np.float32)
        a, b = (mx.array(h[i]).astype(dt) for i in range(2))
        mx.eval(a, b)
        mx.eval(mx.matmul(a, b, stream=mx.gpu))  # plan + candidate timing

        def twenty():
            outs = [mx.matmul(a, b, stream=mx.gpu) for _ in range(20)]
            mx.eval(outs)

        ms = bench(twenty, repeat=5, warmup=1) / 20
        line = f"matmul {dt} {n}^3: loom {ms:.3f} ms, {2 * n**3 / ms / 1e9:.0f} TFLOP/s"
        if torch is not None:
            tdt = {mx.bfloat16: torch.bfloat16, mx.float16: torch.float16,
                   mx.float32: torch.float32}[dt]
            ta = torch.tensor(h[0], device="cuda").to(tdt)
            tb = torch.tensor(h[1], device="cuda").to(tdt)
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            times = []
            for rep in range(6):
                start.record()
                for _ in range(20):
                    torch.matmul(ta, tb)
                stop.record()
                torch.cuda.synchronize()
                if rep:
                    times.append(start.elapsed_time(stop) / 20)
            tms = statistics.median(times)
            line += f"; torch {tms:.3f} ms, {2 * n**3 / tms / 1e9:.0f} TFLOP/s"
        print(line, flush=True)


def adamw(profile=False):
    """The bfloat16 AdamW training step of an MLP of 4 Linear(4096) (ReLU
    between) on a batch of 1024, compiled as MLX users write it (mx.compile
    with the model's and optimizer's state as inputs and outputs), next to
    PyTorch's eager step with fused AdamW. profile=True (`adamw-profile`)
    also times the forward pass and value_and_grad alone, and lists the
    step's kernels by device time (PyTorch's profiler records every kernel of
    the process through CUPTI, Loom's too)."""
    from functools import partial

    import loom.nn as nn
    import loom.optimizers as optim

    dims, batch = 4096, 1024

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [nn.Linear(dims, dims) for _ in range(4)]

        def __call__(self, x):
            for i, layer in enumerate(self.layers):
                x = layer(x)
                if i < len(self.layers) - 1:
                    x = nn.relu(x)
            return x

    rng = np.random.default_rng(4)
    xh = rng.standard_normal((batch, dims)).astype(np.float32)
    yh = rng.standard_normal((batch, dims)).astype(np.float32)
    with mx.stream(mx.gpu):
        model = MLP()
        model.set_dtype(mx.bfloat16)
        optimizer = optim.AdamW(learning_rate=1e-4)
        optimizer.init(model.trainable_parameters())
        x, y = mx.array(xh).astype(mx.bfloat16), mx.array(yh).astype(mx.bfloat16)
        mx.eval(model.parameters(), optimizer.state, x, y)

        def loss_fn(model, x, y):
            return nn.losses.mse_loss(model(x), y)

        loss_and_grad = nn.value_and_grad(model, loss_fn)
        state = [model.state, optimizer.state]

        @partial(mx.compile, inputs=state, outputs=state)
        def step(x, y):
            loss, grads = loss_and_grad(model, x, y)
            optimizer.update(model, grads)
            return loss

        def run():
            mx.eval(step(x, y), model.state, optimizer.state)

        first = float(step(x, y).item())
        ms = bench(run, repeat=30, warmup=5)
        last = float(step(x, y).item())
    flops = 3 * 2 * batch * dims * dims * 4
    print(f"MLP 4xLinear(4096) batch 1024 bf16 AdamW step (compiled): loom {ms:.3f} ms, "
          f"{flops / ms / 1e9:.0f} TFLOP/s (loss {first:.4f} -> {last:.4f})", flush=True)
    if profile:
        with mx.stream(mx.gpu):
            fwd = bench(lambda: mx.eval(model(x)), repeat=30, warmup=3)
            grad_only = mx.compile(lambda x, y: loss_and_grad(model, x, y))
            vg = bench(lambda: mx.eval(grad_only(x, y)), repeat=30, warmup=3)
        print(f"  forward alone {fwd:.3f} ms, compiled value_and_grad alone {vg:.3f} ms", flush=True)
        _kernel_table(run, 10)
    try:
        import torch
    except ImportError:
        return
    tm = torch.nn.Sequential(*[m for i in range(4) for m in
                               ((torch.nn.Linear(dims, dims),) +
                                ((torch.nn.ReLU(),) if i < 3 else ()))]).cuda().bfloat16()
    topt = torch.optim.AdamW(tm.parameters(), lr=1e-4, fused=True)
    tx = torch.tensor(xh, device="cuda").bfloat16()
    ty = torch.tensor(yh, device="cuda").bfloat16()

    def tstep():
        topt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(tm(tx), ty)
        loss.backward()
        topt.step()
        return loss

    for _ in range(5):
        tstep()
    torch.cuda.synchronize()
    times = []
    for _ in range(30):
        t = time.perf_counter()
        tstep()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    print(f"  torch eager, fused AdamW: {statistics.median(times) * 1e3:.3f} ms", flush=True)


def _kernel_table(fn, steps):
    """Device time per kernel over `steps` calls of fn, from PyTorch's profiler."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        print("  (no torch: no kernel table)")
        return
    torch.cuda.init()
    fn()
    mx.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        mx.synchronize()
    rows = []
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", None)
        if t is None:
            t = getattr(e, "self_cuda_time_total", 0)
        if t > 0:
            rows.append((t / steps, e.count // steps, e.key))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    print(f"  kernels: {total / 1e3:.3f} ms of device time per step, top:")
    for t, n, key in rows[:22]:
        print(f"    {t / 1e3:8.4f} ms  x{n:<3d} {key[:110]}")


def _set_rows(a, idx, v, s):
    with mx.stream(s):
        out = mx.array(a)
        out[idx] = v
        return out


def _at_add(a, idx, v, s):
    with mx.stream(s):
        return a.at[idx].add(v)



def attention():
    """Attention next to torch.nn.functional.scaled_dot_product_attention:
    forward and forward + backward, (4, 16, 1024, 128), causal and not,
    bfloat16 and float32. Each time is the median of 5 runs of 10 back-to-back
    calls (one eval of all ten for Loom, device events for PyTorch), per call."""
    rng = np.random.default_rng(4)
    shape = (4, 16, 1024, 128)
    h = [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]
    sdpa = mx.fast.scaled_dot_product_attention
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        torch = None
    B, H, T, D = shape
    for dt in (mx.bfloat16, mx.float32):
        q, k, v, cot = (mx.array(x).astype(dt) for x in h)
        mx.eval(q, k, v, cot)
        for causal in (True, False):
            mask = "causal" if causal else None
            flops = 4 * B * H * T * T * D / (2 if causal else 1)

            def fwd10():
                mx.eval([sdpa(q, k, v, scale=D ** -0.5, mask=mask, stream=mx.gpu)
                         for _ in range(10)])

            def loss(q, k, v):
                with mx.stream(mx.gpu):
                    o = sdpa(q, k, v, scale=D ** -0.5, mask=mask)
                    return (o * cot).astype(mx.float32).sum()

            grad = mx.grad(loss, argnums=(0, 1, 2))

            def bwd10():
                mx.eval([grad(q, k, v) for _ in range(10)])

            f = bench(fwd10, repeat=5, warmup=1) / 10
            b = bench(bwd10, repeat=5, warmup=1) / 10
            name = f"sdpa{' causal' if causal else ''} {shape} {dt}"
            line = (f"{name}: loom fwd {f:.3f} ms ({flops / f / 1e9:.0f} TFLOP/s), "
                    f"fwd+bwd {b:.3f} ms")
            if torch is not None:
                tdt = torch.bfloat16 if dt == mx.bfloat16 else torch.float32
                tq, tk, tv, tc = (torch.tensor(x, device="cuda").to(tdt) for x in h)
                for t in (tq, tk, tv):
                    t.requires_grad_(True)

                def tfwd():
                    with torch.no_grad():
                        F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)

                def tbwd():
                    o = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
                    torch.autograd.grad(o, (tq, tk, tv), tc)

                def tev(fn):
                    start = torch.cuda.Event(enable_timing=True)
                    stop = torch.cuda.Event(enable_timing=True)
                    times = []
                    for rep in range(6):
                        start.record()
                        for _ in range(10):
                            fn()
                        stop.record()
                        torch.cuda.synchronize()
                        if rep:
                            times.append(start.elapsed_time(stop) / 10)
                    return statistics.median(times)

                tf, tb = tev(tfwd), tev(tbwd)
                line += f"; torch fwd {tf:.3f} ms ({flops / tf / 1e9:.0f} TFLOP/s), fwd+bwd {tb:.3f}"
                line += f" (loom/torch fwd {f / tf:.2f}x, fwd+bwd {b / tb:.2f}x)"
            print(line, flush=True)

def main():
    if len(sys.argv) > 1 and sys.argv[1] == "overheads":
        overheads()
        return
    if len(sys.argv) > 1 and sys.argv[1] == "kernels":
        kernels()
        return
    if len(sys.argv) > 1 and sys.argv[1] == "fast":
        fast()
        return
    if len(sys.argv) > 1 and sys.argv[1] == "attention":
        attention()
        return
    if len(sys.argv) > 1 and sys.argv[1] == "gemm":
        gemm()
        return
    if len(sys.argv) > 1 and sys.argv[1] == "adamw":
        adamw()
        return
    if len(sys.argv) > 1 and sys.argv[1] == "adamw-profile":
        adamw(profile=True)
        return
    print("default device:", mx.default_device(), mx.device_info(mx.gpu))
    g = mx.gpu
    n = 1 << 28  # 1 GiB of float32
    x = mx.add(mx.broadcast_to(mx.array(1.0), (n,)), 0, stream=g)
    mx.eval(x)
    ms = bench(lambda: mx.eval(mx.multiply(x, 2.0, stream=g)), repeat=10)
    print(f"elementwise x*2 over 1 GiB float32: {ms:.3f} ms, {2 * 4 * n / ms / 1e6:.0f} GB/s")

    a = mx.random.normal((32, 1000, 4096))
    mx.eval(a)

    def gelu():
        y = a * 0.5 * (1 + mx.erf(a / 1.4142135623730951))
        mx.eval(y)

    print(f"gelu (32,1000,4096) float32 eager: {bench(gelu, repeat=10):.3f} ms")

    def gelu_fn(x):
        return x * 0.5 * (1 + mx.erf(x / 1.4142135623730951))

    compiled = mx.compile(gelu_fn)
    with mx.stream(g):
        ms = bench(lambda: mx.eval(compiled(a)), repeat=20)
    print(f"gelu (32,1000,4096) float32 compiled: {ms:.3f} ms, "
          f"{2 * a.nbytes / ms / 1e9:.2f} TB/s read+write")

    host = np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32)

    def host_built_matmul():
        m = mx.array(host)
        mx.eval(mx.matmul(m, m, stream=g))

    def host_built_only():
        m = mx.array(host)
        mx.eval(m)

    def host_built_upload():
        m = mx.array(host)
        mx.eval(mx.add(m, 0.0, stream=g))

    print(f"host-built 4096^2 float32 + matmul: {bench(host_built_matmul, repeat=5, warmup=1):.2f} ms")
    print(f"  of which mx.array(numpy) {bench(host_built_only, repeat=5, warmup=1):.2f} ms, "
          f"+ upload + add {bench(host_built_upload, repeat=5, warmup=1):.2f} ms")
    for dt, size in ((mx.bfloat16, 8192), (mx.float16, 4096), (mx.float32, 4096)):
        m = mx.random.normal((size, size)).astype(dt)
        mx.eval(m)
        ms = bench(lambda: mx.eval(mx.matmul(m, m, stream=g)), repeat=10, warmup=2)
        print(f"matmul {dt} {size}^3: {ms:.3f} ms, {2 * size**3 / ms / 1e9:.0f} TFLOP/s")

    small = mx.ones((16,), stream=g)
    mx.eval(small)

    def chain(each):
        y = small
        for _ in range(1000):
            y = mx.add(y, 1.0, stream=g)
            if each:
                mx.eval(y)
        mx.eval(y)

    print(f"1000 chained tiny adds, eval once: {bench(lambda: chain(False), repeat=5) :.2f} us/op")
    print(f"1000 chained tiny adds, eval each: {bench(lambda: chain(True), repeat=3) :.2f} us/op")
    overheads()


if __name__ == "__main__":
    main()
