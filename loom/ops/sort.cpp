// Sorting and selection: axis and kth validation with MLX's messages.
#include "loom/ops/sort.h"

#include <sstream>
#include <stdexcept>

#include "loom/ops/creation.h"
#include "loom/ops/indexing.h"
#include "loom/ops/shape.h"
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
  return array(a.shape(), dtype, std::make_shared<Sort>(to_stream(s), kind, axis, kth), {a});
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
  // Gather only the k selected elements (not the whole partition).
  array perm = make_sort(a, Sort::Kind::partition_indices, ax, dim - k, s);
  start[ax] = dim - k;
  return take_along_axis(a, slice(perm, start, stop, step, s), ax, s);
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

} // namespace loom
