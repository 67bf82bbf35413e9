// PrimitiveTraits per family: what compile's passes (fusion of element-wise
// and broadcast nodes, dropping no-ops) and export ask a primitive instead of
// inspecting its type.
#include <gtest/gtest.h>

#include "loom/ops.h"
#include "loom/primitives/primitive.h"

using namespace loom;

namespace {

PrimitiveTraits traits_of(const array& a) { return a.primitive().traits(); }

} // namespace

TEST(Traits, ElementwiseFamiliesAreElementwise) {
  array x = array({1.0f, -2.0f});
  for (const array& y :
       {exp(x), add(x, x), where(greater(x, array(0.0f)), x, x), astype(x, int32), copy(x)}) {
    PrimitiveTraits t = traits_of(y);
    EXPECT_TRUE(t.elementwise) << y.primitive().name();
    EXPECT_FALSE(t.reduction) << y.primitive().name();
    EXPECT_FALSE(t.multi_output) << y.primitive().name();
  }
}

TEST(Traits, NoOpsAreMarked) {
  array x = array({1.0f, 2.0f});
  EXPECT_TRUE(traits_of(copy(x)).noop);
  EXPECT_TRUE(traits_of(stop_gradient(x)).noop);
  EXPECT_FALSE(traits_of(exp(x)).noop);
}

TEST(Traits, BroadcastReductionAndMultiOutput) {
  array x = reshape(arange(0.0, 6.0, 1.0, float32), {2, 3});
  EXPECT_TRUE(traits_of(broadcast_to(array({1.0f, 2.0f, 3.0f}), {2, 3})).broadcast);
  EXPECT_TRUE(traits_of(sum(x, std::vector<int>{0})).reduction);
  EXPECT_TRUE(traits_of(argmax(x, 1)).reduction);
  auto parts = split(x, 3, 1);
  EXPECT_TRUE(traits_of(parts[0]).multi_output);
  PrimitiveTraits mm = traits_of(matmul(x, transpose(x)));
  EXPECT_FALSE(mm.elementwise || mm.broadcast || mm.reduction || mm.noop || mm.multi_output);
}

// Transcendental functions are costly (compile reads their values instead of
// computing them again); arithmetic is not.
TEST(Traits, TranscendentalsAreCostly) {
  array x = array({0.5f, 0.25f});
  for (const array& y : {exp(x), log(x), erf(x), tanh(x), sigmoid(x), sin(x), expm1(x)}) {
    EXPECT_TRUE(traits_of(y).costly) << y.primitive().name();
  }
  for (const array& y :
       {negative(x), square(x), sqrt(x), add(x, x), multiply(x, x), divide(x, x)}) {
    EXPECT_FALSE(traits_of(y).costly) << y.primitive().name();
  }
}
