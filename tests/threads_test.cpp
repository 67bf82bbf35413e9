// Several threads evaluating one lazy graph: every node runs exactly once and
// every reader sees its final data (issue 7, defect 1).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "loom/ops.h"

using namespace loom;

namespace {

// Runs `body(t)` on `n` threads started together; rethrows the first error.
template <typename F>
void run_threads(int n, F body) {
  std::atomic<int> ready{0};
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < n) std::this_thread::yield();
      try {
        body(t);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// sum(arange(1000) + 20) = 499500 + 20000. A node run twice adds 1000 more
// (the kernels donate their input buffer, so a second run adds in place).
array chain_sum() {
  array x = arange(0.0, 1000.0, 1.0, float32);
  for (int i = 0; i < 20; ++i) x = add(x, array(1.0f));
  return sum(x);
}

} // namespace

TEST(Threads, ReadersOfOneLazyArraySeeOneEvaluation) {
  for (int round = 0; round < 100; ++round) {
    array s = chain_sum();
    std::vector<float> seen(4);
    run_threads(4, [&](int t) { seen[t] = s.item<float>(); });
    for (float v : seen) ASSERT_EQ(v, 519500.0f) << "round " << round;
  }
}

TEST(Threads, AsyncEvalRacingItem) {
  for (int round = 0; round < 100; ++round) {
    array s = chain_sum();
    std::vector<float> seen(3);
    run_threads(3, [&](int t) {
      if (t == 0) {
        async_eval({s});
      } else {
        seen[t] = s.item<float>();
      }
    });
    EXPECT_EQ(s.item<float>(), 519500.0f);
    EXPECT_EQ(seen[1], 519500.0f);
    EXPECT_EQ(seen[2], 519500.0f);
  }
}

TEST(Threads, LazyParameterSharedByEightWorkers) {
  // A server's weights: built lazily by one thread, first touched by many.
  for (int round = 0; round < 10; ++round) {
    array w =
        multiply(random::normal({64, 64}, float32, array(0.0f), array(1.0f), random::key(round)),
                 array(0.1f));
    array b = tanh(random::uniform(array(-1.0f), array(1.0f), {64}, float32, random::key(7)));
    std::vector<array> inputs, expected;
    for (int t = 0; t < 8; ++t) inputs.push_back(full({64}, array(float(t))));
    // The reference, computed on copies of the parameter evaluated alone.
    array w_ref =
        multiply(random::normal({64, 64}, float32, array(0.0f), array(1.0f), random::key(round)),
                 array(0.1f));
    array b_ref = tanh(random::uniform(array(-1.0f), array(1.0f), {64}, float32, random::key(7)));
    for (int t = 0; t < 8; ++t) expected.push_back(add(matmul(w_ref, inputs[t]), b_ref));
    eval(expected);
    std::vector<array> got(8, array(0.0f));
    run_threads(8, [&](int t) {
      got[t] = add(matmul(w, inputs[t]), b);
      got[t].eval();
    });
    for (int t = 0; t < 8; ++t) {
      ASSERT_TRUE(array_equal(got[t], expected[t]).item<bool>()) << "thread " << t;
    }
  }
}

TEST(Threads, EvalOfArraysClaimedByAnotherThreadWaits) {
  // Wide and deep enough that the first thread is still scheduling when the
  // others reach its nodes.
  for (int round = 0; round < 20; ++round) {
    std::vector<array> leaves;
    for (int i = 0; i < 64; ++i) {
      array x = full({256}, array(float(i)));
      for (int k = 0; k < 8; ++k) x = add(multiply(x, array(1.0f)), array(1.0f));
      leaves.push_back(x);
    }
    array total = sum(concatenate(leaves));
    std::vector<float> seen(4);
    run_threads(4, [&](int t) {
      // Each thread evaluates a different subset first, then the total.
      std::vector<array> mine;
      for (int i = t; i < 64; i += 4) mine.push_back(leaves[i]);
      eval(mine);
      seen[t] = total.item<float>();
    });
    float want = 256.0f * (63 * 64 / 2 + 64 * 8);
    for (float v : seen) ASSERT_EQ(v, want) << "round " << round;
  }
}

TEST(Threads, WorkInFlightWhenItsThreadExits) {
  // A thread schedules on its own stream and exits at once: its stream is
  // drained before it goes, and the arrays stay readable elsewhere.
  std::vector<array> results(4, array(0.0f));
  run_threads(4, [&](int t) {
    Stream s = new_stream(Device::cpu);
    array x = full({1 << 14}, array(float(t)), float32, s);
    for (int k = 0; k < 50; ++k) x = add(x, array(1.0f), s);
    results[t] = sum(x, false, s);
    async_eval({results[t]});
  });
  for (int t = 0; t < 4; ++t) EXPECT_EQ(results[t].item<float>(), float((t + 50) << 14));
}

namespace {

// Small integers: every product and partial sum is exact in float32, so any
// panel written twice, skipped or read before its writer finished shows up
// as a wrong element, not as rounding.
array small_int_matrix(int rows, int cols, int seed) {
  std::vector<float> v(size_t(rows) * cols);
  for (int i = 0; i < rows; ++i)
    for (int k = 0; k < cols; ++k) v[size_t(i) * cols + k] = float((i * 7 + k * 3 + seed) % 11 - 5);
  return array(v, {rows, cols});
}

// c == a @ b, or a @ b^T when `b_is_transposed` (b stored N x K).
void expect_product(const array& c, const array& a, const array& b, bool b_is_transposed) {
  int M = a.shape(0), K = a.shape(1), N = b_is_transposed ? b.shape(0) : b.shape(1);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  const float* pc = c.data<float>();
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float want = 0;
      for (int k = 0; k < K; ++k)
        want += pa[size_t(i) * K + k] *
                (b_is_transposed ? pb[size_t(j) * K + k] : pb[size_t(k) * N + j]);
      ASSERT_EQ(pc[size_t(i) * N + j], want)
          << M << "x" << K << "x" << N << " at (" << i << ", " << j << ")";
    }
}

} // namespace

TEST(Threads, ConcurrentMatmulsSplitOverThePool) {
  // Products from several threads at once, each large enough that cpu::gemm
  // cuts it into panels over the one intra-op pool: by rows (tall), by
  // columns (wide and thin), as GEMV (one row), and with a transposed
  // operand. The TSan build runs this; each thread uses its own stream so
  // the panels of different products interleave on the pool.
  struct Case {
    int M, K, N;
    bool transpose_b;
  };
  const std::vector<Case> cases = {
      {384, 96, 200, false}, {8, 300, 512, false}, {1, 512, 384, false}, {256, 128, 160, true}};
  for (int round = 0; round < 3; ++round) {
    run_threads(4, [&](int t) {
      const Case& c = cases[t % cases.size()];
      Stream s = new_stream(Device::cpu);
      array a = small_int_matrix(c.M, c.K, t + round);
      array b = c.transpose_b ? small_int_matrix(c.N, c.K, 2 * t + 1)
                              : small_int_matrix(c.K, c.N, 2 * t + 1);
      array prod = matmul(a, c.transpose_b ? transpose(b, s) : b, s);
      eval({prod});
      expect_product(prod, a, b, c.transpose_b);
    });
  }
}
