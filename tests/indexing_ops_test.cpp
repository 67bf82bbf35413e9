// Gather/scatter and the ops on them, sorting and scans: values, repeated
// indices, out-of-range errors at evaluation, and their transforms.
#include <gtest/gtest.h>

#include <numeric>

#include "loom/ops.h"

using namespace loom;

namespace {

template <typename T>
std::vector<T> values(array a) {
  a = copy(a); // row-major
  a.eval();
  const T* p = a.data<T>();
  return std::vector<T>(p, p + a.size());
}

array iota(const Shape& shape) {
  std::vector<float> v(shape_size(shape));
  std::iota(v.begin(), v.end(), 0.0f);
  return array(v, shape);
}

} // namespace

TEST(Gather, MultiAxisIndicesBroadcastAndKeepTheBlock) {
  array a = iota({3, 4, 2});
  array i0({2, 0}, {2, 1}, int32);
  array i1({-1, 1, 0}, {3}, int32); // broadcast to (2, 3); -1 counts from the end
  array g = gather(a, {i0, i1}, {0, 1});
  EXPECT_EQ(g.shape(), (Shape{2, 3, 2}));
  std::vector<float> v = values<float>(g);
  // g[0, 0] = a[2, 3] = {22, 23}; g[1, 1] = a[0, 1] = {2, 3}
  EXPECT_EQ(v[0], 22.0f);
  EXPECT_EQ(v[1], 23.0f);
  EXPECT_EQ(v[8], 2.0f);
  EXPECT_EQ(v[9], 3.0f);
}

TEST(Gather, OutOfRangeIndexRaisesAtEvaluation) {
  array a = iota({5});
  array g = take(a, array({7}, {1}, int32), 0);
  EXPECT_THROW(g.eval(), std::runtime_error); // the scheduler wraps kernel errors
  EXPECT_THROW(gather(a, {array({1.0f}, {1})}, {0}), std::invalid_argument);
}

TEST(Scatter, RepeatedIndicesAccumulate) {
  array a = zeros({4});
  array idx({0, 2, 0, 0}, {4}, int32);
  EXPECT_EQ(values<float>(scatter_add(a, {idx}, ones({4}), {0})), (std::vector<float>{3, 0, 1, 0}));
  EXPECT_EQ(values<float>(scatter_max(a, {idx}, array({1.0f, 5.0f, 7.0f, 2.0f}, {4}), {0})),
            (std::vector<float>{7, 0, 5, 0}));
  EXPECT_EQ(values<float>(scatter(a, {array({1, 3}, {2}, int32)}, array(9.0f), {0})),
            (std::vector<float>{0, 9, 0, 9}));
}

TEST(Gather, GradientIsAScatterAdd) {
  auto fn = [](const std::vector<array>& x) {
    return std::vector<array>{sum(take(x[0], array({1, 1, 2}, {3}, int32), 0))};
  };
  auto [outs, grads] = vjp(fn, {iota({4})}, {array(1.0f)});
  EXPECT_EQ(values<float>(grads[0]), (std::vector<float>{0, 2, 1, 0}));
}

TEST(Gather, VmapOverSourceAndIndices) {
  array a = iota({3, 4});
  array idx({3, 0, 1, 1, 2, 2}, {3, 2}, int32);
  auto fn = [](const std::vector<array>& x) { return std::vector<array>{take(x[0], x[1], 0)}; };
  array out = vmap(fn, {0, 0}, {0})({a, idx})[0];
  EXPECT_EQ(values<float>(out), (std::vector<float>{3, 0, 5, 5, 10, 10}));
}

TEST(DynamicSlice, StartIsReadAtEvaluationAndClamped) {
  array a = iota({2, 3});
  EXPECT_EQ(values<float>(slice(a, array({1}, {1}, int32), {0}, {1, 2})),
            (std::vector<float>{3, 4}));
  EXPECT_EQ(values<float>(slice(a, array({5, 5}, {2}, int32), {0, 1}, {1, 2})),
            (std::vector<float>{4, 5}));
  array u = slice_update(zeros({3, 3}), ones({2, 2}), array({1, 1}, {2}, int32), {0, 1});
  EXPECT_EQ(values<float>(u), (std::vector<float>{0, 0, 0, 0, 1, 1, 0, 1, 1}));
}

