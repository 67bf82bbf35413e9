// Reductions over a set of axes (Reduce) and the index of an extreme along one
// axis (ArgReduce). Ops in ops/reduce.cpp validate axes and pick the output
// dtype; the primitives see sorted, unique, in-range axes.
#pragma once

#include <vector>

#include "loom/primitives/primitive.h"

namespace loom {

class Reduce : public Primitive {
 public:
  enum ReduceType { And, Or, Sum, Prod, Min, Max };

  // `axes` sorted and unique; with keepdims the reduced axes stay as size 1.
  Reduce(Stream stream, ReduceType type, std::vector<int> axes, bool keepdims)
      : Primitive(stream), type_(type), axes_(std::move(axes)), keepdims_(keepdims) {}

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
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.reduction = true;
    return t;
  }

  ReduceType reduce_type() const { return type_; }
  const std::vector<int>& axes() const { return axes_; }
  bool keepdims() const { return keepdims_; }

 private:
  ReduceType type_;
  std::vector<int> axes_;
  bool keepdims_;
};

class ArgReduce : public Primitive {
 public:
  enum ReduceType { ArgMin, ArgMax };
  // The whole array in row-major order instead of one axis.
  static constexpr int kAllAxes = -1;

  ArgReduce(Stream stream, ReduceType type, int axis, bool keepdims)
      : Primitive(stream), type_(type), axis_(axis), keepdims_(keepdims) {}

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
  void print_params(std::ostream& os) const override;
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.reduction = true;
    return t;
  }

  ReduceType reduce_type() const { return type_; }
  int axis() const { return axis_; }
  bool keepdims() const { return keepdims_; }

 private:
  ReduceType type_;
  int axis_;
  bool keepdims_;
};

// Output shape of reducing `shape` over sorted `axes`.
Shape reduced_shape(const Shape& shape, const std::vector<int>& axes, bool keepdims);

} // namespace loom
