"""Signatures of a module's functions and array methods, as written and as they behave.

nanobind functions carry a signature string (``__nb_signature__``); MLX writes
many by hand, and the hand-written ones do not always say how the binding
behaves (``roll``'s says its ``shift`` and ``axis`` are positional-only, yet
``mx.roll(x, shift=1, axis=0)`` works).  So each parameter is described twice:
as written (name, order, default, the ``/`` and ``*`` markers) and as probed
(whether a call passing it by keyword, and one passing it by position, gets
past argument matching: nanobind answers an unmatched call with
``TypeError: ... incompatible function arguments``, and every other outcome,
success or an error from the op itself, means the arguments were accepted).

``python/tests/data/mlx_signatures.json`` holds MLX 0.32.4's description,
made once by ``/work/peers/bin/python python/tests/_signatures.py``;
``test_signatures.py`` compares Loom's with it.
"""

import json
import os
import re
import sys

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mlx_signatures.json")

# Functions that change global state, touch files or devices, or take
# callables: described as written, never called.
NOT_PROBED = {
    "async_eval", "checkpoint", "clear_cache", "clear_streams", "compile", "custom_function",
    "disable_compile", "enable_compile", "eval", "export_function", "export_to_dot", "exporter",
    "grad", "import_function", "jvp", "load", "new_stream", "new_thread_local_stream",
    "new_thread_unsafe_stream", "printoptions", "reset_peak_memory", "save", "save_gguf",
    "save_safetensors", "savez", "savez_compressed", "seed", "set_cache_limit",
    "set_default_device", "set_default_stream", "set_memory_limit", "set_printoptions",
    "set_wired_limit", "stream", "synchronize", "value_and_grad", "vjp", "vmap",
    "get_array_buffer_size", "from_dlpack", "depends",
}


def split_top(text, sep=","):
    """Splits at `sep` outside brackets and quotes."""
    parts, depth, quote, cur = [], 0, None, []
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def parse_signature(sig, defaults):
    """The parameters of one `def name(...) -> ...` string.

    Returns a list of dicts: name, kind (positional_only, positional_or_keyword,
    keyword_only, var_positional, var_keyword), annotation, default (a string,
    or None when required).  `defaults` fills nanobind's `\\N` placeholders.
    """
    m = re.match(r"def\s+\w+\s*\((.*)\)\s*(->.*)?$", sig.strip(), re.S)
    if not m:
        return None
    params = []
    star_seen = False
    for part in split_top(m.group(1)):
        if part == "/":
            for p in params:
                p["kind"] = "positional_only"
            continue
        if part == "*":
            star_seen = True
            continue
        kind = "keyword_only" if star_seen else "positional_or_keyword"
        if part.startswith("**"):
            kind, part = "var_keyword", part[2:]
        elif part.startswith("*"):
            kind, part = "var_positional", part[1:]
            star_seen = True
        default = None
        if "=" in part:
            head, default = [x.strip() for x in split_top(part, "=")[:2]]
            part = head
            ph = re.fullmatch(r"\\(\d+)", default)
            if ph and defaults is not None:
                default = normalize_default(repr(defaults[int(ph.group(1))]))
            else:
                default = normalize_default(default)
        name, _, annotation = part.partition(":")
        params.append(
            dict(name=name.strip(), kind=kind, annotation=annotation.strip(), default=default)
        )
    if params and params[0]["name"] == "self":
        params = params[1:]
    return params


def normalize_default(text):
    """One spelling per default value: `float32`, `mlx.core.float32` and
    `loom.core.float32` are the same dtype; `1e-05` and `1e-5` the same float."""
    text = text.strip()
    text = re.sub(r"^(mlx|loom)\.core\.(Dtype\()?", "", text).rstrip(")") if re.match(
        r"^(mlx|loom)\.core\.", text) else text
    text = re.sub(r"^Dtype\((\w+)\)$", r"\1", text)
    try:
        value = float(text)
        if text not in ("True", "False"):
            return repr(int(value)) if value.is_integer() and "." not in text and "e" not in text \
                else repr(value)
    except ValueError:
        pass
    if text in ("[]", "()"):
        return "()"
    return text.strip("'\"") if re.fullmatch(r"'[^']*'|\"[^\"]*\"", text) else text


