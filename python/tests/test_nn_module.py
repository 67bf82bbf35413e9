"""nn.Module (seed §11): the parameter tree, update model, freezing, modes, weights."""


import numpy as np
import pytest

from _nn_backend import mx, nn, optim, utils

tree_flatten = utils.tree_flatten
tree_map = utils.tree_map


class MLP(nn.Module):
    def __init__(self, in_dims: int, out_dims: int):
        super().__init__()

        self.layers = [
            nn.Linear(in_dims, 128),
            nn.Linear(128, 128),
            nn.Linear(128, out_dims),
        ]

    def __call__(self, x):
        for i, l in enumerate(self.layers):
            x = mx.maximum(x, 0) if i > 0 else x
            x = l(x)
        return x


def test_seed_11_2_canonical_module():
    mlp = MLP(2, 10)
    params = mlp.parameters()
    assert params["layers"][0]["weight"].shape == (128, 2)
    assert set(params["layers"][0].keys()) == {"weight", "bias"}
    mx.eval(mlp.parameters())
    assert repr(mlp) == (
        "MLP(\n"
        "  (layers.0): Linear(input_dims=2, output_dims=128, bias=True)\n"
        "  (layers.1): Linear(input_dims=128, output_dims=128, bias=True)\n"
        "  (layers.2): Linear(input_dims=128, output_dims=10, bias=True)\n"
        ")"
    )
    shapes = tree_map(lambda p: p.shape, mlp.parameters())
    assert shapes["layers"][2] == {"weight": (10, 128), "bias": (10,)}
    num_params = sum(v.size for _, v in tree_flatten(mlp.parameters()))
    assert num_params == 2 * 128 + 128 + 128 * 128 + 128 + 128 * 10 + 10
    assert mlp(mx.zeros((4, 2))).shape == (4, 10)


def test_module_is_a_dict_and_setattr_routing():
    m = nn.Module()
    m.w = mx.zeros((2,))
    m.sub = {"a": mx.ones((1,))}
    m.count = 3
    m.np_value = np.zeros(2)
    m._hidden = mx.zeros((1,))
    assert isinstance(m, dict)
    assert set(m.keys()) == {"w", "sub", "_hidden"}
    assert m.count == 3 and "count" not in m
    assert set(m.parameters().keys()) == {"w", "sub"}
    # Re-assigning a non-array removes the dict entry.
    m.w = 1.5
    assert "w" not in m and m.w == 1.5
    del m.sub
    assert "sub" not in m
    with pytest.raises(AttributeError):
        m.missing


def test_state_is_the_module_itself():
    model = nn.Linear(3, 2)
    assert model.state is model
    model.state["weight"] = mx.zeros((2, 3))
    np.testing.assert_array_equal(np.array(model.weight), np.zeros((2, 3)))


def test_children_leaf_modules_named_modules():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Sequential(nn.Linear(3, 1)))
    children = model.children()
    assert list(children.keys()) == ["layers"]
    assert len(children["layers"]) == 3
    names = [k for k, _ in model.named_modules()]
    assert sorted(names) == ["", "layers.0", "layers.1", "layers.2", "layers.2.layers.0"]
    assert len(model.modules()) == 5
    leaves = tree_flatten(model.leaf_modules(), is_leaf=nn.Module.is_module)
    assert [k for k, _ in leaves] == ["layers.0", "layers.1", "layers.2.layers.0"]


def test_update_partial_and_strict_errors():
    model = nn.Linear(2, 2)
    model.update({"bias": mx.array([1.0, 2.0])})
    np.testing.assert_array_equal(np.array(model.bias), [1.0, 2.0])
    with pytest.raises(ValueError, match='Module does not have parameter named "nope"'):
        model.update({"nope": mx.zeros((1,))})
    with pytest.raises(ValueError, match="Received invalid type: int"):
        model.update({"bias": 3})
    model.update({"nope": mx.zeros((1,))}, strict=False)
    assert "nope" not in model
    seq = nn.Sequential(nn.Linear(1, 1))
    with pytest.raises(ValueError, match="List index 1 is out of bounds for destination of length 1"):
        seq.update({"layers": [{}, {}]})


