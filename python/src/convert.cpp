// Python values <-> arrays: scalars, nested lists, NumPy and other buffers.
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <complex>
#include <cstring>
#include <limits>
#include <sstream>
#include <thread>

#include "elements.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/types/dispatch.h"
#include "utils.h"

namespace loom::bindings {

namespace {

// A Python int as a 64-bit value; `is_unsigned` when it only fits in uint64.
struct PyInt {
  int64_t i = 0;
  uint64_t u = 0;
  bool is_unsigned = false;
};

std::string int_repr(nb::handle h) { return nb::cast<std::string>(nb::str(h)); }

[[noreturn]] void overflow_error(nb::handle value, Dtype dtype) {
  throw std::invalid_argument("Converting " + int_repr(value) + " to " + dtype_name(dtype) +
                              " would result in overflow.");
}

// Reads a Python int; raises when it fits neither int64 nor uint64.
PyInt read_int(nb::handle h, Dtype overflow_dtype) {
  PyInt out;
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
  if (overflow == 0) {
    out.i = v;
    return out;
  }
  if (overflow > 0) {
    unsigned long long u = PyLong_AsUnsignedLongLong(h.ptr());
    if (!PyErr_Occurred()) {
      out.u = u;
      out.is_unsigned = true;
      return out;
    }
    PyErr_Clear();
  }
  overflow_error(h, overflow_dtype);
}

bool fits(const PyInt& v, Dtype d) {
  if (v.is_unsigned) return d == uint64 || !is_integral(d);
  auto in = [&](int64_t lo, int64_t hi) { return v.i >= lo && v.i <= hi; };
  switch (d.val) {
    case Dtype::Val::uint8:
      return in(0, UINT8_MAX);
    case Dtype::Val::uint16:
      return in(0, UINT16_MAX);
    case Dtype::Val::uint32:
      return in(0, UINT32_MAX);
    case Dtype::Val::int8:
      return in(INT8_MIN, INT8_MAX);
    case Dtype::Val::int16:
      return in(INT16_MIN, INT16_MAX);
    case Dtype::Val::int32:
      return in(INT32_MIN, INT32_MAX);
    default:
      return true; // int64, uint64 (wraps like MLX), inexact types
  }
}

array int_scalar(const PyInt& v, Dtype dtype) {
  if (v.is_unsigned) return array(v.u, dtype);
  return array(v.i, dtype);
}

bool is_text_or_bytes(nb::handle h) {
  return PyUnicode_Check(h.ptr()) || PyBytes_Check(h.ptr()) || PyByteArray_Check(h.ptr());
}

bool has_buffer(nb::handle h) { return PyObject_CheckBuffer(h.ptr()) && !is_text_or_bytes(h); }

nb::object mlx_array_protocol(nb::handle h) {
  for (const char* name : {"__mlx_array__", "__loom_array__"}) {
    if (nb::hasattr(h, name)) {
      nb::object r = h.attr(name)();
      if (!is_array(r)) {
        throw nb::type_error(
            (std::string(name) + " must return a loom.core.array, got " + python_type_name(r) + ".")
                .c_str());
      }
      return r;
    }
  }
  return {};
}

// --- buffers (NumPy arrays and scalars, memoryview) -------------------------

// Element types a buffer may hold: every Loom dtype plus complex128.
enum class SourceType {
  bool_,
  u8,
  u16,
  u32,
  u64,
  i8,
  i16,
  i32,
  i64,
  f16,
  bf16,
  f32,
  f64,
  c64,
  c128
};

std::optional<SourceType> source_type(const char* format, Py_ssize_t itemsize) {
  if (format == nullptr) return SourceType::u8;
  const char* f = format;
  if (*f == '@' || *f == '=' || *f == '<') {
    ++f;
  } else if (*f == '>' || *f == '!') {
    if (itemsize != 1) return std::nullopt; // byte-swapped data
    ++f;
  }
  auto sized_int = [&](bool is_signed) -> std::optional<SourceType> {
    switch (itemsize) {
      case 1:
        return is_signed ? SourceType::i8 : SourceType::u8;
      case 2:
        return is_signed ? SourceType::i16 : SourceType::u16;
      case 4:
        return is_signed ? SourceType::i32 : SourceType::u32;
      case 8:
        return is_signed ? SourceType::i64 : SourceType::u64;
      default:
        return std::nullopt;
    }
  };
  std::string code(f);
  if (code == "?") return SourceType::bool_;
  if (code == "b" || code == "h" || code == "i" || code == "l" || code == "q" || code == "n") {
    return sized_int(true);
  }
  if (code == "B" || code == "H" || code == "I" || code == "L" || code == "Q" || code == "N") {
    return sized_int(false);
  }
  if (code == "e") return SourceType::f16;
  // Not PEP 3118: the format Loom's own buffers and DLPack imports use.
  if (code == "bfloat16" && itemsize == 2) return SourceType::bf16;
  if (code == "f") return SourceType::f32;
  if (code == "d") return SourceType::f64;
  if (code == "Zf") return SourceType::c64;
  if (code == "Zd") return SourceType::c128;
  return std::nullopt;
}

// The dtype MLX gives a buffer of this type when none is requested: float64
// narrows to float32 and complex128 to complex64.
Dtype default_dtype(SourceType t) {
  switch (t) {
    case SourceType::bool_:
      return bool_;
    case SourceType::u8:
      return uint8;
    case SourceType::u16:
      return uint16;
    case SourceType::u32:
      return uint32;
    case SourceType::u64:
      return uint64;
    case SourceType::i8:
      return int8;
    case SourceType::i16:
      return int16;
    case SourceType::i32:
      return int32;
    case SourceType::i64:
      return int64;
    case SourceType::f16:
      return float16;
    case SourceType::bf16:
      return bfloat16;
    case SourceType::f32:
    case SourceType::f64:
      return float32;
    case SourceType::c64:
    case SourceType::c128:
      return complex64;
  }
  return float32;
}

template <typename F>
decltype(auto) dispatch_source(SourceType t, F&& f) {
  switch (t) {
    case SourceType::bool_:
      return f(type_tag<bool>{});
    case SourceType::u8:
      return f(type_tag<uint8_t>{});
    case SourceType::u16:
      return f(type_tag<uint16_t>{});
    case SourceType::u32:
      return f(type_tag<uint32_t>{});
    case SourceType::u64:
      return f(type_tag<uint64_t>{});
    case SourceType::i8:
      return f(type_tag<int8_t>{});
    case SourceType::i16:
      return f(type_tag<int16_t>{});
    case SourceType::i32:
      return f(type_tag<int32_t>{});
    case SourceType::i64:
      return f(type_tag<int64_t>{});
    case SourceType::f16:
      return f(type_tag<float16_t>{});
    case SourceType::bf16:
      return f(type_tag<bfloat16_t>{});
    case SourceType::f32:
      return f(type_tag<float>{});
    case SourceType::f64:
      return f(type_tag<double>{});
    case SourceType::c64:
      return f(type_tag<std::complex<float>>{});
    case SourceType::c128:
      return f(type_tag<std::complex<double>>{});
  }
  throw std::invalid_argument("[array] Unknown buffer element type.");
}

template <typename To, typename From>
To convert_any(const From& v) {
  if constexpr (std::is_same_v<From, std::complex<double>>) {
    return convert<To>(
        std::complex<float>(static_cast<float>(v.real()), static_cast<float>(v.imag())));
  } else {
    return convert<To>(v);
  }
}

array fresh_array(Shape shape, Dtype dtype) {
  array out = array::empty(std::move(shape), dtype);
  out.set_data(allocator::allocate(out.nbytes()));
  return out;
}

struct BufferView {
  Py_buffer view{};
  bool valid = false;
  explicit BufferView(nb::handle h) {
    if (PyObject_GetBuffer(h.ptr(), &view, PyBUF_RECORDS_RO) != 0) throw nb::python_error();
    valid = true;
  }
  ~BufferView() {
    if (valid) PyBuffer_Release(&view);
  }
};

} // namespace

namespace {

// Large buffers copy over the intra-op pool: one thread's memcpy reached
// about 5 GB/s (12 ms for a 4096x4096 float32 NumPy array on the GPU
// machine, most of the time to build it and multiply it there).
void copy_bytes(void* dst, const void* src, size_t n) {
  constexpr size_t kPiece = size_t(1) << 20;
  if (n < 4 * kPiece) {
    std::memcpy(dst, src, n);
    return;
  }
  cpu::parallel_for((n + kPiece - 1) / kPiece, 1, [&](size_t a, size_t b) {
    size_t lo = a * kPiece, hi = std::min(n, b * kPiece);
    std::memcpy(static_cast<char*>(dst) + lo, static_cast<const char*>(src) + lo, hi - lo);
  });
}

} // namespace

array strided_to_array(const void* data, const char* format, int64_t itemsize, const Shape& shape,
                       const int64_t* byte_strides, std::optional<Dtype> dtype) {
  auto src = source_type(format, itemsize);
  if (!src) {
    throw std::invalid_argument(std::string("[array] Cannot convert a buffer of format '") +
                                (format ? format : "B") +
                                "' to an array: unsupported element type or byte order.");
  }
  Dtype out_dtype = dtype.value_or(default_dtype(*src));
  array out = fresh_array(shape, out_dtype);
  size_t n = out.size();
  if (n == 0) {
    out.set_status(Status::available);
    return out;
  }

  // Byte strides of the source, C order when the exporter gave none.
  int nd = static_cast<int>(shape.size());
  std::vector<int64_t> strides(nd);
  if (byte_strides != nullptr) {
    for (int d = 0; d < nd; ++d) strides[d] = byte_strides[d];
  } else {
    int64_t s = itemsize;
    for (int d = nd - 1; d >= 0; --d) {
      strides[d] = s;
      s *= shape[d];
    }
  }
  bool contiguous = true;
  {
    int64_t s = itemsize;
    for (int d = nd - 1; d >= 0; --d) {
      if (shape[d] != 1 && strides[d] != s) contiguous = false;
      s *= shape[d];
    }
  }

  const char* base = static_cast<const char*>(data);
  dispatch_source(*src, [&](auto stag) {
    using S = typename decltype(stag)::type;
    dispatch(out_dtype, [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      D* dst = out.data<D>();
      constexpr bool same = std::is_same_v<S, D>;
      if (contiguous) {
        if constexpr (same) {
          copy_bytes(dst, base, n * sizeof(D));
        } else {
          const S* s = reinterpret_cast<const S*>(base);
          for (size_t i = 0; i < n; ++i) dst[i] = convert_any<D>(s[i]);
        }
        return;
      }
      // Strided source: walk the outer dimensions with an odometer.
      int64_t inner = nd > 0 ? shape[nd - 1] : 1;
      int64_t inner_stride = nd > 0 ? strides[nd - 1] : 0;
      std::vector<int32_t> idx(nd, 0);
      int64_t offset = 0;
      size_t k = 0;
      while (k < n) {
        const char* p = base + offset;
        for (int64_t i = 0; i < inner; ++i) {
          S s;
          std::memcpy(&s, p + i * inner_stride, sizeof(S));
          dst[k++] = convert_any<D>(s);
        }
        for (int d = nd - 2; d >= 0; --d) {
          if (++idx[d] < shape[d]) {
            offset += strides[d];
            break;
          }
          offset -= static_cast<int64_t>(idx[d] - 1) * strides[d];
          idx[d] = 0;
        }
      }
    });
  });
  out.set_status(Status::available);
  return out;
}

namespace {

array buffer_to_array(nb::handle h, std::optional<Dtype> dtype) {
  BufferView b(h);
  const Py_buffer& v = b.view;
  Shape shape;
  for (int d = 0; d < v.ndim; ++d) shape.push_back(static_cast<int32_t>(v.shape[d]));
  if (v.ndim == 0 && v.shape == nullptr && v.len != v.itemsize) {
    shape.push_back(static_cast<int32_t>(v.len / v.itemsize)); // 1-D byte buffer
  }
  std::vector<int64_t> strides;
  if (v.strides != nullptr) strides.assign(v.strides, v.strides + v.ndim);
  return strided_to_array(v.buf, v.format, v.itemsize, shape,
                          v.strides != nullptr ? strides.data() : nullptr, dtype);
}

nb::object numpy_asarray(nb::handle h) {
  nb::module_ np = nb::module_::import_("numpy");
  return np.attr("asarray")(h);
}

// --- nested lists ----------------------------------------------------------

enum class Kind { none = -1, boolean = 0, integer = 1, floating = 2, complex = 3 };

struct ListScan {
  Shape shape;                 // full shape (list levels, then array leaves' shape)
  int list_depth = -1;         // number of list levels
  Kind kind = Kind::none;      // widest Python scalar seen
  bool needs_int64 = false;    // an int outside int32
  std::optional<Dtype> arrays; // promoted dtype of array leaves
  std::vector<array> leaves;   // array leaves, to evaluate together
};

[[noreturn]] void non_uniform() {
  throw std::invalid_argument("Initialization encountered non-uniform length.");
}

[[noreturn]] void invalid_type(nb::handle h) {
  throw std::invalid_argument("Invalid type " + python_type_name(h) +
                              " received in array initialization.");
}

bool is_list(nb::handle h) { return PyList_Check(h.ptr()) || PyTuple_Check(h.ptr()); }

// The shape along the first element of every level.
void first_path_shape(nb::handle h, ListScan& st) {
  int depth = 0;
  nb::handle cur = h;
  while (is_list(cur)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(cur.ptr());
    st.shape.push_back(static_cast<int32_t>(n));
    ++depth;
    if (n == 0) break;
    cur = PySequence_Fast_GET_ITEM(cur.ptr(), 0);
  }
  st.list_depth = depth;
  if (is_array(cur)) {
    for (auto d : as_array(cur).shape()) st.shape.push_back(d);
  }
}

void scan_leaf(nb::handle h, ListScan& st) {
  PyObject* p = h.ptr();
  bool leaf_is_scalar_position = static_cast<int>(st.shape.size()) == st.list_depth;
  auto note = [&](Kind k) {
    if (!leaf_is_scalar_position) non_uniform();
    if (static_cast<int>(k) > static_cast<int>(st.kind)) st.kind = k;
  };
  if (PyBool_Check(p)) {
    note(Kind::boolean);
  } else if (PyLong_Check(p)) {
    note(Kind::integer);
    PyInt v = read_int(h, int64);
    if (v.is_unsigned || v.i < INT32_MIN || v.i > INT32_MAX) st.needs_int64 = true;
  } else if (PyFloat_Check(p)) {
    note(Kind::floating);
  } else if (PyComplex_Check(p)) {
    note(Kind::complex);
  } else if (is_array(h)) {
    const array& a = as_array(h);
    Shape rest(st.shape.begin() + st.list_depth, st.shape.end());
    if (a.shape() != rest) non_uniform();
    st.arrays = st.arrays ? promote_types(*st.arrays, a.dtype()) : a.dtype();
    st.leaves.push_back(a);
  } else if (is_list(h)) {
    throw std::invalid_argument("Initialization encountered extra dimension.");
  } else {
    invalid_type(h);
  }
}

void scan(nb::handle h, int depth, ListScan& st) {
  if (depth == st.list_depth) {
    scan_leaf(h, st);
    return;
  }
  if (!is_list(h)) {
    // A scalar or array where a list was expected.
    if (PyBool_Check(h.ptr()) || PyLong_Check(h.ptr()) || PyFloat_Check(h.ptr()) ||
        PyComplex_Check(h.ptr()) || is_array(h)) {
      non_uniform();
    }
    invalid_type(h);
  }
  Py_ssize_t n = PySequence_Fast_GET_SIZE(h.ptr());
  if (n != st.shape[depth]) non_uniform();
  for (Py_ssize_t i = 0; i < n; ++i) scan(PySequence_Fast_GET_ITEM(h.ptr(), i), depth + 1, st);
}

template <typename T>
Dtype dtype_of() {
  if constexpr (std::is_same_v<T, bool>)
    return bool_;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return uint8;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return uint16;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return uint32;
  else if constexpr (std::is_same_v<T, uint64_t>)
    return uint64;
  else if constexpr (std::is_same_v<T, int8_t>)
    return int8;
  else if constexpr (std::is_same_v<T, int16_t>)
    return int16;
  else if constexpr (std::is_same_v<T, int32_t>)
    return int32;
  else
    return int64;
}

template <typename T>
T python_scalar_as(nb::handle h) {
  PyObject* p = h.ptr();
  if (PyBool_Check(p)) return convert<T>(p == Py_True);
  if (PyLong_Check(p)) {
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16_t> ||
                  std::is_same_v<T, bfloat16_t>) {
      return convert<T>(PyLong_AsDouble(p)); // exact for large ints
    } else if constexpr (std::is_same_v<T, std::complex<float>>) {
      return T(static_cast<float>(PyLong_AsDouble(p)), 0.0f);
    } else {
      PyInt v = read_int(h, int64);
      if (v.is_unsigned) {
        if constexpr (!std::is_same_v<T, uint64_t>) overflow_error(h, dtype_of<T>());
        return convert<T>(v.u);
      }
      return convert<T>(v.i);
    }
  }
  if (PyFloat_Check(p)) return convert<T>(PyFloat_AS_DOUBLE(p));
  Py_complex c = PyComplex_AsCComplex(p);
  return convert<T>(std::complex<float>(static_cast<float>(c.real), static_cast<float>(c.imag)));
}

template <typename T>
void fill(nb::handle h, int depth, int list_depth, T*& dst) {
  if (depth == list_depth) {
    if (is_array(h)) {
      const array& a = as_array(h);
      dispatch(a.dtype(), [&](auto tag) {
        using S = typename decltype(tag)::type;
        for_each_element<S>(a, [&](const S& v) { *dst++ = convert<T>(v); });
      });
    } else {
      *dst++ = python_scalar_as<T>(h);
    }
    return;
  }
  Py_ssize_t n = PySequence_Fast_GET_SIZE(h.ptr());
  for (Py_ssize_t i = 0; i < n; ++i) {
    fill<T>(PySequence_Fast_GET_ITEM(h.ptr(), i), depth + 1, list_depth, dst);
  }
}

Dtype kind_dtype(Kind k, bool needs_int64) {
  switch (k) {
    case Kind::boolean:
      return bool_;
    case Kind::integer:
      return needs_int64 ? int64 : int32;
    case Kind::complex:
      return complex64;
    default:
      return float32;
  }
}

array list_to_array(nb::handle h, std::optional<Dtype> dtype) {
  ListScan st;
  first_path_shape(h, st);
  scan(h, 0, st);
  Dtype out_dtype = kind_dtype(st.kind, st.needs_int64);
  if (dtype) {
    out_dtype = *dtype;
  } else if (st.arrays) {
    out_dtype = st.kind == Kind::none ? *st.arrays : promote_types(*st.arrays, out_dtype);
  }
  if (!st.leaves.empty()) eval_nogil(st.leaves);
  array out = fresh_array(st.shape, out_dtype);
  dispatch(out_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = out.data<T>();
    if (out.size() > 0) fill<T>(h, 0, st.list_depth, dst);
  });
  out.set_status(Status::available);
  return out;
}

} // namespace

