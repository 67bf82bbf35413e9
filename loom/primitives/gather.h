// Gather and scatter over several axes at once: the primitives beneath take,
// take_along_axis, put_along_axis, dynamic slices, array indexing and `.at`.
//
// Index semantics (documented in python/README.md): an index i < 0 counts
// from the end (i + dim); an index still outside [0, dim) raises at
// evaluation, naming the op, the index, the axis and its size. MLX reads
// out of bounds there (garbage or a crash); NumPy raises as Loom does.
#pragma once

#include <vector>

#include "loom/primitives/primitive.h"

namespace loom {

// inputs: {a, idx_0, ..., idx_{k-1}}. The indices share one shape I and an
// integer dtype; idx_j indexes axis axes[j] of a. The output has shape
// I + (the axes of a not in `axes`, in order).
class Gather : public Primitive {
 public:
  Gather(Stream stream, std::vector<int> axes) : Primitive(stream), axes_(std::move(axes)) {}
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
  const char* name() const override { return "Gather"; }
  const std::vector<int>& axes() const { return axes_; }

 private:
  std::vector<int> axes_;
};

// inputs: {a, idx_0, ..., idx_{k-1}, updates}; indices as in Gather, updates
// of shape I + (the other axes of a) and a's dtype. The output is a with each
// addressed block combined with its update: replaced (none, the last write
// wins for repeated indices) or accumulated (sum, prod, max, min), so
// repeated indices accumulate.
class Scatter : public Primitive {
 public:
  enum class ReduceType { none, sum, prod, max, min };
  Scatter(Stream stream, std::vector<int> axes, ReduceType type)
      : Primitive(stream), axes_(std::move(axes)), type_(type) {}
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
  const std::vector<int>& axes() const { return axes_; }
  ReduceType reduce_type() const { return type_; }

 private:
  std::vector<int> axes_;
  ReduceType type_;
};

} // namespace loom
