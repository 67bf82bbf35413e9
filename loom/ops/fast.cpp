// mx.fast ops: MLX's argument checks and dtype rules, then one fused node.
// Inputs are cast to the result dtype here, so each kernel sees one dtype.
#include "loom/ops/fast.h"

#include <memory>
#include <stdexcept>

#include "loom/ops/creation.h"
#include "loom/ops/shape.h"
#include "loom/ops/utils.h"
#include "loom/primitives/fast.h"

namespace loom::fast {

namespace {

[[noreturn]] void fail(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string("[") + op + "] " + what);
}

array cast(const array& a, Dtype d, Stream s) { return a.dtype() == d ? a : astype(a, d, s); }

void check_float_input(const array& x, const char* op) {
  if (!is_floating_point(x.dtype()))
    fail(op, "Received unsupported type " + dtype_name(x.dtype()) + ".");
  if (x.ndim() == 0) {
    fail(op, "Input must have at least 1 dimension but got input with 0 dimensions.");
  }
}

void check_param(const array& p, const array& x, const char* op, const std::string& what) {
  if (p.ndim() != 1) {
    fail(op, what + " must have 1 dimension but has " + std::to_string(p.ndim()) + " dimensions.");
  }
  if (p.shape(0) != x.shape(-1)) {
    fail(op, what + " must have the same size as the last dimension of x but has " +
                 std::to_string(p.shape(0)) + " elements.");
  }
}

} // namespace

array rms_norm(const array& x, const std::optional<array>& weight, float eps, StreamOrDevice s) {
  check_float_input(x, "rms_norm");
  Dtype out = x.dtype();
  if (weight) {
    check_param(*weight, x, "rms_norm", "(*weight)");
    out = promote_types(out, weight->dtype());
  }
  Stream st = to_stream(s);
  std::vector<array> in{cast(x, out, st)};
  if (weight) in.push_back(cast(*weight, out, st));
  return array(x.shape(), out, std::make_shared<RMSNorm>(st, eps, weight.has_value()),
               std::move(in));
}

array layer_norm(const array& x, const std::optional<array>& weight,
                 const std::optional<array>& bias, float eps, StreamOrDevice s) {
  check_float_input(x, "layer_norm");
  Dtype out = x.dtype();
  if (weight) {
    check_param(*weight, x, "layer_norm", "weight");
    out = promote_types(out, weight->dtype());
  }
  if (bias) {
    check_param(*bias, x, "layer_norm", "bias");
    out = promote_types(out, bias->dtype());
  }
  Stream st = to_stream(s);
  std::vector<array> in{cast(x, out, st)};
  if (weight) in.push_back(cast(*weight, out, st));
  if (bias) in.push_back(cast(*bias, out, st));
  return array(x.shape(), out,
               std::make_shared<LayerNorm>(st, eps, weight.has_value(), bias.has_value()),
               std::move(in));
}

array rope(const array& x, int dims, bool traditional, std::optional<float> base, float scale,
           const array& offset, const std::optional<array>& freqs, StreamOrDevice s) {
  if (x.ndim() < 3) {
    fail("rope", "Input must have at least 3 dimensions but got input with " +
                     std::to_string(x.ndim()) + " dimensions.");
  }
  if (!is_floating_point(x.dtype())) {
    fail("rope", "Input must be a floating type but got " + dtype_name(x.dtype()) + ".");
  }
  if (dims % 2 != 0) fail("rope", "dims must be even but got " + std::to_string(dims) + ".");
  if (dims > x.shape(-1) || dims <= 0) {
    fail("rope", "dims must not exceed the input's last dimension (" + std::to_string(x.shape(-1)) +
                     ") but got " + std::to_string(dims) + ".");
  }
  if (base && freqs) fail("rope", "Only one of base or freqs can have a value.");
  if (!base && !freqs) fail("rope", "Neither base nor freqs has a value.");
  if (freqs && (freqs->ndim() != 1 || freqs->shape(0) != dims / 2)) {
    fail("rope", "freqs must be one dimensional with size " + std::to_string(dims / 2) +
                     " but got shape " + shape_to_string(freqs->shape()) + ".");
  }
  if (!is_integral(offset.dtype())) {
    fail("rope", "offset must be an integer but got type " + dtype_name(offset.dtype()) + ".");
  }
  if (offset.size() != 1 && (offset.ndim() != 1 || offset.shape(0) != x.shape(0))) {
    fail("rope", "offset must be a scalar or vector with " + std::to_string(x.shape(0)) +
                     " elements but has shape " + shape_to_string(offset.shape()) + ".");
  }
  Stream st = to_stream(s);
  std::vector<array> in{x, cast(offset, int32, st)};
  if (freqs) in.push_back(cast(*freqs, float32, st));
  const double b = base ? static_cast<double>(*base) : 0.0;
  return array(x.shape(), x.dtype(), std::make_shared<RoPE>(st, dims, traditional, b, scale, true),
               std::move(in));
}

