// mx.fast cross entropy's forward on the GPU: one block per row of logits,
// logsumexp(row) - row[target] in the CPU kernel's order (maximum, sum of
// exp(x - max), log(sum) + max - picked) and precision (float for float32 and
// half types, double for float64). A target outside the row gives NaN, as
// the CPU. Its gradient is built from ops (softmax, one-hot) that run on
// their own GPU kernels.
#include <algorithm>
#include <string>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"
#include "loom/primitives/fast.h"

namespace loom::cuda {

namespace {

constexpr unsigned kThreads = 256;

std::string cross_entropy_source(const std::string& name, Dtype d) {
  std::string src = std::string(jit_prelude()) + row_reduce_prelude();
  src += "typedef " + std::string(storage_type(d)) + " T;\ntypedef " + compute_type(d) + " C;\n";
  src += R"(
extern "C" __global__ void NAME(const T* __restrict__ logits, const int* __restrict__ targets,
                                float* __restrict__ out, long long n) {
  __shared__ C sh[33];
  const long long r = blockIdx.x;
  const T* x = logits + r * n;
  C m = -(C)__int_as_float(0x7f800000);
  for (long long j = threadIdx.x; j < n; j += blockDim.x) m = loom_max_nan(m, (C)loom_ld(x[j]));
  m = loom_block_reduce<C, true>(m, sh);
  C s = 0;
  for (long long j = threadIdx.x; j < n; j += blockDim.x) s += exp((C)loom_ld(x[j]) - m);
  s = loom_block_reduce<C, false>(s, sh);
  if (threadIdx.x == 0) {
    long long t = targets[r];
    if (t < 0) t += n;
    const C picked = t >= 0 && t < n ? (C)loom_ld(x[t]) : (C)__int_as_float(0x7fc00000);
    out[r] = (float)(log(s) + m - picked);
  }
}
)";
  size_t pos = src.find("void NAME(");
  src.replace(pos + 5, 4, name);
  return src;
}

bool cross_entropy_kernel(Primitive& p, const std::vector<array>& inputs,
                          std::vector<array>& outputs, cudaStream_t s) {
  const array &logits = inputs[0], &targets = inputs[1];
  array& out = outputs[0];
  const Dtype d = logits.dtype();
  if ((d != float32 && d != float16 && d != bfloat16 && d != float64) || targets.dtype() != int32 ||
      out.dtype() != float32 || logits.ndim() < 1) {
    return false;
  }
  long long n = logits.shape(-1);
  const long long rows = static_cast<long long>(out.size());
  if (n == 0 || rows != static_cast<long long>(targets.size()) || rows > 0x7fffffffLL) return false;
  void* y = alloc_output(out);
  if (rows == 0) return true;
  allocator::Buffer tmp[2] = {};
  const void* x = dense_data(logits, tmp[0], s);
  const void* t = dense_data(targets, tmp[1], s);
  const std::string name = "loom_cross_entropy_" + std::to_string(static_cast<int>(d.val));
  cudaKernel_t k = jit_kernel(name, [&] { return cross_entropy_source(name, d); });
  const unsigned threads = n >= kThreads ? kThreads : static_cast<unsigned>((n + 31) / 32 * 32);
  void* args[] = {&x, &t, &y, &n};
  check(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(rows)),
                         dim3(threads), args, 0, s),
        "cudaLaunchKernel (cross_entropy)");
  for (auto& b : tmp)
    if (b.ptr != nullptr) device_pool(current_device()).free(b);
  return true;
}

struct Registration {
  Registration() { register_kernel(typeid(CrossEntropy), &cross_entropy_kernel); }
} registration;

} // namespace

std::string cross_entropy_kernel_source(const std::string& name, Dtype d) {
  return cross_entropy_source(name, d);
}

} // namespace loom::cuda
