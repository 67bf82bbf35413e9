// CPU kernels of the mx.linalg primitives through LAPACK (OpenBLAS's, loaded
// by backend/cpu/blas.cpp). LAPACK is column-major: a row-major matrix read
// as column-major is its transpose, which several kernels use to avoid
// copies (inv(Aᵀ) = inv(A)ᵀ; the SVD of Aᵀ swaps U and V). The others copy
// each matrix to column-major and back, O(n²) beside O(n³) work.
//
// Batches run matrix by matrix; small matrices spread over Loom's pool (each
// task its own workspace), large ones use OpenBLAS's threads.
#include "loom/primitives/linalg_decomp.h"

#include <algorithm>
#include <complex>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "loom/backend/cpu/blas.h"
#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/thread_pool.h"

namespace loom {

namespace {

using cfloat = std::complex<float>;

template <typename T>
const cpu::blas::Lapack<T>& lapack() {
  if constexpr (std::is_same_v<T, float>) {
    return cpu::blas::library().s;
  } else {
    return cpu::blas::library().d;
  }
}

// Square matrices at or below this size run one per pool task.
constexpr int kSmallMatrix = 96;

// Every LAPACK call runs inside `body`, bracketed by blas::InFlight (exit and
// fork wait for it). The bracket holds no Loom lock: outputs are allocated and
// inputs made contiguous before, outside it (see blas.h).
void for_each_matrix(int64_t count, int n, const std::function<void(int64_t, int64_t)>& body) {
  if (count > 1 && n <= kSmallMatrix && cpu::num_threads() > 1) {
    cpu::parallel_for(count, 1, [&](size_t b, size_t e) {
      const cpu::blas::InFlight lapack_calls;
      body(b, e);
    });
  } else {
    const cpu::blas::InFlight lapack_calls;
    body(0, count);
  }
}

template <typename T>
void to_col_major(const T* src, T* dst, int m, int n) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j)
      dst[static_cast<int64_t>(j) * m + i] = src[static_cast<int64_t>(i) * n + j];
  }
}

template <typename T>
void from_col_major(const T* src, T* dst, int m, int n) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j)
      dst[static_cast<int64_t>(i) * n + j] = src[static_cast<int64_t>(j) * m + i];
  }
}

// Zeros the strict upper (keep_lower) or strict lower triangle of a
// row-major n x n matrix.
template <typename T>
void zero_triangle(T* x, int n, bool keep_lower) {
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (keep_lower ? j > i : j < i) x[static_cast<int64_t>(i) * n + j] = T(0);
    }
  }
}

// A row-contiguous copy of the input's data in the output's buffer.
void copy_into(const array& in, array& out) {
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  array c = cpu::ensure_row_contiguous(in);
  std::memcpy(out.data<char>(), c.data<char>(), out.nbytes());
}

int64_t matrix_count(const array& a) {
  const int64_t per = static_cast<int64_t>(a.shape(-2)) * a.shape(-1);
  return per == 0 ? 0 : static_cast<int64_t>(a.size()) / per;
}

int64_t batch_count(const array& a) {
  int64_t c = 1;
  for (int d = 0; d < a.ndim() - 2; ++d) c *= a.shape(d);
  return c;
}

[[noreturn]] void lapack_failed(const char* prim, const char* what, int info) {
  throw std::runtime_error(std::string("[") + prim + "::eval_cpu] " + what +
                           " failed with error code " + std::to_string(info));
}

template <typename F>
void dispatch_real(Dtype d, const char* prim, F&& f) {
  if (d == float32) {
    f(float{});
  } else if (d == float64) {
    f(double{});
  } else {
    throw std::invalid_argument(std::string("[") + prim + "] Unsupported dtype " + dtype_name(d) +
                                ".");
  }
}

template <typename F>
void dispatch_inexact(Dtype d, const char* prim, F&& f) {
  if (d == complex64) {
    f(cfloat{});
  } else {
    dispatch_real(d, prim, std::forward<F>(f));
  }
}

} // namespace

