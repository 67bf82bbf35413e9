// gemm_util.h's GEMM: cuBLAS loaded with dlopen on first use (the handle the
// Matmul kernel holds is private to matmul.cpp; a worker thread then holds
// two handles, which cuBLAS allows).
#include "loom/backend/cuda/gemm_util.h"

#include <cublas_v2.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

#include "loom/backend/cuda/cuda.h"

namespace loom::cuda {

namespace {

using GemmFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                  int, const void*, const void*, cudaDataType, int, long long,
                                  const void*, cudaDataType, int, long long, const void*, void*,
                                  cudaDataType, int, long long, int, cublasComputeType_t,
                                  cublasGemmAlgo_t);

struct Lib {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  GemmFn gemm = nullptr;
  bool ok() const { return create && set_stream && gemm; }
};

const Lib& lib() {
  static Lib l = [] {
    Lib c;
    LibraryLoad loading;
    void* h = nullptr;
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                             "/usr/local/cuda/lib64/libcublas.so"}) {
      if ((h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    }
    if (h == nullptr) return c;
    close_before_teardown();
    c.create = reinterpret_cast<decltype(c.create)>(dlsym(h, "cublasCreate_v2"));
    c.set_stream = reinterpret_cast<decltype(c.set_stream)>(dlsym(h, "cublasSetStream_v2"));
    c.gemm = reinterpret_cast<decltype(c.gemm)>(dlsym(h, "cublasGemmStridedBatchedEx"));
    return c;
  }();
  return l;
}

cublasHandle_t handle_for(cudaStream_t s) {
  thread_local cublasHandle_t h = nullptr;
  thread_local cudaStream_t bound = nullptr;
  if (h == nullptr) {
    LibraryLoad loading;
    if (lib().create(&h) != CUBLAS_STATUS_SUCCESS) {
      h = nullptr;
      return nullptr;
    }
  }
  if (bound != s) {
    lib().set_stream(h, s);
    bound = s;
  }
  return h;
}

} // namespace

bool gemm(Dtype d, bool trans_a, bool trans_b, int m, int n, int k, const void* a, int lda,
          long long stride_a, const void* b, int ldb, long long stride_b, void* c, int ldc,
          long long stride_c, int batch, cudaStream_t s, const char* op) {
  cudaDataType type;
  cublasComputeType_t compute;
  if (d == float32) {
    type = CUDA_R_32F;
    static const bool tf32 = [] {
      const char* v = std::getenv("LOOM_CUDA_TF32");
      return v != nullptr && std::string(v) == "1";
    }();
    compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  } else if (d == float64) {
    type = CUDA_R_64F;
    compute = CUBLAS_COMPUTE_64F;
  } else if (d == float16) {
    type = CUDA_R_16F;
    compute = CUBLAS_COMPUTE_32F;
  } else if (d == bfloat16) {
    type = CUDA_R_16BF;
    compute = CUBLAS_COMPUTE_32F;
  } else {
    return false;
  }
  if (!lib().ok()) return false;
  cublasHandle_t h = handle_for(s);
  if (h == nullptr) return false;
  double alpha_d = 1.0, beta_d = 0.0;
  float alpha_f = 1.0f, beta_f = 0.0f;
  const void* alpha = d == float64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = d == float64 ? static_cast<const void*>(&beta_d) : &beta_f;
  // The first GEMM of a type loads kernels: the exit gate waits for it.
  static std::atomic<uint64_t> seen{0};
  const uint64_t bit = uint64_t(1) << (static_cast<unsigned>(type) & 63);
  const bool first = (seen.load() & bit) == 0;
  std::optional<LibraryLoad> loading;
  if (first) loading.emplace();
  cublasStatus_t st =
      lib().gemm(h, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, m, n,
                 k, alpha, a, type, lda, stride_a, b, type, ldb, stride_b, beta, c, type, ldc,
                 stride_c, batch, compute, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("[") + op + "] cuBLAS GEMM failed with status " +
                             std::to_string(st) + ".");
  }
  if (first && (seen.fetch_or(bit) & bit) == 0) close_before_teardown();
  return true;
}

} // namespace loom::cuda
