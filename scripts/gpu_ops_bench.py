"""GPU timings of the sort/select, quantized, FFT and conv kernels for
scripts/gpu_ops.sh: Loom's GPU next to Loom's CPU and, where the image has
it, PyTorch on the same GPU (median of repeats after warm-up; device work is
synchronised before each clock read)."""

import statistics
import time

import numpy as np

import loom.core as mx
from gpu_bench import bench  # same directory: scripts/ is sys.path[0]

try:
    import torch

    HAVE_TORCH = torch.cuda.is_available()
except Exception:  # noqa: BLE001 - any import failure means no peer
    HAVE_TORCH = False


def tbench(fn, repeat=10, warmup=2):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def row(name, loom_gpu, loom_cpu=None, torch_fn=None):
    g = bench(loom_gpu, repeat=10, warmup=2)
    c = bench(loom_cpu, repeat=3, warmup=1) if loom_cpu is not None else None
    t = tbench(torch_fn) if (torch_fn is not None and HAVE_TORCH) else None
    parts = [f"  {name}: GPU {g:.3f} ms"]
    if c is not None:
        parts.append(f"CPU {c:.2f} ms")
    if t is not None:
        parts.append(f"torch {t:.3f} ms ({g / t:.2f}x)")
    print(", ".join(parts), flush=True)


def main():
    rng = np.random.default_rng(0)
    h = rng.standard_normal((64, 65536)).astype(np.float32)
    x = mx.array(h)
    mx.eval(x)
    tx = torch.from_numpy(h).cuda() if HAVE_TORCH else None
    ev = lambda f: (lambda: mx.eval(f()))
    row("argsort (64, 65536) f32", ev(lambda: mx.argsort(x, stream=mx.gpu)),
        ev(lambda: mx.argsort(x, stream=mx.cpu)),
        (lambda: torch.sort(tx, dim=-1, stable=True)) if HAVE_TORCH else None)
    big = mx.array(rng.standard_normal(1 << 24).astype(np.float32))
    tbig = torch.from_numpy(np.array(big)).cuda() if HAVE_TORCH else None
    row("sort 2^24 f32 (one row)", ev(lambda: mx.sort(big, stream=mx.gpu)),
        ev(lambda: mx.sort(big, stream=mx.cpu)),
        (lambda: torch.sort(tbig)) if HAVE_TORCH else None)
    v = mx.array(rng.standard_normal((64, 151936)).astype(np.float32))
    tv = torch.from_numpy(np.array(v)).cuda() if HAVE_TORCH else None
    row("topk k=50 of (64, 151936) f32", ev(lambda: mx.topk(v, 50, stream=mx.gpu)),
        ev(lambda: mx.topk(v, 50, stream=mx.cpu)),
        (lambda: torch.topk(tv, 50)) if HAVE_TORCH else None)
    row("argpartition kth=50 of (64, 151936)", ev(lambda: mx.argpartition(v, 50, stream=mx.gpu)))

    w = mx.array(rng.standard_normal((4096, 4096)).astype(np.float32)).astype(mx.bfloat16)
    wq, sc, bi = mx.quantize(w, group_size=64, bits=4, stream=mx.cpu)
    mx.eval(wq, sc, bi)
    for m in (1, 8, 64):
        xq = mx.array(rng.standard_normal((m, 4096)).astype(np.float32)).astype(mx.bfloat16)
        mx.eval(xq)
        tw = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) if HAVE_TORCH else None
        txq = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16) if HAVE_TORCH else None
        row(f"quantized_matmul 4-bit 4096x4096 bf16, M={m} (torch: dense bf16 matmul)",
            ev(lambda: mx.quantized_matmul(xq, wq, sc, bi, stream=mx.gpu)),
            ev(lambda: mx.quantized_matmul(xq, wq, sc, bi, stream=mx.cpu)),
            (lambda: txq @ tw.T) if HAVE_TORCH else None)
    xe = mx.array(rng.standard_normal((8, 1, 2048)).astype(np.float32)).astype(mx.bfloat16)
    we = mx.array(rng.standard_normal((64, 1408, 2048)).astype(np.float32)).astype(mx.bfloat16)
    weq, wes, web = mx.quantize(we, group_size=64, bits=4, stream=mx.cpu)
    lhs = mx.arange(8, dtype=mx.uint32).reshape(8, 1)
    rhs = mx.array(rng.integers(0, 64, (8, 8)).astype(np.uint32))
    mx.eval(xe, weq, wes, web, lhs, rhs)
    row("gather_qmm 4-bit, 8 tokens x 8 of 64 experts 1408x2048 bf16",
        ev(lambda: mx.gather_qmm(xe, weq, wes, web, lhs_indices=lhs, rhs_indices=rhs,
                                 stream=mx.gpu)),
        ev(lambda: mx.gather_qmm(xe, weq, wes, web, lhs_indices=lhs, rhs_indices=rhs,
                                 stream=mx.cpu)))
    row("dequantize 4-bit 4096x4096 bf16", ev(lambda: mx.dequantize(wq, sc, bi, stream=mx.gpu)),
        ev(lambda: mx.dequantize(wq, sc, bi, stream=mx.cpu)))

    z = mx.array((rng.standard_normal((64, 65536)) + 1j * rng.standard_normal((64, 65536)))
                 .astype(np.complex64))
    mx.eval(z)
    tz = torch.from_numpy(np.array(z)).cuda() if HAVE_TORCH else None
    row("fft (64, 65536) c64", ev(lambda: mx.fft.fft(z, stream=mx.gpu)),
        ev(lambda: mx.fft.fft(z, stream=mx.cpu)),
        (lambda: torch.fft.fft(tz)) if HAVE_TORCH else None)
    row("rfft (64, 65536) f32", ev(lambda: mx.fft.rfft(x, stream=mx.gpu)),
        ev(lambda: mx.fft.rfft(x, stream=mx.cpu)),
        (lambda: torch.fft.rfft(tx)) if HAVE_TORCH else None)
    im = mx.array(rng.standard_normal((16, 1024, 1024)).astype(np.float32))
    mx.eval(im)
    tim = torch.from_numpy(np.array(im)).cuda() if HAVE_TORCH else None
    row("rfft2 (16, 1024, 1024) f32", ev(lambda: mx.fft.rfft2(im, stream=mx.gpu)),
        ev(lambda: mx.fft.rfft2(im, stream=mx.cpu)),
        (lambda: torch.fft.rfft2(tim)) if HAVE_TORCH else None)
    row("fft over axis 0 of (4096, 256) c64", ev(lambda: mx.fft.fft(z.reshape(4096, 1024)[:, :256],
                                                                   axis=0, stream=mx.gpu)))


