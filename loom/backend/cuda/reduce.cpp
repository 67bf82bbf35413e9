// Sum, Prod, Max and Min over float16/bfloat16/float32/float64 on the GPU,
// for a row-contiguous input whose reduced axes are a suffix (rows: one block
// per row, split in parts and reduced in two passes when there are few rows)
// or a prefix (columns: one thread per output column, the rows split in
// chunks reduced in two passes when there are few columns). Other axis sets,
// integer and bool reductions, and dtype-changing reductions run on the CPU
// fallback. Kernels are generated and built with NVRTC like the element-wise
// ones; float16/bfloat16 accumulate in float.
#include "loom/primitives/reduce.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"

namespace loom::cuda {

namespace {

const char* storage(Dtype d) {
  if (d == float16) return "loom_half";
  if (d == bfloat16) return "loom_bf16";
  if (d == float32) return "float";
  if (d == float64) return "double";
  return nullptr;
}

struct ReduceForm {
  const char* combine; // over a (accumulator) and b
  const char* init;    // in the accumulator type C
};

ReduceForm form(Reduce::ReduceType t) {
  switch (t) {
    case Reduce::Sum:
      return {"(a + b)", "(C)0"};
    case Reduce::Prod:
      return {"(a * b)", "(C)1"};
    // NaN wins, as on the CPU: a NaN accumulator is kept, a NaN operand taken.
    case Reduce::Max:
      return {"((b > a || b != b) ? b : a)", "-(C)__int_as_float(0x7f800000)"};
    case Reduce::Min:
      return {"((b < a || b != b) ? b : a)", "(C)__int_as_float(0x7f800000)"};
    default:
      return {nullptr, nullptr};
  }
}

std::string rows_source(const std::string& name, const char* in, const char* out, const char* acc,
                        const ReduceForm& f) {
  std::string s = jit_prelude();
  s += "typedef " + std::string(acc) + " C;\n";
  s += "__device__ __forceinline__ C loom_combine(C a, C b) { return " + std::string(f.combine) +
       "; }\n";
  s += "extern \"C\" __global__ void " + name + "(const " + in + "* __restrict__ in, " + out +
       "* __restrict__ out, long long R, long long chunk, int splits) {\n"
       "  long long row = blockIdx.x / splits;\n"
       "  long long begin = (long long)(blockIdx.x % splits) * chunk;\n"
       "  long long end = begin + chunk < R ? begin + chunk : R;\n"
       "  const " +
       in +
       "* p = in + row * R;\n"
       "  C acc = " +
       f.init +
       ";\n"
       "  for (long long i = begin + threadIdx.x; i < end; i += blockDim.x)\n"
       "    acc = loom_combine(acc, (C)loom_ld(p[i]));\n"
       "  for (int o = 16; o > 0; o >>= 1) acc = loom_combine(acc, __shfl_down_sync(0xffffffffu, "
       "acc, o));\n"
       "  __shared__ C warp_acc[32];\n"
       "  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
       "  if (lane == 0) warp_acc[w] = acc;\n"
       "  __syncthreads();\n"
       "  if (w == 0) {\n"
       "    acc = lane < (int)(blockDim.x >> 5) ? warp_acc[lane] : " +
       f.init +
       ";\n"
       "    for (int o = 16; o > 0; o >>= 1) acc = loom_combine(acc, __shfl_down_sync(0xffffffffu, "
       "acc, o));\n"
       "    if (lane == 0) loom_st(out + blockIdx.x, acc);\n"
       "  }\n"
       "}\n";
  return s;
}

// Columns: thread j of the grid's x extent reduces column j over the rows
// [blockIdx.y * chunk, + chunk) and writes row blockIdx.y of `out` (one row
// when the grid has one y block: the whole reduction).
std::string cols_source(const std::string& name, const char* in, const char* out, const char* acc,
                        const ReduceForm& f) {
  std::string s = jit_prelude();
  s += "typedef " + std::string(acc) + " C;\n";
  s += "__device__ __forceinline__ C loom_combine(C a, C b) { return " + std::string(f.combine) +
       "; }\n";
  s += "extern \"C\" __global__ void " + name + "(const " + in + "* __restrict__ in, " + out +
       "* __restrict__ out, long long R, long long cols, long long chunk) {\n"
       "  const long long begin = (long long)blockIdx.y * chunk;\n"
       "  const long long end = begin + chunk < R ? begin + chunk : R;\n"
       "  for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < cols;"
       " j += (long long)gridDim.x * blockDim.x) {\n"
       "    C acc = " +
       f.init +
       ";\n"
       "    for (long long i = begin; i < end; ++i) acc = loom_combine(acc, (C)loom_ld(in[i * "
       "cols + j]));\n"
       "    loom_st(out + (long long)blockIdx.y * cols + j, acc);\n"
       "  }\n"
       "}\n";
  return s;
}

constexpr unsigned kThreads = 256;

void launch(cudaKernel_t k, size_t blocks, void** args, cudaStream_t s, unsigned blocks_y = 1) {
  check(cudaLaunchKernel(reinterpret_cast<const void*>(k),
                         dim3(static_cast<unsigned>(blocks), blocks_y), dim3(kThreads), args, 0, s),
        "cudaLaunchKernel");
}

bool reduce_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                   cudaStream_t s) {
  auto& r = static_cast<Reduce&>(p);
  const array& in = inputs[0];
  array& out = outputs[0];
  ReduceForm f = form(r.reduce_type());
  const char* st = storage(in.dtype());
  if (f.combine == nullptr || st == nullptr || out.dtype() != in.dtype() || in.size() == 0 ||
      !(in.flags().row_contiguous && in.data_size() == in.size())) {
    return false;
  }
  const auto& axes = r.axes();
  const int nd = in.ndim();
  const int k = static_cast<int>(axes.size());
  bool suffix = true, prefix = true;
  for (int i = 0; i < k; ++i) {
    suffix = suffix && axes[i] == nd - k + i;
    prefix = prefix && axes[i] == i;
  }
  if (k == 0 || (!suffix && !prefix)) return false;
  long long reduced = 1;
  for (int a : axes) reduced *= in.shape(a);
  const long long kept = static_cast<long long>(in.size()) / reduced;
  const char* acc = in.dtype() == float64 ? "double" : "float";
  const std::string dt = std::to_string(static_cast<int>(in.dtype().val));
  const std::string op = std::to_string(static_cast<int>(r.reduce_type()));
  const void* src = device_data(in, s);
  void* dst = alloc_output(out);

  if (suffix) {
    // Few long rows: split each in parts, then reduce the parts.
    long long splits = std::max<long long>(
        1, std::min<long long>((1056 + kept - 1) / kept, (reduced + 4095) / 4096));
    long long chunk = (reduced + splits - 1) / splits;
    if (splits == 1) {
      std::string name = "loom_reduce_rows_" + op + "_" + dt + "_" + dt;
      auto kern = jit_kernel(name, [&] { return rows_source(name, st, st, acc, f); });
      int one = 1;
      void* args[] = {&src, &dst, &reduced, &chunk, &one};
      launch(kern, static_cast<size_t>(kept), args, s);
      return true;
    }
    std::string name1 = "loom_reduce_rows_" + op + "_" + dt + "_acc";
    std::string name2 = "loom_reduce_rows_" + op + "_acc_" + dt;
    auto k1 = jit_kernel(name1, [&] { return rows_source(name1, st, acc, acc, f); });
    auto k2 = jit_kernel(name2, [&] { return rows_source(name2, acc, st, acc, f); });
    auto& pool = device_pool(current_device());
    const size_t acc_size = in.dtype() == float64 ? 8 : 4;
    // Freed (stream-ordered, after the second pass) when this returns.
    allocator::Data parts(pool.malloc(static_cast<size_t>(kept * splits) * acc_size), &pool);
    void* parts_ptr = parts.device_ptr(pool, s);
    int sp = static_cast<int>(splits);
    void* args1[] = {&src, &parts_ptr, &reduced, &chunk, &sp};
    launch(k1, static_cast<size_t>(kept * splits), args1, s);
    const void* parts_in = parts_ptr;
    int one = 1;
    void* args2[] = {&parts_in, &dst, &splits, &splits, &one};
    launch(k2, static_cast<size_t>(kept), args2, s);
    return true;
  }
  long long cols = kept;
  const size_t col_blocks =
      std::min<size_t>((static_cast<size_t>(cols) + kThreads - 1) / kThreads, 132 * 32);
  // Few columns (a bias gradient: 4096 columns over 1024 rows is 16 blocks on
  // 132 multiprocessors, each thread summing 1024 values in turn): split the
  // rows in chunks of at least 32, reduce each chunk's columns into a float
  // (double) buffer, then reduce that buffer's columns.
  static const bool split_cols = [] {
    const char* v = std::getenv("LOOM_CUDA_REDUCE_COLS_SPLIT");
    return v == nullptr || std::string(v) != "0";
  }();
  const long long want_blocks = 4 * static_cast<long long>(multiprocessor_count(current_device()));
  long long splits = std::min<long long>(
      (want_blocks + static_cast<long long>(col_blocks) - 1) / static_cast<long long>(col_blocks),
      reduced / 32);
  splits = split_cols ? std::max<long long>(1, std::min<long long>(splits, 1024)) : 1;
  if (splits == 1) {
    std::string name = "loom_reduce_cols_" + op + "_" + dt + "_" + dt;
    auto kern = jit_kernel(name, [&] { return cols_source(name, st, st, acc, f); });
    void* args[] = {&src, &dst, &reduced, &cols, &reduced};
    launch(kern, col_blocks, args, s);
    return true;
  }
  long long chunk = (reduced + splits - 1) / splits;
  splits = (reduced + chunk - 1) / chunk; // every y block has rows
  std::string name1 = "loom_reduce_cols_" + op + "_" + dt + "_acc";
  std::string name2 = "loom_reduce_cols_" + op + "_acc_" + dt;
  auto k1 = jit_kernel(name1, [&] { return cols_source(name1, st, acc, acc, f); });
  auto k2 = jit_kernel(name2, [&] { return cols_source(name2, acc, st, acc, f); });
  auto& pool = device_pool(current_device());
  const size_t acc_size = in.dtype() == float64 ? 8 : 4;
  // Freed (stream-ordered, after the second pass) when this returns.
  allocator::Data parts(pool.malloc(static_cast<size_t>(cols * splits) * acc_size), &pool);
  void* parts_ptr = parts.device_ptr(pool, s);
  void* args1[] = {&src, &parts_ptr, &reduced, &cols, &chunk};
  launch(k1, col_blocks, args1, s, static_cast<unsigned>(splits));
  const void* parts_in = parts_ptr;
  void* args2[] = {&parts_in, &dst, &splits, &cols, &splits};
  launch(k2, col_blocks, args2, s);
  return true;
}

struct Registration {
  Registration() { register_kernel(typeid(Reduce), &reduce_kernel); }
} registration;

} // namespace
} // namespace loom::cuda
