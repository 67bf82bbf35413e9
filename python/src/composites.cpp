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

array logsumexp_op(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  // Shifting by the (gradient-free) maximum keeps exp finite; an all -inf
  // slice would give nan - nan, so its shift is zero.
  array m = stop_gradient(max(a, axes, true, s), s);
  m = where(isinf(m, s), zeros_like(m, s), m, s);
  array out = add(log(sum(exp(subtract(a, m, s), s), axes, true, s), s), m, s);
  return keepdims ? out : squeeze(out, normalize_axes(axes, a.ndim(), "logsumexp"), s);
}

namespace {

array softmax_impl(const array& a, const std::vector<int>& axes, bool precise, StreamOrDevice s) {
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
      throw std::invalid_argument(
          "[tensordot] a and b have different sizes on the contracted "
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
  start[axis] = n - k; // the tail moves to the front
  stop2[axis] = n - k;
  return concatenate({slice(a, start, stop, step, s), slice(a, start2, stop2, step, s)}, axis, s);
}

// Reverses the given axes (views through negative-step slices).
array flip_axes(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  Shape start(a.ndim(), 0), stop = a.shape(), step(a.ndim(), 1);
  for (int ax : normalize_axes(axes, a.ndim(), "flip")) {
    start[ax] = a.shape(ax) - 1;
    stop[ax] = -1;
    step[ax] = -1;
  }
  return slice(a, start, stop, step, s);
}

// a[lo:hi] along one axis.
array take_range(const array& a, int axis, int lo, int hi, StreamOrDevice s) {
  Shape start(a.ndim(), 0), stop = a.shape(), step(a.ndim(), 1);
  start[axis] = lo;
  stop[axis] = hi;
  return slice(a, start, stop, step, s);
}

// Round half to even of a floating array.
array round_even(const array& x, StreamOrDevice s) {
  Dtype d = x.dtype();
  array r = floor(add(x, array(0.5, d), s), s);
  array tie = equal(subtract(r, x, s), array(0.5, d), s);
  array odd = not_equal(remainder(r, array(2.0, d), s), array(0.0, d), s);
  return where(logical_and(tie, odd, s), subtract(r, array(1.0, d), s), r, s);
}

std::vector<std::pair<int, int>> pad_widths(nb::handle w, int ndim) {
  auto as_pair = [](nb::handle h) -> std::pair<int, int> {
    if (PyLong_Check(h.ptr())) {
      int v = nb::cast<int>(h);
      return {v, v};
    }
    auto v = nb::cast<std::vector<int>>(h);
    if (v.size() == 1) return {v[0], v[0]};
    if (v.size() == 2) return {v[0], v[1]};
    throw std::invalid_argument("[pad] Invalid pad_width.");
  };
  if (PyLong_Check(w.ptr())) return std::vector<std::pair<int, int>>(ndim, as_pair(w));
  auto items = nb::cast<std::vector<nb::object>>(w);
  bool nested = !items.empty() && !PyLong_Check(items[0].ptr());
  if (!nested) return std::vector<std::pair<int, int>>(ndim, as_pair(w));
  if (items.size() == 1) return std::vector<std::pair<int, int>>(ndim, as_pair(items[0]));
  if (static_cast<int>(items.size()) != ndim) {
    throw std::invalid_argument("[pad] Invalid number of pad_width axes: expected " +
                                std::to_string(ndim) + " but got " + std::to_string(items.size()) +
                                ".");
  }
  std::vector<std::pair<int, int>> out;
  for (auto& it : items) out.push_back(as_pair(it));
  return out;
}

array pad_axis(const array& a, int ax, int before, int after, const std::string& mode,
               const array& value, StreamOrDevice s) {
  if (before == 0 && after == 0) return a;
  int n = a.shape(ax);
  std::vector<array> parts;
  auto edge_part = [&](int count, bool front) {
    Shape shape = a.shape();
    shape[ax] = count;
    if (mode == "constant") return full(shape, value, a.dtype(), s);
    if (n == 0) throw std::invalid_argument("[pad] Cannot pad an empty axis with mode " + mode);
    if (mode == "edge") {
      array e = front ? take_range(a, ax, 0, 1, s) : take_range(a, ax, n - 1, n, s);
      return broadcast_to(e, shape, s);
    }
    // reflect excludes the edge element, symmetric repeats it.
    int skip = mode == "reflect" ? 1 : 0;
    if (count + skip > n) {
      throw std::invalid_argument("[pad] Padding of " + std::to_string(count) + " with mode " +
                                  mode + " needs a larger axis (size " + std::to_string(n) + ").");
    }
    array piece = front ? take_range(a, ax, skip, skip + count, s)
                        : take_range(a, ax, n - skip - count, n - skip, s);
    return flip_axes(piece, {ax}, s);
  };
  if (before > 0) parts.push_back(edge_part(before, true));
  parts.push_back(a);
  if (after > 0) parts.push_back(edge_part(after, false));
  return concatenate(parts, ax, s);
}

array window(int m, const std::vector<double>& coeffs, bool bartlett) {
  std::vector<float> values(std::max(m, 0));
  for (int i = 0; i < m; ++i) {
    double v = 1.0;
    if (m > 1 && bartlett) {
      v = 1.0 - std::abs(2.0 * i / (m - 1) - 1.0);
    } else if (m > 1) {
      // sum_k (-1)^k c_k cos(2 pi k i / (m - 1))
      v = 0;
      for (size_t k = 0; k < coeffs.size(); ++k) {
        double term = coeffs[k] * std::cos(2.0 * M_PI * k * i / (m - 1));
        v += k % 2 == 1 ? -term : term;
      }
    }
    values[i] = static_cast<float>(std::max(v, 0.0)); // windows are non-negative
  }
  return array(values, {std::max(m, 0)}, float32);
}

// The typing class ArrayLike wraps any object.
struct ArrayLikeHolder {
  nb::object obj;
};

const char* kStreamSig = "stream: StreamOrDevice = None";

} // namespace

void init_composites(nb::module_& m) {
  nb::class_<ArrayLikeHolder>(
      m, "ArrayLike",
      "Any Python object with an ``__mlx_array__`` (or ``__loom_array__``)\n"
      "method returning an array; such objects are accepted wherever an\n"
      "op takes a scalar or an array.")
      .def(
          "__init__",
          [](ArrayLikeHolder* self, nb::handle obj) {
            new (self) ArrayLikeHolder{nb::borrow(obj)};
          },
          nb::arg());

  m.def(
      "matrix_transpose",
      [](const array& a, const StreamArg& s) {
        if (a.ndim() < 2) {
          throw std::invalid_argument(
              "[matrix_transpose] Input array must have at least 2 dimensions.");
        }
        return swapaxes(a, -1, -2, s);
      },
      nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def matrix_transpose(a: array, /, *, stream: StreamOrDevice = None) -> array"),
      "Swap the last two axes.");

  m.def(
      "flip",
      [](const array& a, const Axis& axis, const StreamArg& s) {
        return flip_axes(a, axes_or_all(a, axis), s);
      },
      nb::arg(), nb::arg("axis") = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def flip(a: array, /, axis: None | int | Sequence[int] = None, *, stream: "
              "StreamOrDevice = None) -> array"),
      "Reverse the order of elements along the given axes (all by default).");

  auto def_log_base = [&](const char* name, double base) {
    std::string sig =
        std::string("def ") + name + "(a: array, /, *, stream: StreamOrDevice = None) -> array";
    std::string doc = std::string("Element-wise base-") + (base == 2 ? "2" : "10") + " logarithm.";
    m.def(
        name,
        [base](const ScalarOrArray& v, const StreamArg& s) {
          array l = log(to_array(v.obj), s);
          return divide(l, array(std::log(base), l.dtype()), s);
        },
        nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(), nb::sig(sig.c_str()),
        doc.c_str());
  };
  def_log_base("log2", 2.0);
  def_log_base("log10", 10.0);

  m.def(
      "round",
      [](const ScalarOrArray& v, int decimals, const StreamArg& s) {
        array a = to_array(v.obj);
        if (!is_inexact(a.dtype())) {
          if (decimals >= 0) return a;
          array scale = array(std::pow(10.0, -decimals), float32);
          array f = astype(a, float32, s);
          return astype(multiply(round_even(divide(f, scale, s), s), scale, s), a.dtype(), s);
        }
        if (decimals == 0) return round_even(a, s);
        array scale = array(std::pow(10.0, decimals), a.dtype());
        return divide(round_even(multiply(a, scale, s), s), scale, s);
      },
      nb::arg(), nb::arg("decimals") = 0, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def round(a: array, /, decimals: int = 0, stream: StreamOrDevice = None) -> array"),
      "Round to the given number of decimals, halves to even.");

  m.def(
      "pad",
      [](const array& a, nb::handle pad_width, const std::string& mode,
         const ScalarOrArray& constant_values, const StreamArg& s) {
        if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "symmetric") {
          throw std::invalid_argument("Invalid padding mode (" + mode + ") passed to pad");
        }
        auto widths = pad_widths(pad_width, a.ndim());
        array value = to_array(constant_values.obj, a.dtype());
        array out = a;
        for (int ax = 0; ax < a.ndim(); ++ax) {
          auto [before, after] = widths[ax];
          if (before < 0 || after < 0) {
            throw std::invalid_argument("[pad] Padding widths must be non-negative.");
          }
          out = pad_axis(out, ax, before, after, mode, value, s);
        }
        return out;
      },
      nb::arg("a"), nb::arg("pad_width"), nb::arg("mode") = "constant",
      nb::arg("constant_values") = 0, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def pad(a: array, pad_width: int | tuple[int] | tuple[int, int] | list[tuple[int, "
              "int]], mode: Literal['constant', 'edge', 'reflect', 'symmetric'] = 'constant', "
              "constant_values: scalar | array = 0, *, stream: StreamOrDevice = None) -> array"),
      "Pad an array: with ``constant_values``, the edge values, or a mirror\n"
      "image excluding (``reflect``) or including (``symmetric``) the edge.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    pad_width (int or tuple or list of tuples): ``(before, after)`` per\n"
      "      axis, or one width or pair for every axis.\n"
      "    mode (str): ``constant``, ``edge``, ``reflect`` or ``symmetric``.\n"
      "    constant_values (scalar or array): The fill value of ``constant``.\n\n"
      "Returns:\n    array: The padded array.");

  m.def(
      "kron",
      [](const array& a, const array& b, const StreamArg& s) {
        int nd = std::max(a.ndim(), b.ndim());
        Shape sa(nd - a.ndim(), 1), sb(nd - b.ndim(), 1);
        sa.insert(sa.end(), a.shape().begin(), a.shape().end());
        sb.insert(sb.end(), b.shape().begin(), b.shape().end());
        Shape ea, eb, out;
        for (int i = 0; i < nd; ++i) {
          ea.push_back(sa[i]);
          ea.push_back(1);
          eb.push_back(1);
          eb.push_back(sb[i]);
          out.push_back(sa[i] * sb[i]);
        }
        return reshape(multiply(reshape(a, ea, s), reshape(b, eb, s), s), out, s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def kron(a: array, b: array, *, stream: StreamOrDevice = None) -> array"),
      "The Kronecker product of two arrays.");

  m.def(
      "count_nonzero",
      [](const array& a, const Axis& axis, bool keepdims, const StreamArg& s) {
        array nz = not_equal(a, zeros({}, a.dtype(), s), s);
        return sum(nz, axes_or_all(a, axis), keepdims, s);
      },
      nb::arg(), nb::kw_only(), nb::arg("axis") = nb::none(), nb::arg("keepdims") = false,
      nb::arg("stream") = nb::none(),
      nb::sig("def count_nonzero(a: array, /, *, axis: None | int | Sequence[int] = None, "
              "keepdims: bool = False, stream: StreamOrDevice = None) -> array"),
      "The number of non-zero elements over the given axes.");

  m.def(
      "diff",
      [](const array& a, int n, int axis, const StreamArg& s) {
        if (n < 0)
          throw std::invalid_argument("[diff] Order must be non-negative but got " +
                                      std::to_string(n) + ".");
        int ax = normalize_axis(axis, a.ndim(), "diff");
        array out = a;
        for (int i = 0; i < n && out.shape(ax) > 0; ++i) {
          int len = out.shape(ax);
          out = subtract(take_range(out, ax, 1, len, s), take_range(out, ax, 0, len - 1, s), s);
        }
        return out;
      },
      nb::arg(), nb::arg("n") = 1, nb::arg("axis") = -1, nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def diff(a: array, /, n: int = 1, axis: int = -1, *, stream: StreamOrDevice = "
              "None) -> array"),
      "The ``n``-th discrete difference along an axis.");

  m.def(
      "asarray",
      [](nb::handle a, std::optional<Dtype> dtype, nb::handle copy) {
        if (is_array(a) && (!dtype || *dtype == as_array(a).dtype()) &&
            (copy.is_none() || !nb::cast<bool>(nb::bool_(copy)))) {
          return as_array(a);
        }
        return array_from_python(a, dtype);
      },
      nb::arg("a"), nb::arg("dtype").none() = nb::none(), nb::kw_only(),
      nb::arg("copy").none() = nb::none(),
      nb::sig("def asarray(a: scalar | array | Sequence | DLPackCompatible, dtype: Dtype | None = "
              "None, *, copy: bool | None = None) -> array"),
      "Convert the input to an array (an array of the right dtype is returned\n"
      "as it is unless ``copy=True``).");

  m.def(
      "vecdot",
      [](const array& a, const array& b, int axis, const StreamArg& s) {
        return sum(multiply(a, b, s), std::vector<int>{axis}, false, s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), nb::arg("axis") = -1, nb::arg("stream") = nb::none(),
      nb::sig("def vecdot(a: array, b: array, /, *, axis: int = -1, stream: StreamOrDevice = "
              "None) -> array"),
      "The dot product of vectors along an axis (inputs broadcast).");

  auto def_window = [&](const char* name, std::vector<double> coeffs, bool bartlett,
                        const char* doc) {
    std::string sig =
        std::string("def ") + name + "(M: int, *, stream: StreamOrDevice = None) -> array";
    m.def(
        name, [coeffs, bartlett](int M, const StreamArg&) { return window(M, coeffs, bartlett); },
        nb::arg("M"), nb::kw_only(), nb::arg("stream") = nb::none(), nb::sig(sig.c_str()), doc);
  };
  def_window("hanning", {0.5, 0.5}, false, "The Hann window of ``M`` points.");
  def_window("hamming", {0.54, 0.46}, false, "The Hamming window of ``M`` points.");
  def_window("blackman", {0.42, 0.5, 0.08}, false, "The Blackman window of ``M`` points.");
  def_window("bartlett", {}, true, "The Bartlett (triangular) window of ``M`` points.");

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
        nb::arg(), nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, nb::arg("ddof") = 0,
        nb::kw_only(), nb::arg("stream") = nb::none(), nb::sig(sig.c_str()), doc.c_str());
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
    std::string sig = "def " + name + "(*arys: array, " + kStreamSig + ") -> array | list[array]";
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
            throw std::invalid_argument(
                "[tensordot] axes must be between 0 and the number of "
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

  m.attr("empty") = m.attr("zeros");
  m.attr("empty_like") = m.attr("zeros_like");

  m.def(
      "contiguous", [](const array& a, bool, const StreamArg& s) { return copy(a, s); }, nb::arg(),
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
      nb::arg(), nb::arg("axis"), nb::arg("shape"), nb::kw_only(), nb::arg("stream") = nb::none(),
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
        double big = d == float16   ? 65504.0
                     : d == float64 ? 1.7976931348623157e308
                                    : 3.4028234663852886e38;
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
        if (repeats < 0)
          throw std::invalid_argument("[repeat] Number of repeats cannot be negative");
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
          throw std::invalid_argument(
              "[meshgrid] Invalid indexing value. Valid values are 'xy' "
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
