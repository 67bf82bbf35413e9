// The CUDA backend's launch batching (launch_batch.h) against a pretend
// driver: which launches go out directly, when a graph is built, that a replay
// updates only the nodes whose arguments changed, the order of everything,
// and that held buffers are released only at the flush. Runs without a GPU;
// without the CUDA backend the tests skip.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#ifdef LOOM_HAVE_CUDA
#include "loom/backend/cuda/launch_batch.h"
#endif

namespace {

#ifdef LOOM_HAVE_CUDA
using loom::cuda::GraphDriver;
using loom::cuda::LaunchBatch;
using loom::cuda::LaunchRecord;
using loom::cuda::ParamLayout;

// Runs "kernels" on the host: every launch appends (function id, the first
// argument's value) to `executed`, as the device would run them in order.
class PretendDriver final : public GraphDriver {
 public:
  struct Graph {
    std::vector<LaunchRecord> records;
    std::vector<long long> first_args; // the argument each node holds
    bool destroyed = false;
  };

  bool launch(const LaunchRecord& r, void** args) override {
    ++launches;
    if (fail_launches) return false;
    run(r, *static_cast<long long*>(args[0]));
    return true;
  }
  void* instantiate(const std::vector<LaunchRecord>& records, const std::vector<void**>& args,
                    std::vector<void*>& nodes) override {
    ++instantiations;
    if (fail_instantiate) return nullptr;
    auto g = std::make_unique<Graph>();
    g->records = records;
    nodes.clear();
    for (size_t i = 0; i < records.size(); ++i) {
      g->first_args.push_back(*static_cast<long long*>(args[i][0]));
      nodes.push_back(reinterpret_cast<void*>(i + 1));
    }
    graphs.push_back(std::move(g));
    return graphs.back().get();
  }
  bool update(void* exec, void* node, const LaunchRecord&, void** args) override {
    ++updates;
    auto* g = static_cast<Graph*>(exec);
    g->first_args[reinterpret_cast<size_t>(node) - 1] = *static_cast<long long*>(args[0]);
    return true;
  }
  bool update_all(void* exec, const std::vector<LaunchRecord>& records,
                  const std::vector<void**>& args) override {
    ++whole_updates;
    auto* g = static_cast<Graph*>(exec);
    for (size_t i = 0; i < records.size(); ++i) {
      g->first_args[i] = *static_cast<long long*>(args[i][0]);
    }
    return true;
  }
  bool launch_graph(void* exec) override {
    ++graph_launches;
    if (fail_graph_launch) return false;
    auto* g = static_cast<Graph*>(exec);
    EXPECT_FALSE(g->destroyed);
    for (size_t i = 0; i < g->records.size(); ++i) run(g->records[i], g->first_args[i]);
    return true;
  }
  void destroy(void* exec) override {
    ++destroys;
    static_cast<Graph*>(exec)->destroyed = true;
  }

  void run(const LaunchRecord& r, long long first_arg) {
    executed.push_back(std::to_string(reinterpret_cast<uintptr_t>(r.function)) + ":" +
                       std::to_string(first_arg));
  }

