"""Convolutions (conv1d/2d/3d, conv_general, conv_transpose1d/2d/3d, convolve)
against a direct NumPy reference in float64 over grids of strides, padding,
dilations and groups; gradients of input and weight against finite
differences; jvp; vmap; MLX's argument errors. The reference loops over kernel
taps and contracts channels per group; the transposed reference scatters
every input position through every tap (an independent formulation)."""

import gc
import itertools
import warnings

import numpy as np
import pytest

from _backend import IS_MLX, mx
from _helpers import assert_array, rng

# --- references --------------------------------------------------------------


def ref_conv(x, w, stride=1, lo=0, hi=0, kdil=1, idil=1, groups=1, flip=False):
    """conv_general in float64: x (N, *S, C), w (O, *K, C/groups)."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    nd = x.ndim - 2
    per = lambda v: [v] * nd if np.isscalar(v) else list(v)
    stride, lo, hi, kdil, idil = map(per, (stride, lo, hi, kdil, idil))
    # Negative padding crops the (undilated) input, as MLX does.
    crop = tuple([slice(None)] + [slice(max(0, -l), x.shape[i + 1] - max(0, -h))
                                  for i, (l, h) in enumerate(zip(lo, hi))] + [slice(None)])
    x = x[crop]
    lo = [max(0, l) for l in lo]
    hi = [max(0, h) for h in hi]
    dil_shape = [x.shape[0]] + [(s - 1) * d + 1 if s else 0
                                for s, d in zip(x.shape[1:-1], idil)] + [x.shape[-1]]
    xd = np.zeros(dil_shape)
    xd[tuple([slice(None)] + [slice(None, None, d) for d in idil] + [slice(None)])] = x
    xp = np.pad(xd, [(0, 0)] + list(zip(lo, hi)) + [(0, 0)])
    N, C, O = x.shape[0], x.shape[-1], w.shape[0]
    K = w.shape[1:-1]
    G = groups
    Cg, Og = C // G, O // G
    out_sp = [(xp.shape[i + 1] - (K[i] - 1) * kdil[i] - 1) // stride[i] + 1 for i in range(nd)]
    out = np.zeros([N] + out_sp + [G, Og])
    wg = w.reshape((G, Og) + tuple(K) + (Cg,))
    for tap in itertools.product(*[range(k) for k in K]):
        src = [K[i] - 1 - tap[i] if flip else tap[i] for i in range(nd)]
        sl = tuple([slice(None)] + [slice(src[i] * kdil[i],
                                          src[i] * kdil[i] + (out_sp[i] - 1) * stride[i] + 1,
                                          stride[i]) for i in range(nd)] + [slice(None)])
        patch = xp[sl].reshape([N] + out_sp + [G, Cg])
        wt = wg[(slice(None), slice(None)) + tap]  # (G, Og, Cg)
        out += np.einsum("...gc,goc->...go", patch, wt)
    return out.reshape([N] + out_sp + [O])


def ref_conv_transpose(x, w, stride=1, padding=0, dilation=1, output_padding=0, groups=1):
    """Transposed convolution by scattering: out[i*s + k*d - p] += x[i] . w[:, k]."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    nd = x.ndim - 2
    per = lambda v: [v] * nd if np.isscalar(v) else list(v)
    s, p, d, op = map(per, (stride, padding, dilation, output_padding))
    N, C, O = x.shape[0], x.shape[-1], w.shape[0]
    K = w.shape[1:-1]
    G = groups
    Cg, Og = C // G, O // G
    I = x.shape[1:-1]
    out_sp = [(I[i] - 1) * s[i] - 2 * p[i] + d[i] * (K[i] - 1) + op[i] + 1 for i in range(nd)]
    out = np.zeros([N] + out_sp + [O])
    xg = x.reshape(x.shape[:-1] + (G, Cg))
    wg = w.reshape((G, Og) + tuple(K) + (Cg,))
    for pos in itertools.product(*[range(n) for n in I]):
        for tap in itertools.product(*[range(k) for k in K]):
            dst = [pos[i] * s[i] + tap[i] * d[i] - p[i] for i in range(nd)]
            if all(0 <= dst[i] < out_sp[i] for i in range(nd)):
                v = np.einsum("ngc,goc->ngo", xg[(slice(None),) + pos], wg[(slice(None), slice(None)) + tap])
                out[(slice(None),) + tuple(dst)] += v.reshape(N, O)
    return out


def data(shape, seed):
    return rng(seed).standard_normal(shape).astype(np.float32)


def check(got, want, tol=2e-4):
    assert_array(got, want, rtol=tol, atol=tol)


# --- forward grids -----------------------------------------------------------

CONV1D = list(itertools.product([1, 2, 3], [0, 1, 2], [1, 2], [1, 2]))


