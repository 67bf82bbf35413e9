// Primitives the transform engine inserts into graphs.
#pragma once

#include "loom/primitives/primitive.h"
#include "loom/primitives/state_util.h"
#include "loom/transforms/transforms.h"

namespace loom {

// Identity that marks where a transform's inputs enter the traced graph; the
// backward walk of vjp stops at it.
class Marker : public Primitive {
 public:
  using Primitive::Primitive;
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  void eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                         const std::vector<int>&, const std::vector<array>&) override;
  std::vector<array> jvp(const std::vector<array>&, const std::vector<array>& tangents,
                         const std::vector<int>&) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  const char* name() const override { return "Marker"; }
  bool is_equivalent(const Primitive& other) const override {
    return same_type_and_state(*this, other);
  }
  PrimitiveTraits traits() const override { return {.noop = true}; }
};

// Stands for one slice of a vmapped input while the function is traced.
class VmapPlaceholder : public Primitive {
 public:
  using Primitive::Primitive;
  void eval_cpu(const std::vector<array>&, std::vector<array>&) override;
  const char* name() const override { return "VmapPlaceholder"; }
};

// Wraps the outputs of a custom_function. Inputs are the function's inputs
// followed by the outputs its body computed; outputs alias the latter.
class CustomTransforms : public Primitive {
 public:
  CustomTransforms(Stream stream, int num_inputs, CustomVjp vjp_rule, CustomJvp jvp_rule,
                   CustomVmap vmap_rule)
      : Primitive(stream),
        num_inputs_(num_inputs),
        vjp_rule_(std::move(vjp_rule)),
        jvp_rule_(std::move(jvp_rule)),
        vmap_rule_(std::move(vmap_rule)) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  void eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  int transform_input_count(TransformKind kind, int num_inputs) const override;
  const char* name() const override { return "CustomTransforms"; }
  // The rules are closures and cannot be data: the state records which
  // exist, and the registered factory rebuilds the node without them (the
  // transforms then follow the body's own graph, see docs/export.md).
  PrimitiveState state() const override;
  PrimitiveTraits traits() const override { return {.multi_output = true}; }
  int num_inputs() const { return num_inputs_; }

 private:
  int num_inputs_;
  CustomVjp vjp_rule_;
  CustomJvp jvp_rule_;
  CustomVmap vmap_rule_;
};

// Warns (through the hook of set_capture_warning_hook) when a custom
// function's body reaches an array being differentiated other than through
// its explicit inputs: that array's gradient through the function is zero.
void warn_if_captures_differentiated(const std::vector<array>& inputs,
                                     const std::vector<array>& body_outputs);

} // namespace loom
