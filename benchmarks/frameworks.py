"""One adapter per implementation, used inside a worker process only.

An adapter gives the workloads what differs between frameworks: how to make
an input from a NumPy array, how to wait until work is done, how to ask for a
feature (``need``), and the few operations whose names or signatures differ.
Everything else a workload calls on ``fw.m`` (``mlx.core``, ``loom.core``,
``numpy``, ``torch`` or ``jax.numpy``), whose common names (``add``, ``exp``,
``matmul``, ...) agree.

Loom and MLX share one adapter: Loom's Python API is MLX's, so every workload
written for ``mlx.core`` serves ``loom.core`` unchanged.
"""

from __future__ import annotations

import gc
import importlib
import os
import re
import tracemalloc


class Pending(Exception):
    """Loom lacks a feature the workload needs (yet)."""


class NotApplicable(Exception):
    """A peer has no such feature; its row says n/a."""


class Unavailable(Exception):
    """The implementation cannot be imported in this interpreter."""


IMPLS = ("loom", "mlx", "numpy", "torch", "jax")


def _process_rss():
    with open("/proc/self/status") as f:
        text = f.read()
    rss = re.search(r"VmRSS:\s+(\d+) kB", text)
    hwm = re.search(r"VmHWM:\s+(\d+) kB", text)
    return int(rss.group(1)) * 1024, int(hwm.group(1)) * 1024


def _reset_process_peak():
    """Make VmHWM equal to the current RSS (Linux 4.0+); False if refused."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class Framework:
    name = ""
    family = ""

    def __init__(self, device="cpu"):
        import numpy as np

        self.np = np
        self.device = device
        self.rng = np.random.default_rng(0)
        self._inputs = []

    # --- inputs -------------------------------------------------------------
    def array(self, host):
        raise NotImplementedError

    def input(self, host):
        x = self.array(host)
        self._inputs.append(x)
        return x

    def rand(self, shape, dtype="float32"):
        """Uniform [0, 1) input of the given shape, converted to ``dtype``."""
        host = self.rng.random(shape, dtype=self.np.float32)
        x = self.array(host)
        if dtype != "float32":
            x = self.astype(x, dtype)
        self._inputs.append(x)
        return x

    def randn(self, shape):
        host = self.rng.standard_normal(shape, dtype=self.np.float32)
        return self.input(host)

    def take_inputs(self):
        inputs, self._inputs = self._inputs, []
        return inputs

    # --- completion and features -------------------------------------------
    def sync(self, out):
        """Return only once every array in ``out`` (a tree) is computed."""

    def need(self, what):
        """Return the feature ``what`` or raise Pending/NotApplicable."""
        raise NotApplicable(f"{self.name} has no {what}")

    def sdpa(self, q, k, v, scale):
        """The library's fused attention, softmax(scale q k^T) v."""
        raise self.unsupported("fused attention")

    def unsupported(self, what):
        return NotApplicable(f"{self.name} has no {what}")

    # --- memory -------------------------------------------------------------
    def clear_cache(self):
        gc.collect()

    def reset_peak(self):
        pass

    def peak_memory(self):
        """Peak bytes the framework reports since ``reset_peak`` beyond what
        it held at that moment (the inputs), or None where it reports none."""
        return None

    def measure_memory(self, call):
        """Run ``call`` once; return the memory it needed beyond its inputs,
        as the framework reports it and as the process's peak RSS shows it."""
        self.clear_cache()
        self.reset_peak()
        rss_before, _ = _process_rss()
        can_reset = _reset_process_peak()
        out = call()
        self.sync(out)
        _, hwm = _process_rss()
        peak = self.peak_memory()
        del out
        return {
            "peak_memory_bytes": peak,
            "process_peak_rss_bytes": hwm if can_reset else None,
            "process_peak_delta_bytes": max(0, hwm - rss_before) if can_reset else None,
        }

    def info(self):
        return {}


