// Scalar building blocks of the element-wise ops: type categories of the
// compute types, wrap-around integer arithmetic, complex ordering, and
// branch-free float32 exp, log, tanh and erf (within 2 ulp). Plain C++ with no
// dependency on the rest of Loom, so every backend, the op table
// (elementwise_table.h) and generated kernels include it alike.
#pragma once

#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace loom::scalar {

// Compute types: bool, the integers, float (also for float16/bfloat16),
// double, std::complex<float>.
template <typename C>
inline constexpr bool is_bool_v = std::is_same_v<C, bool>;
template <typename C>
inline constexpr bool is_int_v = std::is_integral_v<C> && !is_bool_v<C>;
template <typename C>
inline constexpr bool is_real_v = std::is_floating_point_v<C>;
template <typename C>
inline constexpr bool is_complex_v = std::is_same_v<C, std::complex<float>>;
template <typename C>
inline constexpr bool is_inexact_v = is_real_v<C> || is_complex_v<C>;

// Wrap-around integer arithmetic (signed overflow is undefined in C++, and
// narrow types would otherwise promote to a signed int).
template <typename T>
using wide_unsigned_t = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;
template <typename T>
inline T wrap_add(T x, T y) {
  using U = wide_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(x) + static_cast<U>(y));
}
template <typename T>
inline T wrap_sub(T x, T y) {
  using U = wide_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(x) - static_cast<U>(y));
}
template <typename T>
inline T wrap_mul(T x, T y) {
  using U = wide_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(x) * static_cast<U>(y));
}
template <typename T>
inline T wrap_neg(T x) {
  return wrap_sub(T(0), x);
}

// Shift counts are taken modulo the width of the (promoted) register, which
// is what a scalar x86 shift does and what MLX returns; the explicit mask
// keeps vectorised shifts (which saturate instead) giving the same answer.
template <typename C>
constexpr int shift_mask() {
  return sizeof(C) <= 4 ? 31 : 63;
}

// Complex numbers order lexicographically (real part, then imaginary), as in MLX.
inline bool lex_less(std::complex<float> x, std::complex<float> y) {
  return x.real() < y.real() || (x.real() == y.real() && x.imag() < y.imag());
}
inline bool lex_less_equal(std::complex<float> x, std::complex<float> y) {
  return x.real() < y.real() || (x.real() == y.real() && x.imag() <= y.imag());
}
inline bool is_nan(std::complex<float> x) { return x.real() != x.real() || x.imag() != x.imag(); }

// cond ? a : b as a bit mask. A plain ?: at the end of a long computation
// can be turned into a branch that the optimiser sinks the computation into,
// and then (floating point ops may trap) the loop no longer vectorises.
inline float blend(bool cond, float a, float b) {
  uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & mask) |
                              (std::bit_cast<uint32_t>(b) & ~mask));
}

// e^x for float32 within 2 ulp over the whole range (subnormal results
// included), written without branches or calls so loops over it vectorise.
inline float exp_f32(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  // ln 2 split so that n * kLn2Hi is exact for the n that occur.
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kShifter = 12582912.0f; // 1.5 * 2^23: adding it rounds to an integer
  // Beyond these bounds the result is inf or 0; clamping keeps n in range.
  float xc = x > 88.8f ? 88.8f : x;
  xc = xc < -104.0f ? -104.0f : xc;
  xc = x != x ? 0.0f : xc;
  float fn = (xc * kLog2e + kShifter) - kShifter;
  float r = xc - fn * kLn2Hi;
  r = r - fn * kLn2Lo;
  // e^r on |r| <= ln2/2: 1 + r + r^2 P(r), P fitted for relative error.
  float p = 1.3814604753e-03f;
  p = p * r + 8.3687102190e-03f;
  p = p * r + 4.1668387501e-02f;
  p = p * r + 1.6666520687e-01f;
  p = p * r + 4.9999993451e-01f;
  p = (p * r) * r + r + 1.0f;
  // Scale by 2^n in two steps so that results in the subnormal range and
  // overflow to inf come out right with a single rounding.
  int32_t n = static_cast<int32_t>(fn);
  int32_t n1 = n >> 1;
  int32_t n2 = n - n1;
  float s1 = std::bit_cast<float>(static_cast<uint32_t>(n1 + 127) << 23);
  float s2 = std::bit_cast<float>(static_cast<uint32_t>(n2 + 127) << 23);
  float y = (p * s1) * s2;
  return blend(x != x, x, y);
}

// e^y for y in [-87, 88] (no overflow, underflow or NaN to care about):
// exp_f32 without its guards, for callers that bound the argument.
inline float exp_f32_bounded(float y) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kShifter = 12582912.0f;
  float fn = (y * kLog2e + kShifter) - kShifter;
  float r = y - fn * kLn2Hi;
  r = r - fn * kLn2Lo;
  float p = 1.3814604753e-03f;
  p = p * r + 8.3687102190e-03f;
  p = p * r + 4.1668387501e-02f;
  p = p * r + 1.6666520687e-01f;
  p = p * r + 4.9999993451e-01f;
  p = (p * r) * r + r + 1.0f;
  int32_t n = static_cast<int32_t>(fn);
  return p * std::bit_cast<float>(static_cast<uint32_t>(n + 127) << 23);
}

