// float16 and bfloat16 storage types. Arithmetic happens in float; these only
// convert, so kernels treat them like any other element type.
#pragma once

#include <cstdint>
#include <cstring>

namespace loom {

struct float16_t {
  uint16_t bits = 0;
  float16_t() = default;
  float16_t(float f) : bits(from_float(f)) {}
  template <typename T>
  explicit float16_t(T v) : float16_t(static_cast<float>(v)) {}
  operator float() const { return to_float(bits); }

  static uint16_t from_float(float f) {
    _Float16 h = static_cast<_Float16>(f);
    uint16_t b;
    std::memcpy(&b, &h, 2);
    return b;
  }
  static float to_float(uint16_t b) {
    _Float16 h;
    std::memcpy(&h, &b, 2);
    return static_cast<float>(h);
  }
};

struct bfloat16_t {
  uint16_t bits = 0;
  bfloat16_t() = default;
  bfloat16_t(float f) : bits(from_float(f)) {}
  template <typename T>
  explicit bfloat16_t(T v) : bfloat16_t(static_cast<float>(v)) {}
  operator float() const { return to_float(bits); }

  // Round to nearest even; NaN stays a quiet NaN.
  static uint16_t from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
  static float to_float(uint16_t b) {
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

} // namespace loom
