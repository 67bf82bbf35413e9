// Bindings of issue 9's remaining names: diag/diagonal/trace, einsum,
// views (view, as_strided), depends, buffer sizes, float8 conversions, and
// random.permutation/truncated_normal. Argument conversion only.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include <unordered_set>

#include "loom/ops/utils.h"
#include "trees.h"
#include "utils.h"

namespace loom::bindings {

namespace {

std::vector<array> arrays_of(nb::handle v) {
  if (is_array(v)) return {as_array(v)};
  return nb::cast<std::vector<array>>(v);
}

} // namespace

void init_ops_more(nb::module_& m) {
  m.def(
      "diagonal",
      [](const array& a, int offset, int axis1, int axis2, const StreamArg& s) {
        return diagonal(a, offset, axis1, axis2, s);
      },
      nb::arg("a"), nb::arg("offset") = 0, nb::arg("axis1") = 0, nb::arg("axis2") = 1,
      nb::arg("stream") = nb::none(),
      nb::sig("def diagonal(a: array, offset: int = 0, axis1: int = 0, axis2: int = 1, stream: "
              "StreamOrDevice = None) -> array"),
      "The diagonal at ``offset`` of the plane ``(axis1, axis2)``, as the last axis.");
  m.def(
      "diag", [](const array& a, int k, const StreamArg& s) { return diag(a, k, s); }, nb::arg(),
      nb::arg("k") = 0, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def diag(a: array, /, k: int = 0, *, stream: StreamOrDevice = None) -> array"),
      "Extract a diagonal (2-D input) or build a diagonal matrix (1-D input).");
  m.def(
      "trace",
      [](const array& a, int offset, int axis1, int axis2, std::optional<Dtype> dtype,
         const StreamArg& s) { return trace(a, offset, axis1, axis2, dtype, s); },
      nb::arg(), nb::arg("offset") = 0, nb::arg("axis1") = 0, nb::arg("axis2") = 1,
      nb::arg("dtype").none() = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def trace(a: array, /, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: "
              "Dtype | None = None, *, stream: StreamOrDevice = None) -> array"),
      "The sum along a diagonal of the plane ``(axis1, axis2)``.");
  m.def(
      "einsum",
      [](const std::string& subscripts, nb::args operands, const StreamArg& s) {
        std::vector<array> ops;
        for (auto o : operands) ops.push_back(to_array(o));
        return einsum(subscripts, ops, s);
      },
      nb::arg("subscripts"), nb::arg("operands"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def einsum(subscripts: str, *operands, stream: StreamOrDevice = None) -> array"),
      "Einstein summation over the operands (contraction order: a greedy path).");
  m.def(
      "einsum_path",
      [](const std::string& subscripts, nb::args operands) {
        std::vector<array> ops;
        for (auto o : operands) ops.push_back(to_array(o));
        auto [path, report] = einsum_path(subscripts, ops);
        nb::list steps;
        for (auto& step : path) {
          nb::list items;
          for (int i : step) items.append(i);
          steps.append(nb::tuple(items));
        }
        return nb::make_tuple(steps, report);
      },
      nb::arg("subscripts"), nb::arg("operands"),
      nb::sig("def einsum_path(subscripts: str, *operands)"),
      "The contraction order einsum uses and a report of its cost.");
  m.def(
      "view",
      [](const ScalarOrArray& a, Dtype dtype, const StreamArg& s) {
        return view(to_array(a.obj), dtype, s);
      },
      nb::arg(), nb::arg("dtype"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def view(a: scalar | array, dtype: Dtype, stream: StreamOrDevice = None) -> array"),
      "View the bytes of the array as another dtype (the last axis scales by\n"
      "the ratio of the item sizes).");
  m.def(
      "as_strided",
      [](const array& a, std::optional<std::vector<int>> shape,
         std::optional<std::vector<int64_t>> strides, int64_t offset, const StreamArg& s) {
        std::optional<Shape> sh;
        if (shape) sh = to_shape(*shape);
        std::optional<Strides> st;
        if (strides) st = Strides(strides->begin(), strides->end());
        return as_strided(a, sh, st, offset, s);
      },
      nb::arg(), nb::arg("shape").none() = nb::none(), nb::arg("strides").none() = nb::none(),
      nb::arg("offset") = 0, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def as_strided(a: array, /, shape: Sequence[int] | None = None, strides: "
              "Sequence[int] | None = None, offset: int = 0, *, stream: StreamOrDevice = None) "
              "-> array"),
      "A strided window (strides in elements) over the elements of ``a`` in C order.\n"
      "A window reaching outside the array raises (MLX reads past it).");
  m.def(
      "depends",
      [](nb::handle inputs, nb::handle dependencies) -> nb::object {
        std::vector<array> out = depends(arrays_of(inputs), arrays_of(dependencies));
        if (is_array(inputs)) return nb::cast(out[0]);
        nb::list items;
        for (auto& x : out) items.append(nb::cast(x));
        return items;
      },
      nb::arg("inputs"), nb::arg("dependencies"),
      nb::sig("def depends(inputs: array | Sequence[array], dependencies: array | "
              "Sequence[array])"),
      "The inputs unchanged, evaluated only after the dependencies.");
  m.def(
      "get_array_buffer_size",
      [](nb::args args) {
        std::unordered_set<const void*> seen;
        size_t total = 0;
        for (auto tree : args) {
          for (auto& a : python::tree_flatten(tree, false)) {
            if (!a.has_data()) {
              throw std::invalid_argument(
                  "[get_array_buffer_size] Arrays must be evaluated before querying buffer "
                  "size.");
            }
            const auto& data = a.data_shared_ptr();
            if (seen.insert(data.get()).second) total += data->size();
          }
        }
        return total;
      },
      nb::arg("args"), nb::sig("def get_array_buffer_size(*args) -> int"),
      "The size in bytes of the unique buffers behind the arrays of the\n"
      "arguments (trees; other leaves are ignored), at the allocator's size\n"
      "of each buffer. The arrays must be evaluated.");

  // Array methods.
  nb::object cls = m.attr("array");
  cls.attr("diag") =
      nb::cpp_function([](const array& a, int k, const StreamArg& s) { return diag(a, k, s); },
                       nb::is_method(), nb::scope(cls), nb::name("diag"), nb::arg("k") = 0,
                       nb::kw_only(), nb::arg("stream") = nb::none(), "See :func:`diag`.");
  cls.attr("diagonal") =
      nb::cpp_function([](const array& a, int offset, int axis1, int axis2,
                          const StreamArg& s) { return diagonal(a, offset, axis1, axis2, s); },
                       nb::is_method(), nb::scope(cls), nb::name("diagonal"), nb::arg("offset") = 0,
                       nb::arg("axis1") = 0, nb::arg("axis2") = 1, nb::arg("stream") = nb::none(),
                       "See :func:`diagonal`.");
  cls.attr("view") = nb::cpp_function(
      [](const array& a, Dtype dtype, const StreamArg& s) { return view(a, dtype, s); },
      nb::is_method(), nb::scope(cls), nb::name("view"), nb::arg("dtype"), nb::kw_only(),
      nb::arg("stream") = nb::none(), "See :func:`view`.");

  nb::module_ r = nb::borrow<nb::module_>(m.attr("random"));
  r.def(
      "permutation",
      [](nb::handle x, int axis, const std::optional<array>& key, const StreamArg& s) -> array {
        if (PyLong_Check(x.ptr())) {
          int overflow = 0;
          long long n = PyLong_AsLongLongAndOverflow(x.ptr(), &overflow);
          if (overflow != 0 || n < INT32_MIN || n > INT32_MAX) {
            throw std::overflow_error("Integer value " + nb::cast<std::string>(nb::str(x)) +
                                      " is outside the supported range [-2147483648, "
                                      "2147483647].");
          }
          return random::permutation(static_cast<int>(n), key, s);
        }
        return random::permutation(to_array(x), axis, key, s);
      },
      nb::arg("x"), nb::arg("axis") = 0, nb::arg("key").none() = nb::none(),
      nb::arg("stream") = nb::none(),
      nb::sig("def permutation(x: int | array, axis: int = 0, key: array | None = None, stream: "
              "StreamOrDevice = None) -> array"),
      "A random permutation of ``arange(x)`` (an int), or of ``x`` along ``axis``.");
  r.def(
      "truncated_normal",
      [](const ScalarOrArray& lower, const ScalarOrArray& upper,
         const std::optional<ShapeSeqArg>& shape, std::optional<Dtype> dtype,
         const std::optional<array>& key, const StreamArg& s) {
        std::optional<Shape> sh;
        if (shape) sh = to_shape(*shape);
        return random::truncated_normal(to_array(lower.obj), to_array(upper.obj), sh,
                                        dtype.value_or(float32), key, s);
      },
      nb::arg("lower"), nb::arg("upper"), nb::arg("shape").none() = nb::none(),
      nb::arg("dtype").none() = float32, nb::arg("key").none() = nb::none(),
      nb::arg("stream") = nb::none(),
      nb::sig("def truncated_normal(lower: scalar | array, upper: scalar | array, shape: "
              "Sequence[int] | None = None, dtype: Dtype | None = float32, key: array | None = "
              "None, stream: StreamOrDevice = None) -> array"),
      "Samples of the standard normal truncated to ``[lower, upper]``.");
}

} // namespace loom::bindings
