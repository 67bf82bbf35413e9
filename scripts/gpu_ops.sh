#!/usr/bin/env bash
# One device call for the sort/select, quantized, FFT (and conv) GPU kernels:
# build Loom with CUDA (no C++ tests unless LOOM_GPU_OPS_CTEST=1), run
# test_cuda_ops.py (LOOM_GPU_OPS_FILES names other test files), time the
# kernels next to the CPU and PyTorch, and (LOOM_GPU_OPS_SUITE=1) the whole
# suite with the GPU as default device. Logs under $OUT (default /tmp/loom-gpu-ops).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-gpu-ops}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
SITE=${LOOM_GPU_SITE:-/tmp/loom-site}
export PYTHONUNBUFFERED=1 LOOM_CUDA_CACHE=${LOOM_CUDA_CACHE:-/tmp/loom-cuda-cache}
JOBS=$(nproc)
ls /usr/local/cuda/lib64 2>/dev/null | grep -E "cufft|cudnn" | head -4 | tee "$OUT/env.txt"
CTEST=OFF; [ -n "${LOOM_GPU_OPS_CTEST:-}" ] && CTEST=ON
start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=$JOBS $PY -m pip install -q --no-index --no-build-isolation --no-deps \
  --target "$SITE" --upgrade -Cbuild-dir=build/gpu -Ccmake.define.LOOM_BUILD_TESTS=$CTEST \
  -Ccmake.define.LOOM_CUDA=ON -Ccmake.define.LOOM_NATIVE=OFF . >"$OUT/build.log" 2>&1
rc=$?
echo "build rc=$rc in $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
if [ $rc -ne 0 ]; then grep -E "error|Error" "$OUT/build.log" | head -40; tail -30 "$OUT/build.log"; exit $rc; fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
if [ "$CTEST" = ON ]; then
  (cd build/gpu && timeout 120 ctest -j"$JOBS" -R "CudaOpsCodegen|CudaCodegen" --output-on-failure) \
    >"$OUT/ctest.log" 2>&1
  echo "ctest rc=$? $(grep -E 'tests passed|tests failed' "$OUT/ctest.log")" | tee -a "$OUT/summary.txt"
fi
(cd python/tests && timeout ${OPS_TEST_TIMEOUT:-150} $PY -m pytest -q -rs -p no:cacheprovider \
   -n ${OPS_WORKERS:-8} ${LOOM_GPU_OPS_FILES:-test_cuda_ops.py}) \
  >"$OUT/pytest_ops.log" 2>&1
echo "pytest ops rc=$? $(tail -1 "$OUT/pytest_ops.log")" | tee -a "$OUT/summary.txt"
grep -E "^FAILED|^ERROR|Error|assert" "$OUT/pytest_ops.log" | head -40
if [ -z "${LOOM_GPU_OPS_SKIP_BENCH:-}" ]; then
  timeout ${OPS_BENCH_TIMEOUT:-120} $PY scripts/gpu_ops_bench.py 2>&1 | tee "$OUT/bench.txt"
fi
if [ -n "${LOOM_GPU_OPS_SUITE:-}" ]; then
  (cd python/tests && LOOM_TEST_DEVICE=gpu LOOM_CUDA_FALLBACK_WARN=0 timeout ${SUITE_TIMEOUT:-200} \
     $PY -m pytest -q --timeout=60 -p no:cacheprovider -n ${SUITE_WORKERS:-14} . ) \
    >"$OUT/pytest_suite_gpu.log" 2>&1
  echo "pytest suite(gpu) $(tail -1 "$OUT/pytest_suite_gpu.log")" | tee -a "$OUT/summary.txt"
  grep -E "^FAILED|^ERROR" "$OUT/pytest_suite_gpu.log" | head -40 | tee -a "$OUT/summary.txt"
fi
cat "$OUT/summary.txt"
