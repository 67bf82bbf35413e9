// Softmax and LogSumExp over the last axis on the GPU: one block per row,
// generated per dtype and built with NVRTC. float16/bfloat16 rows compute in
// float and round once; the maximum propagates NaN, and LogSumExp keeps small
// terms exactly as the CPU kernel does (the maxima's exp(0) = 1 counted apart,
// then log1p).
#include "loom/primitives/softmax.h"

#include <string>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"

namespace loom::cuda {

namespace {

constexpr unsigned kThreads = 256;

const char* const kRowPrelude = R"(
template <typename C> __device__ __forceinline__ C loom_max_nan(C a, C b) {
  return (b != b || b > a) ? b : a;
}
template <typename C, bool kMax> __device__ __forceinline__ C loom_block_reduce(C v, C* sh) {
  for (int o = 16; o > 0; o >>= 1) {
    C w = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? loom_max_nan(v, w) : v + w;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + 31) >> 5;
    v = lane < warps ? sh[lane] : (kMax ? -(C)__int_as_float(0x7f800000) : (C)0);
    for (int o = 16; o > 0; o >>= 1) {
      C w = __shfl_xor_sync(0xffffffffu, v, o);
      v = kMax ? loom_max_nan(v, w) : v + w;
    }
    if (lane == 0) sh[32] = v;
  }
  __syncthreads();
  v = sh[32];
  __syncthreads();
  return v;
}
)";

} // namespace

const char* row_reduce_prelude() { return kRowPrelude; }

std::string row_softmax_source(const std::string& name, Dtype d, bool lse) {
  std::string st = storage_type(d), ct = compute_type(d);
  std::string src = std::string(jit_prelude()) + row_reduce_prelude();
  src += "extern \"C\" __global__ void " + name + "(const " + st + "* __restrict__ in, " + st +
         "* __restrict__ out, long long n) {\n"
         "  __shared__ " +
         ct +
         " sh[33];\n"
         "  const " +
         st +
         "* x = in + (long long)blockIdx.x * n;\n"
         "  " +
         ct + " m = -(" + ct +
         ")__int_as_float(0x7f800000);\n"
         "  for (long long j = threadIdx.x; j < n; j += blockDim.x) m = loom_max_nan(m, (" +
         ct +
         ")loom_ld(x[j]));\n"
         "  m = loom_block_reduce<" +
         ct + ", true>(m, sh);\n";
  if (!lse) {
    src += "  " + ct +
           " s = 0;\n"
           "  for (long long j = threadIdx.x; j < n; j += blockDim.x) s += exp((" +
           ct +
           ")loom_ld(x[j]) - m);\n"
           "  s = loom_block_reduce<" +
           ct +
           ", false>(s, sh);\n"
           "  " +
           st +
           "* y = out + (long long)blockIdx.x * n;\n"
           "  for (long long j = threadIdx.x; j < n; j += blockDim.x) loom_st(y + j, exp((" +
           ct + ")loom_ld(x[j]) - m) / s);\n}\n";
    return src;
  }
  src +=
      "  const bool edge = loom_isinf(m) || m != m;\n"
      "  const " +
      ct + " shift = loom_isinf(m) ? (" + ct +
      ")0 : m;\n"
      "  " +
      ct +
      " s = 0, count = 0;\n"
      "  for (long long j = threadIdx.x; j < n; j += blockDim.x) {\n"
      "    " +
      ct + " v = (" + ct +
      ")loom_ld(x[j]);\n"
      "    if (edge) { s += exp(v - shift); }\n"
      "    else { s += exp(v - m) - (v == m ? (" +
      ct + ")1 : (" + ct +
      ")0); count += v == m; }\n"
      "  }\n"
      "  s = loom_block_reduce<" +
      ct +
      ", false>(s, sh);\n"
      "  count = loom_block_reduce<" +
      ct +
      ", false>(count, sh);\n"
      "  if (threadIdx.x == 0) loom_st(out + blockIdx.x, edge ? log(s) + shift : log1p(s + (count "
      "- 1)) + m);\n}\n";
  return src;
}

namespace {

bool row_kernel(const std::vector<array>& inputs, std::vector<array>& outputs, cudaStream_t s,
                bool lse) {
  const array& in = inputs[0];
  Dtype d = in.dtype();
  if (!is_float(d) || outputs[0].dtype() != d || in.ndim() == 0) return false;
  if (!in.flags().row_contiguous || in.data_size() != in.size()) return false;
  const long long n = in.shape(-1);
  if (n == 0) return false; // logsumexp of nothing is -inf: the CPU writes it
  const size_t rows = n > 0 ? in.size() / static_cast<size_t>(n) : 0;
  if (rows > 0x7fffffffu) return false;
  const void* x = device_data(in, s);
  void* y = alloc_output(outputs[0]);
  if (outputs[0].size() == 0 || rows == 0) return true;
  std::string name = std::string(lse ? "loom_logsumexp_" : "loom_softmax_") +
                     std::to_string(static_cast<int>(d.val));
  cudaKernel_t k = jit_kernel(name, [&] { return row_softmax_source(name, d, lse); });
  long long cols = n;
  void* args[] = {&x, &y, &cols};
  unsigned threads = n >= kThreads ? kThreads : static_cast<unsigned>((n + 31) / 32 * 32);
  check(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(rows)),
                         dim3(threads), args, 0, s),
        "cudaLaunchKernel (softmax)");
  return true;
}

bool softmax_kernel(Primitive&, const std::vector<array>& inputs, std::vector<array>& outputs,
                    cudaStream_t s) {
  return row_kernel(inputs, outputs, s, false);
}

bool logsumexp_kernel(Primitive&, const std::vector<array>& inputs, std::vector<array>& outputs,
                      cudaStream_t s) {
  return row_kernel(inputs, outputs, s, true);
}

struct Registration {
  Registration() {
    register_kernel(typeid(Softmax), &softmax_kernel);
    register_kernel(typeid(LogSumExp), &logsumexp_kernel);
  }
} registration;

} // namespace
} // namespace loom::cuda
