// Affine quantized matrices on the GPU: Dequantize and QuantizedMatmul for
// codes of 2 to 8 bits (one LSB-first bit stream per row in uint32 words,
// w = scale * q + bias per group), float32/float16/bfloat16.
//
// QuantizedMatmul against w^T (the layers of a language model) gives each
// output element one warp: the lanes walk the row of codes eight at a time,
// coalesced, and fold the group's scale and bias in once per eight codes
// through  sum_j (s q_j + b) x_j = s (q . x) + b (sum_j x_j),  so a decode
// step reads the packed codes once and never materialises the float weight.
// Rows of x share a block's codes through L1/L2 (few rows is the case this
// is for). w as is (transpose=false) takes one thread per output element.
// Dequantize rounds as the CPU does: the product to the scales' dtype, then
// the sum. GatherQMM (mixture-of-experts layers) against w^T runs the
// matrix-vector kernel per gathered pair. Other modes (mxfp4/mxfp8/nvfp4),
// QuantizedMatmul with batched w and GatherQMM with w as is stay on the CPU.
// Quantize (affine, 1-8 bits) runs one thread per group with the CPU
// kernel's arithmetic, so codes, scales and biases are the CPU's bit for bit.
#include "loom/primitives/quantized.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/gemm_util.h"
#include "loom/backend/cuda/jit.h"

