// ArgMax/ArgMin on the GPU over the last axis of a dense array (or the whole
// array, flattened): one block per row, each thread keeping its best (value,
// index), then a block-wide pick. The CPU's rule: the first NaN wins, else
// the first index of the extreme.
#include <string>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"
#include "loom/primitives/reduce.h"

namespace loom::cuda {

std::string arg_reduce_source(const std::string& name, Dtype d, bool is_max) {
  std::string st = storage_type(d), ct = compute_type(d);
  std::string src = jit_prelude();
  src += "__device__ __forceinline__ bool loom_wins(" + ct + " a, long long ia, " + ct +
         " b, long long ib) {\n"
         "  const bool na = a != a, nb = b != b;\n"
         "  if (na || nb) return na && (!nb || ia < ib);\n"
         "  if (a == b) return ia < ib;\n"
         "  return a " +
         (is_max ? ">" : "<") + " b;\n}\n";
  src += "extern \"C\" __global__ void " + name + "(const " + st +
         "* __restrict__ in, unsigned int* __restrict__ out, long long n) {\n"
         "  __shared__ " +
         ct +
         " sv[32];\n  __shared__ long long si[32];\n"
         "  const " +
         st +
         "* x = in + (long long)blockIdx.x * n;\n"
         "  " +
         ct + " best = (" + ct +
         ")loom_ld(x[0]);\n  long long bi = 0;\n"
         "  for (long long j = threadIdx.x; j < n; j += blockDim.x) {\n"
         "    " +
         ct + " v = (" + ct +
         ")loom_ld(x[j]);\n"
         "    if (loom_wins(v, j, best, bi)) { best = v; bi = j; }\n  }\n"
         "  for (int o = 16; o > 0; o >>= 1) {\n"
         "    " +
         ct +
         " v = __shfl_xor_sync(0xffffffffu, best, o);\n"
         "    long long i = __shfl_xor_sync(0xffffffffu, bi, o);\n"
         "    if (loom_wins(v, i, best, bi)) { best = v; bi = i; }\n  }\n"
         "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
         "  if (lane == 0) { sv[warp] = best; si[warp] = bi; }\n  __syncthreads();\n"
         "  if (threadIdx.x == 0) {\n"
         "    for (int w = 1; w < (int)((blockDim.x + 31) >> 5); ++w)\n"
         "      if (loom_wins(sv[w], si[w], best, bi)) { best = sv[w]; bi = si[w]; }\n"
         "    out[blockIdx.x] = (unsigned int)bi;\n  }\n}\n";
  return src;
}

namespace {

bool arg_reduce_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                       cudaStream_t s) {
  auto& a = static_cast<ArgReduce&>(p);
  const array& in = inputs[0];
  Dtype d = in.dtype();
  // bool compares as bool; its warp shuffle needs a wider type: CPU.
  if (storage_type(d) == nullptr || d == bool_ || in.size() == 0) return false;
  if (outputs[0].dtype() != uint32 || in.ndim() == 0) return false;
  if (!in.flags().row_contiguous || in.data_size() != in.size()) return false;
  const bool all = a.axis() == ArgReduce::kAllAxes;
  if (!all && a.axis() != in.ndim() - 1) return false;
  const long long n = all ? static_cast<long long>(in.size()) : in.shape(-1);
  const size_t rows = in.size() / static_cast<size_t>(n);
  if (rows > 0x7fffffffu || n > 0xffffffffll) return false;
  const void* x = device_data(in, s);
  void* y = alloc_output(outputs[0]);
  const bool is_max = a.reduce_type() == ArgReduce::ArgMax;
  std::string name = std::string(is_max ? "loom_argmax_" : "loom_argmin_") +
                     std::to_string(static_cast<int>(d.val));
  cudaKernel_t k = jit_kernel(name, [&] { return arg_reduce_source(name, d, is_max); });
  long long cols = n;
  void* args[] = {&x, &y, &cols};
  unsigned threads = n >= 256 ? 256u : static_cast<unsigned>((n + 31) / 32 * 32);
  check(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(rows)),
                         dim3(threads), args, 0, s),
        "cudaLaunchKernel (arg reduce)");
  return true;
}

struct Registration {
  Registration() { register_kernel(typeid(ArgReduce), &arg_reduce_kernel); }
} registration;

} // namespace
} // namespace loom::cuda