array scaled_dot_product_attention(const array& q, const array& k, const array& v, float scale,
                                   const std::string& mask_mode, const std::optional<array>& mask,
                                   const std::optional<array>& sinks, StreamOrDevice s) {
  const char* op = "scaled_dot_product_attention";
  for (const array* a : {&q, &k, &v}) {
    if (a->ndim() != 4) {
      fail(op, "input with shape " + shape_to_string(a->shape()) + " expected to be rank 4");
    }
  }
  if (!mask_mode.empty() && mask_mode != "causal") {
    fail(op, "invalid mask option '" + mask_mode + "'. Must be 'causal', or an array.");
  }
  if (q.shape(-1) != k.shape(-1)) {
    fail(op, "query, keys expected to have matching last dimension; found query shape " +
                 shape_to_string(q.shape()) + " for keys shape " + shape_to_string(k.shape()) +
                 ".");
  }
  if (k.shape(0) != q.shape(0) || v.shape(0) != q.shape(0) || k.shape(1) != v.shape(1) ||
      k.shape(2) != v.shape(2)) {
    fail(op, "keys and values with shapes " + shape_to_string(k.shape()) + " and " +
                 shape_to_string(v.shape()) + " do not match each other or queries with shape " +
                 shape_to_string(q.shape()) + ".");
  }
  if (q.shape(1) % k.shape(1) != 0) {
    fail(op, "n_heads must be a multiple of n_kv_heads, found n_heads " +
                 std::to_string(q.shape(1)) + " for n_kv_heads " + std::to_string(k.shape(1)) +
                 ".");
  }
  Dtype out = promote_types(promote_types(q.dtype(), k.dtype()), v.dtype());
  if (!is_floating_point(out)) out = float32;
  Stream st = to_stream(s);
  std::vector<array> in{cast(q, out, st), cast(k, out, st), cast(v, out, st)};
  std::string mode = mask_mode.empty() ? "none" : mask_mode;
  if (mask && mask_mode.empty()) {
    if (mask->ndim() > 4) {
      fail(op, "the mask with shape " + shape_to_string(mask->shape()) +
                   " expected to have at most rank 4.");
    }
    Shape full{q.shape(0), q.shape(1), q.shape(2), k.shape(2)};
    broadcast_shapes(mask->shape(), full); // raises on a mismatch
    array m = *mask;
    if (m.dtype() != bool_) {
      if (promote_types(m.dtype(), out) != out) {
        fail(op, "Mask type must promote to output type " + dtype_name(out) + ".");
      }
      m = cast(m, out, st);
    }
    in.push_back(broadcast_to(m, full, st));
    mode = "array";
  }
  if (sinks) {
    if (sinks->ndim() != 1 || sinks->shape(0) != q.shape(1)) {
      fail(op, "Received invalid shape for sinks " + shape_to_string(sinks->shape()) + ".");
    }
    in.push_back(cast(*sinks, out, st));
  }
  Shape shape = q.shape();
  shape.back() = v.shape(-1);
  return array(std::move(shape), out,
               std::make_shared<ScaledDotProductAttention>(st, scale, mode, sinks.has_value()),
               std::move(in));
}

