// Scan (cumsum, cumprod, cummax, cummin; forward or reversed, inclusive or
// exclusive) on the GPU, generated per dtype and operation and built with
// NVRTC. Along the last axis one block scans a row in tiles of four
// elements per thread (warp shuffles, then a pass over the warps' totals,
// the running total carried between tiles); along another axis each thread
// scans one column sequentially, neighbouring threads reading neighbouring
// addresses. The CPU's accumulators: half types in float, integers wrap,
// NaN sticks in cummax/cummin. logcumsumexp and complex64 stay on the CPU.
#include "loom/primitives/scan.h"

#include <algorithm>
#include <string>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"
#include "loom/primitives/state.h"

namespace loom::cuda {

namespace {

// 0 sum, 1 prod, 2 max, 3 min (the order of Scan::ReduceType).
int scan_op(const std::string& name) {
  if (name == "CumSum") return 0;
  if (name == "CumProd") return 1;
  if (name == "CumMax") return 2;
  if (name == "CumMin") return 3;
  return -1;
}

// The accumulator type: float for half types, int for small integers (warp
// shuffles move 32 or 64 bits; sums and products wrap the same way once
// stored), the element type otherwise.
std::string acc_type(Dtype d) {
  if (d == float16 || d == bfloat16) return "float";
  if (d == bool_ || d == int8 || d == int16) return "int";
  if (d == uint8 || d == uint16) return "unsigned int";
  return storage_type(d);
}

std::string identity(Dtype d, int op) {
  if (op == 0 || (d == bool_ && op == 2)) return "0";
  if (op == 1 || (d == bool_ && op == 3)) return "1";
  const bool lo = op == 2;
  if (d == float16 || d == bfloat16 || d == float32)
    return lo ? "(-__int_as_float(0x7f800000))" : "__int_as_float(0x7f800000)";
  if (d == float64)
    return lo ? "(-__longlong_as_double(0x7ff0000000000000ll))"
              : "__longlong_as_double(0x7ff0000000000000ll)";
  switch (d.val) {
    case Dtype::Val::int8:
      return lo ? "-128" : "127";
    case Dtype::Val::int16:
      return lo ? "-32768" : "32767";
    case Dtype::Val::int32:
      return lo ? "(-2147483647 - 1)" : "2147483647";
    case Dtype::Val::int64:
      return lo ? "(-9223372036854775807ll - 1)" : "9223372036854775807ll";
    case Dtype::Val::uint8:
      return lo ? "0u" : "255u";
    case Dtype::Val::uint16:
      return lo ? "0u" : "65535u";
    case Dtype::Val::uint32:
      return lo ? "0u" : "4294967295u";
    default:
      return lo ? "0ull" : "18446744073709551615ull";
  }
}

std::string op_expr(Dtype d, int op) {
  if (d == bool_) return (op == 0 || op == 2) ? "(a | b)" : "(a & b)";
  switch (op) {
    case 0:
      return "(a + b)";
    case 1:
      return "(a * b)";
    case 2:
      return "((b > a || b != b) ? b : a)";
    default:
      return "((b < a || b != b) ? b : a)";
  }
}

std::string scan_source(const std::string& name, Dtype d, int op) {
  std::string st = storage_type(d), at = acc_type(d);
  std::string src = jit_prelude();
  src += "typedef " + at + " AT;\ntypedef " + st + " ST;\n";
  src += "#define LOOM_ID ((AT)" + identity(d, op) + ")\n";
  src +=
      "__device__ __forceinline__ AT loom_op(AT a, AT b) { return (AT)" + op_expr(d, op) + "; }\n";
  src += "__device__ __forceinline__ AT loom_in(const ST* p) { return (AT)loom_ld(*p); }\n";
  // One block per row of the last axis.
  src += R"(
extern "C" __global__ void NAME_rows(const ST* __restrict__ in, ST* __restrict__ out, long long n,
                                     int reverse, int inclusive) {
  __shared__ AT warp_tot[32];
  const long long base = (long long)blockIdx.x * n;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  AT carry = LOOM_ID;
  for (long long t0 = 0; t0 < n; t0 += 4ll * blockDim.x) {
    AT v[4];
    const long long p0 = t0 + 4ll * threadIdx.x;
    AT local = LOOM_ID;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const long long p = p0 + q;
      v[q] = p < n ? loom_in(in + base + (reverse ? n - 1 - p : p)) : LOOM_ID;
      local = loom_op(local, v[q]);
    }
    AT incl = local;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      AT y = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl = loom_op(y, incl);
    }
    if (lane == 31) warp_tot[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      AT w = lane < nwarps ? warp_tot[lane] : LOOM_ID;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        AT y = __shfl_up_sync(0xffffffffu, w, o);
        if (lane >= o) w = loom_op(y, w);
      }
      if (lane < nwarps) warp_tot[lane] = w;
    }
    __syncthreads();
    AT before = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane == 0) before = LOOM_ID;
    AT run = loom_op(carry, loom_op(warp > 0 ? warp_tot[warp - 1] : LOOM_ID, before));
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const long long p = p0 + q;
      if (p >= n) break;
      ST* o = out + base + (reverse ? n - 1 - p : p);
      if (inclusive) { run = loom_op(run, v[q]); loom_st(o, run); }
      else { loom_st(o, run); run = loom_op(run, v[q]); }
    }
    carry = loom_op(carry, warp_tot[nwarps - 1]);
    __syncthreads();
  }
}
// One thread per column of another axis.
extern "C" __global__ void NAME_cols(const ST* __restrict__ in, ST* __restrict__ out, long long n,
                                     long long inner, long long cols, int reverse, int inclusive) {
  for (long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x; c < cols;
       c += (long long)gridDim.x * blockDim.x) {
    const long long base = (c / inner) * n * inner + c % inner;
    AT run = LOOM_ID;
    for (long long p = 0; p < n; ++p) {
      const long long at = base + (reverse ? n - 1 - p : p) * inner;
      const AT x = loom_in(in + at);
      if (inclusive) { run = loom_op(run, x); loom_st(out + at, run); }
      else { loom_st(out + at, run); run = loom_op(run, x); }
    }
  }
}
)";
  size_t pos;
  while ((pos = src.find("NAME_")) != std::string::npos) src.replace(pos, 4, name);
  return src;
}

