// Composite ops (built from other ops in loom/ops/*): values against NumPy
// references, the numerics of round/logaddexp/log1p/log2 (ties, huge and tiny
// magnitudes, signed zeros, infinities, NaN), MLX 0.32.4's dtypes and empty-array
// rules, the errors, and gradients through them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <string>
#include <vector>

#include "loom/backend/cpu/copy.h"
#include "loom/ops.h"
#include "loom/primitives/primitive.h"

using namespace loom;

namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

using Axes = std::vector<int>;

template <typename T>
std::vector<T> values(array a) {
  a.eval();
  array c = cpu::ensure_row_contiguous(a);
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.size());
}

template <typename T>
void expect_close(const std::vector<T>& got, const std::vector<T>& want, double rtol = 1e-6,
                  double atol = 1e-7) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    double g = static_cast<double>(got[i]);
    double w = static_cast<double>(want[i]);
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << "at " << i << ": got " << g << ", want NaN";
    } else if (std::isinf(w)) {
      EXPECT_EQ(g, w) << "at " << i;
    } else {
      EXPECT_NEAR(g, w, atol + rtol * std::abs(w)) << "at " << i;
    }
  }
}

// Bitwise equality (signed zeros and all).
void expect_bits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else {
      EXPECT_EQ(got[i], want[i]) << "at " << i;
      EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i])) << "sign at " << i;
    }
  }
}

array f32(std::vector<float> v) {
  int n = static_cast<int>(v.size());
  return array(v, {n}, float32);
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

} // namespace

// --- element-wise -------------------------------------------------------------

TEST(Round, HalvesToEvenAndKeepsLargeValuesAndSignedZeros) {
  array x = f32({0.5f, 1.5f, 2.5f, -0.5f, -2.5f, -0.4f, 0.4f, -0.0f, 8388609.0f, 16777215.0f, 1e30f,
                 kInf, -kInf, kNan, 2.49999988f, 1e-40f, -1e-40f});
  expect_bits(values<float>(round(x)),
              {0.0f, 2.0f, 2.0f, -0.0f, -2.0f, -0.0f, 0.0f, -0.0f, 8388609.0f, 16777215.0f, 1e30f,
               kInf, -kInf, kNan, 2.0f, 0.0f, -0.0f});
}

TEST(Round, Decimals) {
  expect_close(values<float>(round(f32({1.2345f, -2.675f, 123.5f}), 2)), {1.23f, -2.68f, 123.5f},
               1e-6);
  // Negative decimals round integers (ties to even) and keep their dtype.
  array i = array({15, 25, -35, 44}, {4}, int32);
  array r = round(i, -1);
  EXPECT_EQ(r.dtype(), int32);
  EXPECT_EQ(values<int32_t>(r), (std::vector<int32_t>{20, 20, -40, 40}));
  EXPECT_EQ(values<int32_t>(round(i, 0)), (std::vector<int32_t>{15, 25, -35, 44}));
}

TEST(Round, Float64AndHalf) {
  array d = array(std::vector<double>{2.5, 4503599627370497.0, -0.3}, {3}, float64);
  auto v = values<double>(round(d));
  EXPECT_EQ(v[0], 2.0);
  EXPECT_EQ(v[1], 4503599627370497.0);
  EXPECT_TRUE(v[2] == 0.0 && std::signbit(v[2]));
  array h = astype(f32({0.5f, 1.5f, 2047.0f}), float16);
  EXPECT_EQ(round(h).dtype(), float16);
  expect_close(values<float>(astype(round(h), float32)), {0.0f, 2.0f, 2047.0f});
}

TEST(Round, Complex) {
  array z = array(std::vector<complex64_t>{{1.5f, 2.5f}, {-0.4f, 3.6f}}, {2}, complex64);
  array r = round(z);
  EXPECT_EQ(r.dtype(), complex64);
  auto v = values<complex64_t>(r);
  EXPECT_EQ(v[0], complex64_t(2.0f, 2.0f));
  EXPECT_EQ(v[1], complex64_t(0.0f, 4.0f));
}

