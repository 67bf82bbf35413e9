// Element-wise primitives of two inputs.
//
// ops/ broadcasts and promotes before building a Binary node, so both inputs
// always have the same shape and the same dtype; broadcasting is a separate
// view node (broadcast_to) whose vjp sums the cotangent back. The output has
// that shape and either the input dtype or bool (comparisons, logical ops).
#pragma once

#include <cstdint>

#include "loom/primitives/elementwise_table.h"
#include "loom/primitives/primitive.h"

namespace loom {

const char* binary_op_name(BinaryOp op);
// True for the ops whose output is bool whatever the input dtype.
bool binary_op_is_predicate(BinaryOp op);
Dtype binary_output_dtype(BinaryOp op, Dtype input);

class Binary : public Primitive {
 public:
  Binary(Stream stream, BinaryOp op) : Primitive(stream), op_(op) {}

  BinaryOp op() const { return op_; }

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
  const char* name() const override { return binary_op_name(op_); }
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.elementwise = true;
    return t;
  }

 private:
  BinaryOp op_;
};

// The node computing `op` on inputs of equal shape and dtype.
array make_binary(BinaryOp op, const array& a, const array& b, Stream stream);

// Batching helper shared by the element-wise families: moves the mapped axis
// of every input to the position of the first mapped one, gives unmapped
// inputs a size-1 axis there and broadcasts all to one shape. Returns the
// common batch axis (-1 when nothing is mapped).
int align_batched_inputs(std::vector<array>& inputs, const std::vector<int>& axes, Stream stream);

} // namespace loom
