#include "loom/backend/cpu/gemm.h"

#include <algorithm>
#include <type_traits>

#include "loom/backend/cpu/blas.h"
#include "loom/backend/cpu/gemm_tiles.h"
#include "loom/backend/cpu/thread_pool.h"

namespace loom::cpu {

namespace {

// Matrix elements a GEMV chunk reads at least: below it the product is
// over before a second thread has started.
constexpr int64_t kGemvGrain = int64_t{1} << 16;

// Panels are multiples of this many rows or columns, the width of OpenBLAS's
// AVX-512 micro-kernels, so no panel ends in a ragged edge but the last.
constexpr int64_t kPanelAlign = 16;

// Panels narrower than this do not pay for packing the other operand again.
constexpr int64_t kMinPanel = 32;

// Panels per pool thread: more than one lets a thread that finishes early
// take over work of one that was descheduled. Each GEMM panel packs the
// other operand again, so GEMM takes two; GEMV panels cost nothing extra.
constexpr int64_t kGemmPanelsPerThread = 2;
constexpr int64_t kGemvPanelsPerThread = 4;

CBLAS_TRANSPOSE op(bool t) { return t ? CblasTrans : CblasNoTrans; }

template <typename T>
void blas_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* a, int64_t lda,
               const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const auto& lib = blas::library();
  const blas::InFlight call;
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  const int la = static_cast<int>(lda), lb = static_cast<int>(ldb), lc = static_cast<int>(ldc);
  if constexpr (std::is_same_v<T, float>) {
    lib.sgemm(CblasRowMajor, op(ta), op(tb), m, n, k, alpha, a, la, b, lb, beta, c, lc);
  } else if constexpr (std::is_same_v<T, double>) {
    lib.dgemm(CblasRowMajor, op(ta), op(tb), m, n, k, alpha, a, la, b, lb, beta, c, lc);
  } else {
    lib.cgemm(CblasRowMajor, op(ta), op(tb), m, n, k, &alpha, a, la, b, lb, &beta, c, lc);
  }
}

// y = alpha op(A) x + beta y for a row-major A of rows x cols.
template <typename T>
void blas_gemv(bool trans, int64_t rows, int64_t cols, T alpha, const T* a, int64_t lda, const T* x,
               int64_t incx, T beta, T* y, int64_t incy) {
  const auto& lib = blas::library();
  const blas::InFlight call;
  const int r = static_cast<int>(rows), c = static_cast<int>(cols), la = static_cast<int>(lda);
  const int ix = static_cast<int>(incx), iy = static_cast<int>(incy);
  if constexpr (std::is_same_v<T, float>) {
    lib.sgemv(CblasRowMajor, op(trans), r, c, alpha, a, la, x, ix, beta, y, iy);
  } else if constexpr (std::is_same_v<T, double>) {
    lib.dgemv(CblasRowMajor, op(trans), r, c, alpha, a, la, x, ix, beta, y, iy);
  } else {
    lib.cgemv(CblasRowMajor, op(trans), r, c, &alpha, a, la, x, ix, &beta, y, iy);
  }
}

// Splits [0, n) into at most `per_thread` panels per pool thread, of
// `align` multiples and at least `min` wide, and runs body(begin, end) for
// each; threads take panels as they come free.
template <typename F>
void over_panels(int64_t n, int64_t min, int64_t align, int64_t per_thread, F&& body) {
  const int64_t threads = num_threads();
  int64_t panels = std::min<int64_t>(threads * per_thread, std::max<int64_t>(1, n / min));
  int64_t width = (n + panels - 1) / panels;
  width = std::min(n, (width + align - 1) / align * align);
  panels = (n + width - 1) / width;
  if (panels <= 1) {
    body(0, n);
    return;
  }
  parallel_chunks(static_cast<size_t>(panels), [&](size_t p) {
    const int64_t begin = static_cast<int64_t>(p) * width;
    body(begin, std::min(n, begin + width));
  });
}

// A product with one output row or column: y = op(stored matrix) x.
template <typename T>
void gemv_product(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* a,
                  int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  // The matrix, the vector and the output as GEMV sees them.
  const T* mat;
  const T* x;
  int64_t ld, incx, incy, outputs;
  bool outputs_are_rows; // of the stored matrix (GEMV without transpose)
  if (M == 1) {
    // c (1 x N) = a (1 x K) op(B): the outputs are B's columns of op(B).
    mat = b;
    ld = ldb;
    outputs_are_rows = tb;
    x = a;
    incx = ta ? lda : 1;
    incy = 1;
    outputs = N;
  } else {
    // c (M x 1) = op(A) b (K x 1).
    mat = a;
    ld = lda;
    outputs_are_rows = !ta;
    x = b;
    incx = tb ? 1 : ldb;
    incy = ldc;
    outputs = M;
  }
  // BLAS scales y by beta first; an uninitialised y may hold NaNs that a
  // multiply by zero keeps.
  if (beta == T(0)) {
    for (int64_t i = 0; i < outputs; ++i) c[i * incy] = T(0);
  }
  auto run = [&](int64_t o0, int64_t o1) {
    const int64_t n = o1 - o0;
    if (outputs_are_rows) {
      blas_gemv<T>(false, n, K, alpha, mat + o0 * ld, ld, x, incx, beta, c + o0 * incy, incy);
    } else {
      blas_gemv<T>(true, K, n, alpha, mat + o0, ld, x, incx, beta, c + o0 * incy, incy);
    }
  };
  if (in_parallel_region() || outputs * K < 2 * kGemvGrain) {
    run(0, outputs);
    return;
  }
  const int64_t min = std::max<int64_t>(kPanelAlign, kGemvGrain / std::max<int64_t>(K, 1));
  over_panels(outputs, min, kPanelAlign, kGemvPanelsPerThread, run);
}

} // namespace

template <typename T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    // No terms: C = beta C (BLAS would also insist on leading dimensions >= 1).
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    }
    return;
  }
  if (M == 1 || N == 1) {
    gemv_product<T>(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (gemm_f32_native_suits(M, N, K)) {
      gemm_f32_native(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
  }
  if (!splits_over_pool(M, N, K)) {
    blas_gemm<T>(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Split the longer side: each row panel packs all of op(B) (K x N) again,
  // each column panel all of op(A) (M x K), so the panels of the longer side
  // repack the smaller operand. A side too short for two panels is not split.
  const bool rows_split = M >= 2 * kMinPanel, cols_split = N >= 2 * kMinPanel;
  if (!rows_split && !cols_split) {
    blas_gemm<T>(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (rows_split && (M >= N || !cols_split)) {
    over_panels(M, kMinPanel, kPanelAlign, kGemmPanelsPerThread, [&](int64_t m0, int64_t m1) {
      const T* pa = ta ? a + m0 : a + m0 * lda;
      blas_gemm<T>(ta, tb, m1 - m0, N, K, alpha, pa, lda, b, ldb, beta, c + m0 * ldc, ldc);
    });
  } else {
    over_panels(N, kMinPanel, kPanelAlign, kGemmPanelsPerThread, [&](int64_t n0, int64_t n1) {
      const T* pb = tb ? b + n0 * ldb : b + n0;
      blas_gemm<T>(ta, tb, M, n1 - n0, K, alpha, a, lda, pb, ldb, beta, c + n0, ldc);
    });
  }
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);
template void gemm<std::complex<float>>(bool, bool, int64_t, int64_t, int64_t, std::complex<float>,
                                        const std::complex<float>*, int64_t,
                                        const std::complex<float>*, int64_t, std::complex<float>,
                                        std::complex<float>*, int64_t);

} // namespace loom::cpu