// --- public --------------------------------------------------------------

bool is_array(nb::handle h) { return nb::isinstance<array>(h); }

array& as_array(nb::handle h) { return nb::cast<array&>(h); }

std::string python_type_name(nb::handle h) {
  nb::handle tp = reinterpret_cast<PyObject*>(Py_TYPE(h.ptr()));
  std::string name = nb::cast<std::string>(tp.attr("__qualname__"));
  nb::object module = nb::getattr(tp, "__module__", nb::none());
  if (nb::isinstance<nb::str>(module)) {
    std::string mod = nb::cast<std::string>(module);
    if (mod != "builtins" && mod != "numpy") return mod + "." + name;
  }
  return name;
}

bool is_scalar_or_array(nb::handle v) {
  PyObject* p = v.ptr();
  return PyBool_Check(p) || PyLong_Check(p) || PyFloat_Check(p) || PyComplex_Check(p) ||
         is_array(v) || has_buffer(v) || nb::hasattr(v, "__mlx_array__") ||
         nb::hasattr(v, "__loom_array__");
}

array to_array(nb::handle v, std::optional<Dtype> target) {
  PyObject* p = v.ptr();
  if (is_array(v)) return as_array(v);
  if (PyBool_Check(p)) return array(p == Py_True);
  if (PyLong_Check(p)) {
    if (target && *target != bool_) {
      PyInt i = read_int(v, *target);
      if (!fits(i, *target)) overflow_error(v, *target);
      return int_scalar(i, *target);
    }
    PyInt i = read_int(v, int64);
    if (target) return int_scalar(i, int32); // a bool array meets an int
    if (i.is_unsigned) overflow_error(v, int64);
    bool small = i.i >= INT32_MIN && i.i <= INT32_MAX;
    return array(i.i, small ? int32 : int64);
  }
  if (PyFloat_Check(p)) {
    Dtype d = target && is_inexact(*target) ? *target : float32;
    return array(PyFloat_AS_DOUBLE(p), d);
  }
  if (PyComplex_Check(p)) {
    Py_complex c = PyComplex_AsCComplex(p);
    return array(complex64_t(static_cast<float>(c.real), static_cast<float>(c.imag)));
  }
  if (nb::object r = mlx_array_protocol(v); r.is_valid()) return as_array(r);
  if (has_buffer(v)) return buffer_to_array(v, target);
  invalid_type(v);
}

