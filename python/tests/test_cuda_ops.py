"""GPU kernels of sort_large.cpp, quantized.cpp, fft.cpp, conv.cpp,
cross_entropy.cpp and delta_rule.cpp against the CPU: sort/argsort of rows of
any length (stable order, NaN last), argpartition and topk; affine quantized
matmul (2-8 bits, both layouts, few and many rows), gather_qmm, quantize and
dequantize (bit for bit); fft/ifft/rfft/irfft and their n-d forms, hadamard_transform
(bit for bit); convolutions (1-3-d, strides, padding, dilations, groups,
flip, transposed, gradients); mx.fast.cross_entropy and
mx.fast.gated_delta_update. GPU tests skip where no GPU is present."""

import gc
import os
import subprocess
import sys

import numpy as np
import pytest

from _backend import mx

HAS_GPU = mx.is_available(mx.gpu)
pytestmark = pytest.mark.skipif(
    not HAS_GPU, reason="no GPU here: the CUDA backend found no device (run scripts/gpu.sh)"
)


def to_np(a):
    return np.array(a.astype(mx.float32)) if a.dtype == mx.bfloat16 else np.array(a)


def both(f):
    g, c = f(mx.gpu), f(mx.cpu)
    mx.eval(g, c)
    return to_np(g), to_np(c)


# --- sort / argsort / argpartition / topk ----------------------------------

SORT_DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64",
               "uint32", "bool_"]


@pytest.mark.parametrize("dtype", SORT_DTYPES)
@pytest.mark.parametrize("shape,axis", [((5000,), 0), ((3, 4097), 1), ((2, 10000), -1),
                                        ((3, 6000, 2), 1), ((6000, 3), 0), ((70001,), 0)])
def test_long_sort_and_argsort_match_cpu(dtype, shape, axis):
    rng = np.random.default_rng(sum(shape) + axis)
    h = rng.integers(-50, 51, size=shape)  # many ties: argsort must be the stable order
    x = mx.array(h).astype(getattr(mx, dtype))
    g, c = both(lambda s: mx.sort(x, axis=axis, stream=s))
    np.testing.assert_array_equal(g, c)
    g, c = both(lambda s: mx.argsort(x, axis=axis, stream=s))
    np.testing.assert_array_equal(g, c)


@pytest.mark.parametrize("n", [4097, 2**17 + 3])
def test_long_sort_nan_and_infinities_last_like_the_cpu(n):
    rng = np.random.default_rng(n)
    h = rng.standard_normal(n).astype(np.float32)
    h[rng.integers(0, n, 50)] = np.nan
    h[rng.integers(0, n, 20)] = np.inf
    h[rng.integers(0, n, 20)] = -np.inf
    h[rng.integers(0, n, 20)] = -0.0
    h[rng.integers(0, n, 20)] = 0.0
    x = mx.array(h)
    v, c = both(lambda s: mx.sort(x, stream=s))
    np.testing.assert_array_equal(v, c)
    g, c = both(lambda s: mx.argsort(x, stream=s))
    np.testing.assert_array_equal(g, c)
    nans = int(np.isnan(h).sum())
    assert np.isnan(v[n - nans:]).all() and not np.isnan(v[: n - nans]).any()


def test_long_sort_of_a_strided_view():
    h = np.random.default_rng(3).standard_normal((5000, 3)).astype(np.float32)
    x = mx.transpose(mx.array(h))  # rows of 5000 with stride 3
    g, c = both(lambda s: mx.argsort(x, axis=1, stream=s))
    np.testing.assert_array_equal(g, c)
    np.testing.assert_array_equal(g, np.argsort(h.T, axis=1, kind="stable"))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64", "uint8"])
@pytest.mark.parametrize("shape,axis,kth", [((100,), 0, 37), ((7, 3000), 1, 2999), ((7, 3000), 1, 0),
                                            ((5, 9000), -1, 4500), ((9000, 3), 0, 10)])
