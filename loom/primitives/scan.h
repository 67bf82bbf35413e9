// Cumulative reductions along one axis (cumsum, cumprod, cummax, cummin,
// logcumsumexp), forward or reversed, inclusive or exclusive. The kernel is
// in backend/cpu/scan.cpp.
#pragma once

#include "loom/primitives/primitive.h"

namespace loom {

class Scan : public Primitive {
 public:
  enum class ReduceType { sum, prod, max, min, logaddexp };
  Scan(Stream stream, ReduceType type, int axis, bool reverse, bool inclusive)
      : Primitive(stream), type_(type), axis_(axis), reverse_(reverse), inclusive_(inclusive) {}
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
  PrimitiveState state() const override;
  const char* name() const override;

 private:
  ReduceType type_;
  int axis_;
  bool reverse_;
  bool inclusive_;
};

} // namespace loom
