// Counter-based random numbers: Threefry-2x32 with 20 rounds (Salmon, Moraes,
// Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011).
//
// A key (two uint32 words) and a counter (two uint32 words) hash to two
// uint32 words. A request for N words per key takes word j and word j + h + r
// (h = N / 2, r = N % 2) from the hash of the counter (j, j + h + r), j < h,
// and, when N is odd, word h from the first half of the hash of (h, 0). This
// layout is MLX's, so keys, splits, uniform and float32 normal samples agree
// with MLX bit for bit, and no value depends on how the work is split between
// threads. Byte-sized requests (width 1 or 2) take the first bytes of those
// words.
//
// Normal samples invert the error function of a uniform in (-1, 1) (no
// Box-Muller: one word per sample, no pairing). Where Loom differs from MLX on
// purpose: float16/bfloat16 samples are computed in float32 and rounded once
// (MLX rounds every intermediate to the half type); float64 normals use the
// exact inverse (MLX's is within 1e-7); float64 uniforms are supported (MLX
// raises).
#pragma once

#include <cstdint>
#include <utility>

#include "loom/primitives/primitive.h"

namespace loom {

namespace threefry {

constexpr uint32_t rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

// One block: 20 rounds, a key injection after every 4.
constexpr std::pair<uint32_t, uint32_t> hash(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1) {
  constexpr int kRotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  uint32_t x0 = c0 + ks[0];
  uint32_t x1 = c1 + ks[1];
  for (uint32_t block = 0; block < 5; ++block) {
    for (int r = 0; r < 4; ++r) {
      x0 += x1;
      x1 = rotl(x1, kRotations[(block % 2) * 4 + r]);
      x1 ^= x0;
    }
    x0 += ks[(block + 1) % 3];
    x1 += ks[(block + 2) % 3] + block + 1;
  }
  return {x0, x1};
}

} // namespace threefry

// What a random primitive turns each 32-bit word into.
enum class RandomDistribution : uint8_t {
  bits,    // the raw bytes (uint8/uint16/uint32 output)
  uniform, // [0, 1): float32(word) / float32(2^32 - 1), kept below 1
  normal,  // sqrt(2) * erfinv(2u - (1 - 2^-24)), u uniform as above
};

// inputs: {keys} of shape (..., 2), uint32. Output: keys.shape[:-1] + shape.
//   bits:    width bytes per element, dtype uint8/uint16/uint32
//   uniform: dtype any floating type (computed in float32, rounded once)
//   normal:  floating types or complex64 (two words per element, each part
//            with variance 1/2)
class RandomBits : public Primitive {
 public:
  RandomBits(Stream stream, Shape shape, RandomDistribution dist, Dtype dtype)
      : Primitive(stream), shape_(std::move(shape)), dist_(dist), dtype_(dtype) {}
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

  const Shape& shape() const { return shape_; }
  RandomDistribution distribution() const { return dist_; }

 private:
  Shape shape_;
  RandomDistribution dist_;
  Dtype dtype_;
};

} // namespace loom