  std::vector<std::unique_ptr<Graph>> graphs;
  std::vector<std::string> executed;
  int launches = 0, instantiations = 0, updates = 0, whole_updates = 0, graph_launches = 0,
      destroys = 0;
  bool fail_launches = false, fail_instantiate = false, fail_graph_launch = false;
};

// A kernel (long long value, int count): 8 + 4 bytes at offsets 0 and 8.
const ParamLayout kLayout = {{0, 8}, {8, 4}};
const void* fn(uintptr_t id) { return reinterpret_cast<const void*>(id); }

void record(LaunchBatch& b, uintptr_t function, long long value, unsigned grid = 1) {
  int count = 16;
  void* args[2] = {&value, &count};
  const unsigned g[3] = {grid, 1, 1}, k[3] = {256, 1, 1};
  b.record(fn(function), g, k, 0, kLayout, args);
}

std::vector<std::string> expected(const std::vector<std::pair<int, long long>>& runs) {
  std::vector<std::string> out;
  for (auto& [f, v] : runs) out.push_back(std::to_string(f) + ":" + std::to_string(v));
  return out;
}

LaunchBatch::Options options(size_t min_graph = 4) {
  LaunchBatch::Options o;
  o.min_graph = min_graph;
  return o;
}
#endif

TEST(CudaLaunchBatch, ShortRunsLaunchDirectlyInOrder) {
#ifndef LOOM_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  PretendDriver d;
  LaunchBatch b(d, options());
  std::vector<std::shared_ptr<const void>> released;
  record(b, 1, 10);
  record(b, 2, 20);
  record(b, 1, 30);
  EXPECT_EQ(b.pending(), 3u);
  EXPECT_TRUE(d.executed.empty()); // nothing runs before the flush
  b.flush(released);
  EXPECT_EQ(b.pending(), 0u);
  EXPECT_EQ(d.executed, expected({{1, 10}, {2, 20}, {1, 30}}));
  EXPECT_EQ(d.instantiations, 0);
  EXPECT_EQ(b.stats().direct, 3u);
#endif
}

TEST(CudaLaunchBatch, GraphBuiltOnSecondSightingThenReplayedWithUpdates) {
#ifndef LOOM_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  PretendDriver d;
  LaunchBatch b(d, options());
  std::vector<std::shared_ptr<const void>> released;
  auto run_chain = [&](long long base) {
    for (int i = 0; i < 6; ++i) record(b, 7, base + i);
    b.flush(released);
  };
  run_chain(100); // first sighting: direct
  EXPECT_EQ(d.instantiations, 0);
  EXPECT_EQ(d.launches, 6);
  run_chain(200); // second: a graph is built and launched
  EXPECT_EQ(d.instantiations, 1);
  EXPECT_EQ(d.graph_launches, 1);
  EXPECT_EQ(d.launches, 6);
  run_chain(200); // same arguments: replayed without updates
  EXPECT_EQ(d.updates, 0);
  EXPECT_EQ(d.graph_launches, 2);
  // Only node 3's argument changes.
  for (int i = 0; i < 6; ++i) record(b, 7, i == 3 ? 999 : 200 + i);
  b.flush(released);
  EXPECT_EQ(d.updates, 1);
  EXPECT_EQ(d.graph_launches, 3);
  EXPECT_EQ(d.instantiations, 1);
  std::vector<std::pair<int, long long>> want;
  for (long long base : {100, 200, 200}) {
    for (int i = 0; i < 6; ++i) want.push_back({7, base + i});
  }
  for (int i = 0; i < 6; ++i) want.push_back({7, i == 3 ? 999 : 200 + i});
  EXPECT_EQ(d.executed, expected(want));
  EXPECT_EQ(b.stats().graph_nodes, 18u);
#endif
}

TEST(CudaLaunchBatch, ManyChangedNodesUpdateTheWholeGraphAtOnce) {
#ifndef LOOM_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  PretendDriver d;
  LaunchBatch::Options o = options();
  o.whole_update_from = 3;
  LaunchBatch b(d, o);
  std::vector<std::shared_ptr<const void>> released;
  auto run_chain = [&](long long base, int changed) {
    for (int i = 0; i < 6; ++i) record(b, 9, i < changed ? base + i : i);
    b.flush(released);
  };
  run_chain(0, 0);
  run_chain(0, 0);  // graph built
  run_chain(50, 2); // two changed: node by node
  EXPECT_EQ(d.updates, 2);
  EXPECT_EQ(d.whole_updates, 0);
  run_chain(70, 4); // four changed: at once
  EXPECT_EQ(d.updates, 2);
  EXPECT_EQ(d.whole_updates, 1);
  EXPECT_EQ(b.stats().whole_updates, 1u);
  std::vector<std::pair<int, long long>> want;
  for (int i = 0; i < 12; ++i) want.push_back({9, i % 6});
  for (int i = 0; i < 6; ++i) want.push_back({9, i < 2 ? 50 + i : i});
  for (int i = 0; i < 6; ++i) want.push_back({9, i < 4 ? 70 + i : i});
  EXPECT_EQ(d.executed, expected(want));
#endif
}

TEST(CudaLaunchBatch, ADifferentShapeOrFunctionIsAnotherGraph) {
#ifndef LOOM_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  PretendDriver d;
  LaunchBatch b(d, options());
  std::vector<std::shared_ptr<const void>> released;
  for (int rep = 0; rep < 2; ++rep) {
    for (int i = 0; i < 5; ++i) record(b, 1, i);
    b.flush(released);
  }
  EXPECT_EQ(d.instantiations, 1);
  // Same functions, one grid differs: not the cached graph.
  for (int i = 0; i < 5; ++i) record(b, 1, i, i == 2 ? 4 : 1);
  b.flush(released);
  EXPECT_EQ(d.instantiations, 1);
  EXPECT_EQ(d.launches, 10);
  // Another function in the middle.
  for (int i = 0; i < 5; ++i) record(b, i == 4 ? 2 : 1, i);
  b.flush(released);
  EXPECT_EQ(d.launches, 15);
  EXPECT_EQ(d.graph_launches, 1);
  EXPECT_EQ(d.executed.back(), "2:4");
#endif
}

TEST(CudaLaunchBatch, HeldBuffersAreReleasedAtTheFlush) {
#ifndef LOOM_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  PretendDriver d;
  LaunchBatch b(d, options());
  auto buffer = std::make_shared<int>(5);
  std::weak_ptr<int> watch = buffer;
  record(b, 1, 1);
  b.keep_alive(buffer);
  buffer.reset();
  EXPECT_FALSE(watch.expired()); // the pending launch still uses it
  std::vector<std::shared_ptr<const void>> released;
  b.flush(released);
  EXPECT_EQ(d.executed.size(), 1u);
  EXPECT_FALSE(watch.expired()); // handed to the caller, dropped after its unlock
  released.clear();
  EXPECT_TRUE(watch.expired());
#endif
}

TEST(CudaLaunchBatch, FailuresFallBackToDirectLaunchesAndTheCacheIsBounded) {
#ifndef LOOM_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  PretendDriver d;
  LaunchBatch::Options o = options();
  o.max_graphs = 2;
  LaunchBatch b(d, o);
  std::vector<std::shared_ptr<const void>> released;
  d.fail_instantiate = true;
  for (int rep = 0; rep < 2; ++rep) {
    for (int i = 0; i < 4; ++i) record(b, 3, i);
    b.flush(released);
  }
  EXPECT_EQ(d.instantiations, 1);
  EXPECT_EQ(d.launches, 8); // the failed graph's launches went out one by one
  EXPECT_EQ(b.stats().failures, 1u);
  d.fail_instantiate = false;
  // Three sequences, each seen twice: the first graph is evicted.
  for (uintptr_t f : {11, 12, 13}) {
    for (int rep = 0; rep < 2; ++rep) {
      for (int i = 0; i < 4; ++i) record(b, f, i);
      b.flush(released);
    }
  }
  EXPECT_EQ(d.instantiations, 4);
  EXPECT_EQ(d.destroys, 1);
  EXPECT_TRUE(d.graphs[0]->destroyed); // function 11's, the oldest
  EXPECT_EQ(d.executed.size(), 8u + 24u);
#endif
}

TEST(CudaLaunchBatch, RecordReportsAFullBatch) {
#ifndef LOOM_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  PretendDriver d;
  LaunchBatch::Options o = options();
  o.max_pending = 3;
  LaunchBatch b(d, o);
  int count = 1;
  long long v = 0;
  void* args[2] = {&v, &count};
  const unsigned g[3] = {1, 1, 1};
  EXPECT_FALSE(b.record(fn(1), g, g, 0, kLayout, args));
  EXPECT_FALSE(b.record(fn(1), g, g, 0, kLayout, args));
  EXPECT_TRUE(b.record(fn(1), g, g, 0, kLayout, args));
  b.discard();
  EXPECT_EQ(b.pending(), 0u);
  EXPECT_TRUE(d.executed.empty());
#endif
}

} // namespace