namespace loom::cuda {

namespace {

// Rows of x up to which the warp-per-output kernel beats dequantize + GEMM
// (4096x4096 4-bit on an H200: 0.035 ms at 1 row, 0.099 at 8, 0.70 at 64).
constexpr long long kFusedRows = 16;

std::string quantized_source(const std::string& name, Dtype d, Dtype out, int bits) {
  std::string src = jit_prelude();
  src += "typedef " + std::string(storage_type(d)) + " T;\ntypedef " + storage_type(out) +
         " OT;\n#define BITS " + std::to_string(bits) + "\n";
  src += R"(
#define LOOM_MASK ((1u << BITS) - 1u)
// Code `i` of a row's bit stream.
__device__ __forceinline__ unsigned loom_code(const unsigned* __restrict__ row, long long i) {
  const long long pos = i * BITS;
  const unsigned sh = (unsigned)(pos & 31);
  unsigned v = row[pos >> 5] >> sh;
  if (sh + BITS > 32) v |= row[(pos >> 5) + 1] << (32 - sh);
  return v & LOOM_MASK;
}
// Codes 8c .. 8c+7 of a row (they start on a byte boundary).
__device__ __forceinline__ void loom_codes8(const unsigned* __restrict__ row, long long c,
                                            unsigned* q) {
#if BITS == 4
  const unsigned u = row[c];
  for (int j = 0; j < 8; ++j) q[j] = (u >> (4 * j)) & 15u;
#elif BITS == 8
  const unsigned u0 = row[2 * c], u1 = row[2 * c + 1];
  for (int j = 0; j < 4; ++j) { q[j] = (u0 >> (8 * j)) & 255u; q[j + 4] = (u1 >> (8 * j)) & 255u; }
#elif BITS == 2
  const unsigned u = row[c >> 1] >> ((c & 1) * 16);
  for (int j = 0; j < 8; ++j) q[j] = (u >> (2 * j)) & 3u;
#else
  const unsigned char* b = (const unsigned char*)row + BITS * c;
  unsigned long long v = 0;
  for (int i = 0; i < BITS; ++i) v |= (unsigned long long)b[i] << (8 * i);
  for (int j = 0; j < 8; ++j) q[j] = (unsigned)(v >> (BITS * j)) & LOOM_MASK;
#endif
}
__device__ __forceinline__ float loom_round_T(float v) { T t; loom_st(&t, v); return (float)loom_ld(t); }

// out (M, N) = x (M, K) . dequantize(w (N, K))^T; one warp per output element.
extern "C" __global__ void NAME_qmv(const T* __restrict__ x, const unsigned* __restrict__ w,
                                    const T* __restrict__ sc, const T* __restrict__ bi,
                                    T* __restrict__ out, long long M, long long N, long long K,
                                    int gs) {
  const int lane = threadIdx.x & 31;
  const long long n = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (n >= N) return;
  const long long groups = K / gs;
  const unsigned* wr = w + n * (K * BITS / 32);
  for (long long m = blockIdx.y; m < M; m += gridDim.y) {
    const T* xr = x + m * K;
    float acc = 0.0f;
    for (long long c = lane; c * 8 < K; c += 32) {
      const long long k = c * 8;
      unsigned q[8];
      loom_codes8(wr, c, q);
      float qx = 0.0f, sx = 0.0f;
      for (int j = 0; j < 8; ++j) {
        const float xv = (float)loom_ld(xr[k + j]);
        qx += (float)q[j] * xv;
        sx += xv;
      }
      const long long g = n * groups + k / gs;
      acc += (float)loom_ld(sc[g]) * qx + (float)loom_ld(bi[g]) * sx;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0) loom_st(out + m * N + n, acc);
  }
}
// out (M, N) = x (M, K) . dequantize(w (K, N)); one thread per output element.
extern "C" __global__ void NAME_qmm(const T* __restrict__ x, const unsigned* __restrict__ w,
                                    const T* __restrict__ sc, const T* __restrict__ bi,
                                    T* __restrict__ out, long long M, long long N, long long K,
                                    int gs) {
  const long long groups = N / gs, words = N * BITS / 32;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < M * N;
       e += (long long)gridDim.x * blockDim.x) {
    const long long m = e / N, n = e % N;
    const T* xr = x + m * K;
    float acc = 0.0f;
    for (long long k = 0; k < K; ++k) {
      const long long g = k * groups + n / gs;
      const float wv = (float)loom_code(w + k * words, n) * (float)loom_ld(sc[g]) + (float)loom_ld(bi[g]);
      acc += (float)loom_ld(xr[k]) * wv;
    }
    loom_st(out + e, acc);
  }
}
// Quantize, affine: one thread per group, the CPU kernel's arithmetic step
// for step (min/max ignoring NaN as std::min/std::max do, the larger edge
// put exactly on a code, round half to even, clamp), codes packed LSB first.
extern "C" __global__ void NAME_quant(const T* __restrict__ w, unsigned* __restrict__ codes,
                                      T* __restrict__ scales, T* __restrict__ biases,
                                      long long groups, int gs) {
  const float n_bins = (float)((1u << BITS) - 1u);
  const float eps = 1e-7f;
  for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < groups;
       g += (long long)gridDim.x * blockDim.x) {
    const T* x = w + g * gs;
    float w_max = -__int_as_float(0x7f800000), w_min = __int_as_float(0x7f800000);
    for (int j = 0; j < gs; ++j) {
      const float v = (float)loom_ld(x[j]);
      w_max = w_max < v ? v : w_max;
      w_min = v < w_min ? v : w_min;
    }
    float scale, bias;
    float range = (w_max - w_min) / n_bins;
    range = range < eps ? eps : range;
    if (BITS == 1) {
      scale = range;
      bias = w_min;
    } else {
      const bool mask = fabsf(w_min) > fabsf(w_max);
      scale = mask ? range : -range;
      const float edge = mask ? w_min : w_max;
      const float q0 = rintf(edge / scale);
      bias = 0.0f;
      if (q0 != 0.0f) {
        scale = edge / q0;
        bias = edge;
      }
    }
    unsigned* out = codes + g * ((long long)gs * BITS / 32);
    unsigned long long acc = 0;
    int filled = 0;
    for (int j = 0; j < gs; ++j) {
      float q = rintf(((float)loom_ld(x[j]) - bias) / scale);
      q = q < 0.0f ? 0.0f : q;
      q = n_bins < q ? n_bins : q;
      if (q != q) q = 0.0f;
      acc |= (unsigned long long)(unsigned)q << filled;
      filled += BITS;
      if (filled >= 32) {
        *out++ = (unsigned)acc;
        acc >>= 32;
        filled -= 32;
      }
    }
    loom_st(scales + g, scale);
    loom_st(biases + g, bias);
  }
}
// GatherQMM against w^T (mixture-of-experts layers): output p is
// x[lhs[p]] . dequantize(w[rhs[p]])^T, blockIdx.z = p, as NAME_qmv per matrix.
// Out-of-range pairs write nothing and raise the flag (read after the launch).
extern "C" __global__ void NAME_gqmv(const T* __restrict__ x, const unsigned* __restrict__ w,
                                     const T* __restrict__ sc, const T* __restrict__ bi,
                                     T* __restrict__ out, const unsigned* __restrict__ lhs,
                                     const unsigned* __restrict__ rhs, long long M, long long N,
                                     long long K, int gs, long long bx, long long bw,
                                     int* __restrict__ bad) {
  const long long p = blockIdx.z;
  const unsigned l = lhs[p], r = rhs[p];
  if (l >= bx || r >= bw) {
    if (threadIdx.x == 0) *(volatile int*)bad = 1;
    return;
  }
  const int lane = threadIdx.x & 31;
  const long long n = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (n >= N) return;
  const long long groups = K / gs;
  const unsigned* wr = w + (r * N + n) * (K * BITS / 32);
  const T* scr = sc + (r * N + n) * groups;
  const T* bir = bi + (r * N + n) * groups;
  for (long long m = blockIdx.y; m < M; m += gridDim.y) {
    const T* xr = x + (l * M + m) * K;
    float acc = 0.0f;
    for (long long c = lane; c * 8 < K; c += 32) {
      const long long k = c * 8;
      unsigned q[8];
      loom_codes8(wr, c, q);
      float qx = 0.0f, sx = 0.0f;
      for (int j = 0; j < 8; ++j) {
        const float xv = (float)loom_ld(xr[k + j]);
        qx += (float)q[j] * xv;
        sx += xv;
      }
      acc += (float)loom_ld(scr[k / gs]) * qx + (float)loom_ld(bir[k / gs]) * sx;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0) loom_st(out + (p * M + m) * N + n, acc);
  }
}
// out (rows, cols) from codes (rows, cols * BITS / 32), scales and biases
// (rows, cols / gs) of type T, rounded as the CPU: to T after the product
// and after the sum, then to the output's type.
extern "C" __global__ void NAME_deq(const unsigned* __restrict__ w, const T* __restrict__ sc,
                                    const T* __restrict__ bi, OT* __restrict__ out,
                                    long long rows, long long cols, int gs) {
  const long long groups = cols / gs, words = cols * BITS / 32;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < rows * cols;
       e += (long long)gridDim.x * blockDim.x) {
    const long long r = e / cols, j = e % cols;
    const long long g = r * groups + j / gs;
    const float p = loom_round_T((float)loom_code(w + r * words, j) * (float)loom_ld(sc[g]));
    loom_st(out + e, loom_round_T(p + (float)loom_ld(bi[g])));
  }
}
)";
  for (size_t pos; (pos = src.find("NAME_")) != std::string::npos;) src.replace(pos, 4, name);
  return src;
}

