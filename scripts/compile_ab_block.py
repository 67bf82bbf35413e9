"""A/B of the transformer block of `python -m benchmarks` (workloads.build_transformer:
B4 L256 D512 H8 hidden 2048, float32): eager value_and_grad and its mx.compile in ONE process,
alternating calls after 20 ms sleeps, medians and ranges, and per-call process CPU time.

    ROUNDS=50 .venv/bin/python scripts/compile_ab_block.py [both|eager|compiled]

With LOOM_NUM_THREADS=1 LOOM_PROFILE_NODES=1 and one mode, the exit profile gives the kernel
time per primitive (docs/performance.md, session 10 fuse).
"""

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.frameworks import MlxFamily  # noqa: E402
from benchmarks.workloads import build_transformer  # noqa: E402

SHAPE = (4, 256, 512, 8, 2048)  # batch, length, dim, heads, hidden


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "both"
    rounds = int(os.environ.get("ROUNDS", "30"))
    # Each framework object draws the same parameters (its generator is seeded alike).
    steps = {"eager": build_transformer(*SHAPE)(MlxFamily("loom")),
             "compiled": build_transformer(*SHAPE, compiled=True)(MlxFamily("loom"))}
    if which != "both":
        steps = {which: steps[which]}
    mx = MlxFamily("loom").m

    cpu_ms: dict[str, list[float]] = {name: [] for name in steps}
    wall_ms: dict[str, list[float]] = {name: [] for name in steps}

    def call(name: str, record: bool) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        mx.eval(steps[name]())
        if record:
            cpu_ms[name].append((time.process_time() - cpu) * 1e3)
            wall_ms[name].append((time.perf_counter() - wall) * 1e3)

    for name in steps:
        for _ in range(3):
            call(name, record=False)
    if which == "both":
        (la, ga), (lb, gb) = steps["eager"](), steps["compiled"]()
        diff = max(float(mx.max(mx.abs(a - b)).item()) for a, b in zip(ga, gb))
        print(f"loss {la.item()} {lb.item()} max grad diff {diff}")
    for _ in range(rounds):
        for name in steps:
            time.sleep(0.02)
            call(name, record=True)
    for name in steps:
        wall, cpu = np.array(wall_ms[name]), np.array(cpu_ms[name])
        print(f"{name:9s} cpu median {np.median(cpu):7.2f} min {cpu.min():7.2f}")
        print(f"{name:9s} median {np.median(wall):7.2f} ms  p10 {np.percentile(wall, 10):7.2f}  "
              f"p90 {np.percentile(wall, 90):7.2f}  min {wall.min():7.2f}")
    if len(steps) == 2:
        ratio = np.array(wall_ms["compiled"]) / np.array(wall_ms["eager"])
        print(f"ratio compiled/eager per alternation: median {np.median(ratio):.3f} "
              f"range {ratio.min():.3f}-{ratio.max():.3f}")


if __name__ == "__main__":
    main()
