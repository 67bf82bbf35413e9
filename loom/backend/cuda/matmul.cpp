// Matmul on the GPU: one strided-batched GEMM (gemm_util.h: cuBLASLt for
// float16/bfloat16, cuBLAS otherwise) for float32, float64, float16 and
// bfloat16 when each operand is a row-major or transposed matrix per batch
// with one batch stride (or a broadcast one); other layouts and complex run
// on the CPU fallback.
//
// float32 runs in strict float32 by default; LOOM_CUDA_TF32=1 selects TF32
// tensor-core products (MLX 0.32's CUDA backend uses TF32 for float32
// matmuls, about 1e-3 relative error on unit-scale data).
#include <algorithm>
#include <stdexcept>

#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/gemm_util.h"
#include "loom/primitives/linalg.h"

namespace loom::cuda {

namespace {

// An operand's matrix layout for cuBLAS: op, leading dimension and batch
// stride (0: one matrix shared by every batch).
struct Operand {
  bool ok = false;
  bool transposed = false; // column-major in memory (a transposed view)
  long long ld = 0;
  long long batch_stride = 0;
};

Operand describe(const array& x, int rows, int cols, long long batch) {
  Operand o;
  const int nd = x.ndim();
  long long rs, cs;
  if (nd == 1) {
    if (x.strides(0) != 1) return o;
    rs = rows == 1 ? cols : 1;
    cs = rows == 1 ? 1 : rows;
  } else {
    rs = x.strides(nd - 2);
    cs = x.strides(nd - 1);
  }
  // A stride along an axis of length 1 is free: pick the one that fits.
  if (cols == 1) cs = 1;
  if (rows == 1) rs = cs == 1 ? std::max(cols, 1) : 1;
  if (cs == 1 && rs >= std::max(cols, 1)) {
    o.ld = rs;
  } else if (rs == 1 && cs >= std::max(rows, 1)) {
    o.transposed = true;
    o.ld = cs;
  } else {
    return o;
  }
  // Batch axes: all broadcast (stride 0 or size 1) or one uniform stride.
  const int batch_axes = std::max(nd - 2, 0);
  long long count = 1;
  for (int d = 0; d < batch_axes; ++d) count *= x.shape(d);
  if (count == 1 || batch == 1) {
    o.batch_stride = 0;
  } else {
    if (count != batch) return o; // broadcast batch axes mixed with real ones
    long long expect = -1;
    for (int d = batch_axes - 1; d >= 0; --d) {
      if (x.shape(d) == 1) continue;
      if (expect < 0) {
        o.batch_stride = x.strides(d);
        expect = x.strides(d) * x.shape(d);
      } else if (x.strides(d) != expect) {
        return o;
      } else {
        expect *= x.shape(d);
      }
    }
  }
  o.ok = true;
  return o;
}

bool matmul_kernel(Primitive&, const std::vector<array>& inputs, std::vector<array>& outputs,
                   cudaStream_t s) {
  const array& a = inputs[0];
  const array& b = inputs[1];
  array& out = outputs[0];
  Dtype dt = out.dtype();
  if (a.dtype() != dt || b.dtype() != dt || !gemm_supported(dt)) return false;
  const int M = a.ndim() == 1 ? 1 : a.shape(-2);
  const int K = a.shape(-1);
  const int N = b.ndim() == 1 ? 1 : b.shape(-1);
  long long batch = 1;
  const int matrix_axes = (a.ndim() > 1) + (b.ndim() > 1);
  for (int d = 0; d < out.ndim() - matrix_axes; ++d) batch *= out.shape(d);
  Operand oa = describe(a, M, K, batch);
  Operand ob = describe(b, K, N, batch);
  if (!oa.ok || !ob.ok) return false;
  if (out.size() == 0) {
    alloc_output(out);
    return true;
  }
  const void* pa = device_data(a, s);
  const void* pb = device_data(b, s);
  void* pc = alloc_output(out);
  if (K == 0) {
    check(cudaMemsetAsync(pc, 0, out.nbytes(), s), "cudaMemsetAsync");
    return true;
  }
  // Row-major C = A B is column-major C^T = B^T A^T.
  if (!gemm(dt, ob.transposed, oa.transposed, N, M, K, pb, static_cast<int>(ob.ld), ob.batch_stride,
            pa, static_cast<int>(oa.ld), oa.batch_stride, pc, N, static_cast<long long>(M) * N,
            static_cast<int>(batch), s, "matmul")) {
    throw std::runtime_error("[matmul] no cuBLAS handle could be created on this thread.");
  }
  return true;
}

struct Registration {
  Registration() { register_kernel(typeid(Matmul), &matmul_kernel); }
} registration;

} // namespace
} // namespace loom::cuda
