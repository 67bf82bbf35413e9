// Quantization: packing floating matrices into few-bit codes with per-group
// scales (and biases), unpacking them, and matrix products that read the
// packed form directly. The layouts are MLX's, bit for bit:
//   affine: codes of `bits` bits, packed LSB-first as one bit stream per row
//           into uint32 words; scales and biases in the input's dtype;
//           w = scale * q + bias per group of `group_size` elements.
//   mxfp4 / mxfp8: E2M1 / E4M3 codes (OCP microscaling), one E8M0 (uint8)
//           scale per 32 elements, no bias.
//   nvfp4:  E2M1 codes, one E4M3 (uint8) scale per 16 elements, an optional
//           float32 global scale.
#pragma once

#include <string>

#include "loom/primitives/primitive.h"

namespace loom {

enum class QuantizationMode { affine, mxfp4, mxfp8, nvfp4 };

std::string quantization_mode_name(QuantizationMode mode);
// Raises "[op] Invalid quantization mode 'x'." for unknown names.
QuantizationMode parse_quantization_mode(const std::string& name, const char* op);

// Inputs: w (..., K) and, for nvfp4, optionally a global scale.
// Outputs: codes (..., K * bits / 32) uint32, scales (..., K / group_size) and,
// for affine, biases.
class Quantize : public Primitive {
 public:
  Quantize(Stream stream, int group_size, int bits, QuantizationMode mode)
      : Primitive(stream), group_size_(group_size), bits_(bits), mode_(mode) {}

  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  bool is_equivalent(const Primitive& other) const override;
  const char* name() const override { return "Quantize"; }
  PrimitiveState state() const override;
  PrimitiveTraits traits() const override { return {.multi_output = true}; }

 private:
  int group_size_;
  int bits_;
  QuantizationMode mode_;
};

// Inputs: codes, scales, then biases (affine) or a global scale (nvfp4, optional).
class Dequantize : public Primitive {
 public:
  Dequantize(Stream stream, int group_size, int bits, QuantizationMode mode, Dtype dtype)
      : Primitive(stream), group_size_(group_size), bits_(bits), mode_(mode), dtype_(dtype) {}

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
  const char* name() const override { return "Dequantize"; }
  PrimitiveState state() const override;

 private:
  int group_size_;
  int bits_;
  QuantizationMode mode_;
  Dtype dtype_;
};

// x (..., M, K) times the packed matrix w (..., N, K*bits/32) transposed
// (transpose=true) or w (..., K, N*bits/32) as is; batch axes broadcast.
// Inputs: x, w, scales and, for affine, biases. x, scales and biases share the
// output's dtype (the op casts).
class QuantizedMatmul : public Primitive {
 public:
  QuantizedMatmul(Stream stream, int group_size, int bits, QuantizationMode mode, bool transpose)
      : Primitive(stream),
        group_size_(group_size),
        bits_(bits),
        mode_(mode),
        transpose_(transpose) {}

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
  const char* name() const override { return "QuantizedMatmul"; }
  PrimitiveState state() const override;

 private:
  int group_size_;
  int bits_;
  QuantizationMode mode_;
  bool transpose_;
};

// quantized_matmul with matrix-level gather: output p is
// x[lhs[p]] times w[rhs[p]]. Inputs: x (Bx, M, K), w (Bw, rows, cols),
// scales, [biases], lhs (P), rhs (P) as uint32; output (P, M, N).
class GatherQMM : public Primitive {
 public:
  GatherQMM(Stream stream, int group_size, int bits, QuantizationMode mode, bool transpose)
      : Primitive(stream),
        group_size_(group_size),
        bits_(bits),
        mode_(mode),
        transpose_(transpose) {}

  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  bool is_equivalent(const Primitive& other) const override;
  const char* name() const override { return "GatherQMM"; }
  PrimitiveState state() const override;

 private:
  int group_size_;
  int bits_;
  QuantizationMode mode_;
  bool transpose_;
};

// Element-wise E4M3 (fp8) conversion: float types to uint8 codes (round to
// nearest even, saturating at 448) and back to a float type. Not marked
// element-wise for compile: the fused executor runs only the op table's entries.
class ToFP8 : public Primitive {
 public:
  explicit ToFP8(Stream stream) : Primitive(stream) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  bool is_equivalent(const Primitive& other) const override {
    return dynamic_cast<const ToFP8*>(&other) != nullptr;
  }
  const char* name() const override { return "ToFP8"; }
};

class FromFP8 : public Primitive {
 public:
  FromFP8(Stream stream, Dtype dtype) : Primitive(stream), dtype_(dtype) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  bool is_equivalent(const Primitive& other) const override;
  const char* name() const override { return "FromFP8"; }
  PrimitiveState state() const override { return {{"dtype", dtype_}}; }

 private:
  Dtype dtype_;
};

} // namespace loom
