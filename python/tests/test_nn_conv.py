"""nn convolution and pooling layers: constructor signatures and printing as
MLX, weight shapes and initial ranges, forward against the NumPy references
of test_conv.py and a direct pooling loop, gradients through the layers."""

import itertools
import math

import numpy as np
import pytest

from _backend import mx
from _nn_backend import nn, optim
from test_conv import check, data, ref_conv, ref_conv_transpose


def ref_pool(x, k, s, p, kind):
    nd = x.ndim - 2
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x.astype(np.float64), [(0, 0)] + [(q, q) for q in p] + [(0, 0)],
                constant_values=fill)
    out_sp = [max(0, (xp.shape[i + 1] - k[i]) // s[i] + 1) for i in range(nd)]
    out = np.zeros([x.shape[0]] + out_sp + [x.shape[-1]])
    for pos in itertools.product(*(range(o) for o in out_sp)):
        sl = tuple([slice(None)] + [slice(pos[i] * s[i], pos[i] * s[i] + k[i]) for i in range(nd)])
        win = xp[sl].reshape(x.shape[0], -1, x.shape[-1])
        out[(slice(None),) + pos] = win.max(1) if kind == "max" else win.mean(1)
    return out


# --- construction and printing ---------------------------------------------------


@pytest.mark.parametrize("layer,text", [
    (lambda: nn.Conv1d(3, 4, 3, bias=False),
     "Conv1d(3, 4, kernel_size=3, stride=1, padding=0, dilation=1, groups=1, bias=False)"),
    (lambda: nn.Conv2d(3, 4, (3, 2), stride=2, padding=(1, 0), dilation=(2, 1)),
     "Conv2d(3, 4, kernel_size=(3, 2), stride=(2, 2), padding=(1, 0), dilation=(2, 1), groups=1, bias=True)"),
    (lambda: nn.Conv2d(4, 4, 3, groups=2),
     "Conv2d(4, 4, kernel_size=(3, 3), stride=(1, 1), padding=(0, 0), dilation=1, groups=2, bias=True)"),
    (lambda: nn.Conv3d(2, 4, 3),
     "Conv3d(2, 4, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=(0, 0, 0), dilation=1, bias=True)"),
    (lambda: nn.ConvTranspose1d(3, 4, 3),
     "ConvTranspose1d(3, 4, kernel_size=3, stride=1, padding=0, dilation=1, output_padding=0, bias=True)"),
    (lambda: nn.ConvTranspose2d(3, 4, 3),
     "ConvTranspose2d(3, 4, kernel_size=(3, 3), stride=(1, 1), padding=(0, 0), dilation=1, output_padding=(0, 0), bias=True)"),
    (lambda: nn.ConvTranspose3d(2, 4, 3),
     "ConvTranspose3d(2, 4, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=(0, 0, 0), dilation=1, output_padding=(0, 0, 0), bias=True)"),
    (lambda: nn.MaxPool2d(2), "MaxPool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))"),
    (lambda: nn.AvgPool1d(3, 2, 1), "AvgPool1d(kernel_size=(3,), stride=(2,), padding=(1,))"),
    (lambda: nn.MaxPool3d((2, 2, 2)),
     "MaxPool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0))"),
])
def test_repr(layer, text):
    assert repr(layer()) == text


@pytest.mark.parametrize("make,shape,fan_in", [
    (lambda: nn.Conv1d(6, 8, 5), (8, 5, 6), 30),
    (lambda: nn.Conv2d(64, 8, 3, groups=4), (8, 3, 3, 16), 16 * 9),
    (lambda: nn.Conv3d(2, 4, (1, 2, 3)), (4, 1, 2, 3, 2), 12),
    (lambda: nn.ConvTranspose1d(4, 6, 3), (6, 3, 4), 12),
    (lambda: nn.ConvTranspose2d(64, 8, 3), (8, 3, 3, 64), 64 * 9),
    (lambda: nn.ConvTranspose3d(2, 3, 2), (3, 2, 2, 2, 2), 16),
])
def test_parameters_and_init(make, shape, fan_in):
    layer = make()
    assert set(layer.parameters()) == {"weight", "bias"}
    assert layer.weight.shape == shape
    bound = 1 / math.sqrt(fan_in)
    w = np.array(layer.weight)
    assert np.abs(w).max() <= bound + 1e-7
    assert np.abs(w).max() > 0.5 * bound  # spread over the range, not a constant
    assert np.array_equal(np.array(layer.bias), np.zeros(shape[0]))


def test_constructor_errors():
    with pytest.raises(ValueError, match=r"The number of input channels \(3\) must be divisible by the number of groups \(2\)"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match=r"\[MaxPool2d\] 'kernel_size' must be an integer or a tuple containing 2 integers"):
        nn.MaxPool2d((1, 2, 3))
    with pytest.raises(ValueError, match=r"\[MaxPool2d\] 'stride' must be an integer or a tuple containing 2 integers"):
        nn.MaxPool2d(2, stride=(1, 2, 3))
    with pytest.raises(ValueError, match=r"\[AvgPool2d\] 'padding' must be an integer or a tuple containing 2 integers"):
        nn.AvgPool2d(2, padding=None)
    with pytest.raises(ValueError, match=r"the signal has 1 dims and the window shape has 2"):
        nn.MaxPool2d(2)(mx.ones((4, 4, 1)))


# --- forward ------------------------------------------------------------------------


def test_conv_layers_forward():
    x1 = data((2, 9, 4), 60)
    c1 = nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2)
    check(c1(mx.array(x1)), ref_conv(x1, np.array(c1.weight), 2, 1, 1, 2, 1, 2) + np.array(c1.bias))
    x2 = data((2, 8, 7, 3), 61)
    c2 = nn.Conv2d(3, 5, (3, 2), stride=(2, 1), padding=(1, 0))
    c2.bias = mx.array(data((5,), 62))
    check(c2(mx.array(x2)), ref_conv(x2, np.array(c2.weight), (2, 1), (1, 0), (1, 0)) + np.array(c2.bias))
    x3 = data((1, 5, 4, 6, 2), 63)
    c3 = nn.Conv3d(2, 3, 2, padding=1, bias=False)
    check(c3(mx.array(x3)), ref_conv(x3, np.array(c3.weight), 1, 1, 1))


def test_conv_transpose_layers_forward():
    x1 = data((2, 5, 3), 64)
    t1 = nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1)
    check(t1(mx.array(x1)), ref_conv_transpose(x1, np.array(t1.weight), 2, 1, 1, 1) + np.array(t1.bias))
    x2 = data((1, 4, 3, 2), 65)
    t2 = nn.ConvTranspose2d(2, 3, (2, 3), stride=(2, 1), dilation=(1, 2))
    check(t2(mx.array(x2)), ref_conv_transpose(x2, np.array(t2.weight), (2, 1), 0, (1, 2)))
    x3 = data((1, 3, 2, 3, 2), 66)
    t3 = nn.ConvTranspose3d(2, 2, 2, stride=2)
    check(t3(mx.array(x3)), ref_conv_transpose(x3, np.array(t3.weight), 2))


