// matmul: NumPy shape rules and MLX's dtype rules (inexact types only).
#include "loom/ops/linalg.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gather.h"
#include "loom/ops/reduce.h"
#include "loom/ops/shape.h"
#include "loom/ops/slice.h"
#include "loom/ops/utils.h"
#include "loom/primitives/linalg.h"
#include "loom/primitives/unary.h"

namespace loom {

array matmul(const array& a_in, const array& b_in, StreamOrDevice s) {
  if (a_in.ndim() == 0 || b_in.ndim() == 0) {
    throw std::invalid_argument(
        "[matmul] Got 0 dimension input. Inputs must have at least one dimension.");
  }
  // The error names the shapes after 1-D promotion, as MLX does.
  Shape a2 = a_in.ndim() == 1 ? Shape{1, a_in.shape(0)} : a_in.shape();
  Shape b2 = b_in.ndim() == 1 ? Shape{b_in.shape(0), 1} : b_in.shape();
  if (a2.back() != b2[b2.size() - 2]) {
    throw std::invalid_argument("[matmul] Last dimension of first input with shape " +
                                shape_to_string(a2) +
                                " must match second to last dimension of second input with shape " +
                                shape_to_string(b2) + ".");
  }
  const Dtype dtype = promote_types(a_in.dtype(), b_in.dtype());
  if (!is_inexact(dtype)) {
    throw std::invalid_argument("[matmul] Only inexact types are supported but " +
                                dtype_name(a_in.dtype()) + " and " + dtype_name(b_in.dtype()) +
                                " were provided which results in " + dtype_name(dtype) +
                                ", which is not a floating point type.");
  }
  Shape out_shape = matmul_shape(a_in.shape(), b_in.shape()); // checks the batch broadcast
  array a = a_in.dtype() == dtype ? a_in : astype(a_in, dtype, s);
  array b = b_in.dtype() == dtype ? b_in : astype(b_in, dtype, s);
  return array(std::move(out_shape), dtype, std::make_shared<Matmul>(to_stream(s)), {a, b});
}

// --- composites ---

array tensordot(const array& a, const array& b, const std::vector<int>& axes_a,
                const std::vector<int>& axes_b, StreamOrDevice s) {
  if (axes_a.size() != axes_b.size()) {
    throw std::invalid_argument("[tensordot] Both axis lists must have the same length (got " +
                                std::to_string(axes_a.size()) + " and " +
                                std::to_string(axes_b.size()) + ").");
  }
  std::vector<int> axa = normalize_axes(axes_a, a.ndim(), "tensordot");
  std::vector<int> axb = normalize_axes(axes_b, b.ndim(), "tensordot");
  std::vector<bool> in_a(a.ndim(), false), in_b(b.ndim(), false);
  int64_t contracted = 1;
  for (size_t i = 0; i < axa.size(); ++i) {
    if (a.shape(axa[i]) != b.shape(axb[i])) {
      throw std::invalid_argument(
          "[tensordot] a and b have different sizes on the contracted "
          "axes (shapes " +
          shape_to_string(a.shape()) + " and " + shape_to_string(b.shape()) + ").");
    }
    in_a[axa[i]] = in_b[axb[i]] = true;
    contracted *= a.shape(axa[i]);
  }
  // Free axes of a, then the contracted ones; contracted axes of b, then its
  // free ones: one matrix product.
  std::vector<int> perm_a, perm_b;
  Shape out_shape;
  int64_t free_a = 1, free_b = 1;
  for (int i = 0; i < a.ndim(); ++i) {
    if (in_a[i]) continue;
    perm_a.push_back(i);
    out_shape.push_back(a.shape(i));
    free_a *= a.shape(i);
  }
  perm_a.insert(perm_a.end(), axa.begin(), axa.end());
  perm_b.insert(perm_b.end(), axb.begin(), axb.end());
  for (int i = 0; i < b.ndim(); ++i) {
    if (in_b[i]) continue;
    perm_b.push_back(i);
    out_shape.push_back(b.shape(i));
    free_b *= b.shape(i);
  }
  array a2 = reshape(transpose(a, perm_a, s),
                     {static_cast<int32_t>(free_a), static_cast<int32_t>(contracted)}, s);
  array b2 = reshape(transpose(b, perm_b, s),
                     {static_cast<int32_t>(contracted), static_cast<int32_t>(free_b)}, s);
  return reshape(matmul(a2, b2, s), out_shape, s);
}

array tensordot(const array& a, const array& b, int axes, StreamOrDevice s) {
  if (axes < 0 || axes > a.ndim() || axes > b.ndim()) {
    throw std::invalid_argument(
        "[tensordot] axes must be between 0 and the number of dimensions of both inputs (got " +
        std::to_string(axes) + " for shapes " + shape_to_string(a.shape()) + " and " +
        shape_to_string(b.shape()) + ").");
  }
  std::vector<int> axa, axb;
  for (int i = 0; i < axes; ++i) {
    axa.push_back(a.ndim() - axes + i);
    axb.push_back(i);
  }
  return tensordot(a, b, axa, axb, s);
}

array inner(const array& a, const array& b, StreamOrDevice s) {
  if (a.ndim() == 0 || b.ndim() == 0) return multiply(a, b, s);
  if (a.shape(-1) != b.shape(-1)) {
    throw std::invalid_argument("[inner] a and b must have the same last dimension (shapes " +
                                shape_to_string(a.shape()) + " and " + shape_to_string(b.shape()) +
                                ").");
  }
  return tensordot(a, b, {-1}, {-1}, s);
}

array outer(const array& a, const array& b, StreamOrDevice s) {
  return multiply(reshape(a, {-1, 1}, s), reshape(b, {1, -1}, s), s);
}

array vecdot(const array& a, const array& b, int axis, StreamOrDevice s) {
  // The first operand is conjugated (the Hermitian inner product).
  array x = is_complex(a.dtype()) ? conj_if_complex(a, to_stream(s)) : a;
  return sum(multiply(x, b, s), std::vector<int>{axis}, false, s);
}

array addmm(const array& c, const array& a, const array& b, float alpha, float beta,
            StreamOrDevice s) {
  array ab = matmul(a, b, s);
  Dtype d = ab.dtype();
  if (alpha != 1.0f) ab = multiply(ab, array(alpha, d), s);
  array cc = beta != 1.0f ? multiply(c, array(beta, d), s) : c;
  return add(ab, cc, s);
}

array kron(const array& a, const array& b, StreamOrDevice s) {
  // Interleave the axes: a as (d0, 1, d1, 1, ...), b as (1, e0, 1, e1, ...).
  int nd = std::max(a.ndim(), b.ndim());
  Shape sa(nd - a.ndim(), 1), sb(nd - b.ndim(), 1);
  sa.insert(sa.end(), a.shape().begin(), a.shape().end());
  sb.insert(sb.end(), b.shape().begin(), b.shape().end());
  Shape ea, eb, out;
  for (int i = 0; i < nd; ++i) {
    ea.insert(ea.end(), {sa[i], 1});
    eb.insert(eb.end(), {1, sb[i]});
    out.push_back(sa[i] * sb[i]);
  }
  return reshape(multiply(reshape(a, ea, s), reshape(b, eb, s), s), out, s);
}

// --- the matmul family ---

namespace {

bool is_index_type(Dtype d) { return is_integral(d) && d != bool_; }

// The common inexact dtype of a matmul-like op, with matmul's error.
Dtype matmul_dtype(const array& a, const array& b) {
  const Dtype dtype = promote_types(a.dtype(), b.dtype());
  if (!is_inexact(dtype)) {
    throw std::invalid_argument("[matmul] Only inexact types are supported but " +
                                dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()) +
                                " were provided which results in " + dtype_name(dtype) +
                                ", which is not a floating point type.");
  }
  return dtype;
}

void check_inner(const Shape& a, const Shape& b, const char* op) {
  if (a.back() != b[b.size() - 2]) {
    throw std::invalid_argument(std::string("[") + op + "] Last dimension of first input with shape " +
                                shape_to_string(a) +
                                " must match second to last dimension of second input with shape " +
                                shape_to_string(b) + ".");
  }
}

} // namespace