bool float_type(Dtype d) { return d == float32 || d == float16 || d == bfloat16; }

void launch_grid(cudaKernel_t k, long long total, void** args, cudaStream_t s, const char* what) {
  if (total <= 0) return;
  const long long blocks = std::min<long long>((total + 255) / 256, 132LL * 64);
  check(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(blocks)),
                         dim3(256), args, 0, s),
        what);
}

struct Params {
  int group_size, bits;
  bool ok;
};

Params affine_params(Primitive& p) {
  const PrimitiveState st = p.state();
  const std::string mode = state_get<std::string>(st, p.name(), "mode");
  const int gs = static_cast<int>(state_get<int64_t>(st, p.name(), "group_size"));
  const int bits = static_cast<int>(state_get<int64_t>(st, p.name(), "bits"));
  const bool ok = mode == "affine" && bits >= 2 && bits <= 8 && gs >= 8 && gs % 8 == 0;
  return {gs, bits, ok};
}

bool dequantize_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                       cudaStream_t s) {
  const Params q = affine_params(p);
  if (!q.ok || inputs.size() != 3) return false;
  const array &w = inputs[0], &sc = inputs[1], &bi = inputs[2];
  array& out = outputs[0];
  if (w.dtype() != uint32 || !float_type(sc.dtype()) || bi.dtype() != sc.dtype() ||
      !float_type(out.dtype()) || w.ndim() == 0) {
    return false;
  }
  const long long cols = static_cast<long long>(w.shape(-1)) * 32 / q.bits;
  if (cols % q.group_size != 0 || out.shape(-1) != cols) return false;
  void* y = alloc_output(out);
  if (out.size() == 0) return true;
  long long rows = static_cast<long long>(out.size()) / cols;
  allocator::Buffer t[3] = {{nullptr, 0}, {nullptr, 0}, {nullptr, 0}};
  const void* wp = dense_data(w, t[0], s);
  const void* sp = dense_data(sc, t[1], s);
  const void* bp = dense_data(bi, t[2], s);
  const std::string name = "loom_quant_" + std::to_string(static_cast<int>(sc.dtype().val)) + "_" +
                           std::to_string(static_cast<int>(out.dtype().val)) + "_" +
                           std::to_string(q.bits);
  cudaKernel_t k = jit_kernel(
      name + "_deq", [&] { return quantized_source(name, sc.dtype(), out.dtype(), q.bits); });
  int gs = q.group_size;
  void* args[] = {&wp, &sp, &bp, &y, &rows, const_cast<long long*>(&cols), &gs};
  launch_grid(k, rows * cols, args, s, "cudaLaunchKernel (dequantize)");
  for (auto& b : t)
    if (b.ptr != nullptr) device_pool(current_device()).free(b);
  return true;
}

