#include "loom/backend/cpu/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace loom::cpu {

namespace {

// Set on a thread while it runs chunks of a parallel region: a kernel called
// from inside one (a product per attention head) runs on its thread instead
// of waiting for the pool it is part of.
thread_local bool t_in_region = false;

// How long an idle worker polls for the next region before it sleeps:
// LOOM_POOL_SPIN_US, default 5000 (0: sleep at once). A training step has
// serial stretches of a few milliseconds (graph building, Python) between its
// parallel regions; a worker asleep through one of them is woken late on a VM
// (a halted vCPU): an MLP step ran 15 -> 21 ms median. Intel's OpenMP runtime
// keeps its workers spinning for 200 ms by default.
std::chrono::microseconds spin_before_sleep() {
  static const std::chrono::microseconds us{[] {
    const char* v = std::getenv("LOOM_POOL_SPIN_US");
    return v ? std::max(0L, std::atol(v)) : 5000L;
  }()};
  return us;
}

struct RegionMark {
  bool saved = t_in_region;
  RegionMark() { t_in_region = true; }
  ~RegionMark() { t_in_region = saved; }
  RegionMark(const RegionMark&) = delete;
  RegionMark& operator=(const RegionMark&) = delete;
};

class ThreadPool {
 public:
  explicit ThreadPool(int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { loop(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int size() const { return static_cast<int>(threads_.size()); }
  // Whether a worker is polling for the next region or running one (not
  // asleep on the condition variable): a region started now is joined at once.
  bool awake() const {
    return polling_.load(std::memory_order_relaxed) + active_.load(std::memory_order_relaxed) > 0;
  }

  // Runs chunks [0, chunks) of `job` on the pool and the caller.
  void run(size_t chunks, const std::function<void(size_t)>& job) {
    std::unique_lock<std::mutex> outer(run_mutex_); // one parallel region at a time
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      chunks_ = chunks;
      next_.store(0);
      remaining_ = chunks;
      error_ = nullptr;
      ++generation_;
      published_.store(generation_, std::memory_order_release);
    }
    cv_.notify_all();
    {
      RegionMark mark;
      work();
    }
    // The caller usually runs out of chunks while a worker finishes its last
    // one: asleep on done_cv_ it would need a futex wake-up after that chunk
    // (tens of microseconds on a VM, once per kernel), so it polls first, for
    // as long as an idle worker polls for the next region.
    const auto until = std::chrono::steady_clock::now() + spin_before_sleep();
    while ((remaining_.load(std::memory_order_acquire) != 0 ||
            active_.load(std::memory_order_acquire) != 0) &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::yield();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    // Every worker that joined this region has left work(): none can read
    // the next region's counters with this region's job (a stale chunk
    // index with a dangling job otherwise).
    done_cv_.wait(lock, [&] { return remaining_ == 0 && active_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void work() {
    for (;;) {
      size_t c = next_.fetch_add(1);
      if (c >= chunks_) return;
      try {
        (*job_)(c);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (--remaining_ == 0) done_cv_.notify_all();
    }
  }
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      // Kernels come back to back (one node after another): a worker that
      // polls for a short while joins the next region at once, where one
      // asleep on the condition variable needs a futex wake-up (tens of
      // microseconds on a VM: as long as a small GEMM's panel). It yields
      // while it polls, so it never holds a core another thread could use.
      const auto until = std::chrono::steady_clock::now() + spin_before_sleep();
      polling_.fetch_add(1, std::memory_order_relaxed);
      while (published_.load(std::memory_order_acquire) == seen &&
             !stop_.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < until) {
        std::this_thread::yield();
      }
      polling_.fetch_sub(1, std::memory_order_relaxed);
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ != nullptr); });
        if (stop_) return;
        seen = generation_;
        ++active_;
      }
      {
        RegionMark mark;
        work();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (--active_ == 0) done_cv_.notify_all();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::mutex run_mutex_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  const std::function<void(size_t)>* job_ = nullptr;
  size_t chunks_ = 0;
  std::atomic<size_t> next_{0};
  // Written under mutex_; atomic so that run() can poll them without it.
  std::atomic<size_t> remaining_{0};
  std::atomic<int> active_{0}; // workers inside work() for the current region
  uint64_t generation_ = 0;
  std::exception_ptr error_;
  std::atomic<bool> stop_{false};      // also polled without the lock
  std::atomic<uint64_t> published_{0}; // generation_, readable without the lock
  std::atomic<int> polling_{0};        // workers in their polling loop
};

// After fork() the child has none of the pool's threads, and a region that
// was running in the parent left its counters and locks as they were: the
// child drops that pool (leaked) and builds a new one on first use. Only the
// creation lock is held across fork(), so a pool half-built by another
// thread is never inherited; a running region is not waited for (its jobs
// may need locks the other fork handlers hold). Registered when libloom loads.
std::atomic<ThreadPool*> g_pool{nullptr};
std::mutex g_pool_creation;

void lock_pool_before_fork() { g_pool_creation.lock(); }
void unlock_pool_in_parent() { g_pool_creation.unlock(); }
void reset_pool_in_child() {
  g_pool.store(nullptr);
  g_pool_creation.unlock();
}

[[maybe_unused]] const bool fork_handlers_registered = [] {
  pthread_atfork(&lock_pool_before_fork, &unlock_pool_in_parent, &reset_pool_in_child);
  return true;
}();

ThreadPool& pool() {
  ThreadPool* p = g_pool.load(std::memory_order_acquire);
  if (p) return *p;
  std::lock_guard creation(g_pool_creation);
  p = g_pool.load();
  if (!p) {
    p = new ThreadPool(num_threads() - 1); // the caller is the last thread
    g_pool.store(p, std::memory_order_release);
  }
  return *p;
}

} // namespace

int num_threads() {
  static int n = [] {
    if (const char* v = std::getenv("LOOM_NUM_THREADS")) {
      int k = std::atoi(v);
      if (k > 0) return k;
    }
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return n;
}

bool in_parallel_region() { return t_in_region; }

bool pool_awake() {
  const ThreadPool* p = g_pool.load(std::memory_order_acquire);
  return p != nullptr && p->awake();
}

void parallel_chunks(size_t count, const std::function<void(size_t)>& job) {
  if (count == 0) return;
  if (count == 1 || t_in_region || num_threads() == 1) {
    for (size_t c = 0; c < count; ++c) job(c);
    return;
  }
  pool().run(count, job);
}

void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& body) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  size_t max_chunks = static_cast<size_t>(num_threads());
  size_t chunks = std::min(max_chunks, (n + grain - 1) / grain);
  // Nested: the pool is busy with the region this thread is part of.
  if (chunks <= 1 || t_in_region) {
    body(0, n);
    return;
  }
  size_t step = (n + chunks - 1) / chunks;
  pool().run(chunks, [&](size_t c) {
    size_t b = c * step;
    size_t e = std::min(n, b + step);
    if (b < e) body(b, e);
  });
}

} // namespace loom::cpu
