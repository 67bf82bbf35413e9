// float32 products of training-sized matrices (a Linear layer's forward and
// both gradients: 256 x 1024 x 784 and the like) with Loom's own AVX-512
// kernel, where OpenBLAS called per panel repacks the shared operand in every
// panel and leaves a thread idle when the panels do not divide evenly.
//
// op(B) is packed once, whole (up to 16 MB), by all threads together, into
// panels of 32 columns (an untransposed op(B) of at most 64K floats is read
// where it lies instead: it fits L2, and packing it cost a fifth of a
// 256 x 256 x 256 product); the threads then take blocks of 12-row tiles of C
// (or, for a product a few rows tall, blocks of columns) from the pool's
// counter (gemm_tiles.h), each packing its own rows of op(A). A 12 x 32 tile of C stays in
// 24 registers while k runs: per k, two loads of B and twelve broadcasts of A
// feed 24 FMAs. Transposed operands are transposed while packing (8 x 8
// blocks in registers for a transposed B, the x @ W.T of a Linear layer), so
// no layout costs a copy of its own.
#include <atomic>

#include "loom/backend/cpu/gemm.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "loom/backend/cpu/gemm_tiles.h"
#include "loom/backend/cpu/thread_pool.h"
#endif

namespace loom::cpu {

#if defined(__x86_64__)

namespace {

#define LOOM_F32_TARGET __attribute__((target("avx512f,avx2,fma")))

constexpr int kMR = 12;      // rows of a C tile (broadcast from packed A)
constexpr int kNR = 32;      // columns of a C tile (two vectors of 16 lanes)
constexpr int64_t kKC = 512; // k per block, at most
constexpr int64_t kMC = 96;  // rows of A packed at a time (8 tiles)
// op(B) packed whole is at most this many floats (16 MB).
constexpr int64_t kSharedBFloats = int64_t{4} << 20;
// An untransposed op(B) of at most this many floats (256 KB, within L2) is
// read in place, not packed.
constexpr int64_t kInPlaceBFloats = int64_t{1} << 16;
// Products below this many multiply-adds, or narrower than one panel of B,
// run faster through OpenBLAS, whose small-matrix kernels do not pad to
// 12 x 32 tiles (one thread, CPU time: 100 x 130 x 71 0.020 ms against 0.026;
// 256 x 10 x 1024 0.11 against 0.21).
constexpr double kMinNativeProduct = 2.0 * 1024 * 1024;

std::atomic<bool> g_enabled{true};

bool detect() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
         __builtin_cpu_supports("fma");
}

bool available() {
  static const bool has = detect();
  return has && g_enabled.load(std::memory_order_relaxed);
}

// The k blocks of a product, of near-equal length (784 = 2 x 392, not 512 + 272).
int64_t k_block(int64_t K) {
  const int64_t blocks = (K + kKC - 1) / kKC;
  return (K + blocks - 1) / blocks;
}

// Columns j of rows [k0, k0 + 8) of op(B) for a transposed B (stored N x K):
// rows jb .. jb + 7 of the stored matrix, 8 values of k each, transposed in
// registers and written as 8 rows of 8 at dst, dst + ld, ...
LOOM_F32_TARGET inline void transpose_8x8(const float* src, int64_t lds, float* dst, int64_t ldd) {
  const __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + lds);
  const __m256 r2 = _mm256_loadu_ps(src + 2 * lds), r3 = _mm256_loadu_ps(src + 3 * lds);
  const __m256 r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds);
  const __m256 r6 = _mm256_loadu_ps(src + 6 * lds), r7 = _mm256_loadu_ps(src + 7 * lds);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  _mm256_storeu_ps(dst, _mm256_permute2f128_ps(s0, s4, 0x20));
  _mm256_storeu_ps(dst + ldd, _mm256_permute2f128_ps(s1, s5, 0x20));
  _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(s2, s6, 0x20));
  _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(s3, s7, 0x20));
  _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(s0, s4, 0x31));
  _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(s1, s5, 0x31));
  _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(s2, s6, 0x31));
  _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(s3, s7, 0x31));
}

