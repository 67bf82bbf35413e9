"""Host-overhead and bandwidth probes for the CUDA backend (scripts/gpu_prof.sh).

Each section prints one line per measurement (median of repeats, after
warm-up; device work synchronised before each clock read). Env switches are
read once per process, so gpu_prof.sh runs a section once per variant.
"""

import sys

import numpy as np

import loom.core as mx
from gpu_bench import bench  # same directory: scripts/ is sys.path[0]


def chain():
    """1000 chained tiny adds: graph building alone, eval once, eval each."""
    for name, s in (("gpu", mx.gpu), ("cpu", mx.cpu)):
        small = mx.ones((16,), stream=s)
        mx.eval(small)

        def run(mode):
            y = small
            for _ in range(1000):
                y = mx.add(y, 1.0, stream=s)
                if mode == "each":
                    mx.eval(y)
            if mode != "build":
                mx.eval(y)

        b = bench(lambda: run("build"), repeat=5)
        once = min(bench(lambda: run("once"), repeat=5) for _ in range(3))
        each = min(bench(lambda: run("each"), repeat=3) for _ in range(3))
        print(f"  chain {name}: build only {b:.2f}, eval once {once:.2f}, eval each {each:.2f} us/op")


def host():
    """A host-built 4096^2 float32 array: build, upload, matmul."""
    g = mx.gpu
    host = np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32)
    t_np = bench(lambda: host.copy(), repeat=5, warmup=1)

    def only():
        mx.eval(mx.array(host))

    def upload():
        m = mx.array(host)
        mx.eval(mx.add(m, 0.0, stream=g))

    def matmul():
        m = mx.array(host)
        mx.eval(mx.matmul(m, m, stream=g))

    dev = mx.add(mx.array(host), 0.0, stream=g)
    mx.eval(dev)
    t_mm = bench(lambda: mx.eval(mx.matmul(dev, dev, stream=g)), repeat=5, warmup=2)
    print(f"  host: numpy copy {t_np:.2f} ms, mx.array {bench(only, repeat=5, warmup=1):.2f}, "
          f"+upload+add {bench(upload, repeat=5, warmup=1):.2f}, "
          f"+matmul {bench(matmul, repeat=5, warmup=1):.2f} (matmul alone {t_mm:.2f})")


def bandwidth():
    """x*2 over 1 GiB, gelu eager and compiled over (32,1000,4096) float32."""
    g = mx.gpu
    n = 1 << 28
    x = mx.add(mx.broadcast_to(mx.array(1.0), (n,)), 0, stream=g)
    mx.eval(x)
    ms = bench(lambda: mx.eval(mx.multiply(x, 2.0, stream=g)), repeat=10)
    del x
    a = mx.random.normal((32, 1000, 4096))
    mx.eval(a)

    def gelu_fn(v):
        return v * 0.5 * (1 + mx.erf(v / 1.4142135623730951))

    eager = bench(lambda: mx.eval(gelu_fn(a)), repeat=10)
    compiled = mx.compile(gelu_fn)
    with mx.stream(g):
        comp = min(bench(lambda: mx.eval(compiled(a)), repeat=20) for _ in range(3))
        small = a[:2]
        mx.eval(small)
        comp_small = bench(lambda: mx.eval(compiled(small)), repeat=20)
    print(f"  x*2 1GiB {ms:.3f} ms ({2 * 4 * n / ms / 1e6:.0f} GB/s); gelu eager {eager:.3f}; "
          f"compiled {comp:.3f} ms ({2 * a.nbytes / comp / 1e9:.2f} TB/s); "
          f"compiled on 1/16 of it {comp_small:.3f} ms")
    ref = np.array(gelu_fn(a[:1]).astype(mx.float32))
    got = np.array(compiled(a[:1]))
    print(f"  compiled vs eager max abs diff {np.abs(ref - got).max():.3g}")


def ncu():
    """Kernels for ncu: compiled gelu, x*2 (a few launches each)."""
    g = mx.gpu
    a = mx.random.normal((32, 1000, 4096))
    mx.eval(a)

    def gelu_fn(v):
        return v * 0.5 * (1 + mx.erf(v / 1.4142135623730951))

    compiled = mx.compile(gelu_fn)
    with mx.stream(g):
        for _ in range(3):
            mx.eval(compiled(a))
        for _ in range(3):
            mx.eval(mx.multiply(a, 2.0))
    mx.synchronize()


if __name__ == "__main__":
    for section in sys.argv[1:]:
        globals()[section]()
