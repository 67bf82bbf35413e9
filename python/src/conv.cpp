// Bindings of the convolution ops (loom/ops/conv.h). The per-axis arguments
// take MLX's forms: an int for every axis or a tuple with one per axis
// (conv2d/conv3d), any sequence (conv_general), and for conv_general's
// padding also a (low, high) pair of sequences.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include "utils.h"

namespace loom::bindings {

namespace {

using Int2 = std::variant<int, std::pair<int, int>>;
using Int3 = std::variant<int, std::tuple<int, int, int>>;
using IntOrSeq = std::variant<int, std::vector<int>>;
using Padding = std::variant<int, std::vector<int>, std::pair<std::vector<int>, std::vector<int>>>;

std::vector<int> per_axis(const Int2& v) {
  if (auto* i = std::get_if<int>(&v)) return {*i, *i};
  auto [a, b] = std::get<std::pair<int, int>>(v);
  return {a, b};
}

std::vector<int> per_axis(const Int3& v) {
  if (auto* i = std::get_if<int>(&v)) return {*i, *i, *i};
  auto [a, b, c] = std::get<std::tuple<int, int, int>>(v);
  return {a, b, c};
}

std::vector<int> per_axis(const IntOrSeq& v) {
  if (auto* i = std::get_if<int>(&v)) return {*i};
  return std::get<std::vector<int>>(v);
}

} // namespace

void init_conv(nb::module_& m) {
  m.def(
      "conv1d",
      [](const array& in, const array& w, int stride, int padding, int dilation, int groups,
         const StreamArg& s) { return conv1d(in, w, stride, padding, dilation, groups, s); },
      nb::arg(), nb::arg(), nb::arg("stride") = 1, nb::arg("padding") = 0, nb::arg("dilation") = 1,
      nb::arg("groups") = 1, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def conv1d(input: array, weight: array, /, stride: int = 1, padding: int = 0, "
              "dilation: int = 1, groups: int = 1, *, stream: StreamOrDevice = None) -> array"),
      "1-D convolution over an input with several channels.\n\n"
      "Args:\n    input (array): Input array of shape ``(N, L, C_in)``.\n"
      "    weight (array): Weight array of shape ``(C_out, K, C_in / groups)``.\n"
      "    stride (int, optional): Kernel stride. Default: ``1``.\n"
      "    padding (int, optional): Input padding. Default: ``0``.\n"
      "    dilation (int, optional): Kernel dilation. Default: ``1``.\n"
      "    groups (int, optional): Input feature groups. Default: ``1``.\n\n"
      "Returns:\n    array: The convolved array.");
  m.def(
      "conv2d",
      [](const array& in, const array& w, const Int2& stride, const Int2& padding,
         const Int2& dilation, int groups, const StreamArg& s) {
        return conv2d(in, w, per_axis(stride), per_axis(padding), per_axis(dilation), groups, s);
      },
      nb::arg(), nb::arg(), nb::arg("stride") = 1, nb::arg("padding") = 0, nb::arg("dilation") = 1,
      nb::arg("groups") = 1, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def conv2d(input: array, weight: array, /, stride: int | tuple[int, int] = 1, "
              "padding: int | tuple[int, int] = 0, dilation: int | tuple[int, int] = 1, groups: "
              "int = 1, *, stream: StreamOrDevice = None) -> array"),
      "2-D convolution over an input with several channels.\n\n"
      "Args:\n    input (array): Input array of shape ``(N, H, W, C_in)``.\n"
      "    weight (array): Weight array of shape ``(C_out, KH, KW, C_in / groups)``.\n"
      "    stride (int or tuple(int), optional): Kernel stride. Default: ``1``.\n"
      "    padding (int or tuple(int), optional): Symmetric input padding. Default: ``0``.\n"
      "    dilation (int or tuple(int), optional): Kernel dilation. Default: ``1``.\n"
      "    groups (int, optional): Input feature groups. Default: ``1``.\n\n"
      "Returns:\n    array: The convolved array.");
  m.def(
      "conv3d",
      [](const array& in, const array& w, const Int3& stride, const Int3& padding,
         const Int3& dilation, int groups, const StreamArg& s) {
        return conv3d(in, w, per_axis(stride), per_axis(padding), per_axis(dilation), groups, s);
      },
      nb::arg(), nb::arg(), nb::arg("stride") = 1, nb::arg("padding") = 0, nb::arg("dilation") = 1,
      nb::arg("groups") = 1, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def conv3d(input: array, weight: array, /, stride: int | tuple[int, int, int] = 1, "
              "padding: int | tuple[int, int, int] = 0, dilation: int | tuple[int, int, int] = "
              "1, groups: int = 1, *, stream: StreamOrDevice = None) -> array"),
      "3-D convolution over an input with several channels.\n\n"
      "Args:\n    input (array): Input array of shape ``(N, D, H, W, C_in)``.\n"
      "    weight (array): Weight array of shape ``(C_out, KD, KH, KW, C_in / groups)``.\n"
      "    stride, padding, dilation (int or tuple(int), optional): Per-axis values.\n"
      "    groups (int, optional): Input feature groups. Default: ``1``.\n\n"
      "Returns:\n    array: The convolved array.");
  m.def(
      "conv_general",
      [](const array& in, const array& w, const IntOrSeq& stride, const Padding& padding,
         const IntOrSeq& kernel_dilation, const IntOrSeq& input_dilation, int groups, bool flip,
         const StreamArg& s) {
        std::vector<int> lo, hi;
        if (auto* i = std::get_if<int>(&padding)) {
          lo = hi = {*i};
        } else if (auto* v = std::get_if<std::vector<int>>(&padding)) {
          lo = hi = *v;
        } else {
          std::tie(lo, hi) = std::get<std::pair<std::vector<int>, std::vector<int>>>(padding);
        }
        return conv_general(in, w, per_axis(stride), lo, hi, per_axis(kernel_dilation),
                            per_axis(input_dilation), groups, flip, s);
      },
      nb::arg(), nb::arg(), nb::arg("stride") = 1, nb::arg("padding") = 0,
      nb::arg("kernel_dilation") = 1, nb::arg("input_dilation") = 1, nb::arg("groups") = 1,
      nb::arg("flip") = false, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def conv_general(input: array, weight: array, /, stride: int | Sequence[int] = 1, "
              "padding: int | Sequence[int] | tuple[Sequence[int], Sequence[int]] = 0, "
              "kernel_dilation: int | Sequence[int] = 1, input_dilation: int | Sequence[int] = "
              "1, groups: int = 1, flip: bool = False, *, stream: StreamOrDevice = None) -> "
              "array"),
      "General convolution over an input with several channels.\n\n"
      "Args:\n    input (array): Input array of shape ``(N, ..., C_in)``.\n"
      "    weight (array): Weight array of shape ``(C_out, ..., C_in / groups)``.\n"
      "    stride (int or list(int), optional): Kernel stride. Default: ``1``.\n"
      "    padding (int, list(int) or tuple(list(int), list(int)), optional): Input padding;\n"
      "        a pair of lists gives the low and high padding. Default: ``0``.\n"
      "    kernel_dilation (int or list(int), optional): Kernel dilation. Default: ``1``.\n"
      "    input_dilation (int or list(int), optional): Input dilation. Default: ``1``.\n"
      "    groups (int, optional): Input feature groups. Default: ``1``.\n"
      "    flip (bool, optional): Flip the kernel (convolution rather than\n"
      "        cross-correlation). Default: ``False``.\n\n"
      "Returns:\n    array: The convolved array.");
  m.def(
      "conv_transpose1d",
      [](const array& in, const array& w, int stride, int padding, int dilation, int output_padding,
         int groups, const StreamArg& s) {
        return conv_transpose1d(in, w, stride, padding, dilation, output_padding, groups, s);
      },
      nb::arg(), nb::arg(), nb::arg("stride") = 1, nb::arg("padding") = 0, nb::arg("dilation") = 1,
      nb::arg("output_padding") = 0, nb::arg("groups") = 1, nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def conv_transpose1d(input: array, weight: array, /, stride: int = 1, padding: int "
              "= 0, dilation: int = 1, output_padding: int = 0, groups: int = 1, *, stream: "
              "StreamOrDevice = None) -> array"),
      "1-D transposed convolution.\n\n"
      "Args:\n    input (array): Input array of shape ``(N, L, C_in)``.\n"
      "    weight (array): Weight array of shape ``(C_out, K, C_in / groups)``.\n"
      "    stride, padding, dilation, output_padding, groups (int, optional).\n\n"
      "Returns:\n    array: The convolved array.");
  m.def(
      "conv_transpose2d",
      [](const array& in, const array& w, const Int2& stride, const Int2& padding,
         const Int2& dilation, const Int2& output_padding, int groups, const StreamArg& s) {
        return conv_transpose2d(in, w, per_axis(stride), per_axis(padding), per_axis(dilation),
                                per_axis(output_padding), groups, s);
      },
      nb::arg(), nb::arg(), nb::arg("stride") = 1, nb::arg("padding") = 0, nb::arg("dilation") = 1,
      nb::arg("output_padding") = 0, nb::arg("groups") = 1, nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def conv_transpose2d(input: array, weight: array, /, stride: int | tuple[int, int] "
              "= 1, padding: int | tuple[int, int] = 0, dilation: int | tuple[int, int] = 1, "
              "output_padding: int | tuple[int, int] = 0, groups: int = 1, *, stream: "
              "StreamOrDevice = None) -> array"),
      "2-D transposed convolution.\n\n"
      "Args:\n    input (array): Input array of shape ``(N, H, W, C_in)``.\n"
      "    weight (array): Weight array of shape ``(C_out, KH, KW, C_in / groups)``.\n"
      "    stride, padding, dilation, output_padding (int or tuple(int), optional).\n"
      "    groups (int, optional): Input feature groups. Default: ``1``.\n\n"
      "Returns:\n    array: The convolved array.");
  m.def(
      "conv_transpose3d",
      [](const array& in, const array& w, const Int3& stride, const Int3& padding,
         const Int3& dilation, const Int3& output_padding, int groups, const StreamArg& s) {
        return conv_transpose3d(in, w, per_axis(stride), per_axis(padding), per_axis(dilation),
                                per_axis(output_padding), groups, s);
      },
      nb::arg(), nb::arg(), nb::arg("stride") = 1, nb::arg("padding") = 0, nb::arg("dilation") = 1,
      nb::arg("output_padding") = 0, nb::arg("groups") = 1, nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def conv_transpose3d(input: array, weight: array, /, stride: int | tuple[int, int, "
              "int] = 1, padding: int | tuple[int, int, int] = 0, dilation: int | tuple[int, "
              "int, int] = 1, output_padding: int | tuple[int, int, int] = 0, groups: int = 1, *, "
              "stream: StreamOrDevice = None) -> array"),
      "3-D transposed convolution.\n\n"
      "Args:\n    input (array): Input array of shape ``(N, D, H, W, C_in)``.\n"
      "    weight (array): Weight array of shape ``(C_out, KD, KH, KW, C_in / groups)``.\n"
      "    stride, padding, dilation, output_padding (int or tuple(int), optional).\n"
      "    groups (int, optional): Input feature groups. Default: ``1``.\n\n"
      "Returns:\n    array: The convolved array.");
  m.def(
      "convolve",
      [](const array& a, const array& v, const std::string& mode, const StreamArg& s) {
        return convolve(a, v, mode, s);
      },
      nb::arg(), nb::arg(), nb::arg("mode") = "full", nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def convolve(a: array, v: array, /, mode: str = \"full\", *, stream: "
              "StreamOrDevice = None) -> array"),
      "The discrete convolution of 1-D arrays, as NumPy's ``convolve``.\n\n"
      "Args:\n    a (array): 1-D input array.\n    v (array): 1-D input array.\n"
      "    mode (str, optional): ``\"full\"``, ``\"same\"`` or ``\"valid\"``. Default: "
      "``\"full\"``.\n\n"
      "Returns:\n    array: The convolution of ``a`` and ``v``.");
}

} // namespace loom::bindings