array gather_mm(const array& a_in, const array& b_in, std::optional<array> lhs_indices,
                std::optional<array> rhs_indices, bool sorted_indices, StreamOrDevice s) {
  for (const auto* idx : {&lhs_indices, &rhs_indices}) {
    if (*idx && !is_index_type((*idx)->dtype())) {
      throw std::invalid_argument(
          "[gather_mm] Got indices with invalid dtype. Indices must be integral.");
    }
  }
  if (a_in.ndim() == 0 || b_in.ndim() == 0) {
    throw std::invalid_argument(
        "[gather_mm] Got 0 dimension input. Inputs must have at least one dimension.");
  }
  const bool row = a_in.ndim() == 1;
  const bool col = b_in.ndim() == 1;
  array a = row ? reshape(a_in, {1, a_in.shape(0)}, s) : a_in;
  array b = col ? reshape(b_in, {b_in.shape(0), 1}, s) : b_in;
  check_inner(a.shape(), b.shape(), "matmul");
  const Dtype dtype = matmul_dtype(a, b);
  // Absent indices enumerate the operand's batch, in its batch shape.
  auto indices = [&](const array& x, const std::optional<array>& idx) {
    if (idx) return astype(*idx, uint32, s);
    Shape batch(x.shape().begin(), x.shape().end() - 2);
    int64_t n = 1;
    for (int d : batch) n *= d;
    return reshape(arange(0, n, 1, uint32, s), batch, s);
  };
  array li = indices(a, lhs_indices);
  array ri = indices(b, rhs_indices);
  Shape idx_shape = broadcast_shapes(li.shape(), ri.shape());
  li = broadcast_to(li, idx_shape, s);
  ri = broadcast_to(ri, idx_shape, s);
  // The kernel sees each operand as a flat stack of matrices.
  a = astype(reshape(a, {-1, a.shape(-2), a.shape(-1)}, s), dtype, s);
  b = astype(reshape(b, {-1, b.shape(-2), b.shape(-1)}, s), dtype, s);
  Shape out_shape = idx_shape;
  out_shape.insert(out_shape.end(), {a.shape(-2), b.shape(-1)});
  array out(out_shape, dtype, std::make_shared<GatherMM>(to_stream(s), sorted_indices),
            {a, b, li, ri});
  if (row || col) {
    std::vector<int> drop;
    if (row) drop.push_back(out.ndim() - 2);
    if (col) drop.push_back(out.ndim() - 1);
    out = squeeze(out, drop, s);
  }
  return out;
}