// Panels [u0, u1) of op(B) (K x N) over all of K: panel u, row k, column j
// at dst[(u * K + k) * kNR + j]; columns past N are zero.
LOOM_F32_TARGET void pack_b(const float* b, int64_t ldb, bool tb, int64_t N, int64_t K, int64_t u0,
                            int64_t u1, float* dst) {
  for (int64_t u = u0; u < u1; ++u) {
    const int64_t jb = u * kNR;
    const int64_t width = std::min<int64_t>(kNR, N - jb);
    float* d = dst + u * K * kNR;
    if (width == kNR && !tb) {
      for (int64_t k = 0; k < K; ++k) {
        const float* row = b + k * ldb + jb;
        _mm512_storeu_ps(d + k * kNR, _mm512_loadu_ps(row));
        _mm512_storeu_ps(d + k * kNR + 16, _mm512_loadu_ps(row + 16));
      }
      continue;
    }
    if (width == kNR) {
      int64_t k = 0;
      for (; k + 8 <= K; k += 8) {
        for (int g = 0; g < kNR / 8; ++g) {
          transpose_8x8(b + (jb + 8 * g) * ldb + k, ldb, d + k * kNR + 8 * g, kNR);
        }
      }
      for (; k < K; ++k) {
        for (int j = 0; j < kNR; ++j) d[k * kNR + j] = b[(jb + j) * ldb + k];
      }
      continue;
    }
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t j = 0; j < kNR; ++j) {
        d[k * kNR + j] = j < width ? (tb ? b[(jb + j) * ldb + k] : b[k * ldb + jb + j]) : 0.0f;
      }
    }
  }
}

// Rows [i0, i0 + mc) of op(A), k in [k0, k0 + kc), as tiles of kMR rows:
// tile t, row k, row r at dst[(t * kc + k) * kMR + r]; rows past M are zero.
LOOM_F32_TARGET void pack_a(const float* a, int64_t lda, bool ta, int64_t M, int64_t i0, int64_t mc,
                            int64_t k0, int64_t kc, float* dst) {
  const int64_t tiles = (mc + kMR - 1) / kMR;
  for (int64_t t = 0; t < tiles; ++t) {
    float* d = dst + t * kc * kMR;
    const int64_t ib = i0 + t * kMR;
    const int64_t rows = std::min<int64_t>(kMR, std::min(M, i0 + mc) - ib);
    if (ta && rows == kMR) {
      // Stored K x M: the tile's twelve values of one k are adjacent.
      for (int64_t k = 0; k < kc; ++k) std::memcpy(d + k * kMR, a + (k0 + k) * lda + ib, 48);
      continue;
    }
    if (rows == kMR) {
      // Stored M x K: 4 x 4 blocks transposed in registers.
      int64_t k = 0;
      for (; k + 4 <= kc; k += 4) {
        for (int g = 0; g < kMR / 4; ++g) {
          const float* src = a + (ib + 4 * g) * lda + k0 + k;
          __m128 r0 = _mm_loadu_ps(src), r1 = _mm_loadu_ps(src + lda);
          __m128 r2 = _mm_loadu_ps(src + 2 * lda), r3 = _mm_loadu_ps(src + 3 * lda);
          _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
          _mm_storeu_ps(d + k * kMR + 4 * g, r0);
          _mm_storeu_ps(d + (k + 1) * kMR + 4 * g, r1);
          _mm_storeu_ps(d + (k + 2) * kMR + 4 * g, r2);
          _mm_storeu_ps(d + (k + 3) * kMR + 4 * g, r3);
        }
      }
      for (; k < kc; ++k) {
        for (int r = 0; r < kMR; ++r) d[k * kMR + r] = a[(ib + r) * lda + k0 + k];
      }
      continue;
    }
    for (int r = 0; r < kMR; ++r) {
      if (r >= rows) {
        for (int64_t k = 0; k < kc; ++k) d[k * kMR + r] = 0.0f;
      } else if (ta) {
        for (int64_t k = 0; k < kc; ++k) d[k * kMR + r] = a[(k0 + k) * lda + ib + r];
      } else {
        const float* row = a + (ib + r) * lda + k0;
        for (int64_t k = 0; k < kc; ++k) d[k * kMR + r] = row[k];
      }
    }
  }
}

