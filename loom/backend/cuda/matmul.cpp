// Matmul through cuBLAS (loaded with dlopen on first use): one strided-batched
// GEMM for float32, float64, float16 and bfloat16 when each operand is a
// row-major or transposed matrix per batch with one batch stride (or a
// broadcast one); other layouts and complex run on the CPU fallback.
//
// float32 runs in strict float32 by default; LOOM_CUDA_TF32=1 selects TF32
// tensor-core products (MLX 0.32's CUDA backend uses TF32 for float32
// matmuls, about 1e-3 relative error on unit-scale data).
#include <cublas_v2.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "loom/backend/cuda/cuda.h"
#include "loom/primitives/linalg.h"

namespace loom::cuda {

namespace {

// The 32-bit-index form (the header overloads the name in C++).
using GemmFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                  int, const void*, const void*, cudaDataType, int, long long,
                                  const void*, cudaDataType, int, long long, const void*, void*,
                                  cudaDataType, int, long long, int, cublasComputeType_t,
                                  cublasGemmAlgo_t);

struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  GemmFn gemm = nullptr;
  bool ok() const { return create && set_stream && gemm; }
};

const Cublas& cublas() {
  static Cublas lib = [] {
    Cublas c;
    LibraryLoad loading;
    void* h = nullptr;
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                             "/usr/local/cuda/lib64/libcublas.so"}) {
      if ((h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    }
    if (h == nullptr) return c;
    close_before_teardown(); // after the library's own teardown was registered
    c.create = reinterpret_cast<decltype(c.create)>(dlsym(h, "cublasCreate_v2"));
    c.set_stream = reinterpret_cast<decltype(c.set_stream)>(dlsym(h, "cublasSetStream_v2"));
    c.gemm = reinterpret_cast<decltype(c.gemm)>(dlsym(h, "cublasGemmStridedBatchedEx"));
    return c;
  }();
  return lib;
}

// One handle per worker thread (a handle must not be used by two threads at
// once); each worker serves one stream.
cublasHandle_t handle_for(cudaStream_t s) {
  thread_local cublasHandle_t h = nullptr;
  thread_local cudaStream_t bound = nullptr;
  if (h == nullptr) {
    LibraryLoad loading; // a handle's creation loads cuBLAS's state
    if (cublas().create(&h) != CUBLAS_STATUS_SUCCESS) {
      h = nullptr;
      return nullptr;
    }
  }
  if (bound != s) {
    cublas().set_stream(h, s);
    bound = s;
  }
  return h;
}

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
  cudaDataType_t type;
  cublasComputeType_t compute;
  if (dt == float32) {
    type = CUDA_R_32F;
    static const bool tf32 = [] {
      const char* v = std::getenv("LOOM_CUDA_TF32");
      return v != nullptr && std::string(v) == "1";
    }();
    compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  } else if (dt == float64) {
    type = CUDA_R_64F;
    compute = CUBLAS_COMPUTE_64F;
  } else if (dt == float16) {
    type = CUDA_R_16F;
    compute = CUBLAS_COMPUTE_32F;
  } else if (dt == bfloat16) {
    type = CUDA_R_16BF;
    compute = CUBLAS_COMPUTE_32F;
  } else {
    return false;
  }
  if (a.dtype() != dt || b.dtype() != dt || !cublas().ok()) return false;
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
  cublasHandle_t h = handle_for(s);
  if (h == nullptr) return false;
  const void* pa = device_data(a, s);
  const void* pb = device_data(b, s);
  void* pc = alloc_output(out);
  if (K == 0) {
    check(cudaMemsetAsync(pc, 0, out.nbytes(), s), "cudaMemsetAsync");
    return true;
  }
  // Row-major C = A B is column-major C^T = B^T A^T.
  double alpha_d = 1.0, beta_d = 0.0;
  float alpha_f = 1.0f, beta_f = 0.0f;
  const void* alpha = dt == float64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = dt == float64 ? static_cast<const void*>(&beta_d) : &beta_f;
  // cuBLAS(Lt) sets its teardown up lazily (its kernel libraries load at a
  // type's first GEMM, which counts as a library load for the exit gate);
  // the gate's closing is registered after it, once per type.
  static std::atomic<uint64_t> seen{0};
  const uint64_t bit = uint64_t(1) << (static_cast<unsigned>(type) & 63);
  const bool first = (seen.load() & bit) == 0;
  std::optional<LibraryLoad> loading;
  if (first) loading.emplace();
  cublasStatus_t st = cublas().gemm(
      h, ob.transposed ? CUBLAS_OP_T : CUBLAS_OP_N, oa.transposed ? CUBLAS_OP_T : CUBLAS_OP_N, N, M,
      K, alpha, pb, type, static_cast<int>(ob.ld), ob.batch_stride, pa, type,
      static_cast<int>(oa.ld), oa.batch_stride, beta, pc, type, N, static_cast<long long>(M) * N,
      static_cast<int>(batch), compute, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error("[matmul] cuBLAS GEMM failed with status " + std::to_string(st) + ".");
  }
  if (first && (seen.fetch_or(bit) & bit) == 0) close_before_teardown();
  return true;
}

struct Registration {
  Registration() { register_kernel(typeid(Matmul), &matmul_kernel); }
} registration;

} // namespace
} // namespace loom::cuda
