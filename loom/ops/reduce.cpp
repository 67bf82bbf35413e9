// Reductions: axis validation, result dtypes (as MLX: sums and products of
// small integers widen to 32 bits, mean of integers is float32) and the
// empty-array rules.
#include "loom/ops/reduce.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/shape.h"
#include "loom/ops/shape_info.h"
#include "loom/ops/utils.h"
#include "loom/primitives/reduce.h"
#include "loom/transforms/shapeless.h"

namespace loom {

namespace {

Dtype sum_dtype(Dtype d) {
  if (d == bool_ || d == int8 || d == int16) return int32;
  if (d == uint8 || d == uint16) return uint32;
  return d;
}

array make_reduce(const array& a, Reduce::ReduceType type, std::vector<int> axes, bool keepdims,
                  Dtype dtype, StreamOrDevice s) {
  Shape shape = reduced_shape(a.shape(), axes, keepdims);
  return array(std::move(shape), dtype,
               std::make_shared<Reduce>(to_stream(s), type, std::move(axes), keepdims), {a});
}

// Max and min have no identity: reducing an empty extent into a non-empty
// result is an error.
void check_extreme_extent(const array& a, const std::vector<int>& axes, bool keepdims,
                          const char* op) {
  if (a.size() != 0 || shape_size(reduced_shape(a.shape(), axes, keepdims)) == 0) return;
  for (int ax : axes) {
    if (a.shape(ax) == 0) {
      std::ostringstream msg;
      msg << "[" << op << "] Cannot " << op << " reduce over axis " << ax << " with size 0.";
      throw std::invalid_argument(msg.str());
    }
  }
}

array extreme(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s,
              Reduce::ReduceType type, const char* op) {
  auto ax = reduction_axes(a, axes, op);
  if (ax.empty()) return a;
  check_extreme_extent(a, ax, keepdims, op);
  return make_reduce(a, type, std::move(ax), keepdims, a.dtype(), s);
}

array logical(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s,
              Reduce::ReduceType type, const char* op) {
  auto ax = reduction_axes(a, axes, op);
  // With no axes the result is the input as bool; the kernel converts then.
  if (ax.empty() && a.dtype() == bool_) return a;
  return make_reduce(a, type, std::move(ax), keepdims, bool_, s);
}

array arg_extreme(const array& a, int axis, bool all, bool keepdims, StreamOrDevice s,
                  ArgReduce::ReduceType type, const char* op) {
  if (!all) axis = normalize_axis(axis, a.ndim(), op);
  if (a.size() == 0) {
    throw std::invalid_argument(std::string("[") + op + "] Cannot " + op +
                                " reduce zero size array.");
  }
  Shape shape;
  if (all) {
    axis = ArgReduce::kAllAxes;
    if (keepdims) shape = Shape(a.ndim(), 1);
  } else {
    shape = reduced_shape(a.shape(), {axis}, keepdims);
  }
  return array(std::move(shape), uint32,
               std::make_shared<ArgReduce>(to_stream(s), type, axis, keepdims), {a});
}

} // namespace

array sum(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  auto ax = reduction_axes(a, axes, "sum");
  if (ax.empty()) return a;
  return make_reduce(a, Reduce::Sum, std::move(ax), keepdims, sum_dtype(a.dtype()), s);
}
array sum(const array& a, bool keepdims, StreamOrDevice s) {
  return sum(a, all_axes(a.ndim()), keepdims, s);
}

array prod(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  auto ax = reduction_axes(a, axes, "prod");
  if (ax.empty()) return a;
  return make_reduce(a, Reduce::Prod, std::move(ax), keepdims, sum_dtype(a.dtype()), s);
}
array prod(const array& a, bool keepdims, StreamOrDevice s) {
  return prod(a, all_axes(a.ndim()), keepdims, s);
}

array mean(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  std::vector<int> ax;
  for (int axis : axes) {
    int v = axis < 0 ? axis + a.ndim() : axis;
    if (v < 0 || v >= a.ndim()) {
      std::ostringstream msg;
      msg << "[mean] axis " << axis << " is out of bounds for array with " << a.ndim()
          << " dimensions.";
      throw std::out_of_range(msg.str());
    }
    ax.push_back(v);
  }
  ax = reduction_axes(a, ax, "mean");
  const Dtype dtype = is_inexact(a.dtype()) ? a.dtype() : float32;
  // As MLX: the sum in its own dtype, then scaled by 1/count in the result dtype.
  array total = sum(a, ax, keepdims, s);
  if (total.dtype() != dtype) total = astype(total, dtype, s);
  // number_of_elements: a constant 1 / count, or under a shapeless trace
  // the count of the shapes the trace is later called with.
  return multiply(total, number_of_elements(a, ax, true, dtype, s), s);
}
array mean(const array& a, bool keepdims, StreamOrDevice s) {
  return mean(a, all_axes(a.ndim()), keepdims, s);
}

array max(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  return extreme(a, axes, keepdims, s, Reduce::Max, "max");
}
array max(const array& a, bool keepdims, StreamOrDevice s) {
  return max(a, all_axes(a.ndim()), keepdims, s);
}

array min(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  return extreme(a, axes, keepdims, s, Reduce::Min, "min");
}
array min(const array& a, bool keepdims, StreamOrDevice s) {
  return min(a, all_axes(a.ndim()), keepdims, s);
}

array all(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  return logical(a, axes, keepdims, s, Reduce::And, "all");
}
array all(const array& a, bool keepdims, StreamOrDevice s) {
  return all(a, all_axes(a.ndim()), keepdims, s);
}

array any(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  return logical(a, axes, keepdims, s, Reduce::Or, "any");
}
array any(const array& a, bool keepdims, StreamOrDevice s) {
  return any(a, all_axes(a.ndim()), keepdims, s);
}

array argmax(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return arg_extreme(a, axis, false, keepdims, s, ArgReduce::ArgMax, "argmax");
}
array argmax(const array& a, bool keepdims, StreamOrDevice s) {
  return arg_extreme(a, 0, true, keepdims, s, ArgReduce::ArgMax, "argmax");
}

array argmin(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return arg_extreme(a, axis, false, keepdims, s, ArgReduce::ArgMin, "argmin");
}
array argmin(const array& a, bool keepdims, StreamOrDevice s) {
  return arg_extreme(a, 0, true, keepdims, s, ArgReduce::ArgMin, "argmin");
}

array sum(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return sum(a, std::vector<int>{axis}, keepdims, s);
}
array mean(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return mean(a, std::vector<int>{axis}, keepdims, s);
}
array max(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return max(a, std::vector<int>{axis}, keepdims, s);
}
array min(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return min(a, std::vector<int>{axis}, keepdims, s);
}
array prod(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return prod(a, std::vector<int>{axis}, keepdims, s);
}
array all(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return all(a, std::vector<int>{axis}, keepdims, s);
}
array any(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return any(a, std::vector<int>{axis}, keepdims, s);
}

// --- composites ---

array var(const array& a, const std::vector<int>& axes, bool keepdims, int ddof, StreamOrDevice s) {
  auto ax = reduction_axes(a, axes, "var");
  array x = to_inexact(a, s);
  array centered = subtract(x, mean(x, ax, true, s), s);
  // |z|^2 for complex: the variance is real.
  array sq = is_complex(x.dtype()) ? square(abs(centered, s), s) : square(centered, s);
  if (transforms::in_shapeless_trace()) {
    array n = subtract(number_of_elements(a, ax, false, sq.dtype(), s),
                       array(static_cast<double>(ddof), sq.dtype()), s);
    n = maximum(n, zeros({}, sq.dtype(), s), s);
    return divide(sum(sq, ax, keepdims, s), n, s);
  }
  double n = 1;
  for (int v : ax) n *= a.shape(v);
  return divide(sum(sq, ax, keepdims, s), array(std::max(n - ddof, 0.0), sq.dtype()), s);
}
array var(const array& a, bool keepdims, int ddof, StreamOrDevice s) {
  return var(a, all_axes(a.ndim()), keepdims, ddof, s);
}

array std(const array& a, const std::vector<int>& axes, bool keepdims, int ddof, StreamOrDevice s) {
  return sqrt(var(a, axes, keepdims, ddof, s), s);
}
array std(const array& a, bool keepdims, int ddof, StreamOrDevice s) {
  return sqrt(var(a, keepdims, ddof, s), s);
}

array count_nonzero(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  auto ax = reduction_axes(a, axes, "count_nonzero");
  array nz = not_equal(a, zeros({}, a.dtype(), s), s);
  // A sum over no axes is its input: the count of each element, as int32.
  if (ax.empty()) return astype(nz, int32, s);
  return sum(nz, ax, keepdims, s);
}
array count_nonzero(const array& a, bool keepdims, StreamOrDevice s) {
  return count_nonzero(a, all_axes(a.ndim()), keepdims, s);
}

} // namespace loom