TEST(Round, HasZeroGradient) {
  auto [out, g] = vjp([](const std::vector<array>& x) { return std::vector<array>{round(x[0])}; },
                      {f32({0.3f, 1.7f})}, {f32({1.0f, 1.0f})});
  expect_close(values<float>(g[0]), {0.0f, 0.0f});
}

TEST(LogAddExp, SmallDifferencesAndInfinities) {
  // log(1 + e^-20) = 2.0611536e-9: log1p, not log(1 + x), keeps it.
  expect_close(values<float>(logaddexp(f32({0.0f}), f32({-20.0f}))), {2.0611536e-9f}, 1e-6, 0);
  array a = array(std::vector<double>{0.0, 1e-300}, {2}, float64);
  array b = array(std::vector<double>{-30.0, 1e-300}, {2}, float64);
  expect_close(values<double>(logaddexp(a, b)), {9.357622968840175e-14, 0.6931471805599453}, 1e-12,
               0);
  expect_close(values<float>(logaddexp(f32({-kInf, kInf, -kInf, kNan, 1000.0f, -kInf}),
                                       f32({-kInf, kInf, 3.0f, 1.0f, 1000.0f, kInf}))),
               {-kInf, kInf, 3.0f, kNan, 1000.6931472f, kInf});
  // Integers compute in float32.
  EXPECT_EQ(logaddexp(array(1), array(2)).dtype(), float32);
}

TEST(LogAddExp, Gradient) {
  auto [out, g] =
      vjp([](const std::vector<array>& x) { return std::vector<array>{logaddexp(x[0], x[1])}; },
          {f32({0.0f, 3.0f}), f32({0.0f, -1.0f})}, {f32({1.0f, 1.0f})});
  // d/da = sigmoid(a - b).
  expect_close(values<float>(g[0]), {0.5f, 1.0f / (1.0f + std::exp(-4.0f))}, 1e-6);
  expect_close(values<float>(g[1]), {0.5f, 1.0f / (1.0f + std::exp(4.0f))}, 1e-5);
}

TEST(Log1p, TinyHugeAndSpecial) {
  expect_close(
      values<float>(log1p(f32({1e-10f, -1e-7f, 1.0f, 1e30f, -1.0f, kInf, kNan, -2.0f, -kInf}))),
      {1e-10f, -1.00000005e-7f, 0.69314718f, 69.0775528f, -kInf, kInf, kNan, kNan, kNan}, 2e-7, 0);
}

TEST(LogBase, HalfPrecisionWithinHalfAnUlp) {
  // Every finite positive float16 (from its bits) against the exact result.
  std::vector<float> xs;
  for (int b = 1; b < 0x7c00; ++b) {
    int exp = (b >> 10) & 0x1f;
    int man = b & 0x3ff;
    xs.push_back(exp == 0 ? std::ldexp(static_cast<float>(man), -24)
                          : std::ldexp(1.0f + man / 1024.0f, exp - 15));
  }
  array hx = astype(f32(xs), float16);
  for (double base : {2.0, 10.0}) {
    array out = base == 2.0 ? log2(hx) : log10(hx);
    EXPECT_EQ(out.dtype(), float16);
    auto got = values<float>(astype(out, float32));
    double worst = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      double exact = std::log(static_cast<double>(xs[i])) / std::log(base);
      if (exact == 0) {
        EXPECT_EQ(got[i], 0.0f);
        continue;
      }
      int e;
      std::frexp(exact, &e); // |exact| in [2^(e-1), 2^e)
      double ulp = std::ldexp(1.0, std::max(e - 1, -14) - 10);
      worst = std::max(worst, std::abs(got[i] - exact) / ulp);
    }
    // Correct rounding is 0.5 ulp; one float32 rounding first adds ~2^-13.
    EXPECT_LE(worst, 0.5002) << "base " << base;
  }
}

TEST(LogBase, Float32Values) {
  expect_close(values<float>(log2(f32({1.0f, 8.0f, 0.0f, kInf}))), {0.0f, 3.0f, -kInf, kInf});
  expect_close(values<float>(log10(f32({1000.0f, 1e-5f}))), {3.0f, -5.0f}, 1e-6);
  EXPECT_EQ(log2(array(8)).dtype(), float32);
}

