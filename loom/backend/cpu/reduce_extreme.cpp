// AVX2 float32 max/min rows, chosen at run time (see reduce_extreme.h).
#include "loom/backend/cpu/reduce_extreme.h"

#include <limits>
#include <stdexcept>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LOOM_EXTREME_X86 1
#endif

namespace loom::cpu {

#if defined(LOOM_EXTREME_X86)

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

namespace {

// The vector max/min return their second operand when either is NaN, so a
// NaN would be lost in the accumulators: NaNs are tracked in a mask of their
// own. The tail is one masked load filled with the identity.
template <bool kMax>
__attribute__((target("avx2"))) float extreme_avx2(const float* x, int64_t n) {
  const float ident_v =
      kMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  const __m256 ident = _mm256_set1_ps(ident_v);
  __m256 a0 = ident, a1 = ident, a2 = ident, a3 = ident;
  __m256 nan = _mm256_setzero_ps();
  auto step = [&](__m256 & a, __m256 v) __attribute__((target("avx2"))) {
    a = kMax ? _mm256_max_ps(a, v) : _mm256_min_ps(a, v);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    step(a0, _mm256_loadu_ps(x + i));
    step(a1, _mm256_loadu_ps(x + i + 8));
    step(a2, _mm256_loadu_ps(x + i + 16));
    step(a3, _mm256_loadu_ps(x + i + 24));
  }
  for (; i + 8 <= n; i += 8) step(a0, _mm256_loadu_ps(x + i));
  if (i < n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)), lane);
    __m256 v = _mm256_maskload_ps(x + i, mask);
    step(a0, _mm256_blendv_ps(ident, v, _mm256_castsi256_ps(mask)));
  }
  if (_mm256_movemask_ps(nan)) return std::numeric_limits<float>::quiet_NaN();
  __m256 a = kMax ? _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3))
                  : _mm256_min_ps(_mm256_min_ps(a0, a1), _mm256_min_ps(a2, a3));
  __m128 h = kMax ? _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1))
                  : _mm_min_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  h = kMax ? _mm_max_ps(h, _mm_movehl_ps(h, h)) : _mm_min_ps(h, _mm_movehl_ps(h, h));
  h = kMax ? _mm_max_ss(h, _mm_shuffle_ps(h, h, 1)) : _mm_min_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

} // namespace

float extreme_f32_avx2(const float* x, int64_t n, bool max) {
  return max ? extreme_avx2<true>(x, n) : extreme_avx2<false>(x, n);
}

#else

bool has_avx2() { return false; }

float extreme_f32_avx2(const float*, int64_t, bool) {
  throw std::logic_error("[extreme_f32_avx2] Called on a CPU without AVX2.");
}

#endif

} // namespace loom::cpu
