"""Every layer of loom.nn against a NumPy reference (float64), plus finite-difference
gradients for a few and train/eval behaviour of dropout and batch norm."""

import math

import numpy as np
import pytest

from _nn_backend import mx, nn, utils

RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(a, b, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(np.array(a), b, rtol=rtol, atol=atol)


def set_params(module, **arrays):
    module.update({k: mx.array(v) for k, v in arrays.items()})


# --- NumPy references --------------------------------------------------------


def np_layer_norm(x, w=None, b=None, eps=1e-5):
    x = x.astype(np.float64)
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def np_mha(q_in, k_in, v_in, p, heads, mask=None):
    q = q_in @ p["query_proj"]["weight"].T
    k = k_in @ p["key_proj"]["weight"].T
    v = v_in @ p["value_proj"]["weight"].T
    B, L, D = q.shape
    S = k.shape[1]
    split = lambda t, n: t.reshape(B, n, heads, -1).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = split(q, L), split(k, S), split(v, S)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + mask
    out = np_softmax(scores) @ v
    out = out.transpose(0, 2, 1, 3).reshape(B, L, -1)
    return out @ p["out_proj"]["weight"].T


def np_params(module):
    return utils.tree_map(lambda a: np.array(a).astype(np.float64), module.parameters())


# --- affine and containers ---------------------------------------------------


def test_linear():
    layer = nn.Linear(4, 3)
    assert layer.weight.shape == (3, 4) and layer.bias.shape == (3,)
    bound = 1 / math.sqrt(4)
    assert np.all(np.abs(np.array(layer.weight)) <= bound)
    x = rand(2, 5, 4)
    p = np_params(layer)
    close(layer(mx.array(x)), x @ p["weight"].T + p["bias"])
    no_bias = nn.Linear(4, 3, bias=False)
    assert "bias" not in no_bias
    close(no_bias(mx.array(x)), x @ np_params(no_bias)["weight"].T)


def test_bilinear():
    layer = nn.Bilinear(3, 4, 5)
    assert layer.weight.shape == (5, 4, 3)
    x1, x2 = rand(2, 6, 3), rand(2, 6, 4)
    p = np_params(layer)
    expected = np.einsum("...i,oji,...j->...o", x1, p["weight"], x2) + p["bias"]
    close(layer(mx.array(x1), mx.array(x2)), expected)
    assert repr(layer) == "Bilinear(input1_dims=3, input2_dims=4, output_dims=5, bias=True)"


def test_identity_and_sequential():
    x = mx.array(rand(3, 2))
    assert nn.Identity(1, 2, key=3)(x) is x
    seq = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), lambda t: t * 2)
    p = np_params(seq)["layers"][0]
    expected = 2 * np.maximum(np.array(x) @ p["weight"].T + p["bias"], 0)
    close(seq(x), expected)


# --- activations -------------------------------------------------------------

X = np.linspace(-4, 4, 41).astype(np.float32)


def _softplus(x):
    return np.logaddexp(x, 0)