// How a tile's sums reach C: the first k block scales by alpha and adds
// beta C (C unread when beta is 0); later blocks add alpha times theirs.
struct Store {
  float alpha;
  float beta;
  bool first;
};

// Where the kernel reads op(B): panel u (columns [u * kNR, u * kNR + kNR)),
// row k at data + u * panel_stride + k * row_stride. Packed, the panels are
// contiguous (row_stride kNR); a small untransposed B is read where it lies
// (panel_stride kNR, row_stride ldb): packing it costs as much as the
// product's own loads from L2 (256 x 256 x 256: 0.210 -> 0.165 ms measured,
// session 8), and it stays in L2 for every tile of C that reads it.
struct BPanels {
  const float* data;
  int64_t panel_stride;
  int64_t row_stride;
  const float* panel(int64_t u, int64_t k) const {
    return data + u * panel_stride + k * row_stride;
  }
};

// The C tile (rows < m, columns < n of a kMR x kNR tile) from one packed A
// tile and one panel of op(B) (rows bstride apart) over kc values of k. B is
// read through the column masks: in place, a last panel narrower than kNR
// ends where B's row ends.
LOOM_F32_TARGET void tile_kernel(int64_t kc, const float* ap, const float* bp, int64_t bstride,
                                 float* c, int64_t ldc, Store st, int m, int n) {
  const __mmask16 m0 = n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u);
  const __mmask16 m1 = n >= 32   ? __mmask16(0xFFFF)
                       : n <= 16 ? __mmask16(0)
                                 : __mmask16((1u << (n - 16)) - 1u);
  __m512 acc[kMR][2];
#pragma GCC unroll 12
  for (int r = 0; r < kMR; ++r) {
    acc[r][0] = _mm512_setzero_ps();
    acc[r][1] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, bp + k * bstride);
    const __m512 b1 = _mm512_maskz_loadu_ps(m1, bp + k * bstride + 16);
#pragma GCC unroll 12
    for (int r = 0; r < kMR; ++r) {
      const __m512 av = _mm512_set1_ps(ap[k * kMR + r]);
      acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  const __m512 alpha = _mm512_set1_ps(st.alpha);
  const __m512 beta = _mm512_set1_ps(st.first ? st.beta : 1.0f);
  const bool read = !st.first || st.beta != 0.0f;
  const bool scale = st.alpha != 1.0f;
#pragma GCC unroll 12
  for (int r = 0; r < kMR; ++r) {
    if (r >= m) break;
    float* row = c + r * ldc;
    __m512 v0 = scale ? _mm512_mul_ps(acc[r][0], alpha) : acc[r][0];
    __m512 v1 = scale ? _mm512_mul_ps(acc[r][1], alpha) : acc[r][1];
    if (read) {
      v0 = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m0, row), v0);
      v1 = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m1, row + 16), v1);
    }
    _mm512_mask_storeu_ps(row, m0, v0);
    _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