def test_argpartition_and_partition_are_valid_partitions(dtype, shape, axis, kth):
    rng = np.random.default_rng(kth + sum(shape))
    h = rng.integers(-100, 101, size=shape)
    x = mx.array(h).astype(getattr(mx, dtype))
    idx = mx.argpartition(x, kth, axis=axis, stream=mx.gpu)
    part = mx.partition(x, kth, axis=axis, stream=mx.gpu)
    ref = mx.partition(x, kth, axis=axis, stream=mx.cpu)
    mx.eval(idx, part, ref)
    idx, part, ref, hx = np.array(idx), to_np(part), to_np(ref), to_np(x)
    ax = axis % len(shape)
    # A permutation of each line, and the values it picks are `partition`'s.
    np.testing.assert_array_equal(np.sort(idx, axis=ax),
                                  np.broadcast_to(np.arange(shape[ax]).reshape(
                                      [-1 if i == ax else 1 for i in range(len(shape))]), shape))
    np.testing.assert_array_equal(np.take_along_axis(hx, idx, axis=ax), part)
    pivot = np.take(part, [kth], axis=ax)
    np.testing.assert_array_equal(pivot, np.take(ref, [kth], axis=ax))
    assert (np.take(part, range(kth), axis=ax) <= pivot).all()
    assert (np.take(part, range(kth + 1, shape[ax]), axis=ax) >= pivot).all()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
@pytest.mark.parametrize("shape,axis,k", [((50000,), 0, 50), ((4, 32000), 1, 1), ((4, 32000), 1, 200),
                                          ((3, 100), -1, 100), ((600, 5), 0, 7)])
def test_topk_values_match_cpu(dtype, shape, axis, k):
    rng = np.random.default_rng(k + sum(shape))
    h = rng.integers(-1000, 1001, size=shape)
    x = mx.array(h).astype(getattr(mx, dtype))
    g, c = both(lambda s: mx.topk(x, k, axis=axis, stream=s))
    np.testing.assert_array_equal(np.sort(g, axis=axis), np.sort(c, axis=axis))


def test_topk_with_nan_takes_nan_as_largest():
    h = np.arange(10000, dtype=np.float32)
    h[[5, 700]] = np.nan
    g, c = both(lambda s: mx.topk(mx.array(h), 3, stream=s))
    np.testing.assert_array_equal(np.sort(g), np.sort(c))
    assert np.isnan(g).sum() == 2


# --- quantized --------------------------------------------------------------

QTOL = {"float32": 2e-4, "float16": 2e-2, "bfloat16": 8e-2}