POOLS = [
    ("MaxPool1d", (2, 11, 3), 3, None, 0),
    ("MaxPool1d", (2, 11, 3), 3, 2, 1),
    ("AvgPool1d", (2, 11, 3), (2,), 1, 0),
    ("MaxPool2d", (2, 8, 9, 3), 2, None, 0),
    ("MaxPool2d", (2, 8, 9, 3), (3, 2), (2, 1), (1, 0)),
    ("AvgPool2d", (2, 8, 9, 3), 2, None, 1),
    ("AvgPool2d", (2, 8, 9, 3), 3, 2, 0),
    ("MaxPool3d", (1, 5, 6, 4, 2), 2, None, 0),
    ("AvgPool3d", (1, 5, 6, 4, 2), (2, 3, 2), 1, (1, 0, 1)),
    ("MaxPool2d", (1, 4, 4, 1), 5, None, 0),  # window larger than the input
]


@pytest.mark.parametrize("name,shape,k,s,p", POOLS)
def test_pooling_forward(name, shape, k, s, p):
    n = len(shape) - 2
    per = lambda v: (v,) * n if isinstance(v, int) else tuple(v)
    layer = getattr(nn, name)(k, s, p) if s is not None else getattr(nn, name)(k, padding=p)
    x = data(shape, 67)
    kind = "max" if name.startswith("Max") else "avg"
    want = ref_pool(x, per(k), per(s if s is not None else k), per(p), kind)
    got = layer(mx.array(x))
    assert got.shape == want.shape
    if got.size:
        check(got, want)


