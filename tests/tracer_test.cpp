// Tracer lifetime: an array built inside a transform is a tracer only while
// that transform (or one enclosing it) still traces. Afterwards evaluating it
// frees its graph and lets element-wise kernels reuse buffers, so gradients
// cost what the backward graph needs (issue 6: 592 MiB against 208 MiB).
#include <gtest/gtest.h>

#include <cmath>

#include "loom/ops.h"
#include "loom/transforms/trace.h"

using namespace loom;

namespace {

constexpr int kChain = 50;
constexpr int kElements = 1 << 20; // 4 MiB of float32

array sin_chain(array x) {
  for (int i = 0; i < kChain; ++i) x = sin(x);
  return sum(x);
}

template <typename F>
size_t peak_of(F run) {
  synchronize();
  reset_peak_memory();
  size_t base = get_active_memory();
  run();
  synchronize();
  return get_peak_memory() - base;
}

} // namespace

TEST(Tracer, IntermediatesStopBeingTracersWhenTheTransformReturns) {
  std::vector<array> seen;
  ArrayFn f = [&](const std::vector<array>& in) {
    array t = exp(in[0]);
    seen.push_back(t);
    EXPECT_TRUE(t.is_tracer());
    EXPECT_TRUE(transforms::in_trace());
    return std::vector{sum(sin(t))};
  };
  auto [outs, grads] = vjp(f, {array({1.0f, 2.0f})}, {array(1.0f)});
  EXPECT_FALSE(transforms::in_trace());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_FALSE(seen[0].is_tracer());
  EXPECT_FALSE(outs[0].is_tracer());
  EXPECT_FALSE(grads[0].is_tracer());
  // Evaluated outside the trace, the intermediate drops its node.
  seen[0].eval();
  EXPECT_FALSE(seen[0].has_node());
}

TEST(Tracer, InnerTransformResultsStayTracersForTheOuterOne) {
  bool inner_result_was_tracer = false;
  ArrayFn inner = [](const std::vector<array>& in) { return std::vector{sum(sin(in[0]))}; };
  ArrayFn outer = [&](const std::vector<array>& in) {
    auto [value, grads] = value_and_grad(inner, {0})(in);
    // The outer vjp must still walk the inner gradient's graph.
    inner_result_was_tracer = grads[0].is_tracer();
    grads[0].eval(); // evaluating while traced keeps the graph
    EXPECT_TRUE(grads[0].has_node());
    return std::vector{sum(grads[0])};
  };
  auto [outs, grads] = vjp(outer, {array({0.5f, 1.0f})}, {array(1.0f)});
  EXPECT_TRUE(inner_result_was_tracer);
  // d/dx sum(cos(x)) = -sin(x)
  auto g = grads[0];
  g.eval();
  EXPECT_NEAR(g.data<float>()[0], -std::sin(0.5f), 1e-6);
  EXPECT_NEAR(g.data<float>()[1], -std::sin(1.0f), 1e-6);
}

TEST(Tracer, SuspendedRegionsBuildOrdinaryArrays) {
  transforms::TraceScope scope;
  array traced = exp(array(1.0f));
  EXPECT_TRUE(traced.is_tracer());
  {
    transforms::SuspendTrace suspend;
    EXPECT_FALSE(transforms::in_trace());
    EXPECT_FALSE(exp(array(1.0f)).is_tracer());
  }
  EXPECT_TRUE(transforms::in_trace());
  EXPECT_TRUE(exp(array(1.0f)).is_tracer());
}

TEST(Tracer, ValueAndGradPeakMatchesHandWrittenBackward) {
  array x = random::normal({kElements}, float32, array(0.0f), array(1.0f), random::key(0));
  x.eval();
  auto by_transform = [&] {
    ArrayFn f = [](const std::vector<array>& in) { return std::vector{sin_chain(in[0])}; };
    auto [value, grads] = value_and_grad(f, {0})({x});
    eval({value[0], grads[0]});
  };
  auto by_hand = [&] {
    std::vector<array> ys{x};
    for (int i = 0; i < kChain; ++i) ys.push_back(sin(ys.back()));
    array loss = sum(ys.back());
    array g = ones_like(x);
    for (int i = kChain - 1; i >= 0; --i) g = multiply(g, cos(ys[i]));
    ys.clear();
    eval({loss, g});
  };
  by_transform(); // creates lazily built state (streams, workers)
  size_t hand = peak_of(by_hand);
  size_t transform = peak_of(by_transform);
  ASSERT_GT(hand, 0u);
  EXPECT_LE(static_cast<double>(transform), 1.1 * static_cast<double>(hand))
      << "value_and_grad peak " << transform / (1 << 20) << " MiB, hand-written "
      << hand / (1 << 20) << " MiB";
}
