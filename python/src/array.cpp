// The `array` class: construction, properties, conversions, the buffer
// protocol, operators and the method forms of the ops.
#include <nanobind/ndarray.h>

#include <cstring>

#include "elements.h"
#include "loom/compile/compile.h"
#include "loom/types/dispatch.h"
#include "utils.h"

namespace loom::bindings {

nb::object array_at(const array& a); // an ArrayAt (python/src/indexing.cpp)

namespace {

// --- NumPy export and the buffer protocol -----------------------------------

const char* buffer_format(Dtype d) {
  switch (d.val) {
    case Dtype::Val::bool_:
      return "?";
    case Dtype::Val::uint8:
      return "B";
    case Dtype::Val::uint16:
      return "H";
    case Dtype::Val::uint32:
      return "I";
    case Dtype::Val::uint64:
      return "Q";
    case Dtype::Val::int8:
      return "b";
    case Dtype::Val::int16:
      return "h";
    case Dtype::Val::int32:
      return "i";
    case Dtype::Val::int64:
      return "q";
    case Dtype::Val::float16:
      return "e";
    case Dtype::Val::float32:
      return "f";
    case Dtype::Val::float64:
      return "d";
    case Dtype::Val::complex64:
      return "Zf";
    case Dtype::Val::bfloat16:
      return "bfloat16"; // NumPy has no bfloat16: it refuses it
  }
  return "B";
}

nb::dlpack::dtype dlpack_dtype(Dtype d) {
  using C = nb::dlpack::dtype_code;
  auto make = [](C code, int bits) {
    return nb::dlpack::dtype{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
  };
  switch (d.val) {
    case Dtype::Val::bool_:
      return make(C::Bool, 8);
    case Dtype::Val::uint8:
      return make(C::UInt, 8);
    case Dtype::Val::uint16:
      return make(C::UInt, 16);
    case Dtype::Val::uint32:
      return make(C::UInt, 32);
    case Dtype::Val::uint64:
      return make(C::UInt, 64);
    case Dtype::Val::int8:
      return make(C::Int, 8);
    case Dtype::Val::int16:
      return make(C::Int, 16);
    case Dtype::Val::int32:
      return make(C::Int, 32);
    case Dtype::Val::int64:
      return make(C::Int, 64);
    case Dtype::Val::float16:
      return make(C::Float, 16);
    case Dtype::Val::float32:
      return make(C::Float, 32);
    case Dtype::Val::float64:
      return make(C::Float, 64);
    case Dtype::Val::complex64:
      return make(C::Complex, 64);
    case Dtype::Val::bfloat16:
      return make(C::Bfloat, 16);
  }
  return make(C::UInt, 8);
}

// A NumPy array viewing the array's buffer (kept alive by the view).
// `as_dtype` reinterprets the elements (bfloat16 as uint16 for pickling).
nb::object to_numpy(array& a, bool copy, std::optional<Dtype> as_dtype = std::nullopt) {
  eval_nogil(a);
  Dtype d = as_dtype.value_or(a.dtype());
  if (d == bfloat16) {
    throw std::invalid_argument(
        "[array] NumPy has no bfloat16 type: convert the array with astype first.");
  }
  warn_if_traced(a);
  std::vector<size_t> shape(a.shape().begin(), a.shape().end());
  std::vector<int64_t> strides(a.strides().begin(), a.strides().end());
  auto* owner = new array(a);
  nb::capsule keep_alive(owner, [](void* p) noexcept { delete static_cast<array*>(p); });
  static char empty_data = 0;
  void* data = a.has_data() ? a.data<void>() : &empty_data;
  // A view of an array being differentiated is read-only: a write through it
  // would change the value behind autodiff's back and silently give a wrong
  // gradient (seed 12.4's x_view[:] *= x_view).
  nb::object out;
  if (a.is_tracer()) {
    out = nb::ndarray<nb::numpy, nb::ro>(data, shape.size(), shape.data(), keep_alive,
                                         strides.data(), dlpack_dtype(d))
              .cast();
  } else {
    out = nb::ndarray<nb::numpy>(data, shape.size(), shape.data(), keep_alive, strides.data(),
                                 dlpack_dtype(d))
              .cast();
  }
  if (copy) out = out.attr("copy")();
  return out;
}

int array_getbuffer(PyObject* obj, Py_buffer* view, int flags) {
  if (!nb::inst_ready(obj)) {
    PyErr_SetString(PyExc_BufferError, "array is not initialized");
    return -1;
  }
  array& a = *nb::inst_ptr<array>(obj);
  try {
    eval_nogil(a);
  } catch (nb::python_error& e) {
    e.restore();
    return -1;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return -1;
  }
  if (a.dtype() == bfloat16 && (flags & PyBUF_FORMAT)) {
    // NumPy reads buffers through memoryview and would fail on the format
    // with "'bfloat16' is not a valid PEP 3118 buffer format string"; this
    // names the way out instead.
    PyErr_SetString(PyExc_ValueError,
                    "[array] NumPy and the buffer protocol have no bfloat16 type: convert "
                    "first, e.g. np.array(a.astype(mx.float32)).");
    return -1;
  }
  if (a.is_tracer()) {
    try {
      warn_if_traced(a);
    } catch (nb::python_error& e) {
      e.restore();
      return -1;
    }
  }
  if (a.is_tracer() && (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE) {
    PyErr_SetString(PyExc_BufferError,
                    "[array] The array is being differentiated (inside grad, vjp or a\n"
                    "similar transform): a writable view would change it behind autodiff's\n"
                    "back. Compute with array operations instead.");
    return -1;
  }
  bool row_contiguous = a.flags().row_contiguous;
  if (!row_contiguous && (flags & PyBUF_STRIDES) != PyBUF_STRIDES) {
    PyErr_SetString(PyExc_BufferError,
                    "array is not C-contiguous; request a strided buffer instead");
    return -1;
  }
  int nd = a.ndim();
  auto* dims = new Py_ssize_t[2 * std::max(nd, 1)];
  Py_ssize_t itemsize = static_cast<Py_ssize_t>(a.itemsize());
  for (int i = 0; i < nd; ++i) {
    dims[i] = a.shape()[i];
    dims[nd + i] = static_cast<Py_ssize_t>(a.strides()[i]) * itemsize;
  }
  static char empty_data = 0;
  view->buf = a.has_data() ? a.data<void>() : &empty_data;
  view->obj = obj;
  Py_INCREF(obj);
  view->len = static_cast<Py_ssize_t>(a.nbytes());
  view->readonly = a.is_tracer() ? 1 : 0;
  view->itemsize = itemsize;
  view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(buffer_format(a.dtype())) : nullptr;
  view->ndim = nd;
  view->shape = (flags & PyBUF_ND) ? dims : nullptr;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? dims + nd : nullptr;
  view->suboffsets = nullptr;
  view->internal = dims;
  return 0;
}

void array_releasebuffer(PyObject*, Py_buffer* view) {
  delete[] static_cast<Py_ssize_t*>(view->internal);
}

PyType_Slot array_slots[] = {{Py_bf_getbuffer, reinterpret_cast<void*>(array_getbuffer)},
                             {Py_bf_releasebuffer, reinterpret_cast<void*>(array_releasebuffer)},
                             {0, nullptr}};

// --- iteration -------------------------------------------------------------

struct ArrayIterator {
  array a;
  int32_t index = 0;
};

nb::object tuple_of(const Shape& s) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(s.size()));
  if (t == nullptr) throw nb::python_error();
  for (size_t i = 0; i < s.size(); ++i) {
    PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), PyLong_FromLong(s[i]));
  }
  return nb::steal(t);
}