bool quantized_matmul_kernel(Primitive& p, const std::vector<array>& inputs,
                             std::vector<array>& outputs, cudaStream_t s) {
  const Params q = affine_params(p);
  if (!q.ok || inputs.size() != 4) return false;
  const bool transpose = state_get<bool>(p.state(), p.name(), "transpose");
  const array &x = inputs[0], &w = inputs[1], &sc = inputs[2], &bi = inputs[3];
  array& out = outputs[0];
  const Dtype d = out.dtype();
  if (!float_type(d) || x.dtype() != d || sc.dtype() != d || bi.dtype() != d ||
      w.dtype() != uint32 || w.ndim() != 2 || sc.ndim() != 2 || bi.ndim() != 2 || x.ndim() < 1) {
    return false;
  }
  const long long K = x.shape(-1);
  const long long N = out.shape(-1);
  if (K % 8 != 0) return false;
  const long long reduced = transpose ? K : N; // the axis the codes run along
  if (reduced % q.group_size != 0) return false;
  if (transpose ? (w.shape(0) != N || w.shape(1) * 32LL != K * q.bits)
                : (w.shape(0) != K || w.shape(1) * 32LL != N * q.bits)) {
    return false;
  }
  void* y = alloc_output(out);
  if (out.size() == 0) return true;
  long long M = static_cast<long long>(x.size()) / K;
  allocator::Buffer t[4] = {{nullptr, 0}, {nullptr, 0}, {nullptr, 0}, {nullptr, 0}};
  const void* xp = dense_data(x, t[0], s);
  const void* wp = dense_data(w, t[1], s);
  const void* sp = dense_data(sc, t[2], s);
  const void* bp = dense_data(bi, t[3], s);
  const std::string name = "loom_quant_" + std::to_string(static_cast<int>(d.val)) + "_" +
                           std::to_string(static_cast<int>(d.val)) + "_" + std::to_string(q.bits);
  auto source = [&] { return quantized_source(name, d, d, q.bits); };
  int gs = q.group_size;
  void* args[] = {
      &xp, &wp, &sp, &bp, &y, &M, const_cast<long long*>(&N), const_cast<long long*>(&K), &gs};
  // Many rows of x (prefill, training): the weight dequantized once into a
  // scratch matrix of x's type, then one cuBLAS GEMM.
  const bool use_gemm = K > 0 && M <= 0x7fffffffLL && (transpose ? M > kFusedRows : M >= 4);
  bool done = false;
  if (use_gemm) {
    auto& pool = device_pool(current_device());
    const long long wr = w.shape(0), wc = transpose ? K : N;
    allocator::Buffer deq = pool.malloc(static_cast<size_t>(wr * wc) * d.size);
    void* dp = deq.ptr;
    void* dargs[] = {&wp, &sp, &bp, &dp, const_cast<long long*>(&wr), const_cast<long long*>(&wc),
                     &gs};
    launch_grid(jit_kernel(name + "_deq", source), wr * wc, dargs, s,
                "cudaLaunchKernel (quantized_matmul dequantize)");
    done = gemm(d, transpose, false, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K),
                dp, static_cast<int>(transpose ? K : N), 0, xp, static_cast<int>(K), 0, y,
                static_cast<int>(N), 0, 1, s, "quantized_matmul");
    pool.free(deq);
  }
  if (!done && K == 0) {
    check(cudaMemsetAsync(y, 0, out.nbytes(), s), "cudaMemsetAsync (quantized_matmul)");
  } else if (!done && transpose) {
    cudaKernel_t k = jit_kernel(name + "_qmv", source);
    constexpr unsigned warps = 8;
    const unsigned gx = static_cast<unsigned>((N + warps - 1) / warps);
    const unsigned gy = static_cast<unsigned>(std::min<long long>(M, 65535));
    check(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(gx, gy), dim3(warps * 32), args,
                           0, s),
          "cudaLaunchKernel (quantized_matmul)");
  } else if (!done) {
    cudaKernel_t k = jit_kernel(name + "_qmm", source);
    launch_grid(k, M * N, args, s, "cudaLaunchKernel (quantized_matmul)");
  }
  for (auto& b : t)
    if (b.ptr != nullptr) device_pool(current_device()).free(b);
  return true;
}