std::pair<array, array> to_arrays(nb::handle a, nb::handle b) {
  bool a_arr = is_array(a), b_arr = is_array(b);
  if (a_arr && !b_arr) {
    array x = as_array(a);
    return {x, to_array(b, x.dtype())};
  }
  if (b_arr && !a_arr) {
    array y = as_array(b);
    return {to_array(a, y.dtype()), y};
  }
  return {to_array(a), to_array(b)};
}

array array_from_python(nb::handle v, std::optional<Dtype> dtype) {
  PyObject* p = v.ptr();
  if (is_array(v)) {
    // A new array, not a view: writes through the buffer protocol must not
    // reach the original (as in MLX).
    const array& a = as_array(v);
    return dtype && *dtype != a.dtype() ? astype(a, *dtype) : copy(a);
  }
  if (PyBool_Check(p)) return array(p == Py_True, dtype.value_or(bool_));
  if (PyLong_Check(p)) {
    PyInt i = read_int(v, dtype.value_or(int64));
    if (!dtype) {
      if (i.is_unsigned) overflow_error(v, int64);
      bool small = i.i >= INT32_MIN && i.i <= INT32_MAX;
      return array(i.i, small ? int32 : int64);
    }
    return int_scalar(i, *dtype);
  }
  if (PyFloat_Check(p)) return array(PyFloat_AS_DOUBLE(p), dtype.value_or(float32));
  if (PyComplex_Check(p)) {
    Py_complex c = PyComplex_AsCComplex(p);
    return array(complex64_t(static_cast<float>(c.real), static_cast<float>(c.imag)),
                 dtype.value_or(complex64));
  }
  if (is_list(v)) return list_to_array(v, dtype);
  if (nb::object r = mlx_array_protocol(v); r.is_valid()) {
    const array& a = as_array(r);
    return dtype && *dtype != a.dtype() ? astype(a, *dtype) : a;
  }
  if (has_buffer(v)) return buffer_to_array(v, dtype);
  // DLPack before __array__: it reads every dtype (PyTorch's bfloat16 has
  // no NumPy form) without a NumPy detour.
  if (has_cpu_dlpack(v)) return array_from_dlpack(v, dtype);
  if (!is_text_or_bytes(v) && nb::hasattr(v, "__array__")) {
    return buffer_to_array(numpy_asarray(v), dtype);
  }
  if (nb::hasattr(v, "__dlpack__")) return array_from_dlpack(v, dtype);
  invalid_type(v);
}

