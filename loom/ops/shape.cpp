#include "loom/ops/shape.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "loom/allocator/object_pool.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/slice.h"
#include "loom/ops/utils.h"
#include "loom/primitives/shape.h"

namespace loom {

namespace {

std::string axis_out_of_bounds(const char* op, int axis, int ndim) {
  std::ostringstream msg;
  msg << "[" << op << "] Axis " << axis << " is out of bounds for array with " << ndim
      << " dimensions.";
  return msg.str();
}

// Normalises axes against `ndim` with the "Axis N is out of bounds" wording of
// expand_dims, squeeze, concatenate, stack and split; sorts and rejects repeats.
std::vector<int> checked_axes(const std::vector<int>& axes, int ndim, const char* op) {
  std::vector<int> out;
  out.reserve(axes.size());
  for (int ax : axes) {
    int a = ax < 0 ? ax + ndim : ax;
    if (a < 0 || a >= ndim) throw std::out_of_range(axis_out_of_bounds(op, ax, ndim));
    out.push_back(a);
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    throw std::invalid_argument(std::string("[") + op + "] Received duplicate axes.");
  }
  return out;
}

int checked_axis(int axis, int ndim, const char* op) { return checked_axes({axis}, ndim, op)[0]; }

// Elements a normalised slice selects along one axis.
} // namespace

// --- reshaping ------------------------------------------------------------------

array reshape(const array& a, Shape shape, StreamOrDevice s) {
  int infer = -1;
  size_t known = 1;
  bool bad = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) {
        throw std::invalid_argument("[reshape] Reshape can only infer one dimension.");
      }
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      bad = true;
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0 && !bad) {
    if (known == 0) {
      throw std::invalid_argument("[reshape] Cannot infer the shape of an empty array");
    }
    shape[infer] = static_cast<int32_t>(a.size() / known);
    known *= shape[infer];
  }
  if (bad || known != a.size()) {
    throw std::invalid_argument("[reshape] Cannot reshape array of size " +
                                std::to_string(a.size()) + " into shape " + shape_to_string(shape) +
                                ".");
  }
  if (shape == a.shape()) return a;
  Shape out_shape = shape;
  return array(std::move(out_shape), a.dtype(),
               std::make_shared<Reshape>(to_stream(s), std::move(shape)), {a});
}

array flatten(const array& a, int start_axis, int end_axis, StreamOrDevice s) {
  const int nd = a.ndim();
  if (nd == 0) return reshape(a, {1}, s);
  int start = start_axis < 0 ? start_axis + nd : start_axis;
  int end = end_axis < 0 ? end_axis + nd : end_axis;
  start = std::max(start, 0);
  end = std::min(end, nd - 1);
  if (start > end) {
    throw std::invalid_argument("[flatten] start_axis must be less than or equal to end_axis");
  }
  if (start == end) return a;
  Shape shape(a.shape().begin(), a.shape().begin() + start);
  int32_t merged = 1;
  for (int d = start; d <= end; ++d) merged *= a.shape()[d];
  shape.push_back(merged);
  shape.insert(shape.end(), a.shape().begin() + end + 1, a.shape().end());
  Shape out_shape = shape;
  return array(std::move(out_shape), a.dtype(),
               std::make_shared<Flatten>(to_stream(s), std::move(shape), start, end), {a});
}

array transpose(const array& a, std::vector<int> axes, StreamOrDevice s) {
  const int nd = a.ndim();
  if (static_cast<int>(axes.size()) != nd) {
    throw std::invalid_argument("[transpose] Received " + std::to_string(axes.size()) +
                                " axes for array with " + std::to_string(nd) + " dimensions.");
  }
  std::vector<bool> seen(nd, false);
  for (auto& ax : axes) {
    if (ax < 0) ax += nd;
    if (ax < 0 || ax >= nd) {
      throw std::out_of_range("[transpose] Invalid axis (" + std::to_string(ax) +
                              ") for array with " + std::to_string(nd) + " dimensions.");
    }
  }
  for (int ax : axes) {
    if (seen[ax]) throw std::invalid_argument("[transpose] Repeat axes not allowed.");
    seen[ax] = true;
  }
  Shape shape;
  for (int ax : axes) shape.push_back(a.shape()[ax]);
  return array(std::move(shape), a.dtype(),
               std::make_shared<Transpose>(to_stream(s), std::move(axes)), {a});
}

