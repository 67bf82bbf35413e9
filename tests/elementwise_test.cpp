// Element-wise ops: values against hand-computed references, MLX 0.32.4's
// result dtypes and errors, layouts (strided, broadcast, empty, donated),
// and the vjp/jvp/vmap rules of the primitives.
#include "loom/backend/cpu/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "loom/backend/cpu/copy.h"
#include "loom/ops/elementwise.h"
#include "loom/primitives/binary.h"
#include "loom/primitives/ternary.h"
#include "loom/primitives/unary.h"
#include "loom/scheduler/scheduler.h"
#include "loom/transforms/transforms.h"

using namespace loom;

namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Mangled names of the ops from other families these tests reach.

Stream cpu_stream() { return default_stream(Device::cpu); }

template <typename T>
std::vector<T> values(array a) {
  a.eval();
  array c = cpu::ensure_row_contiguous(a);
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.size());
}

// Element-wise closeness with NaN == NaN and exact infinities.
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

// A view of `a` with the given layout (elements), standing in for
// transpose/slice/broadcast while the shape family is not merged.
class TestView : public Primitive {
 public:
  TestView(Stream s, Strides strides, Flags flags, int64_t offset)
      : Primitive(s), strides_(std::move(strides)), flags_(flags), offset_(offset) {}
  void eval_cpu(const std::vector<array>& in, std::vector<array>& out) override {
    out[0].copy_shared_buffer(in[0], strides_, flags_, in[0].data_size(), offset_);
  }
  const char* name() const override { return "TestView"; }

 private:
  Strides strides_;
  Flags flags_;
  int64_t offset_;
};

array view(const array& a, Shape shape, Strides strides, Flags flags = {false, false, false},
           int64_t offset = 0) {
  return array(std::move(shape), a.dtype(),
               std::make_shared<TestView>(cpu_stream(), std::move(strides), flags, offset), {a});
}

// Row-major (n x m) data seen as its (m x n) transpose: dense, not row-major.
array transposed(const array& a) {
  int n = a.shape(0), m = a.shape(1);
  return view(a, {m, n}, {1, m}, Flags{true, false, true});
}

std::vector<Dtype> all_dtypes() {
  std::vector<Dtype> out;
  for (int i = 0; i < kNumDtypes; ++i) out.push_back(dtype_from_index(i));
  return out;
}

Dtype dtype_from_code(const std::string& code) {
  static const std::pair<const char*, Dtype> codes[] = {
      {"b", bool_},     {"u8", uint8},    {"u16", uint16},  {"u32", uint32},   {"u64", uint64},
      {"i8", int8},     {"i16", int16},   {"i32", int32},   {"i64", int64},    {"f16", float16},
      {"bf", bfloat16}, {"f32", float32}, {"f64", float64}, {"c64", complex64}};
  for (auto& [c, d] : codes) {
    if (code == c) return d;
  }
  throw std::logic_error("bad dtype code " + code);
}

std::vector<std::string> split_codes(const std::string& row) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < row.size()) {
    size_t next = row.find(' ', pos);
    if (next == std::string::npos) next = row.size();
    if (next > pos) out.push_back(row.substr(pos, next - pos));
    pos = next + 1;
  }
  return out;
}

array ones_of(Dtype d, Shape shape = {2}) {
  std::vector<float> v(shape_size(shape), 1.0f);
  return array(v, shape, d);
}

} // namespace

// ---------------------------------------------------------------------------
// Unary values

TEST(ElementwiseUnary, Float32Values) {
  std::vector<float> x = {-2.5f, -1.0f, -0.0f, 0.0f, 0.25f, 1.0f, 3.0f, kInf, -kInf, kNan};
  array a(x, {static_cast<int>(x.size())});
  auto check = [&](array (*op)(const array&, StreamOrDevice), float (*ref)(float)) {
    std::vector<float> want;
    for (float v : x) want.push_back(ref(v));
    expect_close(values<float>(op(a, {})), want, 3e-7, 0);
  };
  check(negative, [](float v) { return -v; });
  check(abs, [](float v) { return std::fabs(v); });
  check(sign, [](float v) { return v > 0 ? 1.0f : (v < 0 ? -1.0f : 0.0f); });
  check(square, [](float v) { return v * v; });
  check(sqrt, [](float v) { return std::sqrt(v); });
  check(rsqrt, [](float v) { return 1.0f / std::sqrt(v); });
  check(reciprocal, [](float v) { return 1.0f / v; });
  check(exp, [](float v) { return static_cast<float>(std::exp(static_cast<double>(v))); });
  check(log, [](float v) { return std::log(v); });
  check(sin, [](float v) { return std::sin(v); });
  check(cos, [](float v) { return std::cos(v); });
  check(tanh, [](float v) { return std::tanh(v); });
  check(erf, [](float v) { return static_cast<float>(std::erf(static_cast<double>(v))); });
  check(sigmoid, [](float v) {
    return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(v))));
  });
  check(floor, [](float v) { return std::floor(v); });
  check(ceil, [](float v) { return std::ceil(v); });

  // MLX: sign(NaN) is 0; rsqrt(-0) is -inf.
  EXPECT_EQ(values<float>(sign(array({kNan})))[0], 0.0f);
  EXPECT_EQ(values<float>(rsqrt(array({-0.0f})))[0], -kInf);

  auto is_nan = values<bool>(isnan(a));
  auto is_inf = values<bool>(isinf(a));
  auto not_a = values<bool>(logical_not(a));
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(is_nan[i], std::isnan(x[i]));
    EXPECT_EQ(is_inf[i], std::isinf(x[i]));
    EXPECT_EQ(not_a[i], x[i] == 0.0f); // NaN is truthy
  }
}