array cross_entropy(const array& logits, const array& targets, StreamOrDevice s) {
  if (!is_floating_point(logits.dtype())) {
    fail("cross_entropy",
         "logits must be floating point but got " + dtype_name(logits.dtype()) + ".");
  }
  if (!is_integral(targets.dtype())) {
    fail("cross_entropy",
         "targets must be integer class indices but got " + dtype_name(targets.dtype()) + ".");
  }
  Shape expected(logits.shape().begin(), logits.shape().end() - (logits.ndim() > 0 ? 1 : 0));
  if (logits.ndim() == 0 || targets.shape() != expected) {
    fail("cross_entropy", "targets shape " + shape_to_string(targets.shape()) +
                              " does not match logits shape " + shape_to_string(logits.shape()) +
                              " with the last axis removed.");
  }
  Stream st = to_stream(s);
  return array(targets.shape(), float32, std::make_shared<CrossEntropy>(st),
               {logits, cast(targets, int32, st)});
}

std::vector<array> gated_delta_update(const array& q, const array& k, const array& v,
                                      const array& g, const array& beta,
                                      const std::optional<array>& state,
                                      const std::optional<array>& mask, StreamOrDevice s) {
  const char* op = "gated_delta_update";
  if (q.ndim() != 4 || k.shape() != q.shape() || v.ndim() != 4) {
    fail(op, "q and k must have shape [B, T, Hk, Dk] and v [B, T, Hv, Dv]; got " +
                 shape_to_string(q.shape()) + ", " + shape_to_string(k.shape()) + " and " +
                 shape_to_string(v.shape()) + ".");
  }
  const int B = q.shape(0), T = q.shape(1), Hk = q.shape(2), Dk = q.shape(3);
  const int Hv = v.shape(2), Dv = v.shape(3);
  if (v.shape(0) != B || v.shape(1) != T || Hv % Hk != 0) {
    fail(op, "v with shape " + shape_to_string(v.shape()) +
                 " must share B and T with q and have a multiple of its " + std::to_string(Hk) +
                 " heads.");
  }
  const Shape gate{B, T, Hv};
  Shape gate_dk = gate;
  gate_dk.push_back(Dk);
  if (g.shape() != gate && g.shape() != gate_dk) {
    fail(op, "gamma must have shape " + shape_to_string(gate) + " or " + shape_to_string(gate_dk) +
                 " but got " + shape_to_string(g.shape()) + ".");
  }
  if (beta.shape() != gate) {
    fail(op, "beta must have shape " + shape_to_string(gate) + " but got " +
                 shape_to_string(beta.shape()) + ".");
  }
  const Shape state_shape{B, Hv, Dv, Dk};
  if (state && state->shape() != state_shape) {
    fail(op, "initial_state must have shape " + shape_to_string(state_shape) + " but got " +
                 shape_to_string(state->shape()) + ".");
  }
  if (mask && mask->shape() != Shape{B, T}) {
    fail(op, "mask must have shape " + shape_to_string(Shape{B, T}) + " but got " +
                 shape_to_string(mask->shape()) + ".");
  }
  Dtype out = promote_types(promote_types(q.dtype(), k.dtype()), v.dtype());
  if (!is_floating_point(out)) fail(op, "Inputs must be floating point.");
  Stream st = to_stream(s);
  std::vector<array> in{
      cast(q, out, st),    cast(k, out, st),
      cast(v, out, st),    cast(g, out, st),
      cast(beta, out, st), state ? cast(*state, float32, st) : zeros(state_shape, float32, st)};
  if (mask) in.push_back(cast(*mask, bool_, st));
  return array::make_arrays({v.shape(), state_shape}, {out, float32},
                            std::make_shared<GatedDeltaUpdate>(st, mask.has_value()),
                            std::move(in));
}

} // namespace loom::fast
