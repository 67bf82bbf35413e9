// Element codecs and bit streams shared by the quantization kernels
// (quantized.cpp: quantize/dequantize; quantized_matmul.cpp: products).
// Rounding rules are MLX 0.32.4's, measured against its CPU wheel:
// E4M3 rounds to nearest even and saturates at 448; E2M1 rounds ties toward
// zero and drops the sign of a zero code; E8M0 scales round up to the next
// power of two.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "loom/primitives/quantized.h"

namespace loom::cpu::quant {

inline constexpr float kFp4Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                         -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

inline float fp4_value(uint32_t code) { return kFp4Values[code & 15u]; }

// MLX picks the nearest of the 16 values by |x - value| in float32, the
// first (lowest code) on a tie. Below 2^22 the distances are exact enough
// that fixed thresholds give the same codes; beyond (and for inf or NaN,
// where every distance is equal or NaN: code 0) the search itself runs.
inline uint32_t fp4_code(float x) {
  const float a = std::fabs(x);
  if (!(a < 4194304.0f)) {
    uint32_t best_code = 0;
    float best = INFINITY;
    for (uint32_t c = 0; c < 16; ++c) {
      const float d = std::fabs(x - kFp4Values[c]);
      if (d < best) {
        best = d;
        best_code = c;
      }
    }
    return best_code;
  }
  uint32_t m =
      (a > 0.25f) + (a > 0.75f) + (a > 1.25f) + (a > 1.75f) + (a > 2.5f) + (a > 3.5f) + (a > 5.0f);
  return (x < 0.0f && m != 0) ? (m | 8u) : m;
}

inline float e4m3_value(uint32_t b) {
  const uint32_t e = (b >> 3) & 15u, m = b & 7u;
  float v;
  if (e == 0) {
    v = std::ldexp(static_cast<float>(m), -9);
  } else if (e == 15 && m == 7) {
    v = NAN;
  } else {
    v = std::ldexp(1.0f + static_cast<float>(m) / 8.0f, static_cast<int>(e) - 7);
  }
  return (b & 0x80u) ? -v : v;
}

inline uint32_t e4m3_code(float x) {
  const uint32_t sign = std::signbit(x) ? 0x80u : 0u;
  float a = std::fabs(x);
  if (!(a < 448.0f)) a = 448.0f; // NaN saturates too, as MLX's kernel does
  uint32_t code;
  if (a < 0.015625f) { // below the smallest normal 2^-6: steps of 2^-9
    code = static_cast<uint32_t>(std::nearbyint(a * 512.0f));
  } else {
    int e;
    std::frexp(a, &e); // a = f * 2^e, f in [0.5, 1)
    const int E = e - 1;
    uint32_t m = static_cast<uint32_t>(std::nearbyint((std::ldexp(a, -E) - 1.0f) * 8.0f));
    int biased = E + 7;
    if (m == 8) {
      m = 0;
      ++biased;
    }
    code = (static_cast<uint32_t>(biased) << 3) | m;
    if (code > 0x7eu) code = 0x7eu;
  }
  return sign | code;
}

// The power of two at or above s, as a biased exponent byte (wrapping as
// MLX's does for scales outside float's range); zero maps to 1.0.
inline uint32_t e8m0_code(float s) {
  if (s == 0.0f) return 127u;
  if (!std::isfinite(s)) return 128u;
  int e;
  const float f = std::frexp(s, &e);
  const int up = (f == 0.5f) ? e - 1 : e;
  return static_cast<uint32_t>(up + 127) & 0xffu;
}

inline float e8m0_value(uint32_t b) { return std::ldexp(1.0f, static_cast<int>(b) - 127); }

// The 256 E4M3 values by code, as float.
const float* e4m3_table();

// Codes per uint32 word, as a bit stream: code i of a row occupies bits
// [i*bits, (i+1)*bits) of the row's words, least significant first.
struct BitWriter {
  uint32_t* out;
  uint64_t acc = 0;
  int nbits = 0;
  void put(uint32_t code, int bits) {
    acc |= static_cast<uint64_t>(code) << nbits;
    nbits += bits;
    if (nbits >= 32) {
      *out++ = static_cast<uint32_t>(acc);
      acc >>= 32;
      nbits -= 32;
    }
  }
};

// Dequantizes `rows` rows of `cols` elements (row r's codes at
// codes + r * code_stride words, its scales/biases at r * groups) into float.
// The affine value is computed in the scales' type S, rounding after the
// product and after the sum, as MLX does.
template <typename S>
void dequantize_rows_f32(const uint32_t* codes, const S* scales, const S* biases,
                         const float* global_scale, int64_t rows, int64_t cols, int64_t code_stride,
                         int group_size, int bits, QuantizationMode mode, float* out);

} // namespace loom::cpu::quant
