// bfloat16 and float16 products (float32 accumulation and result; a
// bfloat16 result for gemm_bf16_rounded, rounded in the native kernel's tile
// writes when K fits one k block).
//
// bfloat16 on CPUs with AVX-512 BF16 (Cooper Lake, Sapphire Rapids, Zen 4)
// runs a blocked GEMM of its own: VDPBF16PS multiplies pairs of bfloat16
// along k and adds both products into a float32 lane, so A and B are packed
// as pairs (A: MR rows per k-pair, broadcast; B: NR columns per k-pair, two
// vectors) and a 12 x 32 tile of C stays in 24 registers. The loops are
// those of a BLIS-style GEMM (a packed block of A in L2, B's micro-panels
// streamed past it), with a long k block: every k block ends by adding its
// tiles into C (a strided read-modify-write of C), and fewer of those
// measured faster than keeping a micro-panel of B within L1. A product split
// over the pool packs op(B) once for all its panels (up to 16 MB of it).
// The instruction flushes subnormal inputs and results to zero (Intel SDM,
// VDPBF16PS); everything else matches a float32 product of the same
// operands up to summation order.
// Elsewhere an OpenBLAS with sbgemm runs it (panels over the pool); without
// one, and for float16 (whose 11-bit mantissa bfloat16 pairs cannot
// carry), blocks of k are converted to float32 and fed to sgemm with
// beta = 1, so no float32 copy of a whole operand is ever made.
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "loom/backend/cpu/blas.h"
#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/gemm.h"
#include "loom/backend/cpu/gemm_tiles.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/dtype.h"

