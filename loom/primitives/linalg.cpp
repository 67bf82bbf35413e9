// Matmul: shapes and transforms. The kernel lives in backend/cpu/linalg.cpp.
#include "loom/primitives/linalg.h"

#include <algorithm>

#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/reduce.h"
#include "loom/ops/shape.h"
#include "loom/ops/utils.h"

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
      array g = matmul(swapaxes(a2, -1, -2), cot, stream());
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
