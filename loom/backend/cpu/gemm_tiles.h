// How Loom's own GEMM kernels (gemm_f32.cpp, gemm_half.cpp) spread a product
// over the pool once op(B) is packed whole and shared by the threads.
#pragma once

#include <algorithm>
#include <cstdint>

#include "loom/backend/cpu/thread_pool.h"

namespace loom::cpu {

// Multiply-adds below which a product runs on the calling thread: waking the
// pool costs more than it saves (the threshold OpenBLAS uses for its own
// threads).
constexpr double kParallelProduct = 65536.0 * 4;

// Multiply-adds (20 MFLOP) below which a product runs on the calling thread
// when the pool's workers are asleep: they would join after a wake-up that
// costs about as long as their share (float32 160² to 256² after a 50 ms
// pause, loaded machine: 2 threads 0.28 / 0.41 / 0.65 ms, the caller alone
// 0.20-0.24 / 0.29-0.39 / 0.51-0.56 ms; session 9, docs/performance.md).
constexpr double kWakePoolProduct = 10.0 * 1024 * 1024;

// Whether a product is spread over the pool.
inline bool splits_over_pool(int64_t M, int64_t N, int64_t K) {
  if (num_threads() <= 1 || in_parallel_region()) return false;
  const double product = static_cast<double>(M) * N * K;
  return product >= kParallelProduct && (product >= kWakePoolProduct || pool_awake());
}

// Runs body(m0, m1, n0, n1) over blocks of C taken from the pool's counter:
// blocks of `mr`-row tiles, each packing only its own rows of A, or, for a
// product fewer than two tiles per thread tall, blocks of `nr`-column panels
// (each packing all of its small A). Several blocks per thread, so that a
// thread whose core another process takes hands its share over, and blocks
// of one tile when the tiles are few: 22 tiles (256 rows) split 11/11, where
// four panels split 12/10.
template <typename F>
void over_tile_blocks(int64_t M, int64_t N, int64_t mr, int64_t nr, F&& body) {
  const int64_t threads = num_threads();
  const int64_t tiles = (M + mr - 1) / mr;
  const int64_t panels = (N + nr - 1) / nr;
  const bool by_rows = tiles >= 2 * threads;
  const int64_t units = by_rows ? tiles : panels;
  const int64_t per_block = std::clamp<int64_t>(units / (8 * threads), 1, by_rows ? 8 : 16);
  const int64_t blocks = (units + per_block - 1) / per_block;
  parallel_chunks(static_cast<size_t>(blocks), [&](size_t i) {
    const int64_t u0 = static_cast<int64_t>(i) * per_block;
    const int64_t u1 = std::min(units, u0 + per_block);
    if (by_rows) {
      body(u0 * mr, std::min(M, u1 * mr), int64_t{0}, N);
    } else {
      body(int64_t{0}, M, u0 * nr, std::min(N, u1 * nr));
    }
  });
}

} // namespace loom::cpu