namespace loom::cpu {

namespace {

// Rows of A per thread at least, when splitting over rows.
constexpr int64_t kMinPanel = 48;

// Splits rows (or, for thin products, columns) of C into one panel per pool
// thread and runs body(m0, m1, n0, n1) for each.
template <typename F>
void split_product(int64_t M, int64_t N, int64_t K, F&& body) {
  const int64_t threads = num_threads();
  if (!splits_over_pool(M, N, K)) {
    body(0, M, 0, N);
    return;
  }
  const bool rows = M >= N || M >= kMinPanel * threads;
  const int64_t n = rows ? M : N;
  const int64_t align = rows ? 12 : 32;
  // Two panels per thread: one that finishes early takes over from one that
  // was descheduled.
  int64_t panels = std::min<int64_t>(2 * threads, std::max<int64_t>(1, n / kMinPanel));
  int64_t width = (n + panels - 1) / panels;
  width = std::min(n, (width + align - 1) / align * align);
  panels = (n + width - 1) / width;
  parallel_chunks(static_cast<size_t>(panels), [&](size_t p) {
    const int64_t b = static_cast<int64_t>(p) * width, e = std::min(n, b + width);
    if (rows) {
      body(b, e, 0, N);
    } else {
      body(0, M, b, e);
    }
  });
}

// --- float32 blocks through sgemm ---------------------------------------------------

// Columns of k converted per block: a KC x N block of B and an M x KC block
// of A in float32 stay near the cache while sgemm reads them.
constexpr int64_t kConvertKC = 256;

// Converts the stored block of an operand that op() maps to rows [r0, r1)
// and columns [c0, c1) of op(X) (op(X) is R x C), into a dense float32
// buffer laid out as stored; returns its leading dimension.
int64_t convert_block(const uint16_t* x, int64_t ld, bool trans, Dtype dtype, int64_t r0,
                      int64_t r1, int64_t c0, int64_t c1, float* dst) {
  // Stored rows and columns of the block.
  const int64_t sr0 = trans ? c0 : r0, sr1 = trans ? c1 : r1;
  const int64_t sc0 = trans ? r0 : c0, sc1 = trans ? r1 : c1;
  const int64_t width = sc1 - sc0;
  for (int64_t r = sr0; r < sr1; ++r) {
    convert_buffer(x + r * ld + sc0, dtype, dst + (r - sr0) * width, float32,
                   static_cast<size_t>(width));
  }
  return width;
}

void gemm_via_f32(Dtype dtype, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* a,
                  int64_t lda, const uint16_t* b, int64_t ldb, float* c, int64_t ldc) {
  split_product(M, N, K, [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const int64_t kc = std::min(K, kConvertKC);
    std::vector<float> ab(static_cast<size_t>((m1 - m0) * kc));
    std::vector<float> bb(static_cast<size_t>(kc * (n1 - n0)));
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
      const int64_t k1 = std::min(K, k0 + kc);
      const int64_t la = convert_block(a, lda, ta, dtype, m0, m1, k0, k1, ab.data());
      const int64_t lb = convert_block(b, ldb, tb, dtype, k0, k1, n0, n1, bb.data());
      gemm<float>(ta, tb, m1 - m0, n1 - n0, k1 - k0, 1.0f, ab.data(), la, bb.data(), lb,
                  k0 == 0 ? 0.0f : 1.0f, c + m0 * ldc + n0, ldc);
    }
  });
}

// --- native bfloat16 (AVX-512 BF16) ---------------------------------------------------

#if defined(__x86_64__)

#define LOOM_BF16_TARGET __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl")))

constexpr int kMR = 12; // rows of a C tile (broadcast from packed A)
constexpr int kNR = 32; // columns of a C tile (two vectors of 16 lanes)
// One thread, thread CPU time, 1024² / 2048² (512²): KC 384 (the former
// value) 175-185 / 166-172 (204) GFLOP/s, 1024 207 / 200 (208), 2048 209 /
// 211 (205); NC 256 or 512 were slower at every KC.
constexpr int64_t kKC = 2048; // k per block (1024 pairs)
constexpr int64_t kMC = 96;   // rows of A packed at a time (8 tiles)
constexpr int64_t kNC = 1024; // columns of B packed at a time

// The bfloat16 element (i, j) of op(X).
inline uint32_t at(const uint16_t* x, int64_t ld, bool trans, int64_t i, int64_t j) {
  return trans ? x[j * ld + i] : x[i * ld + j];
}

// A block (rows [i0, i0 + mc), k in [k0, k0 + kc)) as tiles of kMR rows:
// tile t, pair p, row r at [(t * pairs + p) * kMR + r], k and k + 1 in the
// low and high halves; rows past M and the k past K are zero.
LOOM_BF16_TARGET void pack_a(const uint16_t* a, int64_t lda, bool ta, int64_t M, int64_t K,
                             int64_t i0, int64_t mc, int64_t k0, int64_t kc, uint32_t* dst) {
  const int64_t pairs = (kc + 1) / 2;
  const int64_t tiles = (mc + kMR - 1) / kMR;
  for (int64_t t = 0; t < tiles; ++t) {
    if (!ta && i0 + t * kMR + kMR <= std::min(M, i0 + mc)) {
      // A full tile of a row-major A: a k-pair is one 32-bit word, so 4 x 4
      // blocks of words (4 rows, 4 pairs) are transposed in registers, as
      // float32's pack_a does, instead of one strided store per word.
      uint32_t* d = dst + t * pairs * kMR;
      const int64_t full = std::min<int64_t>(kc, K - k0) / 2;
      int64_t p = 0;
      for (; p + 4 <= full; p += 4) {
        for (int g = 0; g < kMR / 4; ++g) {
          const uint16_t* src = a + (i0 + t * kMR + 4 * g) * lda + k0 + 2 * p;
          __m128 r0 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
          __m128 r1 =
              _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + lda)));
          __m128 r2 =
              _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * lda)));
          __m128 r3 =
              _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 3 * lda)));
          _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
          _mm_storeu_ps(reinterpret_cast<float*>(d + p * kMR + 4 * g), r0);
          _mm_storeu_ps(reinterpret_cast<float*>(d + (p + 1) * kMR + 4 * g), r1);
          _mm_storeu_ps(reinterpret_cast<float*>(d + (p + 2) * kMR + 4 * g), r2);
          _mm_storeu_ps(reinterpret_cast<float*>(d + (p + 3) * kMR + 4 * g), r3);
        }
      }
      for (int r = 0; r < kMR; ++r) {
        const uint16_t* row = a + (i0 + t * kMR + r) * lda + k0;
        for (int64_t q = p; q < pairs; ++q) {
          const int64_t k = k0 + 2 * q;
          uint32_t v = 0;
          if (k + 1 < K) {
            std::memcpy(&v, row + 2 * q, sizeof(v));
          } else if (k < K) {
            v = row[2 * q];
          }
          d[q * kMR + r] = v;
        }
      }
      continue;
    }
    for (int r = 0; r < kMR; ++r) {
      const int64_t i = i0 + t * kMR + r;
      uint32_t* d = dst + t * pairs * kMR + r;
      if (i >= M || i >= i0 + mc) {
        for (int64_t p = 0; p < pairs; ++p) d[p * kMR] = 0;
        continue;
      }
      if (!ta) {
        const uint16_t* row = a + i * lda + k0;
        const int64_t full = std::min<int64_t>(kc, K - k0) / 2;
        for (int64_t p = 0; p < full; ++p) {
          uint32_t v;
          std::memcpy(&v, row + 2 * p, sizeof(v));
          d[p * kMR] = v;
        }
        for (int64_t p = full; p < pairs; ++p) {
          const int64_t k = k0 + 2 * p;
          d[p * kMR] = k < K ? row[2 * p] : 0u;
        }
      } else {
        for (int64_t p = 0; p < pairs; ++p) {
          const int64_t k = k0 + 2 * p;
          const uint32_t lo = k < K ? at(a, lda, true, i, k) : 0u;
          const uint32_t hi = k + 1 < K ? at(a, lda, true, i, k + 1) : 0u;
          d[p * kMR] = lo | (hi << 16);
        }
      }
    }
  }
}

