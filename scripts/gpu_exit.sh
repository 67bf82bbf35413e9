#!/usr/bin/env bash
# Hunts crashes at process exit after GPU use: builds Loom with CUDA (as
# gpu.sh), then runs each exit script N times with a preloaded SIGSEGV handler
# that prints the native backtrace of the crashing thread (library + offset,
# resolved with addr2line against the unstripped build), and once more under
# cuda-gdb for every thread's stack. Output: $OUT/exit.txt.
#   usage: bash scripts/gpu_exit.sh [runs]     (LOOM_GPU_NO_BUILD=1: reuse the build)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/loom-gpu}; mkdir -p "$OUT"
PY=${PYTHON:-python3}; SITE=${LOOM_GPU_SITE:-/tmp/loom-site}
RUNS=${1:-20}
export PYTHONUNBUFFERED=1 LOOM_CUDA_CACHE=${LOOM_CUDA_CACHE:-/tmp/loom-cuda-cache}
LOG="$OUT/exit.txt"
if [ -z "${LOOM_GPU_NO_BUILD:-}" ]; then
  start=$(date +%s)
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) $PY -m pip install -q --no-index --no-build-isolation --no-deps \
    --target "$SITE" --upgrade -Cbuild-dir=build/gpu -Ccmake.define.LOOM_BUILD_TESTS=OFF \
    -Ccmake.define.LOOM_CUDA=ON -Ccmake.define.LOOM_NATIVE=OFF . >"$OUT/build.log" 2>&1 \
    || { tail -60 "$OUT/build.log"; exit 1; }
  echo "build $(( $(date +%s) - start )) s" | tee -a "$LOG"
fi
export PYTHONPATH="$SITE:$PWD/python/tests"

W=/tmp/loom-exit; mkdir -p $W
cat >$W/segv.c <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
static void handler(int sig, siginfo_t* si, void* ctx) {
  (void)ctx;
  char buf[512];
  int n = snprintf(buf, sizeof buf, "\n=== signal %d addr %p tid %ld pid %ld\n", sig, si->si_addr,
                   (long)syscall(SYS_gettid), (long)getpid());
  write(2, buf, n);
  void* frames[64];
  int k = backtrace(frames, 64);
  for (int i = 0; i < k; ++i) {
    Dl_info info;
    if (dladdr(frames[i], &info) && info.dli_fname) {
      n = snprintf(buf, sizeof buf, "#%d %s +0x%lx %s\n", i, info.dli_fname,
                   (unsigned long)((char*)frames[i] - (char*)info.dli_fbase),
                   info.dli_sname ? info.dli_sname : "");
    } else {
      n = snprintf(buf, sizeof buf, "#%d %p\n", i, frames[i]);
    }
    write(2, buf, n);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}
__attribute__((constructor)) static void init(void) {
  void* f[2];
  backtrace(f, 2); /* loads the unwinder now, not inside the handler */
  struct sigaction sa = {0};
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, 0);
  sigaction(SIGBUS, &sa, 0);
  sigaction(SIGABRT, &sa, 0);
  sigaction(SIGFPE, &sa, 0);
}
C
gcc -O1 -g -shared -fPIC -o $W/segv.so $W/segv.c -ldl || echo "no segv handler"

cat >$W/daemon.py <<'PY'
import threading, time
from _backend import mx
started = threading.Barrier(4)
def work(seed):
    a = mx.random.normal((384, 384), key=mx.random.key(seed), stream=mx.gpu)
    started.wait()
    while True:
        with mx.stream(mx.gpu):
            mx.eval(a @ a, mx.exp(a).sum(), mx.take(a, mx.array([1, 2]), axis=0))
for i in range(3):
    threading.Thread(target=work, args=(i,), daemon=True).start()
started.wait()
time.sleep(0.3)
print("bye")
PY
cat >$W/oom.py <<'PY'
from _backend import mx
MiB = 1 << 20
small = mx.arange(10).astype(mx.float32)
mx.eval(small)
previous = mx.set_memory_limit(MiB)
big = mx.zeros((4 * MiB,)) + small[0]
try:
    mx.eval(big)
except RuntimeError as e:
    print("MESSAGE:", str(e)[:80])
mx.set_memory_limit(previous)
print("SMALL:", small.tolist())
again = mx.zeros((4 * MiB,)) + small[1]
mx.eval(again)
print("AGAIN:", again[0].item(), again.shape[0])
PY
# The regression test's script (test_cuda.py): reads back in the loop too.
cat >$W/daemon2.py <<'PY'
import threading, time
from _backend import mx
started = threading.Barrier(4)
def work(seed):
    a = mx.random.normal((384, 384), key=mx.random.key(seed), stream=mx.gpu)
    started.wait()
    n = 0
    while True:
        n += 1
        with mx.stream(mx.gpu):
            b = mx.take(a, mx.array([1, 2]), axis=0) * (n % 7)
            mx.eval(a @ a, mx.exp(a).sum(), b)
            b.tolist()
