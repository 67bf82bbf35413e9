// Bindings of the composite ops (loom/ops/*: built from other ops, lazy and
// differentiable through them): argument conversion only.
#include "utils.h"

namespace loom::bindings {

namespace {

using Axis = std::optional<IntOrInts>;

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
      "matrix_transpose", [](const array& a, const StreamArg& s) { return matrix_transpose(a, s); },
      nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def matrix_transpose(a: array, /, *, stream: StreamOrDevice = None) -> array"),
      "Swap the last two axes.");

  m.def(
      "flip",
      [](const array& a, const Axis& axis, const StreamArg& s) {
        return axis ? flip(a, to_axes(*axis), s) : flip(a, s);
      },
      nb::arg(), nb::arg("axis") = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def flip(a: array, /, axis: None | int | Sequence[int] = None, *, stream: "
              "StreamOrDevice = None) -> array"),
      "Reverse the order of elements along the given axes (all by default).");

  m.def(
      "log2", [](const ScalarOrArray& v, const StreamArg& s) { return log2(to_array(v.obj), s); },
      nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def log2(a: array, /, *, stream: StreamOrDevice = None) -> array"),
      "Element-wise base-2 logarithm.");
  m.def(
      "log1p", [](const ScalarOrArray& v, const StreamArg& s) { return log1p(to_array(v.obj), s); },
      nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def log1p(a: array, /, *, stream: StreamOrDevice = None) -> array"),
      "Element-wise ``log(1 + a)``, accurate for small ``a``.");
  m.def(
      "log10", [](const ScalarOrArray& v, const StreamArg& s) { return log10(to_array(v.obj), s); },
      nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def log10(a: array, /, *, stream: StreamOrDevice = None) -> array"),
      "Element-wise base-10 logarithm.");

  m.def(
      "round",
      [](const ScalarOrArray& v, int decimals, const StreamArg& s) {
        return round(to_array(v.obj), decimals, s);
      },
      nb::arg(), nb::arg("decimals") = 0, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def round(a: array, /, decimals: int = 0, stream: StreamOrDevice = None) -> array"),
      "Round to the given number of decimals, halves to even.");