TEST(CudaLaunchBatch, AFailedGraphIsNotTriedAgain) {
#ifndef LOOM_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  PretendDriver d;
  LaunchBatch b(d, options());
  std::vector<std::shared_ptr<const void>> released;
  d.fail_instantiate = true;
  std::vector<std::pair<int, long long>> want;
  for (int rep = 0; rep < 6; ++rep) {
    for (int i = 0; i < 5; ++i) {
      record(b, 4, rep * 10 + i);
      want.push_back({4, rep * 10 + i});
    }
    b.flush(released);
  }
  // Seen once (direct), then one failed instantiation; never again.
  EXPECT_EQ(d.instantiations, 1);
  EXPECT_EQ(b.stats().failures, 1u);
  EXPECT_EQ(b.stats().given_up, 4u);
  EXPECT_EQ(d.executed, expected(want));
#endif
}

TEST(CudaLaunchBatch, AGraphWhoseReplayFailsIsDroppedAndItsRunGoesDirect) {
#ifndef LOOM_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  PretendDriver d;
  LaunchBatch b(d, options());
  std::vector<std::shared_ptr<const void>> released;
  std::vector<std::pair<int, long long>> want;
  auto run = [&](long long base) {
    for (int i = 0; i < 4; ++i) {
      record(b, 6, base + i);
      want.push_back({6, base + i});
    }
    b.flush(released);
  };
  run(0);
  run(10); // graph built and launched
  ASSERT_EQ(d.instantiations, 1);
  d.fail_graph_launch = true;
  run(20); // replay fails: dropped, launched one by one
  EXPECT_TRUE(d.graphs[0]->destroyed);
  EXPECT_EQ(b.stats().failures, 1u);
  d.fail_graph_launch = false;
  run(30);
  run(40);
  EXPECT_EQ(d.instantiations, 1); // not rebuilt
  EXPECT_EQ(d.executed, expected(want));
#endif
}