// A block of B (k in [k0, k0 + kc), columns [j0, j0 + nc)) as panels of kNR
// columns: panel u, pair p, column j at [(u * pairs + p) * kNR + j].
LOOM_BF16_TARGET void pack_b(const uint16_t* b, int64_t ldb, bool tb, int64_t N, int64_t K,
                             int64_t j0, int64_t nc, int64_t k0, int64_t kc, uint32_t* dst) {
  const int64_t pairs = (kc + 1) / 2;
  const int64_t panels = (nc + kNR - 1) / kNR;
  for (int64_t u = 0; u < panels; ++u) {
    const int64_t jb = j0 + u * kNR;
    const int64_t width = std::min<int64_t>(kNR, std::min(N, j0 + nc) - jb);
    for (int64_t p = 0; p < pairs; ++p) {
      uint32_t* d = dst + (u * pairs + p) * kNR;
      const int64_t k = k0 + 2 * p;
      if (!tb && width == kNR && k + 1 < K) {
        // The common case: two rows of B interleaved, zero-extended to
        // 32-bit lanes and the second shifted into the high halves.
        const uint16_t* r0 = b + k * ldb + jb;
        const uint16_t* r1 = r0 + ldb;
        for (int h = 0; h < kNR; h += 16) {
          const __m512i lo =
              _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + h)));
          const __m512i hi =
              _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1 + h)));
          _mm512_storeu_si512(d + h, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
        continue;
      }
      if (tb && width == kNR && k + 1 < K) {
        // A transposed B (x @ W.T, W stored N x K): a pair is adjacent in
        // memory, one 32-bit load per column instead of two 16-bit ones.
        const uint16_t* col = b + jb * ldb + k;
        for (int j = 0; j < kNR; ++j) std::memcpy(&d[j], col + j * ldb, sizeof(uint32_t));
        continue;
      }
      for (int64_t j = 0; j < kNR; ++j) {
        if (j >= width) {
          d[j] = 0;
          continue;
        }
        const uint32_t lo = k < K ? at(b, ldb, tb, k, jb + j) : 0u;
        const uint32_t hi = k + 1 < K ? at(b, ldb, tb, k + 1, jb + j) : 0u;
        d[j] = lo | (hi << 16);
      }
    }
  }
}

// Where a product's C goes: float32 (`f`), or, when the product has a
// single k block, bfloat16 (`h`, rounded to nearest even as the tiles are
// written, so no float32 C is allocated and no conversion pass reads it).
struct Dest {
  float* f;
  uint16_t* h;
  int64_t ld;
};

// Sixteen float32 lanes rounded to bfloat16 (nearest even, NaN kept quiet:
// as every other float32 -> bfloat16 conversion in Loom) and stored under
// the mask. Integer arithmetic, not VCVTNEPS2BF16, which flushes subnormal
// results to zero.
LOOM_BF16_TARGET inline void store_rounded(uint16_t* dst, __mmask16 mask, __m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  _mm256_mask_storeu_epi16(dst, mask, _mm512_cvtepi32_epi16(r));
}

