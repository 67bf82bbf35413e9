"""Quick side-by-side timings of the indexing, sorting and scan kernels
against NumPy (issue 9's workloads), outside the full benchmark runner:

    .venv/bin/python benchmarks/indexing_sort_scan.py [take at sort argsort cumsum topk]

Each line is the best of a few calls, in milliseconds.
"""

import sys
import time
from typing import Callable

import numpy as np

import loom.core as mx


def best(f: Callable[[], object], reps: int = 5) -> float:
    f()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def main(which: list[str]) -> None:
    rng = np.random.default_rng(0)
    if "take" in which:
        table = rng.standard_normal((1_000_000, 64), dtype=np.float32)
        idx = rng.integers(0, 1_000_000, size=1_000_000).astype(np.int32)
        t, i = mx.array(table), mx.array(idx)
        mx.eval(t, i)
        loom = best(lambda: mx.eval(mx.take(t, i, axis=0)))
        ref = best(lambda: np.take(table, idx, axis=0))
        print(f"take 1M rows of 1Mx64 f32: loom {loom:.1f} ms, numpy {ref:.1f} ms")
    if "at" in which:
        x = np.zeros(1_000_000, np.float32)
        idx = rng.integers(0, 1_000_000, size=1_000_000).astype(np.int32)
        v = rng.standard_normal(1_000_000).astype(np.float32)
        xs, i, vs = mx.array(x), mx.array(idx), mx.array(v)
        mx.eval(xs, i, vs)
        loom = best(lambda: mx.eval(xs.at[i].add(vs)))
        ref = best(lambda: np.add.at(x.copy(), idx, v), 3)
        print(f"x.at[idx].add(v), 1M into 1M f32: loom {loom:.1f} ms, numpy add.at {ref:.1f} ms")
    if "sort" in which or "argsort" in which:
        a = rng.standard_normal(16 * 2**20).astype(np.float32)
        am = mx.array(a)
        mx.eval(am)
        if "sort" in which:
            loom = best(lambda: mx.eval(mx.sort(am)), 3)
            print(f"sort 16M f32: loom {loom:.1f} ms, numpy {best(lambda: np.sort(a), 3):.1f} ms")
        if "argsort" in which:
            loom = best(lambda: mx.eval(mx.argsort(am)), 3)
            ref = best(lambda: np.argsort(a, kind="stable"), 3)
            print(f"argsort 16M f32: loom {loom:.1f} ms, numpy (stable) {ref:.1f} ms")
    if "cumsum" in which:
        c = rng.standard_normal(32 * 2**20).astype(np.float32)
        cm = mx.array(c)
        mx.eval(cm)
        loom = best(lambda: mx.eval(mx.cumsum(cm)))
        copy = best(lambda: mx.eval(cm + 0))
        ref = best(lambda: np.cumsum(c), 3)
        print(f"cumsum 32M f32: loom {loom:.1f} ms, numpy {ref:.1f} ms, loom a + 0 {copy:.1f} ms")
    if "topk" in which:
        t = rng.standard_normal((4096, 32000)).astype(np.float32)
        tm = mx.array(t)
        mx.eval(tm)
        loom = best(lambda: mx.eval(mx.topk(tm, 8)), 3)
        ref = best(lambda: np.partition(t, -8, axis=-1)[:, -8:], 2)
        print(f"topk k=8 over 4096x32000 f32: loom {loom:.1f} ms, numpy partition {ref:.1f} ms")


if __name__ == "__main__":
    main(sys.argv[1:] or ["take", "at", "sort", "argsort", "cumsum", "topk"])
