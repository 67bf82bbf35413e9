// mx.fast and issue 9's names from C++: each fused op against its composite
// (the primitive's own reference), einsum against matmul, and the state a
// registered factory rebuilds.
#include "loom/primitives/fast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "loom/ops.h"

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