// --- LU ------------------------------------------------------------------------

void LUF::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  const int m = a.shape(-2);
  const int n = a.shape(-1);
  const int k = std::min(m, n);
  array& lu = outputs[0];
  array& piv = outputs[1];
  array& perm = outputs[2];
  piv.set_data(allocator::allocate(piv.nbytes()));
  perm.set_data(allocator::allocate(perm.nbytes()));
  lu.set_data(allocator::allocate(lu.nbytes()));
  const int64_t batch = batch_count(a);
  uint32_t* pp = piv.data<uint32_t>();
  uint32_t* pr = perm.data<uint32_t>();
  if (m == 0 || n == 0) {
    for (int64_t b = 0; b < batch; ++b) {
      for (int i = 0; i < m; ++i) pr[b * m + i] = i;
    }
    return;
  }
  array c = cpu::ensure_row_contiguous(a);
  dispatch_real(a.dtype(), "LUF", [&](auto tag) {
    using T = decltype(tag);
    const T* src = c.data<T>();
    T* dst = lu.data<T>();
    for_each_matrix(batch, std::max(m, n), [&](int64_t begin, int64_t end) {
      std::vector<T> col(static_cast<size_t>(m) * n);
      std::vector<int> ipiv(k);
      std::vector<uint32_t> rows(m);
      for (int64_t b = begin; b < end; ++b) {
        const int64_t off = b * m * n;
        to_col_major(src + off, col.data(), m, n);
        int mm = m, nn = n, lda = m, info = 0;
        // info > 0 is an exactly singular U: still a factorization (MLX
        // returns it too).
        lapack<T>().getrf(&mm, &nn, col.data(), &lda, ipiv.data(), &info);
        if (info < 0) lapack_failed("LUF", "LU factorization", info);
        from_col_major(col.data(), dst + off, m, n);
        for (int i = 0; i < m; ++i) rows[i] = i;
        for (int i = 0; i < k; ++i) {
          pp[b * k + i] = static_cast<uint32_t>(ipiv[i] - 1);
          std::swap(rows[i], rows[ipiv[i] - 1]);
        }
        // rows[j] is the row of A at row j of L U; p is its inverse.
        for (int j = 0; j < m; ++j) pr[b * m + rows[j]] = static_cast<uint32_t>(j);
      }
    });
  });
}

// --- Inverse -------------------------------------------------------------------

void Inverse::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  copy_into(inputs[0], out);
  const int n = out.shape(-1);
  if (n == 0) return;
  const int64_t batch = matrix_count(out);
  dispatch_real(out.dtype(), "Inverse", [&](auto tag) {
    using T = decltype(tag);
    T* x = out.data<T>();
    for_each_matrix(batch, n, [&](int64_t begin, int64_t end) {
      std::vector<int> ipiv(n);
      std::vector<T> work;
      for (int64_t b = begin; b < end; ++b) {
        T* mat = x + b * n * n;
        int nn = n, lda = n, info = 0;
        if (tri_) {
          // The row-major lower triangle is LAPACK's upper one.
          char uplo = upper_ ? 'L' : 'U';
          char diag = 'N';
          lapack<T>().trtri(&uplo, &diag, &nn, mat, &lda, &info, 1, 1);
          if (info != 0) lapack_failed("Inverse", "triangular inversion", info);
          zero_triangle(mat, n, !upper_);
          continue;
        }
        // inv(Aᵀ) = inv(A)ᵀ: the transposed view inverts in place.
        lapack<T>().getrf(&nn, &nn, mat, &lda, ipiv.data(), &info);
        if (info != 0) lapack_failed("Inverse", "LU factorization", info);
        if (work.empty()) {
          T query{};
          int lwork = -1;
          lapack<T>().getri(&nn, mat, &lda, ipiv.data(), &query, &lwork, &info);
          work.resize(std::max<size_t>(1, static_cast<size_t>(query)));
        }
        int lwork = static_cast<int>(work.size());
        lapack<T>().getri(&nn, mat, &lda, ipiv.data(), work.data(), &lwork, &info);
        if (info != 0) lapack_failed("Inverse", "inversion", info);
      }
    });
  });
}

