// Bindings of the quantization ops (loom/ops/quantized.h), with MLX 0.32.4's
// signatures.
#include "loom/ops/quantized.h"

#include <nanobind/stl/tuple.h>

#include "utils.h"

namespace loom::bindings {

void init_quantized(nb::module_& m) {
  m.def(
      "quantize",
      [](const array& w, std::optional<int> group_size, std::optional<int> bits,
         const std::string& mode, std::optional<array> global_scale, const StreamArg& s) {
        auto r = quantize(w, group_size, bits, mode, global_scale, s);
        nb::list out;
        for (auto& a : r) out.append(nb::cast(a));
        return nb::tuple(out);
      },
      nb::arg(), nb::arg("group_size").none() = nb::none(), nb::arg("bits").none() = nb::none(),
      // MLX's binding takes global_scale positionally too, whatever its text says.
      nb::arg("mode") = "affine", nb::arg("global_scale").none() = nb::none(), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def quantize(w: array, /, group_size: int | None = None, bits: int | None = None, "
              "mode: str = 'affine', *, global_scale: array | None = None, stream: "
              "StreamOrDevice = None) -> tuple[array, array, array]"),
      "Quantize ``w`` in groups of ``group_size`` consecutive elements of its last\n"
      "axis. Returns ``(w_q, scales, biases)`` for ``mode='affine'`` and\n"
      "``(w_q, scales)`` for ``'mxfp4'``, ``'mxfp8'`` and ``'nvfp4'``; the packing is\n"
      "MLX's, bit for bit.");

  m.def(
      "dequantize",
      [](const array& w, const array& scales, std::optional<array> biases,
         std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
         std::optional<array> global_scale, std::optional<Dtype> dtype, const StreamArg& s) {
        return dequantize(w, scales, biases, group_size, bits, mode, global_scale, dtype, s);
      },
      nb::arg(), nb::arg("scales"), nb::arg("biases").none() = nb::none(),
      nb::arg("group_size").none() = nb::none(), nb::arg("bits").none() = nb::none(),
      nb::arg("mode") = "affine", nb::arg("global_scale").none() = nb::none(),
      nb::arg("dtype").none() = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def dequantize(w: array, /, scales: array, biases: array | None = None, "
              "group_size: int | None = None, bits: int | None = None, mode: str = 'affine', "
              "global_scale: array | None = None, dtype: Dtype | None = None, *, stream: "
              "StreamOrDevice = None) -> array"),
      "Dequantize ``w`` with its scales (and biases, for affine quantization).");

  m.def(
      "quantized_matmul",
      [](const array& x, const array& w, const array& scales, std::optional<array> biases,
         bool transpose, std::optional<int> group_size, std::optional<int> bits,
         const std::string& mode, const StreamArg& s) {
        return quantized_matmul(x, w, scales, biases, transpose, group_size, bits, mode, s);
      },
      nb::arg(), nb::arg(), nb::arg("scales"), nb::arg("biases").none() = nb::none(),
      nb::arg("transpose") = true, nb::arg("group_size").none() = nb::none(),
      nb::arg("bits").none() = nb::none(), nb::arg("mode") = "affine", nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def quantized_matmul(x: array, w: array, /, scales: array, biases: array | None = "
              "None, transpose: bool = True, group_size: int | None = None, bits: int | None = "
              "None, mode: str = 'affine', *, stream: StreamOrDevice = None) -> array"),
      "``x @ w.T`` (or ``x @ w`` with ``transpose=False``) for a quantized ``w``.");

  m.def(
      "gather_qmm",
      [](const array& x, const array& w, const array& scales, std::optional<array> biases,
         std::optional<array> lhs_indices, std::optional<array> rhs_indices, bool transpose,
         std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
         std::optional<array> global_scale, bool sorted_indices, const StreamArg& s) {
        return gather_qmm(x, w, scales, biases, lhs_indices, rhs_indices, transpose, group_size,
                          bits, mode, global_scale, sorted_indices, s);
      },
      nb::arg(), nb::arg(), nb::arg("scales"), nb::arg("biases").none() = nb::none(),
      nb::arg("lhs_indices").none() = nb::none(), nb::arg("rhs_indices").none() = nb::none(),
      nb::arg("transpose") = true, nb::arg("group_size").none() = nb::none(),
      nb::arg("bits").none() = nb::none(), nb::arg("mode") = "affine",
      nb::arg("global_scale").none() = nb::none(), nb::kw_only(), nb::arg("sorted_indices") = false,
      nb::arg("stream") = nb::none(),
      nb::sig("def gather_qmm(x: array, w: array, /, scales: array, biases: array | None = None, "
              "lhs_indices: array | None = None, rhs_indices: array | None = None, transpose: "
              "bool = True, group_size: int | None = None, bits: int | None = None, mode: str = "
              "'affine', global_scale: array | None = None, *, sorted_indices: bool = False, "
              "stream: StreamOrDevice = None) -> array"),
      "Quantized matrix multiplication with matrix-level gather over the batch axes.");

  m.def(
      "qqmm",
      [](const array& x, const array& w, std::optional<array> scales, std::optional<int> group_size,
         std::optional<int> bits, const std::string& mode, std::optional<array> global_scale_x,
         std::optional<array> global_scale_w, const StreamArg& s) {
        return qqmm(x, w, scales, group_size, bits, mode, global_scale_x, global_scale_w, s);
      },
      // x and w are positional-only in MLX's binding (its text omits the '/').
      nb::arg(), nb::arg(), nb::arg("scales").none() = nb::none(),
      nb::arg("group_size").none() = nb::none(), nb::arg("bits").none() = nb::none(),
      nb::arg("mode") = "nvfp4", nb::arg("global_scale_x").none() = nb::none(),
      nb::arg("global_scale_w").none() = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def qqmm(x: array, w: array, scales: array | None = None, group_size: int | None "
              "= None, bits: int | None = None, mode: str = 'nvfp4', global_scale_x: array | "
              "None = None, global_scale_w: array | None = None, *, stream: StreamOrDevice = "
              "None) -> array"),
      "``x @ w.T`` with ``x`` quantized on the fly (and ``w`` too unless ``scales``\n"
      "says it is quantized already).");

  m.def(
      "gather_qqmm",
      [](const array& x, const array& w, std::optional<array> scales,
         std::optional<array> lhs_indices, std::optional<array> rhs_indices,
         std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
         std::optional<array> global_scale_x, std::optional<array> global_scale_w,
         bool sorted_indices, const StreamArg& s) {
        return gather_qqmm(x, w, scales, lhs_indices, rhs_indices, group_size, bits, mode,
                           global_scale_x, global_scale_w, sorted_indices, s);
      },
      nb::arg(), nb::arg(), nb::arg("scales").none() = nb::none(),
      nb::arg("lhs_indices").none() = nb::none(), nb::arg("rhs_indices").none() = nb::none(),
      nb::arg("group_size").none() = nb::none(), nb::arg("bits").none() = nb::none(),
      nb::arg("mode") = "nvfp4", nb::arg("global_scale_x").none() = nb::none(),
      nb::arg("global_scale_w").none() = nb::none(), nb::kw_only(),
      nb::arg("sorted_indices") = false, nb::arg("stream") = nb::none(),
      nb::sig("def gather_qqmm(x: array, w: array, /, scales: array | None = None, lhs_indices: "
              "array | None = None, rhs_indices: array | None = None, group_size: int | None = "
              "None, bits: int | None = None, mode: str = 'nvfp4', global_scale_x: array | None "
              "= None, global_scale_w: array | None = None, *, sorted_indices: bool = False, "
              "stream: StreamOrDevice = None) -> array"),
      "Fused :func:`qqmm` with matrix-level gather.");

  m.def(
      "to_fp8", [](const array& x, const StreamArg& s) { return to_fp8(x, s); }, nb::arg(),
      nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def to_fp8(x: array, *, stream: StreamOrDevice = None) -> array"),
      "Convert the array to fp8 (e4m3) codes of type ``uint8``.");
  m.def(
      "from_fp8",
      [](const array& x, Dtype dtype, const StreamArg& s) { return from_fp8(x, dtype, s); },
      nb::arg(), nb::arg("dtype") = bfloat16, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def from_fp8(x: array, dtype: Dtype = bfloat16, *, stream: StreamOrDevice = "
              "None) -> array"),
      "Convert fp8 (e4m3) codes of type ``uint8`` to a floating type.");
}

} // namespace loom::bindings
