// The backend's one GEMM: cuBLAS and cuBLASLt, loaded with dlopen on first
// use, behind one function that the Matmul kernel and the kernels that build
// their operands on the device (conv's im2col, quantized matmul's
// dequantized weight) all call. One loader, one handle per worker thread.
#pragma once

#include <cuda_runtime.h>

#include "loom/dtype.h"

namespace loom::cuda {

// Whether `gemm` can run dtype `d` here (the library loads, the dtype has a
// GEMM): callers ask before allocating anything, so that a false answer
// leaves the primitive to the CPU untouched.
bool gemm_supported(Dtype d);

// Column-major C (m x n, ldc) = op(A) op(B) for `batch` matrices, each
// operand `stride_*` elements after the previous (0: one matrix shared by
// every batch), in dtype `d`.
//
// float16 and bfloat16 (and float32 under LOOM_CUDA_TF32=1) run through
// cuBLASLt with float32 accumulation: a descriptor and layouts cached per
// shape, a workspace from the device pool, and the heuristic's candidates
// timed once per shape on large problems (the fastest is kept). float32 is
// strict FP32 otherwise, and float64 and the rest go through cuBLAS's
// strided-batched GEMM. LOOM_CUDA_LT=0 sends every dtype to the latter (to
// compare). Returns false, launching nothing, when cuBLAS is missing or the
// dtype has no GEMM; raises on a cuBLAS error.
bool gemm(Dtype d, bool trans_a, bool trans_b, int m, int n, int k, const void* a, int lda,
          long long stride_a, const void* b, int ldb, long long stride_b, void* c, int ldc,
          long long stride_c, int batch, cudaStream_t s, const char* op);

} // namespace loom::cuda
