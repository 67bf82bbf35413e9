// Indexing with arrays. Every op here lowers to the Gather/Scatter primitives
// (plus views), so each is lazy, differentiable and vmappable; no index is
// read while the graph is built.
#include "loom/ops/gather.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/reduce.h"
#include "loom/ops/shape.h"
#include "loom/ops/slice.h"
#include "loom/ops/utils.h"
#include "loom/primitives/gather.h"

namespace loom {

namespace {

std::string op_prefix(const char* op) { return std::string("[") + op + "] "; }

std::vector<int> checked_axes(const array& a, const std::vector<int>& axes, const char* op) {
  std::vector<int> out = normalize_axes(axes, a.ndim(), op);
  std::vector<int> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw std::invalid_argument(op_prefix(op) + "Repeated axes in the indexed axes.");
  }
  return out;
}

// Broadcasts the indices to one shape after checking they are integers.
std::vector<array> checked_indices(const std::vector<array>& indices, size_t num_axes,
                                   const char* op) {
  if (indices.size() != num_axes) {
    std::ostringstream msg;
    msg << op_prefix(op) << "Got " << indices.size() << " index arrays for " << num_axes
        << " axes.";
    throw std::invalid_argument(msg.str());
  }
  for (auto& idx : indices) {
    if (!is_integral(idx.dtype())) {
      throw std::invalid_argument(op_prefix(op) + "Got indices with invalid dtype " +
                                  dtype_name(idx.dtype()) + ". Indices must be integral.");
    }
  }
  if (indices.size() < 2) return indices;
  return broadcast_arrays(indices);
}

Shape block_shape(const Shape& shape, const std::vector<int>& axes) {
  Shape out;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) out.push_back(shape[d]);
  }
  return out;
}

array make_scatter(const array& a, const std::vector<array>& indices, const array& updates,
                   const std::vector<int>& axes, Scatter::ReduceType type, const char* op,
                   StreamOrDevice s) {
  std::vector<int> ax = checked_axes(a, axes, op);
  std::vector<array> idx = checked_indices(indices, ax.size(), op);
  if (is_complex(a.dtype()) &&
      (type == Scatter::ReduceType::max || type == Scatter::ReduceType::min)) {
    throw std::invalid_argument(op_prefix(op) + "complex64 arrays have no order.");
  }
  Shape want = idx.empty() ? Shape{} : idx[0].shape();
  Shape rest = block_shape(a.shape(), ax);
  want.insert(want.end(), rest.begin(), rest.end());
  array upd = updates.dtype() == a.dtype() ? updates : astype(updates, a.dtype(), s);
  if (upd.shape() != want) {
    try {
      upd = broadcast_to(upd, want, s);
    } catch (const std::invalid_argument&) {
      throw std::invalid_argument(
          op_prefix(op) + "Updates with shape " + shape_to_string(updates.shape()) +
          " cannot be broadcast to the indexed shape " + shape_to_string(want) + ".");
    }
  }
  if (idx.empty()) {
    // Nothing indexed: the whole array is the one block.
    switch (type) {
      case Scatter::ReduceType::none:
        return copy(upd, s);
      case Scatter::ReduceType::sum:
        return add(a, upd, s);
      case Scatter::ReduceType::prod:
        return multiply(a, upd, s);
      case Scatter::ReduceType::max:
        return maximum(a, upd, s);
      case Scatter::ReduceType::min:
        return minimum(a, upd, s);
    }
  }
  std::vector<array> inputs{a};
  inputs.insert(inputs.end(), idx.begin(), idx.end());
  inputs.push_back(upd);
  Stream st = to_stream(s);
  return array(a.shape(), a.dtype(), std::make_shared<Scatter>(st, std::move(ax), type),
               std::move(inputs));
}

