#!/usr/bin/env bash
# Session 10 (gputune): one device call that builds Loom with CUDA (no C++
# tests), runs the new GPU tests, A/B-times the bfloat16 rounding in the
# AdamW step (packed conversion against LOOM_CUDA_BF16_ROUND=int), the GEMM
# rates after the candidate-timing change, compiled gelu under a few launch
# shapes, the exhaustive bfloat16 rounding check and then the wider GPU
# tests. Each step's log lands in $OUT as it goes; a short table prints last.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-gpu}; mkdir -p "$OUT"
PY=${PYTHON:-python3}; SITE=/tmp/loom-site
export PYTHONUNBUFFERED=1 LOOM_CUDA_CACHE=/tmp/loom-cuda-cache PYTHONPATH=$SITE
S="$OUT/summary.txt"; : > "$S"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$S"; }
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) $PY -m pip install -q --no-index --no-build-isolation --no-deps \
  --target "$SITE" --upgrade -Cbuild-dir=build/gpu -Ccmake.define.LOOM_CUDA=ON \
  -Ccmake.define.LOOM_BUILD_TESTS=OFF -Ccmake.define.LOOM_NATIVE=OFF . >"$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; exit 1; }
stamp "built"
(cd python/tests && timeout 60 $PY -m pytest -q -p no:cacheprovider -x test_cuda_tune.py) \
  >"$OUT/tests.log" 2>&1
stamp "test_cuda_tune: $(tail -1 "$OUT/tests.log")"; grep -E "^(FAILED|E )" "$OUT/tests.log" | head -12
for v in f2fp int; do
  env LOOM_CUDA_BF16_ROUND=$([ $v = int ] && echo int || echo f2fp) timeout 60 $PY scripts/gpu_bench.py \
    adamw-profile >"$OUT/adamw_$v.txt" 2>&1
  stamp "adamw ($v): $(grep -E 'AdamW step|torch eager' "$OUT/adamw_$v.txt" | tr '\n' ' ')"
  grep -E "fused|kernels:" "$OUT/adamw_$v.txt" | head -3 | tee -a "$S"
done
timeout 40 $PY scripts/gpu_tune.py gemm >"$OUT/gemm.txt" 2>&1; stamp "$(cat "$OUT/gemm.txt")"
for cfg in "" "LOOM_CUDA_FUSED_THREADS=512" "LOOM_CUDA_FUSED_UNROLL=4"; do
  env $cfg timeout 25 $PY scripts/gpu_tune.py gelu >"$OUT/gelu.txt" 2>&1
  stamp "${cfg:-default}: $(cat "$OUT/gelu.txt")"
done
timeout 30 $PY scripts/gpu_tune.py bf16exhaustive >"$OUT/bf16.txt" 2>&1; stamp "$(tail -2 "$OUT/bf16.txt")"
(cd python/tests && LOOM_TEST_DEVICE=gpu LOOM_CUDA_FALLBACK_WARN=0 timeout 60 $PY -m pytest -q \
  -p no:cacheprovider -n 14 --timeout=50 test_cuda*.py test_seed_examples.py test_devices_memory.py) \
  >"$OUT/tests_wide.log" 2>&1
stamp "wide tests: $(tail -1 "$OUT/tests_wide.log")"; grep -E "^(FAILED|ERROR)" "$OUT/tests_wide.log" | head -20 | tee -a "$S"
cat "$S"
