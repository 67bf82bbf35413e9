// MLX's array printing format and the print options that control it.
#include <cmath>
#include <complex>
#include <iomanip>
#include <sstream>

#include "loom/types/dispatch.h"
#include "utils.h"

namespace loom::bindings {

namespace {

// Digits after the decimal point, or -1 for the shortest general format.
int g_precision = -1;

// Dimensions longer than this print their first and last kEdgeItems only.
constexpr int kSummariseAbove = 6;
constexpr int kEdgeItems = 3;

struct PrintOptions {
  int precision;
};

class Formatter {
 public:
  explicit Formatter(const array& a) : a_(a) {
    if (g_precision >= 0) {
      os_ << std::fixed << std::setprecision(g_precision);
    }
  }

  std::string format() {
    os_ << "array(";
    if (a_.ndim() == 0) {
      element(0);
    } else {
      dimension(0, 0);
    }
    os_ << ", dtype=" << dtype_name(a_.dtype()) << ")";
    return os_.str();
  }

 private:
  void real(double v, bool half) {
    if (half && std::isnan(v)) {
      os_ << "nan"; // half types carry no NaN sign through float
    } else {
      os_ << v;
    }
  }

  template <typename T>
  void value(const T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      os_ << (v ? "True" : "False");
    } else if constexpr (std::is_same_v<T, std::complex<float>>) {
      os_ << v.real();
      if (!(v.imag() < 0)) os_ << "+";
      os_ << v.imag() << "j";
    } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
      real(static_cast<float>(v), true);
    } else if constexpr (std::is_same_v<T, float>) {
      os_ << v;
    } else if constexpr (std::is_same_v<T, double>) {
      os_ << v;
    } else if constexpr (std::is_signed_v<T>) {
      os_ << static_cast<int64_t>(v);
    } else {
      os_ << static_cast<uint64_t>(v);
    }
  }

  void element(int64_t offset) {
    dispatch(a_.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      value<T>(a_.data<T>()[offset]);
    });
  }

  void dimension(int dim, int64_t offset) {
    int32_t n = a_.shape()[dim];
    int64_t stride = a_.strides()[dim];
    bool last = dim + 1 == a_.ndim();
    bool summarise = n > kSummariseAbove;
    std::string separator = last ? ", " : ",\n" + std::string(7 + dim, ' ');
    os_ << "[";
    for (int32_t i = 0; i < n; ++i) {
      if (summarise && i == kEdgeItems) {
        os_ << "..." << separator;
        i = n - kEdgeItems;
      }
      if (last) {
        element(offset + i * stride);
      } else {
        dimension(dim + 1, offset + i * stride);
      }
      if (i + 1 < n) os_ << separator;
    }
    os_ << "]";
  }

  const array& a_;
  std::ostringstream os_;
};

struct PrintOptionsContext {
  int precision;
  int saved = -1;
};

} // namespace

std::string array_repr(array& a) {
  eval_nogil(a);
  return Formatter(a).format();
}

void init_printing(nb::module_& m) {
  nb::class_<PrintOptions>(m, "PrintOptions", "Options for printing arrays (see set_printoptions).")
      .def(nb::init<int>(), nb::arg("precision") = -1)
      .def_rw("precision", &PrintOptions::precision);

  m.def(
      "get_printoptions", [] { return PrintOptions{g_precision}; },
      nb::sig("def get_printoptions() -> loom.core.PrintOptions"),
      "Return the current array printing options.\n\n"
      "Returns:\n    PrintOptions: The options used when printing arrays.");

  m.def(
      "set_printoptions", [](int precision) { g_precision = precision; }, nb::arg("precision") = -1,
      nb::sig("def set_printoptions(precision: int = -1) -> None"),
      "Set how arrays are printed, for every later print.\n\n"
      "Args:\n"
      "    precision (int): Digits after the decimal point for floating point\n"
      "      values; ``-1`` (the default) prints each value in its shortest\n"
      "      general form with 6 significant digits.");

  nb::class_<PrintOptionsContext>(m, "_PrintOptionsContext")
      .def("__enter__",
           [](PrintOptionsContext& c) {
             c.saved = g_precision;
             g_precision = c.precision;
           })
      .def("__exit__", [](PrintOptionsContext& c, nb::args) { g_precision = c.saved; });

  m.def(
      "printoptions",
      [](int precision) {
        return PrintOptionsContext{precision, -1};
      },
      nb::arg("precision") = -1,
      nb::sig("def printoptions(precision: int = -1) -> loom.core._PrintOptionsContext"),
      "Context manager that sets the print options inside a ``with`` block.\n\n"
      "Example:\n"
      "    >>> with mx.printoptions(precision=2):\n"
      "    ...     print(mx.array(1 / 3))\n"
      "    array(0.33, dtype=float32)\n\n"
      "Args:\n"
      "    precision (int): Digits after the decimal point, ``-1`` for the default.");
}

} // namespace loom::bindings
