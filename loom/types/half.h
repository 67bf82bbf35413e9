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

#ifndef LOOM_SOFT_FLOAT16
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
#else
  // Integer forms of the same conversions (round to nearest even, NaN made
  // quiet with its top payload bits, as the hardware does), for compilers
  // without _Float16 on the target: clang 14 on x86 accepts it only with
  // -mavx512fp16, whose code does not run on AVX2 machines (the fuzzers).
  static uint16_t from_float(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a >= 0x7f800000u) return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u);
    if (a >= 0x477ff000u) return sign | 0x7c00u; // 65520 and up round to infinity
    uint32_t h, rest, halfway;
    if (a >= 0x38800000u) { // a normal half
      h = (((a >> 23) - 112u) << 10) | ((a & 0x7fffffu) >> 13);
      rest = a & 0x1fffu;
      halfway = 0x1000u;
    } else {
      if (a <= 0x33000000u) return sign; // up to 2^-25 rounds to zero
      const uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126u - (a >> 23);
      h = m >> shift;
      rest = m & ((1u << shift) - 1u);
      halfway = 1u << (shift - 1u);
    }
    if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  static float to_float(uint16_t b) {
    const uint32_t sign = static_cast<uint32_t>(b & 0x8000u) << 16;
    const uint32_t e = (b >> 10) & 0x1fu;
    uint32_t m = b & 0x3ffu, x;
    if (e == 0x1fu) {
      x = sign | 0x7f800000u | (m << 13) | (m != 0 ? 0x400000u : 0u); // NaN made quiet
    } else if (e != 0) {
      x = sign | ((e + 112u) << 23) | (m << 13);
    } else if (m == 0) {
      x = sign;
    } else { // subnormal: normalise
      uint32_t shift = 0;
      while (!(m & 0x400u)) {
        m <<= 1;
        ++shift;
      }
      x = sign | ((113u - shift) << 23) | ((m & 0x3ffu) << 13);
    }
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
#endif
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
