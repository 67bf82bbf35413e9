// Matrix products for CPU kernels: every GEMM and GEMV Loom runs goes
// through here.
//
// OpenBLAS is loaded single-threaded (blas.cpp): its own thread pool hangs
// fork() and interpreter exit (issue 7), and its thread count is one setting
// for the whole process, so kernels that wanted it single-threaded had to
// toggle it under other streams' feet. Instead a large product is cut into
// panels along its longer side (rows of C when M >= N, else columns: each
// panel repacks the other operand, so this repacks the smaller one), one single-threaded BLAS
// call per panel, spread over Loom's intra-op pool. Inside a parallel region
// (attention heads, a batch of small products) a call runs on its thread.
// On CPUs with AVX-512F, float32 products whose op(B) fits 16 MB run Loom's
// own kernel instead (gemm_f32.cpp): it packs op(B) once for all threads.
#pragma once

#include <complex>
#include <cstdint>

namespace loom::cpu {

// Row-major C = alpha op(A) op(B) + beta C, where op(A) is M x K and op(B)
// K x N; `ta`/`tb` say the operand is stored transposed (K x M, N x K).
// beta == 0 never reads C. Products with M == 1 or N == 1 run as GEMV.
template <typename T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

extern template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*,
                                 int64_t, const float*, int64_t, float, float*, int64_t);
extern template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*,
                                  int64_t, const double*, int64_t, double, double*, int64_t);
extern template void gemm<std::complex<float>>(bool, bool, int64_t, int64_t, int64_t,
                                               std::complex<float>, const std::complex<float>*,
                                               int64_t, const std::complex<float>*, int64_t,
                                               std::complex<float>, std::complex<float>*, int64_t);

// float32 products through Loom's own AVX-512 kernel (gemm_f32.cpp), which
// gemm<float> takes where it suits: a CPU with AVX-512F, M of at least 2, N
// of at least one 32-column panel, at least 2M multiply-adds (OpenBLAS's
// small-matrix kernels win below), and op(B) of at most 16 MB (it is packed
// whole, once, for all threads).
bool gemm_f32_native_suits(int64_t M, int64_t N, int64_t K);
void gemm_f32_native(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* a,
                     int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// Turns the native float32 kernel off (every product through OpenBLAS) or on,
// for tests of both paths; returns the previous setting.
bool gemm_f32_native_enable(bool on);

// bfloat16 operands (raw bits), float32 result, float32 accumulation:
// C = op(A) op(B). A native AVX-512 BF16 kernel where the CPU has one,
// float32 panels through sgemm elsewhere.
void gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* a, int64_t lda,
               const uint16_t* b, int64_t ldb, float* c, int64_t ldc);

// bfloat16 operands and result: C = op(A) op(B) accumulated in float32 and
// rounded to bfloat16 once (nearest even), as gemm_bf16 followed by a
// conversion would give. With the native kernel and K of at most 2048 (one
// k block) the tiles are rounded as they are written: no float32 C.
void gemm_bf16_rounded(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* a,
                       int64_t lda, const uint16_t* b, int64_t ldb, uint16_t* c, int64_t ldc);

// float16 operands (raw bits), float32 result: panels converted to float32
// in blocks that stay in cache, each fed to sgemm.
void gemm_f16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* a, int64_t lda,
              const uint16_t* b, int64_t ldb, float* c, int64_t ldc);

// Whether this CPU runs the native bfloat16 kernel (AVX-512 BF16).
bool has_native_bf16();

} // namespace loom::cpu