ACTIVATIONS = {
    "sigmoid": np_sigmoid,
    "relu": lambda x: np.maximum(x, 0),
    "relu2": lambda x: np.maximum(x, 0) ** 2,
    "relu6": lambda x: np.clip(x, 0, 6),
    "leaky_relu": lambda x: np.where(x > 0, x, 0.01 * x),
    "elu": lambda x: np.where(x > 0, x, np.exp(x) - 1),
    "softplus": _softplus,
    "softsign": lambda x: x / (1 + np.abs(x)),
    "softshrink": lambda x: np.where(np.abs(x) > 0.5, x - np.sign(x) * 0.5, 0),
    "celu": lambda x: np.maximum(x, 0) + np.exp(np.minimum(x, 0)) - 1,
    "silu": lambda x: x * np_sigmoid(x),
    "log_sigmoid": lambda x: -_softplus(-x),
    "gelu": lambda x: x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
    "gelu_approx": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "gelu_fast_approx": lambda x: x * np_sigmoid(1.702 * x),
    "selu": lambda x: 1.0507 * np.where(x > 0, x, 1.67326 * (np.exp(x) - 1)),
    "mish": lambda x: x * np.tanh(_softplus(x)),
    "hardswish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "hard_tanh": lambda x: np.clip(x, -1, 1),
    "hard_shrink": lambda x: np.where(np.abs(x) > 0.5, x, 0),
    "tanh": np.tanh,
    "step": lambda x: (x >= 0).astype(np.float32),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_functions(name):
    close(getattr(nn, name)(mx.array(X)), ACTIVATIONS[name](X.astype(np.float64)), rtol=1e-4, atol=1e-5)


def test_softmax_family_and_glu():
    x = rand(3, 5)
    close(nn.softmax(mx.array(x)), np_softmax(x))
    close(nn.softmin(mx.array(x)), np_softmax(-x))
    close(nn.log_softmax(mx.array(x)), np.log(np_softmax(x)))
    close(nn.log_softmax(mx.array(x), axis=0), np.log(np_softmax(x, axis=0)))
    y = rand(2, 6)
    close(nn.glu(mx.array(y)), y[:, :3] * np_sigmoid(y[:, 3:]))
    close(nn.GLU(axis=0)(mx.array(rand(4, 2))).shape, (2, 2))
    alpha = np.array([0.1, 0.3], np.float32)
    close(nn.prelu(mx.array(y[:, :2]), mx.array(alpha)),
          np.maximum(y[:, :2], 0) + alpha * np.minimum(y[:, :2], 0))


ACTIVATION_MODULES = [
    (nn.Sigmoid(), "sigmoid"), (nn.ReLU(), "relu"), (nn.ReLU2(), "relu2"), (nn.ReLU6(), "relu6"),
    (nn.LeakyReLU(), "leaky_relu"), (nn.ELU(), "elu"), (nn.Softplus(), "softplus"),
    (nn.Softsign(), "softsign"), (nn.Softshrink(), "softshrink"), (nn.CELU(), "celu"),
    (nn.SiLU(), "silu"), (nn.LogSigmoid(), "log_sigmoid"), (nn.GELU(), "gelu"),
    (nn.GELU(approx="tanh"), "gelu_approx"), (nn.GELU(approx="precise"), "gelu_approx"),
    (nn.GELU(approx="fast"), "gelu_fast_approx"), (nn.SELU(), "selu"), (nn.Mish(), "mish"),
    (nn.Hardswish(), "hardswish"), (nn.HardTanh(), "hard_tanh"), (nn.HardShrink(), "hard_shrink"),
    (nn.Tanh(), "tanh"), (nn.Step(), "step"),
]


@pytest.mark.parametrize("module,name", ACTIVATION_MODULES, ids=[n for _, n in ACTIVATION_MODULES])
def test_activation_modules(module, name):
    close(module(mx.array(X)), ACTIVATIONS[name](X.astype(np.float64)))


def test_activation_modules_with_parameters():
    x = rand(4, 3)
    close(nn.Softmax()(mx.array(x)), np_softmax(x))
    close(nn.Softmin()(mx.array(x)), np_softmax(-x))
    close(nn.LogSoftmax()(mx.array(x)), np.log(np_softmax(x)))
    close(nn.LeakyReLU(0.2)(mx.array(x)), np.where(x > 0, x, 0.2 * x))
    close(nn.ELU(alpha=2.0)(mx.array(x)), np.where(x > 0, x, 2 * (np.exp(x) - 1)))
    close(nn.CELU(alpha=2.0)(mx.array(x)), np.maximum(x, 0) + 2 * (np.exp(np.minimum(x, 0) / 2) - 1))
    prelu = nn.PReLU()
    assert prelu.weight.shape == (1,)
    close(prelu(mx.array(x)), np.maximum(x, 0) + 0.25 * np.minimum(x, 0))
    with pytest.raises(ValueError, match="The approximation should be in"):
        nn.GELU(approx="cubic")


# --- dropout -----------------------------------------------------------------


def test_dropout_train_and_eval():
    x = mx.ones((200, 100))
    layer = nn.Dropout(0.25)
    y = np.array(layer(x))
    kept = y != 0
    assert 0.70 < kept.mean() < 0.80
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    layer.eval()
    assert layer(x) is x
    assert repr(nn.Dropout(0.5)) == "Dropout(p=0.5)"
    with pytest.raises(ValueError, match=r"The dropout probability 1.0 is not in \[0, 1\)"):
        nn.Dropout(1.0)


def test_channel_dropout_zeroes_whole_channels():
    x = mx.ones((8, 5, 5, 16))
    y = np.array(nn.Dropout2d(0.5)(x))
    per_channel = y.reshape(8, 25, 16)
    assert np.all((per_channel == 0).all(axis=1) | (per_channel == 2).all(axis=1))
    y3 = np.array(nn.Dropout3d(0.5)(mx.ones((4, 3, 3, 3, 8)))).reshape(4, 27, 8)
    assert np.all((y3 == 0).all(axis=1) | (y3 == 2).all(axis=1))
    with pytest.raises(ValueError, match="Received input with 2 dimensions. Expected 3 or 4"):
        nn.Dropout2d()(mx.ones((2, 2)))
    with pytest.raises(ValueError, match="Received input with 3 dimensions. Expected 4 or 5"):
        nn.Dropout3d()(mx.ones((2, 2, 2)))


# --- normalisation -----------------------------------------------------------


def test_layer_norm_and_rms_norm():
    x = rand(2, 3, 8)
    ln = nn.LayerNorm(8)
    set_params(ln, weight=rand(8), bias=rand(8))
    p = np_params(ln)
    close(ln(mx.array(x)), np_layer_norm(x, p["weight"], p["bias"]), rtol=1e-4, atol=1e-4)
    close(nn.LayerNorm(8, affine=False)(mx.array(x)), np_layer_norm(x), atol=1e-4)
    assert "bias" not in nn.LayerNorm(8, bias=False)
    assert repr(ln) == "LayerNorm(8, eps=1e-05, affine=True)"
    rms = nn.RMSNorm(8, eps=1e-6)
    set_params(rms, weight=rand(8))
    w = np_params(rms)["weight"]
    xd = x.astype(np.float64)
    close(rms(mx.array(x)), xd / np.sqrt((xd**2).mean(-1, keepdims=True) + 1e-6) * w, atol=1e-4)
    with pytest.raises(ValueError, match=r"\[LayerNorm\] 'eps' must be positive but got 0"):
        nn.LayerNorm(4, eps=0)


@pytest.mark.parametrize("pytorch_compatible", [False, True])
def test_group_norm(pytorch_compatible):
    x = rand(2, 4, 3, 6).astype(np.float64)
    gn = nn.GroupNorm(3, 6, pytorch_compatible=pytorch_compatible)
    set_params(gn, weight=rand(6), bias=rand(6))
    p = np_params(gn)
    flat = x.reshape(2, -1, 6)
    y = np.empty_like(flat)
    for g in range(3):
        # MLX groups channel c into group c % groups; PyTorch into c // (C / groups).
        chans = [c for c in range(6) if (c // 2 if pytorch_compatible else c % 3) == g]
        sel = flat[:, :, chans]
        mu = sel.mean(axis=(1, 2), keepdims=True)
        var = sel.var(axis=(1, 2), keepdims=True)
        y[:, :, chans] = (sel - mu) / np.sqrt(var + 1e-5)
    expected = y.reshape(x.shape) * p["weight"] + p["bias"]
    close(gn(mx.array(x.astype(np.float32))), expected, atol=1e-4)
    with pytest.raises(ValueError, match=r"The number of features \(5\) must be evenly divisible"):
        nn.GroupNorm(2, 5)


def test_instance_norm():
    x = rand(2, 4, 5, 3).astype(np.float64)
    norm = nn.InstanceNorm(3, affine=True)
    set_params(norm, weight=rand(3), bias=rand(3))
    p = np_params(norm)
    mu = x.mean(axis=(1, 2), keepdims=True)
    var = x.var(axis=(1, 2), keepdims=True)
    expected = (x - mu) / np.sqrt(var + 1e-5) * p["weight"] + p["bias"]
    close(norm(mx.array(x.astype(np.float32))), expected, atol=1e-4)
    assert "weight" not in nn.InstanceNorm(3)
    with pytest.raises(ValueError, match="InstanceNorm expects inputs with at least 3 dimensions"):
        nn.InstanceNorm(3)(mx.ones((2, 3)))


def test_batch_norm_train_updates_running_stats_and_eval_uses_them():
    x = rand(16, 4).astype(np.float64) * 3 + 1
    bn = nn.BatchNorm(4, momentum=0.1)
    assert set(bn.parameters().keys()) == {"weight", "bias", "running_mean", "running_var"}
    assert set(bn.trainable_parameters().keys()) == {"weight", "bias"}
    y = bn(mx.array(x.astype(np.float32)))
    close(y, (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), atol=1e-4)
    close(bn.running_mean, 0.1 * x.mean(0), atol=1e-5)
    close(bn.running_var, 0.9 + 0.1 * x.var(0, ddof=1), atol=1e-4)
    bn.eval()
    rm, rv = np.array(bn.running_mean), np.array(bn.running_var)
    y = bn(mx.array(x.astype(np.float32)))
    close(y, (x - rm) / np.sqrt(rv + 1e-5), atol=1e-4)
    close(bn.running_mean, rm)  # no update in eval mode
    bn.unfreeze()
    assert set(bn.trainable_parameters().keys()) == {"weight", "bias"}


def test_batch_norm_spatial_and_errors():
    x = rand(2, 3, 3, 5).astype(np.float64)
    bn = nn.BatchNorm(5, affine=False, track_running_stats=False)
    assert bn.parameters() == {}
    close(bn(mx.array(x.astype(np.float32))),
          (x - x.mean((0, 1, 2))) / np.sqrt(x.var((0, 1, 2)) + 1e-5), atol=1e-4)
    with pytest.raises(ValueError, match="Expected input tensor to have 2, 3 or 4 dimensions, but got 5"):
        bn(mx.ones((1, 1, 1, 1, 5)))
    with pytest.raises(ValueError, match="BatchNorm training requires more than one value per channel"):
        nn.BatchNorm(3)(mx.ones((1, 3)))


# --- attention and transformers ----------------------------------------------


def test_multi_head_attention_with_causal_mask():
    mha = nn.MultiHeadAttention(8, 2)
    q, k = rand(2, 5, 8), rand(2, 7, 8)
    p = np_params(mha)
    close(mha(mx.array(q), mx.array(k), mx.array(k)), np_mha(q, k, k, p, 2), atol=1e-4)
    mask = nn.MultiHeadAttention.create_additive_causal_mask(5)
    m = np.array(mask)
    assert m.shape == (5, 5) and m[0, 1] < -1e30 and m[1, 0] == 0 and m[2, 2] == 0
    close(mha(mx.array(q), mx.array(q), mx.array(q), mask), np_mha(q, q, q, p, 2, m), atol=1e-4)
    with pytest.raises(ValueError, match=r"divisible by the number of heads \(10 % 3\) != 0"):
        nn.MultiHeadAttention(10, 3)


def test_multi_head_attention_dims():
    mha = nn.MultiHeadAttention(8, 2, query_input_dims=3, key_input_dims=4, value_input_dims=5,
                                value_dims=6, value_output_dims=7, bias=True)
    out = mha(mx.ones((1, 2, 3)), mx.ones((1, 4, 4)), mx.ones((1, 4, 5)))
    assert out.shape == (1, 2, 7)
    assert mha.out_proj.weight.shape == (7, 6) and "bias" in mha.query_proj


@pytest.mark.parametrize("norm_first", [True, False])
def test_transformer_encoder_layer(norm_first):
    layer = nn.TransformerEncoderLayer(8, 2, mlp_dims=16, norm_first=norm_first)
    p = np_params(layer)
    x = rand(2, 4, 8).astype(np.float64)
    ln = lambda t, n: np_layer_norm(t, p[n]["weight"], p[n]["bias"])  # noqa: E731
    att = lambda t: np_mha(t, t, t, p["attention"], 2)  # noqa: E731
    mlp = lambda t: np.maximum(t @ p["linear1"]["weight"].T + p["linear1"]["bias"], 0) @ p["linear2"]["weight"].T + p["linear2"]["bias"]  # noqa: E501,E731
    if norm_first:
        h = x + att(ln(x, "ln1"))
        expected = h + mlp(ln(h, "ln2"))
    else:
        h = ln(x + att(x), "ln1")
        expected = ln(h + mlp(h), "ln2")
    close(layer(mx.array(x.astype(np.float32)), None), expected, atol=2e-4, rtol=2e-4)


def test_transformer_shapes_and_structure():
    model = nn.Transformer(dims=16, num_heads=4, num_encoder_layers=2, num_decoder_layers=1, mlp_dims=32)
    src, tgt = mx.array(rand(2, 5, 16)), mx.array(rand(2, 3, 16))
    mask = nn.MultiHeadAttention.create_additive_causal_mask(3)
    out = model(src, tgt, None, mask, None)
    assert out.shape == (2, 3, 16)
    assert np.all(np.isfinite(np.array(out)))
    names = [k for k, _ in utils.tree_flatten(model.parameters())]
    assert "encoder.layers.1.linear2.bias" in names and "decoder.ln.weight" in names
    assert len(model.encoder.layers) == 2 and len(model.decoder.layers) == 1
    enc = nn.TransformerEncoder(1, 8, 2, checkpoint=True)
    assert enc(mx.ones((1, 3, 8)), None).shape == (1, 3, 8)


# --- recurrent ---------------------------------------------------------------


def test_rnn():
    rnn = nn.RNN(3, 4)
    p = np_params(rnn)
    x = rand(2, 5, 3).astype(np.float64)
    h = None
    outs = []
    for t in range(5):
        pre = x[:, t] @ p["Wxh"].T + p["bias"] + (0 if h is None else h @ p["Whh"].T)
        h = np.tanh(pre)
        outs.append(h)
    close(rnn(mx.array(x.astype(np.float32))), np.stack(outs, 1), atol=1e-5)
    relu_rnn = nn.RNN(3, 4, bias=False, nonlinearity=nn.relu)
    assert "bias" not in relu_rnn.parameters()
    assert relu_rnn(mx.ones((5, 3))).shape == (5, 4)
    with pytest.raises(ValueError, match="Nonlinearity must be callable"):
        nn.RNN(3, 4, nonlinearity=3)


def test_gru():
    gru = nn.GRU(3, 4)
    p = np_params(gru)
    x = rand(2, 5, 3).astype(np.float64)
    h0 = rand(2, 4).astype(np.float64)
    H = 4
    h = h0
    outs = []
    for t in range(5):
        xp = x[:, t] @ p["Wx"].T + p["b"]
        hp = h @ p["Wh"].T
        r = np_sigmoid(xp[:, :H] + hp[:, :H])
        z = np_sigmoid(xp[:, H:2 * H] + hp[:, H:2 * H])
        n = np.tanh(xp[:, 2 * H:] + r * (hp[:, 2 * H:] + p["bhn"]))
        h = (1 - z) * n + z * h
        outs.append(h)
    close(gru(mx.array(x.astype(np.float32)), mx.array(h0.astype(np.float32))), np.stack(outs, 1), atol=1e-5)
    assert gru(mx.array(x.astype(np.float32))).shape == (2, 5, 4)


def test_lstm():
    lstm = nn.LSTM(3, 4)
    p = np_params(lstm)
    x = rand(2, 5, 3).astype(np.float64)
    h = c = None
    hs, cs = [], []
    for t in range(5):
        g = x[:, t] @ p["Wx"].T + p["bias"] + (0 if h is None else h @ p["Wh"].T)
        i, f, gg, o = np.split(g, 4, axis=-1)
        i, f, gg, o = np_sigmoid(i), np_sigmoid(f), np.tanh(gg), np_sigmoid(o)
        c = i * gg if c is None else f * c + i * gg
        h = o * np.tanh(c)
        hs.append(h)
        cs.append(c)
    hidden, cell = lstm(mx.array(x.astype(np.float32)))
    close(hidden, np.stack(hs, 1), atol=1e-5)
    close(cell, np.stack(cs, 1), atol=1e-5)


# --- positional encodings ----------------------------------------------------


def np_rope(x, dims, traditional, base, scale, offset):
    x = x.astype(np.float64)
    L = x.shape[-2]
    half = dims // 2
    inv = base ** (-np.arange(half) * 2.0 / dims)
    theta = ((np.arange(L) + offset) * scale)[:, None] * inv[None]
    cos, sin = np.cos(theta), np.sin(theta)
    out = x.copy()
    if traditional:
        a, b = x[..., 0:dims:2], x[..., 1:dims:2]
        out[..., 0:dims:2] = a * cos - b * sin
        out[..., 1:dims:2] = a * sin + b * cos
    else:
        a, b = x[..., :half], x[..., half:dims]
        out[..., :half] = a * cos - b * sin
        out[..., half:dims] = a * sin + b * cos
    return out


@pytest.mark.parametrize("traditional", [False, True])
@pytest.mark.parametrize("dims", [8, 6])
def test_rope(traditional, dims):
    x = rand(2, 3, 5, 8)
    rope = nn.RoPE(dims, traditional=traditional, base=100.0, scale=0.5)
    close(rope(mx.array(x)), np_rope(x, dims, traditional, 100.0, 0.5, 0), atol=1e-5)
    close(rope(mx.array(x), offset=3), np_rope(x, dims, traditional, 100.0, 0.5, 3), atol=1e-5)
    assert repr(nn.RoPE(8)) == "RoPE(8, traditional=False)"


def test_sinusoidal_positional_encoding():
    pe = nn.SinusoidalPositionalEncoding(8, min_freq=0.01, max_freq=1.0)
    x = np.arange(5, dtype=np.float32)
    sig = np.exp((1 - np.arange(4) / 3) * (np.log(1.0) - np.log(0.01)) + np.log(0.01))
    y = x[:, None] * sig
    expected = np.concatenate([np.sin(y), np.cos(y)], -1) * math.sqrt(2 / 8)
    close(pe(mx.array(x)), expected, atol=1e-5)
    pe2 = nn.SinusoidalPositionalEncoding(8, min_freq=0.01, scale=1.0, cos_first=True, full_turns=True)
    y2 = x[:, None] * sig * 2 * math.pi
    close(pe2(mx.array(x)), np.concatenate([np.cos(y2), np.sin(y2)], -1), atol=1e-4)
    with pytest.raises(ValueError, match="dims must be positive and even but got 7"):
        nn.SinusoidalPositionalEncoding(7)


def test_alibi():
    slopes = np.array(nn.ALiBi.create_alibi_slope(8)).reshape(-1)
    close(slopes, [2.0 ** -(i + 1) for i in range(8)])
    slopes6 = np.array(nn.ALiBi.create_alibi_slope(6)).reshape(-1)
    s4 = [2 ** (-2 * (i + 1)) for i in range(4)]
    s8 = [2.0 ** -(i + 1) for i in range(8)]
    close(slopes6, s4 + s8[0::2][:2])
    scores = rand(1, 4, 3, 3)
    out = nn.ALiBi()(mx.array(scores))
    dist = -np.abs(np.arange(3)[:, None] - np.arange(3)[None])
    s = np.array([2 ** (-2 * (i + 1)) for i in range(4)])[:, None, None]
    close(out, scores + dist[None] * s[None], atol=1e-6)


# --- embedding ---------------------------------------------------------------


def test_embedding():
    emb = nn.Embedding(10, 4)
    assert emb.weight.shape == (10, 4)
    w = np.array(emb.weight)
    ids = np.array([[1, 3], [9, 0]], dtype=np.int32)
    close(emb(mx.array(ids)), w[ids])
    close(emb.as_linear(mx.ones((2, 4))), np.ones((2, 4)) @ w.T)
    assert repr(emb) == "Embedding(10, 4)"


# --- init --------------------------------------------------------------------


def test_init_functions():
    a = mx.zeros((200, 300))
    c = nn.init.constant(0.5, dtype=mx.float16)(a)
    assert c.dtype == mx.float16 and np.all(np.array(c) == 0.5)
    n = np.array(nn.init.normal(mean=1.0, std=2.0)(a))
    assert abs(n.mean() - 1.0) < 0.05 and abs(n.std() - 2.0) < 0.05
    u = np.array(nn.init.uniform(low=-2.0, high=1.0)(a))
    assert u.min() >= -2.0 and u.max() < 1.0 and abs(u.mean() + 0.5) < 0.05
    close(nn.init.identity()(mx.zeros((3, 3))), np.eye(3))
    with pytest.raises(ValueError, match=r"The input array must be a square matrix but got shape \(2, 3\)"):
        nn.init.identity()(mx.zeros((2, 3)))
    fan_in, fan_out = 300, 200
    g = np.array(nn.init.glorot_uniform()(a))
    assert np.abs(g).max() <= math.sqrt(6 / (fan_in + fan_out)) + 1e-6
    gn = np.array(nn.init.glorot_normal()(a, gain=2.0))
    assert abs(gn.std() - 2 * math.sqrt(2 / (fan_in + fan_out))) < 0.01
    hn = np.array(nn.init.he_normal()(a, mode="fan_out"))
    assert abs(hn.std() - 1 / math.sqrt(fan_out)) < 0.005
    hu = np.array(nn.init.he_uniform()(a))
    assert np.abs(hu).max() <= math.sqrt(3 / fan_in) + 1e-6
    with pytest.raises(ValueError, match="Invalid mode: fan. Valid modes are: fan_in, fan_out"):
        nn.init.he_normal()(a, mode="fan")
    with pytest.raises(ValueError, match="requires at least 2 dimensional input"):
        nn.init.glorot_uniform()(mx.zeros((3,)))


def test_init_orthogonal_and_sparse():
    q = np.array(nn.init.orthogonal(gain=2.0)(mx.zeros((4, 6)))).astype(np.float64)
    np.testing.assert_allclose(q @ q.T, 4 * np.eye(4), atol=1e-4)
    s = np.array(nn.init.sparse(0.25)(mx.zeros((5, 8))))
    assert np.all((s == 0).sum(axis=1) >= 2)
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        nn.init.sparse(0.5)(mx.zeros((2, 2, 2)))


# --- gradients against finite differences ------------------------------------


def _fd_check(model, loss_of_model, x, names, eps=1e-3, tol=2e-2):
    """Compare nn.value_and_grad with central differences (float64 NumPy bookkeeping)."""
    _, grads = nn.value_and_grad(model, lambda inp: loss_of_model(model, inp))(x)
    flat_grads = dict(utils.tree_flatten(grads))
    params = dict(utils.tree_flatten(model.parameters()))
    for name in names:
        base = np.array(params[name]).astype(np.float64)
        numeric = np.zeros_like(base).reshape(-1)
        for i in range(min(base.size, 6)):
            values = []
            for sign in (1, -1):
                bumped = base.reshape(-1).copy()
                bumped[i] += sign * eps
                model.update(utils.tree_unflatten([(name, mx.array(bumped.reshape(base.shape).astype(np.float32)))]))
                values.append(loss_of_model(model, x).item())
            model.update(utils.tree_unflatten([(name, mx.array(base.astype(np.float32)))]))
            numeric[i] = (values[0] - values[1]) / (2 * eps)
        analytic = np.array(flat_grads[name]).reshape(-1)[: min(base.size, 6)]
        np.testing.assert_allclose(analytic, numeric[: len(analytic)], rtol=tol, atol=tol, err_msg=name)


def test_gradients_linear_layernorm_lstm_attention():
    mx.random.seed(1)
    x = mx.array(rand(2, 3, 4))
    model = nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6), nn.GELU())
    _fd_check(model, lambda m, inp: (m(inp) ** 2).sum(), x, ["layers.0.weight", "layers.1.weight", "layers.1.bias"])
    lstm = nn.LSTM(4, 3)
    _fd_check(lstm, lambda m, inp: (m(inp)[0] ** 2).sum(), x, ["Wx", "Wh", "bias"])
    mha = nn.MultiHeadAttention(4, 2)
    _fd_check(mha, lambda m, inp: (m(inp, inp, inp) ** 2).sum(), x, ["query_proj.weight", "value_proj.weight"])


# --- upsample ----------------------------------------------------------------


def _up(x, *args, **kwargs):
    return np.array(nn.Upsample(*args, **kwargs)(mx.array(np.asarray(x, np.float32))))


def test_upsample_nearest():
    x = np.arange(4, dtype=np.float32).reshape(1, 4, 1)
    close(_up(x, 2), np.repeat(x, 2, axis=1))
    # Fractional scale: output m samples round((m + 0.5) * N / M - 0.5), half to even.
    close(_up(x, 1.5)[0, :, 0], [0, 0, 1, 2, 2, 3])
    img = rand(2, 4, 6, 5)
    close(_up(img, (2, 3)), np.repeat(np.repeat(img, 2, axis=1), 3, axis=2))
    close(_up(img, 0.5)[0, :, :, 0], img[0, ::2, ::2, 0])


def test_upsample_linear():
    x = np.arange(4, dtype=np.float32).reshape(1, 4, 1)
    close(_up(x, 2, mode="linear")[0, :, 0], [0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3])
    close(_up(x, 2, mode="linear", align_corners=True)[0, :, 0], np.arange(8) * 3 / 7)
    img = rand(1, 3, 4, 2).astype(np.float64)
    got = _up(img, 2, mode="linear", align_corners=True)
    # Separable: rows then columns, each linear with corners aligned.
    def interp_axis(a, axis, m):
        n = a.shape[axis]
        pos = np.arange(m) * (n - 1) / (m - 1)
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, n - 1)
        w = (pos - lo).reshape([-1 if d == axis else 1 for d in range(a.ndim)])
        return np.take(a, lo, axis) * (1 - w) + np.take(a, hi, axis) * w
    close(got, interp_axis(interp_axis(img, 1, 6), 2, 8), atol=1e-5)


