// Indexing of arrays: integers, slices, None and Ellipsis (views through
// slice/squeeze/expand_dims), integer arrays and lists (gather/scatter, with
// NumPy's rules for where the indexed dimensions go), boolean masks (a Loom
// extension: the mask is evaluated, so it synchronises) and `array.at`.
#include <algorithm>
#include <numeric>

#include "utils.h"

namespace loom::bindings {

namespace {

enum class Kind { none, ellipsis, slice, integer, advanced };

struct Entry {
  Kind kind;
  nb::handle h;
  std::optional<array> idx; // advanced entries
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
  // sequences and go to advanced indexing).
  return PyIndex_Check(p) && !PySequence_Check(p);
}

int64_t integer_index(nb::handle h) {
  if (is_array(h)) return nb::cast<int64_t>(to_scalar(as_array(h)));
  nb::object i = nb::steal(PyNumber_Index(h.ptr()));
  if (!i.is_valid()) throw nb::python_error();
  return nb::cast<int64_t>(i);
}

bool is_array_like_index(nb::handle h) {
  return is_array(h) || PyList_Check(h.ptr()) || PyObject_CheckBuffer(h.ptr()) ||
         nb::hasattr(h, "__array_interface__") || nb::hasattr(h, "__dlpack__");
}

// The coordinates of the true elements of a boolean mask, one integer array
// per mask dimension (NumPy's nonzero). Reading the mask evaluates it.
std::vector<array> mask_coordinates(const array& mask) {
  array m = copy(mask);
  eval_nogil(m);
  std::vector<std::vector<int32_t>> coords(mask.ndim());
  const bool* p = m.data<bool>();
  Shape idx(mask.ndim(), 0);
  for (size_t i = 0; i < m.size(); ++i) {
    if (p[i]) {
      for (int d = 0; d < mask.ndim(); ++d) coords[d].push_back(idx[d]);
    }
    for (int d = mask.ndim() - 1; d >= 0; --d) {
      if (++idx[d] < mask.shape(d)) break;
      idx[d] = 0;
    }
  }
  std::vector<array> out;
  for (auto& c : coords) {
    int32_t n = static_cast<int32_t>(c.size());
    out.push_back(array(c.data(), Shape{n}, int32));
  }
  return out;
}

struct Index {
  std::vector<Entry> entries; // ellipsis expanded away; one per consumed axis or None
  bool advanced = false;
};

Index parse_entries(const array& a, nb::handle index) {
  std::vector<nb::handle> raw;
  if (PyTuple_Check(index.ptr())) {
    for (auto h : index) raw.push_back(h);
  } else {
    raw.push_back(index);
  }
  Index out;
  std::vector<Entry> entries;
  int consuming = 0;
  int ellipses = 0;
  for (auto h : raw) {
    if (h.is_none()) {
      entries.push_back({Kind::none, h, {}});
    } else if (h.ptr() == Py_Ellipsis) {
      ++ellipses;
      entries.push_back({Kind::ellipsis, h, {}});
    } else if (PySlice_Check(h.ptr())) {
      ++consuming;
      entries.push_back({Kind::slice, h, {}});
    } else if (is_integer_index(h)) {
      ++consuming;
      entries.push_back({Kind::integer, h, {}});
    } else if (is_array_like_index(h)) {
      array idx = is_array(h) ? as_array(h) : array_from_python(h, std::nullopt);
      // An empty list is an empty integer index, as in NumPy.
      if (idx.size() == 0 && !is_integral(idx.dtype())) idx = astype(idx, int32);
      if (idx.dtype() == bool_ && idx.ndim() > 0) {
        // A mask stands for one integer index per dimension it covers.
        int axis = consuming;
        for (int d = 0; d < idx.ndim(); ++d) {
          if (axis + d >= a.ndim() || a.shape(axis + d) != idx.shape(d)) {
            std::string size = axis + d < a.ndim() ? std::to_string(a.shape(axis + d)) : "0";
            throw std::out_of_range("boolean index did not match indexed array along axis " +
                                    std::to_string(axis + d) + "; size of axis is " + size +
                                    " but size of corresponding boolean axis is " +
                                    std::to_string(idx.shape(d)));
          }
        }
        for (auto& c : mask_coordinates(idx)) entries.push_back({Kind::advanced, h, c});
        consuming += idx.ndim();
      } else {
        if (!is_integral(idx.dtype())) {
          // MLX's message (its gather's), with the dtype named.
          throw std::invalid_argument("[gather] Got indices with invalid dtype " +
                                      dtype_name(idx.dtype()) + ". Indices must be integral.");
        }
        ++consuming;
        entries.push_back({Kind::advanced, h, idx});
      }
      out.advanced = true;
    } else {
      throw std::invalid_argument("Cannot index loom array using the given type " +
                                  python_type_name(h) + ".");
    }
  }
  if (ellipses > 1) {
    throw std::invalid_argument("An index can only have a single ellipsis (...)");
  }
  if (consuming > a.ndim()) {
    if (a.ndim() == 0) {
      throw std::invalid_argument("too many indices for array: array is 0-dimensional");
    }
    throw std::invalid_argument("Too many indices for array with " + std::to_string(a.ndim()) +
                                " dimensions.");
  }
  // Expand the ellipsis (or pad at the end) into whole-axis slices.
  // Kept for the process' life: a static nb::object would be released after
  // the interpreter has finalised.
  static nb::handle whole = PySlice_New(nullptr, nullptr, nullptr);
  bool expanded = false;
  for (auto& e : entries) {
    if (e.kind == Kind::ellipsis) {
      // The marker stays (it consumes no axis): NumPy counts an ellipsis
      // between array indices as separating them, even when it is empty.
      out.entries.push_back(e);
      for (int k = 0; k < a.ndim() - consuming; ++k)
        out.entries.push_back({Kind::slice, whole, {}});
      expanded = true;
    } else {
      out.entries.push_back(e);
    }
  }
  if (!expanded) {
    for (int k = 0; k < a.ndim() - consuming; ++k) out.entries.push_back({Kind::slice, whole, {}});
  }
  return out;
}

// What an index does, as ops: a basic slice of `a` (start/stop/step), then
// either squeezes (basic) or a gather over `adv_axes`, then a transpose and
// expand_dims to reach NumPy's result layout.
struct Plan {
  Shape start, stop, step;
  bool sliced = false;
  std::vector<int> int_axes;      // basic: axes indexed by an integer
  std::vector<int> adv_axes;      // advanced: axes indexed by arrays/integers
  std::vector<array> adv_indices; // advanced: their indices, broadcast together
  std::vector<int> perm;          // advanced: from gather's layout to the result's
  std::vector<int> none_positions;
  Shape result;
};

Plan make_plan(const array& a, nb::handle index) {
  Index idx = parse_entries(a, index);
  Plan p;
  int nd = a.ndim();
  p.start.assign(nd, 0);
  p.stop = a.shape();
  p.step.assign(nd, 1);
  Shape region = a.shape();
  // Layout of the result: 'N' None, 'R' a kept (sliced) axis, 'A' the
  // advanced block, 'E' where an ellipsis stood (no axis of its own).
  std::vector<char> layout;
  std::vector<int> adv_entry_pos;
  int axis = 0;
  for (auto& e : idx.entries) {
    if (e.kind == Kind::none) {
      layout.push_back('N');
      continue;
    }
    if (e.kind == Kind::ellipsis) {
      layout.push_back('E');
      continue;
    }
    int32_t dim = a.shape(axis);
    if (e.kind == Kind::slice) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(e.h.ptr(), &start, &stop, &step) < 0) throw nb::python_error();
      Py_ssize_t len = PySlice_AdjustIndices(dim, &start, &stop, step);
      if (len == 0) {
        // An empty selection: normalise it, whatever the step's sign
        // (x[-5::-1] on 3 elements gives start -1).
        start = 0;
        stop = 0;
        step = 1;
      }
      p.start[axis] = static_cast<int32_t>(start);
      p.stop[axis] = static_cast<int32_t>(stop);
      p.step[axis] = static_cast<int32_t>(step);
      region[axis] = static_cast<int32_t>(len);
      if (!(start == 0 && stop == dim && step == 1)) p.sliced = true;
      layout.push_back('R');
    } else if (e.kind == Kind::integer) {
      int64_t i = integer_index(e.h);
      if (i < -static_cast<int64_t>(dim) || i >= dim) {
        throw std::out_of_range("index " + std::to_string(i) + " is out of bounds for axis " +
                                std::to_string(axis) + " with size " + std::to_string(dim));
      }
      if (i < 0) i += dim;
      if (idx.advanced) {
        // With array indices present an integer is a 0-d array index (NumPy).
        adv_entry_pos.push_back(static_cast<int>(layout.size()));
        layout.push_back('A');
        p.adv_axes.push_back(axis);
        p.adv_indices.push_back(array(static_cast<int32_t>(i)));
      } else {
        p.start[axis] = static_cast<int32_t>(i);
        p.stop[axis] = static_cast<int32_t>(i + 1);
        region[axis] = 1;
        if (dim != 1) p.sliced = true;
        p.int_axes.push_back(axis);
      }
    } else {
      adv_entry_pos.push_back(static_cast<int>(layout.size()));
      layout.push_back('A');
      p.adv_axes.push_back(axis);
      p.adv_indices.push_back(*e.idx);
    }
    ++axis;
  }
  if (!idx.advanced) {
    // The result in entry order: None -> 1, slice -> its length.
    int ax = 0;
    for (auto& e : idx.entries) {
      if (e.kind == Kind::none) {
        p.none_positions.push_back(static_cast<int>(p.result.size()));
        p.result.push_back(1);
      } else if (e.kind != Kind::ellipsis) {
        if (e.kind == Kind::slice) p.result.push_back(region[ax]);
        ++ax;
      }
    }
    return p;
  }
  p.adv_indices = p.adv_indices.size() > 1 ? broadcast_arrays(p.adv_indices) : p.adv_indices;
  Shape ishape = p.adv_indices[0].shape();
  int m = static_cast<int>(ishape.size());
  bool adjacent =
      adv_entry_pos.back() - adv_entry_pos.front() + 1 == static_cast<int>(adv_entry_pos.size());
  // Final order: the advanced block where the first advanced index stood if
  // the advanced indices are adjacent, else first.
  std::vector<char> final_layout;
  if (!adjacent) final_layout.push_back('A');
  bool placed = !adjacent;
  for (char c : layout) {
    if (c == 'A') {
      if (!placed) final_layout.push_back('A');
      placed = true;
    } else {
      final_layout.push_back(c);
    }
  }
  // gather yields I + (kept axes in order); move I after the kept axes that
  // precede the block.
  int kept_before = 0;
  for (char c : final_layout) {
    if (c == 'A') break;
    if (c == 'R') ++kept_before;
  }
  int kept = 0;
  for (char c : final_layout) kept += c == 'R';
  for (int d = 0; d < kept_before; ++d) p.perm.push_back(m + d);
  for (int d = 0; d < m; ++d) p.perm.push_back(d);
  for (int d = m + kept_before; d < m + kept; ++d) p.perm.push_back(d);
  std::vector<int32_t> kept_sizes;
  for (int d = 0; d < nd; ++d) {
    if (std::find(p.adv_axes.begin(), p.adv_axes.end(), d) == p.adv_axes.end()) {
      kept_sizes.push_back(region[d]);
    }
  }
  int r = 0;
  for (char c : final_layout) {
    if (c == 'N') {
      p.none_positions.push_back(static_cast<int>(p.result.size()));
      p.result.push_back(1);
    } else if (c == 'A') {
      p.result.insert(p.result.end(), ishape.begin(), ishape.end());
    } else if (c == 'R') {
      p.result.push_back(kept_sizes[r++]);
    }
  }
  return p;
}