def quantized(shape, group_size, bits, dtype, seed):
    w = mx.array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
    w = w.astype(getattr(mx, dtype))
    return mx.quantize(w, group_size=group_size, bits=bits, stream=mx.cpu)


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_quantize_is_bit_identical_to_cpu(bits, group_size, dtype):
    h = np.random.default_rng(bits).standard_normal((24, 256)).astype(np.float32)
    h[3, :group_size] = 0.0  # a flat group: the eps scale
    h[4, 5] = np.nan
    h[5, :group_size] = -2.0
    w = mx.array(h).astype(getattr(mx, dtype))
    gq = mx.quantize(w, group_size=group_size, bits=bits, stream=mx.gpu)
    cq = mx.quantize(w, group_size=group_size, bits=bits, stream=mx.cpu)
    mx.eval(gq, cq)
    for g, c in zip(gq, cq):
        np.testing.assert_array_equal(to_np(g), to_np(c))


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_dequantize_is_bit_identical_to_cpu(bits, group_size, dtype):
    wq, sc, bi = quantized((48, 256), group_size, bits, dtype, bits * group_size)
    g, c = both(lambda s: mx.dequantize(wq, sc, bi, group_size=group_size, bits=bits, stream=s))
    np.testing.assert_array_equal(g, c)


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("m", [1, 5, 40])  # 40 rows: dequantize + GEMM
def test_quantized_matmul_matches_cpu(bits, group_size, transpose, m):
    k_dim, n_dim = 512, 384
    shape = (n_dim, k_dim) if transpose else (k_dim, n_dim)
    wq, sc, bi = quantized(shape, group_size, bits, "float32", bits + group_size)
    x = mx.array(np.random.default_rng(m).standard_normal((m, k_dim)).astype(np.float32))
    g, c = both(lambda s: mx.quantized_matmul(x, wq, sc, bi, transpose=transpose,
                                              group_size=group_size, bits=bits, stream=s))
    scale = np.abs(c).max() + 1.0
    np.testing.assert_allclose(g / scale, c / scale, rtol=0, atol=QTOL["float32"])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_quantized_matmul_half_types_and_batches(dtype):
    wq, sc, bi = quantized((1024, 2048), 64, 4, dtype, 11)
    x = mx.array(np.random.default_rng(2).standard_normal((2, 3, 2048)).astype(np.float32))
    x = x.astype(getattr(mx, dtype))
    g, c = both(lambda s: mx.quantized_matmul(x, wq, sc, bi, stream=s))
    assert g.shape == (2, 3, 1024)
    scale = np.abs(c).max() + 1.0
    np.testing.assert_allclose(g / scale, c / scale, rtol=0, atol=QTOL[dtype])


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gather_qmm_matches_cpu(bits, dtype):
    wq, sc, bi = quantized((6, 256, 512), 64, bits, dtype, bits)
    x = rand((4, 1, 512), 3, dtype)
    lhs = mx.arange(4, dtype=mx.uint32).reshape(4, 1)
    rhs = mx.array(np.array([[0, 5], [2, 2], [1, 3], [5, 4]], dtype=np.uint32))
    g, c = both(lambda s: mx.gather_qmm(x, wq, sc, bi, lhs_indices=lhs, rhs_indices=rhs,
                                        group_size=64, bits=bits, stream=s))
    assert g.shape == (4, 2, 1, 256)
    scale = np.abs(c).max() + 1.0
    np.testing.assert_allclose(g / scale, c / scale, rtol=0, atol=QTOL[dtype])


def test_gather_qmm_out_of_range_raises_like_the_cpu():
    wq, sc, bi = quantized((3, 64, 128), 64, 4, "float32", 0)
    x = rand((2, 1, 128), 1)
    lhs = mx.array(np.array([0, 1], dtype=np.uint32))
    for rhs in (mx.array(np.array([0, 3], dtype=np.uint32)),  # host indices: checked first
                mx.add(mx.array(np.array([0, 2], dtype=np.uint32)), mx.array(1, mx.uint32),
                       stream=mx.gpu)):  # device indices: the kernel's flag
        for s in (mx.gpu, mx.cpu):
            with pytest.raises(Exception, match="Index out of range: lhs index 1 for 2 matrices"):
                mx.eval(mx.gather_qmm(x, wq, sc, bi, lhs_indices=lhs, rhs_indices=rhs,
                                      group_size=64, bits=4, stream=s))


def test_quantized_matmul_of_a_strided_x():
    wq, sc, bi = quantized((256, 128), 64, 8, "float32", 5)
    xt = mx.array(np.random.default_rng(9).standard_normal((128, 6)).astype(np.float32)).T
    g, c = both(lambda s: mx.quantized_matmul(xt, wq, sc, bi, group_size=64, bits=8, stream=s))
    np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-4)


# --- FFT --------------------------------------------------------------------


