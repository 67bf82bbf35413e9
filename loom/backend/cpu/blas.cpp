#include "loom/backend/cpu/blas.h"

#include <dlfcn.h>
#include <pthread.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>

namespace loom::cpu::blas {

namespace {

#if defined(__x86_64__) || defined(__i386__)
bool has_avx512_bf16() {
  unsigned eax, ebx, ecx, edx;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (eax >> 5) & 1u;
}
#endif

template <typename F>
F symbol(void* handle, const char* name) {
  void* p = dlsym(handle, name);
  if (p == nullptr) {
    throw std::runtime_error(std::string("[blas] OpenBLAS lacks the symbol ") + name + ".");
  }
  return reinterpret_cast<F>(p);
}

// OpenBLAS carries LAPACK; the routines of one precision share a prefix.
template <typename T>
void load_lapack(void* handle, const std::string& p, Lapack<T>& l) {
  auto get = [&](auto& fn, const char* routine) {
    fn = symbol<std::decay_t<decltype(fn)>>(handle, (p + routine + "_").c_str());
  };
  get(l.getrf, "getrf");
  get(l.getri, "getri");
  get(l.gesv, "gesv");
  get(l.trtri, "trtri");
  get(l.potrf, "potrf");
  get(l.potri, "potri");
  get(l.geqrf, "geqrf");
  get(l.orgqr, "orgqr");
  get(l.gesdd, "gesdd");
  get(l.syevd, "syevd");
  get(l.geev, "geev");
}

Library load() {
  // Choose the core only where OpenBLAS would read our choice: before the
  // library is loaded, and only if the user has not chosen one.
  bool set_core = false;
  std::string core = preferred_core();
  if (!core.empty() && std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    setenv("OPENBLAS_CORETYPE", core.c_str(), 0);
    set_core = true;
  }
  // No OpenBLAS threads at all, whatever the environment asks: its pool's
  // fork handler can hang the parent when fork() follows a product, and the
  // pool is behind interpreter-exit hangs with daemon threads in matmuls
  // (issue 7). A library already loaded by someone else keeps its threads
  // but is set to one below.
  const char* user_threads = std::getenv("OPENBLAS_NUM_THREADS");
  const std::string saved_threads = user_threads != nullptr ? user_threads : "";
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  void* handle = nullptr;
  for (const char* name : {"libopenblas.so.0", "libopenblas.so"}) {
    handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
  }
  // The variable served OpenBLAS's initialisation; child processes should
  // not inherit a choice they did not make.
  if (set_core) unsetenv("OPENBLAS_CORETYPE");
  if (user_threads != nullptr) {
    setenv("OPENBLAS_NUM_THREADS", saved_threads.c_str(), 1);
  } else {
    unsetenv("OPENBLAS_NUM_THREADS");
  }
  if (handle == nullptr) {
    throw std::runtime_error(std::string("[blas] Cannot load OpenBLAS (libopenblas.so.0): ") +
                             dlerror());
  }
  Library lib;
  lib.sgemm = symbol<decltype(lib.sgemm)>(handle, "cblas_sgemm");
  lib.dgemm = symbol<decltype(lib.dgemm)>(handle, "cblas_dgemm");
  lib.cgemm = symbol<decltype(lib.cgemm)>(handle, "cblas_cgemm");
  lib.sgemv = symbol<decltype(lib.sgemv)>(handle, "cblas_sgemv");
  lib.dgemv = symbol<decltype(lib.dgemv)>(handle, "cblas_dgemv");
  lib.cgemv = symbol<decltype(lib.cgemv)>(handle, "cblas_cgemv");
  lib.set_num_threads = symbol<decltype(lib.set_num_threads)>(handle, "openblas_set_num_threads");
  lib.corename = symbol<decltype(lib.corename)>(handle, "openblas_get_corename");
  lib.config = symbol<decltype(lib.config)>(handle, "openblas_get_config");
  lib.sbgemm = reinterpret_cast<sbgemm_t>(dlsym(handle, "cblas_sbgemm"));
  load_lapack(handle, "s", lib.s);
  load_lapack(handle, "d", lib.d);
  lib.cgesdd = symbol<cgesdd_t>(handle, "cgesdd_");
  lib.cheevd = symbol<cheevd_t>(handle, "cheevd_");
  lib.cgeev = symbol<cgeev_t>(handle, "cgeev_");
  lib.set_num_threads(1);
  return lib;
}

} // namespace

std::string preferred_core() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // OpenBLAS's AVX-512 kernels (SkylakeX; Cooperlake adds bf16) and AVX2
  // kernels (Haswell) by feature, which holds on Intel and AMD alike; the
  // checks include the OS enabling the registers.
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  if (avx512) return has_avx512_bf16() ? "Cooperlake" : "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return "";
}

const Library& library() {
  static const Library lib = load();
  return lib;
}

namespace {

std::atomic<int> g_in_flight{0};
std::atomic<bool> g_closing{false};

// Registered with atexit when libloom loads, after OpenBLAS was loaded, so it
// runs before the dynamic linker's destructors (OpenBLAS's among them).
void close_at_exit() {
  g_closing.store(true);
  // A call in flight is one panel of a product: bounded, but do not hang the
  // exit on a thread that cannot run.
  for (int i = 0; i < 10000 && g_in_flight.load() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Held across fork(), from before the calls in flight are waited for: no
// call starts in between. The waiting holds no lock a call needs (a bracket
// takes none), so it cannot deadlock with the other fork handlers.
std::mutex g_fork_gate;

void drain_before_fork() {
  g_fork_gate.lock();
  while (g_in_flight.load() > 0) std::this_thread::yield();
}
void reopen_after_fork() { g_fork_gate.unlock(); }

[[maybe_unused]] const bool fork_gate_registered = [] {
  pthread_atfork(&drain_before_fork, &reopen_after_fork, &reopen_after_fork);
  return true;
}();

} // namespace

InFlight::InFlight() {
  {
    const std::lock_guard<std::mutex> gate(g_fork_gate);
    g_in_flight.fetch_add(1);
  }
  if (g_closing.load()) {
    g_in_flight.fetch_sub(1);
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
}

InFlight::~InFlight() { g_in_flight.fetch_sub(1); }

namespace {
// Loaded with libloom, not on the first product: a fork() while another
// thread is inside this first load would leave the child waiting forever on
// the half-done static initialisation.
const bool loaded_at_start = (library(), std::atexit(&close_at_exit), true);
} // namespace

std::string core_name() { return library().corename(); }
std::string config() { return library().config(); }

} // namespace loom::cpu::blas
