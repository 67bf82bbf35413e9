// mx.fast.scaled_dot_product_attention on the GPU: a tiled kernel with an
// online softmax (scores never stored). A block takes 64 query rows of one
// head, four threads per row each holding a quarter of the row's q and of its
// output accumulator in registers; tiles of keys and values are staged in
// shared memory and read by every row of the block. Scores, the softmax and
// the accumulation are in float (float16/bfloat16 rounded once at the end);
// float64 and head sizes that are not a multiple of four (or over 256) take
// the CPU. float16/bfloat16 with D == Dv of 64 or 128 take the tensor-core
// kernel below instead (attention_mma_kernel_source); float32 stays on this
// one (no TF32). Masks as on the CPU: a false boolean or causal entry scores the
// lowest finite value (a row with every key masked weighs them equally), an
// additive mask adds, a sink joins each row's softmax denominator.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"
#include "loom/primitives/fast.h"

namespace loom::cuda {

namespace {

constexpr int kRows = 64; // query rows per block
constexpr int kThreadsPerRow = 4;

// The kernels' loom_attn_params, byte for byte. The backward's fields (o to
// dsink) are unused by the forward.
struct AttnParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  const void* mask;
  const void* sinks;
  long long Nq, Tq, Tk, groups;
  long long qs[4], ks[4], vs[4], ms[4];
  float scale;
  int causal;
  const void* o;
  const void* dout;
  float* stats;
  float* dq;
  void* dk;
  void* dv;
  float* dsink;
};

const char* kParamsSource = R"(
struct loom_attn_params {
  const void* q; const void* k; const void* v; void* out; const void* mask; const void* sinks;
  long long Nq, Tq, Tk, groups;
  long long qs[4], ks[4], vs[4], ms[4];
  float scale;
  int causal;
  const void* o; const void* dout; float* stats; float* dq; void* dk; void* dv; float* dsink;
};
)";

} // namespace

// mask: 0 none, 1 boolean, 2 additive (of dtype d).
std::string attention_kernel_source(const std::string& name, Dtype d, int D, int Dv, int mask,
                                    bool sinks) {
  const std::string st = storage_type(d);
  const int bc = D + Dv > 256 ? 16 : 32; // keys per tile (shared memory under 48 KiB)
  std::string src = jit_prelude();
  src += "#define LOOM_D " + std::to_string(D) + "\n#define LOOM_DV " + std::to_string(Dv) +
         "\n#define LOOM_BC " + std::to_string(bc) + "\n#define LOOM_ROWS " +
         std::to_string(kRows) + "\n#define LOOM_TPR " + std::to_string(kThreadsPerRow) + "\n";
  src += kParamsSource;
  src += "extern \"C\" __global__ void __launch_bounds__(LOOM_ROWS * LOOM_TPR) " + name +
         "(loom_attn_params p) {\n  typedef " + st + " T;\n";
  src += R"(
  __shared__ float ks[LOOM_BC][LOOM_D];
  __shared__ float vs[LOOM_BC][LOOM_DV];
  const T* Q = (const T*)p.q;
  const T* K = (const T*)p.k;
  const T* V = (const T*)p.v;
  const long long bh = blockIdx.y;
  const long long b = bh / p.Nq, h = bh - b * p.Nq, hk = h / p.groups;
  const int lane = threadIdx.x % LOOM_TPR;
  const long long first = (long long)blockIdx.x * LOOM_ROWS;
  const long long row = first + threadIdx.x / LOOM_TPR;
  const bool live = row < p.Tq;
  const float lowest = -3.402823466e38f;
  float qr[LOOM_D / LOOM_TPR], acc[LOOM_DV / LOOM_TPR];
#pragma unroll
  for (int e = 0; e < LOOM_D / LOOM_TPR; ++e) {
    qr[e] = live ? (float)loom_ld(Q[b * p.qs[0] + h * p.qs[1] + row * p.qs[2] +
                                    (long long)(lane + e * LOOM_TPR) * p.qs[3]]) : 0.0f;
  }
#pragma unroll
  for (int e = 0; e < LOOM_DV / LOOM_TPR; ++e) acc[e] = 0.0f;
)";
  if (sinks) {
    src += "  float m = (float)loom_ld(((const T*)p.sinks)[h]), l = 1.0f;\n";
  } else {
    src += "  float m = -__int_as_float(0x7f800000), l = 0.0f;\n";
  }
  src += R"(
  // Keys past the block's last visible one score exactly 0: skip their tiles
  // (unless a row sees no key at all: then it weighs all of them equally).
  long long kend = p.Tk;
  if (p.causal) {
    const long long last_row = (first + LOOM_ROWS < p.Tq ? first + LOOM_ROWS : p.Tq) - 1;
    const long long reach = last_row + p.Tk - p.Tq + 1;
    if (first + p.Tk - p.Tq >= 0) kend = reach < p.Tk ? reach : p.Tk;
  }
  const T* Kh = K + b * p.ks[0] + hk * p.ks[1];
  const T* Vh = V + b * p.vs[0] + hk * p.vs[1];
  for (long long j0 = 0; j0 < kend; j0 += LOOM_BC) {
    __syncthreads();
    for (int i = threadIdx.x; i < LOOM_BC * LOOM_D; i += blockDim.x) {
      const int r = i / LOOM_D, c = i - r * LOOM_D;
      ks[r][c] = j0 + r < p.Tk ? (float)loom_ld(Kh[(j0 + r) * p.ks[2] + c * p.ks[3]]) : 0.0f;
    }
    for (int i = threadIdx.x; i < LOOM_BC * LOOM_DV; i += blockDim.x) {
      const int r = i / LOOM_DV, c = i - r * LOOM_DV;
      vs[r][c] = j0 + r < p.Tk ? (float)loom_ld(Vh[(j0 + r) * p.vs[2] + c * p.vs[3]]) : 0.0f;
    }
    __syncthreads();
    float s[LOOM_BC];
    float tile_max = -__int_as_float(0x7f800000);
#pragma unroll
    for (int jj = 0; jj < LOOM_BC; ++jj) {
      float part = 0.0f;
#pragma unroll
      for (int e = 0; e < LOOM_D / LOOM_TPR; ++e) part += qr[e] * ks[jj][lane + e * LOOM_TPR];
#pragma unroll
      for (int o = LOOM_TPR / 2; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
      float sc = part * p.scale;
      const long long j = j0 + jj;
      if (j >= p.Tk) {
        sc = -__int_as_float(0x7f800000); // not a key: no weight at all
      } else {
)";
  if (mask != 0) {
    std::string mt = mask == 1 ? "unsigned char" : st;
    src +=
        "        const long long mo = b * p.ms[0] + h * p.ms[1] + row * p.ms[2] + j * p.ms[3];\n";
    if (mask == 1) {
      src += "        if (live && !((const unsigned char*)p.mask)[mo]) sc = lowest;\n";
    } else {
      src += "        if (live) sc += (float)loom_ld(((const " + mt + "*)p.mask)[mo]);\n";
    }
  }
  src += R"(
        if (p.causal && j > row + p.Tk - p.Tq) sc = lowest;
      }
      s[jj] = sc;
      tile_max = fmaxf(tile_max, sc);
    }
    const float m_new = fmaxf(m, tile_max);
    const float corr = m == m_new ? 1.0f : expf(m - m_new);
    l *= corr;
#pragma unroll
    for (int e = 0; e < LOOM_DV / LOOM_TPR; ++e) acc[e] *= corr;
#pragma unroll
    for (int jj = 0; jj < LOOM_BC; ++jj) {
      const float pj = expf(s[jj] - m_new);
      l += pj;
#pragma unroll
      for (int e = 0; e < LOOM_DV / LOOM_TPR; ++e) acc[e] += pj * vs[jj][lane + e * LOOM_TPR];
    }
    m = m_new;
  }
  if (!live) return;
  T* O = (T*)p.out + (bh * p.Tq + row) * LOOM_DV;
  const float inv = 1.0f / l;
