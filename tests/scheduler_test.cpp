// The scheduler: async evaluation, error propagation, stream ownership.
#include <gtest/gtest.h>

#include <thread>

#include "loom/ops.h"

using namespace loom;

TEST(Scheduler, AsyncEvalThenWait) {
  array a = random::normal({256, 256}, float32, array(0.0f), array(1.0f), random::key(1));
  array b = sum(matmul(a, a));
  async_eval({b});
  EXPECT_NE(b.status(), Status::unscheduled);
  b.wait();
  EXPECT_EQ(b.status(), Status::available);
  EXPECT_TRUE(std::isfinite(b.item<float>()));
}

TEST(Scheduler, KernelErrorReachesDependentsAndNamesThePrimitive) {
  size_t old = set_memory_limit(get_active_memory() + (1 << 20));
  array big = zeros({4096, 4096}); // 64 MiB: over the limit at execution
  array after = add(big, array(1.0f));
  try {
    after.eval();
    FAIL() << "expected an error at evaluation";
  } catch (const std::runtime_error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("Out of memory"), std::string::npos);
    EXPECT_NE(msg.find("while evaluating"), std::string::npos);
  }
  set_memory_limit(old);
  // The process carries on: new work evaluates.
  array ok = add(ones({4}), array(1.0f));
  EXPECT_EQ(sum(ok).item<float>(), 8.0f);
}

TEST(Scheduler, StreamUsedOnAnotherThreadRaises) {
  Stream mine = new_stream(Device::cpu);
  std::string error;
  std::thread t([&] {
    try {
      add(array(1.0f), array(2.0f), mine);
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
  });
  t.join();
  EXPECT_NE(error.find("in current thread"), std::string::npos);
}

TEST(Scheduler, WideGraphEvaluatesAllBranches) {
  std::vector<array> branches;
  for (int i = 0; i < 100; ++i) branches.push_back(multiply(full({16}, array(float(i))), array(2.0f)));
  array total = sum(concatenate(branches));
  EXPECT_EQ(total.item<float>(), 2.0f * 16 * (99 * 100 / 2));
}
