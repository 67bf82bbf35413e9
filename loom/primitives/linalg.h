// Matrix product with NumPy semantics: a 1-D first operand is a row, a 1-D
// second operand a column, and those added axes are absent from the output;
// leading (batch) dimensions broadcast. Both inputs have the output's dtype
// (ops/linalg.cpp promotes them).
#pragma once

#include "loom/primitives/primitive.h"

namespace loom {

class Matmul : public Primitive {
 public:
  explicit Matmul(Stream stream) : Primitive(stream) {}

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
    return dynamic_cast<const Matmul*>(&other) != nullptr;
  }
  const char* name() const override { return "Matmul"; }
};

// Output shape of matmul for operand shapes already checked by the op.
Shape matmul_shape(const Shape& a, const Shape& b);

} // namespace loom
