#!/usr/bin/env bash
# Fuzzes the loom/io parsers with libFuzzer under ASan+UBSan.
#   scripts/fuzz_io.sh [runs-per-format] [seconds-per-format]
# Needs clang with libFuzzer and build/release/libloom.so (scripts/setup.sh).
# The seed corpus is written by Loom itself (one valid file per format).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-1000000}
SECONDS_MAX=${2:-60}
OUT=build/fuzz
mkdir -p "$OUT"
# clang 14 accepts _Float16 (loom/types/half.h) on x86 only with -mavx512fp16, whose
# code does not run on AVX2 machines: the harnesses use half.h's integer conversions.
clang++ -std=c++20 -O1 -g -march=native -DLOOM_SOFT_FLOAT16 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I. tests/fuzz/io_fuzz.cpp loom/io/*.cpp -Lbuild/release -lloom -lz \
  -Wl,-rpath,"$PWD/build/release" -o "$OUT/io_fuzz"
.venv/bin/python - "$OUT" <<'PY'
import os, sys, io
import loom.core as mx
out = sys.argv[1]
a = {"w": mx.arange(12, dtype=mx.float32).reshape(3, 4), "b.c": mx.array([1, 2], dtype=mx.int16)}
def write(name, prefix, save):
    d = os.path.join(out, f"corpus_{name}")
    os.makedirs(d, exist_ok=True)
    buf = io.BytesIO()
    save(buf)
    open(os.path.join(d, "seed"), "wb").write(bytes([prefix]) + buf.getvalue())
write("npy", 0, lambda f: mx.save(f, a["w"]))
write("npz", 1, lambda f: mx.savez_compressed(f, **a))
write("safetensors", 2, lambda f: mx.save_safetensors(f, a, {"k": "v"}))
write("gguf", 3, lambda f: mx.save_gguf(f, a, {"k": "v", "n": mx.array([1, 2])}))
PY
for fmt in npy npz safetensors gguf; do
  echo "== $fmt"
  "$OUT/io_fuzz" -runs="$RUNS" -max_total_time="$SECONDS_MAX" -rss_limit_mb=2048 \
    -max_len=4096 -seed=1 "$OUT/corpus_$fmt" 2>&1 | grep -E "^#[0-9]+ +DONE|ERROR|SUMMARY|Done" || true
done
