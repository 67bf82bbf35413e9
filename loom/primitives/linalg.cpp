// Matmul: shapes and transforms. The kernel lives in backend/cpu/linalg.cpp.
#include "loom/primitives/linalg.h"

#include <algorithm>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gather.h"
#include "loom/ops/linalg.h"
#include "loom/ops/reduce.h"
#include "loom/ops/shape.h"
#include "loom/ops/slice.h"
#include "loom/ops/utils.h"
#include "loom/primitives/shape.h"

namespace loom {

namespace {

// Operand shapes with NumPy's 1-D promotion: (K,) -> (1, K) for the first,
// (K,) -> (K, 1) for the second.
Shape as_matrix(const Shape& s, bool first) {
  if (s.size() != 1) return s;
  return first ? Shape{1, s[0]} : Shape{s[0], 1};
}

Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

// Sums x down to `shape` (x's shape broadcast from it), then gives it that shape.
array sum_to_shape(const array& x, const Shape& shape) {
  const int lead = x.ndim() - static_cast<int>(shape.size());
  std::vector<int> axes;
  for (int d = 0; d < x.ndim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && x.shape(d) != 1)) axes.push_back(d);
  }
  array r = axes.empty() ? x : sum(x, axes, /*keepdims=*/true);
  return r.shape() == shape ? r : reshape(r, shape);
}

// Whether b is, or will be when evaluated, the transpose of a row-major
// stack of matrices (nn.Linear's `W.T`).
bool is_transposed_matrices(const array& b) {
  const int nd = b.ndim();
  if (nd < 2) return false;
  if (b.status() != Status::unscheduled) {
    return b.strides()[nd - 1] != 1 && b.strides()[nd - 2] == 1 && b.shape(-1) > 1 &&
           b.shape(-2) > 1;
  }
  if (!b.has_node()) return false;
  auto* t = dynamic_cast<const Transpose*>(&b.primitive());
  if (!t) return false;
  const auto& axes = t->axes();
  for (int d = 0; d < nd - 2; ++d) {
    if (axes[d] != d) return false;
  }
  return axes[nd - 2] == nd - 1 && axes[nd - 1] == nd - 2;
}

} // namespace

Shape matmul_shape(const Shape& a, const Shape& b) {
  Shape a2 = as_matrix(a, true);
  Shape b2 = as_matrix(b, false);
  Shape out = broadcast_shapes(batch_of(a2), batch_of(b2));
  if (a.size() != 1) out.push_back(a2[a2.size() - 2]);
  if (b.size() != 1) out.push_back(b2.back());
  return out;
}

std::vector<Shape> Matmul::output_shapes(const std::vector<array>& inputs) {
  return {matmul_shape(inputs[0].shape(), inputs[1].shape())};
}

std::vector<array> Matmul::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums, const std::vector<array>&) {
  const array& a = primals[0];
  const array& b = primals[1];
  array a2 = a.ndim() == 1 ? reshape(a, as_matrix(a.shape(), true)) : a;
  array b2 = b.ndim() == 1 ? reshape(b, as_matrix(b.shape(), false)) : b;
  // The cotangent with the matrix axes that 1-D operands removed put back.
  Shape out2 = broadcast_shapes(batch_of(a2.shape()), batch_of(b2.shape()));
  out2.push_back(a2.shape()[a2.ndim() - 2]);
  out2.push_back(b2.shape().back());
  array cot = cotangents[0].shape() == out2 ? cotangents[0] : reshape(cotangents[0], out2);
  std::vector<array> grads;
  for (int arg : argnums) {
    if (arg == 0) {
      array g = matmul(cot, swapaxes(b2, -1, -2), stream());
      g = sum_to_shape(g, a2.shape());
      grads.push_back(a.ndim() == 1 ? reshape(g, a.shape()) : g);
    } else {
      // A matrix shared by a batch (x (B, L, K) @ W (K, N)): the batch folds
      // into the products' inner dimension, one (K, B L) x (B L, N) GEMM,
      // instead of B products of W's size summed afterwards (a transformer
      // block's weight gradients spent ~2% of its step in those sums).
      array at = a2;
      array ct = cot;
      if (b2.ndim() == 2 && a2.ndim() > 2) {
        const int32_t k = a2.shape(-1);
        const int32_t n = ct.shape(-1);
        at = reshape(a2, {static_cast<int32_t>(a2.size() / std::max<int32_t>(k, 1)), k}, stream());
        ct = reshape(ct, {static_cast<int32_t>(ct.size() / std::max<int32_t>(n, 1)), n}, stream());
      }
      array g = [&] {
        if (is_transposed_matrices(b2) && at.ndim() == b2.ndim()) {
          // The gradient of a transposed operand is made in the layout of
          // what was transposed ((cot^T a)^T, the same products): the
          // gradient that reaches that array is then row-major, not a
          // transposed view that every later pass (Adam's update of a
          // Linear weight) reads across.
          return swapaxes(matmul(swapaxes(ct, -1, -2), at, stream()), -1, -2);
        }
        return matmul(swapaxes(at, -1, -2), ct, stream());
      }();
      g = sum_to_shape(g, b2.shape());
      grads.push_back(b.ndim() == 1 ? reshape(g, b.shape()) : g);
    }
  }
  return grads;
}

