// Shared pieces of the Python bindings: argument types and their casters
// (streams, scalars-or-arrays), Python <-> array conversion, evaluation
// without the GIL.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "loom/ops.h"

namespace nb = nanobind;

namespace loom::bindings {

// --- streams -------------------------------------------------------------

// A stream that resolves to a distinct Stream on every thread that uses it
// (MLX's ThreadLocalStream). The per-thread streams are made on first use.
struct ThreadLocalStream {
  Device device;
  int index;
};
Stream resolve_thread_local(const ThreadLocalStream& s);

// What every `stream=` argument accepts: None, Stream, ThreadLocalStream,
// Device or DeviceType.
struct StreamArg {
  StreamOrDevice value;
  std::optional<ThreadLocalStream> thread_local_stream; // resolved on use
  // Raises MLX's error when it names the GPU and there is none.
  operator StreamOrDevice() const;
};

// Raises ValueError "[<op>] Cannot ... without gpu backend." like MLX.
void check_gpu_available(const Device& d, const char* op, const char* what);

// --- scalars and arrays --------------------------------------------------

// An argument that may be a Python scalar, an array, a NumPy array or scalar,
// or an object with __mlx_array__ (never None).
struct ScalarOrArray {
  nb::object obj;
};

bool is_array(nb::handle h);
array& as_array(nb::handle h);

// Python type name as used in error messages ("list", "__main__.Foo").
std::string python_type_name(nb::handle h);

// Converts a scalar-or-array argument of an op. `target` makes Python scalars
// and NumPy inputs take that dtype (MLX's weak typing of non-array operands).
array to_array(nb::handle v, std::optional<Dtype> target = std::nullopt);
// Converts two operands: when exactly one is an array, the other takes its
// dtype if it is a Python scalar or a NumPy value.
std::pair<array, array> to_arrays(nb::handle a, nb::handle b);
// Whether to_array accepts `v` (used by operators to pick their error).
bool is_scalar_or_array(nb::handle v);

// The array constructor: scalars, nested lists/tuples, arrays, buffers
// (NumPy), __array__ and __mlx_array__ objects.
array array_from_python(nb::handle v, std::optional<Dtype> dtype);

// A copy of strided memory: `format` is a PEP 3118 element code (or
// "bfloat16"), `byte_strides` null for C order. Without `dtype` the elements
// take MLX's default for them (float64 narrows to float32).
array strided_to_array(const void* data, const char* format, int64_t itemsize, const Shape& shape,
                       const int64_t* byte_strides, std::optional<Dtype> dtype);

// A copy of an object implementing __dlpack__ (CPU memory), read through the
// DLPack capsule itself (dlpack.cpp), so no NumPy is needed and bfloat16
// arrives as bfloat16.
array array_from_dlpack(nb::handle v, std::optional<Dtype> dtype = std::nullopt);
// Whether `v` has __dlpack__ and __dlpack_device__ reports CPU-readable memory.
bool has_cpu_dlpack(nb::handle v);

// Warns (Python UserWarning, once per call site by the default filter) that
// converting an array traced by grad/vjp/jvp/vmap to NumPy or a Python value
// leaves the transform's view: no gradient flows through the result.
void warn_if_traced(const array& a);

// The DLPack capsule of an array (evaluated and waited for first, so the
// consumer never reads memory still being written).
nb::object array_to_dlpack(array& a, nb::handle max_version, nb::handle dl_device, nb::handle copy);

// Python values from evaluated arrays.
nb::object to_scalar(array& a);
nb::object to_list(array& a);

// Evaluation without holding the GIL.
// A daemon thread inside one of these at interpreter exit parks instead of
// taking the GIL back (convert.cpp says why).
void eval_nogil(std::vector<array> arrays);
void async_eval_nogil(std::vector<array> arrays);
void eval_nogil(array& a);

// The MLX printing format.
std::string array_repr(array& a);

// MLX's numbering of dtypes (hash values, pickles).
int mlx_dtype_code(Dtype d);
Dtype dtype_from_mlx_code(int code);

// --- axes ------------------------------------------------------------------

using IntOrInts = std::variant<int, std::vector<int>>;
inline std::vector<int> to_axes(const IntOrInts& v) {
  if (auto* i = std::get_if<int>(&v)) return {*i};
  return std::get<std::vector<int>>(v);
}
inline Shape to_shape(const IntOrInts& v) {
  if (auto* i = std::get_if<int>(&v)) return {*i};
  auto& s = std::get<std::vector<int>>(v);
  return Shape(s.begin(), s.end());
}

// --- shapes --------------------------------------------------------------------

// A shape argument: an int (when AllowInt) or a sequence of ints. Dimensions
// are read as Python ints of any size, so one beyond int32 raises
// OverflowError naming it (as MLX) instead of failing the overload match with
// "incompatible function arguments". The caster cannot raise, so it records
// the message and to_shape raises it.
template <bool AllowInt>
struct ShapeArgT {
  Shape shape;
  std::string overflow;
};
using ShapeArg = ShapeArgT<true>;     // int | Sequence[int]
using ShapeSeqArg = ShapeArgT<false>; // Sequence[int]

template <bool AllowInt>
Shape to_shape(const ShapeArgT<AllowInt>& s) {
  if (!s.overflow.empty()) throw std::overflow_error(s.overflow);
  return s.shape;
}

// Ops as plain function pointers of one signature (the core declares some
// ops with overloads, so their addresses are not taken directly).
#define LOOM_UNARY_FN(NAME) +[](const array& a, StreamOrDevice s) { return loom::NAME(a, s); }
#define LOOM_BINARY_FN(NAME) \
  +[](const array& a, const array& b, StreamOrDevice s) { return loom::NAME(a, b, s); }

// --- module parts ------------------------------------------------------------

void init_dtypes(nb::module_& m);
void init_devices(nb::module_& m);
void init_memory(nb::module_& m);
void init_array(nb::module_& m);
void init_printing(nb::module_& m);
void init_ops(nb::module_& m);
void init_composites(nb::module_& m);
void init_random(nb::module_& m);
void init_fft(nb::module_& m); // python/src/fft.cpp

// Indexing (indexing.cpp).
array get_item(const array& a, nb::handle index);
void set_item(array& a, nb::handle index, nb::handle value);

// The Python handle of the `loom.core` module (for __array_namespace__).
nb::module_ core_module();

} // namespace loom::bindings

