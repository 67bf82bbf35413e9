// Dtype objects, their categories, finfo/iinfo and promotion queries.
#include <cmath>
#include <limits>
#include <sstream>

#include "loom/types/dispatch.h"
#include "utils.h"

namespace loom::bindings {

namespace {

struct FloatInfo {
  Dtype dtype;
  double min, max, eps, smallest_normal;
  int bits;
};

struct IntInfo {
  Dtype dtype;
  nb::object min, max;
};

template <typename T>
FloatInfo float_info(Dtype d) {
  if constexpr (std::is_same_v<T, float16_t>) {
    return {d, -65504.0, 65504.0, 0.0009765625, 6.103515625e-05, 16};
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    // 8 bits of mantissa (7 stored): eps 2^-7, max (2 - 2^-7) * 2^127.
    double max = (2.0 - std::ldexp(1.0, -7)) * std::ldexp(1.0, 127);
    return {d, -max, max, std::ldexp(1.0, -7), std::ldexp(1.0, -126), 16};
  } else {
    using L = std::numeric_limits<T>;
    return {d,
            static_cast<double>(L::lowest()),
            static_cast<double>(L::max()),
            static_cast<double>(L::epsilon()),
            static_cast<double>(L::min()),
            static_cast<int>(sizeof(T) * 8)};
  }
}

FloatInfo make_finfo(Dtype d) {
  if (!is_inexact(d)) {
    throw std::invalid_argument("[finfo] dtype " + dtype_name(d) + " is not inexact.");
  }
  switch (d.val) {
    case Dtype::Val::float16:
      return float_info<float16_t>(d);
    case Dtype::Val::bfloat16:
      return float_info<bfloat16_t>(d);
    case Dtype::Val::float64:
      return float_info<double>(d);
    default:
      return float_info<float>(float32); // float32, complex64 (its parts)
  }
}

IntInfo make_iinfo(Dtype d) {
  if (!is_integral(d)) {
    throw std::invalid_argument("[iinfo] Only integer types supported but " + dtype_name(d) +
                                " was provided");
  }
  return dispatch(d, [&](auto tag) -> IntInfo {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      using L = std::numeric_limits<T>;
      if constexpr (std::is_unsigned_v<T>) {
        return {d, nb::int_(0), nb::steal(PyLong_FromUnsignedLongLong(L::max()))};
      } else {
        return {d, nb::steal(PyLong_FromLongLong(L::min())),
                nb::steal(PyLong_FromLongLong(L::max()))};
      }
    } else {
      throw std::invalid_argument("[iinfo] unreachable");
    }
  });
}

std::string short_float(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

using DtypeOrCategory = std::variant<Dtype, Dtype::Category>;

// One of the kinds accepted by isdtype.
bool dtype_is_kind(Dtype d, nb::handle kind) {
  if (nb::isinstance<Dtype>(kind)) return nb::cast<Dtype>(kind) == d;
  if (nb::isinstance<nb::str>(kind)) {
    std::string k = nb::cast<std::string>(kind);
    if (k == "bool") return d == bool_;
    if (k == "signed integer") return is_signed_integer(d);
    if (k == "unsigned integer") return is_unsigned(d);
    if (k == "integral") return is_integral(d);
    if (k == "real floating") return is_floating_point(d);
    if (k == "complex floating") return is_complex(d);
    if (k == "numeric") return d != bool_;
    throw std::invalid_argument("[isdtype] Unknown kind '" + k + "'.");
  }
  throw nb::type_error("[isdtype] kind must be a Dtype, a string or a tuple of them.");
}

} // namespace

void init_dtypes(nb::module_& m) {
  nb::class_<Dtype>(m, "Dtype", "The element type of an array (see loom.core.float32 ...).")
      .def_ro("size", &Dtype::size, "Size of one element in bytes.")
      .def("__repr__", [](const Dtype& d) { return "loom.core." + dtype_name(d); })
      .def("__eq__",
           [](const Dtype& d, nb::handle other) {
             return nb::isinstance<Dtype>(other) && nb::cast<Dtype>(other) == d;
           })
      .def("__hash__", [](const Dtype& d) { return mlx_dtype_code(d); });

  const std::pair<const char*, Dtype> dtypes[] = {
      {"bool_", bool_},       {"uint8", uint8},        {"uint16", uint16},   {"uint32", uint32},
      {"uint64", uint64},     {"int8", int8},          {"int16", int16},     {"int32", int32},
      {"int64", int64},       {"float16", float16},    {"float32", float32}, {"float64", float64},
      {"bfloat16", bfloat16}, {"complex64", complex64}};
  for (auto& [name, d] : dtypes) m.attr(name) = nb::cast(d);

  nb::enum_<Dtype::Category>(m, "DtypeCategory",
                             "Categories of dtypes, NumPy's abstract type tree: generic > "
                             "bool_ and number; number > integer and inexact; integer > "
                             "signedinteger and unsignedinteger; inexact > floating and "
                             "complexfloating. See issubdtype.")
      .value("complexfloating", complexfloating)
      .value("floating", floating)
      .value("inexact", inexact)
      .value("signedinteger", signedinteger)
      .value("unsignedinteger", unsignedinteger)
      .value("integer", integer)
      .value("number", number)
      .value("generic", generic);
  for (auto c : {complexfloating, floating, inexact, signedinteger, unsignedinteger, integer,
                 number, generic}) {
    m.attr(category_name(c).c_str()) = nb::cast(c);
  }

  m.def(
      "issubdtype",
      [](nb::handle a, nb::handle b) {
        auto read = [](nb::handle h, const char* which) -> DtypeOrCategory {
          if (nb::isinstance<Dtype>(h)) return nb::cast<Dtype>(h);
          if (nb::isinstance<Dtype::Category>(h)) return nb::cast<Dtype::Category>(h);
          throw std::invalid_argument(std::string("[issubdtype] Received invalid type for ") +
                                      which + " input.");
        };
        auto x = read(a, "first");
        auto y = read(b, "second");
        return std::visit([](auto p, auto q) { return issubdtype(p, q); }, x, y);
      },
      nb::arg(), nb::arg(),
      nb::sig("def issubdtype(arg1: Dtype | DtypeCategory, arg2: Dtype | DtypeCategory) -> bool"),
      "Whether a dtype or category is a sub-type of another.\n\n"
      "Dtypes are only sub-types of themselves and of the categories above them:\n"
      "``issubdtype(float32, floating)`` is True, ``issubdtype(float64, float32)`` is\n"
      "False.\n\n"
      "Args:\n"
      "    arg1 (Dtype or DtypeCategory): The candidate sub-type.\n"
      "    arg2 (Dtype or DtypeCategory): The candidate parent.\n\n"
      "Returns:\n    bool");

  m.def(
      "result_type",
      [](nb::args args) {
        std::optional<Dtype> out;
        for (auto h : args) {
          if (!nb::isinstance<Dtype>(h) && !is_array(h)) {
            throw std::invalid_argument("[result_type] Inputs must be arrays or dtypes (got " +
                                        python_type_name(h) + ").");
          }
          Dtype d = nb::isinstance<Dtype>(h) ? nb::cast<Dtype>(h) : as_array(h).dtype();
          out = out ? promote_types(*out, d) : d;
        }
        if (!out)
          throw std::invalid_argument("[result_type] At least one array or dtype is required.");
        return *out;
      },
      nb::sig("def result_type(*arrays_and_dtypes: array | Dtype) -> Dtype"),
      "The dtype that type promotion gives for the inputs.\n\n"
      "Args:\n"
      "    *arrays_and_dtypes (array or Dtype): Arrays or dtypes to promote.\n\n"
      "Returns:\n    Dtype: The promoted dtype.");

  m.def(
      "can_cast",
      [](nb::handle from, const Dtype& to) {
        if (!nb::isinstance<Dtype>(from) && !is_array(from)) {
          throw std::invalid_argument("[can_cast] `from_` must be an array or a dtype (got " +
                                      python_type_name(from) + ").");
        }
        Dtype f = nb::isinstance<Dtype>(from) ? nb::cast<Dtype>(from) : as_array(from).dtype();
        return promote_types(f, to) == to;
      },
      nb::arg("from_"), nb::arg("to"),
      nb::sig("def can_cast(from_: array | Dtype, to: Dtype) -> bool"),
      "Whether ``from_`` can be cast to ``to`` under the promotion rules, that\n"
      "is whether promoting the two gives ``to``.\n\n"
      "Args:\n"
      "    from_ (array or Dtype): The source.\n"
      "    to (Dtype): The destination dtype.\n\n"
      "Returns:\n    bool");

  m.def(
      "isdtype",
      [](const Dtype& d, nb::handle kind) {
        if (nb::isinstance<nb::tuple>(kind)) {
          for (auto k : kind) {
            if (dtype_is_kind(d, k)) return true;
          }
          return false;
        }
        return dtype_is_kind(d, kind);
      },
      nb::arg("dtype"), nb::arg("kind"),
      nb::sig("def isdtype(dtype: Dtype, kind: Dtype | str | tuple[Dtype | str, ...]) -> bool"),
      "Whether a dtype is of a kind, or of any kind in a tuple.\n\n"
      "Kinds are dtypes or the strings ``\"bool\"``, ``\"signed integer\"``,\n"
      "``\"unsigned integer\"``, ``\"integral\"``, ``\"real floating\"``,\n"
      "``\"complex floating\"`` and ``\"numeric\"``.\n\n"
      "Args:\n"
      "    dtype (Dtype): The dtype to test.\n"
      "    kind (Dtype, str or tuple): The kind(s).\n\n"
      "Returns:\n    bool");

  nb::class_<FloatInfo>(m, "finfo", "Limits of a floating point dtype.")
      .def(
          "__init__", [](FloatInfo* self, const Dtype& d) { new (self) FloatInfo(make_finfo(d)); },
          nb::arg())
      .def_ro("min", &FloatInfo::min, "The most negative finite value.")
      .def_ro("max", &FloatInfo::max, "The largest finite value.")
      .def_ro("eps", &FloatInfo::eps,
              "The gap between 1.0 and the next larger representable value.")
      .def_ro("smallest_normal", &FloatInfo::smallest_normal, "The smallest positive normal value.")
      .def_ro("bits", &FloatInfo::bits, "Bits per value.")
      .def_ro("dtype", &FloatInfo::dtype, "The Dtype.")
      .def("__repr__", [](const FloatInfo& f) {
        return "finfo(min=" + short_float(f.min) + ", max=" + short_float(f.max) +
               ", dtype=" + dtype_name(f.dtype) + ")";
      });

  nb::class_<IntInfo>(m, "iinfo", "Limits of an integer dtype.")
      .def(
          "__init__", [](IntInfo* self, const Dtype& d) { new (self) IntInfo(make_iinfo(d)); },
          nb::arg())
      .def_prop_ro(
          "min", [](const IntInfo& i) { return i.min; }, "The smallest value.")
      .def_prop_ro(
          "max", [](const IntInfo& i) { return i.max; }, "The largest value.")
      .def_ro("dtype", &IntInfo::dtype, "The Dtype.")
      .def("__repr__", [](const IntInfo& i) {
        return "iinfo(min=" + nb::cast<std::string>(nb::str(i.min)) +
               ", max=" + nb::cast<std::string>(nb::str(i.max)) + ", dtype=" + dtype_name(i.dtype) +
               ")";
      });
}

} // namespace loom::bindings
