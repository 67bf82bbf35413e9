// Module-level operations of loom.core, under MLX's names and signatures.
#include <cmath>

#include "loom/ops/utils.h"
#include "utils.h"

namespace loom::bindings {

namespace {

using UnaryFn = array (*)(const array&, StreamOrDevice);
using BinaryFn = array (*)(const array&, const array&, StreamOrDevice);

std::string unary_doc(const char* summary) {
  return std::string(summary) +
         "\n\nArgs:\n    a (array): Input array or scalar.\n\nReturns:\n    array: The result, "
         "element by element.";
}

std::string binary_doc(const char* summary) {
  return std::string(summary) +
         "\n\nInputs broadcast together (NumPy rules). A Python scalar takes the\n"
         "dtype of the array it meets.\n\n"
         "Args:\n    a (array): Input array or scalar.\n    b (array): Input array or scalar.\n\n"
         "Returns:\n    array: The result, element by element.";
}

// Element-wise unary op taking a scalar or an array.
void def_unary(nb::module_& m, const char* name, UnaryFn fn, const char* summary,
               bool scalar_input = true, bool pos_only_marker = true) {
  // MLX documents `a: array` although the element-wise ops accept scalars;
  // bitwise_invert alone says so.
  std::string sig = std::string("def ") + name +
                    "(a: " + (std::string(name) == "bitwise_invert" ? "scalar | " : "") + "array" +
                    (pos_only_marker ? ", /, *," : ",") +
                    " stream: StreamOrDevice = None) -> array";
  std::string doc = unary_doc(summary);
  if (scalar_input) {
    m.def(
        name, [fn](const ScalarOrArray& a, const StreamArg& s) { return fn(to_array(a.obj), s); },
        nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(), nb::sig(sig.c_str()),
        doc.c_str());
  } else {
    m.def(
        name, [fn](const array& a, const StreamArg& s) { return fn(a, s); }, nb::arg(),
        nb::kw_only(), nb::arg("stream") = nb::none(), nb::sig(sig.c_str()), doc.c_str());
  }
}

void def_binary(nb::module_& m, const char* name, BinaryFn fn, const char* summary,
                const char* sig_args = "a: scalar | array, b: scalar | array") {
  std::string sig =
      std::string("def ") + name + "(" + sig_args + ", stream: StreamOrDevice = None) -> array";
  std::string doc = binary_doc(summary);
  m.def(
      name,
      [fn](const ScalarOrArray& a, const ScalarOrArray& b, const StreamArg& s) {
        auto [x, y] = to_arrays(a.obj, b.obj);
        return fn(x, y, s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(), nb::sig(sig.c_str()),
      doc.c_str());
}

// Logical ops read Python scalars by their truth value (logical_and(uint8
// array, 300) is valid: 300 need not fit the array's dtype).
void def_logical(nb::module_& m, const char* name, BinaryFn fn, const char* summary,
                 const char* sig_args) {
  std::string sig =
      std::string("def ") + name + "(" + sig_args + ", stream: StreamOrDevice = None) -> array";
  std::string doc = binary_doc(summary);
  m.def(
      name,
      [fn](const ScalarOrArray& a, const ScalarOrArray& b, const StreamArg& s) {
        auto truth = [](nb::handle h) -> std::optional<array> {
          if (PyBool_Check(h.ptr()) || PyLong_Check(h.ptr()) || PyFloat_Check(h.ptr()) ||
              PyComplex_Check(h.ptr())) {
            return array(PyObject_IsTrue(h.ptr()) == 1);
          }
          return std::nullopt;
        };
        auto ta = truth(a.obj), tb = truth(b.obj);
        array x = ta ? *ta : to_array(a.obj);
        array y = tb ? *tb : to_array(b.obj);
        return fn(x, y, s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(), nb::sig(sig.c_str()),
      doc.c_str());
}

using Axis = std::optional<IntOrInts>;

template <typename AxesFn, typename AllFn>
void def_reduction(nb::module_& m, const char* name, AxesFn axes_fn, AllFn all_fn,
                   const char* summary) {
  std::string sig = std::string("def ") + name +
                    "(a: array, /, axis: None | int | Sequence[int] = None, keepdims: bool = "
                    "False, *, stream: StreamOrDevice = None) -> array";
  std::string doc = std::string(summary) +
                    "\n\nArgs:\n"
                    "    a (array): Input array.\n"
                    "    axis (int or list(int), optional): The axis or axes to reduce;\n"
                    "      all of them when unspecified.\n"
                    "    keepdims (bool, optional): Keep the reduced axes as size-one\n"
                    "      dimensions. Default: ``False``.\n\n"
                    "Returns:\n    array: The reduced array.";
  m.def(
      name,
      [axes_fn, all_fn](const array& a, const Axis& axis, bool keepdims, const StreamArg& s) {
        if (!axis) return all_fn(a, keepdims, s);
        return axes_fn(a, to_axes(*axis), keepdims, s);
      },
      nb::arg(), nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, nb::kw_only(),
      nb::arg("stream") = nb::none(), nb::sig(sig.c_str()), doc.c_str());
}

template <typename AxisFn, typename AllFn>
void def_arg_reduction(nb::module_& m, const char* name, AxisFn axis_fn, AllFn all_fn,
                       const char* summary) {
  std::string sig = std::string("def ") + name +
                    "(a: array, /, axis: None | int = None, keepdims: bool = False, *, stream: "
                    "StreamOrDevice = None) -> array";
  std::string doc = std::string(summary) +
                    "\n\nArgs:\n"
                    "    a (array): Input array.\n"
                    "    axis (int, optional): The axis to reduce; the flattened array\n"
                    "      when unspecified.\n"
                    "    keepdims (bool, optional): Keep the reduced axis as a size-one\n"
                    "      dimension. Default: ``False``.\n\n"
                    "Returns:\n    array: The ``uint32`` indices.";
  m.def(
      name,
      [axis_fn, all_fn](const array& a, std::optional<int> axis, bool keepdims,
                        const StreamArg& s) {
        if (!axis) return all_fn(a, keepdims, s);
        return axis_fn(a, *axis, keepdims, s);
      },
      nb::arg(), nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, nb::kw_only(),
      nb::arg("stream") = nb::none(), nb::sig(sig.c_str()), doc.c_str());
}

// A number argument of arange: int or float (bool is refused like MLX).
struct Number {
  double value;
  bool is_float;
  bool needs_int64;
};

Number read_number(nb::handle h) {
  if (PyBool_Check(h.ptr())) throw std::invalid_argument("bool not supported for arange.");
  if (PyLong_Check(h.ptr())) {
    int64_t v = nb::cast<int64_t>(h);
    return {static_cast<double>(v), false, v < INT32_MIN || v > INT32_MAX};
  }
  if (PyFloat_Check(h.ptr())) return {PyFloat_AS_DOUBLE(h.ptr()), true, false};
  throw nb::type_error(
      ("arange(): expected an int or a float, got " + python_type_name(h) + ".").c_str());
}

array arange_impl(nb::handle start_h, nb::handle stop_h, nb::handle step_h,
                  std::optional<Dtype> dtype, const StreamArg& s) {
  Number start = start_h.is_valid() ? read_number(start_h) : Number{0.0, false, false};
  Number stop = read_number(stop_h);
  Number step =
      step_h.is_valid() && !step_h.is_none() ? read_number(step_h) : Number{1.0, false, false};
  if (step.value == 0) throw std::invalid_argument("[arange] step must be nonzero.");
  Dtype d = dtype ? *dtype
                  : arange_dtype(start.is_float || stop.is_float || step.is_float,
                                 start.needs_int64 || stop.needs_int64 || step.needs_int64);
  return arange(start.value, stop.value, step.value, d, s);
}

} // namespace

void init_ops(nb::module_& m) {
  // --- unary -----------------------------------------------------------------
  def_unary(m, "abs", LOOM_UNARY_FN(abs), "Element-wise absolute value.");
  def_unary(m, "sign", LOOM_UNARY_FN(sign), "Element-wise sign: -1, 0 or 1.");
  def_unary(m, "square", LOOM_UNARY_FN(square), "Element-wise square.");
  def_unary(m, "sqrt", LOOM_UNARY_FN(sqrt), "Element-wise square root.");
  def_unary(m, "rsqrt", LOOM_UNARY_FN(rsqrt), "Element-wise reciprocal of the square root.");
  def_unary(m, "reciprocal", LOOM_UNARY_FN(reciprocal), "Element-wise reciprocal, ``1 / a``.");
  def_unary(m, "exp", LOOM_UNARY_FN(exp), "Element-wise exponential.");
  def_unary(m, "log", LOOM_UNARY_FN(log), "Element-wise natural logarithm.");
  def_unary(m, "sin", LOOM_UNARY_FN(sin), "Element-wise sine.");
  def_unary(m, "cos", LOOM_UNARY_FN(cos), "Element-wise cosine.");
  def_unary(m, "tanh", LOOM_UNARY_FN(tanh), "Element-wise hyperbolic tangent.");
  def_unary(m, "erf", LOOM_UNARY_FN(erf), "Element-wise error function.");
  def_unary(m, "sigmoid", LOOM_UNARY_FN(sigmoid),
            "Element-wise logistic sigmoid, ``1 / (1 + exp(-a))``.");
  def_unary(m, "logical_not", LOOM_UNARY_FN(logical_not), "Element-wise logical not.");
  def_unary(m, "floor", LOOM_UNARY_FN(floor), "Element-wise floor.");
  def_unary(m, "ceil", LOOM_UNARY_FN(ceil), "Element-wise ceiling.");
  def_unary(m, "negative", LOOM_UNARY_FN(negative), "Element-wise negation.");
  def_unary(m, "isnan", LOOM_UNARY_FN(isnan), "Which elements are NaN.", true, false);
  def_unary(m, "isinf", LOOM_UNARY_FN(isinf), "Which elements are positive or negative infinity.",
            true, false);
  def_unary(m, "bitwise_invert", LOOM_UNARY_FN(bitwise_invert),
            "Element-wise bitwise inversion of integers (logical not for booleans).", true, false);
  def_unary(m, "sinh", LOOM_UNARY_FN(sinh), "Element-wise hyperbolic sine.");
  def_unary(m, "cosh", LOOM_UNARY_FN(cosh), "Element-wise hyperbolic cosine.");
  def_unary(m, "tan", LOOM_UNARY_FN(tan), "Element-wise tangent.");
  def_unary(m, "arcsin", LOOM_UNARY_FN(arcsin), "Element-wise inverse sine.");
  def_unary(m, "arccos", LOOM_UNARY_FN(arccos), "Element-wise inverse cosine.");
  def_unary(m, "arctan", LOOM_UNARY_FN(arctan), "Element-wise inverse tangent.");
  def_unary(m, "arcsinh", LOOM_UNARY_FN(arcsinh), "Element-wise inverse hyperbolic sine.");
  def_unary(m, "arccosh", LOOM_UNARY_FN(arccosh), "Element-wise inverse hyperbolic cosine.");
  def_unary(m, "arctanh", LOOM_UNARY_FN(arctanh), "Element-wise inverse hyperbolic tangent.");
  def_unary(m, "expm1", LOOM_UNARY_FN(expm1),
            "Element-wise ``exp(a) - 1``, accurate for small ``a``.");
  def_unary(m, "erfinv", LOOM_UNARY_FN(erfinv), "Element-wise inverse of the error function.");
  def_unary(m, "real", LOOM_UNARY_FN(real),
            "Element-wise real part (the input itself for real dtypes).");
  def_unary(m, "imag", LOOM_UNARY_FN(imag), "Element-wise imaginary part (zeros for real dtypes).");
  // MLX's short aliases are the same function objects.
  m.attr("asin") = m.attr("arcsin");
  m.attr("acos") = m.attr("arccos");
  m.attr("atan") = m.attr("arctan");
  m.attr("asinh") = m.attr("arcsinh");
  m.attr("acosh") = m.attr("arccosh");
  m.attr("atanh") = m.attr("arctanh");
  def_unary(m, "stop_gradient", LOOM_UNARY_FN(stop_gradient),
            "The input unchanged, with no gradient flowing through it.", false);

  m.def(
      "isfinite",
      [](const ScalarOrArray& a, const StreamArg& s) { return isfinite(to_array(a.obj), s); },
      nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def isfinite(a: array, stream: StreamOrDevice = None) -> array"),
      unary_doc("Which elements are neither infinite nor NaN.").c_str());

  // --- binary ----------------------------------------------------------------
  def_binary(m, "add", LOOM_BINARY_FN(add), "Element-wise addition.");
  def_binary(m, "subtract", LOOM_BINARY_FN(subtract), "Element-wise subtraction.");
  def_binary(m, "multiply", LOOM_BINARY_FN(multiply), "Element-wise multiplication.");
  def_binary(m, "divide", LOOM_BINARY_FN(divide),
             "Element-wise true division (a floating result).");
  def_binary(m, "floor_divide", LOOM_BINARY_FN(floor_divide),
             "Element-wise floor division: ``floor(a / b)``.");
  def_binary(m, "remainder", LOOM_BINARY_FN(remainder),
             "Element-wise remainder of floor division; takes the sign of ``b``.");
  def_binary(m, "power", LOOM_BINARY_FN(power), "Element-wise power, ``a ** b``.",
             "a: scalar | array, b: scalar | array, /, *");
  def_binary(m, "maximum", LOOM_BINARY_FN(maximum), "Element-wise maximum (NaN propagates).",
             "a: scalar | array, b: scalar | array, /, *");
  def_binary(m, "minimum", LOOM_BINARY_FN(minimum), "Element-wise minimum (NaN propagates).",
             "a: scalar | array, b: scalar | array, /, *");
  def_binary(m, "equal", LOOM_BINARY_FN(equal), "Element-wise ``a == b``.");
  def_binary(m, "not_equal", LOOM_BINARY_FN(not_equal), "Element-wise ``a != b``.");
  def_binary(m, "less", LOOM_BINARY_FN(less), "Element-wise ``a < b``.");
  def_binary(m, "less_equal", LOOM_BINARY_FN(less_equal), "Element-wise ``a <= b``.");
  def_binary(m, "greater", LOOM_BINARY_FN(greater), "Element-wise ``a > b``.");
  def_binary(m, "greater_equal", LOOM_BINARY_FN(greater_equal), "Element-wise ``a >= b``.");
  def_logical(m, "logical_and", LOOM_BINARY_FN(logical_and), "Element-wise logical and.",
              "a: array, b: array, /, *");
  def_logical(m, "logical_or", LOOM_BINARY_FN(logical_or), "Element-wise logical or.",
              "a: array, b: array, /, *");
  def_logical(m, "logical_xor", LOOM_BINARY_FN(logical_xor), "Element-wise logical xor.",
              "a: scalar | array, b: scalar | array, /, *");
  def_binary(m, "bitwise_and", LOOM_BINARY_FN(bitwise_and),
             "Element-wise bitwise and of integers or booleans.");
  def_binary(m, "bitwise_or", LOOM_BINARY_FN(bitwise_or),
             "Element-wise bitwise or of integers or booleans.");
  def_binary(m, "bitwise_xor", LOOM_BINARY_FN(bitwise_xor),
             "Element-wise bitwise xor of integers or booleans.");
  def_binary(m, "left_shift", LOOM_BINARY_FN(left_shift), "Element-wise left shift, ``a << b``.");
  def_binary(m, "right_shift", LOOM_BINARY_FN(right_shift),
             "Element-wise right shift, ``a >> b``.");
  def_binary(m, "arctan2", LOOM_BINARY_FN(arctan2),
             "Element-wise inverse tangent of ``a / b``, in the quadrant of ``(b, a)``.",
             "a: scalar | array, b: scalar | array, /, *");
  // MLX's aliases are the same function objects.
  m.attr("pow") = m.attr("power");
  m.attr("atan2") = m.attr("arctan2");
  m.attr("bitwise_left_shift") = m.attr("left_shift");
  m.attr("bitwise_right_shift") = m.attr("right_shift");

  m.def(
      "where",
      [](const ScalarOrArray& c, const ScalarOrArray& x, const ScalarOrArray& y,
         const StreamArg& s) {
        auto [a, b] = to_arrays(x.obj, y.obj);
        return where(to_array(c.obj), a, b, s);
      },
      nb::arg(), nb::arg(), nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def where(condition: scalar | array, x: scalar | array, y: scalar | array, /, *, "
              "stream: StreamOrDevice = None) -> array"),
      "Select from ``x`` where ``condition`` is true and from ``y`` elsewhere.\n\n"
      "All three broadcast together.\n\n"
      "Args:\n"
      "    condition (array): The condition.\n"
      "    x (array): Values where the condition holds.\n"
      "    y (array): Values where it does not.\n\n"
      "Returns:\n    array: The selection.");

  m.def(
      "isclose",
      [](const array& a, const array& b, double rtol, double atol, bool equal_nan,
         const StreamArg& s) { return isclose(a, b, rtol, atol, equal_nan, s); },
      nb::arg(), nb::arg(), nb::arg("rtol") = 1e-5, nb::arg("atol") = 1e-8, nb::kw_only(),
      nb::arg("equal_nan") = false, nb::arg("stream") = nb::none(),
      nb::sig("def isclose(a: array, b: array, /, rtol: float = 1e-05, atol: float = 1e-08, *, "
              "equal_nan: bool = False, stream: StreamOrDevice = None) -> array"),
      "Element-wise ``abs(a - b) <= atol + rtol * abs(b)``.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    b (array): Input array.\n"
      "    rtol (float): Relative tolerance. Default: ``1e-05``.\n"
      "    atol (float): Absolute tolerance. Default: ``1e-08``.\n"
      "    equal_nan (bool): Count NaNs as equal. Default: ``False``.\n\n"
      "Returns:\n    array: Boolean array.");

  m.def(
      "allclose",
      [](const array& a, const array& b, double rtol, double atol, bool equal_nan,
         const StreamArg& s) { return allclose(a, b, rtol, atol, equal_nan, s); },
      nb::arg(), nb::arg(), nb::arg("rtol") = 1e-5, nb::arg("atol") = 1e-8, nb::kw_only(),
      nb::arg("equal_nan") = false, nb::arg("stream") = nb::none(),
      nb::sig("def allclose(a: array, b: array, /, rtol: float = 1e-05, atol: float = 1e-08, *, "
              "equal_nan: bool = False, stream: StreamOrDevice = None) -> array"),
      "Whether every element satisfies isclose.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    b (array): Input array.\n"
      "    rtol (float): Relative tolerance. Default: ``1e-05``.\n"
      "    atol (float): Absolute tolerance. Default: ``1e-08``.\n"
      "    equal_nan (bool): Count NaNs as equal. Default: ``False``.\n\n"
      "Returns:\n    array: A scalar boolean array.");

  m.def(
      "array_equal",
      [](const ScalarOrArray& a, const ScalarOrArray& b, bool equal_nan, const StreamArg& s) {
        return array_equal(to_array(a.obj), to_array(b.obj), equal_nan, s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), nb::arg("equal_nan") = false,
      nb::arg("stream") = nb::none(),
      nb::sig("def array_equal(a: scalar | array, b: scalar | array, equal_nan: bool = False, "
              "stream: StreamOrDevice = None) -> array"),
      "Whether two arrays have the same shape and equal elements (their dtypes\n"
      "may differ).\n\n"
      "Args:\n"
      "    a (array): Input array or scalar.\n"
      "    b (array): Input array or scalar.\n"
      "    equal_nan (bool): Count NaNs as equal. Default: ``False``.\n\n"
      "Returns:\n    array: A scalar boolean array.");

  m.def(
      "matmul", [](const array& a, const array& b, const StreamArg& s) { return matmul(a, b, s); },
      nb::arg(), nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def matmul(a: array, b: array, /, *, stream: StreamOrDevice = None) -> array"),
      "Matrix product with NumPy's matmul semantics: a 1-D operand is treated\n"
      "as a row (first) or column (second) vector and leading dimensions\n"
      "broadcast as a batch.\n\n"
      "Args:\n    a (array): Input array.\n    b (array): Input array.\n\n"
      "Returns:\n    array: The product.");

  // --- reductions --------------------------------------------------------------
#define LOOM_REDUCTION(NAME, SUMMARY)                                            \
  def_reduction(                                                                 \
      m, #NAME,                                                                  \
      [](const array& a, const std::vector<int>& ax, bool k, StreamOrDevice s) { \
        return loom::NAME(a, ax, k, s);                                          \
      },                                                                         \
      [](const array& a, bool k, StreamOrDevice s) { return loom::NAME(a, k, s); }, SUMMARY)
  LOOM_REDUCTION(sum, "Sum over the given axes.");
  LOOM_REDUCTION(mean, "Mean over the given axes.");
  LOOM_REDUCTION(max, "Maximum over the given axes.");
  LOOM_REDUCTION(min, "Minimum over the given axes.");
  LOOM_REDUCTION(prod, "Product over the given axes.");
  LOOM_REDUCTION(all, "Logical and over the given axes.");
  LOOM_REDUCTION(any, "Logical or over the given axes.");
#undef LOOM_REDUCTION
  def_arg_reduction(
      m, "argmax",
      [](const array& a, int ax, bool k, StreamOrDevice s) { return loom::argmax(a, ax, k, s); },
      [](const array& a, bool k, StreamOrDevice s) { return loom::argmax(a, k, s); },
      "Indices of the maxima along an axis.");
  def_arg_reduction(
      m, "argmin",
      [](const array& a, int ax, bool k, StreamOrDevice s) { return loom::argmin(a, ax, k, s); },
      [](const array& a, bool k, StreamOrDevice s) { return loom::argmin(a, k, s); },
      "Indices of the minima along an axis.");

  // --- creation ----------------------------------------------------------------
  m.def(
      "full",
      [](const ShapeArg& shape, const ScalarOrArray& vals, std::optional<Dtype> dtype,
         const StreamArg& s) {
        if (dtype) return full(to_shape(shape), to_array(vals.obj, *dtype), *dtype, s);
        return full(to_shape(shape), to_array(vals.obj), s);
      },
      nb::arg("shape"), nb::arg("vals"), nb::arg("dtype").none() = nb::none(), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def full(shape: int | Sequence[int], vals: scalar | array, dtype: Dtype | None = "
              "None, *, stream: StreamOrDevice = None) -> array"),
      "An array of the given shape filled with ``vals``, which broadcasts to\n"
      "the shape.\n\n"
      "Args:\n"
      "    shape (int or list(int)): The shape.\n"
      "    vals (scalar or array): The fill value(s).\n"
      "    dtype (Dtype, optional): The dtype; that of ``vals`` when unspecified.\n\n"
      "Returns:\n    array: The filled array.");

  m.def(
      "zeros",
      [](const ShapeArg& shape, std::optional<Dtype> dtype, const StreamArg& s) {
        return zeros(to_shape(shape), dtype.value_or(float32), s);
      },
      nb::arg("shape"), nb::arg("dtype").none() = float32, nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def zeros(shape: int | Sequence[int], dtype: Dtype | None = float32, *, stream: "
              "StreamOrDevice = None) -> array"),
      "An array of zeros.\n\n"
      "Args:\n"
      "    shape (int or list(int)): The shape.\n"
      "    dtype (Dtype, optional): The dtype. Default: ``float32``.\n\n"
      "Returns:\n    array: The zeros.");

  m.def(
      "ones",
      [](const ShapeArg& shape, std::optional<Dtype> dtype, const StreamArg& s) {
        return ones(to_shape(shape), dtype.value_or(float32), s);
      },
      nb::arg("shape"), nb::arg("dtype").none() = float32, nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def ones(shape: int | Sequence[int], dtype: Dtype | None = float32, *, stream: "
              "StreamOrDevice = None) -> array"),
      "An array of ones.\n\n"
      "Args:\n"
      "    shape (int or list(int)): The shape.\n"
      "    dtype (Dtype, optional): The dtype. Default: ``float32``.\n\n"
      "Returns:\n    array: The ones.");

  m.def(
      "zeros_like",
      [](const array& a, std::optional<Dtype> dtype, const StreamArg& s) {
        return dtype ? zeros(a.shape(), *dtype, s) : zeros_like(a, s);
      },
      nb::arg(), nb::arg("dtype").none() = nb::none(), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def zeros_like(a: array, /, dtype: Dtype | None = None, *, stream: StreamOrDevice "
              "= None) -> array"),
      "Zeros with the shape of ``a`` (and its dtype unless one is given).\n\n"
      "Args:\n"
      "    a (array): The model array.\n"
      "    dtype (Dtype, optional): The dtype; that of ``a`` when unspecified.\n\n"
      "Returns:\n    array: The zeros.");

  m.def(
      "ones_like",
      [](const array& a, std::optional<Dtype> dtype, const StreamArg& s) {
        return dtype ? ones(a.shape(), *dtype, s) : ones_like(a, s);
      },
      nb::arg(), nb::arg("dtype").none() = nb::none(), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def ones_like(a: array, /, dtype: Dtype | None = None, *, stream: StreamOrDevice = "
              "None) -> array"),
      "Ones with the shape of ``a`` (and its dtype unless one is given).\n\n"
      "Args:\n"
      "    a (array): The model array.\n"
      "    dtype (Dtype, optional): The dtype; that of ``a`` when unspecified.\n\n"
      "Returns:\n    array: The ones.");

  m.def(
      "full_like",
      [](const array& a, const ScalarOrArray& vals, std::optional<Dtype> dtype,
         const StreamArg& s) {
        Dtype d = dtype.value_or(a.dtype());
        return full(a.shape(), to_array(vals.obj, d), d, s);
      },
      nb::arg(), nb::arg("vals"), nb::arg("dtype").none() = nb::none(), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def full_like(a: array, vals: scalar | array, dtype: Dtype | None = None, *, "
              "stream: StreamOrDevice = None) -> array"),
      "An array with the shape of ``a`` filled with ``vals``.\n\n"
      "Args:\n"
      "    a (array): The model array.\n"
      "    vals (scalar or array): The fill value(s).\n"
      "    dtype (Dtype, optional): The dtype; that of ``a`` when unspecified.\n\n"
      "Returns:\n    array: The filled array.");

  const char* arange_sig =
      "def arange(start : int | float, stop : None | int | float, step : None | int | float, "
      "dtype: Dtype | None = None, *, stream: StreamOrDevice = None) -> array";
  const char* arange_doc =
      "Evenly spaced values in ``[start, stop)`` with spacing ``step``.\n\n"
      "With one number it is the stop and the start is 0. The dtype is\n"
      "``float32`` when any input is a float, else ``int32`` (``int64`` when\n"
      "a value needs it).\n\n"
      "Args:\n"
      "    start (float or int, optional): First value. Default: ``0``.\n"
      "    stop (float or int): End of the range (excluded).\n"
      "    step (float or int, optional): Spacing. Default: ``1``.\n"
      "    dtype (Dtype, optional): The dtype.\n\n"
      "Returns:\n    array: The range.";
  m.def(
      "arange",
      [](nb::handle start, nb::handle stop, nb::handle step, std::optional<Dtype> dtype,
         const StreamArg& s) { return arange_impl(start, stop, step, dtype, s); },
      nb::arg("start"), nb::arg("stop"), nb::arg("step").none() = nb::none(),
      nb::arg("dtype").none() = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig(arange_sig), arange_doc);
  m.def(
      "arange",
      [](nb::handle stop, nb::handle step, std::optional<Dtype> dtype, const StreamArg& s) {
        return arange_impl(nb::handle(), stop, step, dtype, s);
      },
      nb::arg("stop"), nb::arg("step").none() = nb::none(), nb::arg("dtype").none() = nb::none(),
      nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def arange(stop : int | float, step : None | int | float = None, dtype: Dtype | "
              "None = None, *, stream: StreamOrDevice = None) -> array"));

  m.def(
      "linspace",
      [](double start, double stop, int num, bool endpoint, std::optional<Dtype> dtype,
         const StreamArg& s) {
        return linspace(start, stop, num, endpoint, dtype.value_or(float32), s);
      },
      nb::arg("start"), nb::arg("stop"), nb::arg("num").none() = 50, nb::arg("endpoint") = true,
      nb::arg("dtype").none() = float32, nb::arg("stream") = nb::none(),
      nb::sig("def linspace(start: scalar, stop: scalar, num: int | None = 50, endpoint: bool = "
              "True, dtype: Dtype | None = float32, stream: StreamOrDevice = None) -> array"),
      "``num`` evenly spaced values from ``start`` to ``stop``.\n\n"
      "Args:\n"
      "    start (scalar): First value.\n"
      "    stop (scalar): Last value (included when ``endpoint``).\n"
      "    num (int, optional): How many values. Default: ``50``.\n"
      "    endpoint (bool, optional): Include ``stop``. Default: ``True``.\n"
      "    dtype (Dtype, optional): The dtype. Default: ``float32``.\n\n"
      "Returns:\n    array: The values.");

  m.def(
      "eye",
      [](int n, std::optional<int> mm, int k, std::optional<Dtype> dtype, const StreamArg& s) {
        return eye(n, mm.value_or(n), k, dtype.value_or(float32), s);
      },
      nb::arg("n"), nb::arg("m").none() = nb::none(), nb::arg("k") = 0,
      nb::arg("dtype").none() = float32, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def eye(n: int, m: int | None = None, k: int = 0, dtype: Dtype | None = float32, "
              "*, stream: StreamOrDevice = None) -> array"),
      "An ``n`` by ``m`` matrix with ones on the ``k``-th diagonal.\n\n"
      "Args:\n"
      "    n (int): Rows.\n"
      "    m (int, optional): Columns. Default: ``n``.\n"
      "    k (int, optional): The diagonal: 0 the main one, positive above it.\n"
      "    dtype (Dtype, optional): The dtype. Default: ``float32``.\n\n"
      "Returns:\n    array: The matrix.");

  m.def(
      "identity",
      [](int n, std::optional<Dtype> dtype, const StreamArg& s) {
        return identity(n, dtype.value_or(float32), s);
      },
      nb::arg("n"), nb::arg("dtype").none() = float32, nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def identity(n: int, dtype: Dtype | None = float32, *, stream: StreamOrDevice = "
              "None) -> array"),
      "The ``n`` by ``n`` identity matrix.\n\n"
      "Args:\n"
      "    n (int): Size.\n"
      "    dtype (Dtype, optional): The dtype. Default: ``float32``.\n\n"
      "Returns:\n    array: The identity.");

  m.def(
      "astype",
      [](const array& a, const Dtype& dtype, const StreamArg& s) { return astype(a, dtype, s); },
      nb::arg(), nb::arg("dtype"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def astype(a: array, dtype: Dtype, /, *, stream: StreamOrDevice = None) -> array"),
      "Convert an array to a dtype.\n\n"
      "Args:\n    a (array): Input array.\n    dtype (Dtype): The new dtype.\n\n"
      "Returns:\n    array: The converted array.");

  m.def(
      "from_dlpack",
      [](nb::handle x, nb::handle copy) {
        if (!copy.is_none() && !nb::cast<bool>(nb::bool_(copy))) {
          throw std::invalid_argument("[convert] Cannot import a CPU array without a copy.");
        }
        return array_from_dlpack(x);
      },
      nb::arg(), nb::kw_only(), nb::arg("copy").none() = nb::none(),
      nb::sig("def from_dlpack(x: DLPackCompatible, /, *, copy: bool | None = None) -> array"),
      "An array with the data of an object implementing ``__dlpack__`` (CPU\n"
      "memory). Loom always copies: ``copy=False`` raises.\n\n"
      "Args:\n"
      "    x: The DLPack producer.\n"
      "    copy (bool, optional): ``True`` or ``None`` (both copy).\n\n"
      "Returns:\n    array: The new array.");

  // --- shapes ------------------------------------------------------------------
  m.def(
      "reshape",
      [](const array& a, const ShapeSeqArg& shape, const StreamArg& s) {
        return reshape(a, to_shape(shape), s);
      },
      nb::arg(), nb::arg("shape"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def reshape(a: array, /, shape: Sequence[int], *, stream: StreamOrDevice = None) "
              "-> array"),
      "The same elements in a new shape; one dimension may be ``-1`` and is\n"
      "then inferred.\n\n"
      "Args:\n    a (array): Input array.\n    shape (tuple(int)): The new shape.\n\n"
      "Returns:\n    array: The reshaped array.");

  m.def(
      "flatten",
      [](const array& a, int start_axis, int end_axis, const StreamArg& s) {
        return flatten(a, start_axis, end_axis, s);
      },
      nb::arg(), nb::arg("start_axis") = 0, nb::arg("end_axis") = -1, nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def flatten(a: array, /, start_axis: int = 0, end_axis: int = -1, *, stream: "
              "StreamOrDevice = None) -> array"),
      "Merge the axes from ``start_axis`` to ``end_axis`` (inclusive) into one.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    start_axis (int, optional): First axis to merge. Default: ``0``.\n"
      "    end_axis (int, optional): Last axis to merge. Default: ``-1``.\n\n"
      "Returns:\n    array: The flattened array.");

  const char* transpose_doc =
      "Permute the axes of an array.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axes (list(int), optional): The new order of the axes; reversed when\n"
      "      unspecified.\n\n"
      "Returns:\n    array: The transposed array.";
  auto transpose_fn = [](const array& a, const std::optional<std::vector<int>>& axes,
                         const StreamArg& s) {
    return axes ? transpose(a, *axes, s) : transpose(a, s);
  };
  m.def("transpose", transpose_fn, nb::arg(), nb::arg("axes").none() = nb::none(), nb::kw_only(),
        nb::arg("stream") = nb::none(),
        nb::sig("def transpose(a: array, /, axes: Sequence[int] | None = None, *, stream: "
                "StreamOrDevice = None) -> array"),
        transpose_doc);
  m.def("permute_dims", transpose_fn, nb::arg(), nb::arg("axes").none() = nb::none(), nb::kw_only(),
        nb::arg("stream") = nb::none(),
        nb::sig("def permute_dims(a: array, /, axes: Sequence[int] | None = None, *, stream: "
                "StreamOrDevice = None) -> array"),
        transpose_doc);

  m.def(
      "swapaxes",
      [](const array& a, int axis1, int axis2, const StreamArg& s) {
        return swapaxes(a, axis1, axis2, s);
      },
      nb::arg(), nb::arg("axis1"), nb::arg("axis2"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def swapaxes(a: array, /, axis1 : int, axis2: int, *, stream: StreamOrDevice = "
              "None) -> array"),
      "Swap two axes.\n\n"
      "Args:\n    a (array): Input array.\n    axis1 (int): An axis.\n    axis2 (int): An axis.\n\n"
      "Returns:\n    array: The array with the axes swapped.");

  m.def(
      "moveaxis",
      [](const array& a, int source, int destination, const StreamArg& s) {
        return moveaxis(a, source, destination, s);
      },
      nb::arg(), nb::arg("source"), nb::arg("destination"), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def moveaxis(a: array, /, source: int, destination: int, *, stream: "
              "StreamOrDevice = None) -> array"),
      "Move one axis to a new position.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    source (int): The axis to move.\n"
      "    destination (int): Where it goes.\n\n"
      "Returns:\n    array: The array with the axis moved.");

  m.def(
      "broadcast_to",
      [](const ScalarOrArray& a, const ShapeSeqArg& shape, const StreamArg& s) {
        return broadcast_to(to_array(a.obj), to_shape(shape), s);
      },
      nb::arg(), nb::arg("shape"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def broadcast_to(a: scalar | array, /, shape: Sequence[int], *, stream: "
              "StreamOrDevice = None) -> array"),
      "Broadcast an array to a shape (NumPy rules).\n\n"
      "Args:\n    a (array): Input array.\n    shape (list(int)): The shape.\n\n"
      "Returns:\n    array: The broadcast array (a view).");

  m.def(
      "broadcast_arrays",
      [](nb::args args, const StreamArg& s) {
        std::vector<array> in;
        for (auto h : args) in.push_back(as_array(h));
        return broadcast_arrays(in, s);
      },
      nb::arg("arrays"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def broadcast_arrays(*arrays: array, stream: StreamOrDevice = None) -> "
              "tuple[array, ...]"),
      "Broadcast arrays against each other.\n\n"
      "Args:\n    *arrays (array): The arrays.\n\n"
      "Returns:\n    list(array): The broadcast arrays.");

  m.def(
      "broadcast_shapes",
      [](nb::args args) {
        if (args.size() == 0) {
          throw std::invalid_argument("[broadcast_shapes] Must provide at least one shape.");
        }
        std::vector<Shape> shapes;
        for (auto h : args) {
          auto v = nb::cast<std::vector<int>>(h);
          shapes.emplace_back(v.begin(), v.end());
        }
        Shape out = broadcast_shapes(shapes);
        nb::list l;
        for (auto d : out) l.append(d);
        return nb::tuple(l);
      },
      nb::sig("def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int]"),
      "The shape that the given shapes broadcast to (NumPy rules).\n\n"
      "Args:\n    *shapes (list(int)): The shapes.\n\n"
      "Returns:\n    tuple(int): The broadcast shape.");

  m.def(
      "expand_dims",
      [](const array& a, const IntOrInts& axis, const StreamArg& s) {
        return expand_dims(a, to_axes(axis), s);
      },
      nb::arg(), nb::arg("axis"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def expand_dims(a: array, /, axis: int | Sequence[int], *, stream: "
              "StreamOrDevice = None) -> array"),
      "Insert size-one axes at the given positions of the result.\n\n"
      "Args:\n    a (array): Input array.\n    axis (int or list(int)): The new axes.\n\n"
      "Returns:\n    array: The expanded array.");

  m.def(
      "squeeze",
      [](const array& a, const Axis& axis, const StreamArg& s) {
        return axis ? squeeze(a, to_axes(*axis), s) : squeeze(a, s);
      },
      nb::arg(), nb::arg("axis") = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def squeeze(a: array, /, axis: None | int | Sequence[int] = None, *, stream: "
              "StreamOrDevice = None) -> array"),
      "Remove size-one axes.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int or list(int), optional): The axes to remove; every size-one\n"
      "      axis when unspecified.\n\n"
      "Returns:\n    array: The squeezed array.");

  m.def(
      "slice",
      [](const array& a, array start_indices, const std::vector<int>& axes,
         const std::vector<int>& slice_size, const StreamArg& s) {
        return slice(a, start_indices, axes, Shape(slice_size.begin(), slice_size.end()), s);
      },
      nb::arg(), nb::arg("start_indices"), nb::arg("axes"), nb::arg("slice_size"), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def slice(a: array, start_indices: array, axes: Sequence[int], slice_size: "
              "Sequence[int], *, stream: StreamOrDevice = None) -> array"),
      "A slice of shape ``slice_size`` starting at ``start_indices`` along\n"
      "``axes`` (other axes start at 0). The start indices are read when the\n"
      "graph runs (so the op works under vmap and compile); negative starts\n"
      "count from the end and starts are clamped so the slice fits.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    start_indices (array): Start of the slice on each axis in ``axes``.\n"
      "    axes (list(int)): The sliced axes.\n"
      "    slice_size (list(int)): The shape of the slice (one size per axis of ``a``).\n\n"
      "Returns:\n    array: The slice.");

  m.def(
      "slice_update",
      [](const array& a, const array& update, array start_indices, const std::vector<int>& axes,
         const StreamArg& s) { return slice_update(a, update, start_indices, axes, s); },
      nb::arg(), nb::arg("update"), nb::arg("start_indices"), nb::arg("axes"), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def slice_update(a: array, update: array, start_indices: array, axes: "
              "Sequence[int], *, stream: StreamOrDevice = None) -> array"),
      "A copy of ``a`` with ``update`` written at ``start_indices`` along\n"
      "``axes``.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    update (array): The values to write (same number of dimensions).\n"
      "    start_indices (array): Where the update starts on each axis in ``axes``.\n"
      "    axes (list(int)): The axes the start indices refer to.\n\n"
      "Returns:\n    array: The updated array.");

  const char* concat_doc =
      "Join arrays along an axis.\n\n"
      "Args:\n"
      "    arrays (list(array)): The arrays.\n"
      "    axis (int, optional): The axis; ``None`` flattens the inputs first.\n"
      "      Default: ``0``.\n\n"
      "Returns:\n    array: The joined array.";
  auto concat_fn = [](const std::vector<array>& arrays, std::optional<int> axis,
                      const StreamArg& s) {
    return axis ? concatenate(arrays, *axis, s) : concatenate(arrays, StreamOrDevice(s));
  };
  m.def("concatenate", concat_fn, nb::arg(), nb::arg("axis").none() = 0, nb::kw_only(),
        nb::arg("stream") = nb::none(),
        nb::sig("def concatenate(arrays: list[array], axis: int | None = 0, *, stream: "
                "StreamOrDevice = None) -> array"),
        concat_doc);
  m.def("concat", concat_fn, nb::arg(), nb::arg("axis").none() = 0, nb::kw_only(),
        nb::arg("stream") = nb::none(),
        nb::sig("def concat(arrays: list[array], axis: int | None = 0, *, stream: StreamOrDevice "
                "= None) -> array"),
        concat_doc);

  m.def(
      "stack",
      [](const std::vector<array>& arrays, int axis, const StreamArg& s) {
        return stack(arrays, axis, s);
      },
      nb::arg(), nb::arg("axis") = 0, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def stack(arrays: list[array], axis: int | None = 0, *, stream: StreamOrDevice = "
              "None) -> array"),
      "Join arrays along a new axis.\n\n"
      "Args:\n"
      "    arrays (list(array)): The arrays, all of one shape.\n"
      "    axis (int, optional): Position of the new axis. Default: ``0``.\n\n"
      "Returns:\n    array: The stacked array.");

  m.def(
      "split",
      [](const array& a, const IntOrInts& indices_or_sections, int axis, const StreamArg& s) {
        if (auto* n = std::get_if<int>(&indices_or_sections)) return split(a, *n, axis, s);
        return split(a, to_shape(indices_or_sections), axis, s);
      },
      nb::arg(), nb::arg("indices_or_sections"), nb::arg("axis") = 0, nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def split(a: array, /, indices_or_sections: int | Sequence[int], axis: int = 0, "
              "*, stream: StreamOrDevice = None) -> array"),
      "Split an array along an axis.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    indices_or_sections (int or list(int)): A number of equal sections,\n"
      "      or the indices where the pieces start.\n"
      "    axis (int, optional): The axis. Default: ``0``.\n\n"
      "Returns:\n    list(array): The pieces.");
}

} // namespace loom::bindings