// --- Cholesky ------------------------------------------------------------------

void Cholesky::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  copy_into(inputs[0], out);
  const int n = out.shape(-1);
  if (n == 0) return;
  const int64_t batch = matrix_count(out);
  dispatch_real(out.dtype(), "Cholesky", [&](auto tag) {
    using T = decltype(tag);
    T* x = out.data<T>();
    for_each_matrix(batch, n, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        T* mat = x + b * n * n;
        char uplo = upper_ ? 'L' : 'U';
        int nn = n, lda = n, info = 0;
        lapack<T>().potrf(&uplo, &nn, mat, &lda, &info, 1);
        // info > 0: not positive definite. As MLX, the partial factor LAPACK
        // leaves is returned (docs/linalg.md).
        if (info < 0) lapack_failed("Cholesky", "Cholesky decomposition", info);
        zero_triangle(mat, n, !upper_);
      }
    });
  });
}

// --- QR ------------------------------------------------------------------------

void QRF::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  const int m = a.shape(-2);
  const int n = a.shape(-1);
  const int k = std::min(m, n);
  array& q = outputs[0];
  array& r = outputs[1];
  q.set_data(allocator::allocate(q.nbytes()));
  r.set_data(allocator::allocate(r.nbytes()));
  if (q.size() == 0 && r.size() == 0) return;
  if (k == 0) {
    std::memset(r.data<char>(), 0, r.nbytes());
    return;
  }
  array c = cpu::ensure_row_contiguous(a);
  const int64_t batch = batch_count(a);
  dispatch_real(a.dtype(), "QRF", [&](auto tag) {
    using T = decltype(tag);
    const T* src = c.data<T>();
    T* pq = q.data<T>();
    T* pr = r.data<T>();
    for_each_matrix(batch, std::max(m, n), [&](int64_t begin, int64_t end) {
      std::vector<T> col(static_cast<size_t>(m) * n), tau(k), work;
      for (int64_t b = begin; b < end; ++b) {
        to_col_major(src + b * m * n, col.data(), m, n);
        int mm = m, nn = n, kk = k, lda = m, info = 0;
        if (work.empty()) {
          T q1{}, q2{};
          int lwork = -1;
          lapack<T>().geqrf(&mm, &nn, col.data(), &lda, tau.data(), &q1, &lwork, &info);
          lapack<T>().orgqr(&mm, &kk, &kk, col.data(), &lda, tau.data(), &q2, &lwork, &info);
          work.resize(std::max<size_t>(1, static_cast<size_t>(std::max(q1, q2))));
        }
        int lwork = static_cast<int>(work.size());
        lapack<T>().geqrf(&mm, &nn, col.data(), &lda, tau.data(), work.data(), &lwork, &info);
        if (info != 0) lapack_failed("QRF", "QR factorization", info);
        // R: the upper trapezoid (k x n) of the factored matrix.
        T* rb = pr + b * k * n;
        for (int i = 0; i < k; ++i) {
          for (int j = 0; j < n; ++j) {
            rb[static_cast<int64_t>(i) * n + j] =
                j >= i ? col[static_cast<int64_t>(j) * m + i] : T(0);
          }
        }
        lapack<T>().orgqr(&mm, &kk, &kk, col.data(), &lda, tau.data(), work.data(), &lwork, &info);
        if (info != 0) lapack_failed("QRF", "forming Q", info);
        from_col_major(col.data(), pq + b * m * k, m, k);
      }
    });
  });
}

// --- SVD -----------------------------------------------------------------------

