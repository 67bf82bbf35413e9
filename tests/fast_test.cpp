// mx.fast and issue 9's names from C++: each fused op against its composite
// (the primitive's own reference), einsum against matmul, and the state a
// registered factory rebuilds.
#include "loom/primitives/fast.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "loom/backend/cpu/fast_attention_tiles.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/ops.h"
#include "loom/transforms/transforms.h"

using namespace loom;

namespace {

float max_abs_diff(const array& a, const array& b) {
  array d = max(abs(subtract(astype(a, float32), astype(b, float32))));
  eval({d});
  return d.item<float>();
}

array randn(const Shape& shape, uint64_t seed) {
  return random::normal(shape, float32, array(0.0f), array(1.0f), random::key(seed));
}

} // namespace

TEST(Fast, KernelsMatchTheirComposites) {
  array x = randn({3, 5, 16}, 1);
  array w = randn({16}, 2);
  array b = randn({16}, 3);
  auto check = [](const array& fused) {
    auto* prim = dynamic_cast<FastPrimitive*>(&fused.primitive());
    ASSERT_NE(prim, nullptr);
    array ref = prim->composite(fused.inputs())[0];
    EXPECT_LT(max_abs_diff(fused, ref), 1e-4f) << prim->name();
  };
  check(fast::rms_norm(x, w, 1e-5f));
  check(fast::layer_norm(x, w, b, 1e-5f));
  check(fast::rope(x, 16, false, 10000.0f, 1.0f, array(3)));
  check(fast::rope(x, 8, true, 10000.0f, 0.5f, array({1, 2, 3}, {3})));
  array q = randn({2, 4, 6, 8}, 4);
  array k = randn({2, 2, 9, 8}, 5);
  check(fast::scaled_dot_product_attention(q, k, k, 0.3f, "causal"));
  check(fast::scaled_dot_product_attention(q, k, k, 0.3f, "", std::nullopt, randn({4}, 6)));
  check(fast::cross_entropy(x, astype(abs(randn({3, 5}, 7)), int32)));
}

TEST(Fast, PrimitivesRebuildFromTheirState) {
  array y = fast::layer_norm(randn({2, 4}, 8), std::nullopt, std::nullopt, 1e-5f);
  auto prim = y.primitive_ptr();
  auto again = make_primitive(prim->name(), prim->stream(), prim->state());
  EXPECT_TRUE(prim->is_equivalent(*again));
}

TEST(Fast, EinsumMatchesMatmul) {
  array a = randn({3, 4}, 9);
  array b = randn({4, 5}, 10);
  array c = randn({5, 2}, 11);
  EXPECT_LT(max_abs_diff(einsum("ij,jk,kl->il", {a, b, c}), matmul(matmul(a, b), c)), 1e-4f);
  auto [path, report] = einsum_path("ij,jk,kl->il", {a, b, c});
  ASSERT_EQ(path.size(), 2u);
  EXPECT_NE(report.find("Complete contraction:  ij,jk,kl->il"), std::string::npos);
}

// The float32 register tiles against the BLAS path and the composite, on
// shapes that leave every kind of edge: query rows not a multiple of the
// tile heights (12, 6), keys not a multiple of 32, head sizes not a
// multiple of 16 (masked vectors) and value heads wider than 64 (two column
// chunks), grouped heads, each mask, sinks; values and all gradients.
TEST(Fast, AttentionTilesMatchBlasPath) {
  if (!cpu::attention_tiles::available()) GTEST_SKIP() << "no AVX-512: the BLAS path only";
  struct Case {
    int tq, tk, d, dv, nq, nkv;
    std::string mode;
    bool bool_mask, additive, sinks;
  };
  const std::vector<Case> cases = {
      {37, 53, 24, 72, 4, 2, "", false, false, false},
      {130, 130, 64, 64, 2, 2, "causal", false, false, true},
      {29, 300, 8, 20, 3, 1, "", true, false, false},
      {45, 17, 40, 40, 2, 1, "", false, true, true},
      {64, 200, 16, 96, 2, 2, "causal", false, false, false},
  };
  // The tiles give each (batch, head) task a thread of its own and step
  // aside when the tasks are fewer than the threads: a batch as large as the
  // pool keeps them on with any thread count.
  const int batch = std::max(2, cpu::num_threads());
  uint64_t seed = 20;
  for (const Case& c : cases) {
    array q = randn({batch, c.nq, c.tq, c.d}, seed++);
    array k = randn({batch, c.nkv, c.tk, c.d}, seed++);
    array v = randn({batch, c.nkv, c.tk, c.dv}, seed++);
    array ct = randn({batch, c.nq, c.tq, c.dv}, seed++);
    std::optional<array> mask;
    if (c.bool_mask) mask = greater(randn({c.tq, c.tk}, seed++), array(-0.5f));
    if (c.additive) mask = randn({batch, 1, c.tq, c.tk}, seed++);
    std::optional<array> sinks;
    if (c.sinks) sinks = randn({c.nq}, seed++);
    auto run = [&](bool fused) {
      ArrayFn f = [&](const std::vector<array>& x) {
        array o = fast::scaled_dot_product_attention(x[0], x[1], x[2], 0.3f, c.mode, mask, sinks);
        if (!fused) {
          auto* prim = dynamic_cast<FastPrimitive*>(&o.primitive());
          o = prim->composite(o.inputs())[0];
        }
        return std::vector<array>{o};
      };
      auto [outs, grads] = vjp(f, {q, k, v}, {ct});
      std::vector<array> all{outs[0]};
      all.insert(all.end(), grads.begin(), grads.end());
      eval(all);
      return all;
    };
    const bool previous = cpu::attention_tiles::set_enabled(true);
    auto tiled = run(true);
    cpu::attention_tiles::set_enabled(false);
    auto blas = run(true);
    cpu::attention_tiles::set_enabled(previous);
    auto reference = run(false);
    for (size_t i = 0; i < tiled.size(); ++i) {
      EXPECT_LT(max_abs_diff(tiled[i], blas[i]), 2e-4f) << "case tq " << c.tq << " output " << i;
      EXPECT_LT(max_abs_diff(tiled[i], reference[i]), 2e-4f)
          << "case tq " << c.tq << " output " << i;
    }
  }
}