def test_seed_11_4_update_then_call():
    model = nn.Linear(3, 1)

    def f(params, x):
        model.update(params)
        return model(x).sum()

    params = model.trainable_parameters()
    grads = mx.grad(f)(params, mx.ones((2, 3)))
    np.testing.assert_allclose(np.array(grads["weight"]), np.full((1, 3), 2.0))
    np.testing.assert_allclose(np.array(grads["bias"]), [2.0])


def test_update_modules():
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    replacement = nn.Linear(2, 3)
    model.update_modules({"layers": [replacement, {}]})
    assert model.layers[0] is replacement
    with pytest.raises(ValueError, match='Module does not have sub-module named "x"'):
        model.update_modules({"x": nn.ReLU()})


def test_apply_and_apply_to_modules():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    model.apply(lambda p: mx.zeros_like(p))
    assert all(np.all(np.array(v) == 0) for _, v in tree_flatten(model.parameters()))
    model.apply(lambda p: mx.ones_like(p), filter_fn=lambda m, k, v: k != "bias")
    np.testing.assert_array_equal(np.array(model.layers[0].bias), [0, 0])
    np.testing.assert_array_equal(np.array(model.layers[0].weight), np.ones((2, 2)))
    seen = []
    model.apply_to_modules(lambda k, m: seen.append(k))
    assert sorted(seen) == ["", "layers.0", "layers.1"]


def test_freeze_unfreeze():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    model.freeze()
    assert tree_flatten(model.trainable_parameters()) == []
    model.freeze()  # idempotent
    model.unfreeze(keys="bias")
    assert [k for k, _ in tree_flatten(model.trainable_parameters())] == [
        "layers.0.bias", "layers.1.bias"
    ]
    model.unfreeze()
    assert len(tree_flatten(model.trainable_parameters())) == 4
    model.freeze(keys="bias")
    assert [k for k, _ in tree_flatten(model.trainable_parameters())] == [
        "layers.0.weight", "layers.1.weight"
    ]
    with pytest.raises(KeyError, match="Module doesn't contain member nope"):
        model.freeze(keys="nope", strict=True)
    model.layers[0].freeze(recurse=False)
    assert "weight" not in model.layers[0].trainable_parameters()
    # Frozen parameters are still parameters.
    assert len(tree_flatten(model.parameters())) == 4


def test_seed_freeze_idiom_on_transformer():
    model = nn.Transformer(dims=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1)
    model.freeze()
    model.apply_to_modules(lambda k, v: v.unfreeze() if k.endswith("attention") else None)
    names = [k for k, _ in tree_flatten(model.trainable_parameters())]
    assert names and all("attention" in k for k in names)
    assert "encoder.layers.0.attention.query_proj.weight" in names
    assert "decoder.layers.0.cross_attention.out_proj.weight" in names


def test_value_and_grad_uses_trainable_parameters():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    model.layers[0].freeze()

    def loss_fn(x):
        return model(x).sum()

    loss, grads = nn.value_and_grad(model, loss_fn)(mx.ones((3, 2)))
    assert loss.shape == ()
    assert list(grads["layers"][0].keys()) == []
    assert set(grads["layers"][1].keys()) == {"weight", "bias"}
    np.testing.assert_allclose(np.array(grads["layers"][1]["bias"]), [3.0])


def test_train_eval_training_flag():
    model = nn.Sequential(nn.Dropout(0.5), nn.Linear(2, 2))
    assert model.training and model.layers[0].training
    model.eval()
    assert not model.training and not model.layers[0].training
    model.train()
    assert model.layers[0].training


