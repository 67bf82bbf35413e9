#!/usr/bin/env bash
# Seeded libFuzzer runs of every file parser under ASan+UBSan: npy, npz,
# safetensors, gguf (tests/fuzz/io_fuzz.cpp), Loom's function format and
# MLX's .mlxfn (tests/fuzz/export_fuzz.cpp; read_function reads both).
#   scripts/fuzz_all.sh [runs-per-parser] [seconds-per-parser] [parsers]
# Defaults: 20000 runs, 60 s cap per parser (scripts/test.sh's short run);
# `scripts/fuzz_all.sh 1000000 3600` is the long local run; `parsers` (e.g.
# "mlxfn export") runs only those, one after the other. -seed=1 and a
# run count make a run repeatable. Any crash, sanitizer report, leak, hang
# (-timeout) or allocation beyond -rss_limit_mb fails the script.
# Needs clang with libFuzzer and build/release/libloom.so (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-20000}
SECONDS_MAX=${2:-60}
ONLY=${3:-}
BUILD=build/release
OUT=build/fuzz
# clang and its libFuzzer runtime, installed the way scripts/setup.sh installs
# its packages when they are missing.
missing=()
for p in clang libclang-rt-14-dev; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "== installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
mkdir -p "$OUT"
# clang 14 accepts _Float16 (loom/types/half.h) on x86 only with -mavx512fp16, whose
# code does not run on AVX2 machines: the harnesses use half.h's integer conversions;
FLAGS=(-std=c++20 -O1 -g -march=native -DLOOM_SOFT_FLOAT16 -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -I.)
LINK=(-L"$BUILD" -lloom -Wl,-rpath,"$PWD/$BUILD")
echo "== building the harnesses ($OUT)"
clang++ "${FLAGS[@]}" tests/fuzz/io_fuzz.cpp loom/io/file.cpp loom/io/io.cpp loom/io/npy.cpp \
  loom/io/npz.cpp loom/io/safetensors.cpp loom/io/gguf.cpp "${LINK[@]}" -lz -o "$OUT/io_fuzz" &
clang++ "${FLAGS[@]}" tests/fuzz/export_fuzz.cpp loom/io/export.cpp loom/io/export_describe.cpp loom/io/export_replay.cpp \
  loom/io/mlxfn.cpp loom/io/mlxfn_ops.cpp loom/primitives/state.cpp "${LINK[@]}" -o "$OUT/export_fuzz" &
wait %1 && wait %2

# Seed corpora: files written by Loom itself, and MLX's (the committed
# .mlxfn fixtures of python/tests/test_mlxfn.py).
.venv/bin/python - "$OUT" <<'PY'
import io, os, shutil, sys, glob
import loom.core as mx
out = sys.argv[1]
def corpus(name):
    d = os.path.join(out, "corpus_" + name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d
a = {"w": mx.arange(12, dtype=mx.float32).reshape(3, 4), "b.c": mx.array([1, 2], dtype=mx.int16)}
for prefix, name, save in [
    (0, "npy", lambda f: mx.save(f, a["w"])),
    (1, "npz", lambda f: mx.savez_compressed(f, **a)),
    (2, "safetensors", lambda f: mx.save_safetensors(f, a, {"k": "v"})),
    (3, "gguf", lambda f: mx.save_gguf(f, a, {"k": "v", "n": mx.array([1, 2])})),
]:
    buf = io.BytesIO()
    save(buf)
    open(os.path.join(corpus(name), "seed"), "wb").write(bytes([prefix]) + buf.getvalue())
d = corpus("export")
w = mx.arange(12, dtype=mx.float32).reshape(3, 4)
def f1(x, y):
    p, q = mx.split(x @ w, 2, axis=1)
    return mx.sum(p, axis=0, keepdims=True) * y, mx.transpose(q).astype(mx.float16)
mx.export_function(os.path.join(d, "f1"), f1, mx.ones((2, 3)), y=mx.array(2.0))
mx.export_function(os.path.join(d, "f2"), lambda x: mx.cumsum(mx.sort(x, axis=0), axis=1)[::2],
                   mx.ones((4, 3)), shapeless=True)
with mx.exporter(os.path.join(d, "f3"), lambda x: x @ w.T) as e:
    e(mx.ones((1, 4)))
    e(mx.ones((2, 4)))
# Shapeless statistics (NumberOfElements), broadcasts, and backward nodes of
# the fast primitives (a gradient's graph).
mx.export_function(os.path.join(d, "f4"),
                   lambda x: (x - mx.mean(x, axis=1, keepdims=True)) / mx.std(x) + w[0],
                   mx.ones((3, 4)), shapeless=True)
def loss(x, g):
    q = mx.fast.rms_norm(x, g, 1e-5)[None, None]
    a = mx.fast.scaled_dot_product_attention(q, q, q, scale=0.5, mask="causal")
    return mx.sum(mx.fast.layer_norm(a, g, None, 1e-5) * mx.fast.rope(a, 4, traditional=False, base=1e4, scale=1.0, offset=0))
mx.export_function(os.path.join(d, "f5"), mx.grad(loss, argnums=(0, 1)), mx.ones((3, 4)), mx.ones((4,)))
d = corpus("mlxfn")
for p in sorted(glob.glob("python/tests/fixtures/mlxfn/*.mlxfn")):
    if os.path.getsize(p) <= 16384:
        shutil.copy(p, d)
# Inputs that once failed (tests/fuzz/regressions/<parser>-*) stay in the
# corpora, with small seeds for reader cases whose fixtures exceed -max_len
# (tests/fuzz/seeds/<parser>-*, written by tests/fuzz/seeds/make_seeds.py).
for p in glob.glob("tests/fuzz/regressions/*") + glob.glob("tests/fuzz/seeds/*-*"):
    name = os.path.basename(p).split("-")[0]
    if os.path.isdir(os.path.join(out, "corpus_" + name)):
        shutil.copy(p, os.path.join(out, "corpus_" + name))
PY

run() { # harness corpus max_len [pinned format]
  local log="$OUT/$2.log"
  if [ -n "$ONLY" ] && [[ " $ONLY " != *" $2 "* ]]; then return 0; fi
  echo "== fuzz $2"
  if ! LOOM_FUZZ_FORMAT=$4 "$OUT/$1" -runs="$RUNS" -max_total_time="$SECONDS_MAX" -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix="$OUT/$2-" -max_len="$3" -seed=1 -print_final_stats=1 "$OUT/corpus_$2" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "== fuzz $2 FAILED (log: $log)"
    exit 1
  fi
  grep -E "^#[0-9]+ +DONE|stat::number_of_executed_units" "$log" | tail -n 2
}
for fmt in npy npz safetensors gguf; do run io_fuzz "$fmt" 4096 "$fmt"; done
run export_fuzz export 8192 ""
run export_fuzz mlxfn 16384 ""
echo "== fuzz: all parsers clean"