// C tile (rows < m, columns < n of a kMR x kNR tile at `c`) = or += the
// product of one packed A tile and one packed B panel over `pairs` k-pairs;
// a bfloat16 C is only written, never accumulated.
LOOM_BF16_TARGET void tile_kernel(int64_t pairs, const uint32_t* ap, const uint32_t* bp, Dest c,
                                  bool accumulate, int m, int n) {
  __m512 acc[kMR][2];
#pragma GCC unroll 12
  for (int r = 0; r < kMR; ++r) {
    acc[r][0] = _mm512_setzero_ps();
    acc[r][1] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512i b0 = _mm512_loadu_si512(bp + p * kNR);
    const __m512i b1 = _mm512_loadu_si512(bp + p * kNR + 16);
#pragma GCC unroll 12
    for (int r = 0; r < kMR; ++r) {
      const __m512i av = _mm512_set1_epi32(static_cast<int>(ap[p * kMR + r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], (__m512bh)av, (__m512bh)b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], (__m512bh)av, (__m512bh)b1);
    }
  }
  const __mmask16 m0 = n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u);
  const __mmask16 m1 = n >= 32   ? __mmask16(0xFFFF)
                       : n <= 16 ? __mmask16(0)
                                 : __mmask16((1u << (n - 16)) - 1u);
  if (c.h) {
#pragma GCC unroll 12
    for (int r = 0; r < kMR; ++r) {
      if (r >= m) break;
      uint16_t* row = c.h + r * c.ld;
      store_rounded(row, m0, acc[r][0]);
      store_rounded(row + 16, m1, acc[r][1]);
    }
    return;
  }
#pragma GCC unroll 12
  for (int r = 0; r < kMR; ++r) {
    if (r >= m) break;
    float* row = c.f + r * c.ld;
    __m512 v0 = acc[r][0], v1 = acc[r][1];
    if (accumulate) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, row));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, row + 16));
    }
    _mm512_mask_storeu_ps(row, m0, v0);
    _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

// The tile of C at (i, j).
inline Dest tile_at(const Dest& c, int64_t i, int64_t j) {
  const int64_t offset = i * c.ld + j;
  return Dest{c.f ? c.f + offset : nullptr, c.h ? c.h + offset : nullptr, c.ld};
}

// C[m0:m1, n0:n1] = op(A) op(B) on the calling thread.
void bf16_panel(bool ta, bool tb, int64_t K, const uint16_t* a, int64_t lda, const uint16_t* b,
                int64_t ldb, const Dest& c, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t nc_max = std::min(kNC, (n1 - n0 + kNR - 1) / kNR * kNR);
  const int64_t kc_max = std::min(kKC, K + (K & 1));
  const int64_t mc_max = std::min(kMC, (m1 - m0 + kMR - 1) / kMR * kMR);
  // Not value-initialised (B's block is up to 4 MB): every word is packed
  // before it is read.
  std::unique_ptr<uint32_t[]> bpack(new uint32_t[static_cast<size_t>(nc_max * ((kc_max + 1) / 2))]);
  std::unique_ptr<uint32_t[]> apack(new uint32_t[static_cast<size_t>(mc_max * ((kc_max + 1) / 2))]);
  for (int64_t jc = n0; jc < n1; jc += kNC) {
    const int64_t nc = std::min(kNC, n1 - jc);
    for (int64_t pc = 0; pc < K; pc += kKC) {
      const int64_t kc = std::min(kKC, K - pc);
      const int64_t pairs = (kc + 1) / 2;
      pack_b(b, ldb, tb, n1, K, jc, nc, pc, kc, bpack.get());
      for (int64_t ic = m0; ic < m1; ic += kMC) {
        const int64_t mc = std::min(kMC, m1 - ic);
        pack_a(a, lda, ta, m1, K, ic, mc, pc, kc, apack.get());
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          const uint32_t* bp = bpack.get() + (jr / kNR) * pairs * kNR;
          const int n = static_cast<int>(std::min<int64_t>(kNR, nc - jr));
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            const int m = static_cast<int>(std::min<int64_t>(kMR, mc - ir));
            tile_kernel(pairs, apack.get() + (ir / kMR) * pairs * kMR, bp,
                        tile_at(c, ic + ir, jc + jr), pc > 0, m, n);
          }
        }
      }
    }
  }
}