def conv_and_losses():
    rng = np.random.default_rng(1)
    x = mx.array(rng.standard_normal((32, 56, 56, 64)).astype(np.float32))
    w = mx.array(rng.standard_normal((64, 3, 3, 64)).astype(np.float32) * 0.05)
    mx.eval(x, w)
    ev = lambda f: (lambda: mx.eval(f()))
    tx = tw = None
    if HAVE_TORCH:
        tx = torch.from_numpy(np.array(x)).cuda().permute(0, 3, 1, 2).contiguous(
            memory_format=torch.channels_last)
        tw = torch.from_numpy(np.array(w)).cuda().permute(0, 3, 1, 2).contiguous(
            memory_format=torch.channels_last)
        torch.backends.cudnn.allow_tf32 = False
    row("conv2d B32 56x56x64 3x3 f32 fwd (strict FP32; torch cuDNN no TF32)",
        ev(lambda: mx.conv2d(x, w, padding=1, stream=mx.gpu)), None,
        (lambda: torch.nn.functional.conv2d(tx, tw, padding=1)) if HAVE_TORCH else None)
    xb, wb = x.astype(mx.bfloat16), w.astype(mx.bfloat16)
    mx.eval(xb, wb)
    row("conv2d B32 56x56x64 3x3 bf16 fwd",
        ev(lambda: mx.conv2d(xb, wb, padding=1, stream=mx.gpu)), None,
        (lambda: torch.nn.functional.conv2d(tx.bfloat16(), tw.bfloat16(), padding=1))
        if HAVE_TORCH else None)

    def fwd_bwd():
        return mx.grad(lambda x, w: (mx.conv2d(x, w, padding=1, stream=mx.gpu) ** 2).sum(),
                       argnums=(0, 1))(x, w)

    def torch_fwd_bwd():
        a, b = tx.detach().requires_grad_(), tw.detach().requires_grad_()
        (torch.nn.functional.conv2d(a, b, padding=1) ** 2).sum().backward()
        return a.grad, b.grad

    row("conv2d same, fwd+bwd f32", ev(fwd_bwd), None, torch_fwd_bwd if HAVE_TORCH else None)
    logits = mx.array(rng.standard_normal((4096, 32000)).astype(np.float32))
    t = mx.array(rng.integers(0, 32000, 4096).astype(np.int32))
    mx.eval(logits, t)
    tl = torch.from_numpy(np.array(logits)).cuda() if HAVE_TORCH else None
    tt = torch.from_numpy(np.array(t)).long().cuda() if HAVE_TORCH else None
    row("fast.cross_entropy (4096, 32000) f32",
        ev(lambda: mx.fast.cross_entropy(logits, t, stream=mx.gpu)),
        ev(lambda: mx.fast.cross_entropy(logits, t, stream=mx.cpu)),
        (lambda: torch.nn.functional.cross_entropy(tl, tt, reduction="none"))
        if HAVE_TORCH else None)

    for T in (1, 1024):
        q = mx.array(rng.standard_normal((1, T, 16, 128)).astype(np.float32) * 0.1)
        v = mx.array(rng.standard_normal((1, T, 32, 128)).astype(np.float32))
        g = mx.array(rng.uniform(0.9, 1.0, (1, T, 32)).astype(np.float32))
        b = mx.array(rng.uniform(0, 1, (1, T, 32)).astype(np.float32))
        s0 = mx.zeros((1, 32, 128, 128))
        mx.eval(q, v, g, b, s0)
        row(f"fast.gated_delta_update T={T} Hk=16 Hv=32 D=128 f32",
            ev(lambda: mx.fast.gated_delta_update(q, q, v, g, b, s0, stream=mx.gpu)),
            ev(lambda: mx.fast.gated_delta_update(q, q, v, g, b, s0, stream=mx.cpu)))


if __name__ == "__main__":
    conv_and_losses()
    main()