// Index arrays that, broadcast to `shape`, address every position of it along
// each axis but `axis` (whose index is `idx`): the elementwise pairing of
// take_along_axis and put_along_axis.
std::vector<array> along_axis_indices(const Shape& shape, const array& idx, int axis,
                                      StreamOrDevice s) {
  std::vector<array> out;
  int nd = static_cast<int>(shape.size());
  // The iotas share the indices' type (a GPU gather takes one index type, and
  // topk's indices are uint32); types narrower than 32 bits could not hold
  // every position, so those indices widen to int32 first.
  const bool wide = idx.dtype().size >= 4;
  const Dtype index_type = wide ? idx.dtype() : int32;
  for (int d = 0; d < nd; ++d) {
    if (d == axis) {
      out.push_back(broadcast_to(wide ? idx : astype(idx, int32, s), shape, s));
      continue;
    }
    Shape iota_shape(nd, 1);
    iota_shape[d] = shape[d];
    out.push_back(
        broadcast_to(reshape(arange(0, shape[d], 1, index_type, s), iota_shape, s), shape, s));
  }
  return out;
}

// Positions of the dimensions of `axes` + (the other axes, in order) back in
// their original order.
std::vector<int> restore_order(const std::vector<int>& axes, int ndim) {
  std::vector<int> labels = axes;
  for (int d = 0; d < ndim; ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) labels.push_back(d);
  }
  std::vector<int> perm(ndim);
  for (int p = 0; p < ndim; ++p) perm[labels[p]] = p;
  return perm;
}

// One outer-product index per entry of `axes`: start[i] (wrapped when
// negative, then clamped so `sizes[i]` elements fit) + arange(sizes[i]).
std::vector<array> window_indices(const array& a, const array& start_indices,
                                  const std::vector<int>& axes, const Shape& sizes, const char* op,
                                  StreamOrDevice s) {
  if (!is_integral(start_indices.dtype())) {
    throw std::invalid_argument(op_prefix(op) + "Start indices must be integers, got type " +
                                dtype_name(start_indices.dtype()) + ".");
  }
  array starts = reshape(start_indices, {-1}, s);
  if (starts.size() != axes.size()) {
    std::ostringstream msg;
    msg << op_prefix(op) << "Number of starting indices " << starts.size()
        << " does not match number of axes " << axes.size() << ".";
    throw std::invalid_argument(msg.str());
  }
  if (is_unsigned(starts.dtype())) starts = astype(starts, int64, s);
  std::vector<array> out;
  int k = static_cast<int>(axes.size());
  for (int i = 0; i < k; ++i) {
    int32_t dim = a.shape(axes[i]);
    array st = reshape(slice(starts, Shape{i}, Shape{i + 1}, Shape{1}, s), {}, s);
    st = where(less(st, array(0, st.dtype()), s), add(st, array(dim, st.dtype()), s), st, s);
    st = minimum(maximum(st, array(0, st.dtype()), s), array(dim - sizes[i], st.dtype()), s);
    Shape shape(k, 1);
    shape[i] = sizes[i];
    out.push_back(reshape(add(st, arange(0, sizes[i], 1, st.dtype(), s), s), shape, s));
  }
  return out;
}

array put_or_add_along_axis(const array& a, const array& indices, const array& values, int axis,
                            bool add, const char* op, StreamOrDevice s) {
  if (axis < -a.ndim() || axis >= a.ndim()) {
    std::ostringstream msg;
    msg << "[" << op << "] Received invalid axis " << axis << " for array with " << a.ndim()
        << " dimensions.";
    throw std::out_of_range(msg.str());
  }
  if (indices.ndim() != a.ndim()) {
    std::ostringstream msg;
    msg << "[" << op << "] Indices of dimension " << indices.ndim()
        << " does not match array of dimension " << a.ndim() << ".";
    throw std::invalid_argument(msg.str());
  }
  if (axis < 0) axis += a.ndim();
  Shape upd = broadcast_shapes(indices.shape(), values.shape());
  Shape shape = a.shape();
  shape[axis] = upd.size() == shape.size() ? upd[axis] : indices.shape(axis);
  array vals = broadcast_to(values, shape, s);
  return add ? scatter_add(a, along_axis_indices(shape, indices, axis, s), vals, all_axes(a.ndim()),
                           s)
             : scatter(a, along_axis_indices(shape, indices, axis, s), vals, all_axes(a.ndim()), s);
}

} // namespace