class MlxFamily(Framework):
    """``mlx.core`` and ``loom.core``: the same API, the same workloads."""

    family = "mlx"

    def __init__(self, name, device="cpu"):
        super().__init__(device)
        self.name = name
        package = "loom" if name == "loom" else "mlx"
        try:
            self.m = importlib.import_module(f"{package}.core")
        except ImportError as e:
            raise Unavailable(f"cannot import {package}.core: {e}") from e
        self.package = package
        mx = self.m
        if device == "gpu":
            if not self._has_gpu():
                raise Unavailable(f"{package} has no CUDA backend in this build")
            mx.set_default_device(mx.gpu)
        elif hasattr(mx, "set_default_device") and hasattr(mx, "cpu"):
            mx.set_default_device(mx.cpu)

    def _has_gpu(self):
        mx = self.m
        try:
            return bool(mx.is_available(mx.gpu))
        except Exception:
            return False

    def _missing(self, what):
        if self.name == "loom":
            return Pending(f"loom has no {what} yet")
        return NotApplicable(f"{self.name} has no {what}")

    def need(self, what):
        """``what`` is a dotted path under the package (``core.erf``,
        ``nn.Linear``) or, without a prefix, under ``core``."""
        parts = what.split(".")
        if parts[0] in ("core", "nn", "optimizers", "utils"):
            module_name = f"{self.package}.{parts[0]}"
            parts = parts[1:]
        else:
            module_name = f"{self.package}.core"
        try:
            obj = importlib.import_module(module_name)
        except ImportError:
            raise self._missing(module_name.replace(self.package, self.name))
        for p in parts:
            if not hasattr(obj, p):
                raise self._missing(what)
            obj = getattr(obj, p)
        return obj

    def array(self, host):
        self.need("array")
        return self.m.array(host)

    def astype(self, x, dtype):
        return x.astype(self.need(dtype))

    def sync(self, out):
        self.need("eval")(out)

    # differing operations
    def erf(self, x):
        return self.need("erf")(x)

    def softmax(self, x, axis=-1):
        return self.need("softmax")(x, axis=axis)

    def relu(self, x):
        return self.need("maximum")(x, 0.0)

    def mean(self, x, axis=None, keepdims=False):
        return self.need("mean")(x, axis=axis, keepdims=keepdims)

    def sum(self, x, axis=None):
        return self.need("sum")(x, axis=axis)

    def max(self, x, axis=None):
        return self.need("max")(x, axis=axis)

    def argmax(self, x, axis):
        return self.need("argmax")(x, axis=axis)

    def rsqrt(self, x):
        return self.need("rsqrt")(x)

    def swapaxes(self, x, a, b):
        return self.need("swapaxes")(x, a, b)

    def concatenate(self, xs, axis):
        return self.need("concatenate")(xs, axis=axis)

    def transpose_copy(self, x):
        return self.need("contiguous")(self.need("transpose")(x))

    def copy_op(self, x):
        # mlx.core has no explicit copy; x + 0 moves the same bytes.
        return x + 0.0

    def compile(self, fn):
        return self.need("compile")(fn)

    def vmap(self, fn, in_axes):
        return self.need("vmap")(fn, in_axes=in_axes)

    def value_and_grad(self, fn):
        return self.need("value_and_grad")(fn)

    def sdpa(self, q, k, v, scale):
        return self.need("fast.scaled_dot_product_attention")(q, k, v, scale=scale)

    def random_normal(self, shape):
        return self.need("random.normal")(shape)

    def random_uniform(self, shape):
        return self.need("random.uniform")(shape=shape)

    def clear_cache(self):
        gc.collect()
        if hasattr(self.m, "clear_cache"):
            self.m.clear_cache()

    def reset_peak(self):
        self._active_before = None
        if hasattr(self.m, "reset_peak_memory") and hasattr(self.m, "get_active_memory"):
            self._active_before = int(self.m.get_active_memory())
            self.m.reset_peak_memory()

    def peak_memory(self):
        if getattr(self, "_active_before", None) is None or not hasattr(self.m, "get_peak_memory"):
            return None
        return max(0, int(self.m.get_peak_memory()) - self._active_before)

    def info(self):
        mod = importlib.import_module(self.package)
        version = getattr(self.m, "__version__", None) or getattr(mod, "__version__", None)
        info = {"version": version, "module": getattr(mod, "__file__", None)}
        # The BLAS kernels in use decide every matmul-bound row: name them.
        blas_core = getattr(self.m, "_blas_core", None)
        if blas_core is not None:
            info["blas_core"] = blas_core()
        return info