void SVD::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  const int m = a.shape(-2);
  const int n = a.shape(-1);
  const int k = std::min(m, n);
  for (auto& o : outputs) o.set_data(allocator::allocate(o.nbytes()));
  const int64_t batch = batch_count(a);
  array& s_out = compute_uv_ ? outputs[1] : outputs[0];
  if (k == 0) {
    // U and Vt of an empty matrix: identities of their sizes.
    if (compute_uv_) {
      dispatch_inexact(a.dtype(), "SVD", [&](auto tag) {
        using T = decltype(tag);
        for (int idx : {0, 2}) {
          const int d = idx == 0 ? m : n;
          T* p = outputs[idx].data<T>();
          for (int64_t b = 0; b < batch; ++b) {
            for (int i = 0; i < d * d; ++i) p[b * d * d + i] = (i % (d + 1) == 0) ? T(1) : T(0);
          }
        }
      });
    }
    return;
  }
  array c = cpu::ensure_row_contiguous(a);
  dispatch_inexact(a.dtype(), "SVD", [&](auto tag) {
    using T = decltype(tag);
    using R = std::conditional_t<std::is_same_v<T, cfloat>, float, T>;
    const T* src = c.data<T>();
    R* ps = s_out.data<R>();
    T* pu = compute_uv_ ? outputs[0].data<T>() : nullptr;
    T* pvt = compute_uv_ ? outputs[2].data<T>() : nullptr;
    for_each_matrix(batch, std::max(m, n), [&](int64_t begin, int64_t end) {
      // The row-major A is the column-major Aᵀ (n x m) = V S Uᴴ... for real
      // and complex alike up to conjugation, so the complex path transposes.
      constexpr bool complex = std::is_same_v<T, cfloat>;
      std::vector<T> mat(static_cast<size_t>(m) * n), work;
      std::vector<T> ub(compute_uv_ ? static_cast<size_t>(m) * m : 1);
      std::vector<T> vb(compute_uv_ ? static_cast<size_t>(n) * n : 1);
      std::vector<int> iwork(8 * static_cast<size_t>(k));
      std::vector<float> rwork;
      if constexpr (complex) {
        const size_t mx = std::max(m, n), mn = k;
        rwork.resize(compute_uv_ ? std::max(5 * mn * mn + 5 * mn, 2 * mx * mn + 2 * mn * mn + mn)
                                 : 7 * mn);
      }
      char jobz = compute_uv_ ? 'A' : 'N';
      for (int64_t b = begin; b < end; ++b) {
        const T* in = src + b * m * n;
        int info = 0;
        if constexpr (complex) {
          to_col_major(in, mat.data(), m, n);
          int mm = m, nn = n, lda = m, ldu = m, ldvt = n;
          auto call = [&](T* w, int lw) {
            cpu::blas::library().cgesdd(&jobz, &mm, &nn, mat.data(), &lda, ps + b * k, ub.data(),
                                        &ldu, vb.data(), &ldvt, w, &lw, rwork.data(), iwork.data(),
                                        &info, 1);
          };
          if (work.empty()) {
            T query{};
            call(&query, -1);
            work.resize(std::max<size_t>(1, static_cast<size_t>(query.real())));
          }
          call(work.data(), static_cast<int>(work.size()));
          if (info != 0) lapack_failed("SVD", "singular value decomposition", info);
          if (compute_uv_) {
            from_col_major(ub.data(), pu + b * m * m, m, m);
            from_col_major(vb.data(), pvt + b * n * n, n, n);
          }
        } else {
          // SVD of the column-major Aᵀ (n x m) = V S Uᵀ: its "U" (n x n,
          // column-major) read row-major is Vᵀ, its "Vᵀ" (m x m) read
          // row-major is U. No copies.
          std::memcpy(mat.data(), in, sizeof(T) * m * n);
          int mm = n, nn = m, lda = n, ldu = n, ldvt = m;
          T* u_dst = compute_uv_ ? pvt + b * n * n : vb.data();
          T* vt_dst = compute_uv_ ? pu + b * m * m : ub.data();
          auto call = [&](T* w, int lw) {
            lapack<T>().gesdd(&jobz, &mm, &nn, mat.data(), &lda, ps + b * k, u_dst, &ldu, vt_dst,
                              &ldvt, w, &lw, iwork.data(), &info, 1);
          };
          if (work.empty()) {
            T query{};
            call(&query, -1);
            work.resize(std::max<size_t>(1, static_cast<size_t>(query)));
          }
          call(work.data(), static_cast<int>(work.size()));
          if (info != 0) lapack_failed("SVD", "singular value decomposition", info);
        }
      }
    });
  });
}

