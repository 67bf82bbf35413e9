// MLX functions that Loom builds from its core ops (no primitive of their
// own): they are lazy and differentiable through the ops they use.
#include <cmath>

#include "loom/ops/utils.h"
#include "utils.h"

namespace loom::bindings {

namespace {

using Axis = std::optional<IntOrInts>;

std::vector<int> all_axes(const array& a) {
  std::vector<int> axes(a.ndim());
  for (int i = 0; i < a.ndim(); ++i) axes[i] = i;
  return axes;
}

std::vector<int> axes_or_all(const array& a, const Axis& axis) {
  return axis ? to_axes(*axis) : all_axes(a);
}

} // namespace

array logsumexp_op(const array& a, const std::vector<int>& axes, bool keepdims,
                   StreamOrDevice s) {
  // Shifting by the (gradient-free) maximum keeps exp finite; an all -inf
  // slice would give nan - nan, so its shift is zero.
  array m = stop_gradient(max(a, axes, true, s), s);
  m = where(isinf(m, s), zeros_like(m, s), m, s);
  array out = add(log(sum(exp(subtract(a, m, s), s), axes, true, s), s), m, s);
  return keepdims ? out : squeeze(out, normalize_axes(axes, a.ndim(), "logsumexp"), s);
}

namespace {

array softmax_impl(const array& a, const std::vector<int>& axes, bool precise,
                   StreamOrDevice s) {
  bool low = a.dtype() == float16 || a.dtype() == bfloat16;
  array x = precise && low ? astype(a, float32, s) : a;
  array m = stop_gradient(max(x, axes, true, s), s);
  array e = exp(subtract(x, m, s), s);
  array out = divide(e, sum(e, axes, true, s), s);
  return precise && low ? astype(out, a.dtype(), s) : out;
}

} // namespace

array var_op(const array& a, const std::vector<int>& axes, bool keepdims, int ddof,
             StreamOrDevice s) {
  Dtype d = is_inexact(a.dtype()) ? a.dtype() : float32;
  array x = astype(a, d, s);
  array centered = subtract(x, mean(x, axes, true, s), s);
  array sq = multiply(centered, centered, s);
  double n = 1;
  for (int ax : normalize_axes(axes, a.ndim(), "var")) n *= a.shape(ax);
  array total = sum(sq, axes, keepdims, s);
  return divide(total, array(std::max(n - ddof, 0.0), d), s);
}

namespace {

// Ones on and below the k-th diagonal of an n x m matrix.
array tri_mask(int n, int m, int k, StreamOrDevice s) {
  array rows = reshape(arange(0, n, 1, int32, s), {n, 1}, s);
  array cols = reshape(arange(0, m, 1, int32, s), {1, m}, s);
  return less_equal(cols, add(rows, array(k), s), s);
}

array tril_impl(const array& x, int k, bool upper, StreamOrDevice s) {
  if (x.ndim() < 2) {
    throw std::invalid_argument(std::string("[") + (upper ? "triu" : "tril") +
                                "] array must be at least 2-D");
  }
  int n = x.shape(-2), m = x.shape(-1);
  array mask = upper ? logical_not(tri_mask(n, m, k - 1, s), s) : tri_mask(n, m, k, s);
  return where(mask, x, zeros_like(x, s), s);
}

array atleast(const array& a, int n, StreamOrDevice s) {
  if (a.ndim() >= n) return a;
  if (n == 1) return reshape(a, {1}, s);
  if (n == 2) return a.ndim() == 0 ? reshape(a, {1, 1}, s) : expand_dims(a, 0, s);
  // 3-D: (1,1,1), (1,N,1), (M,N,1)
  if (a.ndim() == 0) return reshape(a, {1, 1, 1}, s);
  if (a.ndim() == 1) return reshape(a, {1, a.shape(0), 1}, s);
  return expand_dims(a, 2, s);
}

array tensordot_axes(const array& a, const array& b, std::vector<int> axa, std::vector<int> axb,
                     StreamOrDevice s) {
  if (axa.size() != axb.size()) {
    throw std::invalid_argument("[tensordot] Both axis lists must have the same length.");
  }
  axa = normalize_axes(axa, a.ndim(), "tensordot");
  axb = normalize_axes(axb, b.ndim(), "tensordot");
  std::vector<bool> in_a(a.ndim(), false), in_b(b.ndim(), false);
  int64_t contracted = 1;
  for (size_t i = 0; i < axa.size(); ++i) {
    if (a.shape(axa[i]) != b.shape(axb[i])) {
      throw std::invalid_argument("[tensordot] a and b have different sizes on the contracted "
                                  "axes.");
    }
    in_a[axa[i]] = in_b[axb[i]] = true;
    contracted *= a.shape(axa[i]);
  }
  std::vector<int> perm_a, perm_b;
  Shape out_shape;
  int64_t free_a = 1, free_b = 1;
  for (int i = 0; i < a.ndim(); ++i) {
    if (!in_a[i]) {
      perm_a.push_back(i);
      out_shape.push_back(a.shape(i));
      free_a *= a.shape(i);
    }
  }
  for (int i : axa) perm_a.push_back(i);
  for (int i : axb) perm_b.push_back(i);
  for (int i = 0; i < b.ndim(); ++i) {
    if (!in_b[i]) {
      perm_b.push_back(i);
      out_shape.push_back(b.shape(i));
      free_b *= b.shape(i);
    }
  }
  array a2 = reshape(transpose(a, perm_a, s),
                     {static_cast<int32_t>(free_a), static_cast<int32_t>(contracted)}, s);
  array b2 = reshape(transpose(b, perm_b, s),
                     {static_cast<int32_t>(contracted), static_cast<int32_t>(free_b)}, s);
  return reshape(matmul(a2, b2, s), out_shape, s);
}

array roll_axis(const array& a, int shift, int axis, StreamOrDevice s) {
  int n = a.shape(axis);
  if (n == 0) return a;
  int k = ((shift % n) + n) % n;
  if (k == 0) return a;
  Shape start(a.ndim(), 0), stop = a.shape(), step(a.ndim(), 1);
  Shape start2 = start, stop2 = stop;
  start[axis] = n - k;  // the tail moves to the front
  stop2[axis] = n - k;
  return concatenate({slice(a, start, stop, step, s), slice(a, start2, stop2, step, s)}, axis,
                     s);
}

const char* kStreamSig = "stream: StreamOrDevice = None";

} // namespace

void init_composites(nb::module_& m) {
  m.def(
      "positive", [](const array& a, const StreamArg&) { return a; }, nb::arg(), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def positive(a: array, /, *, stream: StreamOrDevice = None) -> array"),
      "Element-wise unary plus: the input unchanged.");

  m.def(
      "isposinf",
      [](const array& a, const StreamArg& s) {
        return logical_and(isinf(a, s), greater(a, zeros_like(a, s), s), s);
      },
      nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def isposinf(a: array, stream: StreamOrDevice = None) -> array"),
      "Which elements are positive infinity.");
  m.def(
      "isneginf",
      [](const array& a, const StreamArg& s) {
        return logical_and(isinf(a, s), less(a, zeros_like(a, s), s), s);
      },
      nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def isneginf(a: array, stream: StreamOrDevice = None) -> array"),
      "Which elements are negative infinity.");

  m.def(
      "clip",
      [](const array& a, const std::optional<ScalarOrArray>& lo,
         const std::optional<ScalarOrArray>& hi, const StreamArg& s) {
        if (!lo && !hi) {
          throw std::invalid_argument("At most one of a_min and a_max may be None");
        }
        array out = a;
        if (lo) out = maximum(out, to_array(lo->obj, a.dtype()), s);
        if (hi) out = minimum(out, to_array(hi->obj, a.dtype()), s);
        return out;
      },
      nb::arg(), nb::arg("a_min").none(), nb::arg("a_max").none(), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def clip(a: array, /, a_min: scalar | array | None, a_max: scalar | array | None, "
              "*, stream: StreamOrDevice = None) -> array"),
      "Limit the values of an array to ``[a_min, a_max]``.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    a_min (scalar or array or None): Lower bound (None for none).\n"
      "    a_max (scalar or array or None): Upper bound (None for none).\n\n"
      "Returns:\n    array: The clipped array.");

  m.def(
      "logsumexp",
      [](const array& a, const Axis& axis, bool keepdims, const StreamArg& s) {
        return logsumexp_op(a, axes_or_all(a, axis), keepdims, s);
      },
      nb::arg(), nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def logsumexp(a: array, /, axis: None | int | Sequence[int] = None, keepdims: "
              "bool = False, *, stream: StreamOrDevice = None) -> array"),
      "``log(sum(exp(a), axis))`` computed without overflow.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int or list(int), optional): Axes to reduce; all when unspecified.\n"
      "    keepdims (bool, optional): Keep the reduced axes. Default: ``False``.\n\n"
      "Returns:\n    array: The reduced array.");

  m.def(
      "softmax",
      [](const array& a, const Axis& axis, bool precise, const StreamArg& s) {
        return softmax_impl(a, axes_or_all(a, axis), precise, s);
      },
      nb::arg(), nb::arg("axis") = nb::none(), nb::kw_only(), nb::arg("precise") = false,
      nb::arg("stream") = nb::none(),
      nb::sig("def softmax(a: array, /, axis: None | int | Sequence[int] = None, *, precise: "
              "bool = False, stream: StreamOrDevice = None) -> array"),
      "``exp(a) / sum(exp(a), axis, keepdims=True)`` computed without overflow.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int or list(int), optional): Axes to normalise over; all when\n"
      "      unspecified.\n"
      "    precise (bool, optional): Compute half-precision inputs in float32.\n\n"
      "Returns:\n    array: The softmax.");

  auto def_var = [&](const char* name, bool root) {
    std::string sig = std::string("def ") + name +
                      "(a: array, /, axis: None | int | Sequence[int] = None, keepdims: bool = "
                      "False, ddof: int = 0, *, stream: StreamOrDevice = None) -> array";
    std::string doc = std::string(root ? "Standard deviation" : "Variance") +
                      " over the given axes.\n\n"
                      "Args:\n"
                      "    a (array): Input array.\n"
                      "    axis (int or list(int), optional): Axes to reduce; all when\n"
                      "      unspecified.\n"
                      "    keepdims (bool, optional): Keep the reduced axes. Default: ``False``.\n"
                      "    ddof (int, optional): The divisor is ``N - ddof``. Default: ``0``.\n\n"
                      "Returns:\n    array: The reduced array.";
    m.def(
        name,
        [root](const array& a, const Axis& axis, bool keepdims, int ddof, const StreamArg& s) {
          array v = var_op(a, axes_or_all(a, axis), keepdims, ddof, s);
          return root ? sqrt(v, s) : v;
        },
        nb::arg(), nb::arg("axis") = nb::none(), nb::arg("keepdims") = false,
        nb::arg("ddof") = 0, nb::kw_only(), nb::arg("stream") = nb::none(),
        nb::sig(sig.c_str()), doc.c_str());
  };
  def_var("var", false);
  def_var("std", true);

  m.def(
      "tri",
      [](int n, std::optional<int> mm, int k, std::optional<Dtype> dtype, const StreamArg& s) {
        return astype(tri_mask(n, mm.value_or(n), k, s), dtype.value_or(float32), s);
      },
      nb::arg("n"), nb::arg("m").none() = nb::none(), nb::arg("k") = 0,
      nb::arg("dtype").none() = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def tri(n: int, m: int | None = None, k: int = 0, dtype: Dtype | None = None, *, "
              "stream: StreamOrDevice = None) -> array"),
      "An ``n`` by ``m`` matrix with ones at and below the ``k``-th diagonal.");
  m.def(
      "tril", [](const array& x, int k, const StreamArg& s) { return tril_impl(x, k, false, s); },
      nb::arg("x"), nb::arg("k") = 0, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def tril(x: array, k: int = 0, *, stream: StreamOrDevice = None) -> array"),
      "The lower triangle (at and below the ``k``-th diagonal) of the last two\n"
      "axes; zeros elsewhere.");
  m.def(
      "triu", [](const array& x, int k, const StreamArg& s) { return tril_impl(x, k, true, s); },
      nb::arg("x"), nb::arg("k") = 0, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def triu(x: array, k: int = 0, *, stream: StreamOrDevice = None) -> array"),
      "The upper triangle (at and above the ``k``-th diagonal) of the last two\n"
      "axes; zeros elsewhere.");

  for (int n = 1; n <= 3; ++n) {
    std::string name = "atleast_" + std::to_string(n) + "d";
    std::string sig = "def " + name + "(*arys: array, " + kStreamSig +
                      ") -> array | list[array]";
    std::string doc = "The inputs with at least " + std::to_string(n) +
                      " dimensions (one array for one input, else a list).";
    m.def(
        name.c_str(),
        [n](nb::args arys, const StreamArg& s) -> nb::object {
          std::vector<array> out;
          for (auto h : arys) out.push_back(atleast(as_array(h), n, s));
          if (out.size() == 1) return nb::cast(out[0]);
          return nb::cast(out);
        },
        nb::arg("arys"), nb::kw_only(), nb::arg("stream") = nb::none(), nb::sig(sig.c_str()),
        doc.c_str());
  }

  m.def(
      "divmod",
      [](const ScalarOrArray& a, const ScalarOrArray& b, const StreamArg& s) {
        auto [x, y] = to_arrays(a.obj, b.obj);
        return std::vector<array>{floor_divide(x, y, s), remainder(x, y, s)};
      },
      nb::arg(), nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def divmod(a: scalar | array, b: scalar | array, stream: StreamOrDevice = None) "
              "-> array"),
      "Element-wise ``[a // b, a % b]``.");

