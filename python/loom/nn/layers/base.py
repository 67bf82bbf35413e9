"""``nn.Module``: a dict whose values are the parameter tree.

Public attributes that are arrays, dicts, lists or tuples live in the dict
itself (so ``model.parameters()``, ``tree_flatten`` and ``mx.eval`` see them);
everything else (ints, callables, private state) is an ordinary attribute.
A parameter is any array reachable from the dict through keys that do not
start with ``_``. ``state`` is the module itself, so a compiled step that
captures it writes the new arrays back into the model.
"""

from __future__ import annotations

import textwrap
from typing import Any, Callable, List, Optional, Tuple, Union

import loom.core as mx
from loom.utils import tree_flatten, tree_unflatten

__all__ = ["Module"]


def _unwrap(owner, key, value, filter_fn, map_fn, is_leaf_fn):
    """One value of ``owner`` seen through filter_and_map's three functions.

    Keys inside plain dicts and lists are reported to the filters with their
    dotted path below ``owner`` (``"layers.0"``); a submodule starts afresh.
    """
    if is_leaf_fn(owner, key, value):
        return map_fn(value)
    if isinstance(value, Module):
        return {
            k: _unwrap(value, k, v, filter_fn, map_fn, is_leaf_fn)
            for k, v in value.items()
            if filter_fn(value, k, v)
        }
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            path = f"{key}.{k}"
            out[k] = (
                _unwrap(owner, path, v, filter_fn, map_fn, is_leaf_fn)
                if filter_fn(owner, path, v)
                else {}
            )
        return out
    if isinstance(value, list):
        out_list = []
        for i, v in enumerate(value):
            path = f"{key}.{i}"
            out_list.append(
                _unwrap(owner, path, v, filter_fn, map_fn, is_leaf_fn)
                if filter_fn(owner, path, v)
                else {}
            )
        return out_list
    raise RuntimeError("Unexpected leaf found while traversing the module")


def _is_integer_like(dtype) -> bool:
    return not mx.issubdtype(dtype, mx.inexact)


