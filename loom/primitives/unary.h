// Element-wise primitives of one input, and StopGradient.
//
// Every Unary node sees an input that ops/ has already validated and cast:
// math functions receive an inexact dtype, bitwise_invert an integer or bool.
// The output has the input's shape; its dtype follows unary_output_dtype.
#pragma once

#include <cstdint>

#include "loom/primitives/elementwise_table.h"
#include "loom/primitives/primitive.h"

namespace loom {

// "Exp", "LogicalNot", ... (the primitive's printed name, from the op table).
const char* unary_op_name(UnaryOp op);
// The entry's output rule: bool for the predicates, float32 for abs of
// complex64, else the input dtype.
Dtype unary_output_dtype(UnaryOp op, Dtype input);

class Unary : public Primitive {
 public:
  Unary(Stream stream, UnaryOp op) : Primitive(stream), op_(op) {}

  UnaryOp op() const { return op_; }

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
  const char* name() const override { return unary_op_name(op_); }
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.elementwise = true;
    t.costly = ew::visit(op_, []<typename Op>() { return ew::is_costly<Op>(); });
    return t;
  }

 private:
  UnaryOp op_;
};

// Identity at execution (the output shares the input's buffer); blocks
// gradients in both modes.
class StopGradient : public Primitive {
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
  const char* name() const override { return "StopGradient"; }
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.elementwise = true;
    t.noop = true;
    return t;
  }
};

// The node computing `op` on an already validated input.
array make_unary(UnaryOp op, const array& a, Stream stream);

// conj(z) for complex64, `a` itself otherwise (complex vjp rules need it).
array conj_if_complex(const array& a, Stream stream);

} // namespace loom
