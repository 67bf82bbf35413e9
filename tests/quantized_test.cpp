// Quantization from C++: the element codecs' rounding rules (measured on
// MLX's wheel), packing, round trips, the fused products against the
// dequantized reference, and the primitives' state round trip (export).
#include "loom/backend/cpu/quantized.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "loom/ops.h"
#include "loom/ops/quantized.h"
#include "loom/primitives/quantized.h"

using namespace loom;

namespace {

array random_matrix(int rows, int cols, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(rows) * cols);
  for (auto& x : v) x = dist(gen);
  return array(v, {rows, cols}, float32);
}

std::vector<float> values(array a) {
  a = astype(a, float32);
  a.eval();
  a = contiguous(a);
  a.eval();
  return std::vector<float>(a.data<float>(), a.data<float>() + a.size());
}

} // namespace

TEST(Quantized, Fp8E4m3RoundsToNearestEvenAndSaturates) {
  using namespace cpu::quant;
  EXPECT_EQ(e4m3_code(0.53125f), 0x30u); // tie between 0.5 and 0.5625: even
  EXPECT_EQ(e4m3_code(0.59375f), 0x32u); // tie between 0.5625 and 0.625: even
  EXPECT_EQ(e4m3_code(448.0f), 0x7eu);
  EXPECT_EQ(e4m3_code(1000.0f), 0x7eu);
  EXPECT_EQ(e4m3_code(-0.0f), 0x80u);
  EXPECT_EQ(e4m3_code(0.0029296875f / 2), 0x1u); // a subnormal step
  for (uint32_t b = 0; b < 0x7f; ++b) EXPECT_EQ(e4m3_code(e4m3_value(b)), b) << b;
}

TEST(Quantized, Fp4E2M1RoundsTiesTowardZero) {
  using namespace cpu::quant;
  EXPECT_EQ(fp4_code(0.25f), 0u);
  EXPECT_EQ(fp4_code(0.26f), 1u);
  EXPECT_EQ(fp4_code(3.5f), 5u);
  EXPECT_EQ(fp4_code(5.0f), 6u);
  EXPECT_EQ(fp4_code(7.0f), 7u);
  EXPECT_EQ(fp4_code(-0.25f), 0u); // no negative zero code
  EXPECT_EQ(fp4_code(-0.75f), 9u);
  for (uint32_t c = 0; c < 16; ++c) {
    if (c == 8) continue;
    EXPECT_EQ(fp4_code(fp4_value(c)), c);
  }
}

TEST(Quantized, E8M0ScalesRoundUpToAPowerOfTwo) {
  using namespace cpu::quant;
  EXPECT_EQ(e8m0_code(1.0f), 127u);
  EXPECT_EQ(e8m0_code(1.0001f), 128u);
  EXPECT_EQ(e8m0_code(0.25f), 125u);
  EXPECT_EQ(e8m0_code(0.0f), 127u);
  EXPECT_FLOAT_EQ(e8m0_value(125), 0.25f);
}

TEST(Quantized, AffineRoundTripWithinHalfAStep) {
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    array w = random_matrix(8, 128, 1 + bits);
    auto q = quantize(w, 64, bits);
    ASSERT_EQ(q.size(), 3u);
    EXPECT_EQ(q[0].dtype(), uint32);
    EXPECT_EQ(q[0].shape(), (Shape{8, 128 * bits / 32}));
    EXPECT_EQ(q[1].shape(), (Shape{8, 2}));
    array d = dequantize(q[0], q[1], q[2], 64, bits);
    auto dv = values(d), wv = values(w), sv = values(q[1]), bv = values(q[2]);
    // Within half a step of the group's grid, and on the grid's nearest end
    // for a value past it (the grid puts the larger extreme exactly on a code,
    // which can leave the other extreme outside).
    const float top = static_cast<float>((1 << bits) - 1);
    for (size_t i = 0; i < dv.size(); ++i) {
      const float s = sv[i / 64], b = bv[i / 64];
      const float lo = std::min(b, b + s * top), hi = std::max(b, b + s * top);
      const float outside = std::max({lo - wv[i], wv[i] - hi, 0.0f});
      EXPECT_LE(std::fabs(dv[i] - wv[i]), std::fabs(s) * 0.5f + outside + 1e-5f)
          << "bits " << bits << " at " << i;
    }
  }
}