def test_upsample_cubic_and_antialias():
    x = rand(7).astype(np.float64)

    def keys(d, a=-0.75):  # Keys' cubic convolution kernel
        return np.where(d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1,
                        np.where(d <= 2, (((d - 5) * d + 8) * d - 4) * a, 0.0))

    pos = np.arange(14) * 6 / 13
    taps = np.floor(pos)[:, None] + np.arange(-1, 3)[None]
    expected = (keys(np.abs(pos[:, None] - taps)) * x[np.clip(taps, 0, 6).astype(int)]).sum(1)
    out = _up(x.reshape(1, 7, 1), 2, mode="cubic", align_corners=True)[0, :, 0]
    close(out, expected, atol=1e-5)
    # Downsampling with antialiasing averages: a linear (triangle) filter on a ramp
    # keeps the ramp's values at the output sample positions.
    ramp = np.arange(8, dtype=np.float32).reshape(1, 8, 1)
    out = _up(ramp, 0.5, mode="linear", antialias=True)[0, :, 0]
    assert out.shape == (4,)
    close(out[1:-1], [2.5, 4.5], atol=1e-5)
    close(_up(np.ones((1, 6, 6, 1)), 0.5, mode="cubic", antialias=True), np.ones((1, 3, 3, 1)), atol=1e-5)


