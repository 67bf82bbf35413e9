// Matrix products (OpenBLAS on the CPU).
#pragma once

#include "loom/array.h"

namespace loom {

// NumPy matmul semantics: 1-D operands are promoted and the added axis
// removed; leading (batch) dimensions broadcast. Floating types only.
array matmul(const array& a, const array& b, StreamOrDevice s = {});

} // namespace loom
