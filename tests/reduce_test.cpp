// Reductions: values against double-precision references over dtypes, axes,
// keepdims and layouts; MLX's dtypes, empty-array rules and errors; the
// transforms of Reduce and ArgReduce.
#include "loom/ops/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/primitives/reduce.h"
#include "loom/scheduler/scheduler.h"

using namespace loom;

// Braced axes must name the vector: `sum(a, {1})` would pick the keepdims
// overload.
using Axes = std::vector<int>;

namespace {

// A strided view of `base` (transposes, steps, broadcasts) without depending
// on the shape family.
class TestView : public Primitive {
 public:
  TestView(Stream s, Strides strides, int64_t offset)
      : Primitive(s), strides_(std::move(strides)), offset_(offset) {}
  void eval_cpu(const std::vector<array>& in, std::vector<array>& out) override {
    int64_t span = 1;
    for (int d = 0; d < out[0].ndim(); ++d) span += (out[0].shape(d) - 1) * strides_[d];
    Flags flags{false, false, false};
    out[0].copy_shared_buffer(in[0], strides_, flags, out[0].size() == 0 ? 0 : span, offset_);
  }
  const char* name() const override { return "TestView"; }

 private:
  Strides strides_;
  int64_t offset_;
};

array view(const array& base, Shape shape, Strides strides, int64_t offset = 0) {
  return array(
      std::move(shape), base.dtype(),
      std::make_shared<TestView>(default_stream(default_device()), std::move(strides), offset),
      {base});
}

// The transpose of a row-major array by `perm`.
array permuted(const array& a, const std::vector<int>& perm) {
  Strides rm = row_major_strides(a.shape());
  Shape shape;
  Strides strides;
  for (int p : perm) {
    shape.push_back(a.shape(p));
    strides.push_back(rm[p]);
  }
  return view(a, shape, strides);
}

// Elements of any array in row-major logical order, as doubles.
std::vector<double> values(array a) {
  a.eval();
  std::vector<double> out;
  out.reserve(a.size());
  const int nd = a.ndim();
  std::vector<int> idx(nd, 0);
  for (size_t i = 0; i < a.size(); ++i) {
    int64_t off = 0;
    for (int d = 0; d < nd; ++d) off += idx[d] * a.strides()[d];
    out.push_back(cast_element<double>(a.data<char>() + off * a.itemsize(), a.dtype()));
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < a.shape(d)) break;
      idx[d] = 0;
    }
  }
  return out;
}

// Uniform values in [lo, hi), whole numbers for integer dtypes or when asked.
array random_array(const Shape& shape, Dtype dtype, uint32_t seed, double lo = -2.0,
                   double hi = 2.0, bool whole = false) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(shape_size(shape));
  whole |= !is_inexact(dtype);
  for (auto& x : v) x = whole ? std::floor(dist(gen)) : dist(gen);
  return array(v, shape, dtype);
}

enum class Op { Sum, Prod, Max, Min, All, Any };

// Reference reduction in double over `axes` of a row-major value vector.
std::vector<double> reference(const std::vector<double>& v, const Shape& shape,
                              const std::vector<int>& axes, Op op) {
  const int nd = static_cast<int>(shape.size());
  std::vector<bool> reduced(nd, false);
  for (int ax : axes) reduced[ax < 0 ? ax + nd : ax] = true;
  std::vector<int64_t> out_strides(nd, 0);
  int64_t out_size = 1;
  for (int d = nd - 1; d >= 0; --d) {
    if (!reduced[d]) {
      out_strides[d] = out_size;
      out_size *= shape[d];
    }
  }
  double init = 0;
  switch (op) {
    case Op::Sum:
      init = 0;
      break;
    case Op::Prod:
      init = 1;
      break;
    case Op::Max:
      init = -std::numeric_limits<double>::infinity();
      break;
    case Op::Min:
      init = std::numeric_limits<double>::infinity();
      break;
    case Op::All:
      init = 1;
      break;
    case Op::Any:
      init = 0;
      break;
  }
  std::vector<double> out(out_size, init);
  std::vector<int> idx(nd, 0);
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t o = 0;
    for (int d = 0; d < nd; ++d) o += idx[d] * out_strides[d];
    double x = v[i];
    double& r = out[o];
    switch (op) {
      case Op::Sum:
        r += x;
        break;
      case Op::Prod:
        r *= x;
        break;
      case Op::Max:
        r = (std::isnan(r) || std::isnan(x)) ? NAN : std::max(r, x);
        break;
      case Op::Min:
        r = (std::isnan(r) || std::isnan(x)) ? NAN : std::min(r, x);
        break;
      case Op::All:
        r = (r != 0 && x != 0) ? 1 : 0;
        break;
      case Op::Any:
        r = (r != 0 || x != 0) ? 1 : 0;
        break;
    }
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

array apply(Op op, const array& a, const std::vector<int>& axes, bool keepdims) {
  switch (op) {
    case Op::Sum:
      return sum(a, axes, keepdims);
    case Op::Prod:
      return prod(a, axes, keepdims);
    case Op::Max:
      return max(a, axes, keepdims);
    case Op::Min:
      return min(a, axes, keepdims);
    case Op::All:
      return all(a, axes, keepdims);
    case Op::Any:
      return any(a, axes, keepdims);
  }
  return a;
}

Shape expected_shape(const Shape& shape, const std::vector<int>& axes, bool keepdims) {
  Shape out;
  const int nd = static_cast<int>(shape.size());
  for (int d = 0; d < nd; ++d) {
    bool r = std::find(axes.begin(), axes.end(), d) != axes.end() ||
             std::find(axes.begin(), axes.end(), d - nd) != axes.end();
    if (!r) {
      out.push_back(shape[d]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  return out;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], rtol * (1 + std::abs(want[i]))) << what << " at " << i;
    }
  }
}

