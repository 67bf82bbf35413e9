"""Tree utilities (mlx.utils): flatten/unflatten paths and order, map, reduce, merge."""

from collections import namedtuple

import numpy as np
import pytest

from _nn_backend import mx, utils

tree_flatten = utils.tree_flatten
tree_unflatten = utils.tree_unflatten
tree_map = utils.tree_map
tree_map_with_path = utils.tree_map_with_path
tree_reduce = utils.tree_reduce
tree_merge = utils.tree_merge


def test_flatten_docstring_examples():
    assert tree_flatten([[[0]]]) == [("0.0.0", 0)]
    assert tree_flatten([[[0]]], prefix=".hello") == [("hello.0.0.0", 0)]
    assert tree_flatten({"a": {"b": 1}}, destination={}) == {"a.b": 1}


def test_flatten_order_and_paths():
    tree = {"z": [1, (2, 3)], "a": {"y": 4, "b": [5]}, "m": 6}
    assert tree_flatten(tree) == [
        ("z.0", 1), ("z.1.0", 2), ("z.1.1", 3), ("a.y", 4), ("a.b.0", 5), ("m", 6)
    ]


def test_flatten_leaf_and_empty():
    assert tree_flatten(5) == [("", 5)]
    assert tree_flatten({}) == []
    assert tree_flatten({"a": [], "b": {}}) == []


def test_flatten_is_leaf_and_destination_errors():
    tree = {"a": [1, 2], "b": [3]}
    out = tree_flatten(tree, is_leaf=lambda x: isinstance(x, list))
    assert out == [("a", [1, 2]), ("b", [3])]
    with pytest.raises(ValueError, match="Destination should be either a list or a dictionary"):
        tree_flatten(tree, destination=set())


def test_flatten_appends_to_given_list():
    dest = [("x", 0)]
    out = tree_flatten({"a": 1}, destination=dest)
    assert out is dest and dest == [("x", 0), ("a", 1)]


def test_unflatten_roundtrip_and_lists():
    tree = {"layers": [{"w": 1, "b": 2}, {"w": 3}], "head": {"scale": 4}}
    assert tree_unflatten(tree_flatten(tree)) == tree
    assert tree_unflatten(tree_flatten(tree, destination={})) == tree
    assert tree_unflatten([("hello.world", 42)]) == {"hello": {"world": 42}}
    assert tree_unflatten({"hello.world": 42}) == {"hello": {"world": 42}}
    assert tree_unflatten([("", 7)]) == 7


def test_unflatten_fills_missing_list_indices_with_empty_dicts():
    assert tree_unflatten([("2", "c"), ("0", "a")]) == ["a", {}, "c"]
    # Mixed integer and string keys make a dict.
    assert tree_unflatten([("0", 1), ("x", 2)]) == {"0": 1, "x": 2}


def test_map_multiple_trees_and_types():
    Point = namedtuple("Point", ["x", "y"])
    tree = {"a": [1, 2], "b": (3, Point(4, 5))}
    other = {"a": [10, 20], "b": (30, Point(40, 50)), "extra": 0}
    out = tree_map(lambda x, y: x + y, tree, other)
    assert out == {"a": [11, 22], "b": (33, Point(44, 55))}
    assert isinstance(out["b"], tuple) and isinstance(out["b"][1], Point)
    assert tree_map(lambda x: x, 3) == 3
    assert tree_map(len, {"a": [1, 2]}, is_leaf=lambda x: isinstance(x, list)) == {"a": 2}


def test_map_with_path():
    tree = {"model": [{"w": 0, "b": 1}, {"w": 0, "b": 1}]}
    paths = []
    tree_map_with_path(lambda path, _: paths.append(path), tree)
    assert paths == ["model.0.w", "model.0.b", "model.1.w", "model.1.b"]
    out = tree_map_with_path(lambda p, x, y: f"{p}:{x + y}", {"a": [1]}, {"a": [2]})
    assert out == {"a": ["a.0:3"]}
    assert tree_map_with_path(lambda p, x: p, [1], path="root") == ["root.0"]


def test_reduce():
    tree = {"a": [1, 2, 3], "b": [4, 5]}
    assert tree_reduce(lambda acc, x: acc + x, tree, 0) == 15
    assert tree_reduce(lambda acc, x: acc + x, tree) == 15
    assert tree_reduce(lambda acc, x: acc * x, [2, (3, 4)], 1) == 24
    assert tree_reduce(lambda acc, x: acc + [len(x)], {"a": [1, 2]}, [],
                       is_leaf=lambda x: isinstance(x, list)) == [2]
    assert tree_reduce(lambda acc, x: acc + x, {}, None) is None


def test_merge():
    a = {"x": {"p": 1}, "l": [1, {}]}
    b = {"x": {"q": 2}, "l": [{}, 2], "y": 3}
    assert tree_merge(a, b) == {"x": {"p": 1, "q": 2}, "l": [1, 2], "y": 3}
    assert tree_merge({}, {}) == {}
    assert tree_merge([], [1]) == [1]
    with pytest.raises(ValueError, match="no merge function was provided"):
        tree_merge({"a": 1}, {"a": 2})
    assert tree_merge({"a": 1}, {"a": 2}, lambda u, v: u + v) == {"a": 3}
    with pytest.raises(ValueError, match="Cannot merge dict with list"):
        tree_merge({}, [])


def test_arrays_and_parameter_count_idiom():
    params = {"w": mx.zeros((3, 4)), "b": [mx.ones((4,)), mx.ones((2, 2))]}
    flat = tree_flatten(params)
    assert [k for k, _ in flat] == ["w", "b.0", "b.1"]
    assert sum(v.size for _, v in flat) == 12 + 4 + 4
    shapes = tree_map(lambda p: p.shape, params)
    assert shapes == {"w": (3, 4), "b": [(4,), (2, 2)]}
    doubled = tree_map(lambda p: p * 2, params)
    np.testing.assert_array_equal(np.array(doubled["b"][0]), np.full((4,), 2.0))
