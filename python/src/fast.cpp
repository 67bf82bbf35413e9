// The loom.core.fast submodule (MLX's mx.fast): argument conversion only.
#include "utils.h"

namespace loom::bindings {

namespace {

const char* kNoMetal = "[metal_kernel] No Metal back-end.";
const char* kNoCuda = "[cuda_kernel] No CUDA back-end.";

} // namespace

void init_fast(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("fast", "Fused kernels (MLX's mx.fast).");
  m.attr("__name__") = "loom.core.fast";
  nb::module_::import_("sys").attr("modules")["loom.core.fast"] = m;

  m.def(
      "rms_norm",
      [](const array& x, const std::optional<array>& weight, float eps, const StreamArg& s) {
        return fast::rms_norm(x, weight, eps, s);
      },
      nb::arg("x"), nb::arg("weight").none(), nb::arg("eps"), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def rms_norm(x: array, weight: array | None, eps: float, *, stream: "
              "StreamOrDevice = None) -> array"),
      "Root mean square normalisation over the last axis, then an optional\n"
      "1-D ``weight``. Statistics accumulate in float32 (float64 for float64).");
  m.def(
      "layer_norm",
      [](const array& x, const std::optional<array>& weight, const std::optional<array>& bias,
         float eps, const StreamArg& s) { return fast::layer_norm(x, weight, bias, eps, s); },
      nb::arg("x"), nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("eps"), nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def layer_norm(x: array, weight: array | None, bias: array | None, eps: float, *, "
              "stream: StreamOrDevice = None) -> array"),
      "Layer normalisation over the last axis, then optional 1-D ``weight``\n"
      "and ``bias``.");
  m.def(
      "rope",
      [](const array& a, int dims, bool traditional, std::optional<float> base, float scale,
         nb::handle offset, const std::optional<array>& freqs, const StreamArg& s) {
        array off = PyLong_Check(offset.ptr()) ? array(nb::cast<int>(offset)) : to_array(offset);
        return fast::rope(a, dims, traditional, base, scale, off, freqs, s);
      },
      nb::arg("a"), nb::arg("dims"), nb::kw_only(), nb::arg("traditional"), nb::arg("base").none(),
      nb::arg("scale"), nb::arg("offset"), nb::arg("freqs").none() = nb::none(),
      nb::arg("stream") = nb::none(),
      nb::sig("def rope(a: array, dims: int, *, traditional: bool, base: float | None, scale: "
              "float, offset: int | array, freqs: array | None = None, stream: StreamOrDevice = "
              "None) -> array"),
      "Rotary positional encoding of the first ``dims`` features of a\n"
      "``(B, *, T, D)`` input; ``offset`` may be an array with one entry per\n"
      "batch element. Exactly one of ``base`` and ``freqs`` is given.");
  m.def(
      "scaled_dot_product_attention",
      [](const array& q, const array& k, const array& v, float scale, nb::handle mask,
         const std::optional<array>& sinks, bool /*force_fused*/, const StreamArg& s) {
        std::string mode;
        std::optional<array> m;
        if (nb::isinstance<nb::str>(mask)) {
          mode = nb::cast<std::string>(mask);
          if (mode.empty()) {
            throw std::invalid_argument(
                "[scaled_dot_product_attention] invalid mask option ''. Must be 'causal', or an "
                "array.");
          }
        } else if (!mask.is_none()) {
          m = to_array(mask);
        }
        return fast::scaled_dot_product_attention(q, k, v, scale, mode, m, sinks, s);
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::kw_only(), nb::arg("scale"),
      nb::arg("mask").none() = nb::none(), nb::arg("sinks").none() = nb::none(),
      nb::arg("force_fused") = false, nb::arg("stream") = nb::none(),
      nb::sig("def scaled_dot_product_attention(q: array, k: array, v: array, *, scale: float, "
              "mask: None | str | array = None, sinks: array | None = None, force_fused: bool = "
              "False, stream: StreamOrDevice = None) -> array"),
      "``softmax(scale * q @ k.T + mask) @ v`` over ``[B, N, T, D]`` inputs in\n"
      "one fused node (grouped-query heads, boolean/additive/\"causal\" masks,\n"
      "attention sinks). The CPU kernel always runs fused, so ``force_fused``\n"
      "changes nothing.");
  m.def(
      "cross_entropy",
      [](const array& logits, const array& targets, const StreamArg& s) {
        return fast::cross_entropy(logits, targets, s);
      },
      nb::arg("logits"), nb::arg("targets"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def cross_entropy(logits: array, targets: array, *, stream: StreamOrDevice = None) "
              "-> array"),
      "``logsumexp(logits, -1) - logits[..., target]`` in one pass, in float32.\n"
      "A target outside ``[0, classes)`` gives NaN (MLX reads past the row).");
  m.def(
      "gated_delta_update",
      [](const array& q, const array& k, const array& v, const array& gamma, const array& beta,
         const std::optional<array>& state, const std::optional<array>& mask, const StreamArg& s) {
        auto out = fast::gated_delta_update(q, k, v, gamma, beta, state, mask, s);
        nb::list items;
        for (auto& x : out) items.append(nb::cast(x));
        return items;
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("gamma"), nb::arg("beta"),
      nb::arg("initial_state").none() = nb::none(), nb::arg("mask").none() = nb::none(),
      nb::arg("stream") = nb::none(),
      nb::sig("def gated_delta_update(q: array, k: array, v: array, gamma: array, beta: array, "
              "initial_state: array | None = None, mask: array | None = None, stream: "
              "StreamOrDevice = None) -> list[array]"),
      "The gated delta rule over time. q, k: ``[B, T, Hk, Dk]``; v: ``[B, T, Hv,\n"
      "Dv]``; gamma: ``[B, T, Hv]`` or ``[B, T, Hv, Dk]``; beta: ``[B, T, Hv]``;\n"
      "initial_state: ``[B, Hv, Dv, Dk]``; mask: ``[B, T]``. Returns\n"
      "``[y [B, T, Hv, Dv], final_state [B, Hv, Dv, Dk] (float32)]``.");

  // Custom kernels: MLX's Linux CPU wheel builds the Metal kernel object and
  // raises when it is called; the CUDA ones raise at once.
  m.def(
      "metal_kernel",
      [](const std::string&, const std::vector<std::string>&, const std::vector<std::string>&,
         const std::string&, const std::string&, bool, bool, nb::handle) {
        return nb::cpp_function(
            [](nb::kwargs) -> nb::object { throw std::runtime_error(kNoMetal); });
      },
      nb::arg("name"), nb::arg("input_names"), nb::arg("output_names"), nb::arg("source"),
      nb::arg("header") = "", nb::arg("ensure_row_contiguous") = true,
      nb::arg("atomic_outputs") = false, nb::arg("compile_options").none() = nb::none(),
      "A custom Metal kernel. There is no Metal back-end here: calling the\n"
      "returned kernel raises ``RuntimeError``.");
  m.def(
      "cuda_kernel", [](nb::args, nb::kwargs) -> nb::object { throw std::runtime_error(kNoCuda); },
      "A custom CUDA kernel: raises ``RuntimeError`` until Loom's CUDA\n"
      "back-end provides custom kernels.");
  m.def(
      "precompiled_cuda_kernel",
      [](nb::args, nb::kwargs) -> nb::object { throw std::runtime_error(kNoCuda); },
      "A precompiled CUDA kernel: raises ``RuntimeError`` until Loom's CUDA\n"
      "back-end provides custom kernels.");
}

} // namespace loom::bindings