// The CPU kernel's error for the first out-of-range pair (reads the host copies).
void raise_bad_pair(const array& lhs, const array& rhs, long long bx, long long bw) {
  const uint32_t* li = lhs.data<uint32_t>();
  const uint32_t* ri = rhs.data<uint32_t>();
  for (size_t p = 0; p < lhs.size(); ++p) {
    if (li[p] >= bx || ri[p] >= bw) {
      throw std::out_of_range("[gather_qmm] Index out of range: lhs index " +
                              std::to_string(li[p]) + " for " + std::to_string(bx) +
                              " matrices of x, rhs index " + std::to_string(ri[p]) + " for " +
                              std::to_string(bw) + " matrices of w.");
    }
  }
}

bool gather_qmm_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                       cudaStream_t s) {
  const Params q = affine_params(p);
  if (!q.ok || inputs.size() != 6 || !state_get<bool>(p.state(), p.name(), "transpose")) {
    return false;
  }
  const array &x = inputs[0], &w = inputs[1], &sc = inputs[2], &bi = inputs[3];
  const array &lhs = inputs[4], &rhs = inputs[5];
  array& out = outputs[0];
  const Dtype d = out.dtype();
  if (!float_type(d) || x.dtype() != d || sc.dtype() != d || bi.dtype() != d ||
      w.dtype() != uint32 || lhs.dtype() != uint32 || rhs.dtype() != uint32 || x.ndim() != 3 ||
      w.ndim() != 3 || sc.ndim() != 3 || bi.ndim() != 3 || lhs.ndim() != 1 ||
      rhs.size() != lhs.size()) {
    return false;
  }
  long long M = x.shape(1), K = x.shape(2), N = w.shape(1);
  long long bx = x.shape(0), bw = w.shape(0);
  const long long P = lhs.size();
  if (K % 8 != 0 || K % q.group_size != 0 || w.shape(2) * 32LL != K * q.bits || P > 65535 ||
      out.shape(2) != N) {
    return false;
  }
  const bool on_host = host_valid(lhs) && host_valid(rhs);
  if (on_host) raise_bad_pair(lhs, rhs, bx, bw);
  void* y = alloc_output(out);
  if (out.size() == 0) return true;
  if (K == 0) {
    check(cudaMemsetAsync(y, 0, out.nbytes(), s), "cudaMemsetAsync (gather_qmm)");
    return true;
  }
  allocator::Buffer t[6] = {};
  const void* xp = dense_data(x, t[0], s);
  const void* wp = dense_data(w, t[1], s);
  const void* sp = dense_data(sc, t[2], s);
  const void* bp = dense_data(bi, t[3], s);
  const void* lp = dense_data(lhs, t[4], s);
  const void* rp = dense_data(rhs, t[5], s);
  int* bad = bad_flag();
  *bad = 0;
  const std::string name = "loom_quant_" + std::to_string(static_cast<int>(d.val)) + "_" +
                           std::to_string(static_cast<int>(d.val)) + "_" + std::to_string(q.bits);
  cudaKernel_t k = jit_kernel(name + "_gqmv", [&] { return quantized_source(name, d, d, q.bits); });
  int gs = q.group_size;
  void* args[] = {&xp, &wp, &sp, &bp, &y, &lp, &rp, &M, &N, &K, &gs, &bx, &bw, &bad};
  constexpr unsigned warps = 8;
  check(cudaLaunchKernel(
            reinterpret_cast<const void*>(k),
            dim3(static_cast<unsigned>((N + warps - 1) / warps),
                 static_cast<unsigned>(std::min<long long>(M, 65535)), static_cast<unsigned>(P)),
            dim3(warps * 32), args, 0, s),
        "cudaLaunchKernel (gather_qmm)");
  for (auto& b : t)
    if (b.ptr != nullptr) device_pool(current_device()).free(b);
  if (!on_host) {
    // Indices computed on the device (a router's topk): checked by the kernel.
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize (gather_qmm index check)");
    if (*bad != 0) raise_bad_pair(lhs, rhs, bx, bw);
  }
  return true;
}