def cplx(shape, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def close(g, c, tol=2e-5):
    scale = np.abs(c).max() + 1.0
    np.testing.assert_allclose(g / scale, c / scale, rtol=0, atol=tol)


@pytest.mark.parametrize("shape,axis", [((64,), -1), ((6, 100), 1), ((6, 100), 0), ((3, 17, 5), 1),
                                        ((4, 1000), -1), ((1, 7), 0)])
def test_fft_ifft_rfft_irfft_along_one_axis(shape, axis):
    z = mx.array(cplx(shape, sum(shape)))
    r = mx.array(np.random.default_rng(1).standard_normal(shape).astype(np.float32))
    close(*both(lambda s: mx.fft.fft(z, axis=axis, stream=s)))
    close(*both(lambda s: mx.fft.ifft(z, axis=axis, stream=s)))
    close(*both(lambda s: mx.fft.fft(r, axis=axis, stream=s)))  # real input, complex transform
    close(*both(lambda s: mx.fft.rfft(r, axis=axis, stream=s)))
    spec = mx.fft.rfft(r, axis=axis, stream=mx.cpu)
    n = shape[axis]
    close(*both(lambda s: mx.fft.irfft(spec, n=n, axis=axis, stream=s)))
    close(*both(lambda s: mx.fft.fft(z, n=n + 3, axis=axis, stream=s)))  # padded
    close(*both(lambda s: mx.fft.rfft(r, n=max(1, n - 1), axis=axis, stream=s)))  # cropped


@pytest.mark.parametrize("shape,axes", [((8, 16), (0, 1)), ((3, 8, 16), (1, 2)), ((4, 6, 10), (0, 2)),
                                        ((4, 6, 10), (2, 0)), ((2, 3, 4, 5), (1, 2, 3)),
                                        ((5, 6, 7), None)])
def test_fft_n_dimensional_forms(shape, axes):
    z = mx.array(cplx(shape, 7))
    r = mx.array(np.random.default_rng(8).standard_normal(shape).astype(np.float32))
    close(*both(lambda s: mx.fft.fftn(z, axes=axes, stream=s)))
    close(*both(lambda s: mx.fft.ifftn(z, axes=axes, stream=s)))
    close(*both(lambda s: mx.fft.rfftn(r, axes=axes, stream=s)))
    spec = mx.fft.rfftn(r, axes=axes, stream=mx.cpu)
    axes = list(axes) if axes is not None else list(range(len(shape)))
    sizes = [shape[a] for a in axes]
    close(*both(lambda s: mx.fft.irfftn(spec, s=sizes, axes=axes, stream=s)))


def test_real_fft_of_odd_strided_lines_and_odd_offset_views():
    # Lines along a middle axis whose slices start at odd float offsets (cuFFT
    # refuses those: the CPU runs them) and a view starting at an odd offset.
    r = mx.array(np.random.default_rng(2).standard_normal((3, 17, 5)).astype(np.float32))
    close(*both(lambda s: mx.fft.rfft(r, axis=1, stream=s)))
    spec = mx.fft.rfft(r, axis=1, stream=mx.cpu)
    close(*both(lambda s: mx.fft.irfft(spec, n=17, axis=1, stream=s)))
    flat = mx.array(np.random.default_rng(3).standard_normal(1001).astype(np.float32))
    close(*both(lambda s: mx.fft.rfft(flat[1:], stream=s)))
    close(*both(lambda s: mx.fft.rfft2(flat[1:].reshape(8, 125), stream=s)))


def test_fft_norms_and_numpy():
    h = cplx((5, 64), 4)
    z = mx.array(h)
    for norm in ("backward", "ortho", "forward"):
        close(*both(lambda s: mx.fft.fft(z, norm=norm, stream=s)))
        close(*both(lambda s: mx.fft.ifft(z, norm=norm, stream=s)))
    close(np.array(mx.fft.fft2(z, stream=mx.gpu)), np.fft.fft2(h), 1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("n", [1, 2, 64, 1024, 8192])
def test_hadamard_is_bit_identical_to_cpu(dtype, n):
    x = mx.array(np.random.default_rng(n).standard_normal((5, n)).astype(np.float32))
    x = x.astype(getattr(mx, dtype))
    g, c = both(lambda s: mx.hadamard_transform(x, stream=s))
    np.testing.assert_array_equal(g, c)
    g, c = both(lambda s: mx.hadamard_transform(x, scale=0.25, stream=s))
    np.testing.assert_array_equal(g, c)


# --- conv -------------------------------------------------------------------

CTOL = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 3e-2}


def rand(shape, seed, dtype="float32"):
    a = mx.array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
    return a.astype(getattr(mx, dtype))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("case", [
    dict(nd=1, x=(2, 50, 6), w=(8, 5, 6), stride=2, padding=3, dilation=2, groups=1),
    dict(nd=2, x=(2, 17, 19, 8), w=(12, 3, 3, 8), stride=1, padding=1, dilation=1, groups=1),
    dict(nd=2, x=(3, 16, 16, 8), w=(8, 3, 3, 2), stride=2, padding=0, dilation=1, groups=4),
    dict(nd=2, x=(2, 9, 9, 16), w=(32, 1, 1, 16), stride=1, padding=0, dilation=1, groups=1),
    dict(nd=3, x=(1, 6, 7, 8, 4), w=(5, 2, 3, 2, 4), stride=1, padding=1, dilation=1, groups=1),
])
def test_conv_forward_matches_cpu(dtype, case):
    x, w = rand(case["x"], 1, dtype), rand(case["w"], 2, dtype)
    f = {1: mx.conv1d, 2: mx.conv2d, 3: mx.conv3d}[case["nd"]]
    g, c = both(lambda s: f(x, w, stride=case["stride"], padding=case["padding"],
                            dilation=case["dilation"], groups=case["groups"], stream=s))
    close(g, c, CTOL[dtype])


def test_conv_general_flip_input_dilation_and_transpose_match_cpu():
    x, w = rand((2, 11, 13, 6), 3), rand((4, 3, 2, 6), 4)
    close(*both(lambda s: mx.conv_general(x, w, stride=(2, 1), padding=([1, 0], [2, 1]),
                                          kernel_dilation=(1, 2), input_dilation=(2, 3), flip=True,
                                          stream=s)), 1e-4)
    wt = rand((6, 3, 3, 4), 5)
    xt = rand((2, 7, 8, 4), 6)
    close(*both(lambda s: mx.conv_transpose2d(xt, wt, stride=2, padding=1, stream=s)), 1e-4)


def test_conv_forms_cudnn_takes_and_declines_match_cpu():
    # Flip without input dilation (cuDNN's convolution mode), padding whose
    # high side differs but leaves cuDNN's output size (taken), padding that
    # changes it (declined: im2col), float64, a 3-d dilated and a 2-d grouped case.
    x, w = rand((2, 12, 11, 6), 9), rand((8, 3, 3, 6), 10)
    close(*both(lambda s: mx.conv_general(x, w, stride=1, padding=1, flip=True, stream=s)), 1e-4)
    close(*both(lambda s: mx.conv_general(x, w, stride=2, padding=([1, 1], [0, 1]), stream=s)),
          1e-4)
    close(*both(lambda s: mx.conv_general(x, w, stride=1, padding=([2, 0], [0, 1]), stream=s)),
          1e-4)
    x64, w64 = x.astype(mx.float64), w.astype(mx.float64)
    close(*both(lambda s: mx.conv2d(x64, w64, stride=2, padding=1, stream=s)), 1e-10)
    x3, w3 = rand((2, 7, 8, 9, 8), 11), rand((6, 3, 2, 3, 8), 12)
    close(*both(lambda s: mx.conv3d(x3, w3, padding=1, dilation=(1, 2, 1), stream=s)), 1e-4)
    xg, wg = rand((2, 9, 10, 8), 13), rand((8, 3, 3, 2), 14)
    close(*both(lambda s: mx.conv2d(xg, wg, padding=1, dilation=2, groups=4, stream=s)), 1e-4)


@pytest.mark.loom_only
def test_conv_with_and_without_cudnn_agree():
    # LOOM_CUDNN=0 forces the im2col + GEMM path; both must match the CPU.
    code = (
        "import numpy as np, loom.core as mx\n"
        "r = np.random.default_rng(3)\n"
        "x = mx.array(r.standard_normal((4, 32, 32, 16)).astype(np.float32))\n"
        "w = mx.array(r.standard_normal((32, 3, 3, 16)).astype(np.float32))\n"
        "g = mx.conv2d(x, w, stride=1, padding=1, stream=mx.gpu)\n"
        "c = mx.conv2d(x, w, stride=1, padding=1, stream=mx.cpu)\n"
        "print(float(mx.abs(g - c).max()) / float(mx.abs(c).max()))\n"
    )
    for flag in ("1", "0"):
        env = dict(os.environ, LOOM_CUDNN=flag)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert float(out.stdout.strip().splitlines()[-1]) < 1e-5


def test_conv_gradients_match_cpu():
    x, w = rand((2, 12, 12, 8), 7), rand((16, 3, 3, 8), 8)

    def grads(s):
        def loss(x, w):
            return (mx.conv2d(x, w, stride=2, padding=1, stream=s) ** 2).sum(stream=s)
        return mx.grad(loss, argnums=(0, 1))(x, w)

    gx, gw = grads(mx.gpu)
    cx, cw = grads(mx.cpu)
    close(to_np(gx), to_np(cx), 1e-4)
    close(to_np(gw), to_np(cw), 1e-4)


# The gradient nodes (ConvolutionWeightGrad, ConvolutionInputGrad) run cuDNN's
# backward filter / backward data where it takes the form and their composite
# (im2col + GEMM convolutions) where it does not: input dilation, padding that
# changes cuDNN's output size, negative padding.
CONV_GRAD_CASES = [
    dict(x=(2, 50, 6), w=(8, 5, 6), stride=2, padding=3, kernel_dilation=2),
    dict(x=(2, 17, 19, 8), w=(12, 3, 3, 8), stride=1, padding=1),
    dict(x=(3, 16, 16, 8), w=(8, 3, 3, 2), stride=2, padding=0, groups=4),
    dict(x=(2, 10, 11, 8), w=(8, 3, 3, 1), stride=2, padding=1, groups=8),
    dict(x=(2, 12, 11, 6), w=(8, 3, 3, 6), stride=2, padding=([1, 1], [0, 1]), flip=True),
    dict(x=(2, 12, 11, 6), w=(8, 3, 2, 6), stride=(2, 1), padding=([2, 0], [0, 1])),
    dict(x=(2, 12, 11, 6), w=(4, 3, 3, 6), stride=1, padding=([-1, 1], [1, -1])),
    dict(x=(2, 9, 9, 16), w=(32, 1, 1, 16), stride=1, padding=0),
    dict(x=(2, 9, 9, 16), w=(8, 1, 1, 16), stride=2, padding=0),
    dict(x=(1, 6, 7, 8, 4), w=(5, 2, 3, 2, 4), stride=(1, 2, 1), padding=1,
         kernel_dilation=(1, 1, 2)),
    dict(x=(2, 7, 8, 4), w=(6, 3, 3, 4), stride=1, padding=2, input_dilation=2),
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("case", range(len(CONV_GRAD_CASES)))
def test_conv_gradient_forms_match_cpu(dtype, case):
    kw = dict(CONV_GRAD_CASES[case])
    x, w = rand(kw.pop("x"), 20 + case, dtype), rand(kw.pop("w"), 40 + case, dtype)
    shape = mx.conv_general(x, w, **kw, stream=mx.cpu).shape
    cot = rand(shape, 60 + case, dtype)

    def grads(s):
        f = lambda a, b: mx.conv_general(a, b, **kw, stream=s)
        return mx.vjp(f, [x, w], [cot])[1]

    for g, c in zip(grads(mx.gpu), grads(mx.cpu)):
        mx.eval(g, c)
        assert g.shape == c.shape and g.dtype == c.dtype
        close(to_np(g), to_np(c), {"float32": 1e-4, "bfloat16": 3e-2}[dtype])


def test_conv_gradient_float64_and_second_order_match_cpu():
    x, w = rand((2, 9, 10, 4), 70), rand((6, 3, 3, 2), 71)
    x64, w64 = x.astype(mx.float64), w.astype(mx.float64)

    def loss(s, a, b):
        return (mx.conv2d(a, b, stride=2, padding=1, groups=2, stream=s) ** 2).sum(stream=s)

    g = mx.grad(lambda a, b: loss(mx.gpu, a, b), argnums=(0, 1))(x64, w64)
    c = mx.grad(lambda a, b: loss(mx.cpu, a, b), argnums=(0, 1))(x64, w64)
    for a, b in zip(g, c):
        close(np.array(a), np.array(b), 1e-10)
    # Gradients of the gradient nodes (their composite's), on the device.
    def gg(s):
        inner = mx.grad(lambda a, b: loss(s, a, b), argnums=1)
        return mx.grad(lambda a: (inner(a, w) ** 2).sum(stream=s))(x)
    close(to_np(gg(mx.gpu)), to_np(gg(mx.cpu)), 1e-4)


@pytest.mark.loom_only
def test_conv_gradients_with_and_without_cudnn_agree():
    # cuDNN's backward kernels (the default), the composite
    # (LOOM_CUDNN_BACKWARD=0), and LOOM_CUDNN=0 (no cuDNN at all): all must
    # match the CPU.
    for flags in ({"LOOM_CUDNN": "1", "LOOM_CUDNN_BACKWARD": "1"},
                  {"LOOM_CUDNN": "1", "LOOM_CUDNN_BACKWARD": "0"}, {"LOOM_CUDNN": "0"}):
        env = dict(os.environ, **flags)
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            os.path.abspath(__file__) + "::test_conv_gradient_forms_match_cpu"],
                           env=env, capture_output=True, text=True, timeout=600,
                           cwd=os.path.dirname(os.path.abspath(__file__)))
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