bool is_identity(const std::vector<int>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int>(i)) return false;
  }
  return true;
}

// The update as the region it replaces: `value` broadcast to the shape of
// a[index] (leading size-1 axes may be dropped, as NumPy allows).
array region_update(const array& a, nb::handle value, const Shape& result) {
  array update =
      PyList_Check(value.ptr()) ? array_from_python(value, a.dtype()) : to_array(value, a.dtype());
  if (update.dtype() != a.dtype()) update = astype(update, a.dtype());
  if (update.ndim() > static_cast<int>(result.size())) {
    int extra = update.ndim() - static_cast<int>(result.size());
    for (int d = 0; d < extra; ++d) {
      if (update.shape()[d] != 1) {
        throw std::invalid_argument("Cannot broadcast array of shape " +
                                    shape_to_string(update.shape()) + " into shape " +
                                    shape_to_string(result) + ".");
      }
    }
    update = reshape(update, Shape(update.shape().begin() + extra, update.shape().end()));
  }
  if (update.shape() != result) update = broadcast_to(update, result);
  return update;
}

enum class AtOp { set, add, subtract, multiply, divide, maximum, minimum };

array combine(const array& current, const array& update, AtOp op) {
  switch (op) {
    case AtOp::set:
      return update;
    case AtOp::add:
      return add(current, update);
    case AtOp::subtract:
      return subtract(current, update);
    case AtOp::multiply:
      return multiply(current, update);
    case AtOp::divide:
      return divide(current, update);
    case AtOp::maximum:
      return maximum(current, update);
    case AtOp::minimum:
      return minimum(current, update);
  }
  return update;
}