#pragma unroll
  for (int e = 0; e < LOOM_DV / LOOM_TPR; ++e) loom_st(O + lane + e * LOOM_TPR, acc[e] * inv);
}
)";
  return src;
}

// Tensor-core forward for float16/bfloat16 with D == Dv in {64, 128}, unit
// inner strides and 16-byte aligned rows: a block of four warps takes 64 query
// rows of one head, each warp 16 rows (its q fragments held in registers);
// tiles of 64 keys and values are staged in shared memory by cp.async (the
// next K tile loads while the scores of this one are turned into weights, the
// next V tile while they are applied), read with ldmatrix through a swizzle of
// the 16-byte chunks of each row (conflict free) and multiplied by
// mma.sync.m16n8k16 with float accumulators. The softmax is online, in float
// and base 2 (the scale folded with log2(e)); masked entries score the lowest
// finite value as in the SIMT kernel.
namespace {

// The tensor-core kernels' helpers (PTX for cp.async, ldmatrix, mma.sync and
// the conversions; the swizzle of rows of LOOM_D elements).
std::string mma_helpers(Dtype d) {
  const std::string mt = d == bfloat16 ? "bf16" : "f16";
  std::string src = R"(
#define LOOM_CH (LOOM_D / 8)
__device__ __forceinline__ unsigned loom_smem(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
// Offset (in elements) of chunk c of row r: chunks XOR the row's low bits.
__device__ __forceinline__ int loom_sw(int r, int c) { return r * LOOM_D + ((c ^ (r & 7)) << 3); }
__device__ __forceinline__ void loom_cp16(unsigned dst, const void* src, bool pred) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(pred ? 16 : 0));
}
__device__ __forceinline__ void loom_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void loom_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ float loom_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ void loom_ldm(unsigned* r, unsigned a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void loom_ldmt(unsigned* r, unsigned a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
)";
  src +=
      "__device__ __forceinline__ void loom_mma(float* c, const unsigned* a, unsigned b0, "
      "unsigned b1) {\n  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32." +
      mt + "." + mt +
      ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
      "      : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n"
      "      : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b0), \"r\"(b1));\n}\n";
  src +=
      "__device__ __forceinline__ unsigned loom_pack(float lo, float hi) {\n  unsigned r;\n"
      "  asm(\"cvt.rn." +
      mt + "x2.f32 %0, %1, %2;\\n\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));\n  return r;\n}\n";
  return src;
}

// The forward; with `stats`, the backward's first pass instead: the same
// scores and softmax statistics without the product with V, writing each
// row's running maximum m and log2 of its sum l (base 2) and
// delta = sum(dO * O), and adding the sinks' gradients.
std::string mma_source(const std::string& name, Dtype d, int D, int mask, bool sinks, int warps,
                       bool stats, int min_blocks) {
  const std::string st = storage_type(d);
  std::string src = jit_prelude();
  src += "#define LOOM_D " + std::to_string(D) + "\n#define LOOM_W " + std::to_string(warps) +
         "\n#define LOOM_STATS " + (stats ? "1" : "0") + "\n";
  src += kParamsSource;
  src += R"(
#define LOOM_NT (32 * LOOM_W)
#define LOOM_BM (16 * LOOM_W)
#define LOOM_BN 64
// With eight warps the q tile (128 rows) fills the K and V buffers: it is
// read into registers before the first K tile lands there.
#define LOOM_QALIAS (LOOM_BM == 2 * LOOM_BN)
)";
  src += mma_helpers(d);
  const std::string bounds =
      min_blocks > 0 ? "LOOM_NT, " + std::to_string(min_blocks) : std::string("LOOM_NT");
  src += "extern \"C\" __global__ void __launch_bounds__(" + bounds + ") " + name +
         "(loom_attn_params p) {\n  typedef " + st + " T;\n";
  src += R"(
  __shared__ __align__(128) unsigned short smem[(LOOM_QALIAS ? 0 : LOOM_BM * LOOM_D) +
                                                (LOOM_STATS ? 1 : 2) * LOOM_BN * LOOM_D];
  unsigned short* const sq = smem;
  unsigned short* const sk = smem + (LOOM_QALIAS ? 0 : LOOM_BM * LOOM_D);
  unsigned short* const sv = sk + LOOM_BN * LOOM_D; // unused (and not allocated) with LOOM_STATS
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const long long bh = blockIdx.y;
  const long long b = bh / p.Nq, h = bh - b * p.Nq, hk = h / p.groups;
  // The longest causal blocks (the last rows) start first.
  const long long qblk = p.causal ? (long long)gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const long long first = qblk * LOOM_BM;
  const float lowest = -3.402823466e38f;
  const float ninf = -__int_as_float(0x7f800000);
  const float l2e = 1.4426950408889634f;
  const T* Qh = (const T*)p.q + b * p.qs[0] + h * p.qs[1];
  const T* Kh = (const T*)p.k + b * p.ks[0] + hk * p.ks[1];
  const T* Vh = (const T*)p.v + b * p.vs[0] + hk * p.vs[1];
  long long kend = p.Tk;
  if (p.causal) {
    const long long last_row = (first + LOOM_BM < p.Tq ? first + LOOM_BM : p.Tq) - 1;
    const long long reach = last_row + p.Tk - p.Tq + 1;
    if (first + p.Tk - p.Tq >= 0) kend = reach < p.Tk ? reach : p.Tk;
  }
  const int ntiles = (int)((kend + LOOM_BN - 1) / LOOM_BN);
  // Stage q and the first K tile, then the first V tile.
  for (int i = tid; i < LOOM_BM * LOOM_CH; i += LOOM_NT) {
    const int r = i / LOOM_CH, c = i - r * LOOM_CH;
    const bool ok = first + r < p.Tq;
    loom_cp16(loom_smem(sq + loom_sw(r, c)), ok ? (const void*)(Qh + (first + r) * p.qs[2] + c * 8)
                                                : (const void*)Qh, ok);
  }
  unsigned qf[LOOM_D / 16][4];
#if LOOM_QALIAS
  loom_commit();
  loom_wait<0>();
  __syncthreads();
#pragma unroll
  for (int kb = 0; kb < LOOM_D / 16; ++kb) {
    const int r = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    loom_ldm(qf[kb], loom_smem(sq + loom_sw(r, kb * 2 + (lane >> 4))));
  }
  __syncthreads();
#endif
  for (int i = tid; i < LOOM_BN * LOOM_CH; i += LOOM_NT) {
    const int r = i / LOOM_CH, c = i - r * LOOM_CH;
    const bool ok = r < p.Tk;
    loom_cp16(loom_smem(sk + loom_sw(r, c)), ok ? (const void*)(Kh + r * p.ks[2] + c * 8)
                                                : (const void*)Kh, ok);
  }
  loom_commit();
#if !LOOM_STATS
  for (int i = tid; i < LOOM_BN * LOOM_CH; i += LOOM_NT) {
    const int r = i / LOOM_CH, c = i - r * LOOM_CH;
    const bool ok = r < p.Tk;
    loom_cp16(loom_smem(sv + loom_sw(r, c)), ok ? (const void*)(Vh + r * p.vs[2] + c * 8)
                                                : (const void*)Vh, ok);
  }
  loom_commit();
#endif
  float o[LOOM_CH][4];
#pragma unroll
  for (int n = 0; n < LOOM_CH; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  // Rows g and g + 8 of the warp's 16: running max (base 2) and partial sums.
)";
  if (sinks) {
    src +=
        "  const float sink = (float)loom_ld(((const T*)p.sinks)[h]) * l2e;\n"
        "  float m0 = sink, m1 = sink, l0 = t == 0 ? 1.0f : 0.0f, l1 = l0;\n";
  } else {
    src += "  float m0 = ninf, m1 = ninf, l0 = 0.0f, l1 = 0.0f;\n";
  }
  src += R"(
  const long long row0 = first + warp * 16 + g, row1 = row0 + 8;
  for (int jt = 0; jt < ntiles; ++jt) {
    const long long j0 = (long long)jt * LOOM_BN;
    const bool more = jt + 1 < ntiles;
#if LOOM_STATS
    loom_wait<0>(); // K tiles only: this one
#else
    loom_wait<1>(); // this K tile (the V tile before it may still land)
#endif
    __syncthreads();
#if !LOOM_QALIAS
    if (jt == 0) {
#pragma unroll
      for (int kb = 0; kb < LOOM_D / 16; ++kb) {
        const int r = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        loom_ldm(qf[kb], loom_smem(sq + loom_sw(r, kb * 2 + (lane >> 4))));
      }
    }
#endif
    float s[LOOM_BN / 8][4];
#pragma unroll
    for (int n = 0; n < LOOM_BN / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kb = 0; kb < LOOM_D / 16; kb += 2) {
#pragma unroll
      for (int n = 0; n < LOOM_BN / 8; ++n) {
        unsigned bf[4];
        loom_ldm(bf, loom_smem(sk + loom_sw(n * 8 + (lane & 7), kb * 2 + (lane >> 3))));
        loom_mma(s[n], qf[kb], bf[0], bf[1]);
        loom_mma(s[n], qf[kb + 1], bf[2], bf[3]);
      }
    }
    __syncthreads();
    if (more) {
      const long long jn = j0 + LOOM_BN;
      for (int i = tid; i < LOOM_BN * LOOM_CH; i += LOOM_NT) {
        const int r = i / LOOM_CH, c = i - r * LOOM_CH;
        const bool ok = jn + r < p.Tk;
        loom_cp16(loom_smem(sk + loom_sw(r, c)),
                  ok ? (const void*)(Kh + (jn + r) * p.ks[2] + c * 8) : (const void*)Kh, ok);
      }
      loom_commit();
    }
    // Scores in base-2 units; masks on the tiles that need them.
    const bool edge = j0 + LOOM_BN > p.Tk ||
                      (p.causal && j0 + LOOM_BN - 1 > first + p.Tk - p.Tq);
#pragma unroll
    for (int n = 0; n < LOOM_BN / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const long long row = e < 2 ? row0 : row1;
        const long long j = j0 + n * 8 + 2 * t + (e & 1);
)";
  if (mask == 0) {
    src += "        float sc = s[n][e] * (p.scale * l2e);\n";
  } else {
    src += "        float sc = s[n][e] * p.scale;\n";
    src +=
        "        if (j < p.Tk && row < p.Tq) {\n"
        "          const long long mo = b * p.ms[0] + h * p.ms[1] + row * p.ms[2] + j * p.ms[3];\n";
    if (mask == 1) {
      src += "          if (!((const unsigned char*)p.mask)[mo]) sc = lowest;\n";
    } else {
      src += "          sc += (float)loom_ld(((const T*)p.mask)[mo]);\n";
    }
    src += "        }\n        sc = sc == lowest ? lowest : sc * l2e;\n";
  }
  src += R"(
        if (edge) {
          if (j >= p.Tk) sc = ninf;
          else if (p.causal && j > row + p.Tk - p.Tq) sc = lowest;
        }
        s[n][e] = sc;
      }
    }
    float mx0 = m0, mx1 = m1;
