"""A/B of the transformer block (benchmarks/workloads.py build_transformer, B4 L256 D512 H8
hidden 2048, float32): eager value_and_grad and its mx.compile in ONE process, alternating calls
after 20 ms sleeps, medians and ranges; per-call process CPU time too. Usage:
    ROUNDS=50 .venv/bin/python scripts/compile_ab_block.py [both|eager|compiled]
With LOOM_NUM_THREADS=1 LOOM_PROFILE_NODES=1 and one mode, the exit profile gives the kernel
time per primitive (docs/performance.md, session 10 fuse)."""
import math, sys, time, os
import numpy as np
import loom.core as mx

B, L, D, H, HID = 4, 256, 512, 8, 2048
rng = np.random.default_rng(0)

def gelu(x):
    return x * (1 + mx.erf(x / math.sqrt(2))) / 2

def layer_norm(x, g, b):
    mu = mx.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    var = mx.mean(xc * xc, axis=-1, keepdims=True)
    return xc * mx.rsqrt(var + 1e-5) * g + b

def block(params, x):
    g1, b1, wq, wk, wv, wo, g2, b2, w1, c1, w2, c2 = params
    batch, length, dim = x.shape
    hd = dim // H
    def split_heads(t):
        return mx.swapaxes(mx.reshape(t, (batch, length, H, hd)), 1, 2)
    h = layer_norm(x, g1, b1)
    q, k, v = split_heads(h @ wq), split_heads(h @ wk), split_heads(h @ wv)
    scores = (q @ mx.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(hd))
    attn = mx.swapaxes(mx.softmax(scores, axis=-1) @ v, 1, 2)
    x = x + mx.reshape(attn, (batch, length, dim)) @ wo
    h = layer_norm(x, g2, b2)
    return x + gelu(h @ w1 + c1) @ w2 + c2

def loss(params, x):
    out = block(params, x)
    return mx.mean(out * out)

def weight(i, o):
    s = 1 / math.sqrt(i)
    return mx.array(rng.uniform(-s, s, (i, o)).astype(np.float32))
def vec(n, v):
    return mx.array(np.full(n, v, np.float32))
params = [vec(D, 1.0), vec(D, 0.0), weight(D, D), weight(D, D), weight(D, D), weight(D, D),
          vec(D, 1.0), vec(D, 0.0), weight(D, HID), vec(HID, 0.0), weight(HID, D), vec(D, 0.0)]
x = mx.array(rng.standard_normal((B, L, D)).astype(np.float32))
mx.eval(params, x)
vg = mx.value_and_grad(loss)
cvg = mx.compile(vg)
fns = {"eager": vg, "compiled": cvg}
which = sys.argv[1] if len(sys.argv) > 1 else "both"
rounds = int(os.environ.get("ROUNDS", "30"))
if which != "both":
    fns = {which: fns[which]}

cpu_times = {}
def call(f, name=None):
    t = time.perf_counter(); c = time.process_time()
    out = f(params, x)
    mx.eval(out)
    if name: cpu_times.setdefault(name, []).append((time.process_time() - c) * 1e3)
    return (time.perf_counter() - t) * 1e3

for name, f in fns.items():
    for _ in range(3):
        call(f)
# check equality
if which == "both":
    a = vg(params, x); b = cvg(params, x)
    mx.eval(a, b)
    print("loss", a[0].item(), b[0].item(), "max grad diff",
          max(float(mx.max(mx.abs(ga - gb)).item()) for ga, gb in zip(a[1], b[1])))
times = {n: [] for n in fns}
for r in range(rounds):
    for n, f in fns.items():
        time.sleep(0.02)
        times[n].append(call(f, n))
for n, t in times.items():
    t = np.array(t)
    ct = np.array(cpu_times[n])
    print(f"{n:9s} cpu median {np.median(ct):7.2f} min {ct.min():7.2f}")
    print(f"{n:9s} median {np.median(t):7.2f} ms  p10 {np.percentile(t,10):7.2f}  p90 {np.percentile(t,90):7.2f}  min {t.min():7.2f}")
if len(times) == 2:
    r = np.array(times["compiled"]) / np.array(times["eager"])
    print(f"ratio compiled/eager per alternation: median {np.median(r):.3f} range {r.min():.3f}-{r.max():.3f}")
