// Primitives that reinterpret memory rather than compute: a dtype view of
// the bytes (View), an arbitrary strided window (AsStrided), inputs passed
// through with extra dependencies (Depends). The float8 conversions live with
// quantization (primitives/quantized.h).
#pragma once

#include "loom/primitives/primitive.h"

namespace loom {

// The bytes of a row-contiguous input seen as `dtype`; the last axis scales
// by the ratio of item sizes.
class View : public Primitive {
 public:
  View(Stream stream, Dtype dtype) : Primitive(stream), dtype_(dtype) {}
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
  const char* name() const override { return "View"; }
  PrimitiveState state() const override { return {{"dtype", dtype_}}; }

 private:
  Dtype dtype_;
};

// A window of shape/strides (in elements) starting `offset` elements into a
// 1-D input; the op checks that every element it addresses is inside it.
class AsStrided : public Primitive {
 public:
  AsStrided(Stream stream, Shape shape, Strides strides, int64_t offset)
      : Primitive(stream),
        shape_(std::move(shape)),
        strides_(std::move(strides)),
        offset_(offset) {}
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
  const char* name() const override { return "AsStrided"; }
  PrimitiveState state() const override;

 private:
  Shape shape_;
  Strides strides_;
  int64_t offset_;
};

// Outputs are the first `count` inputs unchanged; the remaining inputs are
// only dependencies (evaluated first, given zero gradient).
class Depends : public Primitive {
 public:
  Depends(Stream stream, int count) : Primitive(stream), count_(count) {}
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
  const char* name() const override { return "Depends"; }
  PrimitiveState state() const override { return {{"count", int64_t{count_}}}; }
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.multi_output = true;
    return t;
  }

 private:
  int count_;
};


} // namespace loom
