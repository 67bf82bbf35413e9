// Sorting and selection: axis and kth validation with MLX's messages.
#include "loom/ops/sort.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gather.h"
#include "loom/ops/reduce.h"
#include "loom/ops/scan.h"
#include "loom/ops/shape.h"
#include "loom/ops/slice.h"
#include "loom/primitives/sort.h"

namespace loom {

namespace {

int sort_axis(const array& a, int axis, const char* op) {
  if (axis < -a.ndim() || axis >= a.ndim()) {
    std::ostringstream msg;
    msg << "[" << op << "] Axis " << axis << " is out of bounds for array with " << a.ndim()
        << " dimensions.";
    throw std::out_of_range(msg.str());
  }
  return axis < 0 ? axis + a.ndim() : axis;
}

array make_sort(const array& a, Sort::Kind kind, int axis, int kth, StreamOrDevice s) {
  Dtype dtype = kind == Sort::Kind::values ? a.dtype() : uint32;
  Shape shape = a.shape();
  if (kind == Sort::Kind::top_indices) shape[axis] = kth;
  return array(std::move(shape), dtype, std::make_shared<Sort>(to_stream(s), kind, axis, kth), {a});
}

int checked_kth(const array& a, int kth, int axis, int given_axis, const char* op) {
  int dim = a.shape(axis);
  if (kth < -dim || kth >= dim) {
    std::ostringstream msg;
    msg << "[" << op << "] Received invalid kth " << kth << " along axis " << given_axis
        << " for array with shape: " << shape_to_string(a.shape());
    throw std::invalid_argument(msg.str());
  }
  return kth < 0 ? kth + dim : kth;
}

} // namespace

array sort(const array& a, int axis, StreamOrDevice s) {
  int ax = sort_axis(a, axis, "sort");
  if (a.size() == 0) return a;
  return make_sort(a, Sort::Kind::values, ax, 0, s);
}
array sort(const array& a, StreamOrDevice s) { return sort(reshape(a, {-1}, s), 0, s); }

array argsort(const array& a, int axis, StreamOrDevice s) {
  int ax = sort_axis(a, axis, "argsort");
  return make_sort(a, Sort::Kind::indices, ax, 0, s);
}
array argsort(const array& a, StreamOrDevice s) { return argsort(reshape(a, {-1}, s), 0, s); }

array argpartition(const array& a, int kth, int axis, StreamOrDevice s) {
  int ax = sort_axis(a, axis, "argpartition");
  int k = checked_kth(a, kth, ax, axis, "argpartition");
  return make_sort(a, Sort::Kind::partition_indices, ax, k, s);
}
array argpartition(const array& a, int kth, StreamOrDevice s) {
  return argpartition(reshape(a, {-1}, s), kth, 0, s);
}

array partition(const array& a, int kth, int axis, StreamOrDevice s) {
  int ax = sort_axis(a, axis, "partition");
  int k = checked_kth(a, kth, ax, axis, "partition");
  // Values through the index permutation, so they and argpartition agree
  // (and the gradient follows the gather).
  array perm = make_sort(a, Sort::Kind::partition_indices, ax, k, s);
  return take_along_axis(a, perm, ax, s);
}
array partition(const array& a, int kth, StreamOrDevice s) {
  return partition(reshape(a, {-1}, s), kth, 0, s);
}

array topk(const array& a, int k, int axis, StreamOrDevice s) {
  int ax = sort_axis(a, axis, "topk");
  int dim = a.shape(ax);
  if (k < 0 || k > dim) {
    std::ostringstream msg;
    msg << "[topk] Received invalid k=" << k << " along axis " << axis
        << " for array with shape: " << shape_to_string(a.shape());
    throw std::invalid_argument(msg.str());
  }
  Shape start(a.ndim(), 0), stop = a.shape(), step(a.ndim(), 1);
  if (k == 0 || k == dim) {
    stop[ax] = k;
    return slice(a, start, stop, step, s);
  }
  // Only the k selected indices are made (not the whole partition), and
  // only their elements gathered.
  return take_along_axis(a, make_sort(a, Sort::Kind::top_indices, ax, k, s), ax, s);
}
array topk(const array& a, int k, StreamOrDevice s) { return topk(reshape(a, {-1}, s), k, 0, s); }

array searchsorted(const array& sorted, const array& values, bool right, StreamOrDevice s) {
  if (sorted.ndim() != 1) {
    std::ostringstream msg;
    msg << "[searchsorted] The sorted sequence must be 1-D but has " << sorted.ndim()
        << " dimensions.";
    throw std::invalid_argument(msg.str());
  }
  Dtype dtype = promote_types(sorted.dtype(), values.dtype());
  array a = sorted.dtype() == dtype ? sorted : astype(sorted, dtype, s);
  array v = values.dtype() == dtype ? values : astype(values, dtype, s);
  return array(values.shape(), uint32, std::make_shared<SearchSorted>(to_stream(s), right), {a, v});
}

std::vector<array> unique(const array& a, int size, bool return_index, bool return_inverse,
                          bool return_counts, std::optional<array> fill_value, StreamOrDevice s) {
  if (size < 0) {
    throw std::invalid_argument("[unique] size must be non-negative, got " + std::to_string(size) +
                                ".");
  }
  array flat = reshape(a, {-1}, s);
  int32_t n = static_cast<int32_t>(flat.size());
  std::vector<array> out;
  if (n == 0) {
    if (size > 0 && !fill_value) {
      throw std::invalid_argument(
          "[unique] A fill value is required for an empty input with a non-zero size.");
    }
    array fill = fill_value ? astype(*fill_value, a.dtype(), s) : zeros({}, a.dtype(), s);
    out.push_back(full({size}, fill, a.dtype(), s));
    if (return_index) out.push_back(zeros({size}, uint32, s));
    if (return_inverse) out.push_back(zeros(a.shape(), uint32, s));
    if (return_counts) out.push_back(zeros({size}, int32, s));
    return out;
  }
  array perm = argsort(flat, 0, s);
  array sorted = take(flat, perm, 0, s);
  Shape step{1};
  array differs = not_equal(slice(sorted, Shape{1}, Shape{n}, step, s),
                            slice(sorted, Shape{0}, Shape{n - 1}, step, s), s);
  array is_new = concatenate({ones({1}, bool_, s), differs}, 0, s);
  // Rank of each sorted element's value among the distinct values.
  array group = subtract(cumsum(is_new, 0, false, true, s), array(1, int32), s);
  array dump = array(size, int32);
  // Slot `size` of a (size + 1)-long buffer takes every write that must not
  // land: repeats of a value, and values past the first `size`.
  array kept = minimum(group, dump, s);
  array first = where(is_new, kept, dump, s);
  auto head = [&](const array& x) { return slice(x, Shape{0}, Shape{size}, step, s); };
  array fill =
      fill_value ? astype(*fill_value, a.dtype(), s) : slice(sorted, Shape{0}, Shape{1}, step, s);
  out.push_back(head(scatter(full({size + 1}, fill, a.dtype(), s), {first}, sorted, {0}, s)));
  if (return_index) {
    array pad = full({size + 1}, slice(perm, Shape{0}, Shape{1}, step, s), uint32, s);
    out.push_back(head(scatter(pad, {first}, perm, {0}, s)));
  }
  if (return_inverse) {
    array last = array(std::max(size - 1, 0), int32);
    array inv = astype(minimum(group, last, s), uint32, s);
    out.push_back(reshape(scatter(zeros({n}, uint32, s), {perm}, inv, {0}, s), a.shape(), s));
  }
  if (return_counts) {
    out.push_back(
        head(scatter_add(zeros({size + 1}, int32, s), {kept}, ones({n}, int32, s), {0}, s)));
  }
  return out;
}

array median(const array& a, std::vector<int> axes, bool keepdims, StreamOrDevice s) {
  if (axes.empty()) {
    axes.resize(a.ndim());
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int& ax : axes) {
    if (ax < -a.ndim() || ax >= a.ndim()) {
      std::ostringstream msg;
      msg << "[median] axis " << ax << " is out of bounds for array with " << a.ndim()
          << " dimensions.";
      throw std::out_of_range(msg.str());
    }
    if (ax < 0) ax += a.ndim();
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) {
    throw std::invalid_argument("[median] Received duplicate axes.");
  }
  // The reduced axes last, flattened into one.
  std::vector<int> perm;
  Shape kept, kept_keepdims = a.shape();
  int32_t m = 1;
  for (int d = 0; d < a.ndim(); ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) {
      perm.push_back(d);
      kept.push_back(a.shape(d));
    } else {
      m *= a.shape(d);
      kept_keepdims[d] = 1;
    }
  }
  if (m == 0) throw std::invalid_argument("[median] Cannot take median along empty axis.");
  perm.insert(perm.end(), axes.begin(), axes.end());
  Shape rows = kept;
  rows.push_back(m);
  Dtype dtype = is_inexact(a.dtype()) ? a.dtype() : float32;
  array sorted = sort(reshape(transpose(a, perm, s), rows, s), -1, s);
  auto at = [&](int32_t i) {
    Shape start(rows.size(), 0), stop = rows, step(rows.size(), 1);
    start.back() = i;
    stop.back() = i + 1;
    return astype(squeeze(slice(sorted, start, stop, step, s),
                          std::vector<int>{static_cast<int>(rows.size()) - 1}, s),
                  dtype, s);
  };
  array mid = m % 2 ? at(m / 2) : multiply(add(at(m / 2 - 1), at(m / 2), s), array(0.5, dtype), s);
  if (is_inexact(dtype)) {
    array last = at(m - 1); // NaN sorts last: a NaN anywhere shows here
    mid = where(isnan(last, s), last, mid, s);
  }
  return keepdims ? reshape(mid, kept_keepdims, s) : mid;
}

array median(const array& a, bool keepdims, StreamOrDevice s) {
  return median(a, std::vector<int>{}, keepdims, s);
}

std::pair<array, array> minmax(const array& a, std::vector<int> axes, bool keepdims,
                               StreamOrDevice s) {
  if (axes.empty()) return {min(a, keepdims, s), max(a, keepdims, s)};
  return {min(a, axes, keepdims, s), max(a, axes, keepdims, s)};
}

} // namespace loom
