#!/usr/bin/env bash
# Sets up and builds (scripts/setup.sh), then runs every test: the C++ tests
# through ctest and the Python suites through pytest, then the same under the
# sanitizers (see docs/contributing.md, "The checks"):
#   build/asan  ASan + UBSan: the library, every C++ test, and the Python
#               suite against an ASan build of the extension;
#   build/tsan  TSan: the library and the thread-related C++ tests
#               (scheduler, allocator, streams, threads, stress).
# `scripts/test.sh --quick` (or LOOM_TEST_QUICK=1) skips the sanitizer builds,
# for the inner development loop; the default and .ci/run run everything.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=${LOOM_TEST_QUICK:-0}
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
  esac
done

# Each stage's heading carries the seconds since the start, so a slow stage
# shows in CI's log (the whole command must stay under 45 min on 2 cores).
stage() { echo "== $* (at ${SECONDS} s)"; }

bash scripts/setup.sh
stage "C++ tests (ctest)"
ctest --test-dir build/release --output-on-failure -j2
stage "Python tests (pytest)"
# Run from python/tests so the installed package, not the source tree, is imported.
.venv/bin/python -m pytest -q -p no:cacheprovider python/tests benchmarks/tests

if [ "$quick" = 1 ]; then
  echo "== sanitizers skipped (--quick); done in ${SECONDS} s"
  exit 0
fi

if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
else
  launcher=()
fi
# -O1 keeps the sanitized builds and their runs fast enough for 2 cores.
sanitized_build() { # dir sanitizer extra-cmake-args...
  local dir=$1 kind=$2
  shift 2
  cmake -S . -B "$dir" -G Ninja "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DLOOM_SANITIZE="$kind" -DLOOM_BUILD_TESTS=ON \
    -DPython_EXECUTABLE="$PWD/.venv/bin/python" "$@" >/dev/null
  cmake --build "$dir" -j2
}

# Any report fails the run: UBSan aborts (-fno-sanitize-recover), ASan and
# TSan exit non-zero.
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

stage "ASan + UBSan: C++ tests (build/asan)"
sanitized_build build/asan address -DLOOM_BUILD_PYTHON=ON
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  ctest --test-dir build/asan --output-on-failure -j2

stage "ASan + UBSan: Python tests against build/asan's extension"
# The interpreter is not instrumented, so the ASan runtime is preloaded. Leak
# detection is off: CPython and NumPy keep their interned objects and arenas
# until exit by design, and report them as leaks; the C++ tests above check
# Loom's own leaks. Arrays leaking through Python are covered by test_leaks.py.
libasan=$(g++ -print-file-name=libasan.so)
libubsan=$(g++ -print-file-name=libubsan.so)
LD_PRELOAD="$libasan:$libubsan" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
  PYTHONPATH="$PWD/python:$PWD/build/asan/python" \
  .venv/bin/python -m pytest -q -p no:cacheprovider -x python/tests

stage "Fuzz: seeded libFuzzer runs of every file parser, ASan + UBSan (scripts/fuzz_all.sh)"
# npy, npz, safetensors, gguf, Loom's function format, MLX's .mlxfn: 20000
# inputs each (-seed=1), at most 60 s each.
bash scripts/fuzz_all.sh 20000 60

stage "TSan: scheduler, allocator, streams, threads, stress (build/tsan)"
sanitized_build build/tsan thread
ctest --test-dir build/tsan --output-on-failure -j2
echo "== all checks passed in ${SECONDS} s"
