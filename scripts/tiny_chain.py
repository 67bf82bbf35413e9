"""Host cost of a tiny op: REPS x 1000 chained `x = x + 1` on a (4,) float32 array.

    python scripts/tiny_chain.py once|each [REPS] [--mlx]

`once` evaluates after each 1000 ops, `each` after every op; prints the mean
microseconds per op over all REPS x 1000 ops. With --mlx the same loop runs on
mlx.core with the CPU as default device (MLX's own reference on this machine).
"""
import sys
import time

args = [a for a in sys.argv[1:] if not a.startswith("--")]
if "--mlx" in sys.argv:
    import mlx.core as mx

    mx.set_default_device(mx.cpu)
else:
    import loom.core as mx

mode = args[0] if args else "once"
reps = int(args[1]) if len(args) > 1 else 100
x = mx.zeros((4,), dtype=mx.float32)
mx.eval(x)
start = time.perf_counter()
for _ in range(reps):
    for _ in range(1000):
        x = x + 1
        if mode == "each":
            mx.eval(x)
    mx.eval(x)
print(f"{mode} {(time.perf_counter() - start) / reps / 1000 * 1e6:.2f} us/op")