// --- Eigh ----------------------------------------------------------------------

void Eigh::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  const int n = a.shape(-1);
  for (auto& o : outputs) o.set_data(allocator::allocate(o.nbytes()));
  if (n == 0) return;
  array c = cpu::ensure_row_contiguous(a);
  const int64_t batch = batch_count(a);
  dispatch_inexact(a.dtype(), "Eigh", [&](auto tag) {
    using T = decltype(tag);
    using R = std::conditional_t<std::is_same_v<T, cfloat>, float, T>;
    const T* src = c.data<T>();
    R* pw = outputs[0].data<R>();
    T* pv = compute_vectors_ ? outputs[1].data<T>() : nullptr;
    for_each_matrix(batch, n, [&](int64_t begin, int64_t end) {
      std::vector<T> col(static_cast<size_t>(n) * n), work;
      std::vector<R> rwork;
      std::vector<int> iwork;
      char jobz = compute_vectors_ ? 'V' : 'N';
      char uplo = uplo_[0];
      for (int64_t b = begin; b < end; ++b) {
        to_col_major(src + b * n * n, col.data(), n, n);
        int nn = n, lda = n, info = 0;
        auto call = [&](T* w, int lw, R* rw, int lrw, int* iw, int liw) {
          if constexpr (std::is_same_v<T, cfloat>) {
            cpu::blas::library().cheevd(&jobz, &uplo, &nn, col.data(), &lda, pw + b * n, w, &lw, rw,
                                        &lrw, iw, &liw, &info, 1, 1);
          } else {
            (void)rw;
            (void)lrw;
            lapack<T>().syevd(&jobz, &uplo, &nn, col.data(), &lda, pw + b * n, w, &lw, iw, &liw,
                              &info, 1, 1);
          }
        };
        if (work.empty()) {
          T wq{};
          R rq{};
          int iq = 0;
          call(&wq, -1, &rq, -1, &iq, -1);
          work.resize(std::max<size_t>(1, static_cast<size_t>(std::real(wq))));
          rwork.resize(std::max<size_t>(1, static_cast<size_t>(rq)));
          iwork.resize(std::max(1, iq));
        }
        call(work.data(), static_cast<int>(work.size()), rwork.data(),
             static_cast<int>(rwork.size()), iwork.data(), static_cast<int>(iwork.size()));
        if (info != 0) lapack_failed("Eigh", "eigen decomposition", info);
        if (compute_vectors_) from_col_major(col.data(), pv + b * n * n, n, n);
      }
    });
  });
}

// --- Eig -----------------------------------------------------------------------