// A whole op(B) packed once (as pack_b over all N and K: panel u, pair p at
// [(u * pairs + p) * kNR]) and shared by the threads: each row panel of a
// split product packed all of B again before, which at 512² and below cost
// as much as the products themselves.
struct PackedB {
  std::unique_ptr<uint32_t[]> data;
  int64_t pairs = 0; // k-pairs of all K (the last one zero-padded when K is odd)
};

// B packed whole is at most this large (2048 x 4096); larger products keep
// packing per panel, where a panel's products outweigh its packing anyway.
constexpr int64_t kSharedBBytes = int64_t{16} << 20;

bool shares_b(int64_t N, int64_t K) {
  const int64_t panels = (N + kNR - 1) / kNR;
  return panels * ((K + 1) / 2) * kNR * int64_t{sizeof(uint32_t)} <= kSharedBBytes;
}

PackedB pack_b_whole(const uint16_t* b, int64_t ldb, bool tb, int64_t N, int64_t K) {
  PackedB packed;
  packed.pairs = (K + 1) / 2;
  const int64_t panels = (N + kNR - 1) / kNR;
  const size_t words = static_cast<size_t>(panels * packed.pairs * kNR);
  packed.data.reset(new uint32_t[words]);
  // A small B is packed before a second thread would have started.
  const int64_t chunks =
      words < (size_t{1} << 16) ? 1 : std::min<int64_t>(panels, 2 * num_threads());
  parallel_chunks(static_cast<size_t>(chunks), [&](size_t i) {
    const int64_t u0 = panels * static_cast<int64_t>(i) / chunks;
    const int64_t u1 = panels * static_cast<int64_t>(i + 1) / chunks;
    if (u0 >= u1) return;
    const int64_t j0 = u0 * kNR;
    pack_b(b, ldb, tb, N, K, j0, std::min(N, u1 * kNR) - j0, 0, K,
           packed.data.get() + u0 * packed.pairs * kNR);
  });
  return packed;
}

// C[m0:m1, n0:n1] = op(A) op(B) on the calling thread, B packed whole
// (n0 a multiple of kNR).
void bf16_panel_packed(bool ta, int64_t K, const uint16_t* a, int64_t lda, const PackedB& bp,
                       const Dest& c, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t kc_max = std::min(kKC, K + (K & 1));
  const int64_t mc_max = std::min(kMC, (m1 - m0 + kMR - 1) / kMR * kMR);
  std::unique_ptr<uint32_t[]> apack(new uint32_t[static_cast<size_t>(mc_max * ((kc_max + 1) / 2))]);
  for (int64_t jc = n0; jc < n1; jc += kNC) {
    const int64_t nc = std::min(kNC, n1 - jc);
    for (int64_t pc = 0; pc < K; pc += kKC) {
      const int64_t kc = std::min(kKC, K - pc);
      const int64_t pairs = (kc + 1) / 2;
      for (int64_t ic = m0; ic < m1; ic += kMC) {
        const int64_t mc = std::min(kMC, m1 - ic);
        pack_a(a, lda, ta, m1, K, ic, mc, pc, kc, apack.get());
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          // kKC is even: a k block starts on a pair.
          const uint32_t* b = bp.data.get() + (((jc + jr) / kNR) * bp.pairs + pc / 2) * kNR;
          const int n = static_cast<int>(std::min<int64_t>(kNR, nc - jr));
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            const int m = static_cast<int>(std::min<int64_t>(kMR, mc - ir));
            tile_kernel(pairs, apack.get() + (ir / kMR) * pairs * kMR, b,
                        tile_at(c, ic + ir, jc + jr), pc > 0, m, n);
          }
        }
      }
    }
  }
}

bool detect_bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

// C = op(A) op(B) through the native kernel (M, N >= 2; a bfloat16 C needs
// K <= kKC, one k block).
void native_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* a, int64_t lda,
                 const uint16_t* b, int64_t ldb, const Dest& c) {
  if (splits_over_pool(M, N, K) && shares_b(N, K)) {
    const PackedB packed = pack_b_whole(b, ldb, tb, N, K);
    over_tile_blocks(M, N, kMR, kNR, [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
      bf16_panel_packed(ta, K, a, lda, packed, c, m0, m1, n0, n1);
    });
    return;
  }
  split_product(M, N, K, [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    bf16_panel(ta, tb, K, a, lda, b, ldb, c, m0, m1, n0, n1);
  });
}

#endif

// --- bfloat16 matrix-vector products ------------------------------------------------
// A decode step's x @ W.T: memory-bound, so the packing of the GEMM (and its
// 12-row tiles, 11 of them empty) would cost more than the product.

