#!/usr/bin/env bash
# One device call: build Loom with CUDA (as scripts/gpu_ops.sh, no C++ tests),
# then, side by side, the whole pytest suite with the GPU as the default device
# and compute-sanitizer over the GPU test files (memcheck, then racecheck and
# synccheck on the kernels that use shared memory and barriers). Logs under
# $OUT (default /tmp/loom-gpu-sanitize); a summary at the end.
#   SANITIZE_FILES   test files for memcheck (default: every test_cuda*.py)
#   RACE_FILES       test files for racecheck/synccheck (default: attention, fast, scan/sort)
#   MEMCHECK_TIMEOUT, RACE_TIMEOUT seconds per sanitizer run (220, 90)
#   SANITIZE_WORKERS pytest-xdist workers under the sanitizer (6; each worker
#                    process is sanitized: --target-processes all)
#   LOOM_GPU_SKIP_SUITE=1 leaves the whole-suite run out
# Device memory comes from cudaMallocAsync, which compute-sanitizer tracks per
# allocation; Loom rounds requests to 256 bytes, so an overrun inside that
# rounding is not seen.
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/loom-gpu-sanitize}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
SITE=${LOOM_GPU_SITE:-/tmp/loom-site}
export PYTHONUNBUFFERED=1 LOOM_CUDA_CACHE=${LOOM_CUDA_CACHE:-/tmp/loom-cuda-cache}
JOBS=$(nproc)
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=$JOBS $PY -m pip install -q --no-index --no-build-isolation --no-deps \
  --target "$SITE" --upgrade -Cbuild-dir=build/gpu -Ccmake.define.LOOM_BUILD_TESTS=OFF \
  -Ccmake.define.LOOM_CUDA=ON -Ccmake.define.LOOM_NATIVE=OFF . >"$OUT/build.log" 2>&1
rc=$?
echo "build rc=$rc in $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
if [ $rc -ne 0 ]; then grep -E "error" "$OUT/build.log" | head -40; exit $rc; fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
"$SAN" --version 2>&1 | tail -1 | tee -a "$OUT/summary.txt"

cd python/tests
if [ -z "${LOOM_GPU_SKIP_SUITE:-}" ]; then
  (LOOM_TEST_DEVICE=gpu LOOM_CUDA_FALLBACK_WARN=0 timeout ${SUITE_TIMEOUT:-220} \
     $PY -m pytest -q --timeout=90 -p no:cacheprovider -n ${SUITE_WORKERS:-8} . \
     >"$OUT/pytest_suite_gpu.log" 2>&1; echo "suite rc=$?" >>"$OUT/pytest_suite_gpu.log") &
  suite=$!
fi

# One sanitizer run: the tool's report goes to its own file (%p: one per
# process, the xdist workers included), the test output to another. Each
# sanitized process ends its report with "ERROR SUMMARY: N errors".
sanitize() {
  local tool=$1 limit=$2; shift 2
  local log="$OUT/sanitize_$tool"
  timeout "$limit" "$SAN" --tool "$tool" --target-processes all --print-limit 50 \
    --log-file "$log.%p.report" \
    $PY -m pytest -q -p no:cacheprovider -n ${SANITIZE_WORKERS:-6} "$@" >"$log.pytest" 2>&1
  local rc=$?
  local summaries
  summaries=$(cat "$log".*.report 2>/dev/null | grep -hE "ERROR SUMMARY" | sort | uniq -c | tr '\n' ';')
  echo "$tool rc=$rc (124: timeout) $(tail -1 "$log.pytest") | ${summaries:-no summary}" \
    | tee -a "$OUT/summary.txt"
}
sanitize memcheck "${MEMCHECK_TIMEOUT:-220}" ${SANITIZE_FILES:-test_cuda*.py}
for tool in racecheck synccheck; do
  sanitize "$tool" "${RACE_TIMEOUT:-90}" ${RACE_FILES:-test_cuda_attention.py test_cuda_fast.py test_cuda_scan_sort.py}
done

if [ -n "${suite:-}" ]; then
  wait "$suite"
  echo "pytest suite(gpu) $(tail -2 "$OUT/pytest_suite_gpu.log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
  grep -E "^FAILED|^ERROR" "$OUT/pytest_suite_gpu.log" | head -40 | tee -a "$OUT/summary.txt"
fi
cat "$OUT/summary.txt"
