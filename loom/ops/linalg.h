// Matrix products (OpenBLAS on the CPU).
#pragma once

#include <optional>
#include <string>
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

// --- The matmul family ---

// matmul of the matrices of a and b picked by flat indices into their batch
// dimensions (all but the last two); absent indices enumerate the batch. The
// output batch shape is the broadcast of the two index shapes.
array gather_mm(const array& a, const array& b, std::optional<array> lhs_indices = std::nullopt,
                std::optional<array> rhs_indices = std::nullopt, bool sorted_indices = false,
                StreamOrDevice s = {});
// One product per segment [start, end) of the inner dimension:
// out[..., :, :] = a[:, start:end] @ b[start:end, :], for segments (..., 2).
array segmented_mm(const array& a, const array& b, const array& segments, StreamOrDevice s = {});
// matmul with block_size x block_size blocks of the inputs and the output
// scaled by (or, for boolean masks, kept where) their masks.
array block_masked_mm(const array& a, const array& b, int block_size = 64,
                      std::optional<array> mask_out = std::nullopt,
                      std::optional<array> mask_lhs = std::nullopt,
                      std::optional<array> mask_rhs = std::nullopt, StreamOrDevice s = {});

// --- mx.linalg (ops/linalg_decomp.cpp) ---
//
// Matrices are the last two axes; leading axes are a batch. The LAPACK ops
// run on the CPU only and raise MLX's error for a GPU stream.
namespace linalg {

// Vector or matrix norms (NumPy's ord rules): ord nullopt is the 2-norm of
// the flattened array (or of each vector / the Frobenius norm along `axis`).
array norm(const array& a, std::optional<double> ord = std::nullopt,
           std::optional<std::vector<int>> axis = std::nullopt, bool keepdims = false,
           StreamOrDevice s = {});
// ord "fro" or "nuc" (matrices only).
array norm(const array& a, const std::string& ord,
           std::optional<std::vector<int>> axis = std::nullopt, bool keepdims = false,
           StreamOrDevice s = {});

std::vector<array> qr(const array& a, StreamOrDevice s = {});  // {Q, R}
std::vector<array> svd(const array& a, bool compute_uv = true, // {U, S, Vt} or {S}
                       StreamOrDevice s = {});
array inv(const array& a, StreamOrDevice s = {});
array tri_inv(const array& a, bool upper = false, StreamOrDevice s = {});
array pinv(const array& a, StreamOrDevice s = {});
array cholesky(const array& a, bool upper = false, StreamOrDevice s = {});
// The inverse of A from its Cholesky factor (A = L Lᵀ, or Uᵀ U with upper).
array cholesky_inv(const array& l, bool upper = false, StreamOrDevice s = {});
std::vector<array> eig(const array& a, StreamOrDevice s = {}); // {w, V}, complex64
array eigvals(const array& a, StreamOrDevice s = {});
std::vector<array> eigh(const array& a, const std::string& uplo = "L", StreamOrDevice s = {});
array eigvalsh(const array& a, const std::string& uplo = "L", StreamOrDevice s = {});
std::vector<array> lu(const array& a, StreamOrDevice s = {});        // {p, L, U}
std::vector<array> lu_factor(const array& a, StreamOrDevice s = {}); // {LU, pivots}
array solve(const array& a, const array& b, StreamOrDevice s = {});
array solve_triangular(const array& a, const array& b, bool upper = false, StreamOrDevice s = {});
array cross(const array& a, const array& b, int axis = -1, StreamOrDevice s = {});
array det(const array& a, StreamOrDevice s = {});
std::vector<array> slogdet(const array& a, StreamOrDevice s = {}); // {sign, log|det|}

} // namespace linalg

} // namespace loom