TEST(Predicates, FiniteAndInfinities) {
  array x = f32({1.0f, kInf, -kInf, kNan});
  EXPECT_EQ(values<bool>(isfinite(x)), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(values<bool>(isposinf(x)), (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(values<bool>(isneginf(x)), (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ(values<bool>(isposinf(array({1, 2}, {2}, int32))), (std::vector<bool>{false, false}));
}

TEST(Elementwise, ClipTruncNanToNumAngles) {
  expect_close(values<float>(clip(f32({-2.0f, 0.5f, 3.0f}), f32({0.0f}), f32({1.0f}))),
               {0.0f, 0.5f, 1.0f});
  expect_close(values<float>(clip(f32({-2.0f, 3.0f}), std::nullopt, f32({1.0f}))), {-2.0f, 1.0f});
  EXPECT_NE(error_of([] { clip(f32({1.0f}), std::nullopt, std::nullopt); }), "");
  expect_bits(values<float>(trunc(f32({-1.7f, 1.7f, -0.2f}))), {-1.0f, 1.0f, -0.0f});
  expect_close(values<float>(nan_to_num(f32({kNan, kInf, -kInf, 1.0f}))),
               {0.0f, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), 1.0f});
  expect_close(values<float>(nan_to_num(f32({kNan, kInf}), 5.0f, 7.0f)), {5.0f, 7.0f});
  expect_close(values<float>(degrees(f32({static_cast<float>(M_PI)}))), {180.0f}, 1e-6);
  expect_close(values<float>(radians(f32({180.0f}))), {static_cast<float>(M_PI)}, 1e-6);
  auto qr = divmod(array({7, -7}, {2}, int32), array(2));
  EXPECT_EQ(values<int32_t>(qr[0]), (std::vector<int32_t>{3, -4}));
  EXPECT_EQ(values<int32_t>(qr[1]), (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(values<bool>(logical_xor(array({0, 2}, {2}, int32), f32({1.0f, 1.0f}))),
            (std::vector<bool>{true, false}));
}

// --- reductions -----------------------------------------------------------------

TEST(Softmax, UnsignedBoolAndEmpty) {
  array u = array(std::vector<uint8_t>{2, 1, 0}, {3}, uint8);
  array s = softmax(u);
  EXPECT_EQ(s.dtype(), float32);
  expect_close(values<float>(s), {0.66524096f, 0.24472847f, 0.09003057f}, 1e-6);
  expect_close(values<float>(softmax(array(std::vector<bool>{true, false}, {2}, bool_))),
               {0.7310586f, 0.2689414f}, 1e-6);
  array e = softmax(zeros({0, 3}), Axes{1});
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  EXPECT_EQ(e.dtype(), float32);
  EXPECT_EQ(softmax(zeros({2, 0}, int32), Axes{1}).dtype(), float32);
}

TEST(Softmax, LargeValuesAndPrecise) {
  expect_close(values<float>(softmax(f32({1000.0f, 1000.0f, -kInf}))), {0.5f, 0.5f, 0.0f});
  array h = astype(f32({1.0f, 2.0f, 3.0f}), float16);
  EXPECT_EQ(softmax(h, true).dtype(), float16);
  expect_close(values<float>(astype(softmax(h, true), float32)),
               {0.09003057f, 0.24472847f, 0.66524096f}, 1e-3);
}

TEST(LogSumExp, UnsignedInfinitiesAndEmpty) {
  expect_close(values<float>(logsumexp(array(std::vector<uint8_t>{1, 0}, {2}, uint8))),
               {1.3132616f}, 1e-6);
  expect_close(values<float>(logsumexp(f32({-kInf, -kInf}))), {-kInf});
  expect_close(values<float>(logsumexp(f32({kInf, 1.0f}))), {kInf});
  expect_close(values<float>(logsumexp(f32({1e30f, 1e30f}))), {1e30f}, 1e-6);
  // log(1 + e^-7.25): summing onto the 1 of the maximum would lose 6e-5 of it.
  expect_close(values<float>(logsumexp(f32({0.0f, -7.25f}))), {7.0992234e-4f}, 2e-7, 0);
  expect_close(values<float>(logsumexp(f32({2.0f, 2.0f, -kInf}))), {2.6931472f}, 1e-7, 0);
  array k = logsumexp(zeros({2, 3}), Axes{1}, true);
  EXPECT_EQ(k.shape(), (Shape{2, 1}));
  std::string msg = error_of([] { logsumexp(zeros({0})); });
  EXPECT_NE(msg.find("[logsumexp]"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("[max]"), std::string::npos) << msg;
}

TEST(VarStd, RealComplexAndDdof) {
  expect_close(values<float>(var(f32({1.0f, 2.0f, 3.0f, 4.0f}))), {1.25f});
  expect_close(values<float>(loom::std(f32({1.0f, 2.0f, 3.0f, 4.0f}), false, 1)),
               {std::sqrt(5.0f / 3.0f)}, 1e-6);
  array z = array(std::vector<complex64_t>{{1.0f, 1.0f}, {3.0f, 2.0f}}, {2}, complex64);
  array v = var(z);
  EXPECT_EQ(v.dtype(), float32);
  expect_close(values<float>(v), {1.25f});
  expect_close(values<float>(loom::std(z)), {std::sqrt(1.25f)}, 1e-6);
  EXPECT_EQ(var(array({1, 2}, {2}, int32)).dtype(), float32);
  EXPECT_TRUE(std::isnan(values<float>(var(zeros({0})))[0]));
}

TEST(CountNonzero, DtypesAndEmpty) {
  array c = count_nonzero(array(3.0f));
  EXPECT_EQ(c.dtype(), int32);
  EXPECT_EQ(values<int32_t>(c), (std::vector<int32_t>{1}));
  EXPECT_EQ(values<int32_t>(count_nonzero(f32({1.0f, 0.0f}), Axes{})),
            (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(values<int32_t>(count_nonzero(zeros({0}))), (std::vector<int32_t>{0}));
  EXPECT_EQ(count_nonzero(zeros({0, 3}), Axes{1}).shape(), (Shape{0}));
}

// --- shapes ------------------------------------------------------------------------

TEST(Shape, FlipRollTileRepeat) {
  array a = array({0, 1, 2, 3, 4, 5}, {2, 3}, int32);
  EXPECT_EQ(values<int32_t>(flip(a)), (std::vector<int32_t>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(values<int32_t>(flip(a, Axes{1})), (std::vector<int32_t>{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(values<int32_t>(roll(a, 1)), (std::vector<int32_t>{5, 0, 1, 2, 3, 4}));
  EXPECT_EQ(values<int32_t>(roll(a, Axes{-1}, Axes{1})), (std::vector<int32_t>{1, 2, 0, 4, 5, 3}));
  EXPECT_EQ(values<int32_t>(roll(a, Axes{1}, Axes{0, 1})),
            (std::vector<int32_t>{5, 3, 4, 2, 0, 1}));
  EXPECT_NE(error_of([&] {
              roll(a, Axes{1, 2}, Axes{0, 1, 0});
            }).find("[roll]"),
            std::string::npos);
  array t = tile(array({1, 2}, {2}, int32), {2, 2});
  EXPECT_EQ(t.shape(), (Shape{2, 4}));
  EXPECT_EQ(values<int32_t>(t), (std::vector<int32_t>{1, 2, 1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(values<int32_t>(repeat(a, 2, 1)),
            (std::vector<int32_t>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5}));
  EXPECT_EQ(repeat(a, 3).shape(), (Shape{18}));
}

TEST(Shape, PadModes) {
  array a = array({1, 2, 3}, {3}, int32);
  auto pad1 = [&](const std::string& mode) {
    return values<int32_t>(pad(a, {{2, 2}}, array(9), mode));
  };
  EXPECT_EQ(pad1("constant"), (std::vector<int32_t>{9, 9, 1, 2, 3, 9, 9}));
  EXPECT_EQ(pad1("edge"), (std::vector<int32_t>{1, 1, 1, 2, 3, 3, 3}));
  EXPECT_EQ(pad1("reflect"), (std::vector<int32_t>{3, 2, 1, 2, 3, 2, 1}));
  EXPECT_EQ(pad1("symmetric"), (std::vector<int32_t>{2, 1, 1, 2, 3, 3, 2}));
  EXPECT_NE(error_of([&] { pad(a, {{1, 1}}, array(0), "wrap"); }), "");
  EXPECT_NE(error_of([&] { pad(a, {{-1, 1}}, array(0)); }), "");
}

TEST(Shape, TriangularAndAtLeast) {
  array m = ones({3, 3});
  expect_close(values<float>(tril(m)), {1, 0, 0, 1, 1, 0, 1, 1, 1});
  expect_close(values<float>(triu(m, 1)), {0, 1, 1, 0, 0, 1, 0, 0, 0});
  EXPECT_NE(error_of([] { tril(ones({3})); }).find("[tril]"), std::string::npos);
  EXPECT_EQ(atleast_1d(array(1.0f)).shape(), (Shape{1}));
  EXPECT_EQ(atleast_2d(ones({3})).shape(), (Shape{1, 3}));
  EXPECT_EQ(atleast_3d(ones({2, 3})).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(atleast_3d(ones({3})).shape(), (Shape{1, 3, 1}));
}

TEST(Shape, UnstackUnflattenOnEmpty) {
  EXPECT_TRUE(unstack(zeros({0, 3})).empty());
  auto parts = unstack(zeros({2, 0}));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].shape(), (Shape{0}));
  auto rows = unstack(array({1, 2, 3, 4}, {2, 2}, int32), 1);
  EXPECT_EQ(values<int32_t>(rows[1]), (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(unflatten(zeros({0}), 0, {-1, 2}).shape(), (Shape{0, 2}));
  EXPECT_EQ(unflatten(zeros({3, 8}), 1, {2, -1}).shape(), (Shape{3, 2, 4}));
  EXPECT_NE(error_of([] {
              unflatten(zeros({0}), 0, {0, -1});
            }).find("[unflatten]"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              unflatten(zeros({6}), 0, {4, -1});
            }).find("[unflatten]"),
            std::string::npos);
}

TEST(Shape, DiffMeshgridMatrixTranspose) {
  EXPECT_EQ(values<int32_t>(diff(array({1, 4, 9, 16}, {4}, int32))),
            (std::vector<int32_t>{3, 5, 7}));
  EXPECT_EQ(values<int32_t>(diff(array({1, 4, 9, 16}, {4}, int32), 2)),
            (std::vector<int32_t>{2, 2}));
  auto g = meshgrid({array({1, 2, 3}, {3}, int32), array({4, 5}, {2}, int32)});
  EXPECT_EQ(g[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(values<int32_t>(g[1]), (std::vector<int32_t>{4, 4, 4, 5, 5, 5}));
  auto ij = meshgrid({array({1, 2, 3}, {3}, int32), array({4, 5}, {2}, int32)}, true, "ij");
  EXPECT_EQ(ij[0].shape(), (Shape{3, 1}));
  EXPECT_EQ(matrix_transpose(ones({2, 3, 4})).shape(), (Shape{2, 4, 3}));
  EXPECT_NE(error_of([] { matrix_transpose(ones({3})); }), "");
}

// --- creation ---------------------------------------------------------------------

TEST(Creation, TriArangeLinspaceWindows) {
  EXPECT_EQ(tri(-2, 3).shape(), (Shape{0, 3}));
  expect_close(values<float>(tri(2, 3, 1)), {1, 1, 0, 1, 1, 1});
  EXPECT_EQ(arange(int64_t{0}, int64_t{5}).dtype(), int32);
  EXPECT_EQ(arange(int64_t{0}, int64_t{1} << 33, int64_t{1} << 32).dtype(), int64);
  EXPECT_EQ(arange_dtype(true, true), float32);
  expect_close(values<float>(linspace(0.0, 1.0, 4, false)), {0.0f, 0.25f, 0.5f, 0.75f});
  // float64 is computed in double: 0.1..0.7 in 7 steps as MLX ((1 - t) a + t b).
  auto d = values<double>(linspace(0.1, 0.7, 7, float64));
  EXPECT_EQ(d[3], 0.39999999999999997);
  EXPECT_EQ(d[6], 0.7);
  expect_close(values<float>(hanning(5)), {0.0f, 0.5f, 1.0f, 0.5f, 0.0f}, 1e-6, 1e-7);
  expect_close(values<float>(bartlett(5)), {0.0f, 0.5f, 1.0f, 0.5f, 0.0f});
  expect_close(values<float>(hamming(3)), {0.08f, 1.0f, 0.08f}, 1e-6);
  expect_close(values<float>(blackman(3)), {0.0f, 1.0f, 0.0f}, 1e-6, 1e-6);
  EXPECT_EQ(hanning(0).shape(), (Shape{0}));
}

// --- linear algebra ------------------------------------------------------------------

TEST(Linalg, TensordotInnerOuterKron) {
  array a = reshape(arange(0.0, 24.0, 1.0, float32), {2, 3, 4});
  array b = reshape(arange(0.0, 12.0, 1.0, float32), {4, 3});
  array t = tensordot(a, b, Axes{1, 2}, Axes{1, 0});
  EXPECT_EQ(t.shape(), (Shape{2}));
  // sum_{j,k} a[i,j,k] b[k,j]
  float want0 = 0, want1 = 0;
  for (int j = 0; j < 3; ++j) {
    for (int k = 0; k < 4; ++k) {
      want0 += (j * 4 + k) * (k * 3 + j);
      want1 += (12 + j * 4 + k) * (k * 3 + j);
    }
  }
  expect_close(values<float>(t), {want0, want1});
  EXPECT_EQ(tensordot(a, reshape(b, {4, 3}), 1).shape(), (Shape{2, 3, 3}));
  EXPECT_NE(error_of([&] { tensordot(a, b, 3); }).find("[tensordot]"), std::string::npos);
  expect_close(values<float>(inner(f32({1, 2, 3}), f32({4, 5, 6}))), {32.0f});
  expect_close(values<float>(outer(f32({1, 2}), f32({3, 4}))), {3, 4, 6, 8});
  expect_close(values<float>(kron(f32({1, 2}), f32({1, 10}))), {1, 10, 2, 20});
  EXPECT_EQ(kron(ones({2, 2}), ones({3})).shape(), (Shape{2, 6}));
  expect_close(values<float>(
                   addmm(f32({1, 1}), reshape(f32({1, 2, 3, 4}), {2, 2}), f32({1, 1}), 2.0f, 3.0f)),
               {9.0f, 17.0f});
}

TEST(Linalg, VecdotConjugatesTheFirstOperand) {
  array z = array(std::vector<complex64_t>{{1.0f, 1.0f}}, {1}, complex64);
  auto v = values<complex64_t>(vecdot(z, z));
  EXPECT_EQ(v[0], complex64_t(2.0f, 0.0f));
  expect_close(values<float>(vecdot(reshape(f32({1, 2, 3, 4}), {2, 2}), f32({1, 1}))),
               {3.0f, 7.0f});
}

// --- random -------------------------------------------------------------------------

TEST(RandomComposites, ShapesDtypesAndRanges) {
  array key = random::key(7);
  array b = random::bernoulli(array(0.5f), Shape{1000}, key);
  EXPECT_EQ(b.dtype(), bool_);
  int ones_count = values<int32_t>(sum(b))[0];
  EXPECT_GT(ones_count, 400);
  EXPECT_LT(ones_count, 600);
  array r = random::randint(array(-3), array(5), {1000}, int32, key);
  auto rv = values<int32_t>(r);
  for (int v : rv) {
    EXPECT_GE(v, -3);
    EXPECT_LT(v, 5);
  }
  EXPECT_NE(error_of([&] { random::randint(array(0), array(2), {2}, float32, key); }), "");
  EXPECT_EQ(random::gumbel({3, 2}, float32, key).shape(), (Shape{3, 2}));
  EXPECT_EQ(random::laplace({4}, float32, 0.0f, 1.0f, key).shape(), (Shape{4}));
  array logits = array(std::vector<float>{0.0f, -kInf, 0.0f, -kInf}, {2, 2});
  // -inf logits are never drawn.
  auto c = values<uint32_t>(random::categorical(logits, -1, std::nullopt, 50, key));
  for (uint32_t v : c) EXPECT_EQ(v, 0u);
  EXPECT_EQ(random::categorical(logits, -1, Shape{5, 2}, std::nullopt, key).shape(), (Shape{5, 2}));
  EXPECT_NE(error_of([&] { random::categorical(logits, -1, Shape{2}, 3, key); }), "");
}

// --- gradients through composites ----------------------------------------------------

TEST(CompositeGradients, SoftmaxVarAndTanh) {
  // d/dx sum(softmax(x) * w) = s * (w - sum(s w)).
  array x = f32({0.1f, 0.7f, -0.3f});
  array w = f32({1.0f, 2.0f, 3.0f});
  auto [out, g] = vjp(
      [&](const std::vector<array>& in) {
        return std::vector<array>{sum(multiply(softmax(in[0]), w))};
      },
      {x}, {array(1.0f)});
  auto s = values<float>(softmax(x));
  float sw = s[0] * 1 + s[1] * 2 + s[2] * 3;
  expect_close(values<float>(g[0]), {s[0] * (1 - sw), s[1] * (2 - sw), s[2] * (3 - sw)}, 1e-5);
  // d var / dx = 2 (x - mean) / n.
  auto [o2, g2] = vjp([](const std::vector<array>& in) { return std::vector<array>{var(in[0])}; },
                      {f32({1.0f, 2.0f, 6.0f})}, {array(1.0f)});
  expect_close(values<float>(g2[0]), {-4.0f / 3, -2.0f / 3, 2.0f}, 1e-5);
  // tanh' = sech^2, accurate far out (1 - tanh^2 gives 0 at -12).
  auto [o3, g3] = vjp([](const std::vector<array>& in) { return std::vector<array>{tanh(in[0])}; },
                      {f32({-12.0f, 6.0f, 0.0f})}, {f32({1.0f, 1.0f, 1.0f})});
  expect_close(values<float>(g3[0]),
               {static_cast<float>(1 / std::pow(std::cosh(12.0), 2)),
                static_cast<float>(1 / std::pow(std::cosh(6.0), 2)), 1.0f},
               1e-6, 0);
}

// --- the fused Softmax node ------------------------------------------------------

namespace {

// The composite softmax over the last axis, for reference: softmax over axis 0
// of the transpose takes the composite path.
array composite_softmax(const array& x) {
  std::vector<int> perm(x.ndim());
  for (int i = 0; i < x.ndim(); ++i) perm[i] = x.ndim() - 1 - i;
  return transpose(softmax(transpose(x, perm), Axes{0}), perm);
}

} // namespace

TEST(SoftmaxNode, LastAxisIsOneNodeMatchingTheComposite) {
  array x = random::normal({7, 33}, float32, array(0.0f), array(3.0f), random::key(3));
  array y = softmax(x, Axes{-1});
  ASSERT_TRUE(y.has_node());
  EXPECT_STREQ(y.primitive().name(), "Softmax");
  expect_close(values<float>(y), values<float>(composite_softmax(x)), 2e-6, 1e-9);
  auto rows = values<float>(sum(y, Axes{-1}));
  for (float r : rows) EXPECT_NEAR(r, 1.0f, 2e-6);
  // Strided input (a transposed view) and float64.
  array t = transpose(x);
  expect_close(values<float>(softmax(t, Axes{-1})), values<float>(composite_softmax(t)), 2e-6,
               1e-9);
  array d = astype(x, float64);
  expect_close(values<double>(softmax(d, Axes{1})), values<double>(composite_softmax(d)), 1e-12,
               1e-15);
}

TEST(SoftmaxNode, SpecialValuesAndHalfPrecision) {
  expect_close(values<float>(softmax(f32({1.0f, kNan, 2.0f}), Axes{0})), {kNan, kNan, kNan});
  expect_close(values<float>(softmax(f32({-kInf, 0.0f, 0.0f}), Axes{0})), {0.0f, 0.5f, 0.5f});
  expect_close(values<float>(softmax(f32({1e30f, 1e30f}), Axes{0})), {0.5f, 0.5f});
  array h = astype(f32({1.0f, 2.0f, 3.0f}), float16);
  array y = softmax(h, Axes{0});
  EXPECT_EQ(y.dtype(), float16);
  expect_close(values<float>(astype(y, float32)), {0.09003057f, 0.24472847f, 0.66524096f}, 1e-3);
  EXPECT_EQ(softmax(zeros({2, 0}), Axes{1}).shape(), (Shape{2, 0}));
}

TEST(SoftmaxNode, Transforms) {
  array x = reshape(f32({0.1f, 0.7f, -0.3f, 2.0f, -1.0f, 0.5f}), {2, 3});
  array w = reshape(f32({1.0f, 2.0f, 3.0f, -1.0f, 0.0f, 4.0f}), {2, 3});
  auto f = [&](const std::vector<array>& in) {
    return std::vector<array>{sum(multiply(softmax(in[0], Axes{-1}), w))};
  };
  auto g_fused = vjp(f, {x}, {array(1.0f)}).second[0];
  auto g_ref = vjp(
                   [&](const std::vector<array>& in) {
                     return std::vector<array>{sum(multiply(composite_softmax(in[0]), w))};
                   },
                   {x}, {array(1.0f)})
                   .second[0];
  expect_close(values<float>(g_fused), values<float>(g_ref), 1e-5, 1e-7);
  array t = reshape(f32({1.0f, 0.0f, -1.0f, 0.5f, 0.5f, 0.5f}), {2, 3});
  auto jv =
      jvp([](const std::vector<array>& in) { return std::vector<array>{softmax(in[0], Axes{-1})}; },
          {x}, {t});
  // Tangent of a constant shift is zero; of a one-hot, y_i (e_i - y).
  auto tv = values<float>(jv.second[0]);
  EXPECT_NEAR(tv[3] + tv[4] + tv[5], 0.0f, 1e-6);
  EXPECT_NEAR(tv[0] + tv[1] + tv[2], 0.0f, 1e-6);
  // vmap over either axis equals the loop.
  for (int ax : {0, 1}) {
    array out = vmap(
        [](const std::vector<array>& in) { return std::vector<array>{softmax(in[0], Axes{-1})}; },
        {ax}, {ax})({x})[0];
    array want = ax == 0 ? softmax(x, Axes{1}) : softmax(x, Axes{0});
    expect_close(values<float>(out), values<float>(want), 1e-6, 1e-8);
  }
}

TEST(LogSumExpNode, MatchesTheCompositeAndDifferentiates) {
  array x = random::normal({5, 40}, float32, array(0.0f), array(4.0f), random::key(5));
  array y = logsumexp(x, Axes{-1});
  ASSERT_TRUE(y.has_node());
  EXPECT_STREQ(y.primitive().name(), "LogSumExp");
  // The composite path: over axis 0 of the transpose.
  expect_close(values<float>(y), values<float>(logsumexp(transpose(x), Axes{0})), 2e-6, 1e-6);
  EXPECT_EQ(logsumexp(x, Axes{1}, true).shape(), (Shape{5, 1}));
  array h = astype(x, bfloat16);
  EXPECT_EQ(logsumexp(h, Axes{1}).dtype(), bfloat16);
  expect_close(values<float>(logsumexp(f32({kNan, 1.0f}), Axes{0})), {kNan});
  expect_close(values<float>(logsumexp(f32({-kInf, -kInf}), Axes{0})), {-kInf});
  // Gradient: softmax; tangent: the softmax-weighted sum.
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{sum(logsumexp(in[0], Axes{-1}))};
  };
  auto g = vjp(f, {x}, {array(1.0f)}).second[0];
  expect_close(values<float>(g), values<float>(softmax(x, Axes{-1})), 1e-5, 1e-9);
  array t = ones({5, 40});
  auto jt = jvp(
                [](const std::vector<array>& in) {
                  return std::vector<array>{logsumexp(in[0], Axes{-1})};
                },
                {x}, {t})
                .second[0];
  expect_close(values<float>(jt), std::vector<float>(5, 1.0f), 1e-5);
  for (int ax : {0, 1}) {
    array out = vmap(
        [](const std::vector<array>& in) { return std::vector<array>{logsumexp(in[0], Axes{-1})}; },
        {ax}, {0})({x})[0];
    array want = logsumexp(x, Axes{ax == 0 ? 1 : 0});
    expect_close(values<float>(out), values<float>(want), 2e-6, 1e-6);
  }
}
