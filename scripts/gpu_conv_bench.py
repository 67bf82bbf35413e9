"""GPU timings of convolution forward + backward (the gradient nodes:
cuDNN's backward data and backward filter) next to PyTorch on the same GPU,
float32 (strict FP32 on both sides: torch's cuDNN TF32 off) and bfloat16,
channels-last. Each row: the whole fwd+bwd, then the weight gradient and
the input gradient alone (vjp of the convolution with a fixed cotangent).
Median of repeats after warm-up, device work synchronised around each
clock read (gpu_ops_bench.row)."""

import numpy as np

import loom.core as mx
from gpu_ops_bench import HAVE_TORCH, row

if HAVE_TORCH:
    import torch

    torch.backends.cudnn.allow_tf32 = False

# (name, x shape NHWC, w shape OHWI, stride, padding)
SHAPES = [
    ("B32 56x56x64 3x3", (32, 56, 56, 64), (64, 3, 3, 64), 1, 1),
    ("B32 56x56x64->128 3x3 s2", (32, 56, 56, 64), (128, 3, 3, 64), 2, 1),
    ("B32 28x28x128->512 1x1", (32, 28, 28, 128), (512, 1, 1, 128), 1, 0),
    ("B32 14x14x256 3x3", (32, 14, 14, 256), (256, 3, 3, 256), 1, 1),
]


def to_torch(a):
    t = torch.from_numpy(np.array(a.astype(mx.float32))).cuda().permute(0, 3, 1, 2)
    return t.contiguous(memory_format=torch.channels_last)


def case(name, xs, ws, stride, padding, dtype):
    rng = np.random.default_rng(1)
    x = mx.array(rng.standard_normal(xs).astype(np.float32)).astype(dtype)
    w = mx.array((rng.standard_normal(ws) * 0.05).astype(np.float32)).astype(dtype)
    f = lambda a, b: mx.conv2d(a, b, stride=stride, padding=padding, stream=mx.gpu)
    cot = mx.ones(f(x, w).shape, dtype=dtype)
    mx.eval(x, w, cot)
    ev = lambda g: (lambda: mx.eval(g()))
    tdt = {mx.float32: "float32", mx.bfloat16: "bfloat16"}[dtype]
    tx = tw = tcot = None
    if HAVE_TORCH:
        tt = getattr(torch, tdt)
        tx, tw = to_torch(x).to(tt), to_torch(w).to(tt)
        tcot = to_torch(cot).to(tt)
    conv = torch.nn.functional.conv2d if HAVE_TORCH else None

    def fwd_bwd():
        return mx.grad(lambda a, b: (f(a, b) ** 2).sum(), argnums=(0, 1))(x, w)

    def torch_fwd_bwd():
        a, b = tx.detach().requires_grad_(), tw.detach().requires_grad_()
        (conv(a, b, stride=stride, padding=padding) ** 2).sum().backward()
        return a.grad, b.grad

    tag = f"conv2d {name} {tdt}"
    row(f"{tag} fwd+bwd", ev(fwd_bwd), None, torch_fwd_bwd if HAVE_TORCH else None)
    row(f"{tag} weight grad", ev(lambda: mx.vjp(lambda b: f(x, b), [w], [cot])[1][0]), None,
        (lambda: torch.nn.grad.conv2d_weight(tx, tw.shape, tcot, stride=stride, padding=padding))
        if HAVE_TORCH else None)
    row(f"{tag} input grad", ev(lambda: mx.vjp(lambda a: f(a, w), [x], [cot])[1][0]), None,
        (lambda: torch.nn.grad.conv2d_input(tx.shape, tw, tcot, stride=stride, padding=padding))
        if HAVE_TORCH else None)


def main():
    for dtype in (mx.float32, mx.bfloat16):
        for name, xs, ws, stride, padding in SHAPES:
            case(name, xs, ws, stride, padding, dtype)


if __name__ == "__main__":
    main()