array gather(const array& a, const std::vector<array>& indices, const std::vector<int>& axes,
             StreamOrDevice s) {
  std::vector<int> ax = checked_axes(a, axes, "gather");
  std::vector<array> idx = checked_indices(indices, ax.size(), "gather");
  if (idx.empty()) return a;
  for (int d : ax) {
    if (a.shape(d) == 0 && idx[0].size() != 0) {
      std::ostringstream msg;
      msg << "[gather] Cannot index axis " << d << " of size 0 of an array with shape "
          << shape_to_string(a.shape()) << ".";
      throw std::out_of_range(msg.str());
    }
  }
  Shape out = idx[0].shape();
  Shape rest = block_shape(a.shape(), ax);
  out.insert(out.end(), rest.begin(), rest.end());
  std::vector<array> inputs{a};
  inputs.insert(inputs.end(), idx.begin(), idx.end());
  return array(std::move(out), a.dtype(), std::make_shared<Gather>(to_stream(s), std::move(ax)),
               std::move(inputs));
}

array scatter(const array& a, const std::vector<array>& indices, const array& updates,
              const std::vector<int>& axes, StreamOrDevice s) {
  return make_scatter(a, indices, updates, axes, Scatter::ReduceType::none, "scatter", s);
}
array scatter_add(const array& a, const std::vector<array>& indices, const array& updates,
                  const std::vector<int>& axes, StreamOrDevice s) {
  return make_scatter(a, indices, updates, axes, Scatter::ReduceType::sum, "scatter_add", s);
}
array scatter_prod(const array& a, const std::vector<array>& indices, const array& updates,
                   const std::vector<int>& axes, StreamOrDevice s) {
  return make_scatter(a, indices, updates, axes, Scatter::ReduceType::prod, "scatter_prod", s);
}
array scatter_max(const array& a, const std::vector<array>& indices, const array& updates,
                  const std::vector<int>& axes, StreamOrDevice s) {
  return make_scatter(a, indices, updates, axes, Scatter::ReduceType::max, "scatter_max", s);
}
array scatter_min(const array& a, const std::vector<array>& indices, const array& updates,
                  const std::vector<int>& axes, StreamOrDevice s) {
  return make_scatter(a, indices, updates, axes, Scatter::ReduceType::min, "scatter_min", s);
}

array take(const array& a, const array& indices, int axis, StreamOrDevice s) {
  if (axis < -a.ndim() || axis >= a.ndim()) {
    std::ostringstream msg;
    msg << "[take] Received invalid axis " << axis << " for array with " << a.ndim()
        << " dimensions.";
    throw std::out_of_range(msg.str());
  }
  if (axis < 0) axis += a.ndim();
  array g = gather(a, {indices}, {axis}, s);
  if (axis == 0) return g;
  // gather puts the index dimensions first; take puts them at `axis`.
  int m = indices.ndim();
  std::vector<int> perm;
  for (int d = 0; d < axis; ++d) perm.push_back(m + d);
  for (int d = 0; d < m; ++d) perm.push_back(d);
  for (int d = m + axis; d < g.ndim(); ++d) perm.push_back(d);
  return transpose(g, perm, s);
}

array take(const array& a, const array& indices, StreamOrDevice s) {
  return take(reshape(a, {-1}, s), indices, 0, s);
}

array take_along_axis(const array& a, const array& indices, int axis, StreamOrDevice s) {
  if (axis < -a.ndim() || axis >= a.ndim()) {
    std::ostringstream msg;
    msg << "[take_along_axis] Received invalid axis " << axis << " for array with " << a.ndim()
        << " dimensions.";
    throw std::out_of_range(msg.str());
  }
  if (indices.ndim() != a.ndim()) {
    std::ostringstream msg;
    msg << "[take_along_axis] Indices of dimension " << indices.ndim()
        << " does not match array of dimension " << a.ndim() << ".";
    throw std::invalid_argument(msg.str());
  }
  if (axis < 0) axis += a.ndim();
  Shape a_shape = a.shape(), i_shape = indices.shape();
  a_shape[axis] = 1;
  i_shape[axis] = 1;
  Shape shape = broadcast_shapes(a_shape, i_shape);
  Shape src_shape = shape;
  src_shape[axis] = a.shape(axis);
  shape[axis] = indices.shape(axis);
  array src = broadcast_to(a, src_shape, s);
  return gather(src, along_axis_indices(shape, indices, axis, s), all_axes(a.ndim()), s);
}

