"""Session 10 (gputune) checks and timings for the device machine, one part
per argument: `bf16exhaustive` (the prelude's float32 -> bfloat16 rounding of
every one of the 2^32 float32 bit patterns against the integer form, on the
GPU through CuPy), `gelu` (compiled gelu (32,1000,4096) float32, median
of 20), `gemm` (bfloat16 8192^3 and float16 4096^3 rates, as gpu_bench.py
gemm measures them, first product's tuning included in a separate line)."""

import statistics
import sys
import time

import numpy as np

import loom.core as mx

sys.path.insert(0, "scripts")
import gpu_bench as gb  # noqa: E402


def bf16_exhaustive():
    """The device functions of jit.cpp's prelude (loom_bf16_bits, the store,
    and loom_round_bf16, a fused region's rounding) built with CuPy's NVRTC
    for this GPU, over all 2^32 float32 patterns, against the integer form."""
    import re

    import cupy as cp

    src = open("loom/backend/cuda/jit.cpp").read()
    store = re.search(r'kBf16Store = R"\((.*?)\)";', src, re.S).group(1)
    code = "struct loom_bf16 { unsigned short bits; };\n" + store + r"""
__device__ __forceinline__ unsigned ref_bits(unsigned u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
extern "C" __global__ void check(unsigned long long* bad) {
  unsigned long long n = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
       i < (1ull << 32); i += (unsigned long long)gridDim.x * blockDim.x) {
    unsigned u = (unsigned)i;
    float v = __uint_as_float(u);
    unsigned want = ref_bits(u) & 0xffffu;
    n += (loom_bf16_bits(v) & 0xffffu) != want;
    n += __float_as_uint(loom_round_bf16(v)) != (want << 16);
  }
  if (n) atomicAdd(bad, n);
}
"""
    t = time.perf_counter()
    k = cp.RawKernel(code, "check", options=("--std=c++17",))
    bad = cp.zeros(1, dtype=cp.uint64)
    k((132 * 16,), (256,), (bad,))
    cp.cuda.Device().synchronize()
    print(f"bf16 rounding (store and fused round trip), all 2^32 float32 patterns: "
          f"{int(bad.get()[0])} differ from the integer form ({time.perf_counter() - t:.1f} s, "
          f"sm_{cp.cuda.Device().compute_capability})", flush=True)


def gelu():
    a = mx.random.normal((32, 1000, 4096))
    mx.eval(a)
    f = mx.compile(lambda x: x * 0.5 * (1 + mx.erf(x / 1.4142135623730951)))
    with mx.stream(mx.gpu):
        runs = [gb.bench(lambda: mx.eval(f(a)), repeat=20) for _ in range(3)]
    print("compiled gelu (32,1000,4096) f32: " + " / ".join(f"{ms:.3f}" for ms in runs) + " ms",
          flush=True)


def gemm():
    rng = np.random.default_rng(3)
    for dt, n in ((mx.bfloat16, 8192), (mx.float16, 4096)):
        h = rng.standard_normal((2, n, n)).astype(np.float32)
        a, b = (mx.array(h[i]).astype(dt) for i in range(2))
        mx.eval(a, b)
        t = time.perf_counter()
        mx.eval(mx.matmul(a, b, stream=mx.gpu))
        first = (time.perf_counter() - t) * 1e3

        def twenty():
            mx.eval([mx.matmul(a, b, stream=mx.gpu) for _ in range(20)])

        rates = []
        for _ in range(3):
            ms = gb.bench(twenty, repeat=5, warmup=1) / 20
            rates.append(2 * n**3 / ms / 1e9)
        print(f"matmul {dt} {n}^3: " + " / ".join(f"{r:.0f}" for r in rates)
              + f" TFLOP/s (first product with tuning {first:.0f} ms)", flush=True)


if __name__ == "__main__":
    for part in sys.argv[1:]:
        {"bf16exhaustive": bf16_exhaustive, "gelu": gelu, "gemm": gemm}[part]()
