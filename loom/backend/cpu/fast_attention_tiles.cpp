#include "loom/backend/cpu/fast_attention_tiles.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <stdexcept>
#include <utility>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#define LOOM_ATTENTION_TILES 1
#endif

namespace loom::cpu::attention_tiles {

namespace {
std::atomic<bool> enabled{true};
} // namespace

bool set_enabled(bool e) { return enabled.exchange(e); }

size_t packed_size(int64_t n, int64_t d) {
  // An even number of panels: a tile reads two, the last pair included.
  return static_cast<size_t>((n + 31) / 32 * 2 * 16 * d);
}

void pack(const float* x, int64_t n, int64_t d, int64_t ldx, float* out) {
  const int64_t panels = (n + 31) / 32 * 2;
  for (int64_t p = 0; p < panels; ++p) {
    float* dst = out + p * d * 16;
    for (int64_t l = 0; l < 16; ++l) {
      const int64_t j = p * 16 + l;
      if (j < n) {
        const float* row = x + j * ldx;
        for (int64_t t = 0; t < d; ++t) dst[t * 16 + l] = row[t];
      } else {
        for (int64_t t = 0; t < d; ++t) dst[t * 16 + l] = 0.0f;
      }
    }
  }
}

#if defined(LOOM_ATTENTION_TILES)

bool available() {
  static const bool cpu = __builtin_cpu_supports("avx512f");
  return cpu && enabled.load(std::memory_order_relaxed);
}

namespace {

// The first k lanes of a vector.
__mmask16 lanes(int64_t k) {
  return k >= 16 ? __mmask16(0xFFFF) : k <= 0 ? __mmask16(0) : __mmask16((1u << k) - 1);
}

// max(a, b) per lane (b where a is NaN), and the sum or maximum of the
// lanes. Here and in exp16, masked forms stand in for the intrinsics that
// start from _mm512_undefined_ps(), which GCC 12 reports as uninitialised.
inline __m512 max16(__m512 a, __m512 b) { return _mm512_mask_max_ps(b, 0xFFFF, a, b); }

template <typename Op>
float fold16(__m512 v, Op op) {
  alignas(64) float x[16];
  _mm512_store_ps(x, v);
  float r = x[0];
  for (int l = 1; l < 16; ++l) r = op(r, x[l]);
  return r;
}

// Rows per product_nt tile: 2 x 12 accumulators, two panel vectors and a
// broadcast within the 32 registers.
constexpr int kNtRows = 12;

// R rows x 32 columns of A X^T, A given transposed (at[t * R + r], so every
// broadcast is a constant offset from one pointer) and already scaled, X as
// the two panels b0 and b1.
template <int R>
void nt_tile(const float* at, const float* b0, const float* b1, int64_t D, float* c, int64_t ldc,
             __mmask16 m0, __mmask16 m1) {
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    acc0[r] = _mm512_setzero_ps();
    acc1[r] = _mm512_setzero_ps();
  }
  for (int64_t t = 0; t < D; ++t) {
    const __m512 x0 = _mm512_loadu_ps(b0 + t * 16);
    const __m512 x1 = _mm512_loadu_ps(b1 + t * 16);
    const float* q = at + t * R;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 s = _mm512_set1_ps(q[r]);
      acc0[r] = _mm512_fmadd_ps(s, x0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(s, x1, acc1[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, acc0[r]);
    _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc1[r]);
  }
}

using NtTile = void (*)(const float*, const float*, const float*, int64_t, float*, int64_t,
                        __mmask16, __mmask16);

template <size_t... I>
constexpr std::array<NtTile, sizeof...(I)> nt_tiles(std::index_sequence<I...>) {
  return {&nt_tile<static_cast<int>(I) + 1>...};
}

constexpr auto kNtTiles = nt_tiles(std::make_index_sequence<kNtRows>{});

// Rows per product_nn tile: 6 x 4 accumulators, four B vectors and a
// broadcast.
constexpr int kNnRows = 6;

// R rows x V vectors of columns (the last one `last`-masked) of
// alpha scale_r sum_t A(r, t) b[t] (+ c).
template <int R, int V>
void nn_tile(const float* a, int64_t si, int64_t st, const float* b, int64_t ldb, int64_t K,
             __mmask16 last, float alpha, const float* rowscale, bool accumulate, float* c,
             int64_t ldc) {
  __m512 acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int64_t t = 0; t < K; ++t) {
    __m512 x[V];
    const float* brow = b + t * ldb;
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      x[v] =
          v == V - 1 ? _mm512_maskz_loadu_ps(last, brow + 16 * v) : _mm512_loadu_ps(brow + 16 * v);
    }
    const float* acol = a + t * st;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 s = _mm512_set1_ps(acol[r * si]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(s, x[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 s = _mm512_set1_ps(rowscale != nullptr ? alpha * rowscale[r] : alpha);
    float* crow = c + r * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      const __mmask16 m = v == V - 1 ? last : __mmask16(0xFFFF);
      __m512 y = _mm512_mul_ps(acc[r][v], s);
      if (accumulate) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(m, crow + 16 * v));
      _mm512_mask_storeu_ps(crow + 16 * v, m, y);
    }
  }
}

using NnTile = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, __mmask16,
                        float, const float*, bool, float*, int64_t);

template <int V, size_t... I>
constexpr std::array<NnTile, sizeof...(I)> nn_tiles(std::index_sequence<I...>) {
  return {&nn_tile<static_cast<int>(I) + 1, V>...};
}