@pytest.mark.parametrize("stride,padding,dilation,groups", CONV1D)
def test_conv1d_grid(stride, padding, dilation, groups):
    x = data((2, 11, 4), 1)
    w = data((6, 3, 4 // groups), 2)
    got = mx.conv1d(mx.array(x), mx.array(w), stride, padding, dilation, groups)
    check(got, ref_conv(x, w, stride, padding, padding, dilation, 1, groups))


CONV2D = list(itertools.product([(1, 1), (2, 1), (2, 3)], [(0, 0), (1, 2)], [(1, 1), (2, 1)], [1, 3]))


@pytest.mark.parametrize("stride,padding,dilation,groups", CONV2D)
def test_conv2d_grid(stride, padding, dilation, groups):
    x = data((2, 9, 8, 6), 3)
    w = data((6, 3, 2, 6 // groups), 4)
    got = mx.conv2d(mx.array(x), mx.array(w), stride=stride, padding=padding, dilation=dilation,
                    groups=groups)
    check(got, ref_conv(x, w, stride, padding, padding, dilation, 1, groups))


# MLX supports groups in 1-D and 2-D convolutions only.
CONV3D = list(itertools.product([1, (1, 2, 2)], [0, (1, 0, 2)], [1, (2, 1, 1)], [1]))


@pytest.mark.parametrize("stride,padding,dilation,groups", CONV3D)
def test_conv3d_grid(stride, padding, dilation, groups):
    x = data((2, 6, 5, 7, 4), 5)
    w = data((4, 2, 3, 2, 4 // groups), 6)
    got = mx.conv3d(mx.array(x), mx.array(w), stride=stride, padding=padding, dilation=dilation,
                    groups=groups)
    check(got, ref_conv(x, w, stride, padding, padding, dilation, 1, groups))


GENERAL = [
    # stride, (lo, hi), kernel_dilation, input_dilation, groups, flip
    (1, ([1, 2], [0, 1]), 1, 1, 1, False),
    (2, ([2, 0], [1, 3]), 1, 2, 1, True),
    ([1, 2], ([0, 1], [2, 0]), [2, 1], [3, 1], 2, False),
    (1, 1, 1, 2, 1, True),
    (3, 2, 2, 2, 2, True),
    (1, ([-1, 0], [0, -2]), 1, 1, 1, False),  # negative padding crops
]


@pytest.mark.parametrize("stride,padding,kdil,idil,groups,flip", GENERAL)
def test_conv_general(stride, padding, kdil, idil, groups, flip):
    x = data((2, 7, 8, 4), 7)
    w = data((4, 3, 2, 4 // groups), 8)
    lo, hi = padding if isinstance(padding, tuple) else (padding, padding)
    got = mx.conv_general(mx.array(x), mx.array(w), stride=stride, padding=padding,
                          kernel_dilation=kdil, input_dilation=idil, groups=groups, flip=flip)
    check(got, ref_conv(x, w, stride, lo, hi, kdil, idil, groups, flip))


def test_conv_general_padding_forms():
    x = mx.array(data((1, 5, 5, 3), 9))
    w = mx.array(data((2, 3, 3, 3), 10))
    a = mx.conv_general(x, w, padding=[1, 2])
    b = mx.conv_general(x, w, padding=([1, 2], [1, 2]))
    c = mx.conv_general(x, w, padding=[[1, 2], [1, 2]])
    assert a.shape == (1, 5, 7, 2)
    check(a, np.array(b))
    check(c, np.array(b))
    assert mx.conv_general(x, w, padding=[1]).shape == (1, 5, 5, 2)
    assert mx.conv_general(x, w, stride=[]).shape == (1, 3, 3, 2)


TRANSPOSE1D = list(itertools.product([1, 2, 3], [0, 1], [1, 2], [0, 1], [1, 2]))


@pytest.mark.parametrize("stride,padding,dilation,output_padding,groups", TRANSPOSE1D)
def test_conv_transpose1d_grid(stride, padding, dilation, output_padding, groups):
    x = data((2, 6, 4), 11)
    w = data((6, 3, 4 // groups), 12)
    got = mx.conv_transpose1d(mx.array(x), mx.array(w), stride, padding, dilation,
                              output_padding, groups)
    check(got, ref_conv_transpose(x, w, stride, padding, dilation, output_padding, groups))


@pytest.mark.parametrize("stride,padding,dilation,output_padding,groups", [
    (1, 0, 1, 0, 1), ((2, 1), (1, 0), 1, (1, 0), 1), (2, 1, (1, 2), 1, 2), ((3, 2), 0, 1, (2, 1), 1)])
def test_conv_transpose2d(stride, padding, dilation, output_padding, groups):
    x = data((2, 4, 5, 4), 13)
    w = data((4, 3, 2, 4 // groups), 14)
    got = mx.conv_transpose2d(mx.array(x), mx.array(w), stride=stride, padding=padding,
                              dilation=dilation, output_padding=output_padding, groups=groups)
    check(got, ref_conv_transpose(x, w, stride, padding, dilation, output_padding, groups))


@pytest.mark.parametrize("stride,padding,output_padding,groups", [
    (1, 0, 0, 1), (2, 1, 1, 1), ((1, 2, 2), (0, 1, 0), (0, 1, 0), 1)])
def test_conv_transpose3d(stride, padding, output_padding, groups):
    x = data((1, 3, 4, 3, 2), 15)
    w = data((4, 2, 3, 2, 2 // groups), 16)
    got = mx.conv_transpose3d(mx.array(x), mx.array(w), stride=stride, padding=padding,
                              output_padding=output_padding, groups=groups)
    check(got, ref_conv_transpose(x, w, stride, padding, 1, output_padding, groups))


# --- special shapes the kernel takes shortcuts on ----------------------------


@pytest.mark.parametrize("groups", [1, 2])
def test_pointwise_conv(groups):
    x = data((3, 7, 9, 8), 17)
    w = data((6, 1, 1, 8 // groups), 18)
    check(mx.conv2d(mx.array(x), mx.array(w), groups=groups), ref_conv(x, w, groups=groups))


@pytest.mark.parametrize("multiplier", [1, 3])
def test_depthwise_conv(multiplier):
    x = data((2, 10, 9, 5), 19)
    w = data((5 * multiplier, 3, 3, 1), 20)
    got = mx.conv2d(mx.array(x), mx.array(w), stride=(1, 2), padding=1, groups=5)
    check(got, ref_conv(x, w, (1, 2), 1, 1, 1, 1, 5))


# --- wide channels ----------------------------------------------------------------
# 16+ output and 4+ input channels per group: Loom's direct float32 kernels
# (register tiles of pixels x 64 output channels). Channel counts that fill
# no whole vector, a ragged second 64-channel block, and every parameter.


def ref_conv_vjp(x, w, ct, stride, lo, hi, kdil):
    """Input and weight gradients of conv_general (one group, no input
    dilation, padding >= 0) for the cotangent ``ct``, in float64."""
    x, w, ct = (np.asarray(a, np.float64) for a in (x, w, ct))
    nd = x.ndim - 2
    xp = np.pad(x, [(0, 0)] + list(zip(lo, hi)) + [(0, 0)])
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w)
    out_sp = ct.shape[1:-1]
    for tap in itertools.product(*[range(k) for k in w.shape[1:-1]]):
        sl = tuple([slice(None)] + [slice(tap[i] * kdil[i],
                                          tap[i] * kdil[i] + (out_sp[i] - 1) * stride[i] + 1,
                                          stride[i]) for i in range(nd)] + [slice(None)])
        patch = xp[sl]
        dw[(slice(None),) + tap] = ct.reshape(-1, ct.shape[-1]).T @ patch.reshape(-1, x.shape[-1])
        dxp[sl] += ct @ w[(slice(None),) + tap]
    crop = tuple([slice(None)] + [slice(lo[i], lo[i] + x.shape[i + 1]) for i in range(nd)]
                 + [slice(None)])
    return dxp[crop], dw


WIDE = [  # (C, O, stride, padding, dilation, groups)
    (8, 16, 1, 1, 1, 1),
    (13, 17, 1, 1, 1, 1),
    (5, 70, 2, 1, 1, 1),
    (20, 33, 1, 2, 2, 1),
    (64, 64, 1, 1, 1, 1),
    (12, 40, 2, 0, 1, 2),
    (6, 130, 1, 0, 1, 1),
]


@pytest.mark.parametrize("C,O,stride,padding,dilation,groups", WIDE)
def test_wide_channels_forward(C, O, stride, padding, dilation, groups):
    x = data((2, 9, 8, C), 60 + C)
    w = data((O, 3, 3, C // groups), 61 + O)
    got = mx.conv2d(mx.array(x), mx.array(w), stride, padding, dilation, groups)
    check(got, ref_conv(x, w, stride, padding, padding, dilation, 1, groups), tol=5e-4)


@pytest.mark.parametrize("C,O,stride,padding,dilation,groups",
                         [c for c in WIDE if c[5] == 1])
def test_wide_channels_gradients(C, O, stride, padding, dilation, groups):
    x = data((2, 9, 8, C), 62 + C)
    w = data((O, 3, 3, C), 63 + O)
    f = lambda a, b: mx.conv2d(a, b, stride, padding, dilation)
    out_shape = f(mx.array(x), mx.array(w)).shape
    ct = data(out_shape, 64)
    _, (dx, dw) = mx.vjp(lambda a, b: [f(a, b)], [mx.array(x), mx.array(w)], [mx.array(ct)])
    want_dx, want_dw = ref_conv_vjp(x, w, ct, [stride] * 2, [padding] * 2, [padding] * 2,
                                    [dilation] * 2)
    check(dx, want_dx, tol=5e-4)
    check(dw, want_dw, tol=1e-3)


def test_wide_channels_weight_gradient_is_deterministic():
    # The weight gradient sums over many rows in slices on several threads:
    # the same inputs must give the same bits every call.
    x = mx.array(data((4, 24, 24, 16), 73))
    w = mx.array(data((32, 3, 3, 16), 74))
    grad = mx.grad(lambda b: (mx.conv2d(x, b, padding=1) ** 2).sum())
    first = np.array(grad(w))
    for _ in range(4):
        np.testing.assert_array_equal(np.array(grad(w)), first)


@pytest.mark.parametrize("nd", [1, 3])
def test_wide_channels_other_ranks(nd):
    x = data((2,) + (7,) * nd + (9,), 65 + nd)
    w = data((24,) + (3,) * nd + (9,), 66 + nd)
    conv = {1: mx.conv1d, 3: mx.conv3d}[nd]
    check(conv(mx.array(x), mx.array(w), padding=1), ref_conv(x, w, 1, 1, 1), tol=5e-4)
    ct = data(conv(mx.array(x), mx.array(w), padding=1).shape, 67)
    _, (dx, dw) = mx.vjp(lambda a, b: [conv(a, b, padding=1)], [mx.array(x), mx.array(w)],
                         [mx.array(ct)])
    want_dx, want_dw = ref_conv_vjp(x, w, ct, [1] * nd, [1] * nd, [1] * nd, [1] * nd)
    check(dx, want_dx, tol=5e-4)
    check(dw, want_dw, tol=1e-3)


def test_wide_channels_flip_and_transpose():
    x = data((2, 6, 7, 10), 68)
    w = data((20, 3, 2, 10), 69)
    got = mx.conv_general(mx.array(x), mx.array(w), stride=[1, 2], padding=([1, 0], [2, 1]),
                          kernel_dilation=[1, 2], flip=True)
    check(got, ref_conv(x, w, [1, 2], [1, 0], [2, 1], [1, 2], 1, flip=True), tol=5e-4)
    wt = data((24, 3, 3, 10), 70)
    got = mx.conv_transpose2d(mx.array(x), mx.array(wt), stride=2, padding=1)
    check(got, ref_conv_transpose(x, wt, 2, 1), tol=5e-4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_wide_channels_dtypes(dtype):
    d = getattr(mx, dtype)
    x = mx.array(data((2, 7, 6, 16), 71)).astype(d)
    w = mx.array(data((32, 3, 3, 16), 72) / 8).astype(d)
    got = mx.conv2d(x, w, padding=1)
    assert got.dtype == d
    tol = {"float16": 2e-2, "bfloat16": 8e-2, "float64": 1e-6}[dtype]
    ref = ref_conv(np.array(x.astype(mx.float32)), np.array(w.astype(mx.float32)), 1, 1, 1)
    assert_array(got.astype(mx.float32), ref, rtol=tol, atol=tol)


def test_large_patch_rows_are_blocked():
    # A long kernel over many channels: each patch row is wider than one block.
    x = data((2, 300, 40, 8), 21)
    w = data((3, 290, 30, 8), 22)
    got = mx.conv2d(mx.array(x), mx.array(w), stride=3)
    check(got, ref_conv(x, w, 3), tol=2e-3)


def test_non_contiguous_inputs():
    x = data((6, 2, 7, 3), 23)  # used as (2, 6, 7, 3) through a transposed view
    w = data((3, 4, 3, 2), 24)  # used as (4, 2, 3, 3)
    xt = mx.transpose(mx.array(x), (1, 0, 2, 3))
    wt = mx.transpose(mx.array(w), (1, 3, 0, 2))  # (4, 2, 3, 2)
    got = mx.conv2d(xt, wt, padding=1)
    check(got, ref_conv(np.transpose(x, (1, 0, 2, 3)), np.transpose(w, (1, 3, 0, 2)), 1, 1, 1))


def test_empty_batch_and_channels():
    w = mx.array(data((4, 3, 3), 25))
    assert mx.conv1d(mx.zeros((0, 8, 3)), w).shape == (0, 6, 4)
    out = mx.conv1d(mx.ones((2, 8, 3)), mx.zeros((0, 3, 3)))
    assert out.shape == (2, 6, 0)


# --- dtypes --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_dtypes(dtype):
    x = data((2, 8, 3), 26)
    w = data((4, 3, 3), 27)
    d = getattr(mx, dtype)
    got = mx.conv1d(mx.array(x).astype(d), mx.array(w).astype(d), padding=1)
    assert got.dtype == d
    tol = {"float16": 2e-2, "bfloat16": 8e-2, "float64": 1e-5}[dtype]
    ref = ref_conv(np.array(mx.array(x).astype(d).astype(mx.float32)),
                   np.array(mx.array(w).astype(d).astype(mx.float32)), 1, 1, 1)
    assert_array(got.astype(mx.float32), ref, rtol=tol, atol=tol)


def test_dtype_promotion():
    x = mx.ones((2, 8, 3), dtype=mx.float16)
    assert mx.conv1d(x, mx.ones((4, 3, 3))).dtype == mx.float32
    assert mx.conv1d(mx.ones((2, 8, 3)), mx.ones((4, 3, 3), dtype=mx.int32)).dtype == mx.float32
    assert mx.conv1d(mx.ones((2, 8, 3)), mx.ones((4, 3, 3), dtype=mx.float64)).dtype == mx.float64


# --- convolve ------------------------------------------------------------------


@pytest.mark.parametrize("na,nv", [(7, 3), (3, 7), (6, 4), (4, 6), (5, 5), (1, 4), (8, 1)])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve(na, nv, mode):
    a = data((na,), 28)
    v = data((nv,), 29)
    got = mx.convolve(mx.array(a), mx.array(v), mode=mode)
    check(got, np.convolve(a.astype(np.float64), v.astype(np.float64), mode=mode))


def test_convolve_default_and_errors():
    assert mx.convolve(mx.ones(5), mx.ones(3)).shape == (7,)
    with pytest.raises(ValueError, match=r"\[convolve\] Invalid mode"):
        mx.convolve(mx.ones(5), mx.ones(3), mode="bad")
    with pytest.raises(ValueError, match=r"\[convolve\] Inputs must be 1D"):
        mx.convolve(mx.ones((5, 2)), mx.ones(3))
    with pytest.raises(ValueError, match=r"\[convolve\] Inputs cannot be empty"):
        mx.convolve(mx.ones(0), mx.ones(3))
    with pytest.raises(ValueError, match=r"floating point"):
        mx.convolve(mx.ones(5, dtype=mx.int32), mx.ones(3, dtype=mx.int32))


# --- errors --------------------------------------------------------------------

x3 = lambda: mx.ones((2, 8, 3))
w3 = lambda: mx.ones((4, 3, 3))

ERRORS = [
    (lambda: mx.conv1d(mx.ones((8, 3)), w3()), r"Only works for inputs with 1-3 spatial dimensions"),
    (lambda: mx.conv1d(x3(), mx.ones((4, 3, 2))),
     r"Expect the input channels in the input and weight array to match but got shapes - "
     r"input: \(2,8,3\) and weight: \(4,3,2\)"),
    (lambda: mx.conv1d(x3(), w3(), groups=2),
     r"The input channels must be divisible by the number of groups. Got input with shape "
     r"\(2,8,3\) and 2 groups."),
    (lambda: mx.conv1d(mx.ones((2, 8, 4)), mx.ones((3, 3, 2)), groups=2),
     r"If groups > 1, the output channels must be divisible by the number of groups. Got 3 "
     r"output channels and 2 groups."),
    (lambda: mx.conv1d(x3(), w3(), stride=0), r"Stride sizes must be positive. Got strides \(0\)."),
    (lambda: mx.conv1d(x3(), w3(), dilation=0),
     r"Kernel dilation sizes must be positive. Got kernel dilation \(0\)."),
    (lambda: mx.conv_general(x3(), w3(), input_dilation=0),
     r"Input dilation sizes must be positive. Got input dilation \(0\)."),
    (lambda: mx.conv1d(x3(), mx.ones((4, 30, 3))),
     r"Spatial dimensions of input after padding cannot be smaller than weight spatial "
     r"dimensions. Got error at axis 1 for input with shape \(2,8,3\), padding low \(0\), "
     r"padding high \(0\), and weight of shape \(4,30,3\)."),
    (lambda: mx.conv1d(mx.ones((2, 3, 3)), w3(), padding=-1),
     r"input with shape \(2,1,3\), padding low \(0\)"),
    (lambda: mx.conv1d(x3().astype(mx.int32), w3()),
     r"Invalid input array with type int32. Convolution currently only supports floating point"),
    (lambda: mx.conv1d(x3().astype(mx.complex64), w3()), r"Invalid input array with type complex64"),
    (lambda: mx.conv1d(x3(), mx.ones((4, 3, 3, 3))),
     r"Invalid weight array with 4 dimensions for 1D convolution. Expected an array with 3 "
     r"dimensions following the format \[C_out, ..., C_in\]."),
    (lambda: mx.conv2d(x3(), w3()), r"Invalid strides \(1,1\) for 1D convolution."),
    (lambda: mx.conv_general(x3(), w3(), padding=[1, 2]),
     r"Invalid padding \(1,2\) \| \(1,2\) for 1D convolution."),
    (lambda: mx.conv_general(x3(), w3(), kernel_dilation=[1, 1]),
     r"Invalid kernel dilation \(1,1\) for 1D convolution."),
    (lambda: mx.conv_general(x3(), w3(), input_dilation=[1, 1]),
     r"Invalid input dilation \(1,1\) for 1D convolution."),
    (lambda: mx.conv_transpose1d(x3(), mx.ones((4, 3, 2))), r"Expect the input channels"),
    (lambda: mx.conv3d(mx.ones((1, 4, 4, 4, 3)), mx.ones((2, 2, 2, 2, 1)), groups=2),
     r"Can only handle groups != 1 in 1D or 2D convolutions."),
    (lambda: mx.conv_transpose3d(mx.ones((1, 4, 4, 4, 4)), mx.ones((2, 2, 2, 2, 2)), groups=2),
     r"Can only handle groups != 1 in 1D or 2D convolutions."),
]


@pytest.mark.parametrize("fn,message", ERRORS)
def test_errors(fn, message):
    with pytest.raises(ValueError, match=r"\[conv\] " + message if not message.startswith("input") else message):
        fn()


def test_binding_types():
    x = mx.ones((1, 5, 5, 3))
    w = mx.ones((2, 3, 3, 3))
    with pytest.raises(TypeError):
        mx.conv2d(x, w, stride=(1, 2, 3))
    with pytest.raises(TypeError):
        mx.conv1d(mx.ones((2, 8, 3)), mx.ones((4, 3, 3)), stride=2.0)
    assert mx.conv2d(x, w, stride=[1, 2]).shape == (1, 3, 2, 2)


@pytest.mark.loom_only
def test_nonpositive_groups_is_an_error():
    # MLX divides by the group count unchecked (a floating point exception).
    with pytest.raises(ValueError, match=r"\[conv\] The number of groups must be positive"):
        mx.conv1d(x3(), w3(), groups=0)


# --- gradients -----------------------------------------------------------------

GRAD_CASES = [
    # x shape, w shape, kwargs of conv_general
    ((2, 7, 3), (4, 3, 3), dict(stride=2, padding=1)),
    ((1, 6, 4), (4, 2, 2), dict(padding=([2], [0]), kernel_dilation=2, groups=2)),
    ((1, 5, 2), (3, 3, 2), dict(stride=2, input_dilation=2, flip=True, padding=1)),
    ((1, 5, 6, 2), (2, 2, 3, 2), dict(stride=[2, 1], padding=([1, 0], [0, 2]))),
    ((1, 6, 5, 4), (4, 3, 3, 1), dict(padding=1, groups=4)),
    ((1, 4, 3, 3, 2), (2, 2, 2, 2, 2), dict(stride=[1, 2, 1], padding=1, kernel_dilation=[1, 1, 2])),
    ((1, 4, 3, 3, 2), (2, 2, 1, 2, 2), dict(input_dilation=[2, 1, 1], flip=True)),
    ((1, 7, 2), (2, 2, 2), dict(stride=3, padding=([0], [4]))),  # taps past the last output
]


def numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        xp = x.copy()
        xp[i] += eps
        xm = x.copy()
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def ref_kwargs(kw):
    pad = kw.get("padding", 0)
    lo, hi = pad if isinstance(pad, tuple) else (pad, pad)
    return dict(stride=kw.get("stride", 1), lo=lo, hi=hi, kdil=kw.get("kernel_dilation", 1),
                idil=kw.get("input_dilation", 1), groups=kw.get("groups", 1),
                flip=kw.get("flip", False))


@pytest.mark.parametrize("xs,ws,kw", GRAD_CASES)
def test_gradients_finite_differences(xs, ws, kw):
    # float32 arrays (MLX differentiates convolutions in float32 only); the
    # finite differences run on the float64 reference.
    x = data(xs, 30).astype(np.float64)
    w = data(ws, 31).astype(np.float64)
    rk = ref_kwargs(kw)
    r = data(ref_conv(x, w, **rk).shape, 32).astype(np.float64)

    def loss(a, b):
        return mx.sum(mx.conv_general(a, b, **kw) * mx.array(r, dtype=mx.float32))

    gx, gw = mx.grad(loss, argnums=(0, 1))(mx.array(x, dtype=mx.float32), mx.array(w, dtype=mx.float32))
    assert gx.shape == x.shape and gw.shape == w.shape
    nx = numeric_grad(lambda a: np.sum(ref_conv(a, w, **rk) * r), x)
    nw = numeric_grad(lambda b: np.sum(ref_conv(x, b, **rk) * r), w)
    np.testing.assert_allclose(np.array(gx), nx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.array(gw), nw, rtol=1e-4, atol=1e-4)


def test_conv_transpose_gradient():
    x = data((1, 4, 3), 33).astype(np.float64)
    w = data((2, 3, 3), 34).astype(np.float64)
    r = data(ref_conv_transpose(x, w, 2, 1, 1, 1).shape, 35).astype(np.float64)
    f = lambda a, b: mx.sum(mx.conv_transpose1d(a, b, 2, 1, 1, 1) * mx.array(r, dtype=mx.float32))
    gx, gw = mx.grad(f, argnums=(0, 1))(mx.array(x, dtype=mx.float32), mx.array(w, dtype=mx.float32))
    nx = numeric_grad(lambda a: np.sum(ref_conv_transpose(a, w, 2, 1, 1, 1) * r), x)
    nw = numeric_grad(lambda b: np.sum(ref_conv_transpose(x, b, 2, 1, 1, 1) * r), w)
    np.testing.assert_allclose(np.array(gx), nx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.array(gw), nw, rtol=1e-4, atol=1e-4)


def test_second_order_gradient():
    # d/dw of the squared input gradient: a convolution of convolutions.
    xn = data((1, 6, 2), 36).astype(np.float64)
    wn = data((3, 3, 2), 37).astype(np.float64)
    x = mx.array(xn, dtype=mx.float32)

    def inner(b):
        gx = mx.grad(lambda a: mx.sum(mx.conv1d(a, b, stride=2, padding=1) ** 2))(x)
        return mx.sum(gx * gx)

    g = np.array(mx.grad(inner)(mx.array(wn, dtype=mx.float32)))

    def inner_ref(b):
        gx = numeric_grad(lambda a: np.sum(ref_conv(a, b, 2, 1, 1) ** 2), xn, eps=1e-3)
        return np.sum(gx * gx)

    n = numeric_grad(inner_ref, wn, eps=1e-4)
    np.testing.assert_allclose(g, n, rtol=1e-3, atol=1e-3)


@pytest.mark.loom_only  # MLX 0.32.4: "[Primitive::jvp] Not implemented for Convolution"
def test_jvp():
    x = mx.array(data((2, 7, 5, 3), 38))
    w = mx.array(data((4, 3, 2, 3), 39))
    tx = mx.array(data((2, 7, 5, 3), 40))
    tw = mx.array(data((4, 3, 2, 3), 41))
    f = lambda a, b: mx.conv2d(a, b, stride=(2, 1), padding=1)
    (out,), (t,) = mx.jvp(f, [x, w], [tx, tw])
    check(out, np.array(f(x, w)))
    check(t, np.array(f(tx, w) + f(x, tw)))


# --- vmap ----------------------------------------------------------------------


# MLX 0.32.4 returns wrong values when only a grouped weight is vmapped (its
# batched weights cross the group boundaries): Loom's extra.
@pytest.mark.parametrize("in_axes", [(0, None), pytest.param((None, 0), marks=pytest.mark.loom_only),
                                     (0, 0), (2, 1)])
def test_vmap(in_axes):
    B = 3
    xs = data((B, 2, 7, 4), 42)
    ws = data((B, 6, 3, 2), 43)
    kw = dict(stride=2, padding=1, groups=2)
    x_in = xs if in_axes[0] == 0 else (np.moveaxis(xs, 0, in_axes[0]) if in_axes[0] else xs[0])
    w_in = ws if in_axes[1] == 0 else (np.moveaxis(ws, 0, in_axes[1]) if in_axes[1] else ws[0])
    got = mx.vmap(lambda a, b: mx.conv1d(a, b, **kw), in_axes=in_axes)(mx.array(x_in), mx.array(w_in))
    want = np.stack([ref_conv(xs[i] if in_axes[0] is not None else xs[0],
                              ws[i] if in_axes[1] is not None else ws[0], 2, 1, 1, 1, 1, 2)
                     for i in range(B)])
    check(got, want)


def test_vmap_of_grad():
    xs = data((3, 1, 6, 2), 44)
    w = mx.array(data((2, 3, 2), 45))
    g = mx.vmap(mx.grad(lambda a: mx.sum(mx.conv1d(a, w, padding=1) ** 2)))(mx.array(xs))
    for i in range(3):
        gi = mx.grad(lambda a: mx.sum(mx.conv1d(a, w, padding=1) ** 2))(mx.array(xs[i]))
        check(g[i], np.array(gi))


def test_gradient_export_round_trip(tmp_path):
    # The gradient nodes serialise with their state and import as such.
    x = mx.array(data((2, 8, 7, 4), 52))
    w = mx.array(data((6, 3, 2, 2), 53))
    g = mx.grad(lambda a, b: mx.sum(mx.conv2d(a, b, stride=(2, 1), padding=1, groups=2) ** 2),
                argnums=(0, 1))
    path = str(tmp_path / "g.mlxfn")
    mx.export_function(path, g, x, w)
    f = mx.import_function(path)
    x2, w2 = x * 0.5 + 0.1, w * 1.5
    for got, want in zip(f(x2, w2), g(x2, w2)):
        check(got, np.array(want))


@pytest.mark.loom_only  # export_mlxfn is Loom's
@pytest.mark.parametrize("flip", [False, True])
def test_gradient_export_mlxfn_round_trip(tmp_path, flip):
    # The gradient nodes are written as their composite (MLX has no such nodes).
    x = mx.array(data((2, 8, 7, 4), 54))
    w = mx.array(data((6, 3, 2, 2), 55))
    g = mx.grad(lambda a, b: mx.sum(mx.conv_general(a, b, stride=(2, 1), padding=1, groups=2,
                                                    flip=flip) ** 2), argnums=(0, 1))
    path = str(tmp_path / "g.mlxfn")
    mx.export_mlxfn(path, g, x, w)
    f = mx.import_function(path)
    for got, want in zip(f(x, w), g(x, w)):
        check(got, np.array(want))


@pytest.mark.loom_only  # MLX 0.32.4's shapeless trace of this gradient is another matter
def test_gradient_nodes_refuse_a_cotangent_of_another_shape():
    # A shapeless trace freezes the cotangent's broadcast to the traced batch:
    # replayed with another batch, the gradient nodes raise (before reading
    # memory that is not there) rather than compute.
    w = mx.array(data((8, 3, 3, 4), 56))
    f = mx.compile(lambda a, b: mx.grad(lambda b: mx.conv2d(a, b, stride=2, padding=1).sum())(b),
                   shapeless=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f(mx.array(data((4, 12, 12, 4), 57)), w)
        with pytest.raises(ValueError, match="cotangent has shape"):
            mx.eval(f(mx.array(data((6, 12, 12, 4), 58)), w))


# --- torch, when installed -------------------------------------------------------


def test_against_torch():
    torch = pytest.importorskip("torch")
    x = data((2, 10, 9, 6), 46)
    w = data((8, 3, 3, 3), 47)
    got = mx.conv2d(mx.array(x), mx.array(w), stride=2, padding=1, dilation=(1, 2), groups=2)
    want = torch.nn.functional.conv2d(torch.tensor(x).permute(0, 3, 1, 2),
                                      torch.tensor(w).permute(0, 3, 1, 2), stride=2, padding=1,
                                      dilation=(1, 2), groups=2).permute(0, 2, 3, 1)
    check(got, want.numpy())
    wt = data((6, 3, 3, 4), 48)  # conv_transpose weight (C_out, KH, KW, C_in/groups)
    xt = data((2, 5, 4, 4), 49)
    got = mx.conv_transpose2d(mx.array(xt), mx.array(wt), stride=2, padding=1, output_padding=1)
    want = torch.nn.functional.conv_transpose2d(
        torch.tensor(xt).permute(0, 3, 1, 2), torch.tensor(wt).permute(3, 0, 1, 2), stride=2,
        padding=1, output_padding=1).permute(0, 2, 3, 1)
    check(got, want.numpy())


# --- memory ----------------------------------------------------------------------


def test_no_leak_over_build_drop_cycles():
    xn = data((2, 9, 9, 4), 50)
    wn = data((6, 3, 3, 2), 51)

    def cycle():
        x = mx.array(xn)
        w = mx.array(wn)
        loss = lambda a, b: mx.sum(mx.conv2d(a, b, stride=2, padding=1, groups=2) ** 2)
        g = mx.grad(loss, argnums=(0, 1))(x, w)
        mx.eval(g)

    for _ in range(3):
        cycle()
    gc.collect()
    mx.synchronize()
    base = mx.get_active_memory()
    for _ in range(30):
        cycle()
        gc.collect()
        mx.synchronize()
        assert mx.get_active_memory() == base


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_weight_gradient_of_a_broadcast_cotangent(nd):
    # sum() hands the convolution a broadcast cotangent, which the weight
    # gradient copies into its own layout: it must equal the gradient of an
    # explicit all-ones cotangent.
    r = rng(nd)
    x = mx.array(r.standard_normal((3,) + (6,) * nd + (4,)).astype(np.float32))
    w = mx.array(r.standard_normal((5,) + (3,) * nd + (4,)).astype(np.float32))
    conv = {1: mx.conv1d, 2: mx.conv2d, 3: mx.conv3d}[nd]
    ones = mx.ones(conv(x, w, stride=2, padding=1).shape)
    g_sum = mx.grad(lambda w: conv(x, w, stride=2, padding=1).sum())(w)
    g_ones = mx.grad(lambda w: (conv(x, w, stride=2, padding=1) * ones).sum())(w)
    np.testing.assert_allclose(np.array(g_sum), np.array(g_ones), rtol=1e-5, atol=1e-5)
