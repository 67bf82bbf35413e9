// Slicing, slice updates, concatenation and split. Slice and each output of
// Split are views on the input's buffer; Concatenate and SliceUpdate write a
// new one (SliceUpdate reuses its input's when it may). Kernels live in
// backend/cpu/indexing.cpp.
#pragma once

#include <vector>

#include "loom/primitives/primitive.h"

namespace loom {

// Basic slice with normalised bounds: along each axis the elements
// start, start + step, ... strictly before stop (step may be negative, then
// stop may be -1).
class Slice : public Primitive {
 public:
  Slice(Stream stream, Shape start, Shape stop, Shape strides)
      : Primitive(stream),
        start_(std::move(start)),
        stop_(std::move(stop)),
        strides_(std::move(strides)) {}
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
  const char* name() const override { return "Slice"; }
  void print_params(std::ostream& os) const override;
  const Shape& start() const { return start_; }
  const Shape& stop() const { return stop_; }
  const Shape& strides() const { return strides_; }

 private:
  Shape start_;
  Shape stop_;
  Shape strides_;
};

// inputs: {a, update}; update already has the region's shape and a's dtype.
// The output is a with the region overwritten.
class SliceUpdate : public Primitive {
 public:
  SliceUpdate(Stream stream, Shape start, Shape stop, Shape strides)
      : Primitive(stream),
        start_(std::move(start)),
        stop_(std::move(stop)),
        strides_(std::move(strides)) {}
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
  const char* name() const override { return "SliceUpdate"; }
  void print_params(std::ostream& os) const override;

 private:
  Shape start_;
  Shape stop_;
  Shape strides_;
};

// inputs share a dtype and every dimension but `axis`.
class Concatenate : public Primitive {
 public:
  Concatenate(Stream stream, int axis) : Primitive(stream), axis_(axis) {}
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
  const char* name() const override { return "Concatenate"; }
  void print_params(std::ostream& os) const override;
  int axis() const { return axis_; }

 private:
  int axis_;
};

// One node, several outputs: piece i spans [bound[i-1], bound[i]) along
// `axis` (bound[-1] = 0, bound[n] = the axis' length); a bound below its
// predecessor gives an empty piece, as in NumPy. Bounds lie in [0, dim].
class Split : public Primitive {
 public:
  Split(Stream stream, Shape bounds, int axis)
      : Primitive(stream), bounds_(std::move(bounds)), axis_(axis) {}
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
  const char* name() const override { return "Split"; }
  void print_params(std::ostream& os) const override;
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.multi_output = true;
    return t;
  }
  // (start, length) of each piece along the axis for an axis of length `dim`.
  std::vector<std::pair<int32_t, int32_t>> pieces(int32_t dim) const;

 private:
  Shape bounds_;
  int axis_;
};

} // namespace loom