// C[m0:m1, n0:n1] (n0 a multiple of kNR) against the whole of op(B);
// `apack` holds kMC x k_block(K) floats.
void block(bool ta, int64_t M, int64_t K, float alpha, const float* a, int64_t lda,
           const BPanels& bp, float beta, float* c, int64_t ldc, int64_t m0, int64_t m1, int64_t n0,
           int64_t n1, float* apack) {
  const int64_t kb = k_block(K);
  for (int64_t pc = 0; pc < K; pc += kb) {
    const int64_t kc = std::min(kb, K - pc);
    const Store st{alpha, beta, pc == 0};
    for (int64_t ic = m0; ic < m1; ic += kMC) {
      const int64_t mc = std::min(kMC, m1 - ic);
      pack_a(a, lda, ta, M, ic, mc, pc, kc, apack);
      for (int64_t jr = n0; jr < n1; jr += kNR) {
        const float* b = bp.panel(jr / kNR, pc);
        const int n = static_cast<int>(std::min<int64_t>(kNR, n1 - jr));
        for (int64_t ir = 0; ir < mc; ir += kMR) {
          const int m = static_cast<int>(std::min<int64_t>(kMR, mc - ir));
          tile_kernel(kc, apack + (ir / kMR) * kc * kMR, b, bp.row_stride, c + (ic + ir) * ldc + jr,
                      ldc, st, m, n);
        }
      }
    }
  }
}

} // namespace

bool gemm_f32_native_suits(int64_t M, int64_t N, int64_t K) {
  if (!available() || M < 2 || N < kNR || K < 1) return false;
  if (static_cast<double>(M) * N * K < kMinNativeProduct) return false;
  const int64_t panels = (N + kNR - 1) / kNR;
  return panels * kNR * K <= kSharedBFloats;
}

bool gemm_f32_native_enable(bool on) { return g_enabled.exchange(on); }

void gemm_f32_native(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* a,
                     int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int64_t panels = (N + kNR - 1) / kNR;
  const int64_t threads = num_threads();
  const bool parallel = splits_over_pool(M, N, K);
  std::unique_ptr<float[]> bpack;
  BPanels bp{b, kNR, ldb};
  if (tb || K * N > kInPlaceBFloats) {
    bpack.reset(new float[static_cast<size_t>(panels * K * kNR)]);
    bp = BPanels{bpack.get(), K * kNR, kNR};
    // Packing a small B takes less than waking a second thread.
    const int64_t pack_chunks =
        parallel && panels * K * kNR >= (int64_t{1} << 16) ? std::min(panels, 2 * threads) : 1;
    parallel_chunks(static_cast<size_t>(pack_chunks), [&](size_t i) {
      const int64_t u0 = panels * static_cast<int64_t>(i) / pack_chunks;
      const int64_t u1 = panels * static_cast<int64_t>(i + 1) / pack_chunks;
      pack_b(b, ldb, tb, N, K, u0, u1, bpack.get());
    });
  }
  const size_t apack_floats = static_cast<size_t>(kMC * k_block(K));
  if (!parallel) {
    std::unique_ptr<float[]> apack(new float[apack_floats]);
    block(ta, M, K, alpha, a, lda, bp, beta, c, ldc, 0, M, 0, N, apack.get());
    return;
  }
  over_tile_blocks(M, N, kMR, kNR, [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    thread_local std::unique_ptr<float[]> apack;
    thread_local size_t apack_size = 0;
    if (apack_size < apack_floats) {
      apack.reset(new float[apack_floats]);
      apack_size = apack_floats;
    }
    block(ta, M, K, alpha, a, lda, bp, beta, c, ldc, m0, m1, n0, n1, apack.get());
  });
}

#else // not x86-64: every float32 product through OpenBLAS

namespace {
std::atomic<bool> g_enabled{true};
} // namespace

bool gemm_f32_native_suits(int64_t, int64_t, int64_t) { return false; }

bool gemm_f32_native_enable(bool on) { return g_enabled.exchange(on); }

// Never chosen (gemm_f32_native_suits is false): the same product through
// gemm<float>, which takes OpenBLAS.
void gemm_f32_native(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* a,
                     int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm<float>(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

#endif

} // namespace loom::cpu