#pragma unroll
    for (int n = 0; n < LOOM_BN / 8; ++n) {
      mx0 = fmaxf(mx0, fmaxf(s[n][0], s[n][1]));
      mx1 = fmaxf(mx1, fmaxf(s[n][2], s[n][3]));
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float c0 = mx0 == m0 ? 1.0f : loom_ex2(m0 - mx0);
    const float c1 = mx1 == m1 ? 1.0f : loom_ex2(m1 - mx1);
    m0 = mx0;
    m1 = mx1;
    l0 *= c0;
    l1 *= c1;
#pragma unroll
    for (int n = 0; n < LOOM_CH; ++n) {
      o[n][0] *= c0;
      o[n][1] *= c0;
      o[n][2] *= c1;
      o[n][3] *= c1;
    }
    unsigned pf[LOOM_BN / 16][4];
#pragma unroll
    for (int n = 0; n < LOOM_BN / 8; ++n) {
      const float p0 = loom_ex2(s[n][0] - m0), p1 = loom_ex2(s[n][1] - m0);
      const float p2 = loom_ex2(s[n][2] - m1), p3 = loom_ex2(s[n][3] - m1);
      l0 += p0 + p1;
      l1 += p2 + p3;
      pf[n >> 1][(n & 1) * 2] = loom_pack(p0, p1);
      pf[n >> 1][(n & 1) * 2 + 1] = loom_pack(p2, p3);
    }
#if !LOOM_STATS
    if (more) {
      loom_wait<1>();
    } else {
      loom_wait<0>();
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < LOOM_BN / 16; ++kk) {
#pragma unroll
      for (int n = 0; n < LOOM_CH; n += 2) {
        unsigned bf[4];
        loom_ldmt(bf, loom_smem(sv + loom_sw(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                             n + (lane >> 4))));
        loom_mma(o[n], pf[kk], bf[0], bf[1]);
        loom_mma(o[n + 1], pf[kk], bf[2], bf[3]);
      }
    }
    __syncthreads();
    if (more) {
      const long long jn = j0 + LOOM_BN;
      for (int i = tid; i < LOOM_BN * LOOM_CH; i += LOOM_NT) {
        const int r = i / LOOM_CH, c = i - r * LOOM_CH;
        const bool ok = jn + r < p.Tk;
        loom_cp16(loom_smem(sv + loom_sw(r, c)),
                  ok ? (const void*)(Vh + (jn + r) * p.vs[2] + c * 8) : (const void*)Vh, ok);
      }
      loom_commit();
    }
#endif
  }
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
#if LOOM_STATS
  // m and log2(l) kept apart: a row that sees no key has m the lowest
  // value, which m + log2(l) would absorb (its weights are 1/l, not 1).
  const long long nrows = (long long)gridDim.y * p.Tq;
  const float ll0 = __log2f(l0), ll1 = __log2f(l1);
  if (t == 0) {
    if (row0 < p.Tq) {
      p.stats[bh * p.Tq + row0] = m0;
      p.stats[nrows + bh * p.Tq + row0] = ll0;
    }
    if (row1 < p.Tq) {
      p.stats[bh * p.Tq + row1] = m1;
      p.stats[nrows + bh * p.Tq + row1] = ll1;
    }
  }
  const T* Ob = (const T*)p.o + bh * p.Tq * LOOM_D;
  const T* dOb = (const T*)p.dout + bh * p.Tq * LOOM_D;
  float dsink = 0.0f;
  for (int r = 0; r < 16; ++r) {
    const long long row = first + warp * 16 + r;
    float part = 0.0f;
    if (row < p.Tq) {
      for (int c = lane; c < LOOM_D; c += 32) {
        part += loom_ld(Ob[row * LOOM_D + c]) * loom_ld(dOb[row * LOOM_D + c]);
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) part += __shfl_xor_sync(0xffffffffu, part, off);
    if (lane == 0 && row < p.Tq) p.stats[2 * nrows + bh * p.Tq + row] = part;
)";
  if (sinks) {
    // The sink is a key of value 0: its weight's gradient is -P_sink * delta.
    src += R"(
    const float mr = __shfl_sync(0xffffffffu, r < 8 ? m0 : m1, (r & 7) * 4);
    const float lr = __shfl_sync(0xffffffffu, r < 8 ? ll0 : ll1, (r & 7) * 4);
    if (row < p.Tq) dsink -= loom_ex2((sink - mr) - lr) * part;
)";
  }
  src += R"(
  }
  if (lane == 0 && dsink != 0.0f) atomicAdd(p.dsink + h, dsink);