TEST(CudaLaunchBatch, TheLeastRecentlyReplayedGraphIsEvicted) {
#ifndef LOOM_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  PretendDriver d;
  LaunchBatch::Options o = options();
  o.max_graphs = 2;
  LaunchBatch b(d, o);
  std::vector<std::shared_ptr<const void>> released;
  auto run = [&](uintptr_t f) {
    for (int i = 0; i < 4; ++i) record(b, f, i);
    b.flush(released);
  };
  for (uintptr_t f : {21, 22}) {
    run(f);
    run(f); // built
  }
  run(21); // replayed: now the most recent
  run(23);
  run(23); // built: evicts 22's graph, not 21's
  ASSERT_EQ(d.instantiations, 3);
  EXPECT_FALSE(d.graphs[0]->destroyed);
  EXPECT_TRUE(d.graphs[1]->destroyed);
  const int launches = d.graph_launches;
  run(21);
  EXPECT_EQ(d.graph_launches, launches + 1); // still cached
  EXPECT_EQ(d.instantiations, 3);
#endif
}

TEST(CudaLaunchBatch, NoGraphsWhenTheCacheHoldsNone) {
#ifndef LOOM_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  PretendDriver d;
  LaunchBatch::Options o = options();
  o.max_graphs = 0;
  LaunchBatch b(d, o);
  std::vector<std::shared_ptr<const void>> released;
  for (int rep = 0; rep < 3; ++rep) {
    for (int i = 0; i < 4; ++i) record(b, 8, i);
    b.flush(released);
  }
  EXPECT_EQ(d.instantiations, 0);
  EXPECT_EQ(d.launches, 12);
#endif
}

TEST(CudaLaunchBatch, HeldOwnersAreAppendedToWhatTheCallerHolds) {
#ifndef LOOM_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  PretendDriver d;
  LaunchBatch b(d, options());
  std::vector<std::shared_ptr<const void>> released{std::make_shared<int>(1)};
  auto held = std::make_shared<int>(2);
  record(b, 1, 1);
  b.keep_alive(held);
  b.flush(released);
  ASSERT_EQ(released.size(), 2u);
  EXPECT_EQ(released[1], held);
  b.keep_alive(std::make_shared<int>(3));
  b.flush(released); // nothing recorded: the owner is handed back all the same
  EXPECT_EQ(released.size(), 3u);
#endif
}
