// What BLAS Loom runs (see blas.h): for tests, the benchmark runner and
// users who want to check that matrix products use the CPU's best kernels.
#pragma once

#include <string>

namespace loom::cpu::blas {

// The OpenBLAS core type chosen for this CPU's features ("Cooperlake",
// "SkylakeX", "Haswell"), or "" where OpenBLAS's own detection is trusted.
std::string preferred_core();

// The core OpenBLAS runs ("Cooperlake", "Haswell", ... or a generic one such
// as "Prescott") and its build configuration; loads OpenBLAS if needed.
std::string core_name();
std::string config();

} // namespace loom::cpu::blas