array transpose(const array& a, StreamOrDevice s) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.rbegin(), axes.rend(), 0);
  return transpose(a, std::move(axes), s);
}

array swapaxes(const array& a, int axis1, int axis2, StreamOrDevice s) {
  int a1 = normalize_axis(axis1, a.ndim(), "swapaxes");
  int a2 = normalize_axis(axis2, a.ndim(), "swapaxes");
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  std::swap(axes[a1], axes[a2]);
  return transpose(a, std::move(axes), s);
}

array moveaxis(const array& a, int source, int destination, StreamOrDevice s) {
  int src = normalize_axis(source, a.ndim(), "moveaxis");
  int dst = normalize_axis(destination, a.ndim(), "moveaxis");
  if (src == dst) return a;
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  axes.erase(axes.begin() + src);
  axes.insert(axes.begin() + dst, src);
  return transpose(a, std::move(axes), s);
}

array broadcast_to(const array& a, const Shape& shape, StreamOrDevice s) {
  if (a.shape() == shape) return a;
  // The common case checked without building the broadcast shape: every
  // dimension of `a` is 1 or the target's.
  bool fits = a.ndim() <= static_cast<int>(shape.size());
  const size_t lead = fits ? shape.size() - a.ndim() : 0;
  for (int d = 0; fits && d < a.ndim(); ++d) {
    fits = a.shape()[d] == 1 || a.shape()[d] == shape[lead + d];
  }
  if (fits) {
    return array(
        shape, a.dtype(),
        std::allocate_shared<Broadcast>(allocator::PoolAllocator<Broadcast>(), to_stream(s), shape),
        {a});
  }
  if (a.ndim() > static_cast<int>(shape.size())) {
    throw std::invalid_argument("Cannot broadcast array of shape " + shape_to_string(a.shape()) +
                                " into shape " + shape_to_string(shape) + ".");
  }
  if (broadcast_shapes(a.shape(), shape) != shape) {
    throw std::invalid_argument("Cannot broadcast array of shape " + shape_to_string(a.shape()) +
                                " into shape " + shape_to_string(shape) + ".");
  }
  return array(shape, a.dtype(), std::make_shared<Broadcast>(to_stream(s), shape), {a});
}

std::vector<array> broadcast_arrays(const std::vector<array>& inputs, StreamOrDevice s) {
  std::vector<Shape> shapes;
  for (auto& in : inputs) shapes.push_back(in.shape());
  Shape shape = broadcast_shapes(shapes);
  std::vector<array> out;
  for (auto& in : inputs) out.push_back(broadcast_to(in, shape, s));
  return out;
}

array expand_dims(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  if (axes.empty()) return a;
  const int out_nd = a.ndim() + static_cast<int>(axes.size());
  std::vector<int> sorted = checked_axes(axes, out_nd, "expand_dims");
  Shape shape = ExpandDims::output_shape(a.shape(), sorted);
  return array(std::move(shape), a.dtype(),
               std::make_shared<ExpandDims>(to_stream(s), std::move(sorted)), {a});
}

array expand_dims(const array& a, int axis, StreamOrDevice s) {
  return expand_dims(a, std::vector<int>{axis}, s);
}

array squeeze(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  if (axes.empty()) return a;
  std::vector<int> sorted = checked_axes(axes, a.ndim(), "squeeze");
  for (int ax : sorted) {
    if (a.shape()[ax] != 1) {
      throw std::invalid_argument("[squeeze] Cannot squeeze axis " + std::to_string(ax) +
                                  " with size " + std::to_string(a.shape()[ax]) +
                                  " which is not equal to 1.");
    }
  }
  Shape shape = Squeeze::output_shape(a.shape(), sorted);
  return array(std::move(shape), a.dtype(),
               std::make_shared<Squeeze>(to_stream(s), std::move(sorted)), {a});
}

