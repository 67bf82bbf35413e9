#include "loom/ops/shape.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "loom/ops/creation.h"
#include "loom/ops/utils.h"
#include "loom/primitives/indexing.h"
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
int32_t slice_length(int32_t start, int32_t stop, int32_t step) {
  if (step > 0) return stop > start ? (stop - start + step - 1) / step : 0;
  return start > stop ? (start - stop - step - 1) / (-step) : 0;
}

// Validates a slice specification and returns the selected region's shape.
Shape slice_shape(const char* op, const array& a, Shape& start, Shape& stop, const Shape& strides) {
  const size_t nd = a.ndim();
  if (start.size() != nd || stop.size() != nd || strides.size() != nd) {
    std::ostringstream msg;
    msg << "[" << op << "] Invalid number of start, stop or stride values (" << start.size() << ", "
        << stop.size() << ", " << strides.size() << ") for array with " << nd << " dimensions.";
    throw std::invalid_argument(msg.str());
  }
  Shape out(nd);
  for (size_t d = 0; d < nd; ++d) {
    const int32_t dim = a.shape()[d];
    if (strides[d] == 0) {
      throw std::invalid_argument(std::string("[") + op + "] Slice step cannot be zero.");
    }
    // Accept un-normalised bounds the NumPy way instead of reading out of range.
    auto clamp = [&](int32_t v, bool is_start) {
      if (v < 0 && !(strides[d] < 0 && !is_start && v == -1)) v += dim;
      if (strides[d] > 0) return std::clamp(v, 0, dim);
      return std::clamp(v, -1, dim - 1);
    };
    start[d] = clamp(start[d], true);
    stop[d] = clamp(stop[d], false);
    out[d] = slice_length(start[d], stop[d], strides[d]);
  }
  return out;
}

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

// --- slicing ----------------------------------------------------------------------

array slice(const array& a, Shape start, Shape stop, Shape strides, StreamOrDevice s) {
  Shape shape = slice_shape("slice", a, start, stop, strides);
  bool whole = shape == a.shape();
  for (size_t d = 0; whole && d < strides.size(); ++d) {
    whole = strides[d] == 1 || a.shape()[d] <= 1;
  }
  if (whole) return a;
  return array(
      std::move(shape), a.dtype(),
      std::make_shared<Slice>(to_stream(s), std::move(start), std::move(stop), std::move(strides)),
      {a});
}

array slice_update(const array& a, const array& update, Shape start, Shape stop, Shape strides,
                   StreamOrDevice s) {
  Shape region = slice_shape("slice_update", a, start, stop, strides);
  Stream stream = to_stream(s);
  array upd = broadcast_to(astype(update, a.dtype(), stream), region, stream);
  return array(
      a.shape(), a.dtype(),
      std::make_shared<SliceUpdate>(stream, std::move(start), std::move(stop), std::move(strides)),
      {a, upd});
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

} // namespace loom