// --- arrays to Python ----------------------------------------------------------

namespace {

template <typename T>
nb::object element_to_python(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return nb::bool_(v);
  } else if constexpr (std::is_same_v<T, std::complex<float>>) {
    return nb::steal(PyComplex_FromDoubles(v.real(), v.imag()));
  } else if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_unsigned_v<T>) {
      return nb::steal(PyLong_FromUnsignedLongLong(v));
    } else {
      return nb::steal(PyLong_FromLongLong(v));
    }
  } else {
    return nb::steal(PyFloat_FromDouble(static_cast<double>(static_cast<float>(v))));
  }
}

template <>
nb::object element_to_python<double>(const double& v) {
  return nb::steal(PyFloat_FromDouble(v));
}

template <typename T>
nb::object list_rec(const array& a, int dim, const T* p) {
  int32_t n = a.shape()[dim];
  int64_t stride = a.strides()[dim];
  nb::list out;
  for (int32_t i = 0; i < n; ++i) {
    const T* q = p + i * stride;
    out.append(dim + 1 == a.ndim() ? element_to_python<T>(*q) : list_rec<T>(a, dim + 1, q));
  }
  return std::move(out);
}

} // namespace

nb::object to_scalar(array& a) {
  if (a.size() != 1) {
    throw std::invalid_argument(
        "[convert] Only length-1 arrays can be converted to Python scalars.");
  }
  eval_nogil(a);
  return dispatch(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return element_to_python<T>(*a.data<T>());
  });
}