array squeeze(const array& a, StreamOrDevice s) {
  std::vector<int> axes;
  for (int d = 0; d < a.ndim(); ++d) {
    if (a.shape()[d] == 1) axes.push_back(d);
  }
  return squeeze(a, axes, s);
}

// --- joining and splitting ----------------------------------------------------------

array concatenate(const std::vector<array>& arrays, int axis, StreamOrDevice s) {
  if (arrays.empty()) {
    throw std::invalid_argument("[concatenate] No arrays provided for concatenation");
  }
  const int nd = arrays[0].ndim();
  int ax = checked_axis(axis, nd, "concatenate");
  for (auto& a : arrays) {
    if (a.ndim() != nd) {
      throw std::invalid_argument(
          "[concatenate] All the input arrays must have the same number of dimensions. However, "
          "got arrays with dimensions " +
          std::to_string(nd) + " and " + std::to_string(a.ndim()) + ".");
    }
  }
  Shape shape = arrays[0].shape();
  shape[ax] = 0;
  Dtype dtype = arrays[0].dtype();
  for (auto& a : arrays) {
    for (int d = 0; d < nd; ++d) {
      if (d != ax && a.shape()[d] != arrays[0].shape()[d]) {
        std::ostringstream msg;
        msg << "[concatenate] All the input array dimensions must match exactly except for the "
               "concatenation axis. However, the provided shapes are ";
        for (auto& b : arrays) msg << shape_to_string(b.shape()) << ", ";
        msg << "and the concatenation axis is " << ax << ".";
        throw std::invalid_argument(msg.str());
      }
    }
    shape[ax] += a.shape()[ax];
    dtype = promote_types(dtype, a.dtype());
  }
  if (arrays.size() == 1 && arrays[0].dtype() == dtype) return arrays[0];
  Stream stream = to_stream(s);
  std::vector<array> inputs;
  for (auto& a : arrays) inputs.push_back(astype(a, dtype, stream));
  return array(std::move(shape), dtype, std::make_shared<Concatenate>(stream, ax),
               std::move(inputs));
}

array concatenate(const std::vector<array>& arrays, StreamOrDevice s) {
  std::vector<array> flat;
  for (auto& a : arrays) flat.push_back(reshape(a, {static_cast<int32_t>(a.size())}, s));
  return concatenate(flat, 0, s);
}

array stack(const std::vector<array>& arrays, int axis, StreamOrDevice s) {
  if (arrays.empty()) {
    throw std::invalid_argument("[stack] No arrays provided for stacking");
  }
  for (auto& a : arrays) {
    if (a.shape() != arrays[0].shape()) {
      throw std::invalid_argument("[stack] All arrays must have the same shape");
    }
  }
  int ax = checked_axis(axis, arrays[0].ndim() + 1, "stack");
  std::vector<array> expanded;
  for (auto& a : arrays) expanded.push_back(expand_dims(a, ax, s));
  return concatenate(expanded, ax, s);
}

std::vector<array> split(const array& a, const Shape& indices, int axis, StreamOrDevice s) {
  int ax = checked_axis(axis, a.ndim(), "split");
  const int32_t dim = a.shape()[ax];
  // NumPy semantics: boundaries clamp into [0, dim]; a boundary before the
  // previous one gives an empty piece.
  Shape bounds;
  for (int32_t idx : indices) {
    int32_t b = idx < 0 ? idx + dim : idx;
    bounds.push_back(std::clamp(b, 0, dim));
  }
  auto prim = std::make_shared<Split>(to_stream(s), std::move(bounds), ax);
  std::vector<Shape> shapes = prim->output_shapes({a});
  std::vector<Dtype> dtypes(shapes.size(), a.dtype());
  return array::make_arrays(std::move(shapes), dtypes, prim, {a});
}

