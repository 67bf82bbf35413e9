// Slicing and slice updates. Slice is a view on the input's buffer;
// SliceUpdate writes a new one (or reuses its input's when it may). Kernels
// live in backend/cpu/slice.cpp.
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
  PrimitiveState state() const override;
  const char* name() const override { return "Slice"; }
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
  PrimitiveState state() const override;
  const char* name() const override { return "SliceUpdate"; }

 private:
  Shape start_;
  Shape stop_;
  Shape strides_;
};

} // namespace loom