array segmented_mm(const array& a_in, const array& b_in, const array& segments, StreamOrDevice s) {
  if (a_in.ndim() != 2 || b_in.ndim() != 2) {
    throw std::invalid_argument("[segmented_mm] Batched matmul not supported");
  }
  if (segments.ndim() < 1 || segments.shape(-1) != 2) {
    throw std::invalid_argument("[segmented_mm] The segments should have shape (..., 2) but " +
                                shape_to_string(segments.shape()) + " was provided.");
  }
  if (!is_index_type(segments.dtype())) {
    throw std::invalid_argument(
        "[segmented_mm] Got segments with invalid dtype. Segments must be integral.");
  }
  const Dtype dtype = promote_types(a_in.dtype(), b_in.dtype());
  if (!is_floating_point(dtype)) {
    throw std::invalid_argument(
        "[segmented_mm] Only real floating point types are supported but " +
        dtype_name(a_in.dtype()) + " and " + dtype_name(b_in.dtype()) +
        " were provided which results in " + dtype_name(dtype) +
        ", which is not a real floating point type.");
  }
  check_inner(a_in.shape(), b_in.shape(), "segmented_mm");
  array a = astype(a_in, dtype, s);
  array b = astype(b_in, dtype, s);
  array seg = astype(segments, int32, s);
  Shape out_shape(seg.shape().begin(), seg.shape().end() - 1);
  out_shape.insert(out_shape.end(), {a.shape(0), b.shape(1)});
  return array(out_shape, dtype, std::make_shared<SegmentedMM>(to_stream(s)), {a, b, seg});
}

namespace {
// A block mask (..., ceil(R/bs), ceil(C/bs)) expanded to elements (..., R, C).
array expand_block_mask(const array& mask, int block, int rows, int cols, StreamOrDevice s) {
  array m = repeat(repeat(mask, block, -2, s), block, -1, s);
  Shape lo(m.ndim(), 0), hi = m.shape(), st(m.ndim(), 1);
  hi[m.ndim() - 2] = rows;
  hi.back() = cols;
  return slice(m, lo, hi, st, s);
}

array apply_mask(const array& x, const array& mask, int block, StreamOrDevice s) {
  const int r = x.shape(-2);
  const int c = x.shape(-1);
  Shape want(x.shape().begin(), x.shape().end() - 2);
  Shape blocks = {(r + block - 1) / block, (c + block - 1) / block};
  // The mask broadcasts against the operand's batch.
  Shape mshape = broadcast_shapes(Shape(mask.shape().begin(), mask.shape().end() - 2), want);
  mshape.insert(mshape.end(), blocks.begin(), blocks.end());
  array m = expand_block_mask(broadcast_to(mask, mshape, s), block, r, c, s);
  if (m.dtype() == bool_) return where(m, x, zeros_like(x, s), s);
  return astype(multiply(x, m, s), x.dtype(), s);
}
} // namespace

array block_masked_mm(const array& a_in, const array& b_in, int block_size,
                      std::optional<array> mask_out, std::optional<array> mask_lhs,
                      std::optional<array> mask_rhs, StreamOrDevice s) {
  if (block_size <= 0) {
    throw std::invalid_argument("[block_masked_mm] block_size must be positive, got " +
                                std::to_string(block_size) + ".");
  }
  if (a_in.ndim() == 0 || b_in.ndim() == 0) {
    throw std::invalid_argument(
        "[block_masked_mm] Got 0 dimension input. Inputs must have at least one dimension.");
  }
  const bool row = a_in.ndim() == 1;
  const bool col = b_in.ndim() == 1;
  array a = row ? reshape(a_in, {1, a_in.shape(0)}, s) : a_in;
  array b = col ? reshape(b_in, {b_in.shape(0), 1}, s) : b_in;
  check_inner(a.shape(), b.shape(), "matmul");
  const Dtype dtype = matmul_dtype(a, b);
  a = astype(a, dtype, s);
  b = astype(b, dtype, s);
  // Masked blocks read as zeros: the product of the masked operands, then
  // the output's blocks masked.
  if (mask_lhs) a = apply_mask(a, *mask_lhs, block_size, s);
  if (mask_rhs) b = apply_mask(b, *mask_rhs, block_size, s);
  array out = matmul(a, b, s);
  if (mask_out) out = apply_mask(out, *mask_out, block_size, s);
  if (row || col) {
    std::vector<int> drop;
    if (row) drop.push_back(out.ndim() - 2);
    if (col) drop.push_back(out.ndim() - 1);
    out = squeeze(out, drop, s);
  }
  return out;
}

} // namespace loom
