// mx.fast: fused normalisations, rotary embedding, attention, cross
// entropy and the gated delta rule. Each is one node (primitives/fast.h)
// whose kernel matches the composite definition within rounding.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loom/array.h"

namespace loom::fast {

array rms_norm(const array& x, const std::optional<array>& weight, float eps,
               StreamOrDevice s = {});
array layer_norm(const array& x, const std::optional<array>& weight,
                 const std::optional<array>& bias, float eps, StreamOrDevice s = {});
// Exactly one of base and freqs is given; offset is an int or an integer
// array (scalar or one per batch entry).
array rope(const array& x, int dims, bool traditional, std::optional<float> base, float scale,
           const array& offset, const std::optional<array>& freqs = std::nullopt,
           StreamOrDevice s = {});
// mask_mode: "" (none or the array `mask`) or "causal".
array scaled_dot_product_attention(const array& q, const array& k, const array& v, float scale,
                                   const std::string& mask_mode = "",
                                   const std::optional<array>& mask = std::nullopt,
                                   const std::optional<array>& sinks = std::nullopt,
                                   StreamOrDevice s = {});
array cross_entropy(const array& logits, const array& targets, StreamOrDevice s = {});
// Returns {y, final_state}.
std::vector<array> gated_delta_update(const array& q, const array& k, const array& v,
                                      const array& g, const array& beta,
                                      const std::optional<array>& state = std::nullopt,
                                      const std::optional<array>& mask = std::nullopt,
                                      StreamOrDevice s = {});

} // namespace loom::fast