def test_upsample_errors_and_repr():
    assert repr(nn.Upsample(2)) == "Upsample(scale_factor=2.0, mode='nearest', align_corners=False)"
    with pytest.raises(ValueError, match="Got unsupported upsampling algorithm: bad"):
        nn.Upsample(2, mode="bad")
    with pytest.raises(ValueError, match="Antialiasing is not supported for nearest neighbor"):
        nn.Upsample(2, antialias=True)
    with pytest.raises(ValueError, match="antialias=True with align_corners=True is not supported"):
        nn.Upsample(2, mode="linear", align_corners=True, antialias=True)
    with pytest.raises(ValueError, match="it should be at least 3D but 2D was provided"):
        nn.Upsample(2)(mx.ones((2, 2)))
    with pytest.raises(ValueError, match="One scale per spatial dimension is required"):
        nn.Upsample((2, 2))(mx.ones((1, 2, 1)))


@pytest.mark.loom_only
def test_upsample_cubic_sample_on_an_input_pixel():
    """MLX computes the right tap as floor(p + 1) in float32: for p just below an
    integer that rounds up and the sample gets no weight on its own pixel (an
    all-zero output row). Loom takes the four taps from floor(p)."""
    x = np.eye(5, dtype=np.float32)[None]
    out = _up(x, 2.7, mode="cubic")[0]
    close(out.sum(axis=1), np.ones(13), atol=1e-5)
    close(out[6], [0, 0, 1, 0, 0], atol=1e-5)