std::vector<array> Matmul::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  std::vector<array> terms;
  for (size_t i = 0; i < argnums.size(); ++i) {
    terms.push_back(argnums[i] == 0 ? matmul(tangents[i], primals[1], stream())
                                    : matmul(primals[0], tangents[i], stream()));
  }
  return {terms.size() == 1 ? terms[0] : add(terms[0], terms[1], stream())};
}

std::pair<std::vector<array>, std::vector<int>> Matmul::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  const int ba = axes[0];
  const int bb = axes[1];
  if (ba < 0 && bb < 0) return {{matmul(inputs[0], inputs[1], stream())}, {-1}};
  // Per-sample ranks and the rank of the per-sample product before 1-D axes
  // are dropped.
  const int a_nd = inputs[0].ndim() - (ba >= 0);
  const int b_nd = inputs[1].ndim() - (bb >= 0);
  const int rank = std::max({a_nd, b_nd, 2});
  // A batched operand gets its batch axis first, its 1-D promotion made
  // explicit and enough unit axes after the batch axis to align with the
  // other operand's leading dimensions. Unbatched operands broadcast as is.
  auto prepare = [&](const array& x, int bx, int nd, bool first) {
    if (bx < 0) return x;
    array y = bx == 0 ? x : moveaxis(x, bx, 0);
    if (nd == 1) y = expand_dims(y, first ? 1 : 2);
    const int missing = rank - std::max(nd, 2);
    if (missing > 0) {
      Shape shape = y.shape();
      shape.insert(shape.begin() + 1, missing, 1);
      y = reshape(y, shape);
    }
    return y;
  };
  array a = prepare(inputs[0], ba, a_nd, true);
  array b = prepare(inputs[1], bb, b_nd, false);
  array out = matmul(a, b, stream());
  // Remove the axes of the promotions made above (an unbatched 1-D operand
  // had its axis removed by matmul itself).
  const bool drop_rows = ba >= 0 && a_nd == 1;
  const bool drop_cols = bb >= 0 && b_nd == 1;
  const bool has_cols = !(bb < 0 && b_nd == 1);
  if (drop_rows || drop_cols) {
    Shape shape = out.shape();
    if (drop_cols) shape.pop_back();
    if (drop_rows) shape.erase(shape.end() - (drop_cols || !has_cols ? 1 : 2));
    out = reshape(out, shape);
  }
  return {{out}, {0}};
}

LOOM_REGISTER_PRIMITIVE(Matmul, [](Stream s, const PrimitiveState&) {
  return std::make_shared<Matmul>(s);
});

} // namespace loom

// --- GatherMM --------------------------------------------------------------------

namespace loom {

namespace {

array gather_mm_node(const array& a, const array& b, const array& li, const array& ri, bool sorted,
                     const Stream& s) {
  Shape out = li.shape();
  out.push_back(a.shape(-2));
  out.push_back(b.shape(-1));
  return array(std::move(out), a.dtype(), std::make_shared<GatherMM>(s, sorted), {a, b, li, ri});
}

// Sums `updates` (I + (R, C)) into zeros of shape (n, R, C) at `indices` (I).
array scatter_matrices(const array& updates, const array& indices, int n, const Stream& s) {
  array base = zeros({n, updates.shape(-2), updates.shape(-1)}, updates.dtype(), s);
  Shape flat_shape{-1, updates.shape(-2), updates.shape(-1)};
  array u = reshape(updates, flat_shape, s);
  array idx = reshape(indices, {-1}, s);
  return scatter_add(base, {idx}, u, {0}, s);
}

} // namespace

std::vector<Shape> GatherMM::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs[2].shape();
  out.push_back(inputs[0].shape(-2));
  out.push_back(inputs[1].shape(-1));
  return {out};
}