// --- operators ---------------------------------------------------------------

using BinaryFn = array (*)(const array&, const array&, StreamOrDevice);

[[noreturn]] void unsupported_operand(const char* what, nb::handle other) {
  throw std::invalid_argument(std::string("Cannot perform ") + what +
                              " on an loom.core.array and " + python_type_name(other));
}

// The other operand of an operator: a Python scalar or NumPy value takes
// the array's dtype (weak typing).
array other_operand(const array& self, nb::handle other, const char* what) {
  if (is_array(other)) return as_array(other);
  if (!is_scalar_or_array(other)) unsupported_operand(what, other);
  return to_array(other, self.dtype());
}

array binary_op(const array& self, nb::handle other, BinaryFn fn, const char* what,
                bool reflected = false) {
  array y = other_operand(self, other, what);
  return reflected ? fn(y, self, {}) : fn(self, y, {});
}

void check_bitwise(const array& x, const array& y, const char* what) {
  if (is_inexact(x.dtype()) || is_inexact(y.dtype())) {
    throw std::invalid_argument(std::string("Floating point types not allowed with ") + what + ".");
  }
}

array bitwise_op(const array& self, nb::handle other, BinaryFn fn, const char* what) {
  array y = other_operand(self, other, what);
  check_bitwise(self, y, what);
  return fn(self, y, {});
}