array update_at(const array& a, nb::handle index, nb::handle value, AtOp op) {
  Plan p = make_plan(a, index);
  if (p.adv_axes.empty()) {
    // Basic indices address each element once: read, combine, write back.
    array region = a;
    if (p.sliced) region = slice(region, p.start, p.stop, p.step);
    array update = region_update(a, value, p.result);
    if (!p.none_positions.empty()) update = squeeze(update, p.none_positions);
    if (!p.int_axes.empty()) update = expand_dims(update, p.int_axes);
    array combined = combine(region, update, op);
    if (combined.dtype() != a.dtype()) combined = astype(combined, a.dtype());
    return slice_update(a, combined, p.start, p.stop, p.step);
  }
  array update = region_update(a, value, p.result);
  if (!p.none_positions.empty()) update = squeeze(update, p.none_positions);
  if (!is_identity(p.perm)) {
    std::vector<int> inverse(p.perm.size());
    for (size_t i = 0; i < p.perm.size(); ++i) inverse[p.perm[i]] = static_cast<int>(i);
    update = transpose(update, inverse);
  }
  array target = p.sliced ? slice(a, p.start, p.stop, p.step) : a;
  array out = target;
  switch (op) {
    case AtOp::set:
      out = scatter(target, p.adv_indices, update, p.adv_axes);
      break;
    case AtOp::add:
      out = scatter_add(target, p.adv_indices, update, p.adv_axes);
      break;
    case AtOp::subtract:
      out = scatter_add(target, p.adv_indices, negative(update), p.adv_axes);
      break;
    case AtOp::multiply:
      out = scatter_prod(target, p.adv_indices, update, p.adv_axes);
      break;
    case AtOp::divide:
      // Repeated indices divide repeatedly: a product of reciprocals.
      if (is_inexact(a.dtype())) {
        out = scatter_prod(target, p.adv_indices, reciprocal(update), p.adv_axes);
      } else {
        array once = divide(gather(target, p.adv_indices, p.adv_axes), update);
        out = scatter(target, p.adv_indices, once, p.adv_axes);
      }
      break;
    case AtOp::maximum:
      out = scatter_max(target, p.adv_indices, update, p.adv_axes);
      break;
    case AtOp::minimum:
      out = scatter_min(target, p.adv_indices, update, p.adv_axes);
      break;
  }
  if (!p.sliced) return out;
  return slice_update(a, out, p.start, p.stop, p.step);
}