array take_along_axis(const array& a, const array& indices, StreamOrDevice s) {
  return take_along_axis(reshape(a, {-1}, s), indices, 0, s);
}

array put_along_axis(const array& a, const array& indices, const array& values, int axis,
                     StreamOrDevice s) {
  return put_or_add_along_axis(a, indices, values, axis, false, "put_along_axis", s);
}

array scatter_add_axis(const array& a, const array& indices, const array& values, int axis,
                       StreamOrDevice s) {
  return put_or_add_along_axis(a, indices, values, axis, true, "scatter_add_axis", s);
}

array put_along_axis(const array& a, const array& indices, const array& values, StreamOrDevice s) {
  return reshape(put_along_axis(reshape(a, {-1}, s), indices, values, 0, s), a.shape(), s);
}

array slice(const array& a, const array& start_indices, std::vector<int> axes,
            const Shape& slice_size, StreamOrDevice s) {
  if (static_cast<int>(slice_size.size()) != a.ndim()) {
    std::ostringstream msg;
    msg << "[slice] Invalid slice size for array with " << a.ndim() << " dimensions.";
    throw std::invalid_argument(msg.str());
  }
  for (int d = 0; d < a.ndim(); ++d) {
    if (slice_size[d] < 0 || slice_size[d] > a.shape(d)) {
      throw std::invalid_argument("[slice] Invalid slice size " + shape_to_string(slice_size) +
                                  " for array with shape " + shape_to_string(a.shape()) + ".");
    }
  }
  axes = checked_axes(a, axes, "slice");
  Shape sizes;
  for (int ax : axes) sizes.push_back(slice_size[ax]);
  std::vector<array> idx = window_indices(a, start_indices, axes, sizes, "slice", s);
  // Axes without a start begin at 0: a static view.
  Shape start(a.ndim(), 0), stop = a.shape(), step(a.ndim(), 1);
  for (int d = 0; d < a.ndim(); ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) stop[d] = slice_size[d];
  }
  array src = stop == a.shape() ? a : slice(a, start, stop, step, s);
  if (axes.empty()) return src;
  array g = gather(src, idx, axes, s);
  return transpose(g, restore_order(axes, a.ndim()), s);
}

array slice_update(const array& a, const array& update, const array& start_indices,
                   std::vector<int> axes, StreamOrDevice s) {
  axes = checked_axes(a, axes, "slice_update");
  if (update.ndim() > a.ndim()) {
    throw std::invalid_argument(
        "[slice_update] Update with shape " + shape_to_string(update.shape()) +
        " has more dimensions than the array with shape " + shape_to_string(a.shape()) + ".");
  }
  Shape ushape(a.ndim() - update.ndim(), 1);
  ushape.insert(ushape.end(), update.shape().begin(), update.shape().end());
  for (int d = 0; d < a.ndim(); ++d) {
    if (ushape[d] > a.shape(d)) {
      throw std::invalid_argument(
          "[slice_update] Update with shape " + shape_to_string(update.shape()) +
          " does not fit in the array with shape " + shape_to_string(a.shape()) + ".");
    }
  }
  array upd = reshape(update, ushape, s);
  Shape sizes;
  for (int ax : axes) sizes.push_back(ushape[ax]);
  std::vector<array> idx = window_indices(a, start_indices, axes, sizes, "slice_update", s);
  // Axes without a start where the update is shorter than the array: they
  // are indexed too, from 0.
  std::vector<int> indexed = axes;
  for (int d = 0; d < a.ndim(); ++d) {
    if (std::find(axes.begin(), axes.end(), d) != axes.end() || ushape[d] == a.shape(d)) continue;
    indexed.push_back(d);
  }
  int k = static_cast<int>(indexed.size());
  if (k == 0) return astype(broadcast_to(upd, a.shape(), s), a.dtype(), s);
  std::vector<array> all_idx;
  for (int i = 0; i < k; ++i) {
    Shape shape(k, 1);
    shape[i] = ushape[indexed[i]];
    if (i < static_cast<int>(idx.size())) {
      all_idx.push_back(reshape(idx[i], shape, s));
    } else {
      all_idx.push_back(reshape(arange(0, ushape[indexed[i]], 1, int32, s), shape, s));
    }
  }
  // Updates in gather order: the indexed axes first, then the block.
  std::vector<int> perm = indexed;
  for (int d = 0; d < a.ndim(); ++d) {
    if (std::find(indexed.begin(), indexed.end(), d) == indexed.end()) perm.push_back(d);
  }
  return scatter(a, all_idx, transpose(upd, perm, s), indexed, s);
}

} // namespace loom