template <typename F>
void def_operator(nb::class_<array>& cls, const char* name, F&& f) {
  cls.def(name, std::forward<F>(f), nb::arg("other"));
}

// In-place operators rebind the Python object to the result (MLX's `a += b`
// changes `a` and every name bound to the same object).
template <typename F>
void def_inplace(nb::class_<array>& cls, const char* name, F&& f) {
  cls.def(
      name,
      [f](nb::handle self, const ScalarOrArray& other) {
        array& a = nb::cast<array&>(self);
        a = f(a, other.obj);
        return nb::borrow(self);
      },
      nb::arg("other"));
}

std::vector<int> int_args(const nb::args& args, const char* what) {
  if (args.size() == 1 && !PyLong_Check(args[0].ptr())) {
    return nb::cast<std::vector<int>>(args[0]);
  }
  std::vector<int> out;
  for (auto h : args) {
    if (!PyLong_Check(h.ptr())) {
      throw nb::type_error((std::string(what) +
                            " must be integers or one sequence of integers, "
                            "got " +
                            python_type_name(h) + ".")
                               .c_str());
    }
    out.push_back(nb::cast<int>(h));
  }
  return out;
}

using Axis = std::optional<IntOrInts>;

} // namespace

void init_array(nb::module_& m) {
  nb::class_<ArrayIterator>(m, "ArrayIterator", "Iterates over the first axis of an array.")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__next__", [](ArrayIterator& it) {
        if (it.a.ndim() == 0 || it.index >= it.a.shape()[0]) throw nb::stop_iteration();
        return get_item(it.a, nb::int_(it.index++));
      });

  nb::class_<array> cls(m, "array", nb::type_slots(array_slots), "An N-dimensional array.");

  cls.def(
      "__init__",
      [](array* self, nb::handle val, std::optional<Dtype> dtype) {
        new (self) array(array_from_python(val, dtype));
      },
      nb::arg("val"), nb::arg("dtype").none() = nb::none(),
      nb::sig("def __init__(self: array, val: scalar | list | tuple | DLPackCompatible | array, "
              "dtype: Dtype | None = None)"));

  // --- properties --------------------------------------------------------------
  cls.def_prop_ro(
         "shape",
         [](const array& a) {
           compile_detail::note_shape_read(a);
           return tuple_of(a.shape());
         },
         "The shape of the array as a Python tuple.")
      .def_prop_ro("dtype", &array::dtype, "The array's Dtype.")
      .def_prop_ro("ndim", &array::ndim, "The number of dimensions.")
      .def_prop_ro(
          "size",
          [](const array& a) {
            compile_detail::note_shape_read(a);
            return a.size();
          },
          "The number of elements.")
      .def_prop_ro(
          "real", [](const array& a) { return real(a); },
          "The real part (float32 for complex64; the array itself otherwise).")
      .def_prop_ro(
          "imag", [](const array& a) { return imag(a); },
          "The imaginary part (float32 for complex64; zeros otherwise).")
      .def_prop_ro("itemsize", &array::itemsize, "Bytes per element.")
      .def_prop_ro("nbytes", &array::nbytes, "Bytes of all the elements.")
      .def_prop_ro(
          "at", [](const array& a) { return array_at(a); },
          "Out-of-place updates at an index, e.g. ``a.at[idx].add(v)``; repeated\n"
          "indices accumulate.")
      .def_prop_ro(
          "T", [](const array& a) { return transpose(a); },
          "The array with its axes reversed, like ``self.transpose()``.")
      .def_prop_ro(
          "mT",
          [](const array& a) {
            if (a.ndim() < 2) {
              throw std::invalid_argument(
                  "[matrix_transpose] Input array must have at least 2 dimensions.");
            }
            return swapaxes(a, -1, -2);
          },
          "The array with its last two axes swapped.");

  // --- conversions ---------------------------------------------------------------
  cls.def(
         "item",
         [](array& a) {
           warn_if_traced(a);
           return to_scalar(a);
         },
         nb::sig("def item(self) -> scalar"),
         "The value of a one-element array as a Python scalar (evaluates it).")
      .def(
          "tolist",
          [](array& a) {
            warn_if_traced(a);
            return to_list(a);
          },
          nb::sig("def tolist(self) -> list_or_scalar"),
          "The array as nested Python lists of ``bool``, ``int``, ``float`` or\n"
          "``complex`` (a Python scalar for a 0-d array). Evaluates it.")
      .def(
          "astype",
          [](const array& a, const Dtype& dtype, const StreamArg& s) {
            return astype(a, dtype, s);
          },
          nb::arg("dtype"), nb::arg("stream") = nb::none(),
          "The array converted to ``dtype``.\n\n"
          "Args:\n    dtype (Dtype): The new dtype.\n    stream (Stream, optional): Where to run.")
      .def("__repr__", &array_repr)
      .def("__len__",
           [](const array& a) {
             if (a.ndim() == 0) throw nb::type_error("len() 0-dimensional array.");
             compile_detail::note_shape_read(a);
             return a.shape()[0];
           })
      .def("__iter__",
           [](const array& a) {
             if (a.ndim() == 0) throw nb::type_error("iter() 0-dimensional array.");
             return ArrayIterator{a, 0};
           })
      .def("__bool__", [](array& a) { return nb::cast<bool>(nb::bool_(to_scalar(a))); })
      .def("__int__", [](array& a) { return nb::int_(to_scalar(a)); })
      .def("__float__",
           [](array& a) {
             warn_if_traced(a);
             return nb::float_(to_scalar(a));
           })
      .def("__complex__",
           [](array& a) {
             return nb::steal(PyObject_CallOneArg(reinterpret_cast<PyObject*>(&PyComplex_Type),
                                                  to_scalar(a).ptr()));
           })
      .def("__index__",
           [](array& a) {
             if (a.ndim() != 0 || !is_integral(a.dtype())) {
               throw nb::type_error(
                   "Only 0-dimensional integer arrays can be converted to an index.");
             }
             return to_scalar(a);
           })
      .def("__bytes__",
           [](array& a) {
             eval_nogil(a);
             std::string bytes(a.nbytes(), '\0');
             char* dst = bytes.data();
             dispatch(a.dtype(), [&](auto tag) {
               using T = typename decltype(tag)::type;
               for_each_element<T>(a, [&](const T& v) {
                 std::memcpy(dst, &v, sizeof(T));
                 dst += sizeof(T);
               });
             });
             return nb::bytes(bytes.data(), bytes.size());
           })
      .def("__format__",
           [](nb::handle self, const std::string& spec) -> nb::object {
             array& a = nb::cast<array&>(self);
             if (a.ndim() == 0) {
               return nb::steal(PyObject_Format(to_scalar(a).ptr(), nb::str(spec.c_str()).ptr()));
             }
             if (!spec.empty()) {
               throw nb::type_error(
                   "unsupported format string passed to loom.core.array.__format__");
             }
             return nb::str(array_repr(a).c_str());
           })
      .def(
          "__array__",
          [](array& a, nb::handle dtype, nb::handle copy) {
            bool no_copy = !copy.is_none() && !nb::cast<bool>(nb::bool_(copy));
            return to_numpy(a, !no_copy);
          },
          nb::arg("dtype").none() = nb::none(), nb::arg("copy").none() = nb::none())
      .def(
          "__dlpack__",
          [](array& a, nb::handle stream, nb::handle max_version, nb::handle dl_device,
             nb::handle copy) {
            if (!stream.is_none()) {
              throw std::invalid_argument("[__dlpack__] stream must be None for CPU arrays.");
            }
            return array_to_dlpack(a, max_version, dl_device, copy);
          },
          nb::kw_only(), nb::arg("stream").none() = nb::none(),
          nb::arg("max_version").none() = nb::none(), nb::arg("dl_device").none() = nb::none(),
          nb::arg("copy").none() = nb::none(),
          "A DLPack capsule viewing the array's memory (evaluates it and waits\n"
          "for the result first; read-only while the array is differentiated).")
      .def("__dlpack_device__", [](const array&) { return nb::make_tuple(1, 0); })
      .def(
          "__array_namespace__", [](const array&, nb::handle) { return core_module(); },
          nb::arg("api_version").none() = nb::none(),
          "The array API namespace of the array: loom.core.")
      .def("__copy__", [](const array& a) { return copy(a); })
      .def(
          "__deepcopy__", [](const array& a, nb::handle) { return copy(a); }, nb::arg("memo"))
      .def("__getstate__",
           [](array& a) {
             bool bf16 = a.dtype() == bfloat16;
             nb::object data =
                 to_numpy(a, true, bf16 ? std::optional<Dtype>(uint16) : std::nullopt);
             return nb::make_tuple(data, mlx_dtype_code(a.dtype()));
           })
      .def("__setstate__", [](array* self, const nb::tuple& state) {
        Dtype d = dtype_from_mlx_code(nb::cast<int>(state[1]));
        if (d == bfloat16) {
          array bits = array_from_python(state[0], uint16);
          array out = array::empty(bits.shape(), bfloat16);
          out.set_data(allocator::allocate(out.nbytes()));
          if (out.nbytes() > 0) std::memcpy(out.data<char>(), bits.data<char>(), out.nbytes());
          out.set_status(Status::available);
          new (self) array(out);
        } else {
          new (self) array(array_from_python(state[0], d));
        }
      });

  // --- indexing --------------------------------------------------------------------
  cls.def(
         "__getitem__", [](const array& a, nb::handle index) { return get_item(a, index); },
         nb::arg().none())
      .def(
          "__setitem__",
          [](array& a, nb::handle index, const ScalarOrArray& v) { set_item(a, index, v.obj); },
          nb::arg().none(), nb::arg());

  // --- arithmetic --------------------------------------------------------------------
  struct Named {
    const char* name;
    const char* rname;
    const char* iname;
    BinaryFn fn;
    const char* what;
  };
  const Named arithmetic[] = {
      {"__add__", "__radd__", "__iadd__", LOOM_BINARY_FN(add), "addition"},
      {"__sub__", "__rsub__", "__isub__", LOOM_BINARY_FN(subtract), "subtraction"},
      {"__mul__", "__rmul__", "__imul__", LOOM_BINARY_FN(multiply), "multiplication"},
      {"__truediv__", "__rtruediv__", "__itruediv__", LOOM_BINARY_FN(divide), "division"},
      {"__div__", "__rdiv__", nullptr, LOOM_BINARY_FN(divide), "division"},
      {"__floordiv__", "__rfloordiv__", "__ifloordiv__", LOOM_BINARY_FN(floor_divide),
       "floor division"},
      {"__mod__", "__rmod__", "__imod__", LOOM_BINARY_FN(remainder), "modulus"},
      {"__pow__", "__rpow__", "__ipow__", LOOM_BINARY_FN(power), "power"},
  };
  for (const auto& op : arithmetic) {
    BinaryFn fn = op.fn;
    const char* what = op.what;
    def_operator(cls, op.name, [fn, what](const array& a, const ScalarOrArray& b) {
      return binary_op(a, b.obj, fn, what);
    });
    def_operator(cls, op.rname, [fn, what](const array& a, const ScalarOrArray& b) {
      return binary_op(a, b.obj, fn, what, true);
    });
    if (op.iname == nullptr) continue;
    bool is_division = std::string(what) == "division";
    def_inplace(cls, op.iname, [fn, what, is_division](const array& a, nb::handle b) {
      if (is_division && !is_inexact(a.dtype())) {
        throw std::invalid_argument("In place division cannot cast to non-floating point type.");
      }
      return binary_op(a, b, fn, what);
    });
  }

  const Named comparisons[] = {
      {"__lt__", nullptr, nullptr, LOOM_BINARY_FN(less), "less than"},
      {"__le__", nullptr, nullptr, LOOM_BINARY_FN(less_equal), "less than or equal"},
      {"__gt__", nullptr, nullptr, LOOM_BINARY_FN(greater), "greater than"},
      {"__ge__", nullptr, nullptr, LOOM_BINARY_FN(greater_equal), "greater than or equal"},
  };
  for (const auto& op : comparisons) {
    BinaryFn fn = op.fn;
    const char* what = op.what;
    def_operator(cls, op.name, [fn, what](const array& a, const ScalarOrArray& b) {
      return binary_op(a, b.obj, fn, what);
    });
  }
  // == and != with something that is not array-like answer False / True.
  cls.def(
         "__eq__",
         [](const array& a, const ScalarOrArray& b) -> nb::object {
           if (!is_scalar_or_array(b.obj)) return nb::bool_(false);
           return nb::cast(binary_op(a, b.obj, LOOM_BINARY_FN(equal), "equality"));
         },
         nb::arg("other"))
      .def(
          "__ne__",
          [](const array& a, const ScalarOrArray& b) -> nb::object {
            if (!is_scalar_or_array(b.obj)) return nb::bool_(true);
            return nb::cast(binary_op(a, b.obj, LOOM_BINARY_FN(not_equal), "inequality"));
          },
          nb::arg("other"));
  // Arrays hash by identity (they compare element-wise, not by value).
  cls.attr("__hash__") = nb::module_::import_("builtins").attr("object").attr("__hash__");

  const Named bitwise[] = {
      {"__and__", nullptr, "__iand__", LOOM_BINARY_FN(bitwise_and), "bitwise and"},
      {"__or__", nullptr, "__ior__", LOOM_BINARY_FN(bitwise_or), "bitwise or"},
      {"__xor__", nullptr, "__ixor__", LOOM_BINARY_FN(bitwise_xor), "bitwise xor"},
      {"__lshift__", nullptr, "__ilshift__", LOOM_BINARY_FN(left_shift), "left shift"},
      {"__rshift__", nullptr, "__irshift__", LOOM_BINARY_FN(right_shift), "right shift"},
  };
  for (const auto& op : bitwise) {
    BinaryFn fn = op.fn;
    const char* what = op.what;
    def_operator(cls, op.name, [fn, what](const array& a, const ScalarOrArray& b) {
      return bitwise_op(a, b.obj, fn, what);
    });
    def_inplace(cls, op.iname,
                [fn, what](const array& a, nb::handle b) { return bitwise_op(a, b, fn, what); });
  }

  cls.def(
         "__matmul__", [](const array& a, const array& b) { return matmul(a, b); },
         nb::arg("other"))
      .def(
          "__imatmul__",
          [](nb::handle self, const array& b) {
            array& a = nb::cast<array&>(self);
            a = matmul(a, b);
            return nb::borrow(self);
          },
          nb::arg("other"))
      .def("__neg__", [](const array& a) { return negative(a); })
      .def("__pos__", [](const array& a) { return a; })
      .def("__abs__", [](const array& a) { return abs(a); })
      .def("__invert__", [](const array& a) {
        if (is_inexact(a.dtype())) {
          throw std::invalid_argument("Floating point types not allowed with bitwise inversion.");
        }
        return a.dtype() == bool_ ? logical_not(a) : bitwise_invert(a);
      });

  // --- method forms of ops ---------------------------------------------------------
  auto stream_arg = [] { return nb::arg("stream") = nb::none(); };

