// Convolution in MLX's channels-last layout: input (N, spatial..., C_in),
// weight (C_out, kernel..., C_in / groups), output (N, spatial..., C_out), with
// 1 to 3 spatial axes. One primitive covers every form the ops expose:
// strides, padding (asymmetric, and negative, which crops), kernel dilation,
// input dilation (what makes a transposed convolution), groups and flip
// (convolution in the mathematical sense). Its derivatives are convolutions
// of the same primitive, so gradients of any order follow.
#pragma once

#include <functional>
#include <vector>

#include "loom/primitives/fast.h"
#include "loom/primitives/primitive.h"
#include "loom/scheduler/inline_eval.h"

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

// Whether Convolution::vjp emits the gradient nodes below on a GPU stream and
// the CUDA backend sends them to cuDNN's backward kernels (the default;
// LOOM_CUDNN_BACKWARD=0 turns it off). Otherwise a GPU gradient is the
// composite's graph, scheduled op by op.
bool gpu_convolution_gradient_nodes();

// A gradient of a Convolution with parameters `params()` as one node, so that
// a backend with dedicated kernels runs it as such (the CUDA backend: cuDNN's
// backward-data and backward-filter convolutions). Its definition is the
// formulation as convolutions of the primitive above that Convolution::vjp
// built before these nodes existed (the composite): the CPU evaluates that
// composite op by op, the same kernels on the same views, so its results are
// those bits; vjp, jvp and vmap go through it (gradients of any order), and
// the CUDA backend runs it when cuDNN declines. `target` is the gradient's
// shape: the weight's, or the input's.
class ConvolutionGrad : public FastPrimitive {
 public:
  ConvolutionGrad(Stream stream, ConvParams params, Shape target)
      : FastPrimitive(stream), p_(std::move(params)), target_(std::move(target)) {}

  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {gradient_shape(inputs)};
  }
  PrimitiveState state() const override;

  const ConvParams& params() const { return p_; }
  const Shape& target() const { return target_; }
  // The gradient's shape for `inputs`: batch and channels from them, the
  // spatial extent from `target` (a strided convolution's output does not
  // determine its input's). Raises when the cotangent is not the shape of
  // the convolution's output (inputs a shapeless trace froze apart).
  virtual Shape gradient_shape(const std::vector<array>& inputs) const = 0;
  // The composite of `inputs`, built on this node's stream from the thread
  // running it and evaluated there by `eval`.
  array run_composite(const std::vector<array>& inputs, const InlineEval& eval) const;

 protected:
  ConvParams p_;
  Shape target_;
};

// dL/dw of y = conv(x, w) from inputs (x, dL/dy); target: w's shape.
class ConvolutionWeightGrad : public ConvolutionGrad {
 public:
  using ConvolutionGrad::ConvolutionGrad;
  Shape gradient_shape(const std::vector<array>& inputs) const override;
  std::vector<array> composite(const std::vector<array>& inputs) const override;
  const char* name() const override { return "ConvolutionWeightGrad"; }
};

// dL/dx of y = conv(x, w) from inputs (dL/dy, w); target: x's shape.
class ConvolutionInputGrad : public ConvolutionGrad {
 public:
  using ConvolutionGrad::ConvolutionGrad;
  Shape gradient_shape(const std::vector<array>& inputs) const override;
  std::vector<array> composite(const std::vector<array>& inputs) const override;
  const char* name() const override { return "ConvolutionInputGrad"; }
};

// Output shape for an input and weight already validated by the ops; every
// vector in `p` has one entry per spatial axis.
Shape conv_output_shape(const Shape& in, const Shape& wt, const ConvParams& p);

} // namespace loom

namespace loom {
// Builds the primitive's node; the caller has validated and promoted.
array make_convolution(const array& in, const array& wt, ConvParams p, const Stream& s);
} // namespace loom