class Module(dict):
    """Base class of layers and models: a dict of parameters and submodules.

    Subclasses set parameters and submodules as attributes in ``__init__`` and
    compute in ``__call__``::

        class MLP(nn.Module):
            def __init__(self, d_in, d_out):
                super().__init__()
                self.layers = [nn.Linear(d_in, 128), nn.Linear(128, d_out)]

            def __call__(self, x):
                return self.layers[1](nn.relu(self.layers[0](x)))
    """

    __call__: Callable

    def __init__(self):
        self._no_grad = set()
        self._training = True

    # -- attributes are dict entries --------------------------------------

    @property
    def training(self) -> bool:
        """Whether the module is in training mode (dropout and batch norm read it)."""
        return self._training

    @property
    def state(self) -> "Module":
        """The module itself: a live reference that ``mx.compile`` can write through."""
        return self

    def _extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        children = tree_flatten(self.children(), is_leaf=self.is_module)
        text = f"{type(self).__name__}({self._extra_repr()}"
        for path, child in children:
            text += "\n" + textwrap.indent(f"({path}): {child!r}", prefix="  ")
        if children:
            text += "\n"
        return text + ")"

    def __getattr__(self, key: str):
        # Only called when ordinary lookup failed: the dict is the fallback.
        try:
            return self[key]
        except KeyError:
            raise AttributeError(
                f"'{type(self).__name__}' object has no attribute '{key}'"
            ) from None

    def __setattr__(self, key: str, value: Any):
        if isinstance(value, (mx.array, dict, list, tuple)):
            # An ordinary attribute of the same name would shadow the entry.
            if key in self.__dict__:
                object.__delattr__(self, key)
            self[key] = value
        else:
            super().__setattr__(key, value)
            self.pop(key, None)

    def __delattr__(self, key: str):
        if key in self:
            del self[key]
        else:
            super().__delattr__(key)

    # -- filters ----------------------------------------------------------

    @staticmethod
    def is_module(value) -> bool:
        return isinstance(value, Module)

    @staticmethod
    def valid_child_filter(module, key, value) -> bool:
        return isinstance(value, (dict, list))

    @staticmethod
    def valid_parameter_filter(module, key, value) -> bool:
        return isinstance(value, (dict, list, mx.array)) and not key.startswith("_")

    @staticmethod
    def trainable_parameter_filter(module, key, value) -> bool:
        return Module.valid_parameter_filter(module, key, value) and key not in module._no_grad

    def filter_and_map(
        self,
        filter_fn: Callable[["Module", str, Any], bool],
        map_fn: Optional[Callable] = None,
        is_leaf_fn: Optional[Callable[["Module", str, Any], bool]] = None,
    ) -> dict:
        """A tree of the module's values that pass ``filter_fn``, mapped by ``map_fn``.

        The walk descends into submodules, dicts and lists; ``is_leaf_fn``
        (default: anything that is not one of those) stops it.
        """
        map_fn = map_fn or (lambda x: x)
        is_leaf_fn = is_leaf_fn or (lambda m, k, v: not isinstance(v, (Module, dict, list)))
        return {
            k: _unwrap(self, k, v, filter_fn, map_fn, is_leaf_fn)
            for k, v in self.items()
            if filter_fn(self, k, v)
        }

    def parameters(self) -> dict:
        """All parameters, as a nested tree of dicts and lists (a new tree)."""
        return self.filter_and_map(self.valid_parameter_filter)

    def trainable_parameters(self) -> dict:
        """The parameters that are not frozen."""
        return self.filter_and_map(self.trainable_parameter_filter)

    def children(self) -> dict:
        """The direct submodules, in the dicts and lists that hold them."""
        return self.filter_and_map(
            self.valid_child_filter, is_leaf_fn=lambda m, k, v: isinstance(v, Module)
        )

    def leaf_modules(self) -> dict:
        """The submodules that have no submodules."""

        def is_leaf_module(m, k, v):
            return isinstance(v, Module) and len(tree_flatten(v.children())) == 0

        return self.filter_and_map(self.valid_child_filter, is_leaf_fn=is_leaf_module)

    # -- updating ---------------------------------------------------------

    def update(self, parameters: dict, strict: bool = True) -> "Module":
        """Replace parameters with those of a (possibly partial) tree.

        With ``strict`` every key must name an existing parameter and every
        new value that replaces an array must be an array.
        """

        def replace(dst, key, new_value):
            current = dst[key]
            if isinstance(current, mx.array):
                if strict and not isinstance(new_value, mx.array):
                    raise ValueError(f"Received invalid type: {type(new_value).__name__}.")
                dst[key] = new_value
            else:
                walk(current, new_value)

        def walk(dst, params):
            if isinstance(params, dict):
                for k in params:
                    if k in dst:
                        replace(dst, k, params[k])
                    elif strict:
                        raise ValueError(f'Module does not have parameter named "{k}".')
            elif isinstance(params, list):
                for i in range(len(params)):
                    if i >= len(dst):
                        if strict:
                            raise ValueError(
                                f"List index {i} is out of bounds for destination of "
                                f"length {len(dst)}."
                            )
                        continue
                    replace(dst, i, params[i])
            elif strict:
                raise ValueError(f"Received invalid type: {type(params).__name__}.")

        walk(self, parameters)
        return self

    def apply(
        self,
        map_fn: Callable[[mx.array], mx.array],
        filter_fn: Optional[Callable[["Module", str, Any], bool]] = None,
        *,
        cast_integers: bool = False,
    ) -> "Module":
        """Map the parameters with ``map_fn`` and install the results.

        Beyond MLX: an integer or boolean parameter keeps its dtype (and its
        value) when ``map_fn`` would change its dtype, unless
        ``cast_integers=True``: ``apply(lambda x: x.astype(mx.float16))`` must
        not turn token ids or packed quantized weights into floats.
        """
        filter_fn = filter_fn or Module.valid_parameter_filter

        def guarded(x):
            y = map_fn(x)
            if (
                not cast_integers
                and isinstance(x, mx.array)
                and isinstance(y, mx.array)
                and _is_integer_like(x.dtype)
                and y.dtype != x.dtype
            ):
                return x
            return y

        self.update(self.filter_and_map(filter_fn, guarded))
        return self

    def update_modules(self, modules: dict, strict: bool = True) -> "Module":
        """Replace submodules with those of a (possibly partial) tree of modules."""

        def replace(dst, key, new_value):
            current = dst[key]
            if isinstance(current, Module) and isinstance(new_value, Module):
                dst[key] = new_value
            elif isinstance(current, (dict, list)):
                walk(current, new_value)
            elif strict and new_value != {}:
                raise ValueError(f"Received invalid type: {type(new_value).__name__}.")

        def walk(dst, mods):
            if isinstance(mods, dict):
                for k in mods:
                    if k in dst:
                        replace(dst, k, mods[k])
                    elif strict:
                        raise ValueError(f'Module does not have sub-module named "{k}".')
            elif isinstance(mods, list):
                for i in range(len(mods)):
                    if i >= len(dst):
                        if strict:
                            raise ValueError(
                                f"List index {i} is out of bounds for destination of "
                                f"length {len(dst)}."
                            )
                        continue
                    replace(dst, i, mods[i])
            elif strict:
                raise ValueError(f"Received invalid type: {type(mods).__name__}.")

        walk(self, modules)
        return self

    def apply_to_modules(self, apply_fn: Callable[[str, "Module"], Any]) -> "Module":
        """Call ``apply_fn(path, module)`` on this module and every submodule."""
        stack = [("", self)]
        while stack:
            prefix, module = stack.pop()
            apply_fn(prefix, module)
            prefix = "." + prefix if prefix else ""
            stack.extend(tree_flatten(module.children(), prefix=prefix, is_leaf=self.is_module))
        return self

    def modules(self) -> List["Module"]:
        """This module and all its submodules."""
        found: list = []
        self.apply_to_modules(lambda k, m: found.append(m))
        return found

    def named_modules(self) -> List[Tuple[str, "Module"]]:
        """``(path, module)`` for this module (path ``""``) and all submodules."""
        found: list = []
        self.apply_to_modules(lambda k, m: found.append((k, m)))
        return found

    # -- freezing ---------------------------------------------------------

    def _validate_keys(self, keys, strict):
        keys = keys if isinstance(keys, list) else [keys]
        if strict:
            for k in keys:
                if k not in self:
                    raise KeyError(f"Module doesn't contain member {k}.")
        return keys

    def _validate_keys_recursive(self, keys):
        # A key such as "bias" need exist somewhere in the model, not in every module.
        keys = keys if isinstance(keys, list) else [keys]
        modules = self.modules()
        for k in keys:
            if not any(k in m for m in modules):
                raise KeyError(f"Module doesn't contain member {k}.")

    def freeze(
        self,
        *,
        recurse: bool = True,
        keys: Optional[Union[str, List[str]]] = None,
        strict: bool = False,
    ) -> "Module":
        """Exclude parameters from ``trainable_parameters`` (and so from gradients).

        Without ``keys`` every local parameter of each module is frozen.
        """

        def freeze_one(_, m):
            local_keys = keys
            if local_keys is None:
                local = m.filter_and_map(
                    lambda mm, k, v: (not isinstance(v, Module))
                    and mm.valid_parameter_filter(mm, k, v)
                )
                local_keys = [k for k, _ in tree_flatten(local)]
            m._no_grad.update(m._validate_keys(local_keys, check))

        check = strict
        if recurse:
            if strict and keys is not None:
                self._validate_keys_recursive(keys)
                check = False
            self.apply_to_modules(freeze_one)
        else:
            freeze_one("", self)
        return self

    def unfreeze(
        self,
        *,
        recurse: bool = True,
        keys: Optional[Union[str, List[str]]] = None,
        strict: bool = False,
    ) -> "Module":
        """Undo :meth:`freeze` for ``keys`` (all parameters without keys)."""

        def unfreeze_one(_, m):
            if keys is None:
                m._no_grad.clear()
            else:
                m._no_grad.difference_update(m._validate_keys(keys, check))

        check = strict
        if recurse:
            if strict and keys is not None:
                self._validate_keys_recursive(keys)
                check = False
            self.apply_to_modules(unfreeze_one)
        else:
            unfreeze_one("", self)
        return self

    # -- modes and dtypes -------------------------------------------------

    def _set_training_mode(self, mode: bool) -> None:
        self._training = mode

    def train(self, mode: bool = True) -> "Module":
        """Set training mode on this module and every submodule."""
        self.apply_to_modules(lambda _, m: m._set_training_mode(mode))
        return self

    def eval(self) -> "Module":
        """Set evaluation mode (``train(False)``)."""
        return self.train(False)

    def set_dtype(
        self,
        dtype: mx.Dtype,
        predicate: Optional[Callable[[mx.Dtype], bool]] = lambda x: mx.issubdtype(x, mx.floating),
    ) -> None:
        """Cast the parameters whose dtype satisfies ``predicate`` (default: floating).

        ``predicate=None`` casts every parameter, integers included.
        """
        if predicate is None:

            def predicate(_):
                return True

        self.apply(lambda x: x.astype(dtype) if predicate(x.dtype) else x, cast_integers=True)

    # -- weights on disk --------------------------------------------------

    def load_weights(
        self,
        file_or_weights: Union[str, List[Tuple[str, mx.array]]],
        strict: bool = True,
    ) -> "Module":
        """Load weights from a ``.npz``/``.safetensors`` file or ``(path, array)`` pairs.

        With ``strict`` the weights must match the parameters exactly (names,
        types and shapes). Beyond MLX: without ``strict``, a weight whose
        shape differs from the parameter it would replace is still refused.
        """
        weights = file_or_weights
        if isinstance(weights, str):
            weights = list(mx.load(weights).items())
        new_weights = dict(weights)
        current = tree_flatten(self.parameters(), destination={})

        if strict:
            extras = new_weights.keys() - current.keys()
            if extras:
                names = ",\n".join(sorted(extras))
                raise ValueError(f"Received {len(extras)} parameters not in model: \n{names}.")
            missing = current.keys() - new_weights.keys()
            if missing:
                names = ",\n".join(sorted(missing))
                raise ValueError(f"Missing {len(missing)} parameters: \n{names}.")
        for k, v in current.items():
            if k not in new_weights:
                continue
            v_new = new_weights[k]
            if not isinstance(v_new, mx.array):
                if strict:
                    raise ValueError(
                        f"Expected mx.array but received {type(v_new)} for parameter {k}"
                    )
                continue
            if v_new.shape != v.shape:
                raise ValueError(
                    f"Expected shape {v.shape} but received shape {v_new.shape} for parameter {k}"
                )

        if len(weights) != 0:
            self.update(tree_unflatten(list(weights)), strict=False)
        return self

    def save_weights(self, file: str) -> None:
        """Save the parameters to ``.npz`` (``mx.savez``) or ``.safetensors``."""
        flat = tree_flatten(self.parameters(), destination={})
        if file.endswith(".npz"):
            mx.savez(file, **flat)
        elif file.endswith(".safetensors"):
            mx.save_safetensors(file, flat)
        else:
            raise ValueError(
                f"Unsupported file extension for {file}. Use '.npz' or '.safetensors'."
            )
