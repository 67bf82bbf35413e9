// Matrix products (OpenBLAS on the CPU).
#pragma once

#include <vector>

#include "loom/array.h"

namespace loom {

// NumPy matmul semantics: 1-D operands are promoted and the added axis
// removed; leading (batch) dimensions broadcast. Floating types only.
array matmul(const array& a, const array& b, StreamOrDevice s = {});

// --- Composites ---

// Sum-product over the last `axes` axes of a and the first `axes` of b.
array tensordot(const array& a, const array& b, int axes = 2, StreamOrDevice s = {});
// Sum-product over explicit, paired lists of axes.
array tensordot(const array& a, const array& b, const std::vector<int>& axes_a,
                const std::vector<int>& axes_b, StreamOrDevice s = {});
// Sum-product over the last axes (a product with a 0-d operand).
array inner(const array& a, const array& b, StreamOrDevice s = {});
// The outer product of the flattened inputs.
array outer(const array& a, const array& b, StreamOrDevice s = {});
// sum(conj(a) * b) along `axis`, the inputs broadcast.
array vecdot(const array& a, const array& b, int axis = -1, StreamOrDevice s = {});
// alpha * (a @ b) + beta * c.
array addmm(const array& c, const array& a, const array& b, float alpha = 1.0f, float beta = 1.0f,
            StreamOrDevice s = {});
// The Kronecker product.
array kron(const array& a, const array& b, StreamOrDevice s = {});

} // namespace loom
