#!/usr/bin/env bash
# Fuzzes the function-file parser (import_function) with libFuzzer under
# ASan+UBSan.
#   scripts/fuzz_export.sh [runs] [seconds]
# Needs clang with libFuzzer and build/release/libloom.so (scripts/setup.sh);
# LOOM_BUILD=build/dev uses another build folder (its in-tree Python module).
# The seed corpus is written by Loom itself (exported functions).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-1000000}
SECONDS_MAX=${2:-60}
BUILD=${LOOM_BUILD:-build/release}
OUT=build/fuzz
if [ "$BUILD" != build/release ]; then export PYTHONPATH="python:$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"; fi
mkdir -p "$OUT"
# The parser, the state codec and the describe walk are compiled into the
# harness (instrumented); factories and the rest come from libloom.so. See
# fuzz_io.sh for LOOM_SOFT_FLOAT16.
clang++ -std=c++20 -O1 -g -march=native -DLOOM_SOFT_FLOAT16 -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -I. tests/fuzz/export_fuzz.cpp loom/io/export.cpp \
  loom/io/export_describe.cpp loom/io/export_replay.cpp loom/primitives/state.cpp -L"$BUILD" -lloom \
  -Wl,-rpath,"$PWD/$BUILD" -o "$OUT/export_fuzz"
.venv/bin/python - "$OUT/corpus_export" <<'PY'
import os, sys
import loom.core as mx
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
w = mx.arange(12, dtype=mx.float32).reshape(3, 4)
def f1(x, y):
    a, b = mx.split(x @ w, 2, axis=1)
    return mx.sum(a, axis=0, keepdims=True) * y, mx.transpose(b).astype(mx.float16)
def f2(x):
    return mx.cumsum(mx.sort(x, axis=0), axis=1)[::2], mx.argmax(x, axis=1)
inner = mx.compile(lambda x: mx.exp(x) * 2 + 1)
mx.export_function(os.path.join(out, "f1"), f1, mx.ones((2, 3)), y=mx.array(2.0))
mx.export_function(os.path.join(out, "f2"), f2, mx.ones((4, 3)), shapeless=True)
mx.export_function(os.path.join(out, "f3"), lambda x: inner(x) - 1, mx.zeros((8,)))
with mx.exporter(os.path.join(out, "f4"), lambda x: x @ w.T) as e:
    e(mx.ones((1, 4)))
    e(mx.ones((2, 4)))
PY
"$OUT/export_fuzz" -runs="$RUNS" -max_total_time="$SECONDS_MAX" -rss_limit_mb=2048 \
  -max_len=8192 -seed=1 "$OUT/corpus_export" 2>&1 | grep -E "^#[0-9]+ +DONE|ERROR|SUMMARY|Done" || true