std::vector<array> split(const array& a, int num_splits, int axis, StreamOrDevice s) {
  int ax = checked_axis(axis, a.ndim(), "split");
  if (num_splits <= 0) {
    throw std::invalid_argument("[split] num_splits must be positive and non-zero but got " +
                                std::to_string(num_splits) + ".");
  }
  const int32_t dim = a.shape()[ax];
  if (dim % num_splits != 0) {
    throw std::invalid_argument(
        "Array split does not result in sub arrays with equal size: attempting " +
        std::to_string(num_splits) + " splits along axis " + std::to_string(axis) + " for shape " +
        shape_to_string(a.shape()) + ".");
  }
  Shape indices;
  for (int i = 1; i < num_splits; ++i) indices.push_back(i * (dim / num_splits));
  return split(a, indices, ax, s);
}

// --- composites ---

namespace {

// a[lo:hi] along one axis.
array take_range(const array& a, int axis, int lo, int hi, StreamOrDevice s) {
  Shape start(a.ndim(), 0), stop = a.shape(), step(a.ndim(), 1);
  start[axis] = lo;
  stop[axis] = hi;
  return slice(a, start, stop, step, s);
}

array roll_axis(const array& a, int shift, int axis, StreamOrDevice s) {
  int n = a.shape(axis);
  if (n == 0) return a;
  int k = ((shift % n) + n) % n;
  if (k == 0) return a;
  // The last k elements move to the front.
  return concatenate({take_range(a, axis, n - k, n, s), take_range(a, axis, 0, n - k, s)}, axis, s);
}

array pad_axis(const array& a, int ax, int before, int after, const std::string& mode,
               const array& value, StreamOrDevice s) {
  if (before == 0 && after == 0) return a;
  int n = a.shape(ax);
  auto edge_part = [&](int count, bool front) {
    Shape shape = a.shape();
    shape[ax] = count;
    if (mode == "constant") return full(shape, value, a.dtype(), s);
    if (n == 0) {
      throw std::invalid_argument("[pad] Cannot pad an empty axis with mode " + mode + ".");
    }
    if (mode == "edge") {
      array e = front ? take_range(a, ax, 0, 1, s) : take_range(a, ax, n - 1, n, s);
      return broadcast_to(e, shape, s);
    }
    // reflect excludes the edge element, symmetric repeats it.
    int skip = mode == "reflect" ? 1 : 0;
    if (count + skip > n) {
      throw std::invalid_argument("[pad] Padding of " + std::to_string(count) + " with mode " +
                                  mode + " needs a larger axis (size " + std::to_string(n) + ").");
    }
    array piece = front ? take_range(a, ax, skip, skip + count, s)
                        : take_range(a, ax, n - skip - count, n - skip, s);
    return flip(piece, {ax}, s);
  };
  std::vector<array> parts;
  if (before > 0) parts.push_back(edge_part(before, true));
  parts.push_back(a);
  if (after > 0) parts.push_back(edge_part(after, false));
  return concatenate(parts, ax, s);
}

} // namespace

array flip(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  Shape start(a.ndim(), 0), stop = a.shape(), step(a.ndim(), 1);
  for (int ax : checked_axes(axes, a.ndim(), "flip")) {
    start[ax] = a.shape(ax) - 1;
    stop[ax] = -1;
    step[ax] = -1;
  }
  return slice(a, start, stop, step, s);
}
array flip(const array& a, StreamOrDevice s) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  return flip(a, axes, s);
}

array roll(const array& a, const std::vector<int>& shifts_in, const std::vector<int>& axes,
           StreamOrDevice s) {
  std::vector<int> shifts = shifts_in;
  if (shifts.size() == 1 && axes.size() > 1) shifts.assign(axes.size(), shifts[0]);
  if (shifts.size() != axes.size()) {
    throw std::invalid_argument("[roll] shift and axis must have the same length (got " +
                                std::to_string(shifts.size()) + " and " +
                                std::to_string(axes.size()) + ").");
  }
  array out = a;
  for (size_t i = 0; i < axes.size(); ++i) {
    out = roll_axis(out, shifts[i], normalize_axis(axes[i], a.ndim(), "roll"), s);
  }
  return out;
}
array roll(const array& a, int shift, StreamOrDevice s) {
  return reshape(roll_axis(reshape(a, {-1}, s), shift, 0, s), a.shape(), s);
}

