"""Tree utilities of ``mlx.utils``: nested lists, tuples and dicts of leaves.

A tree is any nesting of ``list``, ``tuple`` (namedtuples included) and
``dict`` (``nn.Module`` included, being a dict); everything else is a leaf.
Paths join keys and list indices with dots (``"layers.0.weight"``), in the
order lists and dicts iterate, exactly as MLX writes them, so flat
checkpoints move between the two frameworks unchanged.

The core's C++ tree walker (python/src/trees.cpp) serves eval and the
transforms, which need only arrays; these functions also take ``is_leaf``
predicates, several trees at once and paths, which is why they are Python.
They agree with the core on what a container is.
"""

from __future__ import annotations

from itertools import zip_longest
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

__all__ = [
    "tree_flatten",
    "tree_unflatten",
    "tree_map",
    "tree_map_with_path",
    "tree_reduce",
    "tree_merge",
]


def _is_sequence(tree: Any) -> bool:
    return isinstance(tree, (list, tuple))


def _rebuild(original: Any, children) -> Any:
    """A list/tuple/namedtuple of the same type as ``original``."""
    if hasattr(original, "_fields"):
        return type(original)(*children)
    return type(original)(children)


def tree_map(fn: Callable, tree: Any, *rest: Any, is_leaf: Optional[Callable] = None) -> Any:
    """Apply ``fn`` to the leaves of ``tree`` and return a tree of the results.

    Every tree in ``rest`` must hold ``tree``'s structure (it may hold more);
    its matching leaves are passed to ``fn`` as extra arguments.
    """
    if is_leaf is not None and is_leaf(tree):
        return fn(tree, *rest)
    if _is_sequence(tree):
        return _rebuild(
            tree,
            [
                tree_map(fn, child, *(r[i] for r in rest), is_leaf=is_leaf)
                for i, child in enumerate(tree)
            ],
        )
    if isinstance(tree, dict):
        return {
            k: tree_map(fn, child, *(r[k] for r in rest), is_leaf=is_leaf)
            for k, child in tree.items()
        }
    return fn(tree, *rest)


def tree_map_with_path(
    fn: Callable,
    tree: Any,
    *rest: Any,
    is_leaf: Optional[Callable] = None,
    path: Optional[Any] = None,
) -> Any:
    """Like :func:`tree_map`, with the leaf's dotted path as ``fn``'s first argument."""
    if is_leaf is not None and is_leaf(tree):
        return fn(path, tree, *rest)
    prefix = f"{path}." if path else ""
    if _is_sequence(tree):
        return _rebuild(
            tree,
            [
                tree_map_with_path(
                    fn, child, *(r[i] for r in rest), is_leaf=is_leaf, path=f"{prefix}{i}"
                )
                for i, child in enumerate(tree)
            ],
        )
    if isinstance(tree, dict):
        return {
            k: tree_map_with_path(
                fn, child, *(r[k] for r in rest), is_leaf=is_leaf, path=f"{prefix}{k}"
            )
            for k, child in tree.items()
        }
    return fn(path, tree, *rest)


def tree_flatten(
    tree: Any,
    prefix: str = "",
    is_leaf: Optional[Callable] = None,
    destination: Optional[Union[List[Tuple[str, Any]], Dict[str, Any]]] = None,
) -> Union[List[Tuple[str, Any]], Dict[str, Any]]:
    """The leaves of ``tree`` as ``(dotted_path, leaf)`` pairs.

    ``prefix``'s first character is dropped (it is the separator of an outer
    level). With ``destination={}`` the result is a ``{path: leaf}`` dict, the
    form ``save_safetensors`` takes.
    """
    if destination is None:
        destination = []
    if isinstance(destination, list):
        add = destination.append
    elif isinstance(destination, dict):

        def add(item):
            destination[item[0]] = item[1]

    else:
        raise ValueError("Destination should be either a list or a dictionary or None")

    # Explicit stack: a deep tree never exhausts Python's recursion limit.
    stack = [(prefix, tree)]
    while stack:
        path, node = stack.pop()
        if is_leaf is not None and is_leaf(node):
            add((path[1:], node))
        elif _is_sequence(node):
            stack.extend(reversed([(f"{path}.{i}", v) for i, v in enumerate(node)]))
        elif isinstance(node, dict):
            stack.extend(reversed([(f"{path}.{k}", v) for k, v in node.items()]))
        else:
            add((path[1:], node))
    return destination