# --- mx.fast.cross_entropy ----------------------------------------------------


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-5), ("float16", 1e-3), ("bfloat16", 1e-2),
                                       ("float64", 1e-12)])
@pytest.mark.parametrize("shape", [(7, 10), (3, 5, 1000), (2, 50000), (4, 1)])
def test_cross_entropy_matches_cpu(dtype, tol, shape):
    rng = np.random.default_rng(shape[-1])
    logits = rand(shape, shape[-1], dtype) * 4
    targets = mx.array(rng.integers(-shape[-1], shape[-1], size=shape[:-1]).astype(np.int32))
    g, c = both(lambda s: mx.fast.cross_entropy(logits, targets, stream=s))
    np.testing.assert_allclose(g, c, rtol=tol, atol=tol)


def test_cross_entropy_edges_and_gradient_match_cpu():
    inf, nan = float("inf"), float("nan")
    logits = mx.array([[1.0, 2.0, 3.0], [-inf, 0.0, 1.0], [nan, 1.0, 2.0], [1.0, 1.0, 1.0]])
    targets = mx.array([2, 0, 1, 7])  # the last one is outside its row: NaN
    g, c = both(lambda s: mx.fast.cross_entropy(logits, targets, stream=s))
    np.testing.assert_allclose(g, c, rtol=1e-6, equal_nan=True)
    x = rand((6, 300), 3)
    t = mx.array(np.arange(6, dtype=np.int32) * 40)

    def grad(s):
        return mx.grad(lambda x: mx.fast.cross_entropy(x, t, stream=s).sum(stream=s))(x)

    close(*both(grad), 1e-6)
    # Strided logits and targets (the kernel takes any layout since it copies
    # them row-major first): every other column and target, a transposed matrix.
    # Negative targets count from the end of the row.
    wide = rand((8, 600), 5) * 4
    tall = rand((300, 8), 6) * 4
    ts = mx.array((np.arange(16, dtype=np.int32) * 37) % 300 - 100)
    for lg, tg in [(wide[:, ::2], ts[::2]), (mx.transpose(tall), ts[1::2])]:
        assert lg.shape == (8, 300) and tg.shape == (8,)
        g, c = both(lambda s, lg=lg, tg=tg: mx.fast.cross_entropy(lg, tg, stream=s))
        np.testing.assert_allclose(g, c, rtol=1e-5, atol=1e-5)


