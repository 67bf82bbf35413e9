"""nn.QuantizedLinear, nn.QuantizedEmbedding, nn.QQLinear, nn.quantize and the
to_quantized methods, as MLX 0.32.4's (run with LOOM_TEST_ORACLE=mlx too)."""

import gc

import numpy as np
import pytest

from _nn_backend import IS_MLX, mx, nn, utils


def keys(tree):
    return [k for k, _ in utils.tree_flatten(tree)]


def test_quantized_linear_parameters_and_repr():
    layer = nn.QuantizedLinear(64, 32)
    assert keys(layer.parameters()) == ["weight", "scales", "biases", "bias"]
    assert keys(layer.trainable_parameters()) == []
    assert layer.weight.shape == (32, 8) and layer.weight.dtype == mx.uint32
    assert layer.scales.shape == (32, 1) and layer.biases.shape == (32, 1)
    assert (layer.group_size, layer.bits, layer.mode) == (64, 4, "affine")
    assert repr(layer) == (
        "QuantizedLinear(input_dims=64, output_dims=32, bias=True, group_size=64, bits=4, "
        "mode=affine)"
    )
    fp = nn.QuantizedLinear(64, 32, bias=False, mode="mxfp4")
    assert keys(fp.parameters()) == ["weight", "scales"]
    assert repr(fp).endswith("bias=False, group_size=32, bits=4, mode=mxfp4)")


def test_quantized_linear_matches_its_linear():
    lin = nn.Linear(128, 16)
    q = nn.QuantizedLinear.from_linear(lin, group_size=32, bits=8)
    x = mx.random.normal((3, 128), key=mx.random.key(1))
    np.testing.assert_allclose(np.array(q(x)), np.array(lin(x)), rtol=0.05, atol=0.05)
    w = mx.dequantize(q.weight, q.scales, q.biases, 32, 8)
    np.testing.assert_allclose(np.array(q(x)), np.array(x @ w.T + lin.bias), rtol=1e-4,
                               atol=1e-4)
    # from_linear keeps the bias trainable (it is set after the freeze).
    assert keys(q.trainable_parameters()) == ["bias"]


def test_to_quantized_and_unfreeze():
    q = nn.Linear(64, 32).to_quantized()
    assert type(q).__name__ == "QuantizedLinear" and q.bits == 4
    q.unfreeze()
    assert keys(q.trainable_parameters()) == ["weight", "scales", "biases", "bias"]
    e = nn.Embedding(10, 64).to_quantized(bits=8)
    assert type(e).__name__ == "QuantizedEmbedding" and e.bits == 8
    with pytest.raises(ValueError, match="Quantized input is not supported"):
        nn.Embedding(10, 64).to_quantized(quantize_input=True)


def test_quantized_embedding_lookup_and_as_linear():
    emb = nn.Embedding(20, 64)
    q = nn.QuantizedEmbedding.from_embedding(emb, bits=8)
    assert keys(q.parameters()) == ["weight", "scales", "biases"]
    assert keys(q.trainable_parameters()) == []
    assert repr(q) == "QuantizedEmbedding(20, 64, group_size=64, bits=8, mode=affine)"
    ids = mx.array([[1, 5], [19, 0]])
    out = q(ids)
    assert out.shape == (2, 2, 64)
    np.testing.assert_allclose(np.array(out), np.array(emb(ids)), atol=0.02)
    x = mx.random.normal((3, 64), key=mx.random.key(2))
    assert q.as_linear(x).shape == (3, 20)
    np.testing.assert_allclose(np.array(q.as_linear(x)), np.array(x @ emb.weight.T), atol=0.2)


def test_quantize_a_model_in_place():
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Embedding(10, 64), nn.Linear(128, 8))
    nn.quantize(model, bits=8)
    names = [type(m).__name__ for m in model.layers]
    assert names == ["QuantizedLinear", "ReLU", "QuantizedEmbedding", "QuantizedLinear"]
    assert model.layers[0].bits == 8 and model.layers[3].group_size == 64


def test_quantize_with_a_class_predicate():
    model = nn.Sequential(nn.Linear(64, 32), nn.Linear(64, 32), nn.Linear(64, 32))

    def predicate(path, module):
        if path == "layers.0":
            return {"bits": 8, "group_size": 32}
        return path == "layers.1"

    nn.quantize(model, class_predicate=predicate)
    assert (model.layers[0].bits, model.layers[0].group_size) == (8, 32)
    assert (model.layers[1].bits, model.layers[1].group_size) == (4, 64)
    assert type(model.layers[2]).__name__ == "Linear"


def test_quantize_refuses_a_weight_that_does_not_fill_groups():
    model = nn.Sequential(nn.Linear(60, 32))
    with pytest.raises(ValueError, match="divisible by the quantization group size 64"):
        nn.quantize(model)


def test_quantized_model_trains_its_biases():
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4))
    nn.quantize(model, group_size=32, bits=4)
    x = mx.random.normal((8, 64), key=mx.random.key(3))
    y = mx.random.normal((8, 4), key=mx.random.key(4))

    def loss(m):
        return ((m(x) - y) ** 2).mean()

    loss0, grads = nn.value_and_grad(model, loss)(model)
    assert keys(grads) == ["layers.0.bias", "layers.2.bias"]
    for _ in range(20):
        _, grads = nn.value_and_grad(model, loss)(model)
        model.update(utils.tree_map(lambda p, g: p - 0.1 * g, model.trainable_parameters(), grads))
    assert loss(model).item() < loss0.item()


def test_qqlinear_quantizes_input_and_weight():
    lin = nn.Linear(64, 32, bias=False)
    q = lin.to_quantized(quantize_input=True, mode="nvfp4")
    assert type(q).__name__ == "QQLinear"
    with pytest.raises(NotImplementedError, match="QQLinear does not support bias yet."):
        nn.Linear(64, 32).to_quantized(quantize_input=True, mode="nvfp4")
    q.eval()
    x = mx.random.normal((1, 64), key=mx.random.key(5))
    np.testing.assert_allclose(np.array(q(x)), np.array(lin(x)), rtol=0.3, atol=0.6)


@pytest.mark.loom_only
def test_quantized_layers_release_their_memory():
    x = mx.random.normal((4, 64))
    mx.eval(x)

    def cycle():
        model = nn.Sequential(nn.Linear(64, 64), nn.Embedding(16, 64))
        nn.quantize(model)
        mx.eval(model.parameters())
        mx.eval(model.layers[0](x), model.layers[1](mx.array([1, 2])))

    cycle()
    gc.collect()
    base = mx.get_active_memory()
    for _ in range(10):
        cycle()
    gc.collect()
    assert mx.get_active_memory() <= base