#else
  const float i0 = 1.0f / l0, i1 = 1.0f / l1;
  // The warp's 16 rows through shared memory (every tile's reads are done:
  // the loop ends at a barrier), then out in whole 16-byte chunks.
  const int r0 = warp * 16 + g;
#pragma unroll
  for (int n = 0; n < LOOM_CH; ++n) {
    *(unsigned*)(smem + loom_sw(r0, n) + 2 * t) = loom_pack(o[n][0] * i0, o[n][1] * i0);
    *(unsigned*)(smem + loom_sw(r0 + 8, n) + 2 * t) = loom_pack(o[n][2] * i1, o[n][3] * i1);
  }
  __syncwarp();
  T* O = (T*)p.out + (bh * p.Tq + first + warp * 16) * LOOM_D;
#pragma unroll
  for (int i = lane; i < 16 * LOOM_CH; i += 32) {
    const int r = i / LOOM_CH, c = i - r * LOOM_CH;
    if (first + warp * 16 + r < p.Tq) {
      *(uint4*)(O + r * LOOM_D + c * 8) = *(const uint4*)(smem + loom_sw(warp * 16 + r, c));
    }
  }
#endif
}
)";
  return src;
}

} // namespace

std::string attention_mma_kernel_source(const std::string& name, Dtype d, int D, int mask,
                                        bool sinks, int warps, int min_blocks) {
  return mma_source(name, d, D, mask, sinks, warps, false, min_blocks);
}

std::string attention_mma_stats_kernel_source(const std::string& name, Dtype d, int D, int mask,
                                              bool sinks) {
  return mma_source(name, d, D, mask, sinks, 4, true, 0);
}

// The backward's second pass (FlashAttention-2's): a block of four warps
// takes 64 keys of one key/value head, each warp 16 of them, and walks the
// query rows of every query head sharing them in tiles of LOOM_BM (64 for
// D = 64, 32 for D = 128: shared memory under 48 KiB). Per tile, with P
// recomputed from the first pass's statistics: S^T = K Q^T, P^T, dV += P^T dO,
// dP^T = V dO^T, dS^T = P^T (dP^T - delta) (0 where a mask removed the
// score), dK += dS^T Q in registers; dS^T goes through shared memory to
// dQ += dS K, added to a float buffer with atomics, while the next tile's
// Q, dO and statistics load. The warp's V rows stay in registers as the A
// operand. dK is scaled once at the end, dQ by the pass that rounds it.
std::string attention_mma_bwd_kernel_source(const std::string& name, Dtype d, int D, int mask,
                                            bool sinks) {
  (void)sinks; // the sinks' gradient comes from the first pass
  const std::string st = storage_type(d);
  std::string src = jit_prelude();
  src += "#define LOOM_D " + std::to_string(D) + "\n#define LOOM_BM " +
         std::to_string(D > 64 ? 32 : 64) + "\n";
  src += kParamsSource;
  src += R"(
#define LOOM_BN 64
#define LOOM_SCH (LOOM_BM / 8)
)";
  src += mma_helpers(d);
  src += R"(