// [vectors - 1][rows - 1].
const std::array<std::array<NnTile, kNnRows>, 4> kNnTiles = {
    nn_tiles<1>(std::make_index_sequence<kNnRows>{}),
    nn_tiles<2>(std::make_index_sequence<kNnRows>{}),
    nn_tiles<3>(std::make_index_sequence<kNnRows>{}),
    nn_tiles<4>(std::make_index_sequence<kNnRows>{})};

// e^y, as scalar::exp_f32_bounded (the same reduction and polynomial) but
// 2^n applied by vscalefps; y < -87 gives 0 (the softmax's negligible
// weights, without subnormals), NaN stays NaN.
inline __m512 exp16(__m512 y) {
  const __m512 lo = _mm512_set1_ps(-87.0f);
  const __mmask16 keep = _mm512_cmp_ps_mask(y, lo, _CMP_NLT_UQ);
  const __m512 yc = max16(lo, y); // NaN in y: y
  const __m512 fn =
      _mm512_maskz_roundscale_ps(0xFFFF, _mm512_mul_ps(yc, _mm512_set1_ps(1.44269504088896341f)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(0.693359375f), yc);
  r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.3814604753e-03f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3687102190e-03f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1668387501e-02f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666520687e-01f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.9999993451e-01f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r);
  p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(keep, p, fn);
}

} // namespace

void product_nt(int64_t M, int64_t N, int64_t D, float alpha, const float* a, int64_t lda,
                const float* packed, float* c, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  // A scaled and transposed per tile of rows, all of them first: then a
  // pair of panels (2 x 16 x D floats) stays in L1 while every row tile
  // passes over it, where walking the panels per row tile would stream the
  // whole packed operand from L2 once per tile.
  std::vector<float> at(static_cast<size_t>(std::max<int64_t>(M * D, 1)));
  for (int64_t i = 0; i < M; i += kNtRows) {
    const int64_t rows = std::min<int64_t>(kNtRows, M - i);
    float* dst = at.data() + i * D;
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = a + (i + r) * lda;
      for (int64_t t = 0; t < D; ++t) dst[t * rows + r] = alpha * src[t];
    }
  }
  const int64_t tiles = (N + 31) / 32;
  for (int64_t jt = 0; jt < tiles; ++jt) {
    const int64_t j0 = jt * 32;
    const float* b0 = packed + 2 * jt * D * 16;
    const __mmask16 m0 = lanes(N - j0), m1 = lanes(N - j0 - 16);
    for (int64_t i = 0; i < M; i += kNtRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kNtRows, M - i));
      kNtTiles[rows - 1](at.data() + i * D, b0, b0 + D * 16, D, c + i * ldc + j0, ldc, m0, m1);
    }
  }
}

void product_nn(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t si,
                int64_t st, const float* b, int64_t ldb, const float* rowscale, bool accumulate,
                float* c, int64_t ldc) {
  for (int64_t c0 = 0; c0 < N; c0 += 64) {
    const int64_t width = std::min<int64_t>(64, N - c0);
    const int64_t vectors = (width + 15) / 16;
    const __mmask16 last = lanes(width - 16 * (vectors - 1));
    const auto& tiles = kNnTiles[vectors - 1];
    for (int64_t i = 0; i < M; i += kNnRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kNnRows, M - i));
      tiles[rows - 1](a + i * si, si, st, b + c0, ldb, K, last, alpha,
                      rowscale != nullptr ? rowscale + i : nullptr, accumulate, c + i * ldc + c0,
                      ldc);
    }
  }
}

float row_max(const float* x, int64_t n) {
  // Four chains, so the maxima overlap; a NaN element never wins (vmaxps
  // returns its second operand, the running maximum, for a NaN).
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  __m512 m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) {
    m0 = max16(_mm512_loadu_ps(x + j), m0);
    m1 = max16(_mm512_loadu_ps(x + j + 16), m1);
    m2 = max16(_mm512_loadu_ps(x + j + 32), m2);
    m3 = max16(_mm512_loadu_ps(x + j + 48), m3);
  }
  for (; j < n; j += 16) {
    const __mmask16 k = lanes(n - j);
    m0 = _mm512_mask_max_ps(m0, k, _mm512_maskz_loadu_ps(k, x + j), m0);
  }
  return fold16(max16(max16(m0, m1), max16(m2, m3)),
                [](float a, float b) { return b > a ? b : a; });
}

float exp_sum(float* x, int64_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    const __m512 e0 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j), s));
    const __m512 e1 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j + 16), s));
    _mm512_storeu_ps(x + j, e0);
    _mm512_storeu_ps(x + j + 16, e1);
    sum0 = _mm512_add_ps(sum0, e0);
    sum1 = _mm512_add_ps(sum1, e1);
  }
  for (; j < n; j += 16) {
    const __mmask16 k = lanes(n - j);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), s));
    _mm512_mask_storeu_ps(x + j, k, e);
    sum0 = _mm512_mask_add_ps(sum0, k, sum0, e);
  }
  return fold16(_mm512_add_ps(sum0, sum1), [](float a, float b) { return a + b; });
}

#else // no AVX-512 in this build: the kernels take the BLAS path

bool available() { return false; }

namespace {
[[noreturn]] void missing() {
  throw std::logic_error(
      "[scaled_dot_product_attention] the AVX-512 tiles are not compiled into this build");
}
} // namespace

void product_nt(int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, float*,
                int64_t) {
  missing();
}
void product_nn(int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t, const float*,
                int64_t, const float*, bool, float*, int64_t) {
  missing();
}
float row_max(const float*, int64_t) { missing(); }
float exp_sum(float*, int64_t, float) { missing(); }

#endif

} // namespace loom::cpu::attention_tiles