class NumpyFw(Framework):
    name = "numpy"
    family = "numpy"

    def __init__(self, device="cpu"):
        if device != "cpu":
            raise Unavailable("numpy runs on the CPU only")
        super().__init__(device)
        self.m = self.np

    def array(self, host):
        return host

    def astype(self, x, dtype):
        if dtype == "bfloat16":
            raise self.unsupported("bfloat16")
        return x.astype(dtype)

    def erf(self, x):
        raise self.unsupported("erf")

    def softmax(self, x, axis=-1):
        e = self.np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    def relu(self, x):
        return self.np.maximum(x, 0)

    def mean(self, x, axis=None, keepdims=False):
        return self.np.mean(x, axis=axis, keepdims=keepdims)

    def sum(self, x, axis=None):
        return self.np.sum(x, axis=axis)

    def max(self, x, axis=None):
        return self.np.max(x, axis=axis)

    def argmax(self, x, axis):
        return self.np.argmax(x, axis=axis)

    def swapaxes(self, x, a, b):
        return self.np.swapaxes(x, a, b)

    def concatenate(self, xs, axis):
        return self.np.concatenate(xs, axis=axis)

    def transpose_copy(self, x):
        return self.np.ascontiguousarray(x.T)

    def copy_op(self, x):
        return x.copy()

    def compile(self, fn):
        raise self.unsupported("compiler")

    def vmap(self, fn, in_axes):
        raise self.unsupported("vmap")

    def value_and_grad(self, fn):
        raise self.unsupported("automatic differentiation")

    def random_normal(self, shape):
        return self.rng.standard_normal(shape, dtype=self.np.float32)

    def random_uniform(self, shape):
        return self.rng.random(shape, dtype=self.np.float32)

    def measure_memory(self, call):
        # NumPy reports its allocations to tracemalloc.
        tracemalloc.start()
        try:
            result = super().measure_memory(call)
            result["peak_memory_bytes"] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        return result

    def info(self):
        return {"version": self.np.__version__}


class TorchFw(Framework):
    name = "torch"
    family = "torch"

    def __init__(self, device="cpu"):
        super().__init__(device)
        try:
            import torch
        except ImportError as e:
            raise Unavailable(f"cannot import torch: {e}") from e
        self.m = self.torch = torch
        if device == "gpu" and not torch.cuda.is_available():
            raise Unavailable("torch sees no CUDA device")
        self.dev = torch.device("cuda" if device == "gpu" else "cpu")
        self.gen = torch.Generator(device=self.dev)
        self.gen.manual_seed(0)

    def array(self, host):
        return self.torch.from_numpy(host).to(self.dev)

    def astype(self, x, dtype):
        return x.to(getattr(self.torch, dtype))

    def sync(self, out):
        if self.dev.type == "cuda":
            self.torch.cuda.synchronize()

    def erf(self, x):
        return self.torch.erf(x)

    def softmax(self, x, axis=-1):
        return self.torch.softmax(x, dim=axis)

    def relu(self, x):
        return self.torch.relu(x)

    def mean(self, x, axis=None, keepdims=False):
        if axis is None:
            return self.torch.mean(x)
        return self.torch.mean(x, dim=axis, keepdim=keepdims)

    def sum(self, x, axis=None):
        return self.torch.sum(x) if axis is None else self.torch.sum(x, dim=axis)

    def max(self, x, axis=None):
        return self.torch.amax(x) if axis is None else self.torch.amax(x, dim=axis)

    def argmax(self, x, axis):
        return self.torch.argmax(x, dim=axis)

    def rsqrt(self, x):
        return self.torch.rsqrt(x)

    def swapaxes(self, x, a, b):
        return self.torch.transpose(x, a, b)

    def concatenate(self, xs, axis):
        return self.torch.cat(xs, dim=axis)

    def transpose_copy(self, x):
        return x.t().contiguous()

    def copy_op(self, x):
        return x.clone()

    def compile(self, fn):
        return self.torch.compile(fn)

    def vmap(self, fn, in_axes):
        return self.torch.vmap(fn, in_dims=in_axes)

    def sdpa(self, q, k, v, scale):
        return self.torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale)

    def value_and_grad(self, fn):
        torch = self.torch

        def value_and_grad(params, *args):
            leaves = [p.detach().requires_grad_(True) for p in params]
            value = fn(leaves, *args)
            grads = torch.autograd.grad(value, leaves)
            return value.detach(), list(grads)

        return value_and_grad

    def random_normal(self, shape):
        return self.torch.randn(shape, generator=self.gen, device=self.dev)

    def random_uniform(self, shape):
        return self.torch.rand(shape, generator=self.gen, device=self.dev)

    def clear_cache(self):
        gc.collect()
        if self.dev.type == "cuda":
            self.torch.cuda.empty_cache()

    def reset_peak(self):
        if self.dev.type == "cuda":
            self._allocated_before = int(self.torch.cuda.memory_allocated())
            self.torch.cuda.reset_peak_memory_stats()

    def peak_memory(self):
        if self.dev.type == "cuda":
            return max(0, int(self.torch.cuda.max_memory_allocated()) - self._allocated_before)
        return None  # PyTorch keeps no statistics of CPU allocations

    def info(self):
        return {"version": self.torch.__version__, "threads": self.torch.get_num_threads()}