// Checks one reduction of `a` (any layout) against the reference.
void check(Op op, const array& a, const std::vector<int>& axes, bool keepdims, double rtol,
           const std::string& what) {
  array r = apply(op, a, axes, keepdims);
  EXPECT_EQ(r.shape(), expected_shape(a.shape(), axes, keepdims)) << what;
  std::vector<double> ref = reference(values(a), a.shape(), axes, op);
  expect_close(values(r), ref, rtol, what);
}

const std::vector<Op> kOps = {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::All, Op::Any};

std::vector<std::vector<int>> axis_subsets(int nd) {
  std::vector<std::vector<int>> out;
  for (int mask = 1; mask < (1 << nd); ++mask) {
    std::vector<int> axes;
    for (int d = 0; d < nd; ++d) {
      if (mask & (1 << d)) axes.push_back(d);
    }
    out.push_back(axes);
  }
  return out;
}

template <typename F>
void expect_error(F&& f, const std::string& message) {
  try {
    f();
    FAIL() << "expected: " << message;
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

} // namespace

TEST(Reduce, ResultDtypesMatchMlx) {
  struct Row {
    Dtype in, sum_prod;
  };
  // sum and prod widen small integers and bool to 32 bits.
  const std::vector<Row> rows = {{bool_, int32},     {uint8, uint32},       {uint16, uint32},
                                 {uint32, uint32},   {uint64, uint64},      {int8, int32},
                                 {int16, int32},     {int32, int32},        {int64, int64},
                                 {float16, float16}, {bfloat16, bfloat16},  {float32, float32},
                                 {float64, float64}, {complex64, complex64}};
  for (const Row& row : rows) {
    array a = random_array({2, 3}, row.in, 1, 0, 3);
    EXPECT_EQ(sum(a).dtype(), row.sum_prod) << row.in;
    EXPECT_EQ(prod(a, Axes{1}).dtype(), row.sum_prod) << row.in;
    EXPECT_EQ(max(a).dtype(), row.in);
    EXPECT_EQ(min(a, Axes{0}).dtype(), row.in);
    EXPECT_EQ(all(a).dtype(), bool_);
    EXPECT_EQ(any(a, Axes{1}).dtype(), bool_);
    EXPECT_EQ(argmax(a).dtype(), uint32);
    EXPECT_EQ(argmin(a, 1).dtype(), uint32);
    // Every kernel runs for every dtype.
    for (Op op : kOps) apply(op, a, {1}, false).eval();
    argmax(a, 0).eval();
    argmin(a).eval();
  }
}

TEST(Reduce, Float32AllAxesAndKeepdims) {
  array a = random_array({3, 4, 5}, float32, 7, 0.5, 1.5);
  for (Op op : kOps) {
    for (const auto& axes : axis_subsets(3)) {
      for (bool keep : {false, true}) {
        check(op, a, axes, keep, 1e-5, "op " + std::to_string(int(op)));
      }
    }
  }
}

TEST(Reduce, NegativeAndUnsortedAxes) {
  array a = random_array({3, 4, 5}, float32, 8);
  check(Op::Sum, a, {-1}, false, 1e-5, "sum -1");
  check(Op::Max, a, {2, -3}, true, 0, "max 2,-3");
  check(Op::Min, a, {-2, 0}, false, 0, "min -2,0");
}

TEST(Reduce, EveryDtypeValues) {
  for (Dtype dt : {uint8, uint16, uint32, uint64, int8, int16, int32, int64, float16, bfloat16,
                   float32, float64}) {
    // Small values so products stay in range in every type.
    bool fp = is_floating_point(dt);
    array a = random_array({3, 4}, dt, 3, fp ? 0.5 : 0, fp ? 1.5 : 3);
    double tol = (dt == float16 || dt == bfloat16) ? 1e-2 : 1e-6;
    for (Op op : kOps) {
      for (const auto& axes : axis_subsets(2)) check(op, a, axes, false, tol, "dtype");
    }
  }
}

TEST(Reduce, SmallIntegerSumsWiden) {
  array i8({-100, -100, -100}, {3}, int8);
  array s = sum(i8);
  EXPECT_EQ(s.dtype(), int32);
  EXPECT_EQ(s.item<int>(), -300);
  array u8({200, 200}, {2}, uint8);
  EXPECT_EQ(sum(u8).item<int64_t>(), 400);
  EXPECT_EQ(prod(array({-100, 100}, {2}, int8)).item<int>(), -10000);
  array b({true, true, false}, {3}, bool_);
  EXPECT_EQ(sum(b).dtype(), int32);
  EXPECT_EQ(sum(b).item<int>(), 2);
  // int32 sums wrap like MLX's.
  array big({1 << 30, 1 << 30, 1 << 30}, {3}, int32);
  EXPECT_EQ(sum(big).item<int>(), -(1 << 30));
  array u64({uint64_t(1) << 63, uint64_t(7)}, {2}, uint64);
  EXPECT_EQ(sum(u64).item<uint64_t>(), (uint64_t(1) << 63) + 7);
  EXPECT_EQ(max(u64).item<uint64_t>(), uint64_t(1) << 63);
}

TEST(Reduce, HalfTypesAccumulateInFloat) {
  std::vector<float> v(5000, 1.0f);
  EXPECT_EQ(sum(array(v, {5000}, float16)).item<float>(), 5000.0f);
  // 5000 rounds to 4992 in bfloat16.
  EXPECT_EQ(sum(array(v, {5000}, bfloat16)).item<float>(), 4992.0f);
  array cols(v, {1000, 5}, float16);
  for (double x : values(sum(cols, Axes{0}))) EXPECT_EQ(x, 1000.0);
}

TEST(Reduce, NonContiguousInputs) {
  array base = random_array({4, 5, 6}, float32, 11, 0.5, 1.5);
  // Every transpose of a (4, 5, 6) array.
  std::vector<int> perm = {0, 1, 2};
  do {
    array t = permuted(base, perm);
    for (Op op : kOps) {
      for (const auto& axes : axis_subsets(3)) {
        for (bool keep : {false, true}) check(op, t, axes, keep, 1e-5, "transposed");
      }
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
  // Every other element along the last two axes, starting at an offset.
  array stepped = view(base, {4, 2, 3}, {30, 12, 2}, 1);
  for (Op op : kOps) {
    for (const auto& axes : axis_subsets(3)) check(op, stepped, axes, false, 1e-5, "stepped");
  }
  // A broadcast (stride 0) axis.
  array row = random_array({7}, float32, 12);
  array bcast = view(row, {5, 7}, {0, 1});
  for (Op op : kOps) {
    for (const auto& axes : axis_subsets(2)) check(op, bcast, axes, true, 1e-5, "broadcast");
  }
}

TEST(Reduce, LargeArraysUseEveryPath) {
  // Integer-valued floats sum exactly, whatever the order.
  array big = random_array({1 << 20}, float32, 21, 0, 8, true);
  check(Op::Sum, big, {0}, false, 1e-12, "full");
  check(Op::Max, big, {0}, false, 0, "full max");
  array rows = random_array({512, 1024}, float32, 22, 0, 8, true);
  check(Op::Sum, rows, {1}, false, 1e-12, "rows");
  check(Op::Sum, rows, {0}, false, 1e-12, "columns");
  check(Op::Min, rows, {0}, false, 0, "column min");
  // Few outputs, long reductions: partial results per chunk.
  array wide = random_array({3, 1 << 18}, float32, 23, 0, 8, true);
  check(Op::Sum, wide, {1}, false, 1e-12, "wide");
  array tall = random_array({1 << 18, 3}, float32, 24, 0, 8, true);
  check(Op::Sum, tall, {0}, false, 1e-12, "tall");
  check(Op::Max, tall, {0}, true, 0, "tall max");
  // Columns wider than one tile of outputs, and reduced axes on both sides.
  array cube = random_array({64, 3, 9000}, int32, 25, -50, 50);
  check(Op::Sum, cube, {0, 1}, false, 0, "cube 0,1");
  check(Op::Sum, cube, {0, 2}, false, 0, "cube 0,2");
  check(Op::Max, permuted(cube, {2, 0, 1}), {1}, false, 0, "cube transposed");
  array flags = random_array({300, 700}, bool_, 26, 0, 1);
  check(Op::All, flags, {0}, false, 0, "all");
  check(Op::Any, flags, {1}, false, 0, "any");
}

TEST(Reduce, EveryKernelShape) {
  // Short rows (fixed and other widths), narrow columns (periodic lanes, with
  // and without a lane count that fills the vector), wide columns of adjacent
  // and of distant rows, and long runs, for several types.
  const std::vector<std::pair<Shape, std::vector<int>>> cases = {
      {{999, 2}, {1}},        {{999, 3}, {1}},     {{999, 4}, {1}},      {{999, 8}, {1}},
      {{999, 13}, {1}},       {{999, 64}, {1}},    {{999, 4}, {0}},      {{999, 7}, {0}},
      {{999, 16}, {0}},       {{6, 50, 100}, {1}}, {{6, 50, 5000}, {1}}, {{7, 9, 3}, {0, 2}},
      {{5000, 3, 2}, {0, 2}}, {{2, 70000}, {1}},   {{70000, 2}, {0}},    {{3, 5000, 3}, {1}},
      {{40, 1700}, {0}},      {{1700, 40}, {1}}};
  for (Dtype dt : {float32, int32, float16, bfloat16, float64, uint8}) {
    const bool fp = is_floating_point(dt);
    double tol = (dt == float16 || dt == bfloat16) ? 1e-2 : 1e-5;
    for (const auto& [shape, axes] : cases) {
      array a = random_array(shape, dt, 71, fp ? -4 : 0, 4, true);
      for (Op op : {Op::Sum, Op::Max, Op::Min, Op::Any}) {
        check(op, a, axes, false, op == Op::Sum ? tol : 0, "kernel shape");
      }
      if (shape.size() == 2) {
        check(Op::Sum, permuted(a, {1, 0}), axes, true, tol, "kernel shape transposed");
      }
    }
  }
  // Products over short rows and narrow columns, in a range that stays exact.
  array p = random_array({500, 4}, float64, 72, 1, 3, true);
  check(Op::Prod, p, {1}, false, 1e-12, "prod rows");
  check(Op::Prod, random_array({30, 4}, float64, 73, 1, 3, true), {0}, false, 1e-12,
        "prod columns");
}

TEST(Reduce, ArgReduceKernelShapes) {
  for (Dtype dt : {float32, float16, int8, float64}) {
    for (const Shape& shape :
         {Shape{3000, 5}, Shape{5, 3000}, Shape{70, 5000}, Shape{2, 300, 2}, Shape{200000}}) {
      array base = random_array(shape, dt, 81, -100, 100, true);
      std::vector<array> layouts = {base};
      if (shape.size() == 2) layouts.push_back(permuted(base, {1, 0}));
      for (const array& a : layouts) {
        std::vector<double> v = values(a);
        Strides st = row_major_strides(a.shape());
        for (int axis = 0; axis < a.ndim(); ++axis) {
          std::vector<double> got = values(argmax(a, axis));
          std::vector<double> got_min = values(argmin(a, axis));
          // Reference over the output positions in row-major order.
          Shape out_shape = a.shape();
          out_shape[axis] = 1;
          size_t k = 0;
          std::vector<int> idx(a.ndim(), 0);
          for (size_t o = 0; o < shape_size(out_shape); ++o, ++k) {
            int64_t off = 0;
            for (int d = 0; d < a.ndim(); ++d) off += idx[d] * st[d];
            int best = 0, worst = 0;
            for (int n = 1; n < a.shape(axis); ++n) {
              double x = v[off + n * st[axis]];
              if (x > v[off + best * st[axis]]) best = n;
              if (x < v[off + worst * st[axis]]) worst = n;
            }
            EXPECT_EQ(got[k], best);
            EXPECT_EQ(got_min[k], worst);
            for (int d = a.ndim() - 1; d >= 0; --d) {
              if (++idx[d] < out_shape[d]) break;
              idx[d] = 0;
            }
          }
        }
        EXPECT_EQ(argmax(a).item<uint32_t>(),
                  static_cast<uint32_t>(std::max_element(v.begin(), v.end()) - v.begin()));
      }
    }
  }
}

TEST(Reduce, NanPropagatesThroughMaxMin) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  array x({1.0f, nan, 3.0f, nan});
  EXPECT_TRUE(std::isnan(max(x).item<float>()));
  EXPECT_TRUE(std::isnan(min(x).item<float>()));
  array m({1.0f, nan, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3});
  auto by_row = values(max(m, Axes{1}));
  EXPECT_TRUE(std::isnan(by_row[0]));
  EXPECT_EQ(by_row[1], 6.0);
  auto by_col = values(min(m, Axes{0}));
  EXPECT_EQ(by_col[0], 1.0);
  EXPECT_TRUE(std::isnan(by_col[1]));
  EXPECT_EQ(by_col[2], 3.0);
  // NaN at the end of a long vectorised run.
  std::vector<float> v(10000, 1.0f);
  v.back() = nan;
  EXPECT_TRUE(std::isnan(max(array(v, {10000})).item<float>()));
  EXPECT_EQ(max(array({-std::numeric_limits<float>::infinity()})).item<float>(),
            -std::numeric_limits<float>::infinity());
}

TEST(Reduce, ComplexOrdersLexicographically) {
  using c = complex64_t;
  array z(std::vector<c>{c(1, 2), c(3, 1), c(3, 4)}, {3}, complex64);
  EXPECT_EQ(max(z).item<c>(), c(3, 4));
  EXPECT_EQ(min(z).item<c>(), c(1, 2));
  EXPECT_EQ(sum(z).item<c>(), c(7, 7));
  EXPECT_EQ(prod(array(std::vector<c>{c(1, 2), c(3, 1)}, {2}, complex64)).item<c>(), c(1, 7));
  EXPECT_FALSE(all(array(std::vector<c>{c(1, 2), c(0, 0)}, {2}, complex64)).item<bool>());
  EXPECT_EQ(argmax(z).item<uint32_t>(), 2u);
}

TEST(Reduce, EmptyArrays) {
  array e = array(std::vector<float>{}, {0, 3});
  EXPECT_EQ(sum(e).item<float>(), 0.0f);
  EXPECT_EQ(prod(e).item<float>(), 1.0f);
  EXPECT_TRUE(all(e).item<bool>());
  EXPECT_FALSE(any(e).item<bool>());
  array s0 = sum(e, Axes{0});
  EXPECT_EQ(s0.shape(), Shape({3}));
  EXPECT_EQ(values(s0), std::vector<double>({0, 0, 0}));
  EXPECT_EQ(sum(e, Axes{1}).shape(), Shape({0}));
  EXPECT_EQ(prod(array(std::vector<int8_t>{}, {0}, int8)).item<int>(), 1);
  // max/min of an empty extent into a non-empty result raise (at the op).
  expect_error([&] { max(e); }, "[max] Cannot max reduce over axis 0 with size 0.");
  expect_error([&] { min(e, Axes{0}); }, "[min] Cannot min reduce over axis 0 with size 0.");
  array e2 = array(std::vector<float>{}, {3, 0});
  expect_error([&] { max(e2); }, "[max] Cannot max reduce over axis 1 with size 0.");
  array e3 = array(std::vector<float>{}, {2, 3, 0});
  expect_error([&] { max(e3, Axes{0, 2}); }, "[max] Cannot max reduce over axis 2 with size 0.");
  // ...but an empty result is fine.
  EXPECT_EQ(max(e, Axes{1}).shape(), Shape({0}));
  EXPECT_EQ(max(array(std::vector<float>{}, {2, 0, 3}), Axes{0}).shape(), Shape({0, 3}));
  max(e, Axes{1}).eval();
  expect_error([&] { argmax(e); }, "[argmax] Cannot argmax reduce zero size array.");
  expect_error([&] { argmin(e, 1); }, "[argmin] Cannot argmin reduce zero size array.");
}

TEST(Reduce, ScalarsAndEmptyAxisLists) {
  array s(3.0f);
  EXPECT_EQ(sum(s).item<float>(), 3.0f);
  EXPECT_EQ(max(s).shape(), Shape{});
  EXPECT_EQ(argmax(s).item<uint32_t>(), 0u);
  EXPECT_EQ(argmax(s, true).shape(), Shape{});
  // No axes: the input itself (MLX keeps even int8 for sum).
  array i8({1, 2}, {2}, int8);
  EXPECT_EQ(sum(i8, std::vector<int>{}).dtype(), int8);
  EXPECT_TRUE(sum(i8, std::vector<int>{}).is_same(i8));
  EXPECT_EQ(sum(array(3, int8)).dtype(), int8);
  // ...except all/any, which convert to bool.
  array f({0.0f, 2.0f});
  array b = all(f, std::vector<int>{});
  EXPECT_EQ(b.dtype(), bool_);
  EXPECT_EQ(values(b), std::vector<double>({0, 1}));
}

TEST(Reduce, AxisErrors) {
  array a = random_array({2, 3}, float32, 1);
  for (auto f :
       {+[](const array& x) { sum(x, Axes{3}); }, +[](const array& x) { prod(x, Axes{3}); },
        +[](const array& x) { max(x, Axes{3}); }, +[](const array& x) { min(x, Axes{3}); },
        +[](const array& x) { all(x, Axes{3}); }, +[](const array& x) { any(x, Axes{3}); }}) {
    EXPECT_THROW(f(a), std::out_of_range);
  }
  // MLX's wording, without the op name.
  expect_error([&] { sum(a, Axes{3}); }, "[sum] Invalid axis 3 for array with 2 dimensions.");
  expect_error([&] { max(a, Axes{-3}); }, "[max] Invalid axis -3 for array with 2 dimensions.");
  expect_error([&] { argmax(a, 2); }, "[argmax] Invalid axis 2 for array with 2 dimensions.");
  EXPECT_THROW(argmin(a, -3), std::out_of_range);
  expect_error([&] { mean(a, Axes{3}); },
               "[mean] axis 3 is out of bounds for array with 2 dimensions.");
  EXPECT_THROW(mean(a, Axes{-3}), std::out_of_range);
  expect_error([&] { sum(a, Axes{0, 0}); }, "[sum] Duplicate axes detected in reduction.");
  expect_error([&] { any(a, Axes{1, -1}); }, "[any] Duplicate axes detected in reduction.");
  EXPECT_THROW(mean(a, Axes{1, -1}), std::invalid_argument);
  EXPECT_THROW(sum(array(1.0f), Axes{0}), std::out_of_range);
}

TEST(Reduce, ArgReduceValuesAndTies) {
  array t({1, 3, 3, 2}, {4}, int32);
  EXPECT_EQ(argmax(t).item<uint32_t>(), 1u);
  EXPECT_EQ(argmin(array({2, 1, 1, 2}, {4}, int32)).item<uint32_t>(), 1u);
  // Every axis, keepdims, and layouts: the first index of the extreme.
  array base = random_array({5, 6, 7}, int32, 31, 0, 3); // many ties
  std::vector<int> perm = {0, 1, 2};
  do {
    array a = permuted(base, perm);
    std::vector<double> v = values(a);
    for (int axis = 0; axis < 3; ++axis) {
      for (bool is_max : {true, false}) {
        array r = is_max ? argmax(a, axis, true) : argmin(a, axis, true);
        Shape want_shape = a.shape();
        want_shape[axis] = 1;
        ASSERT_EQ(r.shape(), want_shape);
        std::vector<double> got = values(r);
        // Reference: scan the axis of the row-major values.
        Strides st = row_major_strides(a.shape());
        size_t k = 0;
        for (int i = 0; i < want_shape[0]; ++i) {
          for (int j = 0; j < want_shape[1]; ++j) {
            for (int l = 0; l < want_shape[2]; ++l, ++k) {
              int64_t off = i * st[0] + j * st[1] + l * st[2];
              int best = 0;
              for (int n = 1; n < a.shape(axis); ++n) {
                double x = v[off + n * st[axis]];
                double b = v[off + best * st[axis]];
                if (is_max ? x > b : x < b) best = n;
              }
              EXPECT_EQ(got[k], best);
            }
          }
        }
      }
    }
    // Flattened, in row-major order of the (possibly transposed) array.
    size_t want = std::max_element(v.begin(), v.end()) - v.begin();
    EXPECT_EQ(argmax(a).item<uint32_t>(), want);
    want = std::min_element(v.begin(), v.end()) - v.begin();
    EXPECT_EQ(argmin(a, true).item<uint32_t>(), want);
    EXPECT_EQ(argmin(a, true).shape(), Shape({1, 1, 1}));
  } while (std::next_permutation(perm.begin(), perm.end()));
  EXPECT_EQ(argmax(base, 1).shape(), Shape({5, 7}));
}

TEST(Reduce, ArgReduceNanAndLongRows) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(argmax(array({1.0f, nan, 3.0f, nan})).item<uint32_t>(), 1u);
  EXPECT_EQ(argmin(array({1.0f, nan, 3.0f, nan})).item<uint32_t>(), 1u);
  EXPECT_EQ(argmax(array({nan, 1.0f})).item<uint32_t>(), 0u);
  EXPECT_EQ(argmax(array({std::numeric_limits<float>::infinity(), nan})).item<uint32_t>(), 1u);
  array m({1.0f, nan, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3});
  EXPECT_EQ(values(argmax(m, 1)), std::vector<double>({1, 2}));
  EXPECT_EQ(values(argmin(m, 0)), std::vector<double>({0, 0, 0}));
  // Long rows go block by block; the extreme sits in a late block.
  std::vector<float> v(100000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 1000);
  v[77777] = 5000.0f;
  v[88888] = 5000.0f;
  v[99999] = -1.0f;
  array row(v, {100000});
  EXPECT_EQ(argmax(row).item<uint32_t>(), 77777u);
  EXPECT_EQ(argmin(row).item<uint32_t>(), 99999u);
  v[50000] = nan;
  EXPECT_EQ(argmax(array(v, {100000})).item<uint32_t>(), 50000u);
  // float16 and bool compare too.
  EXPECT_EQ(argmax(array({1.0f, 7.0f, 7.0f}, {3}, float16)).item<uint32_t>(), 1u);
  EXPECT_EQ(argmax(array({false, true, true}, {3}, bool_)).item<uint32_t>(), 1u);
}

// --- mean (sum scaled in the result dtype; needs astype and multiply) ---------

TEST(ReduceMean, DtypesAndValues) {
  array i32({1, 2, 3, 4}, {2, 2}, int32);
  array m = mean(i32);
  EXPECT_EQ(m.dtype(), float32);
  EXPECT_FLOAT_EQ(m.item<float>(), 2.5f);
  EXPECT_EQ(mean(array({true, true, false}, {3}, bool_)).dtype(), float32);
  EXPECT_EQ(mean(i32, Axes{1}, true).shape(), Shape({2, 1}));
  EXPECT_EQ(values(mean(i32, Axes{1})), std::vector<double>({1.5, 3.5}));
  // Summed in int32 (wrapping) before the conversion, as MLX.
  array big({1 << 30, 1 << 30, 1 << 30}, {3}, int32);
  EXPECT_FLOAT_EQ(mean(big).item<float>(), static_cast<float>(-(1 << 30)) / 3.0f);
  // float16: sum rounded to float16, times float16(1/n): 63000 -> 63008, /4.
  array h({1000.0f, 1000.0f, 1000.0f, 60000.0f}, {4}, float16);
  EXPECT_EQ(mean(h).dtype(), float16);
  EXPECT_EQ(mean(h).item<float>(), 15752.0f);
  array f = random_array({3, 4, 5}, float32, 5);
  for (const auto& axes : axis_subsets(3)) {
    std::vector<double> s = reference(values(f), f.shape(), axes, Op::Sum);
    double n = 1;
    for (int ax : axes) n *= f.shape(ax);
    for (double& x : s) x /= n;
    expect_close(values(mean(f, axes)), s, 1e-5, "mean");
  }
  EXPECT_TRUE(std::isnan(mean(array(std::vector<float>{}, {0, 3})).item<float>()));
  EXPECT_EQ(mean(array({1, 2}, {2}, int8), std::vector<int>{}).dtype(), float32);
}

// --- transforms ----------------------------------------------------------------

namespace {

// The vjp of a single-input reduction node.
array reduce_vjp(const array& out, const array& cotangent) {
  return out.primitive().vjp(out.inputs(), {cotangent}, {0}, {out})[0];
}

array reduce_jvp(const array& out, const array& tangent) {
  return out.primitive().jvp(out.inputs(), {tangent}, {0})[0];
}

} // namespace

TEST(ReduceGrad, SumVjpJvp) {
  array x = random_array({2, 3, 4}, float32, 41);
  array out = sum(x, Axes{1});
  array cot = random_array({2, 4}, float32, 42);
  array g = reduce_vjp(out, cot);
  EXPECT_EQ(g.shape(), x.shape());
  std::vector<double> gv = values(g), cv = values(cot);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 4; ++k) EXPECT_EQ(gv[i * 12 + j * 4 + k], cv[i * 4 + k]);
    }
  }
  array t = random_array({2, 3, 4}, float32, 43);
  expect_close(values(reduce_jvp(out, t)), reference(values(t), t.shape(), {1}, Op::Sum), 1e-6,
               "sum jvp");
  // keepdims cotangents have the reduced axes already.
  array kept = sum(x, Axes{0, 2}, true);
  EXPECT_EQ(reduce_vjp(kept, random_array({1, 3, 1}, float32, 44)).shape(), x.shape());
}

