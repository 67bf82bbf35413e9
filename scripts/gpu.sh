#!/usr/bin/env bash
# Builds Loom with its CUDA backend on a machine with an NVIDIA GPU and runs
# the GPU checks: the C++ tests, the GPU pytest file, the whole pytest suite
# with the GPU as the default device, and a few timings. Logs go under $OUT
# (default /tmp/loom-gpu). Needs no network: CMake, Ninja, nanobind,
# scikit-build-core, pytest, NumPy, OpenBLAS, LAPACKE, nlohmann-json and
# GoogleTest must be installed (the device machine's image has them).
#   usage: bash scripts/gpu.sh [quick]   (quick: skip the whole-suite run)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-gpu}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
SITE=${LOOM_GPU_SITE:-/tmp/loom-site}
export PYTHONUNBUFFERED=1 LOOM_CUDA_CACHE=${LOOM_CUDA_CACHE:-/tmp/loom-cuda-cache}
JOBS=$(nproc)

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvcc --version | tail -1;
  $PY --version; } 2>&1 | tee "$OUT/env.txt"

# LOOM_GPU_SKIP_CTEST=1 also skips building the C++ tests (a shorter call).
BUILD_TESTS=ON; [ -n "${LOOM_GPU_SKIP_CTEST:-}" ] && BUILD_TESTS=OFF
echo "== build (LOOM_CUDA=ON)"
start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=$JOBS $PY -m pip install -q --no-index --no-build-isolation --no-deps \
  --target "$SITE" --upgrade -Cbuild-dir=build/gpu -Ccmake.define.LOOM_BUILD_TESTS=$BUILD_TESTS \
  -Ccmake.define.LOOM_CUDA=ON -Ccmake.define.LOOM_NATIVE=OFF . >"$OUT/build.log" 2>&1
rc=$?
echo "build rc=$rc in $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
if [ $rc -ne 0 ]; then tail -60 "$OUT/build.log"; exit $rc; fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"

if [ -z "${LOOM_GPU_SKIP_CTEST:-}" ]; then
  echo "== C++ tests"
  (cd build/gpu && timeout 150 ctest -j"$JOBS" --output-on-failure) >"$OUT/ctest.log" 2>&1
  echo "ctest rc=$? $(grep -E 'tests passed|tests failed' "$OUT/ctest.log")" | tee -a "$OUT/summary.txt"
fi

# The whole-suite run below includes these files too (LOOM_GPU_SKIP_CUDA_TESTS=1
# leaves them to it).
if [ -z "${LOOM_GPU_SKIP_CUDA_TESTS:-}" ]; then
  echo "== GPU tests (python/tests/test_cuda*.py)"
  (cd python/tests && timeout 240 $PY -m pytest -q -rs -p no:cacheprovider test_cuda*.py) \
    >"$OUT/pytest_cuda.log" 2>&1
  echo "pytest cuda rc=$? $(tail -1 "$OUT/pytest_cuda.log")" | tee -a "$OUT/summary.txt"
  grep -E "FAILED|Error" "$OUT/pytest_cuda.log" | head -30
fi

echo "== timings"
# LOOM_GPU_BENCH_ONLY=kernels|overheads runs one section alone (a shorter call).
if [ -z "${LOOM_GPU_BENCH_ONLY:-}" ]; then
  timeout 120 $PY scripts/gpu_bench.py 2>&1 | tee "$OUT/bench.txt"
fi
for section in ${LOOM_GPU_BENCH_ONLY:-kernels}; do
  echo "$section:" | tee -a "$OUT/bench.txt"
  timeout 120 $PY scripts/gpu_bench.py "$section" 2>&1 | tee -a "$OUT/bench.txt"
done
# The same overheads with the former mechanisms switched back on, to compare
# (LOOM_GPU_SKIP_VARIANTS=1 skips them).
if [ -z "${LOOM_GPU_SKIP_VARIANTS:-}" ]; then
  for v in LOOM_CUDA_HOST_FUNC_SIGNALS=1 LOOM_CUDA_STAGING=0 LOOM_CUDA_FREE_LEGACY=1; do
    echo "variant $v:" | tee -a "$OUT/bench.txt"
    env $v timeout 60 $PY scripts/gpu_bench.py overheads 2>&1 | tee -a "$OUT/bench.txt"
  done
fi

# Side by side with the image's PyTorch and JAX (the same interpreter runs them).
if [ -n "${LOOM_GPU_PEERS:-}" ]; then
  echo "== benchmarks --device gpu (PyTorch, JAX)"
  PEERS_PYTHON=$PY timeout ${PEERS_TIMEOUT:-240} $PY -m benchmarks --device gpu --quick \
    ${LOOM_GPU_PEERS_FILTER:---filter gelu --filter matmul --filter copy} 2>&1 | tee "$OUT/benchmarks_gpu.txt"
fi

if [ "${1:-}" != "quick" ]; then
  echo "== whole suite, default device gpu"
  (cd python/tests && LOOM_TEST_DEVICE=gpu LOOM_CUDA_FALLBACK_WARN=0 timeout ${SUITE_TIMEOUT:-300} \
     $PY -m pytest -q --timeout=60 -p no:cacheprovider -n ${SUITE_WORKERS:-12} . ) >"$OUT/pytest_suite_gpu.log" 2>&1
  echo "pytest suite(gpu) $(tail -1 "$OUT/pytest_suite_gpu.log")" | tee -a "$OUT/summary.txt"
  grep -E "^FAILED|^ERROR" "$OUT/pytest_suite_gpu.log" > "$OUT/suite_failures.txt"
  # Failures of the device image, not of Loom: test requirements missing
  # there (no network to install them). Listed apart so real ones stand out.
  : > "$OUT/suite_env_failures.txt"
  if ! $PY -c "import gguf" 2>/dev/null; then
    grep -E "gguf" "$OUT/suite_failures.txt" | sed 's/^/environment: gguf package not in the device image: /' \
      >> "$OUT/suite_env_failures.txt"
    grep -vE "gguf" "$OUT/suite_failures.txt" > "$OUT/suite_failures.tmp"; mv "$OUT/suite_failures.tmp" "$OUT/suite_failures.txt"
  fi
  echo "suite: $(wc -l < "$OUT/suite_failures.txt") real failures, $(wc -l < "$OUT/suite_env_failures.txt") of the environment" \
    | tee -a "$OUT/summary.txt"
  cat "$OUT/suite_env_failures.txt" "$OUT/suite_failures.txt" | tee -a "$OUT/summary.txt"
  echo "failures per file:"; sed -E 's/^(FAILED|ERROR) ([a-z_0-9]+\.py).*/\2/' "$OUT/suite_failures.txt" \
    | sort | uniq -c | sort -rn | head -25
fi
cat "$OUT/summary.txt"