namespace loom {

array diagonal(const array& a, int offset, int axis1, int axis2, StreamOrDevice s) {
  if (a.ndim() < 2) {
    throw std::invalid_argument("[diagonal] Array must have at least two dimensions, but got " +
                                std::to_string(a.ndim()) + " dimensions.");
  }
  auto bad_axis = [&](const char* name, int axis) {
    return std::out_of_range(std::string("[diagonal] Invalid ") + name + " " +
                             std::to_string(axis) + " for array with " + std::to_string(a.ndim()) +
                             " dimensions.");
  };
  if (axis1 < -a.ndim() || axis1 >= a.ndim()) throw bad_axis("axis1", axis1);
  if (axis2 < -a.ndim() || axis2 >= a.ndim()) throw bad_axis("axis2", axis2);
  int ax1 = axis1 < 0 ? axis1 + a.ndim() : axis1;
  int ax2 = axis2 < 0 ? axis2 + a.ndim() : axis2;
  if (ax1 == ax2) throw std::invalid_argument("[diagonal] axis1 and axis2 cannot be the same axis");
  const int64_t rows = a.shape()[ax1];
  const int64_t cols = a.shape()[ax2];
  const int64_t row0 = offset < 0 ? -static_cast<int64_t>(offset) : 0;
  const int64_t col0 = offset > 0 ? offset : 0;
  const int64_t n = std::max<int64_t>(0, std::min(rows - row0, cols - col0));
  array r = arange(row0, row0 + n, 1, s);
  array c = arange(col0, col0 + n, 1, s);
  // gather puts the index axis first and keeps the other axes in order.
  array g = gather(a, {r, c}, {ax1, ax2}, s);
  return moveaxis(g, 0, -1, s);
}

array diag(const array& a, int k, StreamOrDevice s) {
  if (a.ndim() == 2) return diagonal(a, k, 0, 1, s);
  if (a.ndim() != 1) {
    throw std::invalid_argument("[diag] array must be 1-D or 2-D, got array with " +
                                std::to_string(a.ndim()) + " dimensions.");
  }
  const int64_t n = a.shape()[0];
  const int64_t size = n + (k < 0 ? -static_cast<int64_t>(k) : k);
  const int64_t row0 = k < 0 ? -static_cast<int64_t>(k) : 0;
  const int64_t col0 = k > 0 ? k : 0;
  array r = arange(row0, row0 + n, 1, s);
  array c = arange(col0, col0 + n, 1, s);
  Shape square{static_cast<int32_t>(size), static_cast<int32_t>(size)};
  return scatter(zeros(square, a.dtype(), s), {r, c}, a, {0, 1}, s);
}

array trace(const array& a, int offset, int axis1, int axis2, std::optional<Dtype> dtype,
            StreamOrDevice s) {
  if (a.ndim() < 2) {
    throw std::invalid_argument("[trace] Array must have at least two dimensions, but got " +
                                std::to_string(a.ndim()) + " dimensions.");
  }
  array total = sum(diagonal(a, offset, axis1, axis2, s), -1, false, s);
  return dtype ? astype(total, *dtype, s) : total;
}

} // namespace loom
