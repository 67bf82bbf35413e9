// Discrete Fourier transforms over a set of axes and the Walsh-Hadamard
// transform. Kernels: backend/cpu/fft.cpp (engines), fft_kernels.cpp.
#pragma once

#include <vector>

#include "loom/primitives/primitive.h"

namespace loom {

// The unnormalised DFT over `axes` (distinct, non-negative), times `scale`.
//  - complex (real=false): complex64 -> complex64, same shape; `inverse`
//    flips the exponent's sign. A float32 input is a real signal (the ops
//    pass one uncast): the kernel then does about half the work.
//  - rfft (real, !inverse): float32 -> complex64; the last of `axes` is the
//    real one and its length n becomes n / 2 + 1.
//  - irfft (real, inverse): complex64 -> float32; the last axis holds
//    n / 2 + 1 bins of a Hermitian spectrum and becomes `n` long.
// The ops (ops/fft.cpp) pad or crop the input to the requested sizes and
// choose `scale` from the norm.
class FFT : public Primitive {
 public:
  FFT(Stream stream, std::vector<int> axes, bool inverse, bool real, int n, double scale)
      : Primitive(stream),
        axes_(std::move(axes)),
        inverse_(inverse),
        real_(real),
        n_(n),
        scale_(scale) {}

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
  const char* name() const override { return "FFT"; }
  PrimitiveState state() const override;

 private:
  std::vector<int> axes_;
  bool inverse_;
  bool real_;
  int n_; // irfft's output length on the last axis (0 otherwise)
  double scale_;
};

// y = x @ T * scale along the last axis (x @ T^T with `transpose`), T the
// Hadamard matrix of order n = m * 2^k (m in 1, 12, 20, 28) as MLX orders
// it: kron(T_m, H_{2^k}). T_20 and T_28 are not symmetric, so the vjp needs
// the transposed map (MLX 0.32.4 applies T there, a wrong gradient).
class Hadamard : public Primitive {
 public:
  Hadamard(Stream stream, double scale, bool transpose)
      : Primitive(stream), scale_(scale), transpose_(transpose) {}

  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  bool is_equivalent(const Primitive& other) const override;
  const char* name() const override { return "Hadamard"; }
  PrimitiveState state() const override { return {{"scale", scale_}, {"transpose", transpose_}}; }

 private:
  double scale_;
  bool transpose_;
};

// The m of n = m * 2^k for a supported Hadamard order, or 0.
int hadamard_m(int64_t n);

} // namespace loom
