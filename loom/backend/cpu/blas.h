// The BLAS library, loaded when libloom loads rather than linked.
//
// OpenBLAS picks its kernels (its "core") once, when it is loaded. Builds
// such as Debian's 0.3.21 do not recognise newer CPUs (Sapphire Rapids, for
// one) and fall back to generic Prescott kernels, 4-8x slower on matrix
// products. Loading it here lets Loom choose the core from the CPU's features
// first (OPENBLAS_CORETYPE, unless the user set it), so every x86-64 machine
// runs its best kernels without a setting. Everything BLAS or LAPACK that Loom
// calls must go through this loader: a library linked directly (DT_NEEDED)
// would load OpenBLAS before Loom could choose.
#pragma once

#include <cblas.h>

#include <complex>
#include <cstddef>
#include <cstdint>

#include "loom/backend/cpu/blas_info.h"

namespace loom::cpu::blas {

// LAPACK's Fortran entry points (column-major, every argument by pointer;
// gfortran appends the lengths of character arguments). One type per routine
// family, templated on the element type; complex routines take their real
// workspaces as `R`.
template <typename T>
using getrf_t = void (*)(int*, int*, T*, int*, int*, int*);
template <typename T>
using getri_t = void (*)(int*, T*, int*, int*, T*, int*, int*);
template <typename T>
using gesv_t = void (*)(int*, int*, T*, int*, int*, T*, int*, int*);
template <typename T>
using trtri_t = void (*)(char*, char*, int*, T*, int*, int*, size_t, size_t);
template <typename T>
using potrf_t = void (*)(char*, int*, T*, int*, int*, size_t); // potrf and potri
template <typename T>
using geqrf_t = void (*)(int*, int*, T*, int*, T*, T*, int*, int*);
template <typename T>
using orgqr_t = void (*)(int*, int*, int*, T*, int*, T*, T*, int*, int*);
template <typename T>
using gesdd_t = void (*)(char*, int*, int*, T*, int*, T*, T*, int*, T*, int*, T*, int*, int*, int*,
                         size_t);
using cgesdd_t = void (*)(char*, int*, int*, std::complex<float>*, int*, float*,
                          std::complex<float>*, int*, std::complex<float>*, int*,
                          std::complex<float>*, int*, float*, int*, int*, size_t);
template <typename T>
using syevd_t = void (*)(char*, char*, int*, T*, int*, T*, T*, int*, int*, int*, int*, size_t,
                         size_t);
using cheevd_t = void (*)(char*, char*, int*, std::complex<float>*, int*, float*,
                          std::complex<float>*, int*, float*, int*, int*, int*, int*, size_t,
                          size_t);
template <typename T>
using geev_t = void (*)(char*, char*, int*, T*, int*, T*, T*, T*, int*, T*, int*, T*, int*, int*,
                        size_t, size_t);
using cgeev_t = void (*)(char*, char*, int*, std::complex<float>*, int*, std::complex<float>*,
                         std::complex<float>*, int*, std::complex<float>*, int*,
                         std::complex<float>*, int*, float*, int*, size_t, size_t);

// OpenBLAS's bfloat16 product (bfloat16 operands, float32 result). Only
// builds with BUILD_BFLOAT16 export it (Debian's 0.3.21 does not), so it is
// optional: nullptr when the loaded library lacks it.
using sbgemm_t = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, int, int, int, float,
                          const uint16_t*, int, const uint16_t*, int, float, float*, int);

template <typename T>
struct Lapack {
  getrf_t<T> getrf;
  getri_t<T> getri;
  gesv_t<T> gesv;
  trtri_t<T> trtri;
  potrf_t<T> potrf;
  potrf_t<T> potri;
  geqrf_t<T> geqrf;
  orgqr_t<T> orgqr;
  gesdd_t<T> gesdd;
  syevd_t<T> syevd;
  geev_t<T> geev;
};

struct Library {
  decltype(&cblas_sgemm) sgemm;
  decltype(&cblas_dgemm) dgemm;
  decltype(&cblas_cgemm) cgemm;
  decltype(&cblas_sgemv) sgemv;
  decltype(&cblas_dgemv) dgemv;
  decltype(&cblas_cgemv) cgemv;
  decltype(&openblas_set_num_threads) set_num_threads;
  decltype(&openblas_get_corename) corename;
  decltype(&openblas_get_config) config;
  sbgemm_t sbgemm = nullptr; // optional (see sbgemm_t)
  Lapack<float> s;
  Lapack<double> d;
  cgesdd_t cgesdd;
  cheevd_t cheevd;
  cgeev_t cgeev;
};

// Loads OpenBLAS (once, thread-safe) with the core chosen for this CPU; raises
// if it cannot be found. OpenBLAS runs single-threaded: kernels spread
// products over Loom's pool through backend/cpu/gemm.h, and LAPACK routines
// run on the calling thread.
const Library& library();

// Brackets calls into OpenBLAS; the bracket must take no Loom lock inside it.
// Exit: a thread may still be running when the process exits (a Python
// daemon thread's product). OpenBLAS's own destructor frees the buffers its
// GEMM packs into; libloom's exit handler (which runs before it) waits for
// the calls in flight, and a call that starts after it parks its thread for
// good instead of touching freed memory.
// Fork: OpenBLAS takes an internal lock to hand out its packing buffers; a
// fork() while another thread held it left the child hanging in its first
// product. fork() waits for the calls in flight, and none starts until the
// child and parent are apart.
class InFlight {
 public:
  InFlight();
  ~InFlight();
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
};

} // namespace loom::cpu::blas
