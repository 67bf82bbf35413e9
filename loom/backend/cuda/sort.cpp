// Sort and ArgSort on the GPU for rows of up to 4096 elements along any axis:
// one block per row, a bitonic sort in shared memory over (value, index)
// pairs. Comparing the index on ties makes the result the stable order, so
// argsort equals the CPU's stable sort exactly; NaN sorts last, as on the
// CPU. Longer rows, partitions (argpartition, topk) and complex64 stay on the
// CPU.
#include "loom/primitives/sort.h"

#include <algorithm>
#include <string>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"

namespace loom::cuda {

// sort_large.cpp: rows over kMaxRow, ArgPartition and ArgTopK.
bool sort_large_kernel(Primitive& prim, const std::vector<array>& inputs,
                       std::vector<array>& outputs, cudaStream_t s);

namespace {

// 4096 (value, index) pairs of 8 + 4 bytes fill the 48 KiB of shared memory
// a block gets without opting in.
constexpr long long kMaxRow = 4096;

std::string sort_source(const std::string& name, Dtype d, bool indices) {
  std::string st = storage_type(d), ct = compute_type(d);
  std::string src = jit_prelude();
  src += "typedef " + st + " ST;\ntypedef " + ct + " CT;\n";
  src += std::string("#define LOOM_INDICES ") + (indices ? "1" : "0") + "\n";
  src += R"(
// Whether element (a, ia) goes after (b, ib): padding (index ~0u) after
// everything, NaN after numbers, then by value, then by index.
__device__ __forceinline__ bool loom_after(CT a, unsigned ia, CT b, unsigned ib) {
  if (ia == 0xffffffffu || ib == 0xffffffffu) return ia > ib;
  const bool na = a != a, nb = b != b;
  if (na != nb) return na;
  if (!na && a != b) return a > b;
  return ia > ib;
}
extern "C" __global__ void NAME(const ST* __restrict__ in, void* __restrict__ out, long long n,
                                long long inner, unsigned npad) {
  extern __shared__ unsigned long long loom_smem[];
  CT* keys = (CT*)loom_smem;
  unsigned* idx = (unsigned*)(keys + npad);
  const long long r = blockIdx.x;
  const long long base = (r / inner) * n * inner + r % inner;
  for (unsigned i = threadIdx.x; i < npad; i += blockDim.x) {
    if (i < n) { keys[i] = (CT)loom_ld(in[base + i * inner]); idx[i] = i; }
    else { keys[i] = (CT)0; idx[i] = 0xffffffffu; }
  }
  __syncthreads();
  for (unsigned k = 2; k <= npad; k <<= 1) {
    for (unsigned j = k >> 1; j > 0; j >>= 1) {
      for (unsigned i = threadIdx.x; i < npad; i += blockDim.x) {
        const unsigned p = i ^ j;
        if (p > i) {
          const bool up = (i & k) == 0;
          if (loom_after(keys[i], idx[i], keys[p], idx[p]) == up) {
            CT t = keys[i]; keys[i] = keys[p]; keys[p] = t;
            unsigned u = idx[i]; idx[i] = idx[p]; idx[p] = u;
          }
        }
      }
      __syncthreads();
    }
  }
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) {
#if LOOM_INDICES
    ((unsigned*)out)[base + i * inner] = idx[i];
#else
    loom_st(((ST*)out) + base + i * inner, keys[i]);
#endif
  }
}
)";
  size_t pos = src.find("void NAME(");
  src.replace(pos + 5, 4, name);
  return src;
}

bool sort_kernel(Primitive& prim, const std::vector<array>& inputs, std::vector<array>& outputs,
                 cudaStream_t s) {
  const std::string pname = prim.name();
  const bool indices = pname == "ArgSort";
  if (!indices && pname != "Sort") return sort_large_kernel(prim, inputs, outputs, s);
  const array& in = inputs[0];
  array& out = outputs[0];
  const Dtype d = in.dtype();
  if (d == complex64 || storage_type(d) == nullptr) return false;
  if (indices ? out.dtype() != uint32 : out.dtype() != d) return false;
  if (!in.flags().row_contiguous || in.data_size() != in.size() || in.ndim() == 0) return false;
  int axis = static_cast<int>(state_get<int64_t>(prim.state(), pname, "axis"));
  if (axis < 0) axis += in.ndim();
  if (axis < 0 || axis >= in.ndim()) return false;
  long long n = in.shape(axis), inner = 1;
  if (n > kMaxRow) return sort_large_kernel(prim, inputs, outputs, s);
  for (int i = axis + 1; i < in.ndim(); ++i) inner *= in.shape(i);
  if (in.size() > 0 && static_cast<long long>(in.size()) / n > 0x7fffffffll) return false;
  void* y = alloc_output(out);
  if (out.size() == 0) return true;
  const long long rows = static_cast<long long>(in.size()) / n;
  // At least four slots, so the index array after the keys is aligned.
  unsigned npad = 4;
  while (npad < n) npad <<= 1;
  const void* x = device_data(in, s);
  std::string name = std::string(indices ? "loom_argsort_" : "loom_sort_") +
                     std::to_string(static_cast<int>(d.val));
  cudaKernel_t k = jit_kernel(name, [&] { return sort_source(name, d, indices); });
  const size_t key_bytes = (d == float16 || d == bfloat16) ? 4 : d.size; // the compute type
  const size_t smem = npad * (key_bytes + 4);
  unsigned threads = npad / 2 >= 1024 ? 1024u : std::max(32u, npad / 2);
  void* args[] = {&x, &y, &n, &inner, &npad};
  check(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(rows)),
                         dim3(threads), args, smem, s),
        "cudaLaunchKernel (sort)");
  return true;
}

struct Registration {
  Registration() { register_kernel(typeid(Sort), &sort_kernel); }
} registration;

} // namespace

std::string sort_kernel_source(const std::string& name, Dtype d, bool indices) {
  return sort_source(name, d, indices);
}

} // namespace loom::cuda