def test_pooling_gradients():
    x = mx.array(data((1, 4, 6, 2), 68))
    g = mx.grad(lambda a: mx.sum(nn.MaxPool2d(2)(a)))(x)
    xn = np.array(x).reshape(1, 2, 2, 3, 2, 2)
    mask = (xn == xn.max(axis=(2, 4), keepdims=True)).astype(np.float32).reshape(1, 4, 6, 2)
    check(g, mask)
    g = mx.grad(lambda a: mx.sum(nn.AvgPool2d(2, stride=1)(a)))(x)
    counts = np.zeros((4, 6))
    for i, j in itertools.product(range(3), range(5)):
        counts[i:i + 2, j:j + 2] += 0.25
    check(g, np.broadcast_to(counts[None, :, :, None], (1, 4, 6, 2)))


def test_conv_layer_gradients_match_ops():
    layer = nn.Conv2d(3, 4, 3, padding=1)
    x = mx.array(data((2, 5, 5, 3), 69))

    def loss(model, a):
        return mx.sum(model(a) ** 2)

    value, grads = nn.value_and_grad(layer, loss)(layer, x)
    w, b = layer.weight, layer.bias
    gw, gb = mx.grad(lambda w_, b_: mx.sum((mx.conv2d(x, w_, padding=1) + b_) ** 2),
                     argnums=(0, 1))(w, b)
    check(grads["weight"], np.array(gw), tol=1e-3)
    check(grads["bias"], np.array(gb), tol=1e-3)


def test_small_cnn_learns():
    # A fixed two-class problem: which half of the image holds more mass.
    rng = np.random.default_rng(70)
    xs = rng.standard_normal((64, 8, 8, 1)).astype(np.float32)
    ys = (xs[:, :, :4, 0].sum(axis=(1, 2)) > xs[:, :, 4:, 0].sum(axis=(1, 2))).astype(np.int32)
    mx.random.seed(0)
    body = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2))
    head = nn.Linear(32, 2)
    model = nn.Sequential(body, lambda a: a.reshape(a.shape[0], -1), head)

    def loss(m, a, y):
        return nn.losses.cross_entropy(m(a), y, reduction="mean")

    step = nn.value_and_grad(model, loss)
    opt = optim.Adam(learning_rate=0.02)
    x, y = mx.array(xs), mx.array(ys)
    values = []
    for _ in range(80):
        value, grads = step(model, x, y)
        opt.update(model, grads)
        mx.eval(model.parameters(), opt.state)
        values.append(value.item())
    assert values[-1] < 0.5 * values[0], values[::10]


def test_digits_cnn_example_trains_briefly():
    import os
    import subprocess
    import sys

    from _backend import IS_MLX

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                          "digits_cnn.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run(
        [sys.executable, script, "--backend", "mlx" if IS_MLX else "loom", "--train", "1024",
         "--test", "256", "--epochs", "2", "--batch", "32"],
        capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("final test accuracy:"), result.stdout
    # Two short epochs already read most digits (chance is 10%).
    assert float(last.split()[-1].rstrip("%")) > 60, result.stdout