// dS^T's rows (keys) of LOOM_BM elements, chunks swizzled as loom_sw's.
__device__ __forceinline__ int loom_sws(int r, int c) {
  return r * LOOM_BM + ((c ^ (r & (LOOM_SCH - 1))) << 3);
}
)";
  src += "extern \"C\" __global__ void __launch_bounds__(128) " + name +
         "(loom_attn_params p) {\n  typedef " + st + " T;\n";
  src += R"(
  __shared__ __align__(128) unsigned short smem[LOOM_BN * LOOM_D + 2 * LOOM_BM * LOOM_D +
                                                LOOM_BN * LOOM_BM];
  __shared__ float sst[3][LOOM_BM];
  unsigned short* const sk = smem;
  unsigned short* const sq = sk + LOOM_BN * LOOM_D;
  unsigned short* const sdo = sq + LOOM_BM * LOOM_D;
  unsigned short* const sds = sdo + LOOM_BM * LOOM_D;
  unsigned short* const sv = sq; // V passes through Q's and dO's tiles
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const long long Nk = p.Nq / p.groups;
  const long long bk = blockIdx.y;
  const long long b = bk / Nk, hk = bk - b * Nk;
  const long long j0 = (long long)blockIdx.x * LOOM_BN;
  const long long nrows = (long long)gridDim.y * p.groups * p.Tq;
  const float lowest = -3.402823466e38f;
  const float l2e = 1.4426950408889634f;
  const T* Kh = (const T*)p.k + bk * p.Tk * LOOM_D;
  const T* Vh = (const T*)p.v + bk * p.Tk * LOOM_D;
  for (int i = tid; i < LOOM_BN * LOOM_CH; i += 128) {
    const int r = i / LOOM_CH, c = i - r * LOOM_CH;
    const bool ok = j0 + r < p.Tk;
    loom_cp16(loom_smem(sk + loom_sw(r, c)),
              ok ? (const void*)(Kh + (j0 + r) * LOOM_D + c * 8) : (const void*)Kh, ok);
    loom_cp16(loom_smem(sv + loom_sw(r, c)),
              ok ? (const void*)(Vh + (j0 + r) * LOOM_D + c * 8) : (const void*)Vh, ok);
  }
  loom_commit();
  loom_wait<0>();
  __syncthreads();
  // The warp's 16 rows of V as A fragments (rows of dP^T = V dO^T).
  unsigned vf[LOOM_D / 16][4];
#pragma unroll
  for (int kb = 0; kb < LOOM_D / 16; ++kb) {
    const int r = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    loom_ldm(vf[kb], loom_smem(sv + loom_sw(r, kb * 2 + (lane >> 4))));
  }
  float dk[LOOM_CH][4], dv[LOOM_CH][4];
#pragma unroll
  for (int n = 0; n < LOOM_CH; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.0f;
  }
  // Causal: rows before j0 + Tq - Tk see none of these keys (P = 0), unless
  // Tq > Tk, where the first rows see no key at all and weigh all of them.
  long long istart = 0;
  if (p.causal && p.Tq <= p.Tk && j0 + p.Tq - p.Tk > 0) {
    istart = (j0 + p.Tq - p.Tk) / LOOM_BM * LOOM_BM;
  }
  const long long key0 = j0 + warp * 16 + g, key1 = key0 + 8;
  // The query tiles of every head of the group in turn (istart < Tq: at
  // least one per head); tile `it`'s Q, dO and statistics load while tile
  // it - 1 computes its dQ (the tiles' last reads are before that barrier).
  const long long tiles = (p.Tq - istart + LOOM_BM - 1) / LOOM_BM, total = p.groups * tiles;
  auto load_tile = [&](long long it) {
    const long long gi = it / tiles, i0 = istart + (it - gi * tiles) * LOOM_BM;
    const long long bh = b * p.Nq + hk * p.groups + gi;
    const T* Qh = (const T*)p.q + bh * p.Tq * LOOM_D;
    const T* dOh = (const T*)p.dout + bh * p.Tq * LOOM_D;
    for (int i = tid; i < LOOM_BM * LOOM_CH; i += 128) {
      const int r = i / LOOM_CH, c = i - r * LOOM_CH;
      const bool ok = i0 + r < p.Tq;
      loom_cp16(loom_smem(sq + loom_sw(r, c)),
                ok ? (const void*)(Qh + (i0 + r) * LOOM_D + c * 8) : (const void*)Qh, ok);
      loom_cp16(loom_smem(sdo + loom_sw(r, c)),
                ok ? (const void*)(dOh + (i0 + r) * LOOM_D + c * 8) : (const void*)dOh, ok);
    }
    loom_commit();
    if (tid < LOOM_BM) {
      const long long row = i0 + tid, at = bh * p.Tq + row;
      const bool ok = row < p.Tq;
      sst[0][tid] = ok ? p.stats[at] : 0.0f;
      sst[1][tid] = ok ? p.stats[nrows + at] : 0.0f;
      sst[2][tid] = ok ? p.stats[2 * nrows + at] : 0.0f;
    }
  };
  __syncthreads(); // every warp holds its V rows: the first tile goes there
  load_tile(0);
  for (long long it = 0; it < total; ++it) {
    const long long gi = it / tiles, i0 = istart + (it - gi * tiles) * LOOM_BM;
    const long long h = hk * p.groups + gi, bh = b * p.Nq + h;
    float* dQh = p.dq + bh * p.Tq * LOOM_D;
    loom_wait<0>();
    __syncthreads();
    // S^T (the warp's 16 keys by the tile's rows).
    float s[LOOM_BM / 8][4];
#pragma unroll
    for (int n = 0; n < LOOM_BM / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kb = 0; kb < LOOM_D / 16; kb += 2) {
      unsigned ka[4], kc[4];
      const int r = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
      loom_ldm(ka, loom_smem(sk + loom_sw(r, kb * 2 + (lane >> 4))));
      loom_ldm(kc, loom_smem(sk + loom_sw(r, kb * 2 + 2 + (lane >> 4))));
#pragma unroll
      for (int n = 0; n < LOOM_BM / 8; ++n) {
        unsigned bf[4];
        loom_ldm(bf, loom_smem(sq + loom_sw(n * 8 + (lane & 7), kb * 2 + (lane >> 3))));
        loom_mma(s[n], ka, bf[0], bf[1]);
        loom_mma(s[n], kc, bf[2], bf[3]);
      }
    }
    // P^T as the forward weighed: the same masking, in base 2.
    unsigned keep = 0;
#pragma unroll
    for (int n = 0; n < LOOM_BM / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const long long j = e < 2 ? key0 : key1;
        const int cl = n * 8 + 2 * t + (e & 1);
        const long long row = i0 + cl;
        bool kept = j < p.Tk && row < p.Tq;
)";
  if (mask == 0) {
    src += "        float sc = s[n][e] * (p.scale * l2e);\n";
  } else {
    src += "        float sc = s[n][e] * p.scale;\n";
    src +=
        "        if (kept) {\n"
        "          const long long mo = b * p.ms[0] + h * p.ms[1] + row * p.ms[2] + j * "
        "p.ms[3];\n";
    if (mask == 1) {
      src +=
          "          if (!((const unsigned char*)p.mask)[mo]) {\n"
          "            sc = lowest;\n            kept = false;\n          }\n";
    } else {
      src += "          sc += (float)loom_ld(((const T*)p.mask)[mo]);\n";
    }
    src += "        }\n        sc = sc == lowest ? lowest : sc * l2e;\n";
  }
  src += R"(
        if (p.causal && j > row + p.Tk - p.Tq) {
          sc = lowest;
          kept = false;
        }
        const float pr = loom_ex2((sc - sst[0][cl]) - sst[1][cl]);
        s[n][e] = j < p.Tk && row < p.Tq ? pr : 0.0f;
        keep |= kept ? 1u << (n * 4 + e) : 0u;
      }
    }
    // dV += P^T dO.
    {
      unsigned pf[LOOM_BM / 16][4];
#pragma unroll
      for (int n = 0; n < LOOM_BM / 8; ++n) {
        pf[n >> 1][(n & 1) * 2] = loom_pack(s[n][0], s[n][1]);
        pf[n >> 1][(n & 1) * 2 + 1] = loom_pack(s[n][2], s[n][3]);
      }
#pragma unroll
      for (int kk = 0; kk < LOOM_BM / 16; ++kk) {
#pragma unroll
        for (int n = 0; n < LOOM_CH; n += 2) {
          unsigned bf[4];
          loom_ldmt(bf, loom_smem(sdo + loom_sw(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                                n + (lane >> 4))));
          loom_mma(dv[n], pf[kk], bf[0], bf[1]);
          loom_mma(dv[n + 1], pf[kk], bf[2], bf[3]);
        }
      }
    }
    // dP^T = V dO^T, then dS^T in its place.
    float dp[LOOM_BM / 8][4];
