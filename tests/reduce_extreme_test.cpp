// The AVX2 float32 max/min row kernel (used where the build does not target
// AVX-512): against a serial loop over lengths that cover the 32-wide body,
// the 8-wide steps and every masked tail, with NaN, infinities and signed
// zeros. It runs on any CPU with AVX2, whatever the build targets.
#include "loom/backend/cpu/reduce_extreme.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace {

float serial(const std::vector<float>& x, int64_t n, bool max) {
  float r = max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return std::numeric_limits<float>::quiet_NaN();
    r = max ? std::max(r, x[i]) : std::min(r, x[i]);
  }
  return r;
}

TEST(ReduceExtremeAvx2, MatchesSerialLoop) {
  if (!loom::cpu::has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 100.0f);
  for (int64_t n : {1, 2, 7, 8, 9, 15, 16, 31, 32, 33, 40, 63, 64, 65, 100, 1000, 4099}) {
    std::vector<float> x(n);
    for (auto& v : x) v = dist(rng);
    for (bool max : {true, false}) {
      EXPECT_EQ(loom::cpu::extreme_f32_avx2(x.data(), n, max), serial(x, n, max))
          << "n=" << n << " max=" << max;
      // The extreme value in the last (masked) element.
      std::vector<float> y = x;
      y[n - 1] = max ? 1e30f : -1e30f;
      EXPECT_EQ(loom::cpu::extreme_f32_avx2(y.data(), n, max), y[n - 1]) << "n=" << n;
      // A NaN anywhere propagates.
      for (int64_t at : {int64_t(0), n / 2, n - 1}) {
        std::vector<float> z = x;
        z[at] = std::numeric_limits<float>::quiet_NaN();
        EXPECT_TRUE(std::isnan(loom::cpu::extreme_f32_avx2(z.data(), n, max)))
            << "n=" << n << " at=" << at;
      }
    }
  }
  // Infinities and the identity itself.
  std::vector<float> inf(20, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(loom::cpu::extreme_f32_avx2(inf.data(), 20, true),
            -std::numeric_limits<float>::infinity());
  inf[13] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(loom::cpu::extreme_f32_avx2(inf.data(), 20, true),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(loom::cpu::extreme_f32_avx2(inf.data(), 20, false),
            -std::numeric_limits<float>::infinity());
}

} // namespace
