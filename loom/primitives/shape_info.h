// Values computed from an array's shape when the graph runs, not when it is
// built: under a shapeless trace (compile or export with shapeless=True) the
// traced shape is not the shape of later calls. Ops in ops/shape_info, the
// kernel in backend/cpu/shape_info.cpp.
#pragma once

#include <vector>

#include "loom/primitives/primitive.h"
#include "loom/primitives/state_util.h"

namespace loom {

// inputs: {a}; output: the scalar product of a's dimensions over `axes`
// (non-negative, sorted), or its inverse, in `dtype` (MLX's primitive of the
// same name). mean and var divide by it under a shapeless trace.
class NumberOfElements : public Primitive {
 public:
  NumberOfElements(Stream stream, std::vector<int> axes, bool inverted, Dtype dtype)
      : Primitive(stream), axes_(std::move(axes)), inverted_(inverted), dtype_(dtype) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  bool is_equivalent(const Primitive& other) const override {
    return same_type_and_state(*this, other);
  }
  PrimitiveState state() const override;
  const char* name() const override { return "NumberOfElements"; }

  // The value for an input of this shape.
  double count(const Shape& shape) const;

 private:
  std::vector<int> axes_;
  bool inverted_;
  Dtype dtype_;
};

} // namespace loom