inline float bf16_to_float(uint16_t h) {
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// out[r * incy] = sum_k row_r[k] x[k] for rows [r0, r1) of a row-major
// bfloat16 matrix; x contiguous.
void dot_rows_generic(const uint16_t* mat, int64_t ld, const uint16_t* x, int64_t K, int64_t r0,
                      int64_t r1, float* out, int64_t incy) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint16_t* row = mat + r * ld;
    float part[8] = {};
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
      for (int l = 0; l < 8; ++l) part[l] += bf16_to_float(row[k + l]) * bf16_to_float(x[k + l]);
    }
    float sum = 0.0f;
    for (; k < K; ++k) sum += bf16_to_float(row[k]) * bf16_to_float(x[k]);
    for (float p : part) sum += p;
    out[r * incy] = sum;
  }
}

#if defined(__x86_64__)
LOOM_BF16_TARGET void dot_rows_bf16(const uint16_t* mat, int64_t ld, const uint16_t* x, int64_t K,
                                    int64_t r0, int64_t r1, float* out, int64_t incy) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint16_t* row = mat + r * ld;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 64 <= K; k += 64) {
      acc0 = _mm512_dpbf16_ps(acc0, (__m512bh)_mm512_loadu_si512(row + k),
                              (__m512bh)_mm512_loadu_si512(x + k));
      acc1 = _mm512_dpbf16_ps(acc1, (__m512bh)_mm512_loadu_si512(row + k + 32),
                              (__m512bh)_mm512_loadu_si512(x + k + 32));
    }
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, _mm512_add_ps(acc0, acc1));
    float sum = 0.0f;
    for (float v : lanes) sum += v;
    for (; k < K; ++k) sum += bf16_to_float(row[k]) * bf16_to_float(x[k]);
    out[r * incy] = sum;
  }
}
#endif

// out[j * incy] = sum_k x[k] mat[k, j] for columns [j0, j1) of a row-major
// K x n bfloat16 matrix: rows of the matrix scaled and added, in float32.
void axpy_rows(const uint16_t* mat, int64_t ld, const uint16_t* x, int64_t incx, int64_t K,
               int64_t j0, int64_t j1, float* out, int64_t incy) {
  const int64_t n = j1 - j0;
  std::vector<float> acc_buffer(static_cast<size_t>(n), 0.0f);
  float* acc = acc_buffer.data();
  int64_t k = 0;
  // Four rows per pass: the accumulator row is loaded and stored once for
  // four rows of the matrix.
  for (; k + 4 <= K; k += 4) {
    const float x0 = bf16_to_float(x[k * incx]), x1 = bf16_to_float(x[(k + 1) * incx]);
    const float x2 = bf16_to_float(x[(k + 2) * incx]), x3 = bf16_to_float(x[(k + 3) * incx]);
    const uint16_t* r0 = mat + k * ld + j0;
    const uint16_t* r1 = r0 + ld;
    const uint16_t* r2 = r1 + ld;
    const uint16_t* r3 = r2 + ld;
    for (int64_t j = 0; j < n; ++j) {
      acc[j] += x0 * bf16_to_float(r0[j]) + x1 * bf16_to_float(r1[j]) + x2 * bf16_to_float(r2[j]) +
                x3 * bf16_to_float(r3[j]);
    }
  }
  for (; k < K; ++k) {
    const float xk = bf16_to_float(x[k * incx]);
    const uint16_t* row = mat + k * ld + j0;
    for (int64_t j = 0; j < n; ++j) acc[j] += xk * bf16_to_float(row[j]);
  }
  for (int64_t j = j0; j < j1; ++j) out[j * incy] = acc[j - j0];
}