def test_upsample_gradient_is_transposed_interpolation():
    layer = nn.Upsample(2, mode="linear", align_corners=True)
    g = mx.grad(lambda t: layer(t).sum())(mx.ones((1, 3, 1)))
    # Each output row of the interpolation matrix sums to one: 5 outputs of weight... total 6.
    close(np.array(g).sum(), 6.0, atol=1e-5)


# --- half precision ----------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_layers_keep_half_precision(dtype):
    dt = getattr(mx, dtype)
    x = mx.array(rand(2, 4, 8)).astype(dt)
    layers = [nn.Linear(8, 8), nn.LayerNorm(8), nn.RMSNorm(8), nn.GroupNorm(2, 8), nn.BatchNorm(8),
              nn.InstanceNorm(8), nn.RoPE(8), nn.GELU(), nn.SiLU(), nn.Dropout(0.1)]
    for layer in layers:
        layer.set_dtype(dt)
        y = layer(x)
        assert y.dtype == dt, type(layer).__name__
        assert np.all(np.isfinite(np.array(y.astype(mx.float32)))), type(layer).__name__
    mha = nn.MultiHeadAttention(8, 2)
    mha.set_dtype(dt)
    assert mha(x, x, x).dtype == dt
    ref = np_layer_norm(np.array(x.astype(mx.float32)))
    close(nn.LayerNorm(8, affine=False)(x).astype(mx.float32), ref, rtol=2e-2, atol=2e-2)