  m.def(
      "pad",
      [](const array& a, nb::handle pad_width, const std::string& mode,
         const ScalarOrArray& constant_values, const StreamArg& s) {
        return pad(a, pad_widths(pad_width, a.ndim()), to_array(constant_values.obj, a.dtype()),
                   mode, s);
      },
      nb::arg(), nb::arg("pad_width"), nb::arg("mode") = "constant", nb::arg("constant_values") = 0,
      nb::kw_only(), nb::arg("stream") = nb::none(),
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
      "kron", [](const array& a, const array& b, const StreamArg& s) { return kron(a, b, s); },
      nb::arg("a"), nb::arg("b"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def kron(a: array, b: array, *, stream: StreamOrDevice = None) -> array"),
      "The Kronecker product of two arrays.");

  m.def(
      "count_nonzero",
      [](const array& a, const Axis& axis, bool keepdims, const StreamArg& s) {
        return axis ? count_nonzero(a, to_axes(*axis), keepdims, s) : count_nonzero(a, keepdims, s);
      },
      nb::arg(), nb::arg("axis") = nb::none(), nb::kw_only(), nb::arg("keepdims") = false,
      nb::arg("stream") = nb::none(),
      nb::sig("def count_nonzero(a: array, /, *, axis: None | int | Sequence[int] = None, "
              "keepdims: bool = False, stream: StreamOrDevice = None) -> array"),
      "The number of non-zero elements over the given axes.");

  m.def(
      "diff",
      [](const array& a, int n, int axis, const StreamArg& s) { return diff(a, n, axis, s); },
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
      nb::arg(), nb::arg("dtype").none() = nb::none(), nb::kw_only(),
      nb::arg("copy").none() = nb::none(),
      nb::sig("def asarray(a: scalar | array | Sequence | DLPackCompatible, dtype: Dtype | None = "
              "None, *, copy: bool | None = None) -> array"),
      "Convert the input to an array (an array of the right dtype is returned\n"
      "as it is unless ``copy=True``).");

  m.def(
      "vecdot",
      [](const array& a, const array& b, int axis, const StreamArg& s) {
        return vecdot(a, b, axis, s);
      },
      nb::arg(), nb::arg(), nb::arg("axis") = -1, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def vecdot(a: array, b: array, /, *, axis: int = -1, stream: StreamOrDevice = "
              "None) -> array"),
      "The dot product of vectors along an axis (inputs broadcast).");

  auto def_window = [&](const char* name, array (*fn)(int, StreamOrDevice), const char* doc) {
    std::string sig =
        std::string("def ") + name + "(M: int, *, stream: StreamOrDevice = None) -> array";
    m.def(
        name, [fn](int M, const StreamArg& s) { return fn(M, s); }, nb::arg("M"), nb::kw_only(),
        nb::arg("stream") = nb::none(), nb::sig(sig.c_str()), doc);
  };
  def_window(
      "hanning", +[](int M, StreamOrDevice s) { return hanning(M, s); },
      "The Hann window of ``M`` points.");
  def_window(
      "hamming", +[](int M, StreamOrDevice s) { return hamming(M, s); },
      "The Hamming window of ``M`` points.");
  def_window(
      "blackman", +[](int M, StreamOrDevice s) { return blackman(M, s); },
      "The Blackman window of ``M`` points.");
  def_window(
      "bartlett", +[](int M, StreamOrDevice s) { return bartlett(M, s); },
      "The Bartlett (triangular) window of ``M`` points.");

  for (const char* name : {"conj", "conjugate"}) {
    std::string sig =
        std::string("def ") + name + "(a: array, *, stream: StreamOrDevice = None) -> array";
    m.def(
        name, [](const array& a, const StreamArg& s) { return conjugate(a, s); }, nb::arg(),
        nb::kw_only(), nb::arg("stream") = nb::none(), nb::sig(sig.c_str()),
        "The element-wise complex conjugate (real inputs unchanged).");
  }

  m.def(
      "positive", [](const array& a, const StreamArg& s) { return positive(a, s); }, nb::arg(),
      nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def positive(a: array, /, *, stream: StreamOrDevice = None) -> array"),
      "Element-wise unary plus: the input unchanged.");

  m.def(
      "isposinf", [](const array& a, const StreamArg& s) { return isposinf(a, s); }, nb::arg(),
      nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def isposinf(a: array, stream: StreamOrDevice = None) -> array"),
      "Which elements are positive infinity.");
  m.def(
      "isneginf", [](const array& a, const StreamArg& s) { return isneginf(a, s); }, nb::arg(),
      nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def isneginf(a: array, stream: StreamOrDevice = None) -> array"),
      "Which elements are negative infinity.");

  m.def(
      "clip",
      [](const array& a, const std::optional<ScalarOrArray>& lo,
         const std::optional<ScalarOrArray>& hi, const StreamArg& s) {
        std::optional<array> lo_a, hi_a;
        if (lo) lo_a = to_array(lo->obj, a.dtype());
        if (hi) hi_a = to_array(hi->obj, a.dtype());
        return clip(a, lo_a, hi_a, s);
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
        return axis ? logsumexp(a, to_axes(*axis), keepdims, s) : logsumexp(a, keepdims, s);
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
        return axis ? softmax(a, to_axes(*axis), precise, s) : softmax(a, precise, s);
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
          if (root)
            return axis ? std(a, to_axes(*axis), keepdims, ddof, s) : std(a, keepdims, ddof, s);
          return axis ? var(a, to_axes(*axis), keepdims, ddof, s) : var(a, keepdims, ddof, s);
        },
        nb::arg(), nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, nb::arg("ddof") = 0,
        nb::kw_only(), nb::arg("stream") = nb::none(), nb::sig(sig.c_str()), doc.c_str());
  };
  def_var("var", false);
  def_var("std", true);

  m.def(
      "tri",
      [](int n, std::optional<int> mm, int k, std::optional<Dtype> dtype, const StreamArg& s) {
        return tri(n, mm.value_or(n), k, dtype.value_or(float32), s);
      },
      nb::arg("n"), nb::arg("m").none() = nb::none(), nb::arg("k") = 0,
      nb::arg("dtype").none() = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def tri(n: int, m: int | None = None, k: int = 0, dtype: Dtype | None = None, *, "
              "stream: StreamOrDevice = None) -> array"),
      "An ``n`` by ``m`` matrix with ones at and below the ``k``-th diagonal.");
  m.def(
      "tril", [](const array& x, int k, const StreamArg& s) { return tril(x, k, s); }, nb::arg("x"),
      nb::arg("k") = 0, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def tril(x: array, k: int = 0, *, stream: StreamOrDevice = None) -> array"),
      "The lower triangle (at and below the ``k``-th diagonal) of the last two\n"
      "axes; zeros elsewhere.");
  m.def(
      "triu", [](const array& x, int k, const StreamArg& s) { return triu(x, k, s); }, nb::arg("x"),
      nb::arg("k") = 0, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def triu(x: array, k: int = 0, *, stream: StreamOrDevice = None) -> array"),
      "The upper triangle (at and above the ``k``-th diagonal) of the last two\n"
      "axes; zeros elsewhere.");