// erf(x) for float32 within 2 ulp, branch-free like exp_f32.
inline float erf_f32(float x) {
  constexpr float kSplit = 0.921875f;
  float ax = x < 0.0f ? -x : x;
  // |x| < kSplit: erf(x) = x + x P(x^2), relative error ~2e-8.
  float t = x * x;
  float ps = -5.9908315949e-04f;
  ps = ps * t + 4.9931759285e-03f;
  ps = ps * t - 2.6766613286e-02f;
  ps = ps * t + 1.1281816084e-01f;
  ps = ps * t - 3.7612493678e-01f;
  ps = ps * t + 1.2837914955e-01f;
  float small = x + x * ps;
  // kSplit <= |x| <= 4: erfc(x) = exp(-x^2 + Q(x)), Q fitted around 2.5.
  // Past 4, erfc is below half an ulp of 1 and the clamp gives exactly 1.
  // (The clamps also map NaN to a number; NaN is restored at the end.)
  float xl = ax > kSplit ? ax : kSplit;
  xl = xl < 4.0f ? xl : 4.0f;
  float u = xl - 2.5f;
  float q = 1.9473470365e-04f;
  q = q * u - 1.1058268044e-04f;
  q = q * u + 2.5427485161e-03f;
  q = q * u - 1.0645437493e-02f;
  q = q * u + 5.6139518934e-02f;
  q = q * u - 3.5269360726e-01f;
  q = q * u - 1.5568187360e+00f;
  float large = 1.0f - exp_f32_bounded(q - xl * xl);
  large = x < 0.0f ? -large : large;
  return blend(ax < kSplit, small, blend(x != x, x, large));
}

// tanh(x) for float32 within 2 ulp, branch-free (GELU's tanh form and
// tanh activations run at memory speed instead of through libm).
inline float tanh_f32(float x) {
  constexpr float kSplit = 0.9f;
  float ax = x < 0.0f ? -x : x;
  // |x| < kSplit: x + x^3 P(x^2), relative error ~1e-9.
  float t = x * x;
  float p = -4.5545621211e-04f;
  p = p * t + 2.5826581203e-03f;
  p = p * t - 8.2645340986e-03f;
  p = p * t + 2.1663537718e-02f;
  p = p * t - 5.3929300425e-02f;
  p = p * t + 1.3332978251e-01f;
  p = p * t - 3.3333322263e-01f;
  float small = x + (x * t) * p;
  small = t == 0.0f ? x : small; // keeps the sign of -0
  // Otherwise 1 - 2 / (e^{2|x|} + 1). tanh is 1 in float32 long before
  // 2|x| = 80, so clamping there (which also maps NaN to a number, restored
  // at the end) keeps the exponential in range.
  float y = 2.0f * ax;
  y = y < 80.0f ? y : 80.0f;
  float large = 1.0f - 2.0f / (exp_f32_bounded(y) + 1.0f);
  large = x < 0.0f ? -large : large;
  return blend(ax < kSplit, small, blend(x != x, x, large));
}

// Natural log for float32 within 2 ulp (subnormal inputs included),
// branch-free: log(m 2^e) = e ln2 + log1p(m - 1) with m in [sqrt(1/2), sqrt(2)).
inline float log_f32(float x) {
  constexpr float kMinNormal = 1.17549435e-38f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float xs = x * (x < kMinNormal ? 8388608.0f : 1.0f); // 2^23 makes subnormals normal
  int32_t e_adjust = x < kMinNormal ? -23 : 0;
  // Offsetting the bits by those of sqrt(1/2) rounds the exponent field so
  // that the mantissa, re-based on sqrt(1/2), lands in [sqrt(1/2), sqrt(2)).
  uint32_t u = std::bit_cast<uint32_t>(xs) + (0x3f800000u - 0x3f3504f3u);
  int32_t e = static_cast<int32_t>(u >> 23) - 127 + e_adjust;
  float m = std::bit_cast<float>((u & 0x007fffffu) + 0x3f3504f3u);
  float f = m - 1.0f; // exact
  // log1p(f) = f - f^2/2 + f^3 P(f), relative error ~1e-9.
  float p = 6.7466608782e-02f;
  p = p * f - 1.1675684479e-01f;
  p = p * f + 1.1888171114e-01f;
  p = p * f - 1.2405584585e-01f;
  p = p * f + 1.4219550707e-01f;
  p = p * f - 1.6667996016e-01f;
  p = p * f + 2.0002118738e-01f;
  p = p * f - 2.5000009598e-01f;
  p = p * f + 3.3333312603e-01f;
  float f2 = f * f;
  float fe = static_cast<float>(e);
  float r = fe * kLn2Lo + (f2 * f * p - 0.5f * f2);
  r = fe * kLn2Hi + (f + r);
  r = blend(x <= std::numeric_limits<float>::max(), r, x); // +inf and NaN pass through
  r = blend(x == 0.0f, -kInf, r);
  return blend(x < 0.0f, std::numeric_limits<float>::quiet_NaN(), r);
}

// The inverse error function in double precision: M. Giles' single-precision
// approximation ("Approximating the erfinv function", GPU Computing Gems,
// 2011) as the starting point, then two Newton steps on erf(x) = y. The
// steps work on |y| and use erfc where erf(x) is close to 1, so that the
// residual keeps its relative accuracy in the tails. Scalar (it calls erf
// and erfc); float32 and half inputs compute in double and round once.
inline double erfinv_f64(double y) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (!(y >= -1.0 && y <= 1.0)) return std::numeric_limits<double>::quiet_NaN();
  double ay = y < 0.0 ? -y : y;
  if (ay == 1.0) return y < 0.0 ? -kInf : kInf;
  if (ay == 0.0) return y; // keeps the sign of -0
  double w = -std::log((1.0 - ay) * (1.0 + ay));
  double p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * ay;
  constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
  for (int i = 0; i < 2; ++i) {
    double f = ay > 0.5 ? (1.0 - ay) - std::erfc(x) : std::erf(x) - ay;
    x -= f / (kTwoOverSqrtPi * std::exp(-x * x));
  }
  return y < 0.0 ? -x : x;
}

} // namespace loom::scalar