nb::object to_list(array& a) {
  if (a.ndim() == 0) return to_scalar(a);
  eval_nogil(a);
  return dispatch(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return list_rec<T>(a, 0, a.data<T>());
  });
}

namespace {

std::atomic<bool> g_interpreter_exiting{false};
std::thread::id g_exiting_thread; // runs the exit; written before the flag

[[noreturn]] void park_forever() {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

// Takes the GIL back after work done without it. A daemon thread still in
// Loom when the interpreter exits must not: CPython ends such a thread with
// pthread_exit, whose unwinding through C++ frames (a noexcept destructor,
// nanobind's catch-all) aborts the process ("terminate called without an
// active exception"). It parks instead; exit() ends it with the process.
void reacquire_gil(PyThreadState* state) {
  if (g_interpreter_exiting.load(std::memory_order_acquire) &&
      std::this_thread::get_id() != g_exiting_thread) {
    park_forever();
  }
  try {
    PyEval_RestoreThread(state);
  } catch (abi::__forced_unwind&) {
    park_forever(); // finalization began while this thread waited for the GIL
  }
}

// The flag is set by an atexit callback, which runs before finalization on
// the exiting thread, with the GIL; that thread may still evaluate (later
// atexit callbacks, finalizers) and takes the GIL back as usual. Registered
// on first use (with the GIL held, so once).
void watch_interpreter_exit() {
  static bool registered = false;
  if (registered) return;
  registered = true;
  nb::module_::import_("atexit").attr("register")(nb::cpp_function([] {
    g_exiting_thread = std::this_thread::get_id();
    g_interpreter_exiting.store(true, std::memory_order_release);
  }));
}

template <typename F>
void without_gil(F&& work) {
  watch_interpreter_exit();
  PyThreadState* state = PyEval_SaveThread();
  std::exception_ptr error;
  try {
    work();
  } catch (...) {
    error = std::current_exception();
  }
  reacquire_gil(state);
  if (error) std::rethrow_exception(error);
}

} // namespace

void eval_nogil(std::vector<array> arrays) {
  without_gil([&] { eval(std::move(arrays)); });
}

void async_eval_nogil(std::vector<array> arrays) {
  without_gil([&] { async_eval(std::move(arrays)); });
}

void eval_nogil(array& a) {
  if (a.is_available() && !a.has_node()) {
    a.wait(); // raises the error of a failed kernel
    return;
  }
  without_gil([&] {
    a.eval();
    a.wait();
  });
}

int mlx_dtype_code(Dtype d) {
  // MLX orders bfloat16 after float64.
  switch (d.val) {
    case Dtype::Val::float32:
      return 10;
    case Dtype::Val::float64:
      return 11;
    case Dtype::Val::bfloat16:
      return 12;
    default:
      return dtype_index(d);
  }
}

Dtype dtype_from_mlx_code(int code) {
  switch (code) {
    case 10:
      return float32;
    case 11:
      return float64;
    case 12:
      return bfloat16;
    default:
      return dtype_from_index(code);
  }
}

} // namespace loom::bindings
