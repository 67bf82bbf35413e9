// The fused kernels of mx.fast: each op is ONE node with its own CPU kernel
// (backend/cpu/fast.cpp) where the composite would make several passes and
// temporaries. Every primitive also knows its composite definition (built
// from ordinary ops): jvp and vmap, and gradients no fused rule covers, go
// through it, so every transform works and agrees with the reference.
#pragma once

#include <string>

#include "loom/primitives/primitive.h"

namespace loom {

class FastPrimitive : public Primitive {
 public:
  using Primitive::Primitive;
  // The same function written with ops (the reference the kernel matches).
  virtual std::vector<array> composite(const std::vector<array>& inputs) const = 0;

  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  bool is_equivalent(const Primitive& other) const override;
};

// x / sqrt(mean(x^2) + eps) [* weight] over the last axis; inputs x[, weight].
class RMSNorm : public FastPrimitive {
 public:
  RMSNorm(Stream stream, float eps, bool has_weight)
      : FastPrimitive(stream), eps_(eps), has_weight_(has_weight) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> composite(const std::vector<array>& inputs) const override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  const char* name() const override { return "RMSNorm"; }
  PrimitiveState state() const override {
    return {{"eps", double{eps_}}, {"has_weight", has_weight_}};
  }

 private:
  float eps_;
  bool has_weight_;
};

// (x - mean) / sqrt(var + eps) [* weight] [+ bias] over the last axis.
class LayerNorm : public FastPrimitive {
 public:
  LayerNorm(Stream stream, float eps, bool has_weight, bool has_bias)
      : FastPrimitive(stream), eps_(eps), has_weight_(has_weight), has_bias_(has_bias) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> composite(const std::vector<array>& inputs) const override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  const char* name() const override { return "LayerNorm"; }
  PrimitiveState state() const override {
    return {{"eps", double{eps_}}, {"has_weight", has_weight_}, {"has_bias", has_bias_}};
  }

 private:
  float eps_;
  bool has_weight_, has_bias_;
};

// Rotary embedding of the first `dims` features of (B, ..., T, D) inputs;
// inputs x, offset (int32, scalar or one per batch entry)[, freqs]. `forward`
// false rotates the other way (the vjp). base <= 0 means freqs is given.
class RoPE : public FastPrimitive {
 public:
  RoPE(Stream stream, int dims, bool traditional, double base, double scale, bool forward)
      : FastPrimitive(stream),
        dims_(dims),
        traditional_(traditional),
        base_(base),
        scale_(scale),
        forward_(forward) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> composite(const std::vector<array>& inputs) const override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  const char* name() const override { return "RoPE"; }
  PrimitiveState state() const override {
    return {{"dims", int64_t{dims_}},
            {"traditional", traditional_},
            {"base", base_},
            {"scale", scale_},
            {"forward", forward_}};
  }

 private:
  int dims_;
  bool traditional_;
  double base_, scale_;
  bool forward_;
};

// softmax(scale * q k^T + mask [with sinks]) v over (B, N, T, D) inputs with
// grouped heads; inputs q, k, v[, mask][, sinks]. mask_mode: "none",
// "causal" (lower-right aligned) or "array" (boolean keeps, else additive,
// already broadcastable to (B, N_q, T_q, T_kv)).
class ScaledDotProductAttention : public FastPrimitive {
 public:
  ScaledDotProductAttention(Stream stream, float scale, std::string mask_mode, bool has_sinks)
      : FastPrimitive(stream),
        scale_(scale),
        mask_mode_(std::move(mask_mode)),
        has_sinks_(has_sinks) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> composite(const std::vector<array>& inputs) const override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  const char* name() const override { return "ScaledDotProductAttention"; }
  PrimitiveState state() const override {
    return {{"scale", double{scale_}}, {"mask_mode", mask_mode_}, {"has_sinks", has_sinks_}};
  }

 private:
  float scale_;
  std::string mask_mode_;
  bool has_sinks_;
};

// The fused backward of attention: inputs are the forward's inputs followed
// by its output and the output's cotangent; outputs dq, dk, dv[, dsinks].
// Scores are recomputed per head (never stored between the passes).
class ScaledDotProductAttentionVJP : public Primitive {
 public:
  ScaledDotProductAttentionVJP(Stream stream, float scale, std::string mask_mode, bool has_sinks)
      : Primitive(stream), scale_(scale), mask_mode_(std::move(mask_mode)), has_sinks_(has_sinks) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  bool is_equivalent(const Primitive& other) const override;
  const char* name() const override { return "ScaledDotProductAttentionVJP"; }
  PrimitiveState state() const override {
    return {{"scale", double{scale_}}, {"mask_mode", mask_mode_}, {"has_sinks", has_sinks_}};
  }
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.multi_output = true;
    return t;
  }

 private:
  float scale_;
  std::string mask_mode_;
  bool has_sinks_;
};

// logsumexp(logits) - logits[target] over the last axis, in float32;
// inputs logits, targets (int32).
class CrossEntropy : public FastPrimitive {
 public:
  explicit CrossEntropy(Stream stream) : FastPrimitive(stream) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> composite(const std::vector<array>& inputs) const override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  const char* name() const override { return "CrossEntropy"; }
};

// The gated delta rule over time, per (batch, value head): S <- S * g;
// S <- S + ((v - S k) * beta) k^T; y = S q. Inputs q, k (B, T, Hk, Dk), v
// (B, T, Hv, Dv), g (B, T, Hv[, Dk]), beta (B, T, Hv), state (B, Hv, Dv, Dk)
// float32[, mask (B, T) bool]; outputs y (B, T, Hv, Dv) and the final state.
class GatedDeltaUpdate : public FastPrimitive {
 public:
  GatedDeltaUpdate(Stream stream, bool has_mask) : FastPrimitive(stream), has_mask_(has_mask) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> composite(const std::vector<array>& inputs) const override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  const char* name() const override { return "GatedDeltaUpdate"; }
  PrimitiveState state() const override { return {{"has_mask", has_mask_}}; }
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.multi_output = true;
    return t;
  }

 private:
  bool has_mask_;
};

// The fused backward of the delta rule: inputs are the forward's inputs
// followed by the cotangents of y and of the final state (float32); outputs
// the float32 gradients of q, k, v, g, beta and the initial state. The kernel
// runs the recurrence backwards per (batch, key head), recomputing states
// from checkpoints every ~sqrt(T) steps rather than storing all T of them.
// Its composite is the gradient of GatedDeltaUpdate's composite, so higher
// derivatives still work.
class GatedDeltaUpdateVJP : public FastPrimitive {
 public:
  GatedDeltaUpdateVJP(Stream stream, bool has_mask) : FastPrimitive(stream), has_mask_(has_mask) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> composite(const std::vector<array>& inputs) const override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  const char* name() const override { return "GatedDeltaUpdateVJP"; }
  PrimitiveState state() const override { return {{"has_mask", has_mask_}}; }
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.multi_output = true;
    return t;
  }

 private:
  bool has_mask_;
};

} // namespace loom