bool GatherMM::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const GatherMM*>(&other);
  return o != nullptr && o->sorted_ == sorted_;
}

std::vector<array> GatherMM::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums, const std::vector<array>&) {
  const array &a = primals[0], &b = primals[1], &li = primals[2], &ri = primals[3];
  const array& g = cotangents[0];
  std::vector<array> grads;
  for (int arg : argnums) {
    if (arg == 0) {
      // d a[li[i]] += g[i] @ b[ri[i]]ᵀ
      array bt = swapaxes(b, -1, -2, stream());
      array ga = matmul(g, take(bt, ri, 0, stream()), stream());
      grads.push_back(scatter_matrices(ga, li, a.shape(0), stream()));
    } else if (arg == 1) {
      array at = swapaxes(a, -1, -2, stream());
      array gb = matmul(take(at, li, 0, stream()), g, stream());
      grads.push_back(scatter_matrices(gb, ri, b.shape(0), stream()));
    } else {
      throw std::invalid_argument("[GatherMM::vjp] Cannot calculate VJP with respect to indices.");
    }
  }
  return grads;
}

std::vector<array> GatherMM::jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>& argnums) {
  const array &a = primals[0], &b = primals[1], &li = primals[2], &ri = primals[3];
  std::vector<array> terms;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 0) terms.push_back(gather_mm_node(tangents[i], b, li, ri, sorted_, stream()));
    if (argnums[i] == 1) terms.push_back(gather_mm_node(a, tangents[i], li, ri, sorted_, stream()));
  }
  if (terms.empty()) {
    throw std::invalid_argument("[GatherMM::jvp] Cannot calculate JVP with respect to indices.");
  }
  return {terms.size() == 1 ? terms[0] : add(terms[0], terms[1], stream())};
}

std::pair<std::vector<array>, std::vector<int>> GatherMM::vmap(const std::vector<array>& inputs,
                                                               const std::vector<int>& axes) {
  // The mapped axis joins each operand's flattened batch: sample v of a
  // batched operand is entry v * A + i, so the indices shift by v * A.
  int32_t v = 1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) v = inputs[i].shape(axes[i]);
  }
  const Stream& s = stream();
  auto index_for = [&](int operand) {
    const array& x = inputs[operand];
    array idx = inputs[operand + 2];
    idx = axes[operand + 2] >= 0 ? moveaxis(idx, axes[operand + 2], 0, s) : expand_dims(idx, 0, s);
    if (axes[operand] < 0) return std::pair<array, array>{x, idx};
    array xf = moveaxis(x, axes[operand], 0, s);
    const int per = xf.shape(1);
    xf = reshape(xf, {-1, xf.shape(-2), xf.shape(-1)}, s);
    Shape offs_shape(idx.ndim(), 1);
    offs_shape[0] = v;
    array offs = reshape(multiply(arange(0, v, 1, s), array(per, int32), s), offs_shape, s);
    return std::pair<array, array>{xf, astype(add(astype(idx, int32, s), offs, s), uint32, s)};
  };
  auto [a, li] = index_for(0);
  auto [b, ri] = index_for(1);
  std::vector<array> idx = broadcast_arrays({li, ri}, s);
  Shape full = idx[0].shape();
  full[0] = v;
  array l = broadcast_to(idx[0], full, s);
  array r = broadcast_to(idx[1], full, s);
  return {{gather_mm_node(a, b, l, r, sorted_, s)}, {0}};
}

// --- SegmentedMM -----------------------------------------------------------------