TEST(Sort, ValuesIndicesAndNaNLast) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  array a({3.0f, nan, 1.0f, -2.0f, 1.0f}, {5});
  std::vector<float> s = values<float>(sort(a, 0));
  EXPECT_EQ(s[0], -2.0f);
  EXPECT_EQ(s[3], 3.0f);
  EXPECT_TRUE(std::isnan(s[4]));
  EXPECT_EQ(values<uint32_t>(argsort(a, 0)), (std::vector<uint32_t>{3, 2, 4, 0, 1}));
  std::vector<float> t = values<float>(topk(array({5.0f, 1.0f, 4.0f, 2.0f}, {4}), 2, 0));
  std::sort(t.begin(), t.end());
  EXPECT_EQ(t, (std::vector<float>{4, 5}));
  EXPECT_THROW(sort(a, 1), std::out_of_range);
  EXPECT_THROW(partition(a, 5, 0), std::invalid_argument);
}

TEST(Scan, ForwardReverseExclusiveAndDtypes) {
  array a({1, 2, 3, 4}, {4}, int32);
  EXPECT_EQ(values<int32_t>(cumsum(a)), (std::vector<int32_t>{1, 3, 6, 10}));
  EXPECT_EQ(values<int32_t>(cumsum(a, 0, true, false)), (std::vector<int32_t>{9, 7, 4, 0}));
  EXPECT_EQ(values<int32_t>(cumprod(a)), (std::vector<int32_t>{1, 2, 6, 24}));
  EXPECT_EQ(cumsum(array({true, true}, {2}, bool_)).dtype(), int32);
  EXPECT_EQ(logcumsumexp(a).dtype(), float32);
  array m = iota({2, 3});
  EXPECT_EQ(values<float>(cummax(m, 0, true)), (std::vector<float>{3, 4, 5, 3, 4, 5}));
  EXPECT_THROW(cumsum(m, 2), std::out_of_range);
}

TEST(Scan, CumprodGradientWithZeros) {
  auto fn = [](const std::vector<array>& x) { return std::vector<array>{sum(cumprod(x[0], 0))}; };
  auto [outs, grads] = vjp(fn, {array({2.0f, 0.0f, 3.0f}, {3})}, {array(1.0f)});
  // out = {2, 0, 0}: d/dx0 = 1, d/dx1 = 2 + 2*3, d/dx2 = 0
  EXPECT_EQ(values<float>(grads[0]), (std::vector<float>{1, 8, 0}));
}

TEST(Selection, SearchSortedUniqueMedian) {
  array seq({1.0f, 2.0f, 2.0f, 4.0f}, {4});
  array vals({0.0f, 2.0f, 3.0f, 5.0f}, {4});
  EXPECT_EQ(values<uint32_t>(searchsorted(seq, vals)), (std::vector<uint32_t>{0, 1, 3, 4}));
  EXPECT_EQ(values<uint32_t>(searchsorted(seq, vals, true)), (std::vector<uint32_t>{0, 3, 3, 4}));
  auto u = unique(array({2, 1, 2, 3, 1}, {5}, int32), 4, true, true, true, array(0));
  EXPECT_EQ(values<int32_t>(u[0]), (std::vector<int32_t>{1, 2, 3, 0}));
  EXPECT_EQ(values<uint32_t>(u[1]), (std::vector<uint32_t>{1, 0, 3, 1}));
  EXPECT_EQ(values<uint32_t>(u[2]), (std::vector<uint32_t>{1, 0, 1, 2, 0}));
  EXPECT_EQ(values<int32_t>(u[3]), (std::vector<int32_t>{2, 2, 1, 0}));
  EXPECT_EQ(values<float>(median(array({1, 2, 3, 4}, {4}, int32), std::vector<int>{})),
            (std::vector<float>{2.5f}));
  EXPECT_THROW(searchsorted(zeros({2, 2}), vals), std::invalid_argument);
}