def overloads(obj):
    sigs = getattr(obj, "__nb_signature__", None)
    if not sigs:
        return []
    out = []
    for entry in sigs:
        params = parse_signature(entry[0], entry[2] if len(entry) > 2 else None)
        if params is not None:
            out.append(params)
    return out


# --- probing --------------------------------------------------------------------


def sample(mx, param):
    """A value of the parameter's type, or a marker that none is known."""
    ann = param["annotation"]
    default = param["default"]
    if default not in (None, "None"):
        try:
            return eval(default, {k: getattr(mx, k) for k in dir(mx) if not k.startswith("_")})
        except Exception:
            pass
    kinds = [k.strip() for k in split_top(ann, "|")] if ann else []
    for k in kinds:
        if k == "None":
            continue
        if "array" in k and "Sequence" not in k and "list" not in k and "tuple" not in k:
            return mx.array([[1.0, 2.0], [3.0, 4.0]])
        if k in ("int",):
            return 1
        if k in ("float", "scalar"):
            return 1.0
        if k == "bool":
            return False
        if k == "str":
            return "ij"
        if "Dtype" in k:
            return mx.float32
        if re.match(r"(Sequence|tuple|list)\[int", k):
            return [2]
        if "Stream" in k or "Device" in k:
            return None
    return NotImplemented


def rejected(call):
    try:
        call()
    except TypeError as e:
        return "incompatible function arguments" in str(e)
    except Exception:
        return False
    return False


def probe(mx, func, params):
    """Per parameter: whether a keyword / a positional call reaches the op."""
    if any(p["kind"] in ("var_positional", "var_keyword") for p in params):
        return None  # *args functions are compared as written
    fixed = params
    values = [sample(mx, p) for p in fixed]
    if any(v is NotImplemented for v, p in zip(values, fixed) if p["default"] is None):
        return None
    required = [(p, v) for p, v in zip(fixed, values) if p["default"] is None]
    if rejected(lambda: func(*[v for _, v in required])) and rejected(
        lambda: func(**{p["name"]: v for p, v in required})
    ):
        return None  # no call of ours gets through: nothing to learn
    out = {}
    for i, (p, v) in enumerate(zip(fixed, values)):
        if v is NotImplemented:
            continue
        before = [(q, w) for q, w in zip(fixed[:i], values[:i]) if q["default"] is None]
        after = [(q, w) for q, w in zip(fixed[i + 1:], values[i + 1:]) if q["default"] is None]
        kw = {p["name"]: v}
        kw.update({q["name"]: w for q, w in after})
        by_keyword = not rejected(lambda: func(*[w for _, w in before], **kw))
        positional = [w for w in values[: i + 1]]
        by_position = (
            None
            if any(w is NotImplemented for w in positional)
            else not rejected(
                lambda: func(*positional, **{q["name"]: w for q, w in after})
            )
        )
        out[p["name"]] = {"keyword": by_keyword, "positional": by_position}
    return out


def describe(mx):
    """Every function of the module and its `random` submodule, every method
    of `array`: signatures as written and as probed."""
    entries = {}
    targets = [("", mx, n) for n in dir(mx)] + [("random.", mx.random, n) for n in dir(mx.random)]
    for prefix, mod, name in targets:
        if name.startswith("_"):
            continue
        obj = getattr(mod, name)
        if type(obj).__name__ != "nb_func":
            continue
        sigs = overloads(obj)
        entry = {"overloads": sigs}
        if prefix + name not in NOT_PROBED and name not in NOT_PROBED and len(sigs) == 1:
            entry["probe"] = probe(mx, obj, sigs[0])
        entries[prefix + name] = entry
    sample_array = mx.array([[1.0, 2.0], [3.0, 4.0]])
    for name, obj in vars(mx.array).items():
        if name.startswith("_") or type(obj).__name__ not in ("nb_method", "nb_func"):
            continue
        sigs = overloads(obj)
        entry = {"overloads": sigs}
        if len(sigs) == 1:
            entry["probe"] = probe(mx, getattr(sample_array, name), sigs[0])
        entries["array." + name] = entry
    return entries


if __name__ == "__main__":
    import mlx.core

    result = {"module": "mlx.core", "version": mlx.core.__version__, "entries": describe(mlx.core)}
    os.makedirs(os.path.dirname(DATA), exist_ok=True)
    with open(DATA, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    print(f"{len(result['entries'])} entries -> {DATA}", file=sys.stderr)
