// Per-element cost of Loom's float32 transcendental kernels next to SLEEF's
// 16-lane u10/u35 functions: an L1-resident loop on one thread, best of 40
// runs (the figures quoted in docs/architecture.md, "Float32
// transcendentals"). With `check NAME LO HI` it instead runs the block form
// of sin, cos or tanh over every float32 x with LO <= |x| < HI (both signs)
// and prints the largest error in float32 ulps against the C library's
// double result (python/tests/test_vecmath.py's measure), e.g.
//   /tmp/vk check sin 0 4096
// Not part of the build:
//   g++ -std=c++20 -O3 -march=native -I. benchmarks/vecmath_kernels.cpp -o /tmp/vk
//   g++ -std=c++20 -O3 -march=native -I. -I/usr/include/x86_64-linux-gnu \
//       -DWITH_SLEEF benchmarks/vecmath_kernels.cpp -lsleef -o /tmp/vk   # libsleef-dev
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "loom/primitives/elementwise_table.h"
#if defined(WITH_SLEEF)
#include <immintrin.h>
#include <sleef.h>
#endif

using namespace loom;
using Kernel = void (*)(const float*, float*, size_t);

template <typename Op>
void table_loop(const float* x, float* y, size_t n) {
  if constexpr (ew::has_block<Op>) {
    Op::block(x, y, n);
  } else {
    for (size_t i = 0; i < n; ++i) y[i] = Op{}(x[i]);
  }
}
void libm_sin(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = std::sin(x[i]);
}
#if defined(WITH_SLEEF)
// (A macro: SLEEF's declarations do not convert to template arguments.)
#define SLEEF_LOOP(NAME, FN)                                                                      \
  void NAME(const float* x, float* y, size_t n) {                                                 \
    for (size_t i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, FN(_mm512_loadu_ps(x + i))); \
  }
SLEEF_LOOP(sleef_exp10, Sleef_expf16_u10)
SLEEF_LOOP(sleef_log10, Sleef_logf16_u10)
SLEEF_LOOP(sleef_tanh10, Sleef_tanhf16_u10)
SLEEF_LOOP(sleef_erf10, Sleef_erff16_u10)
SLEEF_LOOP(sleef_sin10, Sleef_sinf16_u10)
SLEEF_LOOP(sleef_sin35, Sleef_sinf16_u35)
SLEEF_LOOP(sleef_cos10, Sleef_cosf16_u10)
SLEEF_LOOP(sleef_expm110, Sleef_expm1f16_u10)
SLEEF_LOOP(sleef_log1p10, Sleef_log1pf16_u10)
#endif

// |got - want| in ulps of float32 at want rounded to float32 (NumPy's spacing).
double ulp_error(float got, double want) {
  const float w32 = static_cast<float>(want);
  if (!std::isfinite(w32) || !std::isfinite(got))
    return (std::isnan(got) != std::isnan(want)) ? 1e9 : 0.0;
  const float mag = std::fabs(w32);
  const double ulp = std::max(static_cast<double>(std::nextafter(mag, INFINITY) - mag), 0x1p-149);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

int check(const char* name, float lo, float hi) {
  Kernel f = nullptr;
  double (*ref)(double) = nullptr;
  if (!std::strcmp(name, "sin"))
    f = table_loop<ew::Sin>, ref = [](double v) { return std::sin(v); };
  if (!std::strcmp(name, "cos"))
    f = table_loop<ew::Cos>, ref = [](double v) { return std::cos(v); };
  if (!std::strcmp(name, "tanh"))
    f = table_loop<ew::Tanh>, ref = [](double v) { return std::tanh(v); };
  if (!f) {
    std::fprintf(stderr, "check: sin, cos or tanh\n");
    return 2;
  }
  const uint32_t b0 = std::bit_cast<uint32_t>(lo), b1 = std::bit_cast<uint32_t>(hi);
  constexpr size_t kBatch = 1 << 16;
  std::vector<float> x(kBatch), y(kBatch);
  double worst = 0.0;
  float worst_x = 0.0f;
  uint64_t count = 0;
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint64_t b = b0; b < b1; b += kBatch) {
      const size_t m = static_cast<size_t>(std::min<uint64_t>(kBatch, b1 - b));
      for (size_t i = 0; i < m; ++i)
        x[i] = std::bit_cast<float>(static_cast<uint32_t>(b + i) | sign);
      f(x.data(), y.data(), m);
      for (size_t i = 0; i < m; ++i) {
        const double e = ulp_error(y[i], ref(static_cast<double>(x[i])));
        if (e > worst) worst = e, worst_x = x[i];
      }
      count += m;
    }
  }
  std::printf("%s: %llu values, worst %.4f ulp at %.9g\n", name,
              static_cast<unsigned long long>(count), worst, static_cast<double>(worst_x));
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 5 && !std::strcmp(argv[1], "check")) {
    return check(argv[2], std::strtof(argv[3], nullptr), std::strtof(argv[4], nullptr));
  }
  const size_t n = 4096;
  std::vector<float> x(n), xp(n), y(n);
  std::mt19937 g(1);
  std::uniform_real_distribution<float> u(-10.0f, 10.0f);
  for (size_t i = 0; i < n; ++i) {
    x[i] = u(g);
    xp[i] = std::fabs(x[i]);
  }
  struct Row {
    const char* name;
    Kernel f;
    bool positive;
  } rows[] = {
    {"loom exp", table_loop<ew::Exp>, false},
    {"loom log", table_loop<ew::Log>, true},
    {"loom tanh", table_loop<ew::Tanh>, false},
    {"loom erf", table_loop<ew::Erf>, false},
    {"loom sin", table_loop<ew::Sin>, false},
    {"loom cos", table_loop<ew::Cos>, false},
    {"loom tan", table_loop<ew::Tan>, false},
    {"loom expm1", table_loop<ew::Expm1>, false},
    {"loom log1p", table_loop<ew::Log1p>, true},
    {"loom sinh", table_loop<ew::Sinh>, false},
    {"loom cosh", table_loop<ew::Cosh>, false},
    {"libm sin", libm_sin, false},
#if defined(WITH_SLEEF)
    {"sleef exp u10", sleef_exp10, false},
    {"sleef log u10", sleef_log10, true},
    {"sleef tanh u10", sleef_tanh10, false},
    {"sleef erf u10", sleef_erf10, false},
    {"sleef sin u10", sleef_sin10, false},
    {"sleef sin u35", sleef_sin35, false},
    {"sleef cos u10", sleef_cos10, false},
    {"sleef expm1 u10", sleef_expm110, false},
    {"sleef log1p u10", sleef_log1p10, true},
#endif
  };
  for (const Row& r : rows) {
    const float* in = r.positive ? xp.data() : x.data();
    double best = 1e30;
    for (int rep = 0; rep < 40; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < 100; ++k) r.f(in, y.data(), n);
      double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = t < best ? t : best;
    }
    std::printf("%-16s %6.3f ns/element\n", r.name, best / (100.0 * n) * 1e9);
  }
}