# --- mx.fast.gated_delta_update ------------------------------------------------


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-4), ("bfloat16", 3e-2)])
@pytest.mark.parametrize("with_state,with_mask,per_key,dk", [
    (False, False, False, 8), (True, True, False, 64), (True, False, True, 128),
    (False, True, True, 200), (True, True, True, 33)])
def test_gated_delta_update_matches_cpu(dtype, tol, with_state, with_mask, per_key, dk):
    rng = np.random.default_rng(dk)
    Bz, T, Hk, Hv, Dv = 2, 7, 2, 4, 24
    q, k = rand((Bz, T, Hk, dk), 1, dtype), rand((Bz, T, Hk, dk), 2, dtype) * (0.5 / dk**0.5)
    v = rand((Bz, T, Hv, Dv), 3, dtype)
    g = mx.array(rng.uniform(0.5, 1.0, (Bz, T, Hv) + ((dk,) if per_key else ())).astype(np.float32))
    b = mx.array(rng.uniform(0, 1, (Bz, T, Hv)).astype(np.float32))
    g, b = g.astype(getattr(mx, dtype)), b.astype(getattr(mx, dtype))
    s0 = rand((Bz, Hv, Dv, dk), 4) if with_state else None
    m = mx.array(rng.random((Bz, T)) > 0.3) if with_mask else None

    def run(s):
        return mx.fast.gated_delta_update(q, k, v, g, b, s0, m, stream=s)

    (gy, gs), (cy, cs) = run(mx.gpu), run(mx.cpu)
    close(to_np(gy), to_np(cy), tol)
    close(to_np(gs), to_np(cs), tol)


