// Softmax and log-sum-exp over any axes. Over the last axis of a real input
// each is one fused node (as MLX); elsewhere a stable composite.
#include "loom/ops/softmax.h"

#include <stdexcept>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/reduce.h"
#include "loom/ops/shape.h"
#include "loom/ops/utils.h"
#include "loom/primitives/softmax.h"

namespace loom {

array logsumexp(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  auto ax = reduction_axes(a, axes, "logsumexp");
  if (a.size() == 0) throw std::invalid_argument("[logsumexp] Received empty array.");
  array x = to_inexact(a, s);
  if (ax.empty()) return x;
  // Over the last axis of a real input: one fused node (as MLX).
  if (ax.size() == 1 && ax[0] == x.ndim() - 1 && is_floating_point(x.dtype())) {
    array out = make_logsumexp(x, to_stream(s));
    return keepdims ? expand_dims(out, -1, s) : out;
  }
  // Shifting by the (gradient-free) maximum keeps exp finite; an infinite
  // maximum would give inf - inf, so such slices shift by zero.
  array m = stop_gradient(max(x, ax, true, s), s);
  m = where(isinf(m, s), zeros({}, m.dtype(), s), m, s);
  // log(sum) = log1p(sum - 1), with the 1 of each maximal element taken out
  // before summing (exp(0) - 1 is exactly 0) and the count of extra maxima
  // added back: log(1 + 7e-4) keeps its low digits. The gradient of each
  // element is still exp(x - m) / sum.
  array at_max = astype(equal(x, m, s), x.dtype(), s);
  array rest = sum(subtract(exp(subtract(x, m, s), s), at_max, s), ax, true, s);
  array extra = subtract(sum(at_max, ax, true, s), array(1.0, x.dtype()), s);
  array out = add(log1p(add(rest, extra, s), s), m, s);
  return keepdims ? out : squeeze(out, ax, s);
}
array logsumexp(const array& a, bool keepdims, StreamOrDevice s) {
  return logsumexp(a, all_axes(a.ndim()), keepdims, s);
}

array softmax(const array& a, const std::vector<int>& axes, bool precise, StreamOrDevice s) {
  auto ax = reduction_axes(a, axes, "softmax");
  array in = to_inexact(a, s);
  // Nothing to normalise: no max to take either.
  if (in.size() == 0) return in;
  // Over the last axis of a real input: one fused node (as MLX).
  if (ax.size() == 1 && ax[0] == in.ndim() - 1 && is_floating_point(in.dtype())) {
    return make_softmax(in, precise, to_stream(s));
  }
  bool low = in.dtype() == float16 || in.dtype() == bfloat16;
  array x = precise && low ? astype(in, float32, s) : in;
  array m = stop_gradient(max(x, ax, true, s), s);
  array e = exp(subtract(x, m, s), s);
  array out = divide(e, sum(e, ax, true, s), s);
  return precise && low ? astype(out, in.dtype(), s) : out;
}
array softmax(const array& a, bool precise, StreamOrDevice s) {
  return softmax(a, all_axes(a.ndim()), precise, s);
}

} // namespace loom
