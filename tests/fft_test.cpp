// The FFT engines against a double-precision direct DFT (both engines, every
// length class: mixed radix, small primes, Bluestein), along inner axes and
// in place; the FFT primitive's state and its rebuild from the registry.
#include "loom/backend/cpu/fft.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "loom/ops.h"
#include "loom/primitives/fft.h"

using namespace loom;
using cfloat = std::complex<float>;
using cdouble = std::complex<double>;

namespace {

std::vector<cdouble> dft(const std::vector<cfloat>& x, int sign) {
  const size_t n = x.size();
  std::vector<cdouble> y(n);
  for (size_t k = 0; k < n; ++k) {
    cdouble acc = 0;
    for (size_t j = 0; j < n; ++j) {
      double a = sign * 2.0 * M_PI * static_cast<double>((j * k) % n) / static_cast<double>(n);
      acc += cdouble(x[j]) * cdouble(std::cos(a), std::sin(a));
    }
    y[k] = acc;
  }
  return y;
}

std::vector<cfloat> random_signal(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d;
  std::vector<cfloat> x(n);
  for (auto& v : x) v = {d(gen), d(gen)};
  return x;
}

double max_error(const std::vector<cfloat>& got, const std::vector<cdouble>& want) {
  double err = 0, mag = 1;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::abs(cdouble(got[i]) - want[i]));
    mag = std::max(mag, std::abs(want[i]));
  }
  return err / mag;
}

class FFTEngines : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { cpu::fft::set_backend(GetParam()); }
  void TearDown() override { cpu::fft::set_backend("auto"); }
};

} // namespace

TEST_P(FFTEngines, ComplexMatchesDirectDft) {
  for (int n : {1, 2, 3, 4, 5, 7, 8, 12, 16, 27, 31, 37, 60, 97, 128, 210, 257, 1000, 1031}) {
    for (int sign : {-1, 1}) {
      auto x = random_signal(n, n);
      std::vector<cfloat> y(n);
      cpu::fft::c2c(x.data(), y.data(), 1, n, 1, sign > 0);
      EXPECT_LT(max_error(y, dft(x, sign)), 2e-5) << "n=" << n << " sign=" << sign;
    }
  }
}

TEST_P(FFTEngines, InnerAxisInPlace) {
  // [outer=3, n=11, inner=5]: every column transformed, in place.
  const int outer = 3, n = 11, inner = 5;
  auto x = random_signal(outer * n * inner, 7);
  auto y = x;
  cpu::fft::c2c(y.data(), y.data(), outer, n, inner, false);
  for (int o = 0; o < outer; ++o) {
    for (int i = 0; i < inner; ++i) {
      std::vector<cfloat> line(n), got(n);
      for (int k = 0; k < n; ++k) {
        line[k] = x[(o * n + k) * inner + i];
        got[k] = y[(o * n + k) * inner + i];
      }
      EXPECT_LT(max_error(got, dft(line, -1)), 2e-5);
    }
  }
}

TEST_P(FFTEngines, RealRoundTrip) {
  for (int n : {1, 2, 6, 9, 16, 31, 101, 1024}) {
    auto c = random_signal(n, n + 3);
    std::vector<float> x(n);
    for (int i = 0; i < n; ++i) x[i] = c[i].real();
    std::vector<cfloat> spec(n / 2 + 1);
    cpu::fft::r2c(x.data(), spec.data(), 1, n, 1);
    auto full = dft(std::vector<cfloat>(x.begin(), x.end()), -1);
    EXPECT_LT(max_error(spec, std::vector<cdouble>(full.begin(), full.begin() + n / 2 + 1)), 2e-5);
    std::vector<float> back(n);
    auto before = spec;
    cpu::fft::c2r(spec.data(), back.data(), 1, n, 1);
    EXPECT_EQ(spec, before) << "c2r must leave its input intact";
    for (int i = 0; i < n; ++i) EXPECT_NEAR(back[i] / n, x[i], 2e-5) << "n=" << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Both, FFTEngines, ::testing::Values("auto", "native"));

TEST(FFTPrimitive, StateRebuildsAnEquivalentPrimitive) {
  Stream s = default_stream(default_device());
  FFT prim(s, {0, 2}, true, true, 9, 0.25);
  PrimitiveState st = prim.state();
  auto rebuilt = make_primitive("FFT", s, st);
  EXPECT_TRUE(rebuilt->is_equivalent(prim));
  EXPECT_FALSE(FFT(s, {0, 2}, true, true, 8, 0.25).is_equivalent(prim));
  Hadamard h(s, 0.5, true);
  EXPECT_TRUE(make_primitive("Hadamard", s, h.state())->is_equivalent(h));
  EXPECT_FALSE(Hadamard(s, 0.5, false).is_equivalent(h));
}

TEST(FFTOps, ShapesAndDtypes) {
  array x = ones({4, 10});
  array r = fft::rfft(x);
  EXPECT_EQ(r.shape(), (Shape{4, 6}));
  EXPECT_EQ(r.dtype(), complex64);
  array back = fft::irfft(r, 10);
  EXPECT_EQ(back.dtype(), float32);
  eval({back});
  EXPECT_NEAR(back.data<float>()[3], 1.0f, 1e-6);
  EXPECT_THROW(fft::fft(x, 0), std::invalid_argument);
  EXPECT_THROW(fft::fft(x, std::nullopt, 2), std::out_of_range);
  EXPECT_THROW(hadamard_transform(ones({6})), std::invalid_argument);
}