TEST(Quantized, PackingIsABitStream) {
  std::vector<float> v(32);
  for (int i = 0; i < 32; ++i) v[i] = static_cast<float>(i % 8);
  auto q = quantize(array(v, {1, 32}, float32), 32, 3);
  q[0].eval();
  const auto* words = q[0].data<uint32_t>();
  // Scale -1, bias 7: element i holds 7 - (i mod 8) at bits [3i, 3i + 3).
  for (int i = 0; i < 32; ++i) {
    const int bit = 3 * i;
    uint64_t pair = words[bit / 32];
    if (bit / 32 + 1 < 3) pair |= uint64_t(words[bit / 32 + 1]) << 32;
    EXPECT_EQ((pair >> (bit % 32)) & 7u, uint64_t(7 - i % 8)) << i;
  }
}

TEST(Quantized, MatmulMatchesTheDequantizedProduct) {
  for (const char* mode : {"affine", "mxfp4", "mxfp8", "nvfp4"}) {
    for (int M : {1, 5, 40}) {
      for (bool tr : {true, false}) {
        array w = tr ? random_matrix(96, 256, 3) : random_matrix(256, 128, 3);
        auto q = quantize(w, std::nullopt, std::nullopt, mode);
        std::optional<array> b;
        if (q.size() > 2) b = q[2];
        array x = random_matrix(M, 256, 4);
        array y = quantized_matmul(x, q[0], q[1], b, tr, std::nullopt, std::nullopt, mode);
        array wd =
            dequantize(q[0], q[1], b, std::nullopt, std::nullopt, mode, std::nullopt, float32);
        array ref = matmul(x, tr ? transpose(wd) : wd);
        auto yv = values(y), rv = values(ref);
        ASSERT_EQ(yv.size(), rv.size());
        for (size_t i = 0; i < yv.size(); ++i)
          ASSERT_NEAR(yv[i], rv[i], 1e-3f + 1e-4f * std::fabs(rv[i]))
              << mode << " M=" << M << " transpose=" << tr << " at " << i;
      }
    }
  }
}

TEST(Quantized, StateRebuildsAnEquivalentPrimitive) {
  QuantizedMatmul p(default_stream(Device{Device::cpu}), 32, 8, QuantizationMode::affine, false);
  auto rebuilt = make_primitive("QuantizedMatmul", p.stream(), p.state());
  EXPECT_TRUE(rebuilt->is_equivalent(p));
  Dequantize d(default_stream(Device{Device::cpu}), 16, 4, QuantizationMode::nvfp4, bfloat16);
  EXPECT_TRUE(make_primitive("Dequantize", d.stream(), d.state())->is_equivalent(d));
  Quantize qz(default_stream(Device{Device::cpu}), 64, 3, QuantizationMode::affine);
  EXPECT_TRUE(make_primitive("Quantize", qz.stream(), qz.state())->is_equivalent(qz));
  EXPECT_FALSE(make_primitive("Quantize", qz.stream(), d.state())->is_equivalent(qz));
}

TEST(Quantized, ErrorsNameTheOp) {
  array w = random_matrix(4, 96, 5);
  EXPECT_THROW(quantize(w, 64, 4), std::invalid_argument);
  EXPECT_THROW(quantize(w, 32, 7), std::invalid_argument);
  auto q = quantize(random_matrix(4, 64, 6));
  try {
    quantized_matmul(random_matrix(1, 32, 7), q[0], q[1], q[2]);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[quantized_matmul]"), std::string::npos);
  }
}