array pad(const array& a, const std::vector<std::pair<int, int>>& widths, const array& value,
          const std::string& mode, StreamOrDevice s) {
  if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "symmetric") {
    throw std::invalid_argument("Invalid padding mode (" + mode + ") passed to pad");
  }
  if (static_cast<int>(widths.size()) != a.ndim()) {
    throw std::invalid_argument("[pad] Invalid number of pad_width axes: expected " +
                                std::to_string(a.ndim()) + " but got " +
                                std::to_string(widths.size()) + ".");
  }
  array out = a;
  for (int ax = 0; ax < a.ndim(); ++ax) {
    auto [before, after] = widths[ax];
    if (before < 0 || after < 0) {
      throw std::invalid_argument("[pad] Padding widths must be non-negative.");
    }
    out = pad_axis(out, ax, before, after, mode, value, s);
  }
  return out;
}

array tile(const array& a, std::vector<int> reps, StreamOrDevice s) {
  for (int r : reps) {
    if (r < 0) throw std::invalid_argument("[tile] Negative repetitions are not allowed.");
  }
  int nd = std::max<int>(a.ndim(), static_cast<int>(reps.size()));
  reps.insert(reps.begin(), nd - reps.size(), 1);
  Shape in(nd - a.ndim(), 1);
  in.insert(in.end(), a.shape().begin(), a.shape().end());
  // View as (1, d0, 1, d1, ...), broadcast to (r0, d0, r1, d1, ...), merge pairs.
  Shape inter, target, out;
  for (int i = 0; i < nd; ++i) {
    inter.insert(inter.end(), {1, in[i]});
    target.insert(target.end(), {reps[i], in[i]});
    out.push_back(reps[i] * in[i]);
  }
  return reshape(broadcast_to(reshape(a, inter, s), target, s), out, s);
}

array repeat(const array& a, int repeats, int axis, StreamOrDevice s) {
  if (repeats < 0) throw std::invalid_argument("[repeat] Number of repeats cannot be negative");
  int ax = normalize_axis(axis, a.ndim(), "repeat");
  array e = expand_dims(a, ax + 1, s);
  Shape target = e.shape();
  target[ax + 1] = repeats;
  Shape out = a.shape();
  out[ax] *= repeats;
  return reshape(broadcast_to(e, target, s), out, s);
}
array repeat(const array& a, int repeats, StreamOrDevice s) {
  return repeat(reshape(a, {-1}, s), repeats, 0, s);
}

namespace {

array triangle(const array& a, int k, bool upper, StreamOrDevice s) {
  if (a.ndim() < 2) {
    throw std::invalid_argument(std::string("[") + (upper ? "triu" : "tril") +
                                "] array must be at least 2-D (got shape " +
                                shape_to_string(a.shape()) + ").");
  }
  int n = a.shape(-2), m = a.shape(-1);
  array mask = upper ? logical_not(tri(n, m, k - 1, bool_, s), s) : tri(n, m, k, bool_, s);
  return where(mask, a, zeros({}, a.dtype(), s), s);
}

} // namespace

array tril(const array& a, int k, StreamOrDevice s) { return triangle(a, k, false, s); }
array triu(const array& a, int k, StreamOrDevice s) { return triangle(a, k, true, s); }

array atleast_1d(const array& a, StreamOrDevice s) {
  return a.ndim() >= 1 ? a : reshape(a, {1}, s);
}
array atleast_2d(const array& a, StreamOrDevice s) {
  if (a.ndim() >= 2) return a;
  return a.ndim() == 0 ? reshape(a, {1, 1}, s) : expand_dims(a, 0, s);
}
array atleast_3d(const array& a, StreamOrDevice s) {
  // (1, 1, 1), (1, N, 1), (M, N, 1)
  if (a.ndim() >= 3) return a;
  if (a.ndim() == 0) return reshape(a, {1, 1, 1}, s);
  if (a.ndim() == 1) return reshape(a, {1, a.shape(0), 1}, s);
  return expand_dims(a, 2, s);
}