namespace nanobind::detail {

template <>
struct type_caster<loom::bindings::StreamArg> {
  NB_TYPE_CASTER(loom::bindings::StreamArg,
                 const_name("loom.core.Stream | loom.core.ThreadLocalStream | loom.core.Device | "
                            "loom.core.DeviceType"))
  bool from_python(handle src, uint8_t flags, cleanup_list* cleanup) noexcept;
  static handle from_cpp(const loom::bindings::StreamArg&, rv_policy, cleanup_list*) noexcept {
    return none().release();
  }
};

template <bool AllowInt>
struct type_caster<loom::bindings::ShapeArgT<AllowInt>> {
  using Arg = loom::bindings::ShapeArgT<AllowInt>;
  NB_TYPE_CASTER(Arg, const_name<AllowInt>("int | collections.abc.Sequence[int]",
                                           "collections.abc.Sequence[int]"))

  // One dimension: a Python int (bool included, as MLX), or with implicit
  // conversion anything with __index__ (NumPy integers) but never a float.
  static bool read_dim(PyObject* o, bool convert, long long& out, bool& overflow) noexcept {
    if (PyFloat_Check(o)) return false;
    if (!PyLong_Check(o) && !(convert && PyIndex_Check(o))) return false;
    PyObject* idx = PyNumber_Index(o);
    if (!idx) {
      PyErr_Clear();
      return false;
    }
    int of = 0;
    out = PyLong_AsLongLongAndOverflow(idx, &of);
    Py_DECREF(idx);
    if (out == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    overflow = of != 0 || out < INT32_MIN || out > INT32_MAX;
    return true;
  }

  static std::string value_text(PyObject* o) noexcept {
    PyObject* s = PyObject_Str(o);
    if (!s) {
      PyErr_Clear();
      return "?";
    }
    const char* c = PyUnicode_AsUTF8(s);
    std::string out = c ? c : "?";
    if (!c) PyErr_Clear();
    Py_DECREF(s);
    return out;
  }

  bool from_python(handle src, uint8_t flags, cleanup_list*) noexcept {
    bool convert = flags & static_cast<uint8_t>(cast_flags::convert);
    PyObject* o = src.ptr();
    value = Arg{};
    constexpr const char* range = " is outside the supported range [-2147483648, 2147483647].";
    if constexpr (AllowInt) {
      long long v = 0;
      bool of = false;
      if (!PySequence_Check(o) && read_dim(o, convert, v, of)) {
        if (of) {
          value.overflow = "Shape dimension " + value_text(o) + range +
                           " Loom currently uses 32-bit integers for shape dimensions.";
        } else {
          value.shape.push_back(static_cast<int32_t>(v));
        }
        return true;
      }
    }
    if (!PySequence_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o)) return false;
    PyObject* seq = PySequence_Fast(o, "");
    if (!seq) {
      PyErr_Clear();
      return false;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject** items = PySequence_Fast_ITEMS(seq);
    bool ok = true;
    for (Py_ssize_t i = 0; i < n && ok; ++i) {
      long long v = 0;
      bool of = false;
      ok = read_dim(items[i], convert, v, of);
      if (!ok) break;
      if (of && value.overflow.empty()) {
        value.overflow = "Integer value " + value_text(items[i]) + range;
      }
      value.shape.push_back(static_cast<int32_t>(v));
    }
    Py_DECREF(seq);
    return ok;
  }
  static handle from_cpp(const Arg&, rv_policy, cleanup_list*) noexcept { return none().release(); }
};

template <>
struct type_caster<loom::bindings::ScalarOrArray> {
  NB_TYPE_CASTER(loom::bindings::ScalarOrArray,
                 const_name("bool | int | float | loom.core.array | ndarray[writable=False] | "
                            "complex | loom.core.ArrayLike"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    if (src.is_none()) return false;
    value.obj = borrow(src);
    return true;
  }
  static handle from_cpp(const loom::bindings::ScalarOrArray& v, rv_policy,
                         cleanup_list*) noexcept {
    return v.obj.inc_ref();
  }
};

} // namespace nanobind::detail