struct ArrayAt {
  array a;
  nb::object index;
};

} // namespace

array get_item(const array& a, nb::handle index) {
  Plan p = make_plan(a, index);
  array out = a;
  if (p.sliced) out = slice(out, p.start, p.stop, p.step);
  if (!p.adv_axes.empty()) {
    out = gather(out, p.adv_indices, p.adv_axes);
    if (!is_identity(p.perm)) out = transpose(out, p.perm);
  } else if (!p.int_axes.empty()) {
    out = squeeze(out, p.int_axes);
  }
  if (!p.none_positions.empty()) out = expand_dims(out, p.none_positions);
  return out;
}

void set_item(array& a, nb::handle index, nb::handle value) {
  a = update_at(a, index, value, AtOp::set);
}

void init_indexing(nb::module_& m) {
  nb::class_<ArrayAt>(m, "ArrayAt",
                      "Out-of-place updates at an index: ``a.at[idx].add(v)``. Unlike\n"
                      "``a[idx] += v``, repeated indices accumulate.")
      .def("__getitem__",
           [](const ArrayAt& self, nb::object index) {
             return ArrayAt{self.a, index};
           })
      .def(
          "add",
          [](const ArrayAt& s, const ScalarOrArray& v) {
            return update_at(s.a, s.index, v.obj, AtOp::add);
          },
          nb::arg("value"))
      .def(
          "subtract",
          [](const ArrayAt& s, const ScalarOrArray& v) {
            return update_at(s.a, s.index, v.obj, AtOp::subtract);
          },
          nb::arg("value"))
      .def(
          "multiply",
          [](const ArrayAt& s, const ScalarOrArray& v) {
            return update_at(s.a, s.index, v.obj, AtOp::multiply);
          },
          nb::arg("value"))
      .def(
          "divide",
          [](const ArrayAt& s, const ScalarOrArray& v) {
            return update_at(s.a, s.index, v.obj, AtOp::divide);
          },
          nb::arg("value"))
      .def(
          "maximum",
          [](const ArrayAt& s, const ScalarOrArray& v) {
            return update_at(s.a, s.index, v.obj, AtOp::maximum);
          },
          nb::arg("value"))
      .def(
          "minimum",
          [](const ArrayAt& s, const ScalarOrArray& v) {
            return update_at(s.a, s.index, v.obj, AtOp::minimum);
          },
          nb::arg("value"));
}

nb::object array_at(const array& a) { return nb::cast(ArrayAt{a, nb::none()}); }

} // namespace loom::bindings