TEST(ElementwiseUnary, Float64Values) {
  std::vector<double> x = {-3.0, -0.5, 0.1, 0.7, 2.0, 5.0};
  array a(x, {6}, float64);
  auto check = [&](array r, double (*ref)(double)) {
    ASSERT_EQ(r.dtype(), float64);
    std::vector<double> want;
    for (double v : x) want.push_back(ref(v));
    expect_close(values<double>(r), want, 1e-15, 1e-300);
  };
  check(exp(a), [](double v) { return std::exp(v); });
  check(erf(a), [](double v) { return std::erf(v); });
  check(tanh(a), [](double v) { return std::tanh(v); });
  check(sigmoid(a), [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
  check(rsqrt(abs(a)), [](double v) { return 1.0 / std::sqrt(std::fabs(v)); });
}

TEST(ElementwiseUnary, VectorisedFloat32MathIsAccurate) {
  // exp, erf, tanh and log of float32 are polynomial kernels, not libm: a
  // dense sweep (subnormal results and overflow included), large enough to
  // run on several threads, must stay within 2 ulp.
  std::vector<float> x;
  for (double v = -110.0; v <= 90.0; v += 0.00071) x.push_back(static_cast<float>(v));
  array a(x, {static_cast<int>(x.size())});
  auto ulps = [](float got, double ref) {
    if (std::isnan(ref)) return std::isnan(got) ? 0.0 : 1e9;
    float r = static_cast<float>(ref);
    if (std::isinf(r)) return std::isinf(got) && (got > 0) == (r > 0) ? 0.0 : 1e9;
    double ulp = std::fabs(r) < std::numeric_limits<float>::min()
                     ? std::ldexp(1.0, -149)
                     : std::ldexp(1.0, std::ilogb(r) - 23);
    return std::fabs(static_cast<double>(got) - ref) / ulp;
  };
  auto worst = [&](array r, double (*ref)(double)) {
    auto got = values<float>(r);
    double w = 0;
    for (size_t i = 0; i < x.size(); ++i) w = std::max(w, ulps(got[i], ref(x[i])));
    return w;
  };
  EXPECT_LE(worst(exp(a), [](double v) { return std::exp(v); }), 2.0);
  EXPECT_LE(worst(erf(a), [](double v) { return std::erf(v); }), 2.0);
  EXPECT_LE(worst(tanh(a), [](double v) { return std::tanh(v); }), 2.0);
  EXPECT_LE(worst(log(a), [](double v) { return std::log(v); }), 2.0);
  std::vector<float> tiny = {1e-45f, 3e-39f, 1.1754942e-38f, 1e-30f, 0.7071f, 1.0f, 1.0001f, 3e38f};
  array ta(tiny, {static_cast<int>(tiny.size())});
  auto lg = values<float>(log(ta));
  for (size_t i = 0; i < tiny.size(); ++i) {
    EXPECT_LE(ulps(lg[i], std::log(static_cast<double>(tiny[i]))), 2.0) << tiny[i];
  }
  auto special = values<float>(log(array({0.0f, -0.0f, -1.0f, kInf, kNan})));
  EXPECT_EQ(special[0], -kInf);
  EXPECT_EQ(special[1], -kInf);
  EXPECT_TRUE(std::isnan(special[2]));
  EXPECT_EQ(special[3], kInf);
  EXPECT_TRUE(std::isnan(special[4]));
  auto th = values<float>(tanh(array({kInf, -kInf, kNan, -0.0f, 1e-30f})));
  EXPECT_EQ(th[0], 1.0f);
  EXPECT_EQ(th[1], -1.0f);
  EXPECT_TRUE(std::isnan(th[2]));
  EXPECT_TRUE(std::signbit(th[3]));
  EXPECT_EQ(th[4], 1e-30f);
  // Special values.
  auto s = values<float>(exp(array({kNan, kInf, -kInf, 0.0f, 88.7f, 89.0f})));
  EXPECT_TRUE(std::isnan(s[0]));
  EXPECT_EQ(s[1], kInf);
  EXPECT_EQ(s[2], 0.0f);
  EXPECT_EQ(s[3], 1.0f);
  EXPECT_TRUE(std::isfinite(s[4])); // below log(FLT_MAX) = 88.72
  EXPECT_EQ(s[5], kInf);
  auto t = values<float>(erf(array({kNan, kInf, -kInf, 1e-30f, -1e-30f, 10.0f})));
  EXPECT_TRUE(std::isnan(t[0]));
  EXPECT_EQ(t[1], 1.0f);
  EXPECT_EQ(t[2], -1.0f);
  EXPECT_FLOAT_EQ(t[3], 1.1283791671e-30f); // relative accuracy near 0
  EXPECT_FLOAT_EQ(t[4], -1.1283791671e-30f);
  EXPECT_EQ(t[5], 1.0f);
}

TEST(ElementwiseUnary, IntegersAndBool) {
  EXPECT_EQ(values<uint8_t>(negative(array({1, 2, 0}, {3}, uint8))),
            (std::vector<uint8_t>{255, 254, 0}));
  // abs and negative of INT_MIN wrap, as in MLX.
  EXPECT_EQ(values<int8_t>(abs(array({-128, -3, 2}, {3}, int8))),
            (std::vector<int8_t>{-128, 3, 2}));
  EXPECT_EQ(values<int32_t>(negative(array({INT32_MIN, 5}, {2}, int32))),
            (std::vector<int32_t>{INT32_MIN, -5}));
  EXPECT_EQ(values<int8_t>(sign(array({-3, 0, 2}, {3}, int8))), (std::vector<int8_t>{-1, 0, 1}));
  EXPECT_EQ(values<uint8_t>(sign(array({3, 0, 2}, {3}, uint8))), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(values<uint8_t>(square(array({16, 3}, {2}, uint8))), (std::vector<uint8_t>{0, 9}));
  EXPECT_EQ(values<int64_t>(square(array({-3000000000LL}, {1}, int64))),
            (std::vector<int64_t>{9000000000000000000LL}));
  EXPECT_EQ(values<int32_t>(floor(array({-3, 4}, {2}, int32))), (std::vector<int32_t>{-3, 4}));
  EXPECT_EQ(values<int32_t>(ceil(array({-3, 4}, {2}, int32))), (std::vector<int32_t>{-3, 4}));
  EXPECT_EQ(values<uint8_t>(bitwise_invert(array({0, 5}, {2}, uint8))),
            (std::vector<uint8_t>{255, 250}));
  EXPECT_EQ(values<int32_t>(bitwise_invert(array({0, -1, 7}, {3}, int32))),
            (std::vector<int32_t>{-1, 0, -8}));
  EXPECT_EQ(values<bool>(bitwise_invert(array({true, false}))), (std::vector<bool>{false, true}));
  EXPECT_EQ(values<bool>(logical_not(array({2, 0}, {2}, uint8))), (std::vector<bool>{false, true}));
  EXPECT_EQ(values<bool>(isnan(array({1, 2}, {2}, int32))), (std::vector<bool>{false, false}));
  EXPECT_EQ(values<bool>(isinf(array({1, 2}, {2}, int32))), (std::vector<bool>{false, false}));
  array flags({true, false});
  EXPECT_EQ(values<bool>(abs(flags)), (std::vector<bool>{true, false}));
  EXPECT_EQ(values<bool>(sign(flags)), (std::vector<bool>{true, false}));
  EXPECT_EQ(values<bool>(square(flags)), (std::vector<bool>{true, false}));
}

TEST(ElementwiseUnary, HalfTypesComputeInFloatAndRound) {
  std::vector<float> x = {-1.5f, 0.3f, 2.0f, 7.25f};
  for (Dtype d : {float16, bfloat16}) {
    array a(x, {4}, d);
    auto check = [&](array r, float (*ref)(float)) {
      ASSERT_EQ(r.dtype(), d);
      r.eval();
      array c = cpu::ensure_row_contiguous(r);
      for (int i = 0; i < 4; ++i) {
        // The input is rounded to d first; the result is float rounded to d.
        float in = d == float16 ? float(float16_t(x[i])) : float(bfloat16_t(x[i]));
        float want = d == float16 ? float(float16_t(ref(in))) : float(bfloat16_t(ref(in)));
        float got = d == float16 ? float(c.data<float16_t>()[i]) : float(c.data<bfloat16_t>()[i]);
        EXPECT_EQ(got, want) << dtype_name(d) << " at " << i;
      }
    };
    check(exp(a), [](float v) { return static_cast<float>(std::exp(static_cast<double>(v))); });
    check(sqrt(abs(a)), [](float v) { return std::sqrt(std::fabs(v)); });
    check(negative(a), [](float v) { return -v; });
    check(floor(a), [](float v) { return std::floor(v); });
    check(sigmoid(a), [](float v) { return 1.0f / (1.0f + std::exp(-v)); });
  }
  // Rounding of the half result is to nearest even, NaN stays NaN.
  array h({kNan, 1.0f}, {2}, bfloat16);
  auto r = values<bfloat16_t>(negative(h));
  EXPECT_TRUE(std::isnan(float(r[0])));
  EXPECT_EQ(float(r[1]), -1.0f);
}

TEST(ElementwiseUnary, Complex) {
  using c = complex64_t;
  std::vector<c> z = {c(1, 1), c(-2, 0.5f), c(0.3f, -4)};
  array a(z, {3}, complex64);
  auto check = [&](array r, c (*ref)(c)) {
    ASSERT_EQ(r.dtype(), complex64);
    auto got = values<c>(r);
    for (size_t i = 0; i < z.size(); ++i) {
      c want = ref(z[i]);
      EXPECT_NEAR(got[i].real(), want.real(), 1e-5 * (1 + std::abs(want))) << i;
      EXPECT_NEAR(got[i].imag(), want.imag(), 1e-5 * (1 + std::abs(want))) << i;
    }
  };
  check(exp(a), [](c v) { return std::exp(v); });
  check(log(a), [](c v) { return std::log(v); });
  check(sin(a), [](c v) { return std::sin(v); });
  check(cos(a), [](c v) { return std::cos(v); });
  check(tanh(a), [](c v) { return std::tanh(v); });
  check(sqrt(a), [](c v) { return std::sqrt(v); });
  check(rsqrt(a), [](c v) { return c(1) / std::sqrt(v); });
  check(reciprocal(a), [](c v) { return c(1) / v; });
  check(square(a), [](c v) { return v * v; });
  check(negative(a), [](c v) { return -v; });
  check(sign(a), [](c v) { return v / std::abs(v); });
  array m = abs(array({c(3, 4), c(0, -2)}, {2}, complex64));
  EXPECT_EQ(m.dtype(), float32);
  EXPECT_EQ(values<float>(m), (std::vector<float>{5.0f, 2.0f}));
  EXPECT_EQ(values<c>(sign(array({c(0, 0)}, {1}, complex64)))[0], c(0, 0));
  EXPECT_EQ(values<c>(sqrt(array({c(-1, 0)}, {1}, complex64)))[0], c(0, 1));
  EXPECT_EQ(values<bool>(isnan(array({c(0, kNan), c(1, 1)}, {2}, complex64))),
            (std::vector<bool>{true, false}));
  EXPECT_EQ(values<bool>(isinf(array({c(kInf, 0), c(1, 1)}, {2}, complex64))),
            (std::vector<bool>{true, false}));
  EXPECT_EQ(values<bool>(logical_not(array({c(0, 1), c(0, 0)}, {2}, complex64))),
            (std::vector<bool>{false, true}));
}

TEST(ElementwiseUnary, SameDtypeResultsForEveryDtype) {
  // Ops that keep the input dtype never cast: their table is checkable on
  // its own. Codes in MLX 0.32.4's order of dtypes; ERR where MLX raises.
  struct Row {
    const char* op;
    array (*fn)(const array&, StreamOrDevice);
    const char* expected;
  };
  const Row rows[] = {
      {"negative", negative, "ERR u8 u16 u32 u64 i8 i16 i32 i64 f16 bf f32 f64 c64"},
      {"abs", abs, "b u8 u16 u32 u64 i8 i16 i32 i64 f16 bf f32 f64 f32"},
      {"sign", sign, "b u8 u16 u32 u64 i8 i16 i32 i64 f16 bf f32 f64 c64"},
      {"square", square, "b u8 u16 u32 u64 i8 i16 i32 i64 f16 bf f32 f64 c64"},
      {"logical_not", logical_not, "b b b b b b b b b b b b b b"},
      {"bitwise_invert", bitwise_invert, "b u8 u16 u32 u64 i8 i16 i32 i64 ERR ERR ERR ERR ERR"},
      {"isnan", isnan, "b b b b b b b b b b b b b b"},
      {"isinf", isinf, "b b b b b b b b b b b b b b"},
      {"floor", floor, "b u8 u16 u32 u64 i8 i16 i32 i64 f16 bf f32 f64 ERR"},
      {"ceil", ceil, "b u8 u16 u32 u64 i8 i16 i32 i64 f16 bf f32 f64 ERR"},
      {"stop_gradient", stop_gradient, "b u8 u16 u32 u64 i8 i16 i32 i64 f16 bf f32 f64 c64"},
  };
  auto dtypes = all_dtypes();
  for (const auto& row : rows) {
    auto codes = split_codes(row.expected);
    for (size_t i = 0; i < dtypes.size(); ++i) {
      array a = ones_of(dtypes[i]);
      if (codes[i] == "ERR") {
        EXPECT_THROW(row.fn(a, {}), std::invalid_argument) << row.op << " " << dtypes[i];
      } else {
        array r = row.fn(a, {});
        EXPECT_EQ(r.dtype(), dtype_from_code(codes[i])) << row.op << " " << dtypes[i];
        r.eval(); // every supported dtype has a kernel
      }
    }
  }
}

TEST(ElementwiseUnary, FloatResultsForEveryDtype) {
  const char* inexact = "f32 f32 f32 f32 f32 f32 f32 f32 f32 f16 bf f32 f64 c64";
  const char* real_only = "f32 f32 f32 f32 f32 f32 f32 f32 f32 f16 bf f32 f64 ERR";
  struct Row {
    const char* op;
    array (*fn)(const array&, StreamOrDevice);
    const char* expected;
  };
  const Row rows[] = {
      {"sqrt", sqrt, inexact},
      {"rsqrt", rsqrt, inexact},
      {"reciprocal", reciprocal, inexact},
      {"exp", exp, inexact},
      {"log", log, inexact},
      {"sin", sin, inexact},
      {"cos", cos, inexact},
      {"tanh", tanh, inexact},
      {"erf", erf, real_only},
      {"sigmoid", sigmoid, real_only},
  };
  auto dtypes = all_dtypes();
  for (const auto& row : rows) {
    auto codes = split_codes(row.expected);
    for (size_t i = 0; i < dtypes.size(); ++i) {
      array a = ones_of(dtypes[i]);
      if (codes[i] == "ERR") {
        EXPECT_THROW(row.fn(a, {}), std::invalid_argument) << row.op << " " << dtypes[i];
      } else {
        array r = row.fn(a, {});
        EXPECT_EQ(r.dtype(), dtype_from_code(codes[i])) << row.op << " " << dtypes[i];
        r.eval();
      }
    }
  }
  // Integer inputs compute in float32.
  expect_close(values<float>(sqrt(array({4, 2}, {2}, int32))), {2.0f, std::sqrt(2.0f)});
  expect_close(values<float>(reciprocal(array({0, 2}, {2}, int32))), {kInf, 0.5f});
}

TEST(ElementwiseUnary, ErrorMessages) {
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(message([] { negative(array({true})); }),
            "[negative] Not supported for bool, use logical_not instead.");
  EXPECT_EQ(message([] { erf(array({complex64_t(1, 1)}, {1}, complex64)); }),
            "[erf] Not supported for complex64.");
  EXPECT_EQ(message([] { sigmoid(array({complex64_t(1, 1)}, {1}, complex64)); }),
            "[sigmoid] Not supported for complex64.");
  EXPECT_EQ(message([] { floor(array({complex64_t(1, 1)}, {1}, complex64)); }),
            "[floor] Not supported for complex64.");
  EXPECT_EQ(message([] { ceil(array({complex64_t(1, 1)}, {1}, complex64)); }),
            "[ceil] Not supported for complex64.");
  EXPECT_EQ(message([] { bitwise_invert(array({1.0f})); }),
            "[bitwise_invert] Bitwise inverse only allowed on integer types.");
}

// ---------------------------------------------------------------------------
// Binary values

TEST(ElementwiseBinary, Float32Arithmetic) {
  array a({7.0f, -7.0f, 7.5f, -7.5f, 1.0f, 0.0f, -0.0f, 6.0f});
  array b({2.0f, 2.0f, -2.0f, 2.0f, 0.0f, 0.0f, 3.0f, -3.0f});
  expect_close(values<float>(add(a, b)), {9, -5, 5.5f, -5.5f, 1, 0, 3, 3});
  expect_close(values<float>(subtract(a, b)), {5, -9, 9.5f, -9.5f, 1, 0, -3, 9});
  expect_close(values<float>(multiply(a, b)), {14, -14, -15, -15, 0, 0, -0.0f, -18});
  expect_close(values<float>(divide(a, b)), {3.5f, -3.5f, -3.75f, -3.75f, kInf, kNan, -0.0f, -2});
  expect_close(values<float>(floor_divide(a, b)), {3, -4, -4, -4, kInf, kNan, -0.0f, -2});
  // remainder takes the divisor's sign; x % 0 is NaN.
  expect_close(values<float>(remainder(a, b)), {1, 1, -0.5f, 0.5f, kNan, kNan, 0, 0});
  auto r =
      values<float>(remainder(array({-6.0f, 1.0f, -1.0f, kInf}), array({3.0f, kInf, kInf, 2.0f})));
  EXPECT_TRUE(std::signbit(r[0])); // -6 % 3 is -0, as fmod gives
  EXPECT_EQ(r[1], 1.0f);
  EXPECT_EQ(r[2], kInf); // -1 % inf = inf (NumPy and MLX agree)
  EXPECT_TRUE(std::isnan(r[3]));
  expect_close(values<float>(power(array({2.0f, -8.0f, 0.0f, 0.0f, 4.0f}),
                                   array({3.0f, 1.0f / 3, 0.0f, -1.0f, 0.5f}))),
               {8, kNan, 1, kInf, 2});
}

TEST(ElementwiseBinary, MaximumMinimumPropagateNaN) {
  array a({1.0f, kNan, 2.0f, kNan, -0.0f, 0.0f});
  array b({kNan, 1.0f, 3.0f, kNan, 0.0f, -0.0f});
  auto mx = values<float>(maximum(a, b));
  auto mn = values<float>(minimum(a, b));
  for (int i : {0, 1, 3}) {
    EXPECT_TRUE(std::isnan(mx[i])) << i;
    EXPECT_TRUE(std::isnan(mn[i])) << i;
  }
  EXPECT_EQ(mx[2], 3.0f);
  EXPECT_EQ(mn[2], 2.0f);
  // Equal zeros give the second operand, as in MLX.
  EXPECT_FALSE(std::signbit(mx[4]));
  EXPECT_TRUE(std::signbit(mx[5]));
  EXPECT_FALSE(std::signbit(mn[4]));
  EXPECT_TRUE(std::signbit(mn[5]));
  EXPECT_EQ(values<int32_t>(maximum(array({1, -5}, {2}, int32), array({-2, 3}, {2}, int32))),
            (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(values<bool>(minimum(array({true, true}), array({false, true}))),
            (std::vector<bool>{false, true}));
}

TEST(ElementwiseBinary, IntegerArithmetic) {
  array a({7, -7, 7, -7, 5, -5, 0}, {7}, int32);
  array b({2, 2, -2, -2, 0, 0, 0}, {7}, int32);
  EXPECT_EQ(values<int32_t>(floor_divide(a, b)), (std::vector<int32_t>{3, -4, -4, 3, 0, 0, 0}));
  EXPECT_EQ(values<int32_t>(remainder(a, b)), (std::vector<int32_t>{1, 1, -1, -1, 5, -5, 0}));
  EXPECT_EQ(values<int32_t>(
                remainder(array({7, -7, 7, -7}, {4}, int32), array({3, 3, -3, -3}, {4}, int32))),
            (std::vector<int32_t>{1, 2, -2, -1}));
  // INT_MIN // -1 wraps (MLX traps with SIGFPE here).
  EXPECT_EQ(values<int32_t>(floor_divide(array({INT32_MIN}, {1}, int32), array({-1}, {1}, int32))),
            (std::vector<int32_t>{INT32_MIN}));
  EXPECT_EQ(values<int8_t>(remainder(array({-128}, {1}, int8), array({-1}, {1}, int8))),
            (std::vector<int8_t>{0}));
  EXPECT_EQ(values<uint8_t>(floor_divide(array({7, 200}, {2}, uint8), array({0, 7}, {2}, uint8))),
            (std::vector<uint8_t>{0, 28}));
  EXPECT_EQ(values<uint8_t>(remainder(array({7, 200}, {2}, uint8), array({0, 7}, {2}, uint8))),
            (std::vector<uint8_t>{7, 4}));
  // Wrap-around, no undefined behaviour.
  EXPECT_EQ(values<uint8_t>(add(array({250}, {1}, uint8), array({10}, {1}, uint8))),
            (std::vector<uint8_t>{4}));
  EXPECT_EQ(values<int32_t>(add(array({INT32_MAX}, {1}, int32), array({1}, {1}, int32))),
            (std::vector<int32_t>{INT32_MIN}));
  EXPECT_EQ(values<int16_t>(multiply(array({300}, {1}, int16), array({300}, {1}, int16))),
            (std::vector<int16_t>{static_cast<int16_t>(90000)}));
  // Powers: wrap, and a negative exponent gives 0 (even for bases 1 and -1).
  EXPECT_EQ(values<int32_t>(power(array({2, 3, -2, 0, 2, 1, -1}, {7}, int32),
                                  array({3, 2, 3, 0, 31, -5, -3}, {7}, int32))),
            (std::vector<int32_t>{8, 9, -8, 1, INT32_MIN, 0, 0}));
  EXPECT_EQ(values<int8_t>(power(array({3}, {1}, int8), array({5}, {1}, int8))),
            (std::vector<int8_t>{-13}));
  EXPECT_EQ(values<int64_t>(power(array({-3}, {1}, int64), array({41}, {1}, int64))),
            (std::vector<int64_t>{420491770248316829LL}));
  EXPECT_EQ(values<uint8_t>(power(array({2}, {1}, uint8), array({10}, {1}, uint8))),
            (std::vector<uint8_t>{0}));
}

TEST(ElementwiseBinary, BoolArithmetic) {
  array t({true, true, false, false});
  array u({true, false, true, false});
  EXPECT_EQ(values<bool>(add(t, u)), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(values<bool>(subtract(t, u)), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(values<bool>(multiply(t, u)), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(values<bool>(floor_divide(t, u)), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(values<bool>(remainder(t, u)), (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(values<bool>(power(t, u)), (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ(values<bool>(maximum(t, u)), (std::vector<bool>{true, true, true, false}));
}

TEST(ElementwiseBinary, ComparisonsAndLogic) {
  array a({1.0f, kNan, 2.0f, 3.0f});
  array b({1.0f, kNan, 3.0f, 2.0f});
  EXPECT_EQ(values<bool>(equal(a, b)), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(values<bool>(not_equal(a, b)), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(values<bool>(less(a, b)), (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ(values<bool>(less_equal(a, b)), (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(values<bool>(greater(a, b)), (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(values<bool>(greater_equal(a, b)), (std::vector<bool>{true, false, false, true}));
  // Complex numbers order lexicographically.
  using c = complex64_t;
  array z({c(1, 5), c(2, 0), c(1, 1)}, {3}, complex64);
  array w({c(2, 0), c(1, 9), c(1, 2)}, {3}, complex64);
  EXPECT_EQ(values<bool>(less(z, w)), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(values<bool>(greater_equal(z, z)), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(values<c>(maximum(z, w)), (std::vector<c>{c(2, 0), c(2, 0), c(1, 2)}));
  EXPECT_EQ(values<c>(minimum(z, w)), (std::vector<c>{c(1, 5), c(1, 9), c(1, 1)}));
  // Logical ops take truth values (NaN is true).
  array f({1.5f, 0.0f, kNan, 0.0f});
  array g({2.0f, 2.0f, 0.0f, 0.0f});
  EXPECT_EQ(values<bool>(logical_and(f, g)), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(values<bool>(logical_or(f, g)), (std::vector<bool>{true, true, true, false}));
}

TEST(ElementwiseBinary, BitwiseAndShifts) {
  array a({12, -1, 5}, {3}, int32);
  array b({10, 7, 3}, {3}, int32);
  EXPECT_EQ(values<int32_t>(bitwise_and(a, b)), (std::vector<int32_t>{8, 7, 1}));
  EXPECT_EQ(values<int32_t>(bitwise_or(a, b)), (std::vector<int32_t>{14, -1, 7}));
  EXPECT_EQ(values<int32_t>(bitwise_xor(a, b)), (std::vector<int32_t>{6, -8, 6}));
  EXPECT_EQ(values<bool>(bitwise_xor(array({true, false}), array({true, true}))),
            (std::vector<bool>{false, true}));
  // Shift counts wrap modulo the register width, as MLX's results do.
  EXPECT_EQ(values<int32_t>(left_shift(array({1, 1, 1, -1, 1, 1}, {6}, int32),
                                       array({3, 31, 32, 1, -1, 40}, {6}, int32))),
            (std::vector<int32_t>{8, INT32_MIN, 1, -2, INT32_MIN, 256}));
  EXPECT_EQ(values<int32_t>(right_shift(array({-8, -8, 8, -1}, {4}, int32),
                                        array({1, 40, 40, 31}, {4}, int32))),
            (std::vector<int32_t>{-4, -1, 0, -1}));
  EXPECT_EQ(values<uint8_t>(left_shift(array({255}, {1}, uint8), array({1}, {1}, uint8))),
            (std::vector<uint8_t>{254}));
  EXPECT_EQ(values<uint8_t>(right_shift(array({255}, {1}, uint8), array({1}, {1}, uint8))),
            (std::vector<uint8_t>{127}));
  EXPECT_EQ(values<int8_t>(right_shift(array({-128}, {1}, int8), array({9}, {1}, int8))),
            (std::vector<int8_t>{-1}));
  EXPECT_EQ(values<int8_t>(left_shift(array({1}, {1}, int8), array({9}, {1}, int8))),
            (std::vector<int8_t>{0}));
  EXPECT_EQ(values<uint64_t>(left_shift(array({1}, {1}, uint64), array({63}, {1}, uint64))),
            (std::vector<uint64_t>{uint64_t(1) << 63}));
}

TEST(ElementwiseBinary, BoolShiftsAreUint8) {
  array r = left_shift(array({true}), array({true}));
  EXPECT_EQ(r.dtype(), uint8);
  EXPECT_EQ(values<uint8_t>(r), (std::vector<uint8_t>{2}));
}

TEST(ElementwiseBinary, HalfAndFloat64) {
  array h({7.0f, 7.5f, -7.5f}, {3}, float16);
  array two({2.0f, 2.0f, 2.0f}, {3}, float16);
  EXPECT_EQ(floor_divide(h, two).dtype(), float16);
  auto fd = values<float16_t>(floor_divide(h, two));
  EXPECT_EQ(float(fd[0]), 3.0f);
  EXPECT_EQ(float(fd[2]), -4.0f);
  auto rm = values<bfloat16_t>(
      remainder(array({7.5f, -7.5f}, {2}, bfloat16), array({2.0f, 2.0f}, {2}, bfloat16)));
  EXPECT_EQ(float(rm[0]), 1.5f);
  EXPECT_EQ(float(rm[1]), 0.5f);
  auto p = values<float16_t>(power(array({2.0f}, {1}, float16), array({20.0f}, {1}, float16)));
  EXPECT_EQ(float(p[0]), kInf); // 2^20 overflows float16
  array d({1e300, -2.0}, {2}, float64);
  expect_close(values<double>(multiply(d, d)), {kInf, 4.0}, 0, 0);
  expect_close(values<double>(divide(array({1.0}, {1}, float64), array({3.0}, {1}, float64))),
               {1.0 / 3.0}, 1e-16, 0);
}

TEST(ElementwiseBinary, ComplexArithmetic) {
  using c = complex64_t;
  array z({c(1, 1), c(1, 2)}, {2}, complex64);
  array w({c(1, -1), c(1, 1)}, {2}, complex64);
  EXPECT_EQ(values<c>(add(z, w)), (std::vector<c>{c(2, 0), c(2, 3)}));
  EXPECT_EQ(values<c>(multiply(z, w)), (std::vector<c>{c(2, 0), c(-1, 3)}));
  auto q = values<c>(divide(z, w));
  EXPECT_NEAR(q[0].real(), 0.0f, 1e-7);
  EXPECT_NEAR(q[0].imag(), 1.0f, 1e-7);
  // floor_divide of complex numbers divides, as in MLX.
  auto fd = values<c>(floor_divide(z, w));
  EXPECT_NEAR(fd[1].real(), 1.5f, 1e-6);
  EXPECT_NEAR(fd[1].imag(), 0.5f, 1e-6);
  auto p = values<c>(power(array({c(1, 1)}, {1}, complex64), array({c(2, 0)}, {1}, complex64)));
  EXPECT_NEAR(p[0].real(), 0.0f, 1e-6);
  EXPECT_NEAR(p[0].imag(), 2.0f, 1e-6);
}

TEST(ElementwiseBinary, PromotionTable) {
  // MLX 0.32.4's result dtypes (rows: first operand, columns: second).
  const char* add_table[] = {
      "b u8 u16 u32 u64 i8 i16 i32 i64 f16 bf f32 f64 c64",
      "u8 u8 u16 u32 u64 i16 i16 i32 i64 f16 bf f32 f64 c64",
      "u16 u16 u16 u32 u64 i32 i32 i32 i64 f16 bf f32 f64 c64",
      "u32 u32 u32 u32 u64 i64 i64 i64 i64 f16 bf f32 f64 c64",
      "u64 u64 u64 u64 u64 f32 f32 f32 f32 f16 bf f32 f64 c64",
      "i8 i16 i32 i64 f32 i8 i16 i32 i64 f16 bf f32 f64 c64",
      "i16 i16 i32 i64 f32 i16 i16 i32 i64 f16 bf f32 f64 c64",
      "i32 i32 i32 i64 f32 i32 i32 i32 i64 f16 bf f32 f64 c64",
      "i64 i64 i64 i64 f32 i64 i64 i64 i64 f16 bf f32 f64 c64",
      "f16 f16 f16 f16 f16 f16 f16 f16 f16 f16 f32 f32 f64 c64",
      "bf bf bf bf bf bf bf bf bf f32 bf f32 f64 c64",
      "f32 f32 f32 f32 f32 f32 f32 f32 f32 f32 f32 f32 f64 c64",
      "f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 c64",
      "c64 c64 c64 c64 c64 c64 c64 c64 c64 c64 c64 c64 c64 c64",
  };
  auto dtypes = all_dtypes();
  using BinaryFn = array (*)(const array&, const array&, StreamOrDevice);
  for (size_t i = 0; i < dtypes.size(); ++i) {
    auto row = split_codes(add_table[i]);
    for (size_t j = 0; j < dtypes.size(); ++j) {
      array a = ones_of(dtypes[i]);
      array b = ones_of(dtypes[j]);
      Dtype promoted = dtype_from_code(row[j]);
      bool integral = is_integral(promoted) || promoted == bool_;
      for (BinaryFn fn : {BinaryFn(add), BinaryFn(subtract), BinaryFn(multiply), BinaryFn(power),
                          BinaryFn(maximum), BinaryFn(minimum)}) {
        EXPECT_EQ(fn(a, b, {}).dtype(), promoted) << dtypes[i] << ", " << dtypes[j];
      }
      EXPECT_EQ(floor_divide(a, b).dtype(), promoted);
      EXPECT_EQ(divide(a, b).dtype(), is_inexact(promoted) ? promoted : float32);
      for (BinaryFn fn : {BinaryFn(equal), BinaryFn(not_equal), BinaryFn(less),
                          BinaryFn(greater_equal), BinaryFn(logical_and), BinaryFn(logical_or)}) {
        EXPECT_EQ(fn(a, b, {}).dtype(), bool_);
      }
      if (promoted == complex64) {
        EXPECT_THROW(remainder(a, b), std::invalid_argument);
      } else {
        EXPECT_EQ(remainder(a, b).dtype(), promoted);
      }
      for (BinaryFn fn : {BinaryFn(bitwise_and), BinaryFn(bitwise_or), BinaryFn(bitwise_xor),
                          BinaryFn(left_shift), BinaryFn(right_shift)}) {
        if (!integral) {
          EXPECT_THROW(fn(a, b, {}), std::runtime_error) << dtypes[i] << ", " << dtypes[j];
        } else {
          bool shift = fn == BinaryFn(left_shift) || fn == BinaryFn(right_shift);
          EXPECT_EQ(fn(a, b, {}).dtype(), shift && promoted == bool_ ? uint8 : promoted);
        }
      }
    }
  }
  // Values after promotion: int32 and uint32 compare as int64, int64 and
  // uint64 as float32 (so 2^24 + 1 equals 2^24 there, as in MLX).
  EXPECT_TRUE(values<bool>(less(array({-1}, {1}, int32), array({1}, {1}, uint32)))[0]);
  EXPECT_TRUE(values<bool>(equal(array({16777217}, {1}, int64),
                                 array(std::vector<uint64_t>{16777216}, {1}, uint64)))[0]);
  expect_close(values<float>(divide(array({7}, {1}, int32), array({2}, {1}, int32))), {3.5f});
  expect_close(values<float>(add(array({1}, {1}, int32), array({0.5f}))), {1.5f});
}

TEST(ElementwiseBinary, ErrorMessages) {
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(message([] {
              add(array({1.0f, 2.0f}), array({1.0f, 2.0f, 3.0f}));
            }),
            "[broadcast_shapes] Shapes (2) and (3) cannot be broadcast.");
  EXPECT_EQ(message([] { bitwise_and(array({1.0f}), array({1.0f})); }),
            "[bitwise_and] Only allowed on integer or boolean types but got types float32 and "
            "float32.");
  EXPECT_EQ(message([] { right_shift(array({1.0f}), array({1.0f})); }),
            "[right_shift] Only allowed on integer or boolean types but got types float32 and "
            "float32.");
  // MLX names the inputs' dtypes, except for right_shift (the promoted one).
  EXPECT_EQ(message([] { left_shift(array({1}, {1}, int8), array({1.0f}, {1}, float16)); }),
            "[left_shift] Only allowed on integer or boolean types but got types int8 and "
            "float16.");
  EXPECT_EQ(message([] { right_shift(array({1}, {1}, int8), array({1.0f}, {1}, float16)); }),
            "[right_shift] Only allowed on integer or boolean types but got types float16 and "
            "float16.");
  EXPECT_THROW(bitwise_or(array({1.0}, {1}, float64), array({1.0}, {1}, float64)),
               std::runtime_error);
  EXPECT_EQ(message([] {
              remainder(array({complex64_t(1, 1)}, {1}, complex64),
                        array({complex64_t(1, 1)}, {1}, complex64));
            }),
            "[remainder] Complex type not supported.");
  EXPECT_EQ(message([] {
              where(array({true, false, true}), array({1.0f, 2.0f}), array(3.0f));
            }),
            "[broadcast_shapes] Shapes (3) and (2) cannot be broadcast.");
}

// ---------------------------------------------------------------------------
// Layouts: broadcasting, strided views, empty arrays, donation

TEST(ElementwiseLayout, Broadcasting) {
  array col({1.0f, 2.0f}, {2, 1});
  array row({10.0f, 20.0f, 30.0f}, {3});
  array r = add(col, row);
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_EQ(values<float>(r), (std::vector<float>{11, 21, 31, 12, 22, 32}));
  EXPECT_EQ(values<float>(multiply(row, array(2.0f))), (std::vector<float>{20, 40, 60}));
  EXPECT_EQ(values<float>(subtract(array(1.0f), row)), (std::vector<float>{-9, -19, -29}));
  array w = where(array({true, false}, {2, 1}), row, array(0.0f));
  EXPECT_EQ(values<float>(w), (std::vector<float>{10, 20, 30, 0, 0, 0}));
  // A unary op on a broadcast scalar computes it once and stays a broadcast.
  array e = exp(add(array(0.0f), array({0.0f, 0.0f, 0.0f, 0.0f}, {2, 2})));
  EXPECT_EQ(values<float>(e), (std::vector<float>{1, 1, 1, 1}));
}

TEST(ElementwiseLayout, TransposedOperandBesideRowMajor) {
  // A transposed operand beside a row-major one is copied row-major first
  // (binary.cpp); beside a broadcast column it takes the strided walk. Sizes
  // on and off the transpose copy's block edges; every element checked.
  Stream s = cpu_stream();
  for (auto [rows, cols] :
       std::vector<std::pair<int, int>>{{32, 32}, {33, 70}, {100, 31}, {257, 129}}) {
    std::vector<float> a(size_t(rows) * cols), bt(size_t(cols) * rows);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) a[size_t(i) * cols + j] = float(i * 1000 + j);
    for (int j = 0; j < cols; ++j)
      for (int i = 0; i < rows; ++i) bt[size_t(j) * rows + i] = float(-(i * 3 + j * 7));
    array ra(a, {rows, cols});
    array tb = transposed(array(bt, {cols, rows})); // (rows, cols), element (i, j) = -(3i + 7j)
    std::vector<float> got = values<float>(make_binary(BinaryOp::Add, ra, tb, s));
    std::vector<float> got_rev = values<float>(make_binary(BinaryOp::Subtract, tb, ra, s));
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) {
        float want = float(i * 1000 + j) - float(i * 3 + j * 7);
        ASSERT_EQ(got[size_t(i) * cols + j], want)
            << rows << "x" << cols << " at " << i << "," << j;
        ASSERT_EQ(got_rev[size_t(i) * cols + j], -float(i * 3 + j * 7) - float(i * 1000 + j));
      }
    // The transposed operand beside a column broadcast (stride 0 inner).
    std::vector<float> colv(rows);
    for (int i = 0; i < rows; ++i) colv[i] = float(i);
    array col = view(array(colv, {rows}), {rows, cols}, {1, 0});
    std::vector<float> got_col = values<float>(make_binary(BinaryOp::Multiply, tb, col, s));
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j)
        ASSERT_EQ(got_col[size_t(i) * cols + j], -float(i * 3 + j * 7) * float(i));
  }
}

TEST(ElementwiseLayout, KernelsHandleStridesAndBroadcasts) {
  // Operands built directly as views, as the shape family's transpose,
  // slices and broadcast_to produce them.
  Stream s = cpu_stream();
  std::vector<float> data(12);
  for (int i = 0; i < 12; ++i) data[i] = static_cast<float>(i);
  array m(data, {3, 4});
  array mt = transposed(m); // (4, 3), element (i, j) = 4 j + i
  array ones_t = transposed(array(std::vector<float>(12, 1.0f), {3, 4}));
  std::vector<float> want_t;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) want_t.push_back(4.0f * j + i);
  }
  // Two dense operands of the same non-row-major layout: flat loop, and the
  // output keeps their layout.
  array sum_t = make_binary(BinaryOp::Add, mt, ones_t, s);
  std::vector<float> want_sum;
  for (float v : want_t) want_sum.push_back(v + 1.0f);
  EXPECT_EQ(values<float>(sum_t), want_sum);
  EXPECT_FALSE(sum_t.flags().row_contiguous);
  // A transposed operand with a row-major one: the strided path.
  array rm(std::vector<float>(12, 100.0f), {4, 3});
  EXPECT_EQ(values<float>(make_binary(BinaryOp::Subtract, rm, mt, s)), [&] {
    std::vector<float> w;
    for (float v : want_t) w.push_back(100.0f - v);
    return w;
  }());
  // Every other column: (3, 2) with strides (4, 2).
  array cols = view(m, {3, 2}, {4, 2});
  EXPECT_EQ(values<float>(make_unary(UnaryOp::Negative, cols, s)),
            (std::vector<float>{-0.0f, -2, -4, -6, -8, -10}));
  // A reversed view (negative stride), however it is flagged.
  array v4({1.0f, 2.0f, 3.0f, 4.0f});
  for (bool flagged : {false, true}) {
    array rev = view(v4, {4}, {-1}, Flags{flagged, flagged, flagged}, 3);
    EXPECT_EQ(values<float>(make_unary(UnaryOp::Square, rev, s)),
              (std::vector<float>{16, 9, 4, 1}));
    EXPECT_EQ(values<float>(make_binary(BinaryOp::Subtract, rev, v4, s)),
              (std::vector<float>{3, 1, -1, -3}));
  }
  // A row broadcast down (stride 0 along the first axis) and a column
  // broadcast across, in one op.
  array row = view(array({1.0f, 2.0f, 3.0f, 4.0f}), {3, 4}, {0, 1});
  array col = view(array({10.0f, 20.0f, 30.0f}), {3, 4}, {1, 0});
  std::vector<float> want_rc;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) want_rc.push_back(10.0f * (i + 1) * (j + 1));
  }
  EXPECT_EQ(values<float>(make_binary(BinaryOp::Multiply, col, row, s)), want_rc);
  // Broadcast scalars against dense and strided operands.
  array scalar = view(array(5.0f), {3, 4}, {0, 0});
  std::vector<float> plus5(data);
  for (auto& v : plus5) v += 5.0f;
  EXPECT_EQ(values<float>(make_binary(BinaryOp::Add, m, scalar, s)), plus5);
  EXPECT_EQ(values<float>(make_binary(BinaryOp::Add, scalar, m, s)), plus5);
  array both = make_binary(BinaryOp::Add, scalar, scalar, s);
  EXPECT_EQ(values<float>(both), std::vector<float>(12, 10.0f));
  array e = make_unary(UnaryOp::Exp, view(array(0.0f), {2, 3}, {0, 0}), s);
  EXPECT_EQ(values<float>(e), std::vector<float>(6, 1.0f));
  EXPECT_EQ(e.data_size(), 1u); // computed once, stays a broadcast
  // where over mixed layouts, with a broadcast constant.
  array cond = view(array({true, false, true}), {3, 4}, {1, 0});
  array zero = view(array(0.0f), {3, 4}, {0, 0});
  std::vector<float> want_w;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) want_w.push_back(i == 1 ? 0.0f : data[4 * i + j]);
  }
  EXPECT_EQ(values<float>(make_select(cond, m, zero, s)), want_w);
  std::vector<float> want_w2;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) want_w2.push_back(i == 1 ? data[4 * i + j] : 0.0f);
  }
  EXPECT_EQ(values<float>(make_select(cond, zero, m, s)), want_w2);
}

TEST(ElementwiseLayout, LargeStridedRunsOnManyThreads) {
  // Big enough to split across the pool, with a transposed operand so every
  // chunk starts mid-row.
  const int n = 700, m = 900;
  std::vector<float> a(n * m), b(n * m);
  for (int i = 0; i < n * m; ++i) {
    a[i] = static_cast<float>(i % 977) / 100.0f;
    b[i] = static_cast<float>(i % 313);
  }
  array x(a, {n, m});
  array yt = transposed(array(b, {m, n})); // (n, m), element (i, j) = b[j n + i]
  auto got = values<float>(make_binary(BinaryOp::Add, x, yt, cpu_stream()));
  for (int i = 0; i < n; i += 37) {
    for (int j = 0; j < m; j += 11) {
      ASSERT_EQ(got[i * m + j], a[i * m + j] + b[j * n + i]) << i << ", " << j;
    }
  }
  auto e = values<float>(exp(array(a, {n, m})));
  for (int i = 0; i < n * m; i += 4999) {
    double want = std::exp(static_cast<double>(a[i]));
    ASSERT_NEAR(e[i], want, 2.5e-7 * want) << i;
  }
}

TEST(ElementwiseLayout, EmptyArrays) {
  array e(std::vector<float>{}, {0, 3});
  array r = exp(e);
  EXPECT_EQ(r.shape(), (Shape{0, 3}));
  r.eval();
  EXPECT_EQ(r.size(), 0u);
  array s = add(e, e);
  s.eval();
  EXPECT_EQ(s.shape(), (Shape{0, 3}));
  array c = less(e, e);
  c.eval();
  EXPECT_EQ(c.dtype(), bool_);
  array w = where(array(std::vector<bool>{}, {0, 3}), e, e);
  w.eval();
  EXPECT_EQ(w.size(), 0u);
}

TEST(ElementwiseLayout, DeadInputBufferIsDonated) {
  std::vector<float> data(1 << 12, 1.5f);
  array x(data, {1 << 12});
  array y(data, {1 << 12});
  const void* x_buffer = x.data<float>();
  array z = add(x, y);
  x = array(0.0f); // nothing but the graph holds the old x now
  z.eval();
  EXPECT_EQ(z.data<float>(), x_buffer);
  EXPECT_EQ(values<float>(z)[7], 3.0f);
  EXPECT_EQ(values<float>(y)[7], 1.5f);

  // A live input is never overwritten.
  array u(data, {1 << 12});
  array v = exp(u);
  v.eval();
  EXPECT_NE(v.data<float>(), u.data<float>());
  EXPECT_EQ(values<float>(u)[0], 1.5f);

  // Unary, and only when the element sizes match.
  array p(data, {1 << 12});
  const void* p_buffer = p.data<float>();
  array q = sqrt(p);
  p = array(0.0f);
  q.eval();
  EXPECT_EQ(q.data<float>(), p_buffer);
  array k(data, {1 << 12});
  array nan_mask = isnan(k); // bool output: cannot reuse a float buffer
  k = array(0.0f);
  nan_mask.eval();
  EXPECT_FALSE(values<bool>(nan_mask)[0]);
}

TEST(ElementwiseLayout, StopGradientSharesTheBuffer) {
  array x({1.0f, 2.0f, 3.0f});
  array y = stop_gradient(x);
  EXPECT_TRUE(y.primitive().traits().noop);
  y.eval();
  EXPECT_EQ(y.data<float>(), x.data<float>());
  EXPECT_EQ(values<float>(y), (std::vector<float>{1, 2, 3}));
}

// ---------------------------------------------------------------------------
// where and whole-array comparisons

TEST(ElementwiseTernary, Where) {
  array c({true, false, true});
  array x({1, 2, 3}, {3}, int32);
  array y({10, 20, 30}, {3}, int32);
  array r = where(c, x, y);
  EXPECT_EQ(r.dtype(), int32);
  EXPECT_EQ(values<int32_t>(r), (std::vector<int32_t>{1, 20, 3}));
  using cx = complex64_t;
  array zc({cx(1, 1), cx(2, 2), cx(3, 3)}, {3}, complex64);
  EXPECT_EQ(values<cx>(where(c, zc, zc))[1], cx(2, 2));
}

TEST(ElementwiseTernary, WherePromotesAndCastsTheCondition) {
  array r = where(array({true, false}), array({1, 2}, {2}, int32), array({1.5f, 2.5f}));
  EXPECT_EQ(r.dtype(), float32);
  EXPECT_EQ(values<float>(r), (std::vector<float>{1.0f, 2.5f}));
  // Non-bool conditions use their truth value (NaN is true).
  EXPECT_EQ(values<int32_t>(
                where(array({kNan, 0.0f}), array({1, 2}, {2}, int32), array({3, 4}, {2}, int32))),
            (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(
      where(array({true, false}), array({1, 2}, {2}, uint8), array({3, 4}, {2}, int8)).dtype(),
      int16);
}

TEST(ElementwiseComparison, IsCloseAllCloseArrayEqual) {
  auto close = values<bool>(isclose(array({1.0f, kNan, kInf, -kInf, 1.0f}),
                                    array({1.0f + 1e-6f, kNan, kInf, kInf, 1.1f})));
  EXPECT_EQ(close, (std::vector<bool>{true, false, true, false, false}));
  EXPECT_EQ(values<bool>(isclose(array({1.0f, kNan}), array({1.0f, kNan}), 1e-5, 1e-8, true)),
            (std::vector<bool>{true, true}));
  // Integer differences are taken in the integer dtype: unsigned ones wrap.
  EXPECT_FALSE(values<bool>(isclose(array(std::vector<uint32_t>{100000}, {1}, uint32),
                                    array(std::vector<uint32_t>{100001}, {1}, uint32)))[0]);
  EXPECT_TRUE(values<bool>(isclose(array(std::vector<uint32_t>{100001}, {1}, uint32),
                                   array(std::vector<uint32_t>{100000}, {1}, uint32)))[0]);
  EXPECT_TRUE(values<bool>(isclose(array({100000}, {1}, int32), array({100001}, {1}, int32)))[0]);

  EXPECT_TRUE(allclose(array({1.0f, 2.0f}), array({1.0f, 2.0f})).item<bool>());
  EXPECT_FALSE(allclose(array({1.0f, kNan}), array({1.0f, kNan})).item<bool>());
  EXPECT_TRUE(allclose(array({1.0f, kNan}), array({1.0f, kNan}), 1e-5, 1e-8, true).item<bool>());
  EXPECT_FALSE(allclose(array({1, 2}, {2}, int32), array({1, 2}, {2}, int32), -1.0).item<bool>());
  EXPECT_TRUE(
      allclose(array(std::vector<float>{}, {0}), array(std::vector<float>{}, {0})).item<bool>());
  EXPECT_THROW(allclose(array({1.0f, 2.0f}), array({1.0f, 2.0f, 3.0f})), std::invalid_argument);

  EXPECT_TRUE(array_equal(array({1, 2}, {2}, int32), array({1.0f, 2.0f})).item<bool>());
  EXPECT_FALSE(array_equal(array({1, 2}, {2}, int32), array({1, 2, 3}, {3}, int32)).item<bool>());
  EXPECT_FALSE(array_equal(array({1, 2}, {2}, int32), array({1, 2}, {1, 2}, int32)).item<bool>());
  EXPECT_FALSE(array_equal(array({kNan}), array({kNan})).item<bool>());
  EXPECT_TRUE(array_equal(array({kNan}), array({kNan}), true).item<bool>());
  EXPECT_EQ(array_equal(array({1}), array({1})).dtype(), bool_);
}

// ---------------------------------------------------------------------------
// Transforms, through the primitives' own rules

namespace {

// Central difference of a unary op at each element, in float64.
std::vector<double> numeric_derivative(UnaryOp op, const std::vector<double>& x) {
  Stream s = cpu_stream();
  const double h = 1e-6;
  std::vector<double> plus, minus;
  for (double v : x) {
    plus.push_back(v + h);
    minus.push_back(v - h);
  }
  int n = static_cast<int>(x.size());
  auto fp = values<double>(make_unary(op, array(plus, {n}, float64), s));
  auto fm = values<double>(make_unary(op, array(minus, {n}, float64), s));
  std::vector<double> d;
  for (int i = 0; i < n; ++i) d.push_back((fp[i] - fm[i]) / (2 * h));
  return d;
}

} // namespace

TEST(ElementwiseGrad, UnaryVjpAndJvpMatchFiniteDifferences) {
  Stream s = cpu_stream();
  std::vector<double> xs = {-1.7, -0.4, 0.3, 0.9, 2.2};
  std::vector<double> pos = {0.2, 0.7, 1.3, 2.5, 4.0};
  std::vector<double> cot = {0.5, -1.0, 2.0, 1.5, -0.25};
  struct Case {
    UnaryOp op;
    const std::vector<double>* x;
  };
  const Case cases[] = {
      {UnaryOp::Negative, &xs}, {UnaryOp::Abs, &xs},    {UnaryOp::Square, &xs},
      {UnaryOp::Sqrt, &pos},    {UnaryOp::Rsqrt, &pos}, {UnaryOp::Reciprocal, &xs},
      {UnaryOp::Exp, &xs},      {UnaryOp::Log, &pos},   {UnaryOp::Sin, &xs},
      {UnaryOp::Cos, &xs},      {UnaryOp::Tanh, &xs},   {UnaryOp::Erf, &xs},
      {UnaryOp::Sigmoid, &xs},  {UnaryOp::Sign, &xs},   {UnaryOp::Floor, &xs},
      {UnaryOp::Ceil, &xs},
  };
  for (const auto& c : cases) {
    const auto& x = *c.x;
    int n = static_cast<int>(x.size());
    array xa(x, {n}, float64);
    array ca(cot, {n}, float64);
    Unary prim(s, c.op);
    array out = make_unary(c.op, xa, s);
    auto d = numeric_derivative(c.op, x);
    auto g = prim.vjp({xa}, {ca}, {0}, {out});
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0].dtype(), float64);
    EXPECT_EQ(g[0].shape(), xa.shape());
    auto t = prim.jvp({xa}, {ca}, {0});
    auto gv = values<double>(g[0]);
    auto tv = values<double>(t[0]);
    for (int i = 0; i < n; ++i) {
      EXPECT_NEAR(gv[i], cot[i] * d[i], 1e-6 * (1 + std::abs(cot[i] * d[i])))
          << unary_op_name(c.op) << " at " << x[i];
      EXPECT_NEAR(tv[i], cot[i] * d[i], 1e-6 * (1 + std::abs(cot[i] * d[i])))
          << unary_op_name(c.op) << " at " << x[i];
    }
  }
}

TEST(ElementwiseGrad, ComplexVjpConjugatesTheDerivative) {
  // MLX's convention: vjp = cot * conj(f'(z)), jvp = t * f'(z).
  using c = complex64_t;
  Stream s = cpu_stream();
  array z({c(1, 1)}, {1}, complex64);
  array w({c(2, 3)}, {1}, complex64);
  array cot({c(0, 1)}, {1}, complex64);
  Binary mul(s, BinaryOp::Multiply);
  auto g = mul.vjp({z, w}, {cot}, {0, 1}, {make_binary(BinaryOp::Multiply, z, w, s)});
  auto g0 = values<c>(g[0])[0];
  EXPECT_NEAR(g0.real(), 3.0f, 1e-6); // i * conj(2 + 3i) = 3 + 2i
  EXPECT_NEAR(g0.imag(), 2.0f, 1e-6);
  Unary e(s, UnaryOp::Exp);
  auto ge = values<c>(e.vjp({z}, {cot}, {0}, {make_unary(UnaryOp::Exp, z, s)})[0])[0];
  c want = c(0, 1) * std::conj(std::exp(c(1, 1)));
  EXPECT_NEAR(ge.real(), want.real(), 1e-5);
  EXPECT_NEAR(ge.imag(), want.imag(), 1e-5);
  auto te = values<c>(e.jvp({z}, {cot}, {0})[0])[0];
  c want_t = c(0, 1) * std::exp(c(1, 1));
  EXPECT_NEAR(te.real(), want_t.real(), 1e-5);
  EXPECT_NEAR(te.imag(), want_t.imag(), 1e-5);
  // |z|: the cotangent is real, the gradient complex: cot * z / |z|.
  Unary ab(s, UnaryOp::Abs);
  auto ga = values<c>(ab.vjp({z}, {array({2.0f})}, {0}, {make_unary(UnaryOp::Abs, z, s)})[0])[0];
  EXPECT_NEAR(ga.real(), std::sqrt(2.0f), 1e-6);
  EXPECT_NEAR(ga.imag(), std::sqrt(2.0f), 1e-6);
}

TEST(ElementwiseGrad, BinaryVjpAndJvp) {
  Stream s = cpu_stream();
  std::vector<double> av = {0.0, 2.0, -1.5, 3.0, 1.0};
  std::vector<double> bv = {2.0, 2.0, 2.0, 0.5, 1.0};
  array a(av, {5}, float64);
  array b(bv, {5}, float64);
  array cot(std::vector<double>(5, 1.0), {5}, float64);
  auto grads = [&](BinaryOp op) {
    Binary prim(s, op);
    auto g = prim.vjp({a, b}, {cot}, {0, 1}, {make_binary(op, a, b, s)});
    return std::make_pair(values<double>(g[0]), values<double>(g[1]));
  };
  // Values from MLX 0.32.4 for the same inputs.
  auto [ra, rb] = grads(BinaryOp::Remainder);
  expect_close(ra, {1, 1, 1, 1, 1});
  expect_close(rb, {-0.0, -1, 1, -6, -1});
  auto [pa, pb] = grads(BinaryOp::Power);
  expect_close(pa, {0, 4, -3, 0.5 / std::sqrt(3.0), 1}, 1e-12, 1e-12);
  expect_close(pb, {0, 4 * std::log(2.0), std::nan(""), std::sqrt(3.0) * std::log(3.0), 0}, 1e-12,
               1e-12);
  auto [xa, xb] = grads(BinaryOp::Maximum); // ties go to b
  expect_close(xa, {0, 0, 0, 1, 0});
  expect_close(xb, {1, 1, 1, 0, 1});
  auto [na, nb] = grads(BinaryOp::Minimum);
  expect_close(na, {1, 0, 1, 0, 0});
  expect_close(nb, {0, 1, 0, 1, 1});
  auto [da, db] = grads(BinaryOp::Divide);
  expect_close(da, {0.5, 0.5, 0.5, 2, 1});
  expect_close(db, {-0.0, -0.5, 0.375, -12, -1});
  auto [ma, mb] = grads(BinaryOp::Multiply);
  expect_close(ma, bv);
  expect_close(mb, av);
  auto [sa, sb] = grads(BinaryOp::Subtract);
  expect_close(sa, {1, 1, 1, 1, 1});
  expect_close(sb, {-1, -1, -1, -1, -1});
  for (BinaryOp op :
       {BinaryOp::FloorDivide, BinaryOp::Less, BinaryOp::Equal, BinaryOp::LogicalAnd}) {
    auto [za, zb] = grads(op);
    expect_close(za, {0, 0, 0, 0, 0});
    expect_close(zb, {0, 0, 0, 0, 0});
  }
  // d/db a^b at a = 0 is 0 where a^b is 0 and -inf where it is 1 (MLX).
  Binary pw(s, BinaryOp::Power);
  array z0(std::vector<double>{0.0, 0.0}, {2}, float64);
  array e0(std::vector<double>{0.5, 0.0}, {2}, float64);
  auto g0 = pw.vjp({z0, e0}, {array(std::vector<double>{1, 1}, {2}, float64)}, {1},
                   {make_binary(BinaryOp::Power, z0, e0, s)});
  expect_close(values<double>(g0[0]), {0.0, -std::numeric_limits<double>::infinity()});

  // jvp: the sum of both partials times the tangents.
  array ta(std::vector<double>(5, 1.0), {5}, float64);
  array tb(std::vector<double>(5, 10.0), {5}, float64);
  Binary mul(s, BinaryOp::Multiply);
  expect_close(values<double>(mul.jvp({a, b}, {ta, tb}, {0, 1})[0]), {2, 22, -13, 30.5, 11});
  Binary mx(s, BinaryOp::Maximum);
  expect_close(values<double>(mx.jvp({a, b}, {ta, tb}, {0, 1})[0]), {10, 10, 10, 1, 10});
  Binary rem(s, BinaryOp::Remainder);
  expect_close(values<double>(rem.jvp({a, b}, {ta, ta}, {0, 1})[0]), {1, 0, 2, -5, 0});
  Binary lt(s, BinaryOp::Less);
  auto tl = lt.jvp({a, b}, {ta, tb}, {0, 1})[0];
  EXPECT_EQ(tl.dtype(), float64);
  expect_close(values<double>(tl), {0, 0, 0, 0, 0});
}

TEST(ElementwiseGrad, WhereAndStopGradient) {
  Stream s = cpu_stream();
  array c({true, false, true});
  array x({1.0f, 2.0f, 3.0f});
  array y({4.0f, 5.0f, 6.0f});
  array cot({1.0f, 2.0f, 3.0f});
  Select sel(s);
  auto g = sel.vjp({c, x, y}, {cot}, {0, 1, 2}, {make_select(c, x, y, s)});
  EXPECT_EQ(g[0].dtype(), bool_);
  EXPECT_EQ(values<float>(g[1]), (std::vector<float>{1, 0, 3}));
  EXPECT_EQ(values<float>(g[2]), (std::vector<float>{0, 2, 0}));
  array tx({1.0f, 1.0f, 1.0f});
  array ty({2.0f, 2.0f, 2.0f});
  EXPECT_EQ(values<float>(sel.jvp({c, x, y}, {tx, ty}, {1, 2})[0]), (std::vector<float>{1, 2, 1}));
  EXPECT_EQ(values<float>(sel.jvp({c, x, y}, {ty}, {2})[0]), (std::vector<float>{0, 2, 0}));

  StopGradient sg(s);
  EXPECT_EQ(values<float>(sg.vjp({x}, {cot}, {0}, {x})[0]), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(values<float>(sg.jvp({x}, {cot}, {0})[0]), (std::vector<float>{0, 0, 0}));
}

TEST(ElementwiseGrad, VmapAlignsBatchAxes) {
  Stream s = cpu_stream();
  // Unary passes the axis through.
  Unary ex(s, UnaryOp::Exp);
  auto [uo, ua] = ex.vmap({array({0.0f, 0.0f}, {2, 1})}, {1});
  EXPECT_EQ(ua[0], 1);
  EXPECT_EQ(values<float>(uo[0]), (std::vector<float>{1, 1}));
  // Same axis on both: no movement needed.
  Binary add_prim(s, BinaryOp::Add);
  array m({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3});
  auto [o, ax] = add_prim.vmap({m, m}, {0, 0});
  EXPECT_EQ(ax[0], 0);
  EXPECT_EQ(values<float>(o[0]), (std::vector<float>{2, 4, 6, 8, 10, 12}));
}

TEST(ElementwiseGrad, VmapMovesAndExpandsAxes) {
  Stream s = cpu_stream();
  Binary sub(s, BinaryOp::Subtract);
  // a: batch of 2 along axis 0 of (2, 3); b: batch along axis 1 of (3, 2).
  array a({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3});
  array b({10.0f, 40.0f, 20.0f, 50.0f, 30.0f, 60.0f}, {3, 2});
  auto [o, ax] = sub.vmap({a, b}, {0, 1});
  ASSERT_EQ(ax[0], 0);
  EXPECT_EQ(o[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(values<float>(o[0]), (std::vector<float>{-9, -18, -27, -36, -45, -54}));
  // An unmapped operand is shared by every batch element.
  array c({100.0f, 200.0f, 300.0f}, {3});
  auto [o2, ax2] = sub.vmap({a, c}, {0, -1});
  ASSERT_EQ(ax2[0], 0);
  EXPECT_EQ(values<float>(o2[0]), (std::vector<float>{-99, -198, -297, -96, -195, -294}));
  // Ternary: condition unmapped, x mapped on axis 1, y mapped on axis 0.
  Select sel(s);
  array cond({true, false, true});
  array y({-1.0f, -2.0f, -3.0f, -4.0f, -5.0f, -6.0f}, {2, 3});
  auto [o3, ax3] = sel.vmap({cond, b, y}, {-1, 1, 0});
  EXPECT_EQ(ax3[0], 1);
  EXPECT_EQ(o3[0].shape(), (Shape{3, 2}));
  // Row i of the output holds batch elements (b[i, k] or y[k, i]).
  EXPECT_EQ(values<float>(o3[0]), (std::vector<float>{10, 40, -2, -5, 30, 60}));
}

TEST(ElementwiseGrad, ThroughTheTransforms) {
  ArrayFn f = [](const std::vector<array>& in) {
    // x * exp(sin(x)) + erf(x) / 2
    const array& x = in[0];
    return std::vector<array>{add(multiply(x, exp(sin(x))), divide(erf(x), array(2.0, float64)))};
  };
  std::vector<double> xs = {-1.0, 0.25, 1.5};
  array x(xs, {3}, float64);
  array ones(std::vector<double>{1, 1, 1}, {3}, float64);
  auto [outs, grads] = vjp(f, {x}, {ones});
  auto [outs2, tangents] = jvp(f, {x}, {ones});
  auto g = values<double>(grads[0]);
  auto t = values<double>(tangents[0]);
  for (int i = 0; i < 3; ++i) {
    double v = xs[i];
    double want =
        std::exp(std::sin(v)) * (1 + v * std::cos(v)) + std::exp(-v * v) / std::sqrt(M_PI);
    EXPECT_NEAR(g[i], want, 1e-12);
    EXPECT_NEAR(t[i], want, 1e-12);
  }
}

TEST(ElementwisePrimitive, NamesTraitsAndEquivalence) {
  Stream s = cpu_stream();
  Unary e1(s, UnaryOp::Exp), e2(s, UnaryOp::Exp), l(s, UnaryOp::Log);
  EXPECT_STREQ(e1.name(), "Exp");
  EXPECT_TRUE(e1.traits().elementwise);
  EXPECT_TRUE(e1.is_equivalent(e2));
  EXPECT_FALSE(e1.is_equivalent(l));
  Binary a1(s, BinaryOp::Add), a2(s, BinaryOp::Add), m(s, BinaryOp::Multiply);
  EXPECT_STREQ(a1.name(), "Add");
  EXPECT_TRUE(a1.is_equivalent(a2));
  EXPECT_FALSE(a1.is_equivalent(m));
  EXPECT_FALSE(a1.is_equivalent(e1));
  Select sel(s);
  EXPECT_STREQ(sel.name(), "Select");
  EXPECT_TRUE(sel.traits().elementwise);
  StopGradient sg(s);
  EXPECT_TRUE(sg.traits().noop);
  array x({1.0f, 2.0f});
  EXPECT_EQ(a1.output_shapes({x, x}), (std::vector<Shape>{{2}}));
  EXPECT_EQ(less(x, x).dtype(), bool_);
  EXPECT_STREQ(less(x, x).primitive().name(), "Less");
}
