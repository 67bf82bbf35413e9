// Process exit with GPU work in flight. exit() runs the static destructors of
// the CUDA runtime (linked statically), cuBLAS(Lt) and NVRTC while other
// threads may still be inside them: Python daemon threads evaluating, the
// stream workers running their queues, the completion threads. On an H200
// that crashed in 2 of 12 runs of a script whose daemon threads evaluate
// (cublasLt unloading its kernels under a running GEMM, NVRTC's state freed
// under a compile). The gate closes from an atexit handler registered after
// each of those libraries started (atexit runs in reverse order of
// registration, so it runs before their teardown); it waits for the threads
// inside to leave, and afterwards every entry is refused: kernels raise,
// frees leak (the process is ending), completion signals are sent at once.
#include "loom/backend/cuda/exit_gate.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace loom::cuda {

namespace {

std::atomic<int> g_inside{0};
std::atomic<int> g_loading{0};
std::atomic<bool> g_closed{false};
thread_local int t_depth = 0;

void close_gate() {
  if (g_closed.exchange(true)) return;
  // Threads already inside finish what they started (a launch, a compile, a
  // wait for a kernel); a thread stuck longer than this is left to exit().
  // A library being loaded is always waited for: its constructors running
  // under the teardown crashed (cuBLAS's first load took seconds with 16
  // processes starting at once, longer than this wait).
  const int self = t_depth > 0 ? 1 : 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (g_inside.load() > self &&
         (g_loading.load() > 0 || std::chrono::steady_clock::now() < deadline)) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// A forked child has none of the parent's threads: none of them is inside.
struct ForkReset {
  ForkReset() {
    pthread_atfork(nullptr, nullptr, [] { g_inside.store(t_depth > 0 ? 1 : 0); });
  }
} fork_reset;

} // namespace

bool enter_cuda() {
  if (t_depth > 0) {
    // Nested: the outer entry is counted. Refused once closed all the same:
    // the closing thread stops waiting after a while, and the runtime may be
    // gone by the time a long outer entry (a CPU fallback) calls again.
    if (g_closed.load()) return false;
    ++t_depth;
    return true;
  }
  g_inside.fetch_add(1);
  if (g_closed.load()) {
    g_inside.fetch_sub(1);
    return false;
  }
  t_depth = 1;
  return true;
}

void leave_cuda() {
  if (--t_depth == 0) g_inside.fetch_sub(1);
}

bool exiting() { return g_closed.load(std::memory_order_relaxed); }

LibraryLoad::LibraryLoad() { g_loading.fetch_add(1); }
LibraryLoad::~LibraryLoad() { g_loading.fetch_sub(1); }

void close_gate_now() { close_gate(); }

void close_before_teardown() {
  static std::mutex& m = *new std::mutex;
  std::lock_guard<std::mutex> lock(m);
  std::atexit(&close_gate);
}

void CudaScope::refuse(const char* what) {
  throw std::runtime_error(std::string("[cuda] ") + what +
                           ": the process is exiting, the GPU takes no more work.");
}

} // namespace loom::cuda
