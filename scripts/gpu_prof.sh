#!/usr/bin/env bash
# One device call for the CUDA backend's speed work (issue 13): build, a few
# GPU test files, then scripts/gpu_prof.py's probes under each variant of the
# env switches, and ncu's kernel times. Logs under $OUT (default /tmp/loom-gpu).
#   usage: bash scripts/gpu_prof.sh [probes|tests|suite|all]   (default all: a few GPU test
#   files, then the probes; suite: the whole suite with the GPU as default device, then the probes)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-gpu}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
SITE=${LOOM_GPU_SITE:-/tmp/loom-site}
export PYTHONUNBUFFERED=1 LOOM_CUDA_CACHE=${LOOM_CUDA_CACHE:-/tmp/loom-cuda-cache}
what=${1:-all}

echo "== build"
start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) $PY -m pip install -q --no-index --no-build-isolation --no-deps \
  --target "$SITE" --upgrade -Cbuild-dir=build/gpu -Ccmake.define.LOOM_BUILD_TESTS=OFF \
  -Ccmake.define.LOOM_CUDA=ON -Ccmake.define.LOOM_NATIVE=OFF . >"$OUT/build.log" 2>&1
rc=$?
echo "build rc=$rc in $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
if [ $rc -ne 0 ]; then grep -E "error|Error" "$OUT/build.log" | head -40; exit $rc; fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"

if [ "$what" = "tests" ] || [ "$what" = "all" ]; then
  echo "== GPU tests (${LOOM_PROF_TESTS:-test_cuda_compile.py test_cuda_kernels.py test_cuda_launch.py})"
  start=$(date +%s)
  (cd python/tests && timeout ${TESTS_TIMEOUT:-150} $PY -m pytest -q -x -p no:cacheprovider \
     -n ${TEST_WORKERS:-8} ${LOOM_PROF_TESTS:-test_cuda_compile.py test_cuda_kernels.py test_cuda_launch.py}) \
     >"$OUT/pytest.log" 2>&1
  echo "pytest rc=$? in $(( $(date +%s) - start )) s: $(tail -1 "$OUT/pytest.log")" | tee -a "$OUT/summary.txt"
  grep -E "^FAILED|^ERROR|Error" "$OUT/pytest.log" | head -20
fi
# The whole suite with the GPU as the default device, as scripts/gpu.sh runs it.
if [ "$what" = "suite" ]; then
  echo "== whole suite, default device gpu"
  start=$(date +%s)
  (cd python/tests && LOOM_TEST_DEVICE=gpu LOOM_CUDA_FALLBACK_WARN=0 timeout ${SUITE_TIMEOUT:-170} \
     $PY -m pytest -q --timeout=60 -p no:cacheprovider -n ${SUITE_WORKERS:-14} . ) >"$OUT/pytest_suite_gpu.log" 2>&1
  echo "suite(gpu) in $(( $(date +%s) - start )) s: $(tail -1 "$OUT/pytest_suite_gpu.log")" | tee -a "$OUT/summary.txt"
  grep -E "^FAILED|^ERROR" "$OUT/pytest_suite_gpu.log" | head -30 | tee -a "$OUT/summary.txt"
fi
[ "$what" = "tests" ] && exit 0

P="timeout 60 $PY scripts/gpu_prof.py"
# PROBES=final: one run of each probe with the defaults (a short call).
if [ "${PROBES:-}" = "final" ]; then
  { echo "== chain"; $P chain; echo "== host"; $P host; echo "== bandwidth"; $P bandwidth; } 2>&1 \
    | tee "$OUT/probes.txt"
else
{
  echo "== chain (defaults)"; $P chain
  echo "== chain (defaults, again)"; $P chain
  echo "== chain LOOM_CUDA_RUNTIME_LAUNCH=1"; LOOM_CUDA_RUNTIME_LAUNCH=1 $P chain
  echo "== chain LOOM_SIGNAL_EACH_TASK=1 LOOM_EVAL_WAIT_WORKER=1 LOOM_CUDA_RUNTIME_LAUNCH=1 (signalling of session 6)"
  LOOM_SIGNAL_EACH_TASK=1 LOOM_EVAL_WAIT_WORKER=1 LOOM_CUDA_RUNTIME_LAUNCH=1 $P chain
  echo "== profile (LOOM_CUDA_PROFILE=1, eval once then each)"; LOOM_CUDA_PROFILE=1 $P chain
  echo "== host"; $P host
  echo "== host LOOM_CUDA_TF32=1"; LOOM_CUDA_TF32=1 $P host
  echo "== bandwidth (defaults)"; $P bandwidth
  echo "== bandwidth LOOM_GPU_INLINE_MAX_BYTES=65536 (large kernels on the worker, as before)"
  LOOM_GPU_INLINE_MAX_BYTES=65536 $P bandwidth
} 2>&1 | tee "$OUT/probes.txt"
fi

if command -v ncu >/dev/null; then
  echo "== ncu (kernel times)"
  for v in ${NCU_VARIANTS:-LOOM_CUDA_FUSED_UNROLL=2 LOOM_CUDA_FUSED_MIN_BLOCKS=6 LOOM_CUDA_FUSED_MIN_BLOCKS=8 LOOM_CUDA_FUSED_UNROLL=3 LOOM_CUDA_FUSED_THREADS=128}; do
    env $v timeout 60 ncu --clock-control none -k regex:loom_fused --launch-count 2 \
      --metrics gpu__time_duration.sum,dram__bytes.sum.per_second,launch__grid_size,launch__registers_per_thread \
      $PY scripts/gpu_prof.py ncu >"$OUT/ncu_${v//=/_}.txt" 2>&1
    echo "$v:"; grep -E "duration|per_second|grid_size|registers|ERR" "$OUT/ncu_${v//=/_}.txt" | head -8
  done
fi
cat "$OUT/summary.txt"