void Eig::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  const int n = a.shape(-1);
  for (auto& o : outputs) o.set_data(allocator::allocate(o.nbytes()));
  if (n == 0) return;
  array c = cpu::ensure_row_contiguous(a);
  const int64_t batch = batch_count(a);
  cfloat* pw = outputs[0].data<cfloat>();
  cfloat* pv = compute_vectors_ ? outputs[1].data<cfloat>() : nullptr;
  dispatch_inexact(a.dtype(), "Eig", [&](auto tag) {
    using T = decltype(tag);
    const T* src = c.data<T>();
    for_each_matrix(batch, n, [&](int64_t begin, int64_t end) {
      const size_t nn2 = static_cast<size_t>(n) * n;
      std::vector<T> col(nn2), vr(compute_vectors_ ? nn2 : 1), work;
      std::vector<T> wr(n), wi(n);
      std::vector<float> rwork(2 * static_cast<size_t>(n));
      char jobvl = 'N';
      char jobvr = compute_vectors_ ? 'V' : 'N';
      for (int64_t b = begin; b < end; ++b) {
        to_col_major(src + b * nn2, col.data(), n, n);
        int nn = n, lda = n, ldvl = 1, ldvr = n, info = 0;
        T vl_dummy{};
        auto call = [&](T* w, int lw) {
          if constexpr (std::is_same_v<T, cfloat>) {
            cpu::blas::library().cgeev(&jobvl, &jobvr, &nn, col.data(), &lda, wr.data(), &vl_dummy,
                                       &ldvl, vr.data(), &ldvr, w, &lw, rwork.data(), &info, 1, 1);
          } else {
            lapack<T>().geev(&jobvl, &jobvr, &nn, col.data(), &lda, wr.data(), wi.data(), &vl_dummy,
                             &ldvl, vr.data(), &ldvr, w, &lw, &info, 1, 1);
          }
        };
        if (work.empty()) {
          T query{};
          call(&query, -1);
          work.resize(std::max<size_t>(1, static_cast<size_t>(std::real(query))));
        }
        call(work.data(), static_cast<int>(work.size()));
        if (info != 0) lapack_failed("Eig", "eigen decomposition", info);
        cfloat* w_out = pw + b * n;
        cfloat* v_out = compute_vectors_ ? pv + b * nn2 : nullptr;
        if constexpr (std::is_same_v<T, cfloat>) {
          std::copy(wr.begin(), wr.end(), w_out);
          if (compute_vectors_) from_col_major(vr.data(), v_out, n, n);
        } else {
          // Real LAPACK stores a conjugate pair's vectors as the real and
          // imaginary parts in two adjacent columns.
          for (int j = 0; j < n; ++j) {
            w_out[j] = cfloat(static_cast<float>(wr[j]), static_cast<float>(wi[j]));
          }
          if (!compute_vectors_) continue;
          for (int j = 0; j < n; ++j) {
            const bool pair = wi[j] != T(0) && j + 1 < n;
            for (int i = 0; i < n; ++i) {
              const T re = vr[static_cast<size_t>(j) * n + i];
              if (!pair) {
                v_out[static_cast<size_t>(i) * n + j] = cfloat(static_cast<float>(re), 0.0f);
                continue;
              }
              const T im = vr[static_cast<size_t>(j + 1) * n + i];
              v_out[static_cast<size_t>(i) * n + j] =
                  cfloat(static_cast<float>(re), static_cast<float>(im));
              v_out[static_cast<size_t>(i) * n + j + 1] =
                  cfloat(static_cast<float>(re), static_cast<float>(-im));
            }
            if (pair) ++j;
          }
        }
      }
    });
  });
}

// --- Solve ---------------------------------------------------------------------

void Solve::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  const array& bm = inputs[1];
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  const int n = a.shape(-1);
  const int k = bm.shape(-1);
  if (out.size() == 0) return;
  array ca = cpu::ensure_row_contiguous(a);
  array cb = cpu::ensure_row_contiguous(bm);
  const int64_t batch = batch_count(bm);
  dispatch_real(a.dtype(), "Solve", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = ca.data<T>();
    const T* pb = cb.data<T>();
    T* px = out.data<T>();
    for_each_matrix(batch, n, [&](int64_t begin, int64_t end) {
      std::vector<T> acol(static_cast<size_t>(n) * n), bcol(static_cast<size_t>(n) * k);
      std::vector<int> ipiv(n);
      for (int64_t b = begin; b < end; ++b) {
        to_col_major(pa + b * n * n, acol.data(), n, n);
        to_col_major(pb + b * n * k, bcol.data(), n, k);
        int nn = n, nrhs = k, lda = n, ldb = n, info = 0;
        lapack<T>().gesv(&nn, &nrhs, acol.data(), &lda, ipiv.data(), bcol.data(), &ldb, &info);
        if (info > 0) {
          throw std::runtime_error(
              "[Solve::eval_cpu] The matrix is singular: LU factorization "
              "failed with error code " +
              std::to_string(info));
        }
        if (info < 0) lapack_failed("Solve", "solve", info);
        from_col_major(bcol.data(), px + b * n * k, n, k);
      }
    });
  });
}

} // namespace loom
