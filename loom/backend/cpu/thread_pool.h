// The intra-op thread pool: large kernels split their index range across it
// (MLX runs each CPU op on one thread; Loom does not).
#pragma once

#include <cstddef>
#include <functional>

namespace loom::cpu {

// Number of threads a kernel may use (LOOM_NUM_THREADS, default: all cores).
int num_threads();

// Whether this thread is running a chunk of a parallel region; a nested
// parallel_for runs its whole range on the calling thread.
bool in_parallel_region();

// Whether the pool's workers are awake (polling for work, for
// LOOM_POOL_SPIN_US after their last region, or running one): false when
// they sleep, or before the pool exists. A region started while they sleep
// pays a futex wake-up per worker, and the workers join late (tens of
// microseconds on a VM): kernels too small to gain from that run alone.
bool pool_awake();

// Calls body(begin, end) over [0, n) in chunks of at least `grain` items,
// on the pool and the calling thread; returns when every chunk has run.
void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& body);

// Runs job(c) for every c in [0, count) on the pool and the calling thread,
// each chunk taken by whichever thread is free next: more chunks than
// threads keep every core busy when one of them is late (a loaded machine).
void parallel_chunks(size_t count, const std::function<void(size_t)>& job);

} // namespace loom::cpu
