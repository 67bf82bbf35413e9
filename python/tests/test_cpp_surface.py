"""Every function `loom.core` exposes is declared in the C++ core (issue 6:
"loom/ops.h declares every function loom.core exposes"), so C++ users,
compile and export see the same op set as Python. A Python name that is an
alias of a C++ function, or that only makes sense in Python, is listed below
with the reason; anything else missing from the headers fails this test."""

import inspect
import os
import re

import pytest

from _backend import mx

pytestmark = pytest.mark.loom_only

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Python name -> the C++ function that implements it.
ALIASES = {
    "concat": "concatenate",
    "permute_dims": "transpose",
    "cumulative_sum": "cumsum",
    "cumulative_prod": "cumprod",
    "bitwise_left_shift": "left_shift",
    "bitwise_right_shift": "right_shift",
    "empty_like": "zeros_like",
    "matrix_norm": "norm",
    "grad": "value_and_grad",  # the gradients are value_and_grad's second result
    "result_type": "promote_types",
    "can_cast": "promote_types",  # promote_types(from, to) == to
    "isdtype": "issubdtype",
    "savez_compressed": "savez",  # its `compressed` flag
    "clear_compile_cache": "clear_cache",  # loom::compile_cache
    "compile_cache_info": "cache_info",
    "get_compile_cache_max_entries": "max_entries",
    "set_compile_cache_max_entries": "set_max_entries",
    "get_compile_mode": "compile_mode",
    "exporter": "FunctionExporter",
    "export_mlxfn": "write_mlxfn",
    "new_thread_unsafe_stream": "new_stream",
}

# Names that act on Python objects or Python-side state only.
PYTHON_ONLY = {
    "asarray": "converts Python objects (buffer protocol, sequences)",
    "from_dlpack": "imports a Python DLPack producer",
    "get_array_buffer_size": "sums the buffer sizes of Python arguments",
    "peak_memory": "a Python context manager over get/reset_peak_memory",
    "printoptions": "a Python context manager over the print options",
    "get_printoptions": "array printing is done by the bindings",
    "set_printoptions": "array printing is done by the bindings",
    "new_thread_local_stream": "a per-Python-thread table of C++ streams",
    "metal_kernel": "raises: Metal is not available on this platform",
    "cuda_kernel": "builds a kernel from Python source strings",
    "precompiled_cuda_kernel": "loads a kernel from Python bytes",
}


def declared_names():
    names = set()
    for folder, _, files in os.walk(os.path.join(ROOT, "loom")):
        for f in files:
            if not f.endswith(".h"):
                continue
            with open(os.path.join(folder, f), encoding="utf-8") as fh:
                text = re.sub(r"//[^\n]*", "", fh.read())
            names.update(re.findall(r"\b([A-Za-z_]\w*)\s*[\(<{]", text))
    return names


def exposed():
    for module in (mx, mx.linalg, mx.fft, mx.random, mx.fast):
        for name in dir(module):
            obj = getattr(module, name)
            if name.startswith("_") or inspect.isclass(obj) or not callable(obj):
                continue
            yield module.__name__, name


def test_every_exposed_function_is_declared_in_the_cpp_core():
    names = declared_names()
    missing = []
    for module, name in exposed():
        if name in PYTHON_ONLY:
            continue
        cpp = ALIASES.get(name, name)
        if cpp not in names and cpp + "_" not in names:  # and_, or_, ... where C++ reserves the word
            missing.append(f"{module}.{name}")
    assert not missing, "exposed by loom.core but declared nowhere under loom/: " + ", ".join(missing)


def test_the_exception_lists_are_current():
    # An alias whose C++ target is gone, or an entry for a name Python no
    # longer has, would make the check above pass for the wrong reason.
    names = declared_names()
    everything = {name for _, name in exposed()}
    assert not [a for a in ALIASES if a not in everything]
    assert not [p for p in PYTHON_ONLY if p not in everything]
    assert not [t for t in ALIASES.values() if t not in names]
