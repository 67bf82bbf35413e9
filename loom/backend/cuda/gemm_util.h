// One cuBLAS GEMM for kernels that build their operands on the device
// (conv's im2col, quantized matmul's dequantized weight). matmul.cpp keeps
// its own path for the Matmul primitive.
#pragma once

#include <cuda_runtime.h>

#include "loom/dtype.h"

namespace loom::cuda {

// Column-major C (m x n, ldc) = op(A) op(B) for `batch` matrices, each
// operand `stride_*` elements after the previous, in dtype `d` (float32 as
// the Matmul kernel: strict FP32 unless LOOM_CUDA_TF32=1; float16/bfloat16
// accumulate in float32; float64). Returns false, launching nothing, when
// cuBLAS is missing or the dtype has no GEMM; raises on a cuBLAS error.
bool gemm(Dtype d, bool trans_a, bool trans_b, int m, int n, int k, const void* a, int lda,
          long long stride_a, const void* b, int ldb, long long stride_b, void* c, int ldc,
          long long stride_c, int batch, cudaStream_t s, const char* op);

} // namespace loom::cuda
