// mx.fast gated delta update (the gated delta rule's recurrence over time)
// on the GPU. Each row i of a head's state S (Dv x Dk) evolves on its own:
// S_i <- S_i * g; S_i <- S_i + (v_i - S_i . k) * beta * k; y_i = S_i . q. So
// one warp carries one row through all time steps, its Dk entries in the
// lanes' registers (Dk / 32 each), the two dot products reduced by shuffles.
// The CPU kernel's steps in its order; a masked step writes y = 0 and leaves
// the state. float32 state, q/k/v/g/beta in float32/float16/bfloat16 read as
// float; Dk up to 256. The backward recurrence stays on the CPU.
#include <algorithm>
#include <string>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"
#include "loom/primitives/fast.h"

namespace loom::cuda {

namespace {

std::string delta_rule_source(const std::string& name, Dtype d, int per_lane, bool per_key,
                              bool mask) {
  std::string src = jit_prelude();
  src += "typedef " + std::string(storage_type(d)) + " T;\n#define LPL " +
         std::to_string(per_lane) + "\n#define PER_KEY " + (per_key ? "1" : "0") +
         "\n#define HAS_MASK " + (mask ? "1" : "0") + "\n";
  src += R"(
__device__ __forceinline__ float loom_warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
extern "C" __global__ void NAME(const T* __restrict__ q, const T* __restrict__ k,
                                const T* __restrict__ v, const T* __restrict__ g,
                                const T* __restrict__ beta, const float* __restrict__ s0,
                                const bool* __restrict__ mask, T* __restrict__ y,
                                float* __restrict__ sf, long long B, long long Tn, long long Hk,
                                long long Hv, long long Dv, long long Dk) {
  const long long wid = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (wid >= B * Hv * Dv) return;
  const int lane = threadIdx.x & 31;
  const long long i = wid % Dv, bh = wid / Dv, b = bh / Hv, h = bh % Hv, hk = h / (Hv / Hk);
  float S[LPL];
  const float* srow = s0 + (bh * Dv + i) * Dk;
#pragma unroll
  for (int e = 0; e < LPL; ++e) {
    const long long j = lane + 32 * e;
    S[e] = j < Dk ? srow[j] : 0.0f;
  }
  for (long long t = 0; t < Tn; ++t) {
    const long long bt = b * Tn + t;
    T* yt = y + (bt * Hv + h) * Dv + i;
#if HAS_MASK
    if (!mask[bt]) {
      if (lane == 0) loom_st(yt, 0.0f);
      continue;
    }
#endif
    const T* kt = k + (bt * Hk + hk) * Dk;
    const T* qt = q + (bt * Hk + hk) * Dk;
    const T* gt = g + (bt * Hv + h) * (PER_KEY ? Dk : 1);
    float kk[LPL];
    float dot = 0.0f;
#pragma unroll
    for (int e = 0; e < LPL; ++e) {
      const long long j = lane + 32 * e;
      kk[e] = j < Dk ? (float)loom_ld(kt[j]) : 0.0f;
      const float gate = PER_KEY ? (j < Dk ? (float)loom_ld(gt[j]) : 0.0f) : (float)loom_ld(gt[0]);
      S[e] = S[e] * gate;
      dot += S[e] * kk[e];
    }
    dot = loom_warp_sum(dot);
    const float delta = ((float)loom_ld(v[(bt * Hv + h) * Dv + i]) - dot) *
                        (float)loom_ld(beta[bt * Hv + h]);
    float out = 0.0f;
#pragma unroll
    for (int e = 0; e < LPL; ++e) {
      const long long j = lane + 32 * e;
      S[e] = S[e] + delta * kk[e];
      out += j < Dk ? S[e] * (float)loom_ld(qt[j]) : 0.0f;
    }
    out = loom_warp_sum(out);
    if (lane == 0) loom_st(yt, out);
  }
  float* frow = sf + (bh * Dv + i) * Dk;
#pragma unroll
  for (int e = 0; e < LPL; ++e) {
    const long long j = lane + 32 * e;
    if (j < Dk) frow[j] = S[e];
  }
}
)";
  size_t pos = src.find("void NAME(");
  src.replace(pos + 5, 4, name);
  return src;
}

bool delta_rule_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                       cudaStream_t s) {
  const bool has_mask = state_get<bool>(p.state(), p.name(), "has_mask");
  if (inputs.size() != (has_mask ? 7u : 6u) || outputs.size() != 2) return false;
  const array &q = inputs[0], &k = inputs[1], &v = inputs[2], &g = inputs[3], &beta = inputs[4];
  const array& state = inputs[5];
  array &y = outputs[0], &sf = outputs[1];
  const Dtype d = y.dtype();
  if (d != float32 && d != float16 && d != bfloat16) return false;
  for (const array* a : {&q, &k, &v, &g, &beta}) {
    if (a->dtype() != d) return false;
  }
  if (state.dtype() != float32 || sf.dtype() != float32) return false;
  if (has_mask && inputs[6].dtype() != bool_) return false;
  if (q.ndim() != 4 || v.ndim() != 4) return false;
  long long B = q.shape(0), Tn = q.shape(1), Hk = q.shape(2), Dk = q.shape(3);
  long long Hv = v.shape(2), Dv = v.shape(3);
  const bool per_key = g.ndim() == 4;
  if (Dk > 256 || Hk == 0 || Hv % Hk != 0) return false;
  // With no keys the state is empty and no warp would write y, which the CPU
  // fills with zeros.
  if (Dk == 0) return false;
  // One warp per state row, eight to a block: the blocks must fit in grid.x.
  const long long warps = B * Hv * Dv;
  if ((warps + 7) / 8 > 0x7fffffffLL) return false;
  void* yp = alloc_output(y);
  void* sp = alloc_output(sf);
  if (sf.size() == 0) return true;
  const int lpl = static_cast<int>(std::max<long long>(1, (Dk + 31) / 32));
  const std::string name = "loom_delta_rule_" + std::to_string(static_cast<int>(d.val)) + "_" +
                           std::to_string(lpl) + (per_key ? "_k" : "_h") + (has_mask ? "_m" : "");
  cudaKernel_t kern =
      jit_kernel(name, [&] { return delta_rule_source(name, d, lpl, per_key, has_mask); });
  allocator::Buffer t[7] = {};
  const void* qp = dense_data(q, t[0], s);
  const void* kp = dense_data(k, t[1], s);
  const void* vp = dense_data(v, t[2], s);
  const void* gp = dense_data(g, t[3], s);
  const void* bp = dense_data(beta, t[4], s);
  const void* s0 = dense_data(state, t[5], s);
  const void* mp = has_mask ? dense_data(inputs[6], t[6], s) : nullptr;
  void* args[] = {&qp, &kp, &vp, &gp, &bp, &s0, &mp, &yp, &sp, &B, &Tn, &Hk, &Hv, &Dv, &Dk};
  check(cudaLaunchKernel(reinterpret_cast<const void*>(kern),
                         dim3(static_cast<unsigned>((warps + 7) / 8)), dim3(256), args, 0, s),
        "cudaLaunchKernel (gated_delta_update)");
  for (auto& b : t)
    if (b.ptr != nullptr) device_pool(current_device()).free(b);
  return true;
}

struct Registration {
  Registration() { register_kernel(typeid(GatedDeltaUpdate), &delta_rule_kernel); }
} registration;

} // namespace

std::string delta_rule_kernel_source(const std::string& name, Dtype d, int per_lane, bool per_key,
                                     bool mask) {
  return delta_rule_source(name, d, per_lane, per_key, mask);
}

} // namespace loom::cuda
