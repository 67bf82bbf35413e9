// compile: trace and replay, the passes (CSE, no-op removal, fusion into one
// Compiled node), the fused CPU kernel against eager results, the cache key
// and cleanup.
#include "loom/compile/compile.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/compile/compiled.h"
#include "loom/compile/graph.h"
#include "loom/ops.h"

using namespace loom;
using namespace loom::compile_detail;

namespace {

std::vector<float> values(array a) {
  a = astype(a, float32);
  a.eval();
  std::vector<float> out(a.size());
  array c = copy(a);
  c.eval();
  std::copy(c.data<float>(), c.data<float>() + c.size(), out.begin());
  return out;
}

void expect_close(const array& a, const array& b, float tol = 1e-5f) {
  ASSERT_EQ(a.shape(), b.shape());
  auto x = values(a);
  auto y = values(b);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], tol) << "element " << i;
}

Graph trace(const ArrayFn& fun, const std::vector<array>& inputs) {
  std::vector<array> ph;
  for (auto& in : inputs) ph.push_back(make_placeholder(in.shape(), in.dtype()));
  return graph_from_trace(ph, fun(ph));
}

int count_named(const Graph& g, const std::string& name) {
  int n = 0;
  for (auto& node : g.nodes) n += name == node.primitive->name();
  return n;
}

array gelu(const array& x) {
  return divide(multiply(x, add(array(1.0f), erf(divide(x, array(std::sqrt(2.0f)))))), array(2.0f));
}

} // namespace

TEST(Compile, TraceAndReplay) {
  ArrayFn f = [](const std::vector<array>& in) {
    return std::vector<array>{add(exp(negative(in[0])), in[1])};
  };
  array x = array(1.0f), y = array(2.0f);
  Graph g = trace(f, {x, y});
  EXPECT_EQ(g.num_inputs, 2);
  auto out = replay(g, {x, y}, false);
  EXPECT_NEAR(out[0].item<float>(), 2.36788f, 1e-5f);
}

TEST(Compile, SimplifyMergesCommonSubexpressions) {
  ArrayFn f = [](const std::vector<array>& in) {
    array a = exp(in[0]);
    array b = exp(in[0]);
    return std::vector<array>{add(a, b)};
  };
  array x = array({1.0f, 2.0f});
  Graph g = trace(f, {x});
  EXPECT_EQ(count_named(g, "Exp"), 2);
  simplify(g);
  EXPECT_EQ(count_named(g, "Exp"), 1);
  expect_close(replay(g, {x}, false)[0], multiply(exp(x), array(2.0f)));
}

TEST(Compile, SimplifyDropsNoops) {
  ArrayFn f = [](const std::vector<array>& in) {
    return std::vector<array>{exp(stop_gradient(in[0]))};
  };
  array x = array({1.0f, 2.0f});
  Graph g = trace(f, {x});
  simplify(g);
  EXPECT_EQ(count_named(g, "StopGradient"), 0);
  expect_close(replay(g, {x}, false)[0], exp(x));
}

TEST(Compile, FuseGeluIntoOneNode) {
  ArrayFn f = [](const std::vector<array>& in) { return std::vector<array>{gelu(in[0])}; };
  array x = random::normal({64, 1000});
  Graph g = trace(f, {x});
  simplify(g);
  fuse(g);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_STREQ(g.nodes[0].primitive->name(), "Compiled");
  expect_close(replay(g, {x}, false)[0], gelu(x));
}

TEST(Compile, FusedRegionKeepsEscapingValues) {
  // b escapes into a reduction: the fused node has two outputs.
  ArrayFn f = [](const std::vector<array>& in) {
    array b = tanh(multiply(in[0], in[1]));
    array c = add(exp(b), array(1.0f));
    return std::vector<array>{c, sum(b)};
  };
  array x = random::normal({40000});
  array y = random::normal({40000});
  Graph g = trace(f, {x, y});
  simplify(g);
  fuse(g);
  int compiled = count_named(g, "Compiled");
  EXPECT_EQ(compiled, 1);
  auto out = replay(g, {x, y}, false);
  auto want = f({x, y});
  expect_close(out[0], want[0]);
  expect_close(out[1], want[1], 1e-1f);
}

