#!/usr/bin/env bash
# Issue 13's launch batching (CUDA graphs) on the device machine, in one call:
# gpu.sh's build (no C++ tests) and its overheads timings, the same timings
# with batching off and with other batch sizes, the backend's counters and
# host timers (LOOM_CUDA_PROFILE=1), then the GPU test files. Logs under $OUT.
#   usage: bash scripts/gpu_graphs.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-gpu}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
LOOM_GPU_SKIP_CTEST=1 LOOM_GPU_SKIP_CUDA_TESTS=1 LOOM_GPU_SKIP_VARIANTS=1 \
  LOOM_GPU_BENCH_ONLY=overheads bash scripts/gpu.sh quick || exit $?
export PYTHONPATH=${LOOM_GPU_SITE:-/tmp/loom-site} PYTHONUNBUFFERED=1
export LOOM_CUDA_CACHE=${LOOM_CUDA_CACHE:-/tmp/loom-cuda-cache}
for v in LOOM_CUDA_GRAPHS=0 LOOM_CUDA_GRAPHS=1 LOOM_CUDA_GRAPH_WHOLE_UPDATE=1 \
         LOOM_CUDA_GRAPHS=0 LOOM_CUDA_GRAPHS=1 LOOM_CUDA_GRAPH_WHOLE_UPDATE=1 \
         LOOM_CUDA_GRAPHS=0 LOOM_CUDA_GRAPHS=1 LOOM_CUDA_GRAPH_WHOLE_UPDATE=1 \
         LOOM_CUDA_GRAPH_NODES=128 LOOM_CUDA_GRAPH_NODES=256; do
  echo "variant $v:" | tee -a "$OUT/bench.txt"
  env $v timeout 60 $PY scripts/gpu_bench.py overheads 2>&1 | tee -a "$OUT/bench.txt"
done
for v in LOOM_CUDA_GRAPHS=0 LOOM_CUDA_GRAPHS=1 LOOM_CUDA_GRAPH_WHOLE_UPDATE=1; do
  echo "profile $v:" | tee -a "$OUT/bench.txt"
  env $v LOOM_CUDA_PROFILE=1 timeout 60 $PY scripts/gpu_bench.py overheads 2>&1 | tee -a "$OUT/bench.txt"
done
echo "== GPU tests (python/tests/test_cuda*.py)"
(cd python/tests && timeout ${TESTS_TIMEOUT:-240} $PY -m pytest -q -rs -p no:cacheprovider \
   -n ${TEST_WORKERS:-8} test_cuda*.py) >"$OUT/pytest_cuda.log" 2>&1
echo "pytest cuda rc=$? $(tail -1 "$OUT/pytest_cuda.log")" | tee -a "$OUT/summary.txt"
grep -E "FAILED|Error" "$OUT/pytest_cuda.log" | head -30
