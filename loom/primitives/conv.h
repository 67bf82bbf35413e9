// Convolution in MLX's channels-last layout: input (N, spatial..., C_in),
// weight (C_out, kernel..., C_in / groups), output (N, spatial..., C_out), with
// 1 to 3 spatial axes. One primitive covers every form the ops expose:
// strides, padding (asymmetric, and negative, which crops), kernel dilation,
// input dilation (what makes a transposed convolution), groups and flip
// (convolution in the mathematical sense). Its derivatives are convolutions
// of the same primitive, so gradients of any order follow.
#pragma once

#include <vector>

#include "loom/primitives/primitive.h"

namespace loom {

struct ConvParams {
  std::vector<int> stride;
  std::vector<int> padding_lo;
  std::vector<int> padding_hi;
  std::vector<int> kernel_dilation;
  std::vector<int> input_dilation;
  int groups = 1;
  bool flip = false;
  bool operator==(const ConvParams&) const = default;
};

class Convolution : public Primitive {
 public:
  Convolution(Stream stream, ConvParams params) : Primitive(stream), p_(std::move(params)) {}

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
  const char* name() const override { return "Convolution"; }
  PrimitiveState state() const override;

  const ConvParams& params() const { return p_; }

 private:
  ConvParams p_;
};

// Output shape for an input and weight already validated by the ops; every
// vector in `p` has one entry per spatial axis.
Shape conv_output_shape(const Shape& in, const Shape& wt, const ConvParams& p);

} // namespace loom

namespace loom {
// Builds the primitive's node; the caller has validated and promoted.
array make_convolution(const array& in, const array& wt, ConvParams p, const Stream& s);
} // namespace loom
