// mx.fast.scaled_dot_product_attention on the GPU: a tiled kernel with an
// online softmax (scores never stored). A block takes 64 query rows of one
// head, four threads per row each holding a quarter of the row's q and of its
// output accumulator in registers; tiles of keys and values are staged in
// shared memory and read by every row of the block. Scores, the softmax and
// the accumulation are in float (float16/bfloat16 rounded once at the end);
// float64 and head sizes that are not a multiple of four (or over 256) take
// the CPU. Masks as on the CPU: a false boolean or causal entry scores the
// lowest finite value (a row with every key masked weighs them equally), an
// additive mask adds, a sink joins each row's softmax denominator.
#include <string>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"
#include "loom/primitives/fast.h"

namespace loom::cuda {

namespace {

constexpr int kRows = 64; // query rows per block
constexpr int kThreadsPerRow = 4;

// The kernels' loom_attn_params, byte for byte.
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
};

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
  src += R"(
struct loom_attn_params {
  const void* q; const void* k; const void* v; void* out; const void* mask; const void* sinks;
  long long Nq, Tq, Tk, groups;
  long long qs[4], ks[4], vs[4], ms[4];
  float scale;
  int causal;
};
)";
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

namespace {

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

struct Registration {
  Registration() { register_kernel(typeid(ScaledDotProductAttention), &attention_kernel); }
} registration;

} // namespace
} // namespace loom::cuda