// C = op(A) op(B) with M == 1 or N == 1.
void bf16_gemv(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* a, int64_t lda,
               const uint16_t* b, int64_t ldb, float* c, int64_t ldc) {
  const uint16_t* mat;
  const uint16_t* x;
  int64_t ld, incx, incy, outputs;
  bool rows; // outputs are rows of the stored matrix
  if (M == 1) {
    mat = b, ld = ldb, rows = tb, x = a, incx = ta ? lda : 1, incy = 1, outputs = N;
  } else {
    mat = a, ld = lda, rows = !ta, x = b, incx = tb ? 1 : ldb, incy = ldc, outputs = M;
  }
  std::vector<uint16_t> xc;
  if (rows && incx != 1) {
    xc.resize(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) xc[k] = x[k * incx];
    x = xc.data();
  }
  const int64_t threads = num_threads();
  const bool split = threads > 1 && !in_parallel_region() && outputs * K >= (int64_t{1} << 17);
  const int64_t panels =
      split ? std::min<int64_t>(4 * threads, std::max<int64_t>(1, outputs / 16)) : 1;
  const int64_t width = (outputs + panels - 1) / panels;
  parallel_chunks(static_cast<size_t>(panels), [&](size_t p) {
    const int64_t o0 = static_cast<int64_t>(p) * width, o1 = std::min(outputs, o0 + width);
    if (o0 >= o1) return;
    if (!rows) {
      axpy_rows(mat, ld, x, incx, K, o0, o1, c, incy);
      return;
    }
#if defined(__x86_64__)
    if (has_native_bf16()) {
      dot_rows_bf16(mat, ld, x, K, o0, o1, c, incy);
      return;
    }
#endif
    dot_rows_generic(mat, ld, x, K, o0, o1, c, incy);
  });
}

} // namespace

bool has_native_bf16() {
#if defined(__x86_64__)
  static const bool native = detect_bf16();
  return native;
#else
  return false;
#endif
}

void gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* a, int64_t lda,
               const uint16_t* b, int64_t ldb, float* c, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i) std::fill(c + i * ldc, c + i * ldc + N, 0.0f);
    return;
  }
  if (M == 1 || N == 1) {
    bf16_gemv(ta, tb, M, N, K, a, lda, b, ldb, c, ldc);
    return;
  }
#if defined(__x86_64__)
  if (has_native_bf16()) {
    native_bf16(ta, tb, M, N, K, a, lda, b, ldb, Dest{c, nullptr, ldc});
    return;
  }
#endif
  if (const auto sbgemm = blas::library().sbgemm) {
    // An OpenBLAS built with BUILD_BFLOAT16 (not Debian's 0.3.21).
    split_product(M, N, K, [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
      const blas::InFlight call;
      const uint16_t* pa = ta ? a + m0 : a + m0 * lda;
      const uint16_t* pb = tb ? b + n0 * ldb : b + n0;
      sbgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
             static_cast<int>(m1 - m0), static_cast<int>(n1 - n0), static_cast<int>(K), 1.0f, pa,
             static_cast<int>(lda), pb, static_cast<int>(ldb), 0.0f, c + m0 * ldc + n0,
             static_cast<int>(ldc));
    });
    return;
  }
  gemm_via_f32(bfloat16, ta, tb, M, N, K, a, lda, b, ldb, c, ldc);
}

void gemm_bf16_rounded(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* a,
                       int64_t lda, const uint16_t* b, int64_t ldb, uint16_t* c, int64_t ldc) {
  if (M == 0 || N == 0) return;
#if defined(__x86_64__)
  if (has_native_bf16() && M > 1 && N > 1 && K > 0 && K <= kKC) {
    native_bf16(ta, tb, M, N, K, a, lda, b, ldb, Dest{nullptr, c, ldc});
    return;
  }
#endif
  // A float32 C, then one rounding per element.
  std::unique_ptr<float[]> result(new float[static_cast<size_t>(M * N)]);
  gemm_bf16(ta, tb, M, N, K, a, lda, b, ldb, result.get(), N);
  const auto round_rows = [&](size_t r0, size_t r1) {
    for (size_t i = r0; i < r1; ++i) {
      convert_buffer(result.get() + i * N, float32, c + i * ldc, bfloat16, static_cast<size_t>(N));
    }
  };
  if (in_parallel_region() || M * N < (int64_t{1} << 16)) {
    round_rows(0, static_cast<size_t>(M));
  } else {
    parallel_for(static_cast<size_t>(M),
                 std::max<size_t>(1, static_cast<size_t>((int64_t{1} << 14) / N)), round_rows);
  }
}

void gemm_f16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* a, int64_t lda,
              const uint16_t* b, int64_t ldb, float* c, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i) std::fill(c + i * ldc, c + i * ldc + N, 0.0f);
    return;
  }
  gemm_via_f32(float16, ta, tb, M, N, K, a, lda, b, ldb, c, ldc);
}

} // namespace loom::cpu