for i in range(3):
    threading.Thread(target=work, args=(i,), daemon=True).start()
started.wait()
time.sleep(0.3)
print("bye")
PY
cat >$W/plain.py <<'PY'
from _backend import mx
a = mx.random.normal((256, 256))
print((a @ a).sum().item() != 0)
PY

LIBS=$(find build/gpu -name 'libloom*.so*' -o -name 'core*.so' | head -4)
echo "unstripped: $LIBS" >>"$LOG"
for s in ${LOOM_EXIT_SCRIPTS:-oom daemon plain}; do
  bad=0
  for i in $(seq "$RUNS"); do
    LD_PRELOAD=$W/segv.so timeout 60 $PY $W/$s.py >$W/out 2>$W/err
    rc=$?
    if [ $rc -ne 0 ]; then
      bad=$((bad + 1))
      if [ $bad -le 2 ]; then
        { echo "--- $s run $i rc=$rc"; tail -5 $W/out; tail -80 $W/err; } >>"$LOG"
        # Resolve frames in Loom's own libraries.
        grep -E '^#[0-9]+ .*(libloom|_core)' $W/err | while read -r idx lib off sym; do
          off=${off#+}
          base=$(basename "$lib")
          f=$(echo "$LIBS" | tr ' ' '\n' | grep -F "$base" | head -1)
          [ -n "$f" ] && echo "$idx $base $off -> $(addr2line -f -C -i -e "$f" "$off" | paste -sd' ')" >>"$LOG"
        done
      fi
    fi
  done
  echo "$s: $bad of $RUNS runs failed" | tee -a "$LOG"
done

# Many interpreters at once (LOOM_EXIT_PARALLEL=N, rounds of N), as the test runs them.
resolve() {
  grep -E '^#[0-9]+ .*(libloom|_core|core\.cpython)' "$1" | while read -r idx lib off sym; do
    off=${off#+}
    base=$(basename "$lib")
    f=$(echo "$LIBS" | tr ' ' '\n' | grep -F "${base%%.cpython*}" | head -1)
    [ -n "$f" ] && echo "$idx $base $off -> $(addr2line -f -C -i -e "$f" "$off" | paste -sd' ')"
  done
}
if [ -n "${LOOM_EXIT_PARALLEL:-}" ]; then
  for s in ${LOOM_EXIT_PARALLEL_SCRIPTS:-daemon2}; do
    bad=0; shown=0
    for round in $(seq ${LOOM_EXIT_ROUNDS:-2}); do
      pids=()
      for i in $(seq "$LOOM_EXIT_PARALLEL"); do
        LD_PRELOAD=$W/segv.so timeout 90 $PY -X faulthandler $W/$s.py >$W/out.$i 2>$W/err.$i &
        pids+=($!)
      done
      for i in $(seq "$LOOM_EXIT_PARALLEL"); do
        wait ${pids[$((i - 1))]}; rc=$?
        if [ $rc -ne 0 ]; then
          bad=$((bad + 1))
          if [ $shown -lt 3 ]; then
            shown=$((shown + 1))
            { echo "--- $s parallel round $round run $i rc=$rc"; head -c 4000 $W/err.$i; resolve $W/err.$i; } >>"$LOG"
          fi
        fi
      done
    done
    echo "$s: $bad of $(( ${LOOM_EXIT_ROUNDS:-2} * LOOM_EXIT_PARALLEL )) parallel runs failed" | tee -a "$LOG"
  done
fi

# Variants that switch one suspect off (each "ENV=VALUE:script").
for v in ${LOOM_EXIT_VARIANTS:-}; do
  bad=0
  for i in $(seq "$RUNS"); do
    env "${v%%:*}" timeout 60 $PY $W/${v##*:}.py >/dev/null 2>$W/err || bad=$((bad + 1))
  done
  echo "variant $v: $bad of $RUNS runs failed" | tee -a "$LOG"
done

if [ -n "${LOOM_EXIT_GDB:-1}" ] && command -v cuda-gdb >/dev/null; then
  for s in ${LOOM_EXIT_GDB_SCRIPTS:-oom daemon}; do
    for i in $(seq ${LOOM_EXIT_GDB_TRIES:-4}); do
      timeout 60 cuda-gdb -q -batch -ex 'set pagination off' -ex 'handle SIGUSR1 SIGUSR2 SIG32 SIG33 SIG34 nostop noprint' \
        -ex run -ex 'info threads' -ex 'thread apply all bt 25' --args $PY $W/$s.py >$W/gdb 2>&1
      if grep -q "SIGSEGV\|SIGABRT" $W/gdb; then
        { echo "--- cuda-gdb $s try $i"; grep -v '^\[New Thread\|^\[Thread .* exited' $W/gdb | head -300; } >>"$LOG"
        break
      fi
    done
    echo "cuda-gdb $s: $i tries" >>"$LOG"
  done
fi
tail -c 6000 "$LOG"