  m.def(
      "logaddexp",
      [](const ScalarOrArray& a, const ScalarOrArray& b, const StreamArg& s) {
        auto [x, y] = to_arrays(a.obj, b.obj);
        Dtype d = promote_types(x.dtype(), y.dtype());
        if (!is_inexact(d)) d = float32;
        x = astype(x, d, s);
        y = astype(y, d, s);
        array hi = maximum(x, y, s);
        array lo = minimum(x, y, s);
        // hi + log(1 + exp(lo - hi)), with -inf inputs giving the other one.
        array diff = where(isinf(hi, s), zeros_like(hi, s), subtract(lo, hi, s), s);
        return add(hi, log(add(array(1.0, d), exp(diff, s), s), s), s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def logaddexp(a: scalar | array, b: scalar | array, /, *, stream: StreamOrDevice "
              "= None) -> array"),
      "Element-wise ``log(exp(a) + exp(b))`` computed without overflow.");

  auto def_angle = [&](const char* name, double factor, const char* doc) {
    std::string sig = std::string("def ") + name +
                      "(a: scalar | array, /, *, stream: StreamOrDevice = None) -> array";
    m.def(
        name,
        [factor](const ScalarOrArray& a, const StreamArg& s) {
          array x = to_array(a.obj);
          Dtype d = is_inexact(x.dtype()) ? x.dtype() : float32;
          return multiply(astype(x, d, s), array(factor, d), s);
        },
        nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(), nb::sig(sig.c_str()), doc);
  };
  def_angle("degrees", 180.0 / M_PI, "Convert angles from radians to degrees.");
  def_angle("radians", M_PI / 180.0, "Convert angles from degrees to radians.");

  m.def(
      "outer",
      [](const array& a, const array& b, const StreamArg& s) {
        return multiply(reshape(a, {-1, 1}, s), reshape(b, {1, -1}, s), s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def outer(a: array, b: array, /, *, stream: StreamOrDevice = None) -> array"),
      "The outer product of two arrays (flattened first).");
  m.def(
      "inner",
      [](const array& a, const array& b, const StreamArg& s) {
        if (a.ndim() == 0 || b.ndim() == 0) return multiply(a, b, s);
        if (a.shape(-1) != b.shape(-1)) {
          throw std::invalid_argument("[inner] a and b must have the same last dimension.");
        }
        return tensordot_axes(a, b, {-1}, {-1}, s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def inner(a: array, b: array, /, *, stream: StreamOrDevice = None) -> array"),
      "Sum-product over the last axes of two arrays.");
  m.def(
      "tensordot",
      [](const array& a, const array& b, nb::handle axes, const StreamArg& s) {
        if (PyLong_Check(axes.ptr())) {
          int n = nb::cast<int>(axes);
          if (n < 0 || n > a.ndim() || n > b.ndim()) {
            throw std::invalid_argument("[tensordot] axes must be between 0 and the number of "
                                        "dimensions of both inputs.");
          }
          std::vector<int> axa, axb;
          for (int i = 0; i < n; ++i) {
            axa.push_back(a.ndim() - n + i);
            axb.push_back(i);
          }
          return tensordot_axes(a, b, axa, axb, s);
        }
        auto pair = nb::cast<std::vector<nb::object>>(axes);
        if (pair.size() != 2) {
          throw std::invalid_argument("[tensordot] axes must be an int or two lists of axes.");
        }
        auto read = [](nb::handle h) {
          if (PyLong_Check(h.ptr())) return std::vector<int>{nb::cast<int>(h)};
          return nb::cast<std::vector<int>>(h);
        };
        return tensordot_axes(a, b, read(pair[0]), read(pair[1]), s);
      },
      nb::arg(), nb::arg(), nb::arg("axes") = 2, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def tensordot(a: array, b: array, /, axes: int | list[Sequence[int]] = 2, *, "
              "stream: StreamOrDevice = None) -> array"),
      "Sum-product over the given axes: the last ``axes`` of ``a`` with the\n"
      "first ``axes`` of ``b``, or two explicit lists of axes.");

  m.def(
      "addmm",
      [](const array& c, const array& a, const array& b, float alpha, float beta,
         const StreamArg& s) {
        array ab = matmul(a, b, s);
        Dtype d = ab.dtype();
        if (alpha != 1.0f) ab = multiply(ab, array(alpha, d), s);
        array cc = beta != 1.0f ? multiply(c, array(beta, d), s) : c;
        return add(ab, cc, s);
      },
      nb::arg(), nb::arg(), nb::arg(), nb::arg("alpha") = 1.0f, nb::arg("beta") = 1.0f,
      nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def addmm(c: array, a: array, b: array, /, alpha: float = 1.0, beta: float = 1.0, "
              " *, stream: StreamOrDevice = None) -> array"),
      "``alpha * (a @ b) + beta * c``.");

  m.def(
      "empty",
      [](const IntOrInts& shape, std::optional<Dtype> dtype, const StreamArg& s) {
        return zeros(to_shape(shape), dtype.value_or(float32), s);
      },
      nb::arg("shape"), nb::arg("dtype").none() = float32, nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def empty(shape: int | Sequence[int], dtype: Dtype | None = float32, *, stream: "
              "StreamOrDevice = None) -> array"),
      "An array of the given shape (filled with zeros, like MLX).");
  m.def(
      "empty_like",
      [](const array& a, std::optional<Dtype> dtype, const StreamArg& s) {
        return zeros(a.shape(), dtype.value_or(a.dtype()), s);
      },
      nb::arg(), nb::arg("dtype").none() = nb::none(), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def empty_like(a: array, /, dtype: Dtype | None = None, *, stream: StreamOrDevice "
              "= None) -> array"),
      "An array shaped like ``a`` (filled with zeros, like MLX).");

  m.def(
      "contiguous",
      [](const array& a, bool, const StreamArg& s) { return copy(a, s); }, nb::arg(),
      nb::arg("allow_col_major") = false, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def contiguous(a: array, /, allow_col_major: bool = False, *, stream: "
              "StreamOrDevice = None) -> array"),
      "A row-major copy of the array.");

  m.def(
      "unstack",
      [](const array& x, int axis, const StreamArg& s) {
        int ax = normalize_axis(axis, x.ndim(), "unstack");
        std::vector<array> parts = split(x, x.shape(ax), ax, s);
        for (auto& p : parts) p = squeeze(p, std::vector<int>{ax}, s);
        return nb::tuple(nb::cast(parts));
      },
      nb::arg(), nb::kw_only(), nb::arg("axis") = 0, nb::arg("stream") = nb::none(),
      nb::sig("def unstack(x: array, /, *, axis: int = 0, stream: StreamOrDevice = None) -> "
              "tuple[array, ...]"),
      "Split an array into the slices along an axis, removing that axis.");

  m.def(
      "unflatten",
      [](const array& a, int axis, const std::vector<int>& shape, const StreamArg& s) {
        int ax = normalize_axis(axis, a.ndim(), "unflatten");
        Shape out(a.shape().begin(), a.shape().begin() + ax);
        out.insert(out.end(), shape.begin(), shape.end());
        out.insert(out.end(), a.shape().begin() + ax + 1, a.shape().end());
        return reshape(a, out, s);
      },
      nb::arg(), nb::arg("axis"), nb::arg("shape"), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def unflatten(a: array, /, axis: int, shape: Sequence[int], *, stream: "
              "StreamOrDevice = None) -> array"),
      "Split one axis into several with the given shape (one may be ``-1``).");

  m.def(
      "trunc",
      [](const array& a, const StreamArg& s) {
        if (!is_inexact(a.dtype())) return a;
        return where(less(a, zeros_like(a, s), s), ceil(a, s), floor(a, s), s);
      },
      nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def trunc(a: array, /, *, stream: StreamOrDevice = None) -> array"),
      "Element-wise rounding toward zero.");

  m.def(
      "nan_to_num",
      [](const ScalarOrArray& v, float nan, std::optional<float> posinf,
         std::optional<float> neginf, const StreamArg& s) {
        array a = to_array(v.obj);
        if (!is_inexact(a.dtype())) return a;
        Dtype d = a.dtype();
        double big = d == float16 ? 65504.0 : d == float64 ? 1.7976931348623157e308 : 3.4028234663852886e38;
        if (d == bfloat16) big = 3.3895313892515355e38;
        array out = where(isnan(a, s), array(nan, d), a, s);
        array zero = zeros_like(a, s);
        out = where(logical_and(isinf(a, s), greater(a, zero, s), s),
                    array(posinf ? double(*posinf) : big, d), out, s);
        out = where(logical_and(isinf(a, s), less(a, zero, s), s),
                    array(neginf ? double(*neginf) : -big, d), out, s);
        return out;
      },
      nb::arg(), nb::arg("nan") = 0.0f, nb::arg("posinf").none() = nb::none(),
      nb::arg("neginf").none() = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def nan_to_num(a: scalar | array, nan: float = 0, posinf: float | None = None, "
              "neginf: float | None = None, *, stream: StreamOrDevice = None) -> array"),
      "Replace NaN with ``nan`` and infinities with ``posinf``/``neginf``\n"
      "(the dtype's largest finite values by default).");

  m.def(
      "tile",
      [](const array& a, const IntOrInts& reps_arg, const StreamArg& s) {
        std::vector<int> reps = to_axes(reps_arg);
        int nd = std::max<int>(a.ndim(), static_cast<int>(reps.size()));
        reps.insert(reps.begin(), nd - reps.size(), 1);
        Shape in(nd - a.ndim(), 1);
        in.insert(in.end(), a.shape().begin(), a.shape().end());
        // View as (1, d0, 1, d1, ...), broadcast to (r0, d0, r1, d1, ...), merge.
        Shape inter, target, out;
        for (int i = 0; i < nd; ++i) {
          inter.push_back(1);
          inter.push_back(in[i]);
          target.push_back(reps[i]);
          target.push_back(in[i]);
          out.push_back(reps[i] * in[i]);
        }
        return reshape(broadcast_to(reshape(a, inter, s), target, s), out, s);
      },
      nb::arg(), nb::arg("reps"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def tile(a: array, reps: int | Sequence[int], /, *, stream: StreamOrDevice = None) "
              "-> array"),
      "Repeat the whole array ``reps`` times along each axis.");

  m.def(
      "repeat",
      [](const array& a, int repeats, std::optional<int> axis, const StreamArg& s) {
        if (repeats < 0) throw std::invalid_argument("[repeat] Number of repeats cannot be negative");
        array x = axis ? a : reshape(a, {-1}, s);
        int ax = axis ? normalize_axis(*axis, x.ndim(), "repeat") : 0;
        array e = expand_dims(x, ax + 1, s);
        Shape target = e.shape();
        target[ax + 1] = repeats;
        Shape out = x.shape();
        out[ax] *= repeats;
        return reshape(broadcast_to(e, target, s), out, s);
      },
      nb::arg("array"), nb::arg("repeats"), nb::arg("axis").none() = nb::none(), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def repeat(array: array, repeats: int, axis: int | None = None, *, stream: "
              "StreamOrDevice = None) -> array"),
      "Repeat each element ``repeats`` times along an axis (of the flattened\n"
      "array when no axis is given).");

  m.def(
      "roll",
      [](const array& a, const IntOrInts& shift_arg, const Axis& axis_arg, const StreamArg& s) {
        std::vector<int> shifts = to_axes(shift_arg);
        if (!axis_arg) {
          int total = 0;
          for (int v : shifts) total += v;
          return reshape(roll_axis(reshape(a, {-1}, s), total, 0, s), a.shape(), s);
        }
        std::vector<int> axes = to_axes(*axis_arg);
        if (shifts.size() == 1 && axes.size() > 1) shifts.assign(axes.size(), shifts[0]);
        if (shifts.size() != axes.size()) {
          throw std::invalid_argument("[roll] shift and axis must have the same length.");
        }
        array out = a;
        for (size_t i = 0; i < axes.size(); ++i) {
          out = roll_axis(out, shifts[i], normalize_axis(axes[i], a.ndim(), "roll"), s);
        }
        return out;
      },
      nb::arg(), nb::arg(), nb::arg().none() = nb::none(), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def roll(a: array, shift: int | tuple[int], axis: None | int | tuple[int] = None, "
              "/, *, stream: StreamOrDevice = None) -> array"),
      "Shift elements along axes, wrapping around (the flattened array when\n"
      "no axis is given).");

  m.def(
      "meshgrid",
      [](nb::args arrays, bool sparse, const std::string& indexing, const StreamArg& s) {
        if (indexing != "xy" && indexing != "ij") {
          throw std::invalid_argument("[meshgrid] Invalid indexing value. Valid values are 'xy' "
                                      "and 'ij'.");
        }
        std::vector<array> in;
        for (auto h : arrays) in.push_back(reshape(as_array(h), {-1}, s));
        int n = static_cast<int>(in.size());
        std::vector<array> out;
        for (int i = 0; i < n; ++i) {
          Shape shape(n, 1);
          int pos = i;
          if (indexing == "xy" && n >= 2 && i < 2) pos = 1 - i;
          shape[pos] = in[i].shape(0);
          out.push_back(reshape(in[i], shape, s));
        }
        if (!sparse) out = broadcast_arrays(out, s);
        return nb::tuple(nb::cast(out));
      },
      nb::arg("arrays"), nb::kw_only(), nb::arg("sparse") = false, nb::arg("indexing") = "xy",
      nb::arg("stream") = nb::none(),
      nb::sig("def meshgrid(*arrays: array, sparse: bool | None = False, indexing: str | None = "
              "'xy', stream: StreamOrDevice = None) -> tuple[array, ...]"),
      "Coordinate arrays from coordinate vectors (``indexing='xy'`` swaps the\n"
      "first two axes, like NumPy).");
}

} // namespace loom::bindings
