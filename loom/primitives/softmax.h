// Softmax over the last axis as one node: the composite (max, subtract,
// exp, sum, divide) makes five passes over the data and four temporaries;
// the kernel makes two passes per row and none.
#pragma once

#include "loom/primitives/primitive.h"
#include "loom/primitives/state_util.h"

namespace loom {

class Softmax : public Primitive {
 public:
  // `precise` is recorded for equivalence and printing: the kernel always
  // accumulates half-precision rows in float32.
  Softmax(Stream stream, bool precise) : Primitive(stream), precise_(precise) {}

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
  const char* name() const override { return "Softmax"; }

  bool precise() const { return precise_; }

 private:
  bool precise_;
};

// The node for a real floating input of at least one dimension.
array make_softmax(const array& a, bool precise, Stream stream);

// log(sum(exp(x))) over the last axis (removed) as one node, the same family:
// one pass for the maximum, one summing exp(x - max) without the maximum's 1
// (added back through log1p, so small terms keep their digits).
class LogSumExp : public Primitive {
 public:
  explicit LogSumExp(Stream stream) : Primitive(stream) {}

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
  const char* name() const override { return "LogSumExp"; }
};

// The node for a real floating input with a non-empty last axis.
array make_logsumexp(const array& a, Stream stream);

} // namespace loom