def tree_unflatten(tree: Union[List[Tuple[str, Any]], Dict[str, Any]]) -> Any:
    """Rebuild a tree from ``(dotted_path, leaf)`` pairs or a ``{path: leaf}`` dict.

    A level whose keys are all integers becomes a list (missing indices are
    filled with empty dicts); any other level becomes a dict.
    """
    items = list(tree.items()) if isinstance(tree, dict) else list(tree)
    if len(items) == 1 and items[0][0] == "":
        return items[0][1]

    children: Dict[str, list] = {}
    for key, value in items:
        head, _, tail = key.partition(".")
        children.setdefault(head, []).append((tail, value))

    try:
        indices = {int(k): k for k in children}
    except ValueError:
        indices = None
    if indices is not None and len(indices) == len(children):
        out: list = []
        for i, k in sorted(indices.items()):
            out.extend({} for _ in range(i - len(out)))
            out.append(tree_unflatten(children[k]))
        return out
    return {k: tree_unflatten(v) for k, v in children.items()}


def tree_reduce(
    fn: Callable, tree: Any, initializer: Any = None, is_leaf: Optional[Callable] = None
) -> Any:
    """Fold ``fn(accumulator, leaf)`` over the leaves, in flatten order.

    Without an ``initializer`` the first leaf starts the accumulation.
    """
    if is_leaf is not None and is_leaf(tree):
        return tree if initializer is None else fn(initializer, tree)
    acc = initializer
    if _is_sequence(tree):
        for child in tree:
            acc = tree_reduce(fn, child, acc, is_leaf)
        return acc
    if isinstance(tree, dict):
        for child in tree.values():
            acc = tree_reduce(fn, child, acc, is_leaf)
        return acc
    return tree if acc is None else fn(acc, tree)


def _is_empty_container(tree: Any) -> bool:
    return isinstance(tree, (dict, list, tuple)) and len(tree) == 0


def tree_merge(tree_a: Any, tree_b: Any, merge_fn: Optional[Callable] = None) -> Any:
    """Merge two trees, like a deep ``dict.update``; empty containers are empty subtrees.

    Where both trees hold a leaf at the same place, ``merge_fn(a, b)`` decides
    (without one that is an error).
    """
    empty_a, empty_b = _is_empty_container(tree_a), _is_empty_container(tree_b)
    if empty_a and empty_b:
        if type(tree_a) is not type(tree_b):
            raise ValueError(f"Cannot merge {type(tree_a).__name__} with {type(tree_b).__name__}")
        return type(tree_a)()
    if empty_a:
        tree_a = None
    if empty_b:
        tree_b = None
    if tree_a is None:
        return tree_b
    if tree_b is None:
        return tree_a
    if _is_sequence(tree_a) and _is_sequence(tree_b):
        return _rebuild(
            tree_a, [tree_merge(a, b, merge_fn) for a, b in zip_longest(tree_a, tree_b)]
        )
    if isinstance(tree_a, dict) and isinstance(tree_b, dict):
        keys = list(tree_a.keys()) + [k for k in tree_b.keys() if k not in tree_a]
        return {k: tree_merge(tree_a.get(k), tree_b.get(k), merge_fn) for k in keys}
    if merge_fn is None:
        raise ValueError(
            "Trees contain elements at the same locations but no merge function was provided"
        )
    return merge_fn(tree_a, tree_b)