def test_set_dtype_floating_only_by_default():
    model = nn.Linear(2, 2)
    model.ids = mx.array([1, 2, 3])
    model.set_dtype(mx.float16)
    assert model.weight.dtype == mx.float16 and model.bias.dtype == mx.float16
    assert model.ids.dtype == mx.int32
    model.set_dtype(mx.float32, predicate=None)
    assert model.ids.dtype == mx.float32


@pytest.mark.loom_only
def test_apply_keeps_integer_parameters_unless_asked():
    model = nn.Linear(2, 2)
    model.ids = mx.array([1, 2, 3])
    model.apply(lambda x: x.astype(mx.bfloat16))
    assert model.weight.dtype == mx.bfloat16
    assert model.ids.dtype == mx.int32
    model.apply(lambda x: x.astype(mx.bfloat16), cast_integers=True)
    assert model.ids.dtype == mx.bfloat16


def test_seed_11_6_load_weights_from_list():
    model = nn.Linear(10, 10)
    weights = [
        ("weight", mx.random.uniform(shape=(10, 10))),
        ("bias", mx.zeros((10,))),
    ]
    model.load_weights(weights)
    np.testing.assert_array_equal(np.array(model.bias), np.zeros(10))

    weights = [("weight", mx.random.uniform(shape=(10, 10)))]
    with pytest.raises(ValueError, match=r"Missing 1 parameters: \nbias\."):
        model.load_weights(weights)
    model.load_weights(weights, strict=False)
    np.testing.assert_array_equal(np.array(model.weight), np.array(weights[0][1]))

    with pytest.raises(ValueError, match=r"Received 1 parameters not in model: \nextra\."):
        model.load_weights(weights + [("bias", mx.zeros((10,))), ("extra", mx.zeros((1,)))])
    with pytest.raises(
        ValueError, match=r"Expected shape \(10,\) but received shape \(3,\) for parameter bias"
    ):
        model.load_weights([("weight", mx.zeros((10, 10))), ("bias", mx.zeros((3,)))])


@pytest.mark.loom_only
def test_load_weights_non_strict_still_checks_shapes():
    model = nn.Linear(4, 2)
    with pytest.raises(
        ValueError, match=r"Expected shape \(2, 4\) but received shape \(4, 2\) for parameter weight"
    ):
        model.load_weights([("weight", mx.zeros((4, 2)))], strict=False)
    # Unknown names are still ignored without strict.
    model.load_weights([("unknown", mx.zeros((1,)))], strict=False)


def test_save_weights_rejects_unknown_extension(tmp_path):
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"Unsupported file extension for .*\.bin\. Use '\.npz' or '\.safetensors'\."):
        model.save_weights(str(tmp_path / "w.bin"))


@pytest.mark.parametrize("ext", [".npz", ".safetensors"])
def test_save_and_load_weights_roundtrip(tmp_path, ext):
    model = MLP(3, 2)
    path = str(tmp_path / f"w{ext}")
    model.save_weights(path)
    other = MLP(3, 2)
    other.load_weights(path)
    for (k, a), (_, b) in zip(tree_flatten(model.parameters()), tree_flatten(other.parameters())):
        np.testing.assert_array_equal(np.array(a), np.array(b), err_msg=k)


def test_seed_11_7_optimizer_state_roundtrip(tmp_path):
    optimizer = optim.Adam(learning_rate=1e-2)
    model = {"w": mx.zeros((5, 5))}
    grads = {"w": mx.ones((5, 5))}
    optimizer.update(model, grads)
    path = str(tmp_path / "optimizer.safetensors")
    state = tree_flatten(optimizer.state, destination={})
    mx.save_safetensors(path, state)
    optimizer = optim.Adam(learning_rate=1e-2)
    optimizer.state = utils.tree_unflatten(mx.load(path))
    np.testing.assert_allclose(np.array(optimizer.state["w"]["m"]), np.full((5, 5), 0.1), rtol=1e-6)
    assert optimizer.state["step"].item() == 1