namespace {

// 1 where column k lies in the segment: (..., K) for segments (..., 2).
array segment_mask(const array& segments, int k, Dtype dtype, const Stream& s) {
  array pos = arange(0, k, 1, s);
  Shape lo(segments.ndim(), 0), hi = segments.shape(), st(segments.ndim(), 1);
  hi.back() = 1;
  array start = slice(segments, lo, hi, st, s);
  lo.back() = 1;
  hi.back() = 2;
  array stop = slice(segments, lo, hi, st, s);
  return astype(logical_and(greater_equal(pos, start, s), less(pos, stop, s), s), dtype, s);
}

array segmented_node(const array& a, const array& b, const array& seg, const Stream& s) {
  Shape out(seg.shape().begin(), seg.shape().end() - 1);
  out.push_back(a.shape(-2));
  out.push_back(b.shape(-1));
  return array(std::move(out), a.dtype(), std::make_shared<SegmentedMM>(s), {a, b, seg});
}

} // namespace

std::vector<Shape> SegmentedMM::output_shapes(const std::vector<array>& inputs) {
  Shape out(inputs[2].shape().begin(), inputs[2].shape().end() - 1);
  out.push_back(inputs[0].shape(-2));
  out.push_back(inputs[1].shape(-1));
  return {out};
}

std::vector<array> SegmentedMM::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums, const std::vector<array>&) {
  const array &a = primals[0], &b = primals[1], &seg = primals[2];
  const array& g = cotangents[0];
  const Stream& s = stream();
  // Segment s reads columns [s0, s1) of a and rows of b: mask the full
  // products and sum over the segments.
  array mask = segment_mask(seg, a.shape(-1), a.dtype(), s);
  std::vector<int> seg_axes;
  for (int d = 0; d < seg.ndim() - 1; ++d) seg_axes.push_back(d);
  std::vector<array> grads;
  for (int arg : argnums) {
    if (arg == 0) {
      array full = matmul(g, swapaxes(b, -1, -2, s), s);
      array m = multiply(full, expand_dims(mask, -2, s), s);
      grads.push_back(seg_axes.empty() ? m : sum(m, seg_axes, false, s));
    } else if (arg == 1) {
      array full = matmul(swapaxes(a, -1, -2, s), g, s);
      array m = multiply(full, expand_dims(mask, -1, s), s);
      grads.push_back(seg_axes.empty() ? m : sum(m, seg_axes, false, s));
    } else {
      throw std::invalid_argument(
          "[SegmentedMM::vjp] Cannot calculate VJP with respect to segments.");
    }
  }
  return grads;
}

std::vector<array> SegmentedMM::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  std::vector<array> terms;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 0)
      terms.push_back(segmented_node(tangents[i], primals[1], primals[2], stream()));
    if (argnums[i] == 1)
      terms.push_back(segmented_node(primals[0], tangents[i], primals[2], stream()));
  }
  if (terms.empty()) {
    throw std::invalid_argument(
        "[SegmentedMM::jvp] Cannot calculate JVP with respect to segments.");
  }
  return {terms.size() == 1 ? terms[0] : add(terms[0], terms[1], stream())};
}

std::pair<std::vector<array>, std::vector<int>> SegmentedMM::vmap(const std::vector<array>& inputs,
                                                                  const std::vector<int>& axes) {
  // Batched operands have no kernel; the masked product is the same map:
  // out[v, ...] = (a[v] * mask[v, ...]) @ b[v].
  const Stream& s = stream();
  const int nseg = inputs[2].ndim() - 1 - (axes[2] >= 0);
  auto lead = [&](const array& x, int ax) {
    array y = ax >= 0 ? moveaxis(x, ax, 0, s) : expand_dims(x, 0, s);
    Shape shape = y.shape();
    shape.insert(shape.begin() + 1, nseg, 1);
    return reshape(y, shape, s);
  };
  array a = lead(inputs[0], axes[0]);
  array b = lead(inputs[1], axes[1]);
  array seg = axes[2] >= 0 ? moveaxis(inputs[2], axes[2], 0, s) : expand_dims(inputs[2], 0, s);
  array mask = expand_dims(segment_mask(seg, inputs[0].shape(-1), a.dtype(), s), -2, s);
  return {{matmul(multiply(a, mask, s), b, s)}, {0}};
}

LOOM_REGISTER_PRIMITIVE(GatherMM, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<GatherMM>(s, state_get<bool>(st, "GatherMM", "sorted_indices"));
});
LOOM_REGISTER_PRIMITIVE(SegmentedMM, [](Stream s, const PrimitiveState&) {
  return std::make_shared<SegmentedMM>(s);
});

} // namespace loom