// The float32 chunk loop runs the op table's functors, as the eager kernels
// do: the same bits, with a transposed input, a broadcast, scalars on either
// side, an escaping intermediate, partial chunks and an output large enough
// to be streamed.
TEST(Compile, Float32ChainIsBitwiseEager) {
  ArrayFn f = [](const std::vector<array>& in) {
    array g = gelu(in[0]);
    array h = subtract(multiply(log(add(abs(g), array(1.0f))), sigmoid(in[1])),
                       divide(tanh(in[0]), add(array(2.0f), exp(negative(abs(in[1]))))));
    array k = maximum(h, in[1]);
    for (int i = 0; i < 6; ++i) k = add(multiply(k, array(0.5f)), square(in[0]));
    return std::vector<array>{k, g};
  };
  array x = transpose(random::normal({1031, 2049}));
  array y = random::normal({1031});
  Graph g = trace(f, {x, y});
  simplify(g);
  fuse(g);
  // One region at y's shape (its own ops), one at the output's.
  EXPECT_EQ(count_named(g, "Compiled"), 2);
  auto out = replay(g, {x, y}, false);
  auto want = f({x, y});
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(values(out[i]), values(want[i]));
}

// A region with a comparison (bool) leaves the float32 loop for the tiled
// path, which runs each op's own kernel.
TEST(Compile, RegionWithBoolValuesTakesTheTiledPath) {
  ArrayFn f = [](const std::vector<array>& in) {
    array m = greater(exp(in[0]), array(1.5f));
    return std::vector<array>{where(m, multiply(in[0], array(2.0f)), negative(in[0]))};
  };
  array x = random::normal({70000});
  Graph g = trace(f, {x});
  simplify(g);
  fuse(g);
  EXPECT_EQ(count_named(g, "Compiled"), 1);
  EXPECT_EQ(values(replay(g, {x}, false)[0]), values(f({x})[0]));
}

TEST(Compile, FuseDoesNotCreateCycles) {
  // a -> sum -> broadcast back into the chain: a and the consumer of the sum
  // cannot join one region.
  ArrayFn f = [](const std::vector<array>& in) {
    array a = exp(in[0]);
    array s = sum(a, true);
    return std::vector<array>{multiply(add(a, array(1.0f)), s)};
  };
  array x = random::normal({8, 16});
  Graph g = trace(f, {x});
  simplify(g);
  fuse(g);
  expect_close(replay(g, {x}, false)[0], f({x})[0], 1e-4f);
}

TEST(Compile, CachedCallAndErase) {
  int traces = 0;
  ArrayFn f = [&traces](const std::vector<array>& in) {
    ++traces;
    return std::vector<array>{multiply(in[0], array(3.0f))};
  };
  auto cf = compile(f, 12345);
  EXPECT_EQ(cf({array(1.0f)})[0].item<float>(), 3.0f);
  EXPECT_EQ(cf({array(2.0f)})[0].item<float>(), 6.0f);
  EXPECT_EQ(traces, 1);
  cf({array({1.0f, 2.0f})});
  EXPECT_EQ(traces, 2);
  erase(12345);
  cf({array(1.0f)});
  EXPECT_EQ(traces, 3);
  erase(12345);
}

TEST(Compile, ErasedEntriesReleaseCapturedArrays) {
  random::normal({1}).eval(); // the default key is created on first use
  synchronize();
  size_t base = get_active_memory();
  {
    array w = random::normal({256, 256});
    w.eval();
    ArrayFn f = [w](const std::vector<array>& in) {
      auto parts = split(matmul(in[0], w), 2, -1);
      return std::vector<array>{concatenate({parts[1], parts[0]}, -1)};
    };
    auto cf = compile(f, 777);
    array out = cf({random::normal({4, 256})})[0];
    out.eval();
    erase(777);
  }
  synchronize();
  EXPECT_EQ(get_active_memory(), base);
}

TEST(Compile, ModesAndDisable) {
  int traces = 0;
  ArrayFn f = [&traces](const std::vector<array>& in) {
    ++traces;
    return std::vector<array>{add(in[0], array(1.0f))};
  };
  auto cf = compile(f, 999);
  disable_compile();
  cf({array(1.0f)});
  cf({array(1.0f)});
  EXPECT_EQ(traces, 2);
  enable_compile();
  set_compile_mode(CompileMode::no_fuse);
  EXPECT_EQ(cf({array(1.0f)})[0].item<float>(), 2.0f);
  set_compile_mode(CompileMode::enabled);
  erase(999);
}

TEST(Compile, PlaceholderEvaluationRaises) {
  array p = make_placeholder({2}, float32);
  EXPECT_THROW(exp(p).eval(), std::invalid_argument);
}

