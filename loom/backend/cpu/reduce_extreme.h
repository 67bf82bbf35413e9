// Float32 max/min of a contiguous run for CPUs that have AVX2 but for which
// the build does not target AVX-512 (reduce.cpp has the AVX-512 form inline):
// compiled with a target attribute and chosen at run time.
#pragma once

#include <cstdint>

namespace loom::cpu {

// Whether the CPU running this has AVX2 (checked once).
bool has_avx2();

// max (or min) of x[0, n), n >= 1, NaN propagating; needs AVX2 (has_avx2()).
float extreme_f32_avx2(const float* x, int64_t n, bool max);

} // namespace loom::cpu