#pragma unroll
    for (int n = 0; n < LOOM_BM / 8; ++n) dp[n][0] = dp[n][1] = dp[n][2] = dp[n][3] = 0.0f;
#pragma unroll
    for (int kb = 0; kb < LOOM_D / 16; kb += 2) {
#pragma unroll
      for (int n = 0; n < LOOM_BM / 8; ++n) {
        unsigned bf[4];
        loom_ldm(bf, loom_smem(sdo + loom_sw(n * 8 + (lane & 7), kb * 2 + (lane >> 3))));
        loom_mma(dp[n], vf[kb], bf[0], bf[1]);
        loom_mma(dp[n], vf[kb + 1], bf[2], bf[3]);
      }
    }
    unsigned df[LOOM_BM / 16][4];
#pragma unroll
    for (int n = 0; n < LOOM_BM / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int cl = n * 8 + 2 * t + (e & 1);
        dp[n][e] = (keep >> (n * 4 + e)) & 1u ? s[n][e] * (dp[n][e] - sst[2][cl]) : 0.0f;
      }
      df[n >> 1][(n & 1) * 2] = loom_pack(dp[n][0], dp[n][1]);
      df[n >> 1][(n & 1) * 2 + 1] = loom_pack(dp[n][2], dp[n][3]);
    }
    // dK += dS^T Q.
#pragma unroll
    for (int kk = 0; kk < LOOM_BM / 16; ++kk) {
#pragma unroll
      for (int n = 0; n < LOOM_CH; n += 2) {
        unsigned bf[4];
        loom_ldmt(bf, loom_smem(sq + loom_sw(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                             n + (lane >> 4))));
        loom_mma(dk[n], df[kk], bf[0], bf[1]);
        loom_mma(dk[n + 1], df[kk], bf[2], bf[3]);
      }
    }
    // dS^T to shared memory for dQ += dS K.
    {
      const int r0 = warp * 16 + g;
#pragma unroll
      for (int n = 0; n < LOOM_BM / 8; ++n) {
        *(unsigned*)(sds + loom_sws(r0, n) + 2 * t) = df[n >> 1][(n & 1) * 2];
        *(unsigned*)(sds + loom_sws(r0 + 8, n) + 2 * t) = df[n >> 1][(n & 1) * 2 + 1];
      }
    }
    __syncthreads();
    if (it + 1 < total) load_tile(it + 1);
    {
      // Warp w: 16 rows (m tile w mod LOOM_BM / 16) and its share of the
      // columns; A = dS read transposed from dS^T, B = K.
      constexpr int MT = LOOM_BM / 16, NPER = LOOM_CH * MT / 4;
      const int mt = warp % MT, nlo = (warp / MT) * NPER;
      unsigned af[LOOM_BN / 16][4];
#pragma unroll
      for (int kk = 0; kk < LOOM_BN / 16; ++kk) {
        loom_ldmt(af[kk], loom_smem(sds + loom_sws(kk * 16 + (lane & 7) + ((lane >> 4) & 1) * 8,
                                                   mt * 2 + ((lane >> 3) & 1))));
      }
      const long long qa = i0 + mt * 16 + g, qb = qa + 8;
#pragma unroll
      for (int n = nlo; n < nlo + NPER; n += 2) {
        float a0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, a1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int kk = 0; kk < LOOM_BN / 16; ++kk) {
          unsigned bf[4];
          loom_ldmt(bf, loom_smem(sk + loom_sw(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                               n + (lane >> 4))));
          loom_mma(a0, af[kk], bf[0], bf[1]);
          loom_mma(a1, af[kk], bf[2], bf[3]);
        }
        const int c0 = n * 8 + 2 * t, c1 = c0 + 8;
        if (qa < p.Tq) {
          float* dst = dQh + qa * LOOM_D;
          atomicAdd(dst + c0, a0[0]);
          atomicAdd(dst + c0 + 1, a0[1]);
          atomicAdd(dst + c1, a1[0]);
          atomicAdd(dst + c1 + 1, a1[1]);
        }
        if (qb < p.Tq) {
          float* dst = dQh + qb * LOOM_D;
          atomicAdd(dst + c0, a0[2]);
          atomicAdd(dst + c0 + 1, a0[3]);
          atomicAdd(dst + c1, a1[2]);
          atomicAdd(dst + c1 + 1, a1[3]);
        }
      }
    }
  }
  T* dK = (T*)p.dk + bk * p.Tk * LOOM_D;
  T* dV = (T*)p.dv + bk * p.Tk * LOOM_D;
#pragma unroll
  for (int n = 0; n < LOOM_CH; ++n) {
    const int c = n * 8 + 2 * t;
    if (key0 < p.Tk) {
      *(unsigned*)(dK + key0 * LOOM_D + c) = loom_pack(dk[n][0] * p.scale, dk[n][1] * p.scale);
      *(unsigned*)(dV + key0 * LOOM_D + c) = loom_pack(dv[n][0], dv[n][1]);
    }
    if (key1 < p.Tk) {
      *(unsigned*)(dK + key1 * LOOM_D + c) = loom_pack(dk[n][2] * p.scale, dk[n][3] * p.scale);
      *(unsigned*)(dV + key1 * LOOM_D + c) = loom_pack(dv[n][2], dv[n][3]);
    }
  }
}
)";
  return src;
}

// The backward's last pass: dQ (float, unscaled) rounded to the output type
// with the scale; the first `heads` threads also round the sinks' gradients.
std::string attention_bwd_finish_kernel_source(const std::string& name, Dtype d) {
  std::string src = jit_prelude();
  src += "extern \"C\" __global__ void " + name + "(const float* dq, " + storage_type(d) +
         "* out, long long n, float scale, const float* dsink, " + storage_type(d) +
         "* dsink_out, int heads) {\n";
  src += R"(
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (long long i = first; i < n; i += (long long)gridDim.x * blockDim.x) {
    loom_st(out + i, dq[i] * scale);
  }
  if (dsink != 0 && first < heads) loom_st(dsink_out + first, dsink[first]);
}
)";
  return src;
}