bool quantize_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                     cudaStream_t s) {
  const PrimitiveState st = p.state();
  const int gs = static_cast<int>(state_get<int64_t>(st, "Quantize", "group_size"));
  const int bits = static_cast<int>(state_get<int64_t>(st, "Quantize", "bits"));
  if (state_get<std::string>(st, "Quantize", "mode") != "affine" || inputs.size() != 1 ||
      outputs.size() != 3 || bits < 1 || bits > 8 || gs < 32 || gs % 32 != 0) {
    return false;
  }
  const array& w = inputs[0];
  const Dtype d = w.dtype();
  if (!float_type(d) || outputs[1].dtype() != d || outputs[2].dtype() != d ||
      outputs[0].dtype() != uint32 || w.size() % gs != 0) {
    return false;
  }
  void* codes = alloc_output(outputs[0]);
  void* scales = alloc_output(outputs[1]);
  void* biases = alloc_output(outputs[2]);
  long long groups = static_cast<long long>(w.size()) / gs;
  if (groups == 0) return true;
  allocator::Buffer t{nullptr, 0};
  const void* wp = dense_data(w, t, s);
  const std::string name = "loom_quant_" + std::to_string(static_cast<int>(d.val)) + "_" +
                           std::to_string(static_cast<int>(d.val)) + "_" + std::to_string(bits);
  cudaKernel_t k = jit_kernel(name + "_quant", [&] { return quantized_source(name, d, d, bits); });
  int g = gs;
  void* args[] = {&wp, &codes, &scales, &biases, &groups, &g};
  launch_grid(k, groups, args, s, "cudaLaunchKernel (quantize)");
  if (t.ptr != nullptr) device_pool(current_device()).free(t);
  return true;
}

struct Registration {
  Registration() {
    register_kernel(typeid(Dequantize), &dequantize_kernel);
    register_kernel(typeid(QuantizedMatmul), &quantized_matmul_kernel);
    register_kernel(typeid(GatherQMM), &gather_qmm_kernel);
    register_kernel(typeid(Quantize), &quantize_kernel);
  }
} registration;

} // namespace

std::string quantized_kernel_source(const std::string& name, Dtype d, Dtype out, int bits) {
  return quantized_source(name, d, out, bits);
}

} // namespace loom::cuda
