// The BLAS library, loaded on first use rather than linked.
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

#include "loom/backend/cpu/blas_info.h"

namespace loom::cpu::blas {

struct Library {
  decltype(&cblas_sgemm) sgemm;
  decltype(&cblas_dgemm) dgemm;
  decltype(&cblas_cgemm) cgemm;
  decltype(&openblas_set_num_threads) set_num_threads;
  decltype(&openblas_get_corename) corename;
  decltype(&openblas_get_config) config;
};

// Loads OpenBLAS (once, thread-safe) with the core chosen for this CPU; raises
// if it cannot be found.
const Library& library();

} // namespace loom::cpu::blas