namespace {

// The tensor-core kernel's conditions: half types, D == Dv in {64, 128}, unit
// inner strides and rows of whole 16-byte chunks (cp.async), LOOM_CUDA_ATTN_SIMT
// unset.
// Warps per block of the tensor-core kernel (16 query rows each): 4 or 8
// (LOOM_CUDA_ATTN_WARPS; 4 by default: two blocks per multiprocessor, 8-9%
// faster on an H200 than one block of 8 warps).
int mma_warps() {
  static const int w = [] {
    const char* e = std::getenv("LOOM_CUDA_ATTN_WARPS");
    return e != nullptr && std::string(e) == "8" ? 8 : 4;
  }();
  return w;
}

// Blocks per multiprocessor the tensor-core forward is built for
// (LOOM_CUDA_ATTN_MIN_BLOCKS, 1 to 4; unset: ptxas's choice). ptxas (CUDA 13,
// sm_90, four warps): D 128 takes 242 registers (two blocks of four warps
// per multiprocessor), 168 with 3 (8 bytes spilled); D 64 196, 167 with 3
// (none spilled). An experiment for the device: not yet timed.
int mma_min_blocks() {
  static const int b = [] {
    const char* e = std::getenv("LOOM_CUDA_ATTN_MIN_BLOCKS");
    const int v = e != nullptr ? std::atoi(e) : 0;
    return v >= 1 && v <= 4 ? v : 0;
  }();
  return b;
}

bool mma_eligible(const array& q, const array& k, const array& v, Dtype d, int D, int Dv,
                  const AttnParams& p) {
  static const bool simt = [] {
    const char* e = std::getenv("LOOM_CUDA_ATTN_SIMT");
    return e != nullptr && e[0] != '\0' && e[0] != '0';
  }();
  if (simt || !(d == float16 || d == bfloat16) || D != Dv || (D != 64 && D != 128)) return false;
  for (const array* a : {&q, &k, &v}) {
    if (a->strides(3) != 1) return false;
    for (int i = 0; i < 3; ++i) {
      if (a->strides(i) % 8 != 0) return false;
    }
  }
  for (const void* ptr : {p.q, p.k, p.v, static_cast<const void*>(p.out)}) {
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return false;
  }
  return true;
}

bool attention_kernel(Primitive& prim, const std::vector<array>& inputs,
                      std::vector<array>& outputs, cudaStream_t s) {
  const auto st = prim.state();
  const std::string mode = state_get<std::string>(st, "ScaledDotProductAttention", "mask_mode");
  const bool has_sinks = state_get<bool>(st, "ScaledDotProductAttention", "has_sinks");
  const float scale = state_get<float>(st, "ScaledDotProductAttention", "scale");
  const array& q = inputs[0];
  const array& k = inputs[1];
  const array& v = inputs[2];
  array& out = outputs[0];
  const Dtype d = q.dtype();
  if (!(d == float32 || d == float16 || d == bfloat16) || out.dtype() != d) return false;
  const int D = q.shape(3), Dv = v.shape(3);
  if (D == 0 || Dv == 0 || D % kThreadsPerRow != 0 || Dv % kThreadsPerRow != 0 || D > 256 ||
      Dv > 256) {
    return false;
  }
  size_t next = 3;
  const array* mask = mode == "array" ? &inputs[next++] : nullptr;
  const array* sinks = has_sinks ? &inputs[next++] : nullptr;
  if (mask && (mask->ndim() != 4 || (mask->dtype() != bool_ && mask->dtype() != d))) return false;
  if (q.shape(0) * q.shape(1) > 65535) return false; // grid y
  AttnParams p{};
  p.Nq = q.shape(1);
  p.Tq = q.shape(2);
  p.Tk = k.shape(2);
  p.groups = q.shape(1) / k.shape(1);
  for (int i = 0; i < 4; ++i) {
    p.qs[i] = q.strides(i);
    p.ks[i] = k.strides(i);
    p.vs[i] = v.strides(i);
    p.ms[i] = mask ? mask->strides(i) : 0;
  }
  p.scale = scale;
  p.causal = mode == "causal";
  void* o = alloc_output(out);
  if (out.size() == 0) return true;
  if (p.Tk == 0) return false; // no key: the CPU's conventions
  p.q = device_data(q, s);
  p.k = device_data(k, s);
  p.v = device_data(v, s);
  p.mask = mask ? device_data(*mask, s) : nullptr;
  p.sinks = sinks ? device_data(*sinks, s) : nullptr;
  p.out = o;
  const int mask_kind = mask == nullptr ? 0 : mask->dtype() == bool_ ? 1 : 2;
  if (mma_eligible(q, k, v, d, D, Dv, p)) {
    const int warps = mma_warps();
    const int min_blocks = mma_min_blocks();
    std::string name = "loom_attention_mma_" + std::to_string(static_cast<int>(d.val)) + "_" +
                       std::to_string(D) + "_" + std::to_string(mask_kind) +
                       (has_sinks ? "_s" : "") + "_w" + std::to_string(warps) +
                       (min_blocks > 0 ? "_b" + std::to_string(min_blocks) : "");
    cudaKernel_t kern = jit_kernel(name, [&] {
      return attention_mma_kernel_source(name, d, D, mask_kind, has_sinks, warps, min_blocks);
    });
    void* args[] = {&p};
    const int rows = 16 * warps;
    dim3 grid(static_cast<unsigned>((p.Tq + rows - 1) / rows),
              static_cast<unsigned>(q.shape(0) * q.shape(1)));
    check(cudaLaunchKernel(reinterpret_cast<const void*>(kern), grid, dim3(32 * warps), args, 0, s),
          "cudaLaunchKernel (scaled_dot_product_attention, tensor cores)");
    return true;
  }
  std::string name = "loom_attention_" + std::to_string(static_cast<int>(d.val)) + "_" +
                     std::to_string(D) + "_" + std::to_string(Dv) + "_" +
                     std::to_string(mask_kind) + (has_sinks ? "_s" : "");
  cudaKernel_t kern = jit_kernel(
      name, [&] { return attention_kernel_source(name, d, D, Dv, mask_kind, has_sinks); });
  void* args[] = {&p};
  dim3 grid(static_cast<unsigned>((p.Tq + kRows - 1) / kRows),
            static_cast<unsigned>(q.shape(0) * q.shape(1)));
  check(cudaLaunchKernel(reinterpret_cast<const void*>(kern), grid, dim3(kRows * kThreadsPerRow),
                         args, 0, s),
        "cudaLaunchKernel (scaled_dot_product_attention)");
  return true;
}

// The fused backward (ScaledDotProductAttentionVJP) on the tensor cores: the
// forward kernel's conditions (half types, D == Dv of 64 or 128), inputs made
// row-major. Three passes: the statistics per query row (the forward's
// scores again, without V), dK and dV per block of keys (dQ added into a
// float buffer), dQ rounded. Elsewhere the CPU's fused backward runs.
bool attention_vjp_kernel(Primitive& prim, const std::vector<array>& inputs,
                          std::vector<array>& outputs, cudaStream_t s) {
  const auto st = prim.state();
  const char* who = "ScaledDotProductAttentionVJP";
  const std::string mode = state_get<std::string>(st, who, "mask_mode");
  const bool has_sinks = state_get<bool>(st, who, "has_sinks");
  const float scale = state_get<float>(st, who, "scale");
  const size_t n_in = inputs.size();
  const array& q = inputs[0];
  const array& k = inputs[1];
  const array& v = inputs[2];
  const array& o = inputs[n_in - 2];
  const array& dout = inputs[n_in - 1];
  size_t next = 3;
  const array* mask = mode == "array" ? &inputs[next++] : nullptr;
  const array* sinks = has_sinks ? &inputs[next++] : nullptr;
  const Dtype d = q.dtype();
  if (!(d == float16 || d == bfloat16)) return false;
  for (const array* a : {&k, &v, &o, &dout}) {
    if (a->dtype() != d || a->ndim() != 4) return false;
  }
  if (sinks && sinks->dtype() != d) return false;
  for (const array& out : outputs) {
    if (out.dtype() != d) return false;
  }
  const int D = q.shape(3);
  if (v.shape(3) != D || (D != 64 && D != 128)) return false;
  if (o.shape() != q.shape() || dout.shape() != q.shape()) return false;
  if (mask && (mask->ndim() != 4 || (mask->dtype() != bool_ && mask->dtype() != d))) return false;
  const long long B = q.shape(0), Nq = q.shape(1), Nk = k.shape(1), Tq = q.shape(2),
                  Tk = k.shape(2);
  if (Tq == 0 || Tk == 0 || B == 0 || Nq == 0) return false; // the CPU's conventions
  if (B * Nq > 65535) return false;                          // grid y

  auto& pool = device_pool(current_device());
  allocator::Buffer tmp[5];
  const void* ptr[5];
  const array* dense[5] = {&q, &k, &v, &o, &dout};
  bool aligned = true;
  for (int i = 0; i < 5; ++i) {
    ptr[i] = dense_data(*dense[i], tmp[i], s);
    aligned &= reinterpret_cast<uintptr_t>(ptr[i]) % 16 == 0;
  }
  auto release = [&] {
    for (auto& b : tmp) {
      if (b.ptr != nullptr) pool.free(b);
    }
  };
  if (!aligned) {
    release();
    return false;
  }
  void* dq = alloc_output(outputs[0]);
  void* dk = alloc_output(outputs[1]);
  void* dv = alloc_output(outputs[2]);
  void* dsink = has_sinks ? alloc_output(outputs[3]) : nullptr;
  const long long rows = B * Nq * Tq;
  allocator::Buffer stats = pool.malloc(static_cast<size_t>(3 * rows) * sizeof(float));
  allocator::Buffer dq_acc =
      pool.malloc(static_cast<size_t>(rows * D + (has_sinks ? Nq : 0)) * sizeof(float));
  flush_launches(s);
  check(cudaMemsetAsync(dq_acc.ptr, 0,
                        static_cast<size_t>(rows * D + (has_sinks ? Nq : 0)) * sizeof(float), s),
        "cudaMemsetAsync (attention backward)");

  AttnParams p{};
  p.q = ptr[0];
  p.k = ptr[1];
  p.v = ptr[2];
  p.o = ptr[3];
  p.dout = ptr[4];
  p.mask = mask ? device_data(*mask, s) : nullptr;
  p.sinks = sinks ? device_data(*sinks, s) : nullptr;
  p.Nq = Nq;
  p.Tq = Tq;
  p.Tk = Tk;
  p.groups = Nq / Nk;
  const long long qs[4] = {Nq * Tq * D, Tq * D, D, 1}, ks[4] = {Nk * Tk * D, Tk * D, D, 1};
  for (int i = 0; i < 4; ++i) {
    p.qs[i] = qs[i];
    p.ks[i] = ks[i];
    p.vs[i] = ks[i];
    p.ms[i] = mask ? mask->strides(i) : 0;
  }
  p.scale = scale;
  p.causal = mode == "causal";
  p.stats = static_cast<float*>(stats.ptr);
  p.dq = static_cast<float*>(dq_acc.ptr);
  p.dk = dk;
  p.dv = dv;
  p.dsink = has_sinks ? p.dq + rows * D : nullptr;
  const int mask_kind = mask == nullptr ? 0 : mask->dtype() == bool_ ? 1 : 2;
  const std::string tag = std::to_string(static_cast<int>(d.val)) + "_" + std::to_string(D) + "_" +
                          std::to_string(mask_kind) + (has_sinks ? "_s" : "");
  void* args[] = {&p};

  const std::string stats_name = "loom_attention_stats_" + tag;
  cudaKernel_t k1 = jit_kernel(stats_name, [&] {
    return attention_mma_stats_kernel_source(stats_name, d, D, mask_kind, has_sinks);
  });
  launch_kernel(k1, dim3(static_cast<unsigned>((Tq + 63) / 64), static_cast<unsigned>(B * Nq)),
                dim3(128), args, 0, s, "cudaLaunchKernel (attention backward, statistics)");

  const std::string bwd_name = "loom_attention_bwd_" + tag;
  cudaKernel_t k2 = jit_kernel(bwd_name, [&] {
    return attention_mma_bwd_kernel_source(bwd_name, d, D, mask_kind, has_sinks);
  });
  launch_kernel(k2, dim3(static_cast<unsigned>((Tk + 63) / 64), static_cast<unsigned>(B * Nk)),
                dim3(128), args, 0, s, "cudaLaunchKernel (attention backward)");

  const std::string fin_name =
      "loom_attention_bwd_finish_" + std::to_string(static_cast<int>(d.val));
  cudaKernel_t k3 =
      jit_kernel(fin_name, [&] { return attention_bwd_finish_kernel_source(fin_name, d); });
  const float* acc = p.dq;
  long long n = rows * D;
  const float* dsink_acc = p.dsink;
  int heads = static_cast<int>(Nq);
  void* fargs[] = {&acc, &dq, &n, &p.scale, &dsink_acc, &dsink, &heads};
  const long long blocks = std::min<long long>((n + 255) / 256, 4096);
  launch_kernel(k3, dim3(static_cast<unsigned>(blocks)), dim3(256), fargs, 0, s,
                "cudaLaunchKernel (attention backward, dq)");
  // Stream-ordered frees: after the kernels above.
  pool.free(stats);
  pool.free(dq_acc);
  release();
  return true;
}

struct Registration {
  Registration() {
    register_kernel(typeid(ScaledDotProductAttention), &attention_kernel);
    register_kernel(typeid(ScaledDotProductAttentionVJP), &attention_vjp_kernel);
  }
} registration;

} // namespace
} // namespace loom::cuda
