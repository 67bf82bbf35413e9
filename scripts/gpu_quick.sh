#!/usr/bin/env bash
# A short GPU check for a nearly spent device budget: build, the key timings,
# then the GPU test files (each step's output lands in $OUT as it goes).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-gpu}; mkdir -p "$OUT"
PY=${PYTHON:-python3}; SITE=/tmp/loom-site
export PYTHONUNBUFFERED=1 LOOM_CUDA_CACHE=/tmp/loom-cuda-cache PYTHONPATH=$SITE
start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) $PY -m pip install -q --no-index --no-build-isolation --no-deps \
  --target "$SITE" --upgrade -Cbuild-dir=build/gpu -Ccmake.define.LOOM_CUDA=ON \
  -Ccmake.define.LOOM_NATIVE=OFF . >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - start )) s"
timeout 60 $PY - <<'PY' 2>&1 | tee "$OUT/quick_bench.txt"
import sys; sys.argv = ["x"]
sys.path.insert(0, "scripts")
import loom.core as mx, gpu_bench as gb
a = mx.random.normal((32, 1000, 4096)); mx.eval(a)
f = mx.compile(lambda x: x * 0.5 * (1 + mx.erf(x / 1.4142135623730951)))
with mx.stream(mx.gpu):
    ms = gb.bench(lambda: mx.eval(f(a)), repeat=20)
print(f"compiled gelu {ms:.3f} ms {2 * a.nbytes / ms / 1e9:.2f} TB/s")
x = mx.add(a, 0.0); mx.eval(x)
ms = gb.bench(lambda: mx.eval(x * 2.0), repeat=10)
print(f"x*2 {a.nbytes/2**20:.0f} MiB {ms:.3f} ms {2 * a.nbytes / ms / 1e9:.2f} TB/s")
gb.overheads()
PY
LOOM_CUDA_FREE_LEGACY=1 timeout 40 $PY scripts/gpu_bench.py overheads 2>&1 | sed 's/^/legacy frees: /' | tee -a "$OUT/quick_bench.txt"
(cd python/tests && LOOM_TEST_DEVICE=gpu LOOM_CUDA_FALLBACK_WARN=0 timeout 90 $PY -m pytest -q -p no:cacheprovider \
  -n 8 test_cuda*.py test_devices_memory.py test_seed_examples.py test_interop.py test_compile.py \
  test_hardening.py test_mlxfn.py test_vecmath.py test_random.py 2>&1 | tail -25) | tee "$OUT/quick_tests.txt"
