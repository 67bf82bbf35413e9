// The element-wise primitive of three inputs: where(condition, x, y).
//
// ops/ casts the condition to bool, promotes x and y to one dtype and
// broadcasts all three to one shape before building the node.
#pragma once

#include "loom/primitives/primitive.h"

namespace loom {

class Select : public Primitive {
 public:
  using Primitive::Primitive;

  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  bool is_equivalent(const Primitive& other) const override;
  const char* name() const override { return "Select"; }
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.elementwise = true;
    return t;
  }
};

// The node for inputs already of equal shape, a bool condition and x, y of
// one dtype.
array make_select(const array& condition, const array& x, const array& y, Stream stream);

} // namespace loom