bool scan_kernel(Primitive& prim, const std::vector<array>& inputs, std::vector<array>& outputs,
                 cudaStream_t s) {
  const int op = scan_op(prim.name());
  const array& in = inputs[0];
  array& out = outputs[0];
  const Dtype d = in.dtype();
  if (op < 0 || d == complex64 || storage_type(d) == nullptr || out.dtype() != d) return false;
  if (!in.flags().row_contiguous || in.data_size() != in.size()) return false;
  PrimitiveState st = prim.state();
  int axis = static_cast<int>(state_get<int64_t>(st, prim.name(), "axis"));
  const int reverse = state_get<bool>(st, prim.name(), "reverse") ? 1 : 0;
  const int inclusive = state_get<bool>(st, prim.name(), "inclusive") ? 1 : 0;
  if (axis < 0) axis += in.ndim();
  if (axis < 0 || axis >= in.ndim()) return false;
  void* y = alloc_output(out);
  if (out.size() == 0) return true;
  long long n = in.shape(axis), inner = 1;
  for (int i = axis + 1; i < in.ndim(); ++i) inner *= in.shape(i);
  long long cols = static_cast<long long>(in.size()) / n;
  const void* x = device_data(in, s);
  int rev = reverse, inc = inclusive;
  std::string name =
      "loom_scan_" + std::to_string(op) + "_" + std::to_string(static_cast<int>(d.val));
  // Short rows (or more rows than a grid holds): a thread per row.
  const bool by_rows = inner == 1 && n > 64 && cols <= 0x7fffffffll;
  std::string kname = name + (by_rows ? "_rows" : "_cols");
  cudaKernel_t k = jit_kernel(kname, [&] { return scan_source(name, d, op); });
  if (by_rows) {
    void* args[] = {&x, &y, &n, &rev, &inc};
    const unsigned threads =
        n >= 4096 ? 1024u : static_cast<unsigned>(std::max<long long>(32, (n / 4 + 31) / 32 * 32));
    check(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(cols)),
                           dim3(threads), args, 0, s),
          "cudaLaunchKernel (scan)");
  } else {
    void* args[] = {&x, &y, &n, &inner, &cols, &rev, &inc};
    launch_elementwise(k, static_cast<size_t>(cols), args, s);
  }
  return true;
}

struct Registration {
  Registration() { register_kernel(typeid(Scan), &scan_kernel); }
} registration;

} // namespace

std::string scan_kernel_source(const std::string& name, Dtype d, int op) {
  return scan_source(name, d, op);
}

} // namespace loom::cuda