#define LOOM_UNARY_METHOD(NAME)                                                                  \
  cls.def(                                                                                       \
      #NAME, [](const array& a, const StreamArg& s) { return loom::NAME(a, s); }, nb::kw_only(), \
      stream_arg(), "See :func:`" #NAME "`.")
  LOOM_UNARY_METHOD(abs);
  LOOM_UNARY_METHOD(cos);
  LOOM_UNARY_METHOD(exp);
  LOOM_UNARY_METHOD(log);
  LOOM_UNARY_METHOD(reciprocal);
  LOOM_UNARY_METHOD(rsqrt);
  LOOM_UNARY_METHOD(sin);
  LOOM_UNARY_METHOD(sqrt);
  LOOM_UNARY_METHOD(square);
  LOOM_UNARY_METHOD(log2);
  LOOM_UNARY_METHOD(log10);
  LOOM_UNARY_METHOD(log1p);
#undef LOOM_UNARY_METHOD
  cls.def(
      "conj", [](const array& a, const StreamArg& s) { return conjugate(a, s); }, nb::kw_only(),
      stream_arg(), "See :func:`conj`.");
  cls.def(
      "round",
      [](const array& a, int decimals, const StreamArg& s) { return round(a, decimals, s); },
      nb::arg("decimals") = 0, nb::kw_only(), stream_arg(), "See :func:`round`.");

#define LOOM_REDUCTION_METHOD(NAME)                                                           \
  cls.def(                                                                                    \
      #NAME,                                                                                  \
      [](const array& a, const Axis& axis, bool keepdims, const StreamArg& s) {               \
        if (!axis) return loom::NAME(a, keepdims, s);                                         \
        return loom::NAME(a, to_axes(*axis), keepdims, s);                                    \
      },                                                                                      \
      nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, nb::kw_only(), stream_arg(), \
      "See :func:`" #NAME "`.")
  LOOM_REDUCTION_METHOD(sum);
  LOOM_REDUCTION_METHOD(mean);
  LOOM_REDUCTION_METHOD(max);
  LOOM_REDUCTION_METHOD(min);
  LOOM_REDUCTION_METHOD(prod);
  LOOM_REDUCTION_METHOD(all);
  LOOM_REDUCTION_METHOD(any);
#undef LOOM_REDUCTION_METHOD

#define LOOM_ARG_REDUCTION_METHOD(NAME)                                                       \
  cls.def(                                                                                    \
      #NAME,                                                                                  \
      [](const array& a, std::optional<int> axis, bool keepdims, const StreamArg& s) {        \
        if (!axis) return loom::NAME(a, keepdims, s);                                         \
        return loom::NAME(a, *axis, keepdims, s);                                             \
      },                                                                                      \
      nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, nb::kw_only(), stream_arg(), \
      "See :func:`" #NAME "`.")
  LOOM_ARG_REDUCTION_METHOD(argmax);
  LOOM_ARG_REDUCTION_METHOD(argmin);
#undef LOOM_ARG_REDUCTION_METHOD

  cls.def(
      "logsumexp",
      [](const array& a, const Axis& axis, bool keepdims, const StreamArg& s) {
        return axis ? logsumexp(a, to_axes(*axis), keepdims, s) : logsumexp(a, keepdims, s);
      },
      nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, nb::kw_only(), stream_arg(),
      "See :func:`logsumexp`.");
  for (bool root : {false, true}) {
    cls.def(
        root ? "std" : "var",
        [root](const array& a, const Axis& axis, bool keepdims, int ddof,
               std::optional<int> correction, const StreamArg& s) {
          int d = correction.value_or(ddof);
          if (root) return axis ? std(a, to_axes(*axis), keepdims, d, s) : std(a, keepdims, d, s);
          return axis ? var(a, to_axes(*axis), keepdims, d, s) : var(a, keepdims, d, s);
        },
        nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, nb::arg("ddof") = 0,
        nb::kw_only(), nb::arg("correction").none() = nb::none(), stream_arg(),
        root ? "See :func:`std` (``correction`` is another name for ``ddof``)."
             : "See :func:`var` (``correction`` is another name for ``ddof``).");
  }

  cls.def(
         "reshape",
         [](const array& a, nb::args shape, const StreamArg& s) {
           auto dims = int_args(shape, "reshape() dimensions");
           return reshape(a, Shape(dims.begin(), dims.end()), s);
         },
         nb::arg("shape"), nb::kw_only(), stream_arg(),
         "Equivalent to :func:`reshape`; the shape may be one tuple or separate\n"
         "integers.")
      .def(
          "transpose",
          [](const array& a, nb::args axes, const StreamArg& s) {
            if (axes.size() == 0) return transpose(a, s);
            return transpose(a, int_args(axes, "transpose() axes"), s);
          },
          nb::arg("axes"), nb::kw_only(), stream_arg(),
          "Equivalent to :func:`transpose`; the axes may be one tuple or separate\n"
          "integers.")
      .def(
          "flatten",
          [](const array& a, int start_axis, int end_axis, const StreamArg& s) {
            return flatten(a, start_axis, end_axis, s);
          },
          nb::arg("start_axis") = 0, nb::arg("end_axis") = -1, nb::kw_only(), stream_arg(),
          "See :func:`flatten`.")
      .def(
          "squeeze",
          [](const array& a, const Axis& axis, const StreamArg& s) {
            return axis ? squeeze(a, to_axes(*axis), s) : squeeze(a, s);
          },
          nb::arg("axis") = nb::none(), nb::kw_only(), stream_arg(), "See :func:`squeeze`.")
      .def(
          "swapaxes",
          [](const array& a, int axis1, int axis2, const StreamArg& s) {
            return swapaxes(a, axis1, axis2, s);
          },
          nb::arg("axis1"), nb::arg("axis2"), nb::kw_only(), stream_arg(), "See :func:`swapaxes`.")
      .def(
          "moveaxis",
          [](const array& a, int source, int destination, const StreamArg& s) {
            return moveaxis(a, source, destination, s);
          },
          nb::arg("source"), nb::arg("destination"), nb::kw_only(), stream_arg(),
          "See :func:`moveaxis`.")
      .def(
          "split",
          [](const array& a, const IntOrInts& indices_or_sections, int axis, const StreamArg& s) {
            if (auto* n = std::get_if<int>(&indices_or_sections)) return split(a, *n, axis, s);
            return split(a, to_shape(indices_or_sections), axis, s);
          },
          nb::arg("indices_or_sections"), nb::arg("axis") = 0, nb::kw_only(), stream_arg(),
          "See :func:`split`.");
}

} // namespace loom::bindings