  using AtLeast = array (*)(const array&, StreamOrDevice);
  const AtLeast atleast[] = {+[](const array& a, StreamOrDevice s) { return atleast_1d(a, s); },
                             +[](const array& a, StreamOrDevice s) { return atleast_2d(a, s); },
                             +[](const array& a, StreamOrDevice s) { return atleast_3d(a, s); }};
  for (int n = 1; n <= 3; ++n) {
    std::string name = "atleast_" + std::to_string(n) + "d";
    std::string sig = "def " + name + "(*arys: array, " + kStreamSig + ") -> array | list[array]";
    std::string doc = "The inputs with at least " + std::to_string(n) +
                      " dimensions (one array for one input, else a list).";
    m.def(
        name.c_str(),
        [fn = atleast[n - 1]](nb::args arys, const StreamArg& s) -> nb::object {
          std::vector<array> out;
          for (auto h : arys) out.push_back(fn(as_array(h), s));
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
        return divmod(x, y, s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def divmod(a: scalar | array, b: scalar | array, stream: StreamOrDevice = None) "
              "-> array"),
      "Element-wise ``[a // b, a % b]``.");

  m.def(
      "logaddexp",
      [](const ScalarOrArray& a, const ScalarOrArray& b, const StreamArg& s) {
        auto [x, y] = to_arrays(a.obj, b.obj);
        return logaddexp(x, y, s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def logaddexp(a: scalar | array, b: scalar | array, /, *, stream: StreamOrDevice "
              "= None) -> array"),
      "Element-wise ``log(exp(a) + exp(b))`` computed without overflow.");

  m.def(
      "degrees",
      [](const ScalarOrArray& a, const StreamArg& s) { return degrees(to_array(a.obj), s); },
      nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def degrees(a: scalar | array, /, *, stream: StreamOrDevice = None) -> array"),
      "Convert angles from radians to degrees.");
  m.def(
      "radians",
      [](const ScalarOrArray& a, const StreamArg& s) { return radians(to_array(a.obj), s); },
      nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def radians(a: scalar | array, /, *, stream: StreamOrDevice = None) -> array"),
      "Convert angles from degrees to radians.");

  m.def(
      "outer", [](const array& a, const array& b, const StreamArg& s) { return outer(a, b, s); },
      nb::arg(), nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def outer(a: array, b: array, /, *, stream: StreamOrDevice = None) -> array"),
      "The outer product of two arrays (flattened first).");
  m.def(
      "inner", [](const array& a, const array& b, const StreamArg& s) { return inner(a, b, s); },
      nb::arg(), nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def inner(a: array, b: array, /, *, stream: StreamOrDevice = None) -> array"),
      "Sum-product over the last axes of two arrays.");
  m.def(
      "tensordot",
      [](const array& a, const array& b, nb::handle axes, const StreamArg& s) {
        if (PyLong_Check(axes.ptr())) return tensordot(a, b, nb::cast<int>(axes), s);
        auto pair = nb::cast<std::vector<nb::object>>(axes);
        if (pair.size() != 2) {
          throw std::invalid_argument("[tensordot] axes must be an int or two lists of axes.");
        }
        auto read = [](nb::handle h) {
          if (PyLong_Check(h.ptr())) return std::vector<int>{nb::cast<int>(h)};
          return nb::cast<std::vector<int>>(h);
        };
        return tensordot(a, b, read(pair[0]), read(pair[1]), s);
      },
      nb::arg(), nb::arg(), nb::arg("axes") = 2, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def tensordot(a: array, b: array, /, axes: int | list[Sequence[int]] = 2, *, "
              "stream: StreamOrDevice = None) -> array"),
      "Sum-product over the given axes: the last ``axes`` of ``a`` with the\n"
      "first ``axes`` of ``b``, or two explicit lists of axes.");

  m.def(
      "addmm",
      [](const array& c, const array& a, const array& b, float alpha, float beta,
         const StreamArg& s) { return addmm(c, a, b, alpha, beta, s); },
      nb::arg(), nb::arg(), nb::arg(), nb::arg("alpha") = 1.0f, nb::arg("beta") = 1.0f,
      nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def addmm(c: array, a: array, b: array, /, alpha: float = 1.0, beta: float = 1.0, "
              " *, stream: StreamOrDevice = None) -> array"),
      "``alpha * (a @ b) + beta * c``.");

  m.attr("empty") = m.attr("zeros");
  m.attr("empty_like") = m.attr("zeros_like");

  m.def(
      "contiguous",
      [](const array& a, bool allow_col_major, const StreamArg& s) {
        return contiguous(a, allow_col_major, s);
      },
      nb::arg(), nb::arg("allow_col_major") = false, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def contiguous(a: array, /, allow_col_major: bool = False, *, stream: "
              "StreamOrDevice = None) -> array"),
      "A row-major copy of the array.");

  m.def(
      "unstack",
      [](const array& x, int axis, const StreamArg& s) {
        return nb::tuple(nb::cast(unstack(x, axis, s)));
      },
      nb::arg(), nb::kw_only(), nb::arg("axis") = 0, nb::arg("stream") = nb::none(),
      nb::sig("def unstack(x: array, /, *, axis: int = 0, stream: StreamOrDevice = None) -> "
              "tuple[array, ...]"),
      "Split an array into the slices along an axis, removing that axis.");

  m.def(
      "unflatten",
      [](const array& a, int axis, const std::vector<int>& shape, const StreamArg& s) {
        return unflatten(a, axis, Shape(shape.begin(), shape.end()), s);
      },
      nb::arg(), nb::arg("axis"), nb::arg("shape"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def unflatten(a: array, /, axis: int, shape: Sequence[int], *, stream: "
              "StreamOrDevice = None) -> array"),
      "Split one axis into several with the given shape (one may be ``-1``).");

  m.def(
      "trunc", [](const array& a, const StreamArg& s) { return trunc(a, s); }, nb::arg(),
      nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def trunc(a: array, /, *, stream: StreamOrDevice = None) -> array"),
      "Element-wise rounding toward zero.");

  m.def(
      "nan_to_num",
      [](const ScalarOrArray& v, float nan, std::optional<float> posinf,
         std::optional<float> neginf,
         const StreamArg& s) { return nan_to_num(to_array(v.obj), nan, posinf, neginf, s); },
      nb::arg(), nb::arg("nan") = 0.0f, nb::arg("posinf").none() = nb::none(),
      nb::arg("neginf").none() = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def nan_to_num(a: scalar | array, nan: float = 0, posinf: float | None = None, "
              "neginf: float | None = None, *, stream: StreamOrDevice = None) -> array"),
      "Replace NaN with ``nan`` and infinities with ``posinf``/``neginf``\n"
      "(the dtype's largest finite values by default).");

  m.def(
      "tile",
      [](const array& a, const IntOrInts& reps_arg, const StreamArg& s) {
        return tile(a, to_axes(reps_arg), s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def tile(a: array, reps: int | Sequence[int], /, *, stream: StreamOrDevice = None) "
              "-> array"),
      "Repeat the whole array ``reps`` times along each axis.");

  m.def(
      "repeat",
      [](const array& a, int repeats, std::optional<int> axis, const StreamArg& s) {
        return axis ? repeat(a, repeats, *axis, s) : repeat(a, repeats, s);
      },
      nb::arg(), nb::arg("repeats"), nb::arg("axis").none() = nb::none(), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def repeat(array: array, repeats: int, axis: int | None = None, *, stream: "
              "StreamOrDevice = None) -> array"),
      "Repeat each element ``repeats`` times along an axis (of the flattened\n"
      "array when no axis is given).");

  m.def(
      "roll",
      [](const array& a, const IntOrInts& shift_arg, const Axis& axis_arg, const StreamArg& s) {
        std::vector<int> shifts = to_axes(shift_arg);
        if (axis_arg) return roll(a, shifts, to_axes(*axis_arg), s);
        int total = 0;
        for (int v : shifts) total += v;
        return roll(a, total, s);
      },
      nb::arg(), nb::arg("shift"), nb::arg("axis").none() = nb::none(), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def roll(a: array, shift: int | tuple[int], axis: None | int | tuple[int] = None, "
              "/, *, stream: StreamOrDevice = None) -> array"),
      "Shift elements along axes, wrapping around (the flattened array when\n"
      "no axis is given).");

  m.def(
      "meshgrid",
      [](nb::args arrays, bool sparse, const std::string& indexing, const StreamArg& s) {
        std::vector<array> in;
        for (auto h : arrays) in.push_back(as_array(h));
        return nb::tuple(nb::cast(meshgrid(in, sparse, indexing, s)));
      },
      nb::arg("arrays"), nb::kw_only(), nb::arg("sparse") = false, nb::arg("indexing") = "xy",
      nb::arg("stream") = nb::none(),
      nb::sig("def meshgrid(*arrays: array, sparse: bool | None = False, indexing: str | None = "
              "'xy', stream: StreamOrDevice = None) -> tuple[array, ...]"),
      "Coordinate arrays from coordinate vectors (``indexing='xy'`` swaps the\n"
      "first two axes, like NumPy).");
}

} // namespace loom::bindings
