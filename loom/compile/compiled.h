// The fused primitive: a region of element-wise and broadcast nodes of one
// shape, run as ONE pass over memory with one output buffer per value that
// escapes the region and no intermediate buffers. Its CPU kernel lives in
// backend/cpu/compiled.cpp.
#pragma once

#include <memory>
#include <vector>

#include "loom/primitives/primitive.h"
#include "loom/primitives/state_util.h"

namespace loom::compile_detail {

// One node of the region. args[k] < num_inputs names an input of the
// Compiled node; args[k] >= num_inputs names op (args[k] - num_inputs).
struct FusedOp {
  std::shared_ptr<Primitive> primitive;
  std::vector<int> args;
  Shape shape; // as traced
  Dtype dtype;
};

class Compiled : public Primitive {
 public:
  Compiled(Stream stream, int num_inputs, std::vector<FusedOp> ops, std::vector<int> outputs)
      : Primitive(stream),
        num_inputs_(num_inputs),
        ops_(std::move(ops)),
        outputs_(std::move(outputs)) {}

  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  // Transforms expand the region back into its ops and transform those.
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  const char* name() const override { return "Compiled"; }
  // num_inputs, outputs, and the ops (each its name, encoded state, args,
  // shape and dtype) nested as encoded states: the region round-trips
  // through export like any other primitive.
  PrimitiveState state() const override;
  bool is_equivalent(const Primitive& other) const override {
    return same_type_and_state(*this, other);
  }
  // "Compiled(Divide, Erf, ...)": the ops, not the encoded state.
  void print_params(std::ostream& os) const override;
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.multi_output = outputs_.size() > 1;
    return t;
  }

  int num_inputs() const { return num_inputs_; }
  const std::vector<FusedOp>& ops() const { return ops_; }
  const std::vector<int>& output_ops() const { return outputs_; }

  // The region's ops built as ordinary nodes on `inputs` (the escaping values).
  std::vector<array> expand(const std::vector<array>& inputs) const;

 private:
  int num_inputs_;
  std::vector<FusedOp> ops_;
  std::vector<int> outputs_;
};

} // namespace loom::compile_detail
