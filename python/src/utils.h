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

// A copy of an object implementing __dlpack__ (CPU memory).
array array_from_dlpack(nb::handle v, std::optional<Dtype> dtype = std::nullopt);

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
