// Basic indexing: integers, slices, None and Ellipsis (and tuples of them).
// Reading makes views with slice/squeeze/expand_dims; writing goes through
// slice_update.
#include "utils.h"

namespace loom::bindings {

namespace {

struct BasicIndex {
  Shape start, stop, step;         // per input axis
  bool sliced = false;             // some axis is not taken whole
  std::vector<int> int_axes;       // input axes indexed by an integer
  std::vector<int> none_positions; // result axes inserted by None
  Shape region;                    // shape of the sliced region (input rank)
  Shape result;                    // shape of a[index]
};

bool is_integer_index(nb::handle h) {
  PyObject* p = h.ptr();
  if (PyBool_Check(p)) return false;
  if (PyLong_Check(p)) return true;
  if (is_array(h)) {
    const array& a = as_array(h);
    return a.ndim() == 0 && is_integral(a.dtype());
  }
  // NumPy integer scalars and other __index__ implementers (NumPy arrays are
  // sequences and are left to advanced indexing).
  return PyIndex_Check(p) && !PySequence_Check(p);
}

int64_t integer_index(nb::handle h) {
  if (is_array(h)) return nb::cast<int64_t>(to_scalar(as_array(h)));
  nb::object i = nb::steal(PyNumber_Index(h.ptr()));
  if (!i.is_valid()) throw nb::python_error();
  return nb::cast<int64_t>(i);
}

[[noreturn]] void unsupported_index(nb::handle h) {
  if (is_array(h) || PyList_Check(h.ptr()) || PyObject_CheckBuffer(h.ptr())) {
    throw std::invalid_argument(
        "Indexing with arrays or lists (advanced indexing) is not supported yet; use "
        "integers, slices, None and Ellipsis.");
  }
  throw std::invalid_argument("Cannot index loom array using the given type.");
}

BasicIndex parse_index(const array& a, nb::handle index) {
  std::vector<nb::handle> entries;
  nb::object holder;
  if (PyTuple_Check(index.ptr())) {
    holder = nb::borrow(index);
    for (auto h : index) entries.push_back(h);
  } else {
    entries.push_back(index);
  }

  int ndim = a.ndim();
  int consuming = 0;
  int ellipses = 0;
  for (auto h : entries) {
    if (h.is_none()) continue;
    if (h.ptr() == Py_Ellipsis) {
      ++ellipses;
    } else if (PySlice_Check(h.ptr()) || is_integer_index(h)) {
      ++consuming;
    } else {
      unsupported_index(h);
    }
  }
  if (ellipses > 1) {
    throw std::invalid_argument("An index can only have a single ellipsis (...)");
  }
  if (consuming > ndim) {
    if (ndim == 0) {
      throw std::invalid_argument("too many indices for array: array is 0-dimensional");
    }
    throw std::invalid_argument("Too many indices for array with " + std::to_string(ndim) +
                                " dimensions.");
  }

  BasicIndex idx;
  idx.start.assign(ndim, 0);
  idx.stop = a.shape();
  idx.step.assign(ndim, 1);
  idx.region = a.shape();
  int axis = 0;
  auto full_axes = [&](int count) {
    for (int k = 0; k < count; ++k, ++axis) idx.result.push_back(a.shape()[axis]);
  };
  for (auto h : entries) {
    if (h.is_none()) {
      idx.none_positions.push_back(static_cast<int>(idx.result.size()));
      idx.result.push_back(1);
    } else if (h.ptr() == Py_Ellipsis) {
      full_axes(ndim - consuming);
    } else if (PySlice_Check(h.ptr())) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(h.ptr(), &start, &stop, &step) < 0) throw nb::python_error();
      int32_t dim = a.shape()[axis];
      Py_ssize_t len = PySlice_AdjustIndices(dim, &start, &stop, step);
      // An empty slice may come back with start -1 (before the first element,
      // for a negative step), which the slice op would read as the last one.
      if (len == 0) start = stop = 0, step = 1;
      idx.start[axis] = static_cast<int32_t>(start);
      idx.stop[axis] = static_cast<int32_t>(stop);
      idx.step[axis] = static_cast<int32_t>(step);
      idx.region[axis] = static_cast<int32_t>(len);
      if (!(start == 0 && stop == dim && step == 1)) idx.sliced = true;
      idx.result.push_back(static_cast<int32_t>(len));
      ++axis;
    } else {
      int64_t i = integer_index(h);
      int32_t dim = a.shape()[axis];
      if (i < -static_cast<int64_t>(dim) || i >= dim) {
        throw std::out_of_range("index " + std::to_string(i) + " is out of bounds for axis " +
                                std::to_string(axis) + " with size " + std::to_string(dim));
      }
      if (i < 0) i += dim;
      idx.start[axis] = static_cast<int32_t>(i);
      idx.stop[axis] = static_cast<int32_t>(i + 1);
      idx.region[axis] = 1;
      if (dim != 1) idx.sliced = true;
      idx.int_axes.push_back(axis);
      ++axis;
    }
  }
  if (ellipses == 0) full_axes(ndim - axis);
  return idx;
}

} // namespace

array get_item(const array& a, nb::handle index) {
  BasicIndex idx = parse_index(a, index);
  array out = a;
  if (idx.sliced) out = slice(out, idx.start, idx.stop, idx.step);
  if (!idx.int_axes.empty()) out = squeeze(out, idx.int_axes);
  if (!idx.none_positions.empty()) out = expand_dims(out, idx.none_positions);
  return out;
}

void set_item(array& a, nb::handle index, nb::handle value) {
  BasicIndex idx = parse_index(a, index);
  array update = to_array(value, a.dtype());
  if (update.dtype() != a.dtype()) update = astype(update, a.dtype());
  if (update.ndim() > static_cast<int>(idx.result.size())) {
    // Leading size-one axes of the update can be dropped (NumPy does too).
    int extra = update.ndim() - static_cast<int>(idx.result.size());
    for (int d = 0; d < extra; ++d) {
      if (update.shape()[d] != 1) {
        throw std::invalid_argument("Cannot broadcast array of shape " +
                                    shape_to_string(update.shape()) + " into shape " +
                                    shape_to_string(idx.result) + ".");
      }
    }
    update = reshape(update, Shape(update.shape().begin() + extra, update.shape().end()));
  }
  if (update.shape() != idx.result) update = broadcast_to(update, idx.result);
  // From the shape of a[index] to the shape of the region in `a`.
  if (!idx.none_positions.empty()) update = squeeze(update, idx.none_positions);
  if (!idx.int_axes.empty()) update = expand_dims(update, idx.int_axes);
  a = slice_update(a, update, idx.start, idx.stop, idx.step);
}

} // namespace loom::bindings