TEST(ReduceGrad, MaxMinShareTiesAndPropagateNan) {
  array x({1.0f, 3.0f, 3.0f, 2.0f});
  EXPECT_EQ(values(reduce_vjp(max(x), array(1.0f))), std::vector<double>({0, 0.5, 0.5, 0}));
  array y({1.0f, 3.0f, 3.0f, 2.0f, 2.0f, 0.0f}, {2, 3});
  EXPECT_EQ(values(reduce_vjp(min(y, Axes{1}), array({1.0f, 1.0f}))),
            std::vector<double>({1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(values(reduce_vjp(max(y, Axes{1}, true), array({1.0f, 4.0f}, {2, 1}))),
            std::vector<double>({0, 0.5, 0.5, 2, 2, 0}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (double v : values(reduce_vjp(max(array({1.0f, nan, 3.0f})), array(1.0f)))) {
    EXPECT_TRUE(std::isnan(v));
  }
}

TEST(ReduceGrad, MaxJvpTakesFirstExtreme) {
  array x({1.0f, 5.0f, 3.0f, 5.0f, 2.0f, 0.0f}, {2, 3});
  array t({1.0f, 10.0f, 100.0f, 1000.0f, 10000.0f, 100000.0f}, {2, 3});
  EXPECT_EQ(reduce_jvp(max(x), t).item<float>(), 10.0f);
  EXPECT_EQ(values(reduce_jvp(min(x, Axes{1}), t)), std::vector<double>({1, 100000}));
  EXPECT_EQ(values(reduce_jvp(max(x, Axes{0}, true), t)), std::vector<double>({1000, 10, 100}));
}

TEST(ReduceGrad, ProdIsExactWithZerosAndInfinities) {
  auto grad = [](std::vector<float> v) {
    array x(v, {static_cast<int>(v.size())});
    return values(reduce_vjp(prod(x), array(1.0f)));
  };
  EXPECT_EQ(grad({2, 3, 4}), std::vector<double>({12, 8, 6}));
  EXPECT_EQ(grad({2, 0, 4}), std::vector<double>({0, 8, 0}));
  EXPECT_EQ(grad({2, 0, 0}), std::vector<double>({0, 0, 0}));
  const float inf = std::numeric_limits<float>::infinity();
  auto g = grad({inf, 2, 3});
  EXPECT_EQ(g, std::vector<double>({6, inf, inf}));
  // Several axes, against the product of the others in double.
  array x = random_array({2, 3, 2}, float32, 51, 1, 3);
  array out = prod(x, Axes{0, 2});
  std::vector<double> v = values(x);
  std::vector<double> gv = values(reduce_vjp(out, array({1.0f, 1.0f, 1.0f})));
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 2; ++k) {
        double others = 1;
        for (int a = 0; a < 2; ++a) {
          for (int c = 0; c < 2; ++c) {
            if (a != i || c != k) others *= v[a * 6 + j * 2 + c];
          }
        }
        EXPECT_NEAR(gv[i * 6 + j * 2 + k], others, 1e-4 * others);
      }
    }
  }
  // jvp: sum of tangent times the product of the others.
  array p = prod(array({2.0f, 0.0f, 4.0f}));
  EXPECT_EQ(reduce_jvp(p, array({1.0f, 10.0f, 100.0f})).item<float>(), 80.0f);
}

TEST(ReduceGrad, NoGradientThroughIndicesAndLogic) {
  array x({1.0f, 3.0f, 2.0f});
  array am = argmax(x);
  EXPECT_EQ(values(reduce_vjp(am, array(1u))), std::vector<double>({0, 0, 0}));
  array tj = reduce_jvp(am, x);
  EXPECT_EQ(tj.dtype(), uint32);
  EXPECT_EQ(tj.item<uint32_t>(), 0u);
  array al = all(x);
  EXPECT_EQ(values(reduce_vjp(al, array(true))), std::vector<double>({0, 0, 0}));
  EXPECT_EQ(reduce_jvp(any(x, Axes{0}), x).dtype(), bool_);
}

TEST(ReduceVmap, MovesTheMappedAxisOutOfTheReduction) {
  array x = random_array({3, 4, 5}, float32, 61);
  // Mapped axis 1; per sample (3, 5), reducing per-sample axis 1 (batched axis 2).
  auto [outs, axes] = sum(random_array({3, 5}, float32, 1), Axes{1}).primitive().vmap({x}, {1});
  EXPECT_EQ(axes[0], 1);
  EXPECT_EQ(outs[0].shape(), Shape({3, 4}));
  expect_close(values(outs[0]), reference(values(x), x.shape(), {2}, Op::Sum), 1e-5, "vmap");
  // Reducing the axis before the mapped one shifts it left (unless keepdims).
  auto [o2, a2] = max(random_array({3, 5}, float32, 1), Axes{0}).primitive().vmap({x}, {1});
  EXPECT_EQ(a2[0], 0);
  expect_close(values(o2[0]), reference(values(x), x.shape(), {0}, Op::Max), 0, "vmap max");
  auto [o3, a3] = min(random_array({3, 5}, float32, 1), Axes{0}, true).primitive().vmap({x}, {1});
  EXPECT_EQ(a3[0], 1);
  EXPECT_EQ(o3[0].shape(), Shape({1, 4, 5}));
  // ArgReduce along an axis.
  auto [o4, a4] = argmax(random_array({3, 5}, float32, 1), 1).primitive().vmap({x}, {0});
  EXPECT_EQ(a4[0], 0);
  EXPECT_EQ(o4[0].shape(), Shape({3, 4}));
  auto [o5, a5] = argmin(random_array({4, 5}, float32, 1), 0).primitive().vmap({x}, {2});
  EXPECT_EQ(a5[0], 1);
  EXPECT_EQ(o5[0].shape(), Shape({4, 5}));
}

TEST(ReduceVmap, FlattenedArgReducePerSample) {
  array x = random_array({3, 4, 5}, float32, 62);
  auto [outs, axes] = argmax(random_array({3, 5}, float32, 1), true).primitive().vmap({x}, {1});
  EXPECT_EQ(axes[0], 0);
  EXPECT_EQ(outs[0].shape(), Shape({4, 1, 1}));
  std::vector<double> v = values(x);
  std::vector<double> got = values(outs[0]);
  for (int b = 0; b < 4; ++b) {
    int best = 0;
    double best_v = -1e300;
    for (int i = 0; i < 3; ++i) {
      for (int k = 0; k < 5; ++k) {
        double val = v[i * 20 + b * 5 + k];
        if (val > best_v) {
          best_v = val;
          best = i * 5 + k;
        }
      }
    }
    EXPECT_EQ(got[b], best);
  }
}