class JaxFw(Framework):
    name = "jax"
    family = "jax"

    def __init__(self, device="cpu"):
        super().__init__(device)
        try:
            import jax
            import jax.numpy as jnp
        except ImportError as e:
            raise Unavailable(f"cannot import jax: {e}") from e
        self.jax = jax
        self.m = jnp
        platform = "gpu" if device == "gpu" else "cpu"
        try:
            self.dev = jax.devices(platform)[0]
        except RuntimeError as e:
            raise Unavailable(f"jax has no {platform} device: {e}") from e
        jax.config.update("jax_default_device", self.dev)
        if device == "gpu":
            # On NVIDIA GPUs JAX multiplies float32 matrices in TF32 by default;
            # the others compute in float32, and so must JAX to be compared.
            jax.config.update("jax_default_matmul_precision", "highest")
        self.key = jax.random.PRNGKey(0)

    def array(self, host):
        return self.jax.device_put(host, self.dev)

    def astype(self, x, dtype):
        if dtype == "float64" and not self.jax.config.jax_enable_x64:
            # JAX would silently keep float32.
            raise self.unsupported("float64 without jax_enable_x64")
        return x.astype(getattr(self.m, dtype))

    def sync(self, out):
        self.jax.block_until_ready(out)

    def erf(self, x):
        return self.jax.scipy.special.erf(x)

    def softmax(self, x, axis=-1):
        return self.jax.nn.softmax(x, axis=axis)

    def relu(self, x):
        return self.jax.nn.relu(x)

    def mean(self, x, axis=None, keepdims=False):
        return self.m.mean(x, axis=axis, keepdims=keepdims)

    def sum(self, x, axis=None):
        return self.m.sum(x, axis=axis)

    def max(self, x, axis=None):
        return self.m.max(x, axis=axis)

    def argmax(self, x, axis):
        return self.m.argmax(x, axis=axis)

    def rsqrt(self, x):
        return self.jax.lax.rsqrt(x)

    def swapaxes(self, x, a, b):
        return self.m.swapaxes(x, a, b)

    def concatenate(self, xs, axis):
        return self.m.concatenate(xs, axis=axis)

    def transpose_copy(self, x):
        return self.m.transpose(x)

    def copy_op(self, x):
        return self.m.copy(x)

    def compile(self, fn):
        return self.jax.jit(fn)

    def vmap(self, fn, in_axes):
        return self.jax.vmap(fn, in_axes=in_axes)

    def value_and_grad(self, fn):
        return self.jax.value_and_grad(fn)

    def random_normal(self, shape):
        return self.jax.random.normal(self.key, shape)

    def random_uniform(self, shape):
        return self.jax.random.uniform(self.key, shape)

    def peak_memory(self):
        # XLA's peak_bytes_in_use (GPU only) is a lifetime peak that cannot be
        # reset, so it says nothing about one workload.
        return None

    def info(self):
        return {"version": self.jax.__version__, "device": str(self.dev)}


def load(name, device="cpu"):
    """The adapter for ``name``; raises Unavailable if it cannot be imported."""
    if name in ("loom", "mlx"):
        return MlxFamily(name, device)
    if name == "numpy":
        return NumpyFw(device)
    if name == "torch":
        return TorchFw(device)
    if name == "jax":
        return JaxFw(device)
    raise Unavailable(f"unknown implementation {name!r}")


def environment():
    """Settings that change what a run measures; recorded with the results."""
    keys = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS",
            "OMP_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS", "LOOM_BFS_MAX_WIDTH",
            "MLX_BFS_MAX_WIDTH")
    return {k: os.environ[k] for k in keys if k in os.environ}
