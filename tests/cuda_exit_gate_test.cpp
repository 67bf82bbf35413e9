// The CUDA backend's exit gate (backend/cuda/exit_gate.cpp) without a GPU:
// closing waits for the threads inside and refuses later entries. Each ctest
// case runs in its own process, so closing the gate here affects no other
// test. Without the CUDA backend the tests skip.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#ifdef LOOM_HAVE_CUDA
#include "loom/backend/cuda/exit_gate.h"
#endif

namespace {

#ifdef LOOM_HAVE_CUDA
using namespace std::chrono_literals;
using loom::cuda::CudaScope;

TEST(CudaExitGate, ClosingWaitsForTheThreadsInsideThenRefusesEntries) {
  std::atomic<bool> entered{false};
  std::atomic<bool> left{false};
  std::thread inside([&] {
    CudaScope scope;
    EXPECT_TRUE(scope.open());
    entered = true;
    std::this_thread::sleep_for(300ms);
    left = true;
  });
  while (!entered) std::this_thread::yield();
  loom::cuda::close_gate_now();
  EXPECT_TRUE(left.load()); // it waited for the thread inside
  inside.join();
  EXPECT_TRUE(loom::cuda::exiting());
  CudaScope after;
  EXPECT_FALSE(after.open());
  EXPECT_THROW(after.require("cudaLaunchKernel"), std::runtime_error);
  loom::cuda::close_gate_now(); // a second closing returns at once
}

TEST(CudaExitGate, NestedEntriesAreRefusedOnceClosed) {
  CudaScope outer;
  ASSERT_TRUE(outer.open());
  {
    CudaScope nested;
    EXPECT_TRUE(nested.open());
  }
  // The closing thread itself is inside: it does not wait for itself.
  auto start = std::chrono::steady_clock::now();
  loom::cuda::close_gate_now();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  CudaScope nested;
  EXPECT_FALSE(nested.open());
}

TEST(CudaExitGate, ALibraryLoadIsWaitedForPastTheTimeout) {
  // The gate waits at most 5 s for ordinary work, always for a load.
  std::atomic<bool> entered{false};
  std::atomic<bool> loaded{false};
  std::thread loader([&] {
    CudaScope scope;
    loom::cuda::LibraryLoad loading;
    entered = true;
    std::this_thread::sleep_for(5500ms);
    loaded = true;
  });
  while (!entered) std::this_thread::yield();
  loom::cuda::close_gate_now();
  EXPECT_TRUE(loaded.load());
  loader.join();
}
#else
TEST(CudaExitGate, NeedsTheCudaBackend) { GTEST_SKIP() << "built without the CUDA backend"; }
#endif

} // namespace
