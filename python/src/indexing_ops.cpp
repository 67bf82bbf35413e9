// Bindings of the array-indexing ops (take, take_along_axis, put_along_axis)
// and of `array.at`'s class. Each converts arguments and calls one op of
// loom/ops/gather.h.
#include <string>
#include <tuple>
#include <vector>

#include "utils.h"

namespace loom::bindings {

void init_indexing(nb::module_& m);

void init_indexing_ops(nb::module_& m) {
  init_indexing(m);
  m.def(
      "take",
      [](const array& a, const ScalarOrArray& indices, std::optional<int> axis,
         const StreamArg& s) {
        array idx = to_array(indices.obj);
        if (!is_integral(idx.dtype())) {
          throw std::invalid_argument("[gather] Got indices with invalid dtype " +
                                      dtype_name(idx.dtype()) + ". Indices must be integral.");
        }
        return axis ? take(a, idx, *axis, s) : take(a, idx, s);
      },
      nb::arg(), nb::arg("indices"), nb::arg("axis") = nb::none(), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def take(a: array, /, indices: int | array, axis: int | None = None, *, stream: "
              "StreamOrDevice = None) -> array"),
      "Take elements along an axis.\n\n"
      "The elements of ``a`` at ``indices`` along ``axis`` (of the flattened\n"
      "array when ``axis`` is ``None``). Negative indices count from the end;\n"
      "an index out of range raises when the result is evaluated.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    indices (int or array): Integer indices.\n"
      "    axis (int, optional): The axis. Default: ``None``.\n\n"
      "Returns:\n    array: The indexed values of ``a``.");

  m.def(
      "take_along_axis",
      [](const array& a, const array& indices, std::optional<int> axis, const StreamArg& s) {
        return axis ? take_along_axis(a, indices, *axis, s) : take_along_axis(a, indices, s);
      },
      nb::arg(), nb::arg("indices"), nb::arg("axis") = -1, nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def take_along_axis(a: array, /, indices: array, axis: int | None = -1, *, "
              "stream: StreamOrDevice = None) -> array"),
      "Take values along an axis at the given indices.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    indices (array): Indices with the same number of dimensions as ``a``\n"
      "      (broadcast with it on every other axis).\n"
      "    axis (int, optional): The axis; ``None`` flattens ``a``. Default: ``-1``.\n\n"
      "Returns:\n    array: The values of ``a`` at the indices.");

  m.def(
      "put_along_axis",
      [](const array& a, const array& indices, const ScalarOrArray& values, std::optional<int> axis,
         const StreamArg& s) {
        array v = to_array(values.obj, a.dtype());
        return axis ? put_along_axis(a, indices, v, *axis, s) : put_along_axis(a, indices, v, s);
      },
      nb::arg(), nb::arg("indices"), nb::arg("values"), nb::arg("axis") = nb::none(),
      nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def put_along_axis(a: array, /, indices: array, values: array, axis: int | None = "
              "None, *, stream: StreamOrDevice = None) -> array"),
      "Put values along an axis at the given indices.\n\n"
      "Args:\n"
      "    a (array): Destination array.\n"
      "    indices (array): Indices with the same number of dimensions as ``a``.\n"
      "    values (array): Values to write, broadcast with ``indices``.\n"
      "    axis (int, optional): The axis; ``None`` flattens ``a``. Default: ``None``.\n\n"
      "Returns:\n    array: ``a`` with the values written.");

  // --- sorting and selection --------------------------------------------------
  auto def_sort = [&](const char* name, array (*with_axis)(const array&, int, StreamOrDevice),
                      array (*flat)(const array&, StreamOrDevice), const char* doc) {
    m.def(
        name,
        [with_axis, flat](const array& a, std::optional<int> axis, const StreamArg& s) {
          return axis ? with_axis(a, *axis, s) : flat(a, s);
        },
        nb::arg(), nb::arg("axis") = -1, nb::kw_only(), nb::arg("stream") = nb::none(),
        nb::sig((std::string("def ") + name +
                 "(a: array, /, axis: None | int = -1, *, stream: StreamOrDevice = None) -> "
                 "array")
                    .c_str()),
        doc);
  };
  def_sort("sort", &loom::sort, &loom::sort,
           "Sorted copy of the array along an axis (NaN last).\n\n"
           "Args:\n    a (array): Input array.\n"
           "    axis (int or None, optional): The axis; ``None`` sorts the flattened\n"
           "      array. Default: ``-1``.\n\nReturns:\n    array: The sorted array.");
  def_sort("argsort", &loom::argsort, &loom::argsort,
           "Indices that sort the array along an axis (stable, NaN last).\n\n"
           "Args:\n    a (array): Input array.\n"
           "    axis (int or None, optional): The axis; ``None`` sorts the flattened\n"
           "      array. Default: ``-1``.\n\nReturns:\n    array: ``uint32`` indices.");
  auto def_kth = [&](const char* name, array (*with_axis)(const array&, int, int, StreamOrDevice),
                     array (*flat)(const array&, int, StreamOrDevice), const char* arg,
                     const char* doc) {
    m.def(
        name,
        [with_axis, flat](const array& a, int kth, std::optional<int> axis, const StreamArg& s) {
          return axis ? with_axis(a, kth, *axis, s) : flat(a, kth, s);
        },
        nb::arg(), nb::arg(arg), nb::arg("axis") = -1, nb::kw_only(),
        nb::arg("stream") = nb::none(),
        nb::sig((std::string("def ") + name + "(a: array, /, " + arg +
                 ": int, axis: None | int = -1, *, stream: StreamOrDevice = None) -> array")
                    .c_str()),
        doc);
  };
  def_kth("partition", &loom::partition, &loom::partition, "kth",
          "Partially sorted copy: the element at ``kth`` is where a sort would put\n"
          "it, smaller-or-equal elements before it, larger-or-equal after (each\n"
          "side in no particular order).\n\n"
          "Args:\n    a (array): Input array.\n    kth (int): The pivot position.\n"
          "    axis (int or None, optional): The axis. Default: ``-1``.\n\n"
          "Returns:\n    array: The partitioned array.");
  def_kth("argpartition", &loom::argpartition, &loom::argpartition, "kth",
          "Indices that partition the array (see :func:`partition`).\n\n"
          "Args:\n    a (array): Input array.\n    kth (int): The pivot position.\n"
          "    axis (int or None, optional): The axis. Default: ``-1``.\n\n"
          "Returns:\n    array: ``uint32`` indices.");
  def_kth("topk", &loom::topk, &loom::topk, "k",
          "The ``k`` largest elements along an axis, in no particular order.\n\n"
          "Args:\n    a (array): Input array.\n    k (int): How many.\n"
          "    axis (int or None, optional): The axis. Default: ``-1``.\n\n"
          "Returns:\n    array: The top ``k`` elements.");

  m.def(
      "searchsorted",
      [](const array& sorted, const array& values, const std::string& side, const StreamArg& s) {
        if (side != "left" && side != "right") {
          throw std::invalid_argument("[searchsorted] Invalid side '" + side +
                                      "'. Expected 'left' or 'right'.");
        }
        return searchsorted(sorted, values, side == "right", s);
      },
      nb::arg(), nb::arg(), nb::arg("side") = "left", nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def searchsorted(sorted_sequence: array, values: array, /, side: str = 'left', *, "
              "stream: StreamOrDevice = None) -> array"),
      "Indices that keep ``sorted_sequence`` sorted when inserting ``values``.\n\n"
      "Args:\n    sorted_sequence (array): A 1-D array in ascending order (NaN last).\n"
      "    values (array): The values to insert, any shape.\n"
      "    side (str, optional): ``'left'``: the count of elements less than the\n"
      "      value; ``'right'``: less than or equal. Default: ``'left'``.\n\n"
      "Returns:\n    array: ``uint32`` indices with the shape of ``values``.");

  m.def(
      "unique",
      [](const array& a, int size, bool return_index, bool return_inverse, bool return_counts,
         nb::object fill_value, const StreamArg& s) -> nb::object {
        std::optional<array> fill;
        if (!fill_value.is_none()) fill = to_array(fill_value, a.dtype());
        auto out = unique(a, size, return_index, return_inverse, return_counts, fill, s);
        if (out.size() == 1) return nb::cast(out[0]);
        nb::list items;
        for (auto& x : out) items.append(nb::cast(x));
        return nb::tuple(items);
      },
      nb::arg(), nb::arg("size"), nb::arg("return_index") = false,
      nb::arg("return_inverse") = false, nb::arg("return_counts") = false,
      nb::arg("fill_value") = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def unique(a: array, /, size: int, return_index: bool = False, return_inverse: "
              "bool = False, return_counts: bool = False, fill_value: scalar | array | None = "
              "None, *, stream: StreamOrDevice = None) -> array | tuple[array, ...]"),
      "The sorted unique elements of the flattened array, ``size`` of them.\n\n"
      "The output's shape never depends on the values, so ``a`` is not\n"
      "evaluated. Entries past the last unique element hold ``fill_value``\n"
      "(default: the smallest element) and count 0; a truncated output keeps\n"
      "the ``size`` smallest, and ``inverse`` is clamped to ``size - 1``.\n"
      "Every NaN is its own unique element.\n\n"
      "Args:\n    a (array): Input array.\n    size (int): The size of the output.\n"
      "    return_index (bool, optional): Also the index of each one's first\n"
      "      occurrence in the flattened ``a`` (``uint32``).\n"
      "    return_inverse (bool, optional): Also the indices into the result that\n"
      "      rebuild ``a`` (``uint32``, ``a``'s shape).\n"
      "    return_counts (bool, optional): Also how often each occurs (``int32``).\n"
      "    fill_value (scalar or array, optional): Padding value.\n\n"
      "Returns:\n    array or tuple(array, ...): values, then index, inverse, counts as\n"
      "    requested.");

  m.def(
      "median",
      [](const array& a, std::optional<IntOrInts> axis, bool keepdims, const StreamArg& s) {
        return median(a, axis ? to_axes(*axis) : std::vector<int>{}, keepdims, s);
      },
      nb::arg(), nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def median(a: array, /, axis: None | int | Sequence[int] = None, keepdims: bool = "
              "False, *, stream: StreamOrDevice = None) -> array"),
      "The median over the given axes (all by default); NaN where a NaN is\n"
      "among the values. Integer inputs give float32.\n\n"
      "Args:\n    a (array): Input array.\n"
      "    axis (int or list(int), optional): The axes. Default: all.\n"
      "    keepdims (bool, optional): Keep the reduced axes as size 1.\n\n"
      "Returns:\n    array: The medians.");
  m.def(
      "minmax",
      [](const array& a, std::optional<IntOrInts> axis, bool keepdims, const StreamArg& s) {
        auto [lo, hi] = minmax(a, axis ? to_axes(*axis) : std::vector<int>{}, keepdims, s);
        return nb::make_tuple(lo, hi);
      },
      nb::arg(), nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def minmax(a: array, /, axis: None | int | Sequence[int] = None, keepdims: bool = "
              "False, *, stream: StreamOrDevice = None) -> tuple[array, array]"),
      "The minimum and the maximum over the given axes, in that order.\n\n"
      "Args:\n    a (array): Input array.\n"
      "    axis (int or list(int), optional): The axes. Default: all.\n"
      "    keepdims (bool, optional): Keep the reduced axes as size 1.\n\n"
      "Returns:\n    tuple(array, array): ``(min, max)``.");

  // --- scans ------------------------------------------------------------------
  using ScanFn = array (*)(const array&, std::optional<int>, bool, bool, StreamOrDevice);
  auto scan_doc = [](const char* what) {
    return std::string("Cumulative ") + what +
           " along an axis.\n\n"
           "Args:\n    a (array): Input array.\n"
           "    axis (int, optional): The axis; ``None`` scans the flattened array.\n"
           "    reverse (bool): Scan from the end. Default: ``False``.\n"
           "    inclusive (bool): Include the element itself (else the first output\n"
           "      is the identity). Default: ``True``.\n\n"
           "Returns:\n    array: The scan.";
  };
  static std::vector<std::string> docs;
  for (auto [name, fn, what] :
       {std::tuple<const char*, ScanFn, const char*>{"cumsum", &loom::cumsum, "sum"},
        {"cumprod", &loom::cumprod, "product"}}) {
    docs.push_back(scan_doc(what));
    m.def(
        name,
        [fn](const array& a, std::optional<int> axis, bool reverse, bool inclusive,
             std::optional<Dtype> dtype, const StreamArg& s) {
          return fn(dtype ? astype(a, *dtype, s) : a, axis, reverse, inclusive, s);
        },
        nb::arg(), nb::arg("axis") = nb::none(), nb::kw_only(), nb::arg("reverse") = false,
        nb::arg("inclusive") = true, nb::arg("dtype") = nb::none(), nb::arg("stream") = nb::none(),
        nb::sig((std::string("def ") + name +
                 "(a: array, /, axis: int | None = None, *, reverse: bool = False, inclusive: "
                 "bool = True, dtype: Dtype | None = None, stream: StreamOrDevice = None) -> "
                 "array")
                    .c_str()),
        docs.back().c_str());
  }
  for (auto [name, fn, what] :
       {std::tuple<const char*, ScanFn, const char*>{"cummax", &loom::cummax, "maximum"},
        {"cummin", &loom::cummin, "minimum"},
        {"logcumsumexp", &loom::logcumsumexp, "log-sum-exp"}}) {
    docs.push_back(scan_doc(what));
    m.def(
        name,
        [fn](const array& a, std::optional<int> axis, bool reverse, bool inclusive,
             const StreamArg& s) { return fn(a, axis, reverse, inclusive, s); },
        nb::arg(), nb::arg("axis") = nb::none(), nb::kw_only(), nb::arg("reverse") = false,
        nb::arg("inclusive") = true, nb::arg("stream") = nb::none(),
        nb::sig((std::string("def ") + name +
                 "(a: array, /, axis: int | None = None, *, reverse: bool = False, inclusive: "
                 "bool = True, stream: StreamOrDevice = None) -> array")
                    .c_str()),
        docs.back().c_str());
  }
  // The array-API names are the same functions in MLX.
  m.attr("cumulative_sum") = m.attr("cumsum");
  m.attr("cumulative_prod") = m.attr("cumprod");

  // Array methods of the scans (MLX has them, without dtype; not the sorts).
  nb::handle cls = nb::type<array>();
  for (auto [name, fn] : {std::pair<const char*, ScanFn>{"cumsum", &loom::cumsum},
                          {"cumprod", &loom::cumprod},
                          {"cummax", &loom::cummax},
                          {"cummin", &loom::cummin},
                          {"logcumsumexp", &loom::logcumsumexp}}) {
    nb::setattr(cls, name,
                nb::cpp_function(
                    [fn](const array& self, std::optional<int> axis, bool reverse, bool inclusive,
                         const StreamArg& s) { return fn(self, axis, reverse, inclusive, s); },
                    nb::is_method(), nb::name(name), nb::scope(cls), nb::arg("axis") = nb::none(),
                    nb::kw_only(), nb::arg("reverse") = false, nb::arg("inclusive") = true,
                    nb::arg("stream") = nb::none(), "See the function of the same name."));
  }
}

} // namespace loom::bindings