TEST(Compile, FusedNodeTransformsByExpansion) {
  ArrayFn f = [](const std::vector<array>& in) {
    return std::vector<array>{multiply(tanh(in[0]), exp(in[0]))};
  };
  array x = array({0.1f, -0.5f, 1.2f});
  Graph g = trace(f, {x});
  simplify(g);
  fuse(g);
  ASSERT_EQ(count_named(g, "Compiled"), 1);
  ArrayFn fused = [&g](const std::vector<array>& in) { return replay(g, in, false); };
  array ones = array({1.0f, 1.0f, 1.0f});
  auto [outs, grads] = vjp(fused, {x}, {ones});
  auto [outs_e, grads_e] = vjp(f, {x}, {ones});
  expect_close(outs[0], outs_e[0]);
  expect_close(grads[0], grads_e[0]);
  auto [o2, tangents] = jvp(fused, {x}, {ones});
  auto [o2e, tangents_e] = jvp(f, {x}, {ones});
  expect_close(tangents[0], tangents_e[0]);
  array xs = random::normal({4, 3});
  expect_close(vmap(fused, {0}, {0})({xs})[0], vmap(f, {0}, {0})({xs})[0]);
}

namespace {

// Outputs written by the fused regions of g.
size_t region_outputs(const Graph& g) {
  size_t n = 0;
  for (auto& node : g.nodes) {
    if (std::string(node.primitive->name()) == "Compiled") n += node.shapes.size();
  }
  return n;
}

} // namespace

// A broadcast read by two regions (a layer norm's scale, read by the forward
// product and by its gradient) is computed inside each from its small
// operand: no region writes it out at full size.
TEST(Compile, BroadcastReadByTwoRegionsIsNeverWritten) {
  ArrayFn f = [](const std::vector<array>& in) {
    array b = broadcast_to(in[1], in[0].shape());
    array a = exp(multiply(in[0], b));
    array s = sum(a, -1, true);
    return std::vector<array>{multiply(add(a, s), b)};
  };
  array x = random::normal({64, 300});
  array y = random::normal({300});
  Graph g = trace(f, {x, y});
  simplify(g);
  fuse(g);
  EXPECT_EQ(count_named(g, "Compiled"), 2);
  EXPECT_EQ(count_named(g, "Broadcast"), 0);
  EXPECT_EQ(region_outputs(g), 2u); // a (read by the sum) and the result
  EXPECT_EQ(values(replay(g, {x, y}, false)[0]), values(f({x, y})[0]));
}

// Ops of this name inside the graph's fused regions.
int fused_named(const Graph& g, const std::string& name) {
  int n = 0;
  for (auto& node : g.nodes) {
    if (auto* c = dynamic_cast<const Compiled*>(node.primitive.get())) {
      for (auto& op : c->ops()) n += name == op.primitive->name();
    }
  }
  return n;
}

// The backward region of gelu recomputes x / sqrt(2) from x, which it reads
// anyway, instead of the forward region storing it; 1 + erf(.) it reads: erf
// is costly (PrimitiveTraits::costly), dearer to compute again than to read
// back, so the forward region writes it beside its result and erf runs once.
// Every value is the eager bits.
TEST(Compile, BackwardRecomputesCheapForwardValues) {
  ArrayFn f = [](const std::vector<array>& in) {
    auto [outs, grads] =
        vjp([](const std::vector<array>& x) { return std::vector<array>{gelu(x[0])}; }, {in[0]},
            {in[1]});
    return std::vector<array>{outs[0], grads[0]};
  };
  array x = random::normal({33, 1025});
  array ct = random::normal({33, 1025});
  Graph g = trace(f, {x, ct});
  simplify(g);
  fuse(g);
  EXPECT_EQ(count_named(g, "Compiled"), 2);
  EXPECT_EQ(region_outputs(g), 3u);
  EXPECT_EQ(fused_named(g, "Erf"), 1);
  auto out = replay(g, {x, ct}, false);
  auto want = f({x, ct});
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(values(out[i]), values(want[i]));
}

// A value read by a reduction is written anyway: no region recomputes it,
// and a value the graph returns is not recomputed either.
TEST(Compile, RecomputeLeavesValuesThatAreWrittenAnyway) {
  ArrayFn f = [](const std::vector<array>& in) {
    array t = exp(multiply(in[0], array(0.5f)));
    array s = sum(t, -1, true);
    array u = multiply(add(in[0], s), t);
    return std::vector<array>{add(u, array(1.0f)), t};
  };
  array x = random::normal({16, 500});
  Graph g = trace(f, {x});
  simplify(g);
  fuse(g);
  EXPECT_EQ(count_named(g, "Compiled"), 2);
  // The first region writes t once (read by the sum, the second region, and
  // returned); the second writes its result.
  EXPECT_EQ(region_outputs(g), 2u);
  auto out = replay(g, {x}, false);
  auto want = f({x});
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(values(out[i]), values(want[i]));
}