std::vector<array> unstack(const array& a, int axis, StreamOrDevice s) {
  int ax = normalize_axis(axis, a.ndim(), "unstack");
  int n = a.shape(ax);
  std::vector<array> parts;
  if (n == 0) return parts;
  parts = n == 1 ? std::vector<array>{a} : split(a, n, ax, s);
  for (auto& p : parts) p = squeeze(p, std::vector<int>{ax}, s);
  return parts;
}

array unflatten(const array& a, int axis, const Shape& shape, StreamOrDevice s) {
  int ax = normalize_axis(axis, a.ndim(), "unflatten");
  if (shape.empty()) {
    throw std::invalid_argument("[unflatten] The shape to unflatten to must not be empty.");
  }
  // The -1 is resolved here: reshape cannot infer it when the axis is empty.
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred >= 0) {
        throw std::invalid_argument("[unflatten] Only one dimension can be inferred (-1).");
      }
      inferred = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw std::invalid_argument("[unflatten] Invalid dimension " + std::to_string(shape[i]) +
                                  " in shape " + shape_to_string(shape) + ".");
    } else {
      known *= shape[i];
    }
  }
  Shape sub = shape;
  int dim = a.shape(ax);
  if (inferred >= 0) {
    if (known == 0) {
      throw std::invalid_argument("[unflatten] Cannot infer the -1 of shape " +
                                  shape_to_string(shape) + " beside a zero dimension.");
    }
    if (dim % known != 0) {
      throw std::invalid_argument("[unflatten] Cannot unflatten axis " + std::to_string(axis) +
                                  " of size " + std::to_string(dim) + " into shape " +
                                  shape_to_string(shape) + ".");
    }
    sub[inferred] = static_cast<int32_t>(dim / known);
  } else if (known != dim) {
    throw std::invalid_argument("[unflatten] Cannot unflatten axis " + std::to_string(axis) +
                                " of size " + std::to_string(dim) + " into shape " +
                                shape_to_string(shape) + ".");
  }
  Shape out(a.shape().begin(), a.shape().begin() + ax);
  out.insert(out.end(), sub.begin(), sub.end());
  out.insert(out.end(), a.shape().begin() + ax + 1, a.shape().end());
  return reshape(a, out, s);
}

array diff(const array& a, int n, int axis, StreamOrDevice s) {
  if (n < 0) {
    throw std::invalid_argument("[diff] Order must be non-negative but got " + std::to_string(n) +
                                ".");
  }
  int ax = normalize_axis(axis, a.ndim(), "diff");
  array out = a;
  for (int i = 0; i < n && out.shape(ax) > 0; ++i) {
    int len = out.shape(ax);
    out = subtract(take_range(out, ax, 1, len, s), take_range(out, ax, 0, len - 1, s), s);
  }
  return out;
}

std::vector<array> meshgrid(const std::vector<array>& arrays, bool sparse,
                            const std::string& indexing, StreamOrDevice s) {
  if (indexing != "xy" && indexing != "ij") {
    throw std::invalid_argument(
        "[meshgrid] Invalid indexing value. Valid values are 'xy' and 'ij'.");
  }
  int n = static_cast<int>(arrays.size());
  std::vector<array> out;
  for (int i = 0; i < n; ++i) {
    array flat = reshape(arrays[i], {-1}, s);
    Shape shape(n, 1);
    // Cartesian indexing swaps the first two axes.
    int pos = indexing == "xy" && n >= 2 && i < 2 ? 1 - i : i;
    shape[pos] = flat.shape(0);
    out.push_back(reshape(flat, shape, s));
  }
  return sparse ? out : broadcast_arrays(out, s);
}

array matrix_transpose(const array& a, StreamOrDevice s) {
  if (a.ndim() < 2) {
    throw std::invalid_argument(
        "[matrix_transpose] Input array must have at least 2 dimensions (got shape " +
        shape_to_string(a.shape()) + ").");
  }
  return swapaxes(a, -1, -2, s);
}

} // namespace loom