# --- no CPU fallback, no leak ------------------------------------------------


def test_these_ops_run_on_gpu_kernels():
    # Not the CPU fallback: it warns once per primitive when it runs.
    code = (
        "from _backend import mx\n"
        "x = mx.random.normal((4, 9000), key=mx.random.key(0))\n"
        "w = mx.random.normal((256, 512), key=mx.random.key(1))\n"
        "wq, sc, bi = mx.quantize(w, stream=mx.gpu)\n"
        "mx.eval(x, wq, sc, bi)\n"
        "with mx.stream(mx.gpu):\n"
        "    outs = [mx.sort(x), mx.argsort(x), mx.argpartition(x, 5), mx.topk(x, 10),\n"
        "            mx.quantized_matmul(x[:, :512], wq, sc, bi),\n"
        "            mx.dequantize(wq, sc, bi), mx.fft.fft(x), mx.fft.irfft(mx.fft.rfft(x)),\n"
        "            mx.conv2d(x.reshape(4, 30, 300, 1), mx.ones((2, 3, 3, 1))),\n"
        "            mx.fast.cross_entropy(x, mx.array([1, 2, 3, 4])),\n"
        "            mx.gather_qmm(x[:, None, :512], wq[None], sc[None], bi[None],\n"
        "                          rhs_indices=mx.zeros((4,), mx.uint32)),\n"
        "            *mx.fast.gated_delta_update(*(x[:, :1024].reshape(1, 4, 8, 128),) * 3,\n"
        "                                        mx.ones((1, 4, 8)), mx.ones((1, 4, 8))),\n"
        "            mx.hadamard_transform(x[:, :4096]),\n"
        "            mx.take_along_axis(x, mx.argpartition(x, 5)[:, :5], axis=1)]\n"
        "mx.eval(outs)\n"
        "print('ok')\n"
    )
    env = dict(os.environ)
    env.pop("LOOM_CUDA_FALLBACK_WARN", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=os.path.dirname(os.path.abspath(__file__)), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout
    for name in ("Sort", "ArgSort", "ArgPartition", "ArgTopK", "QuantizedMatmul", "Dequantize",
                 "Quantize", "FFT", "Convolution", "CrossEntropy", "GatherQMM",
                 "GatedDeltaUpdate", "Hadamard", "Gather"):
        assert f"warning: {name} " not in r.stderr, r.stderr


def test_device_memory_returns_to_baseline_after_sorts_ffts_and_quantized():
    wq, sc, bi = quantized((256, 512), 64, 4, "float32", 1)
    x = mx.array(np.random.default_rng(0).standard_normal((3, 9000)).astype(np.float32))

    def cycle():
        with mx.stream(mx.gpu):
            outs = [mx.argsort(x), mx.topk(x, 9), mx.fft.rfft(x), mx.fft.fft2(x),
                    mx.quantized_matmul(x[:, :512], wq, sc, bi), mx.dequantize(wq, sc, bi),
                    mx.conv1d(x.reshape(3, 9000, 1), mx.ones((4, 5, 1)))]
        mx.eval(outs)

    for _ in range(3):
        cycle()
    gc.collect()
    mx.synchronize()
    base = mx.get_active_memory()
    for _ in range(10):
        cycle()
        gc.collect()
        mx.synchronize()
        assert mx.get_active_memory() == base
