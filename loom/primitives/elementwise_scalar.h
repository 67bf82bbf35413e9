// Scalar building blocks of the element-wise ops: type categories of the
// compute types, wrap-around integer arithmetic, complex ordering, and
// branch-free float32 exp, log, tanh and erf (within 2 ulp), log1p (1 ulp),
// and expm1, sinh, cosh, sin, cos and tan (within 1 ulp, computed in double;
// sin, cos and tan fall back to the C library past 2^40), the inverse
// trigonometric and hyperbolic functions and erfinv (computed in double),
// and float64 exp and log (within 1 ulp). Plain C++ with no
// dependency on the rest of Loom, so every backend, the op table
// (elementwise_table.h) and generated kernels include it alike.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <complex>
#include <cstddef>
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
// Every select of the functions below is a blend, clamps included: for an
// AVX2 target (no AVX-512 mask registers) GCC 12 made branches of exp_f32's
// `x > 88.8f ? 88.8f : x`, and exp, erf, tanh, log and sigmoid ran scalar
// (AMD EPYC, one thread, 2M floats: exp 11 ms and erf 24 ms; as blends 1.7
// and 2.9 ms, every float32 result the same bits).
inline float blend(bool cond, float a, float b) {
  uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & mask) |
                              (std::bit_cast<uint32_t>(b) & ~mask));
}

inline double blend(bool cond, double a, double b) {
  uint64_t mask = 0ull - static_cast<uint64_t>(cond);
  return std::bit_cast<double>((std::bit_cast<uint64_t>(a) & mask) |
                               (std::bit_cast<uint64_t>(b) & ~mask));
}

// x limited to [lo, hi] (NaN gives hi), with masks for the reason above.
inline float clamp_bits(float x, float lo, float hi) {
  float y = blend(x < hi, x, hi);
  return blend(y > lo, y, lo);
}

// Copies the sign bit of `sign` onto the non-negative float `magnitude`.
inline float with_sign_of(float magnitude, float sign) {
  return std::bit_cast<float>(std::bit_cast<uint32_t>(magnitude) |
                              (std::bit_cast<uint32_t>(sign) & 0x80000000u));
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
  float xc = blend(x > 88.8f, 88.8f, x);
  xc = blend(xc < -104.0f, -104.0f, xc);
  xc = blend(x != x, 0.0f, xc);
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

// erf(x) for |x| < kErfSplit: x + x P(x^2), relative error ~2e-8.
inline constexpr float kErfSplit = 0.921875f;
inline float erf_f32_small(float x) {
  float t = x * x;
  float ps = -5.9908315949e-04f;
  ps = ps * t + 4.9931759285e-03f;
  ps = ps * t - 2.6766613286e-02f;
  ps = ps * t + 1.1281816084e-01f;
  ps = ps * t - 3.7612493678e-01f;
  ps = ps * t + 1.2837914955e-01f;
  return x + x * ps;
}

// erf(x) for float32 within 2 ulp, branch-free like exp_f32.
inline float erf_f32(float x) {
  constexpr float kSplit = kErfSplit;
  float ax = std::fabs(x);
  float small = erf_f32_small(x);
  // kSplit <= |x| <= 4: erfc(x) = exp(-x^2 + Q(x)), Q fitted around 2.5.
  // Past 4, erfc is below half an ulp of 1 and the clamp gives exactly 1.
  // (The clamps also map NaN to a number; NaN is restored at the end.)
  float xl = blend(ax > kSplit, ax, kSplit);
  xl = blend(xl < 4.0f, xl, 4.0f);
  // Q is fitted for the error it causes in erf (weighted by erfc), not in
  // erfc itself: degree 5 keeps it under 0.4 ulp of erf (1.65 ulp in all,
  // checked on every float32 in [0.875, 4.5] against double erf), one FMA
  // fewer than a fit of erfc's relative error needs.
  float u = xl - 2.5f;
  float q = -1.2288838625e-03f;
  q = q * u + 4.1952658648e-05f;
  q = q * u - 1.3352066278e-02f;
  q = q * u + 5.4733507335e-02f;
  q = q * u - 3.5296988487e-01f;
  q = q * u - 1.5568181276e+00f;
  float large = 1.0f - exp_f32_bounded(q - xl * xl);
  large = with_sign_of(large, x); // large >= 0; NaN is restored below
  return blend(ax < kSplit, small, blend(x != x, x, large));
}

// erf over a block, for the eager kernel and compile's fused loops alike: a
// piece whose elements all lie below kErfSplit runs only the small-range
// polynomial (what erf_f32 returns there). The test is a maximum over the
// magnitudes' bits (ordered like the values for non-negative floats; NaN
// compares above every number), one vector op per element, where a
// per-element flag cost half as much as the polynomial itself.
inline void erf_block(const float* x, float* y, size_t n) {
  constexpr size_t kPiece = 256;
  const uint32_t split = std::bit_cast<uint32_t>(kErfSplit);
  for (size_t b = 0; b < n; b += kPiece) {
    const size_t e = b + kPiece < n ? b + kPiece : n;
    uint32_t top = 0;
    for (size_t i = b; i < e; ++i) {
      uint32_t m = std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu;
      top = top > m ? top : m;
    }
    if (top < split) {
      for (size_t i = b; i < e; ++i) y[i] = erf_f32_small(x[i]);
    } else {
      for (size_t i = b; i < e; ++i) y[i] = erf_f32(x[i]);
    }
  }
}

// tanh(x) for |x| < kTanhSplit: x + x^3 P(x^2), relative error ~1e-9.
inline constexpr float kTanhSplit = 0.9f;
inline float tanh_small_poly(float t) { // P(t), t = x^2
  float p = -4.5545621211e-04f;
  p = p * t + 2.5826581203e-03f;
  p = p * t - 8.2645340986e-03f;
  p = p * t + 2.1663537718e-02f;
  p = p * t - 5.3929300425e-02f;
  p = p * t + 1.3332978251e-01f;
  p = p * t - 3.3333322263e-01f;
  return p;
}
inline float tanh_f32_small(float x) {
  float t = x * x;
  float small = x + (x * t) * tanh_small_poly(t);
  return blend(t == 0.0f, x, small); // keeps the sign of -0
}
inline bool tanh_in_small_range(float x) { return (x < 0.0f ? -x : x) < kTanhSplit; }

// tanh(x) for float32 within 2 ulp, branch-free (GELU's tanh form and
// tanh activations run at memory speed instead of through libm). Both
// forms are computed on |x| and x's sign is copied onto the result: one
// bit operation where negating each form took a compare and a select
// (12% of the kernel; tanh_f32_small's result is the same bits).
inline float tanh_f32(float x) {
  constexpr float kSplit = kTanhSplit;
  float ax = std::fabs(x);
  float t = ax * ax;
  float small = ax + (ax * t) * tanh_small_poly(t); // tanh_f32_small on |x|
  // Otherwise 1 - 2 / (e^{2|x|} + 1). tanh is 1 in float32 long before
  // 2|x| = 80, so clamping there (which also maps NaN to a number, restored
  // at the end) keeps the exponential in range.
  float y = 2.0f * ax;
  y = blend(y < 80.0f, y, 80.0f);
  float large = 1.0f - 2.0f / (exp_f32_bounded(y) + 1.0f);
  float r = with_sign_of(blend(ax < kSplit, small, large), x);
  return blend(x != x, x, r);
}

// log1p(f) - f = -f^2/2 + f^3 P(f) for f in [sqrt(1/2) - 1, sqrt(2) - 1],
// relative error ~1e-9: the reduced argument's part of log_f32 and log1p_f32.
inline float log1p_tail_f32(float f) {
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
  return f2 * f * p - 0.5f * f2;
}

// Natural log for float32 within 2 ulp (subnormal inputs included),
// branch-free: log(m 2^e) = e ln2 + log1p(m - 1) with m in [sqrt(1/2), sqrt(2)).
inline float log_f32(float x) {
  constexpr float kMinNormal = 1.17549435e-38f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const bool subnormal = x < kMinNormal;
  float xs = x * blend(subnormal, 8388608.0f, 1.0f); // 2^23 makes subnormals normal
  int32_t e_adjust = -23 & -static_cast<int32_t>(subnormal);
  // Offsetting the bits by those of sqrt(1/2) rounds the exponent field so
  // that the mantissa, re-based on sqrt(1/2), lands in [sqrt(1/2), sqrt(2)).
  uint32_t u = std::bit_cast<uint32_t>(xs) + (0x3f800000u - 0x3f3504f3u);
  int32_t e = static_cast<int32_t>(u >> 23) - 127 + e_adjust;
  float m = std::bit_cast<float>((u & 0x007fffffu) + 0x3f3504f3u);
  float f = m - 1.0f; // exact
  float fe = static_cast<float>(e);
  float r = fe * kLn2Lo + log1p_tail_f32(f);
  r = fe * kLn2Hi + (f + r);
  r = blend(x <= std::numeric_limits<float>::max(), r, x); // +inf and NaN pass through
  r = blend(x == 0.0f, -kInf, r);
  return blend(x < 0.0f, std::numeric_limits<float>::quiet_NaN(), r);
}

// 1 / (1 + e^-x) for float32 within 2 ulp: with e = e^-|x| (no overflow),
// 1 / (1 + e) for x >= 0 and e / (1 + e) below, so results down to the
// subnormal range (x < -87) keep their precision.
inline float sigmoid_f32(float x) {
  float e = exp_f32(-std::fabs(x));
  return blend(x >= 0.0f, 1.0f, e) / (1.0f + e); // NaN: e is NaN
}

// --- float32 kernels computed in double ---
// The ops below widen a float32 argument to double, reduce and evaluate it
// there and round once at the end: within 1 ulp of the exact result, still
// without branches or calls (GCC vectorises the loops over them; a double
// vector holds half as many lanes, which memory-bound loops do not feel).

// Rounds to the nearest integer by adding and subtracting 1.5 * 2^52 (exact
// for |y| < 2^51); the sum's low mantissa bits hold that integer.
inline constexpr double kRoundShifter = 6755399441055744.0;

// e^r - 1 on |r| <= ln2/2, relative error below 3e-13 (Taylor to degree 10).
inline double expm1_reduced_f64(double r) {
  double p = 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  return (p * r) * r + r;
}

// e^y = 2^n (1 + q) for y in [-700, 700] as (q, 2^n): callers take e^y as
// s + s q, or e^y - 1 as s q + (s - 1) (exact for the n that matter, so
// expm1 keeps its relative accuracy near 0).
struct ExpParts {
  double q;
  double s;
};
inline ExpParts exp_parts_f64(double y) {
  constexpr double kLog2e = 1.4426950408889634074;
  constexpr double kLn2Hi = 6.93147180369123816490e-01; // 32 bits: n * kLn2Hi is exact
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  double t = y * kLog2e + kRoundShifter;
  double n = t - kRoundShifter;
  double r = y - n * kLn2Hi;
  r = r - n * kLn2Lo;
  int64_t ni = std::bit_cast<int64_t>(t) - std::bit_cast<int64_t>(kRoundShifter);
  double s = std::bit_cast<double>(static_cast<uint64_t>(ni + 1023) << 52);
  return {expm1_reduced_f64(r), s};
}

// e^x - 1 for float32.
inline float expm1_f32(float x) {
  // Past 89, e^x overflows float32; below -30, e^x - 1 rounds to -1. The
  // clamps also map NaN to a number (restored at the end).
  ExpParts e = exp_parts_f64(clamp_bits(x, -30.0f, 89.0f));
  float y = static_cast<float>(e.s * e.q + (e.s - 1.0));
  y = blend(x == 0.0f, x, y); // keeps the sign of -0
  return blend(x != x, x, y);
}

// sinh(|x|) = (E + E / (E + 1)) / 2 with E = e^|x| - 1: both terms are
// positive, so there is no cancellation near 0.
inline float sinh_f32(float x) {
  // sinh(95) overflows float32; NaN maps to 95 (and is restored at the end).
  ExpParts e = exp_parts_f64(clamp_bits(std::fabs(x), 0.0f, 95.0f));
  double big = e.s * e.q + (e.s - 1.0);
  float y = static_cast<float>(0.5 * (big + big / (big + 1.0)));
  return blend(x != x, x, with_sign_of(y, x));
}

inline float cosh_f32(float x) {
  ExpParts e = exp_parts_f64(clamp_bits(std::fabs(x), 0.0f, 95.0f));
  double ex = e.s + e.s * e.q;
  float y = static_cast<float>(0.5 * ex + 0.5 / ex);
  return blend(x != x, x, y);
}

// log(1 + x) for float32 within 1 ulp (0.79 measured), in float: u = 1 + x
// rounded and c, what that rounding lost, give log1p(x) = log(u) + c / u
// (the second-order term is far below an ulp); log(u) as in log_f32. About
// twice as fast as widening to double and dividing there.
inline float log1p_f32(float x) {
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  // Fast2Sum with the larger operand first, so c is exact. Arguments outside
  // (-1, inf), NaN and zeros compute some number here and are replaced at
  // the end.
  float hi = std::max(x, 1.0f), lo = std::min(x, 1.0f);
  float u = hi + lo;
  float c = lo - (u - hi);
  uint32_t bits = std::bit_cast<uint32_t>(u) + (0x3f800000u - 0x3f3504f3u);
  int32_t e = static_cast<int32_t>(bits >> 23) - 127;
  float m = std::bit_cast<float>((bits & 0x007fffffu) + 0x3f3504f3u);
  float f = m - 1.0f; // exact
  float fe = static_cast<float>(e);
  float r = fe * kLn2Lo + (log1p_tail_f32(f) + c / u);
  r = fe * kLn2Hi + (f + r);
  // x itself for +-0 (the sign of -0), +inf and NaN.
  r = blend((x > -1.0f) & (x < kInf) & (x != 0.0f), r, x);
  return blend(x <= -1.0f, blend(x == -1.0f, -kInf, std::numeric_limits<float>::quiet_NaN()), r);
}

// --- float32 sin, cos and tan ---
// x is reduced in double: sin and cos to r = x - n pi (cos: n + 1/2 for n),
// |r| <= pi/2, and one odd polynomial; tan to r = x - n pi/2, |r| <= pi/4,
// and both polynomials. pi (pi/2) is split in two parts whose first has 33
// bits, so with a fused multiply-add the first subtraction is exact (the
// result is a multiple of that part's last bit, and small). That keeps the
// reduction exact enough while n is well below 2^52 (2^20 without FMA, where
// the product itself must be exact); past kTrigMax, and for inf and NaN, the
// *_wide functions call the C library's double routine.
#if defined(__FMA__)
inline constexpr float kTrigMax = 1099511627776.0f; // 2^40
#else
inline constexpr float kTrigMax = 524288.0f; // 2^19
#endif

// x - n * c with one rounding where the CPU has FMA (the reduction's first
// step must be exact there); spelled as std::fma so it does not depend on the
// compiler contracting the expression (it did not at -O1 under ASan).
inline double reduce_by(double x, double n, double c) {
#if defined(__FMA__)
  return std::fma(-n, c, x);
#else
  return x - n * c;
#endif
}

// sin(r) for |r| <= pi/2: r + r^3 P(r^2), P a minimax fit for relative error
// (2.6e-11, far below the float32 rounding that follows; the Taylor series
// needs two more terms for the same).
inline double sin_poly_f64(double r) {
  double r2 = r * r;
  double p = -2.388245194522765e-08;
  p = p * r2 + 2.75249732605622e-06;
  p = p * r2 - 0.0001984085902051997;
  p = p * r2 + 0.008333331025273326;
  p = p * r2 - 0.16666666623674847;
  return r + (r * r2) * p;
}

// r with its sign flipped when the integer that x + kRoundShifter rounded x
// to is odd (the last bit of t's mantissa): two integer ops where a select
// on the parity took three.
inline double negate_if_odd(double r, double t) {
  return std::bit_cast<double>(std::bit_cast<uint64_t>(r) ^ (std::bit_cast<uint64_t>(t) << 63));
}

inline constexpr double kInvPi = 0.31830988618379067154;
inline constexpr double kPiHi = 3.14159265346825122833; // 33 bits
inline constexpr double kPiLo = 1.21542010130123844986e-10;

// The core forms are exact only for |x| < kTrigMax (others give some
// number); sin_f32 and friends pick the wide form past it.
inline float sin_f32_core(float x) {
  double xd = x;
  double t = xd * kInvPi + kRoundShifter;
  double n = t - kRoundShifter;
  double r = reduce_by(xd, n, kPiHi);
  r = r - n * kPiLo;
  // sin(x) = (-1)^n sin(r), and the polynomial is odd: the sign goes on r.
  double v = sin_poly_f64(negate_if_odd(r, t));
  return blend(x == 0.0f, x, static_cast<float>(v)); // keeps the sign of -0
}

inline float cos_f32_core(float x) {
  // cos(x) = -(-1)^n sin(r) with r = x - (n + 1/2) pi: a shifter one above
  // kRoundShifter makes t's last bit the parity of n + 1.
  constexpr double kShifterOdd = kRoundShifter + 1.0;
  double xd = x;
  double t = (xd * kInvPi - 0.5) + kShifterOdd;
  double m = (t - kShifterOdd) + 0.5; // n + 1/2
  double r = reduce_by(xd, m, kPiHi);
  r = r - m * kPiLo;
  return static_cast<float>(sin_poly_f64(negate_if_odd(r, t)));
}

inline float tan_f32_core(float x) {
  constexpr double kTwoOverPi = 0.63661977236758134308;
  constexpr double kPio2Hi = 1.57079632673412561417e+00;
  constexpr double kPio2Lo = 6.07710050650619224932e-11;
  double xd = x;
  double t = xd * kTwoOverPi + kRoundShifter;
  double n = t - kRoundShifter;
  double r = reduce_by(xd, n, kPio2Hi);
  r = r - n * kPio2Lo;
  double r2 = r * r;
  // Taylor series: on |r| <= pi/4 the truncation is below 3e-10 relative.
  double ps = 1.0 / 6227020800.0;
  ps = ps * r2 - 1.0 / 39916800.0;
  ps = ps * r2 + 1.0 / 362880.0;
  ps = ps * r2 - 1.0 / 5040.0;
  ps = ps * r2 + 1.0 / 120.0;
  ps = ps * r2 - 1.0 / 6.0;
  double pc = 1.0 / 479001600.0;
  pc = pc * r2 - 1.0 / 3628800.0;
  pc = pc * r2 + 1.0 / 40320.0;
  pc = pc * r2 - 1.0 / 720.0;
  pc = pc * r2 + 1.0 / 24.0;
  pc = pc * r2 - 0.5;
  double sin_r = r + (r * r2) * ps;
  double cos_r = 1.0 + r2 * pc;
  // tan(x) = tan(r) for even n, -cot(r) for odd n.
  double v = (std::bit_cast<uint64_t>(t) & 1) ? -cos_r / sin_r : sin_r / cos_r;
  return blend(x == 0.0f, x, static_cast<float>(v));
}

inline bool trig_in_range(float x) { return (x < 0.0f ? -x : x) < kTrigMax; }

// Outside the core's range (huge arguments, inf, NaN): the C library's
// double routines, exact to well under a float32 ulp.
inline float sin_f32_wide(float x) { return static_cast<float>(std::sin(static_cast<double>(x))); }
inline float cos_f32_wide(float x) { return static_cast<float>(std::cos(static_cast<double>(x))); }
inline float tan_f32_wide(float x) { return static_cast<float>(std::tan(static_cast<double>(x))); }

inline float sin_f32(float x) { return trig_in_range(x) ? sin_f32_core(x) : sin_f32_wide(x); }
inline float cos_f32(float x) { return trig_in_range(x) ? cos_f32_core(x) : cos_f32_wide(x); }
inline float tan_f32(float x) { return trig_in_range(x) ? tan_f32_core(x) : tan_f32_wide(x); }

// Runs `core` over a block with a vectorised loop, and `wide` on the
// elements outside the core's range, each element exactly as sin_f32 & co.
// would. The loop keeps the largest magnitude it has seen (its bits: they
// order like the values, NaN above inf), two vector ops per element, and a
// piece that saw one at or past kTrigMax redoes those elements with `wide`
// from x. When the output is the input (eager kernels write in place into a
// donated buffer) x is gone by then, so there the range is tested first, in
// a pass of its own.
template <float (*Core)(float), float (*Wide)(float)>
inline void ranged_block(const float* x, float* y, size_t n) {
  constexpr size_t kPiece = 1024;
  const uint32_t limit = std::bit_cast<uint32_t>(kTrigMax);
  for (size_t b = 0; b < n; b += kPiece) {
    const size_t e = b + kPiece < n ? b + kPiece : n;
    if (x != y) {
      uint32_t top = 0;
      for (size_t i = b; i < e; ++i) {
        uint32_t m = std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu;
        top = top > m ? top : m;
        y[i] = Core(x[i]);
      }
      if (top >= limit) {
        for (size_t i = b; i < e; ++i) {
          if (!trig_in_range(x[i])) y[i] = Wide(x[i]);
        }
      }
      continue;
    }
    int outside = 0;
    for (size_t i = b; i < e; ++i) outside |= !trig_in_range(x[i]);
    if (!outside) {
      for (size_t i = b; i < e; ++i) y[i] = Core(x[i]);
    } else {
      for (size_t i = b; i < e; ++i) y[i] = trig_in_range(x[i]) ? Core(x[i]) : Wide(x[i]);
    }
  }
}

// For the branch-free two-range functors (tanh): a piece whose elements all
// lie in the small-argument range runs only that polynomial, which is what
// the full functor returns there; other pieces run the full functor. Knowing
// that takes a pass over the piece before it is computed, which costs 15% of
// tanh where pieces are mixed (the benchmark's uniform [0, 1) has 10% of its
// elements past the split, so every piece is): after a piece that needed the
// full functor the next one runs it without that pass, keeping the largest
// magnitude it sees (two vector ops per element) to tell whether the pass is
// worth making again. Results are the same bits either way.
template <float (*Small)(float), bool (*InSmall)(float), float (*Full)(float), float kSplit>
inline void split_block(const float* x, float* y, size_t n) {
  constexpr size_t kPiece = 256;
  const uint32_t split = std::bit_cast<uint32_t>(kSplit);
  bool mixed = false; // the last piece had an element past the split
  for (size_t b = 0; b < n; b += kPiece) {
    const size_t e = b + kPiece < n ? b + kPiece : n;
    if (mixed) {
      uint32_t top = 0;
      for (size_t i = b; i < e; ++i) {
        uint32_t m = std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu;
        top = top > m ? top : m;
        y[i] = Full(x[i]);
      }
      mixed = top >= split;
      continue;
    }
    int outside = 0;
    for (size_t i = b; i < e; ++i) outside |= !InSmall(x[i]);
    if (!outside) {
      for (size_t i = b; i < e; ++i) y[i] = Small(x[i]);
    } else {
      for (size_t i = b; i < e; ++i) y[i] = Full(x[i]);
      mixed = true;
    }
  }
}

// --- float64 exp and log ---
// Branch-free like the float32 kernels (8 double lanes per AVX-512 vector;
// the C library's scalar routines run at a quarter of memory speed). Both
// keep the error within 1 ulp (exp ~0.52, log ~0.53 in test_vecmath.py's
// sweep against long double).

// e^x: x = n ln2 + r, |r| <= ln2/2, e^r = 1 + (r + r^2 P(r)) with the Taylor
// coefficients to r^13 (truncation below 5e-18), scaled by 2^n in two steps
// so that subnormal results round once and overflow gives inf.
inline double exp_f64(double x) {
  constexpr double kLog2e = 1.4426950408889634074;
  constexpr double kLn2Hi = 6.93147180369123816490e-01; // 32 bits: n * kLn2Hi is exact
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  double xc = blend(x > 710.0, 710.0, x);
  xc = blend(xc < -746.0, -746.0, xc);
  xc = blend(x != x, 0.0, xc);
  double t = xc * kLog2e + kRoundShifter;
  double fn = t - kRoundShifter;
  double r = reduce_by(xc, fn, kLn2Hi);
  r = r - fn * kLn2Lo;
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  double e = 1.0 + (r + (r * r) * p);
  int64_t n = std::bit_cast<int64_t>(t) - std::bit_cast<int64_t>(kRoundShifter);
  int64_t n1 = n >> 1, n2 = n - n1;
  double s1 = std::bit_cast<double>(static_cast<uint64_t>(n1 + 1023) << 52);
  double s2 = std::bit_cast<double>(static_cast<uint64_t>(n2 + 1023) << 52);
  return blend(x != x, x, (e * s1) * s2);
}

// log(x): x = 2^k (1 + f), 1 + f in [sqrt(1/2), sqrt(2)), s = f / (2 + f),
// log(1 + f) = f - (f^2/2 - s (f^2/2 + R)) with R = 2 s^2/3 + 2 s^4/5 + ...
// (Taylor to s^18: truncation below 4e-16 of R, which is itself below 1/300
// of the result), k ln2 added in two parts.
inline double log_f64(double x) {
  constexpr double kMinNormal = 2.2250738585072014e-308;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const bool subnormal = x < kMinNormal;
  double xs = x * blend(subnormal, 4503599627370496.0, 1.0); // 2^52 makes subnormals normal
  int64_t k_adjust = -52 & -static_cast<int64_t>(subnormal);
  uint64_t bits = std::bit_cast<uint64_t>(xs) + (0x3ff0000000000000ull - 0x3fe6a09e667f3bcdull);
  double k = static_cast<double>(static_cast<int64_t>(bits >> 52) - 1023 + k_adjust);
  double f = std::bit_cast<double>((bits & 0x000fffffffffffffull) + 0x3fe6a09e667f3bcdull) - 1.0;
  double s = f / (2.0 + f);
  double z = s * s;
  double R = 2.0 / 19.0;
  R = R * z + 2.0 / 17.0;
  R = R * z + 2.0 / 15.0;
  R = R * z + 2.0 / 13.0;
  R = R * z + 2.0 / 11.0;
  R = R * z + 2.0 / 9.0;
  R = R * z + 2.0 / 7.0;
  R = R * z + 2.0 / 5.0;
  R = R * z + 2.0 / 3.0;
  R = R * z;
  double hfsq = 0.5 * f * f;
  double y = k * kLn2Hi - ((hfsq - (s * (hfsq + R) + k * kLn2Lo)) - f);
  y = blend(x <= std::numeric_limits<double>::max(), y, x); // +inf and NaN pass through
  y = blend(x == 0.0, -kInf, y);
  return blend(x < 0.0, std::numeric_limits<double>::quiet_NaN(), y);
}

// --- float32 inverse trigonometric and hyperbolic functions, erfinv ---
// Evaluated in double like expm1 & co. and rounded once (within 0.5 ulp of
// the float64 result plus ~1e-10 relative), branch-free so that loops over
// them vectorise. The polynomials were fitted for relative error (weighted
// least squares on a dense grid) against NumPy/SciPy's float64 functions.

// log(u) for a finite u > 0: u = 2^e m, m in [sqrt(1/2), sqrt(2)), and
// log(m) = 2 atanh(s), s = (m - 1) / (m + 1); relative error ~1e-13 (m - 1
// is exact, so it keeps its accuracy near u = 1).
inline double log_f64_core(double u) {
  constexpr double kLn2 = 0.69314718055994530942;
  uint64_t bits = std::bit_cast<uint64_t>(u) + (0x3ff0000000000000ull - 0x3fe6a09e667f3bcdull);
  double e = static_cast<double>(static_cast<int64_t>(bits >> 52) - 1023);
  double m = std::bit_cast<double>((bits & 0x000fffffffffffffull) + 0x3fe6a09e667f3bcdull);
  double s = (m - 1.0) / (m + 1.0);
  double s2 = s * s;
  double p = 1.0 / 11.0;
  p = p * s2 + 1.0 / 9.0;
  p = p * s2 + 1.0 / 7.0;
  p = p * s2 + 1.0 / 5.0;
  p = p * s2 + 1.0 / 3.0;
  return e * kLn2 + 2.0 * s + 2.0 * s * s2 * p;
}

// log(1 + z) for a finite z >= 0 (relative error ~1e-13): below 2^-10 the
// series x - x^2/2 + x^3/3 - x^4/4, where rounding 1 + z would cost digits.
inline double log1p_f64_core(double z) {
  double small = z * (1.0 + z * (-0.5 + z * (1.0 / 3.0 - 0.25 * z)));
  return blend(z < 0.0009765625, small, log_f64_core(1.0 + z));
}

// atan(t) for t in [0, 1]: t P(t^2), relative error 6e-11.
inline double atan_unit_f64(double t) {
  double t2 = t * t;
  double p = -0.0006849199841099997;
  p = p * t2 + 0.0048516082168344465;
  p = p * t2 - 0.016113217784398094;
  p = p * t2 + 0.03421158256756754;
  p = p * t2 - 0.054280676753544546;
  p = p * t2 + 0.07245798128131403;
  p = p * t2 - 0.08980265045698174;
  p = p * t2 + 0.11093246485666453;
  p = p * t2 - 0.14283981368899296;
  p = p * t2 + 0.19999912087558622;
  p = p * t2 - 0.33333331572039687;
  p = p * t2 + 0.9999999999412684;
  return t * p;
}

// sqrt(v) for a finite v >= 0 to ~4e-11 relative: the reciprocal square root
// from the exponent trick (3.4% off), three Newton steps, times v. std::sqrt
// would be correctly rounded, but GCC does not vectorise it unless errno is
// off (-fno-math-errno), and these float32 kernels need only ~1e-10.
inline double sqrt_f64_approx(double v) {
  double y = std::bit_cast<double>(0x5fe6eb50c7b537a9ull - (std::bit_cast<uint64_t>(v) >> 1));
  const double h = 0.5 * v;
  for (int i = 0; i < 3; ++i) y = y * (1.5 - h * y * y);
  return v * y;
}

inline constexpr double kPiF64 = 3.14159265358979323846;
inline constexpr double kPio2F64 = 1.57079632679489661923;

// The angle of the point (ax, ay) for ax, ay >= 0 (zeros and infinities
// included, NaN not): in [0, pi/2]. 0/0 takes the ratio 0 and inf/inf the
// ratio 1, the limits atan2 uses.
inline double angle_f64(double ay, double ax) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double lo = std::min(ay, ax), hi = std::max(ay, ax);
  double t = lo / blend(hi == 0.0, 1.0, hi);
  t = blend(lo == kInf, 1.0, t);
  double r = atan_unit_f64(t);
  return blend(ay > ax, kPio2F64 - r, r);
}

inline bool sign_bit(float x) { return (std::bit_cast<uint32_t>(x) >> 31) != 0; }

inline float atan_f32(float x) {
  double r = angle_f64(std::fabs(static_cast<double>(x)), 1.0);
  return blend(x != x, x, with_sign_of(static_cast<float>(r), x));
}

inline float atan2_f32(float y, float x) {
  double r = angle_f64(std::fabs(static_cast<double>(y)), std::fabs(static_cast<double>(x)));
  r = blend(sign_bit(x), kPiF64 - r, r); // the left half-plane, -0 included
  float out = with_sign_of(static_cast<float>(r), y);
  return blend((x != x) | (y != y), std::numeric_limits<float>::quiet_NaN(), out);
}

// asin(s) for s in [0, 1/2] given z = s^2: s + s z P(z), relative error 6e-11.
inline double asin_half_f64(double s, double z) {
  double p = 0.031089851392629684;
  p = p * z + 0.010487474129585811;
  p = p * z + 0.02363646215375503;
  p = p * z + 0.030265901861753788;
  p = p * z + 0.04464785844000664;
  p = p * z + 0.07499991960194462;
  p = p * z + 0.16666666688154352;
  return s + (s * z) * p;
}

// asin and acos through asin on [0, 1/2]: past |x| = 1/2 the half-angle
// form asin(|x|) = pi/2 - 2 asin(sqrt((1 - |x|) / 2)), where 1 - |x| is exact.
inline float asin_f32(float x) {
  double a = std::fabs(static_cast<double>(x));
  bool big = a > 0.5;
  double z = blend(big, 0.5 - 0.5 * a, a * a);
  double s = blend(big, sqrt_f64_approx(z), a);
  double r = asin_half_f64(s, z);
  r = blend(big, kPio2F64 - 2.0 * r, r);
  float out = with_sign_of(static_cast<float>(r), x);
  return blend(a <= 1.0, out, std::numeric_limits<float>::quiet_NaN()); // NaN too
}

inline float acos_f32(float x) {
  double xd = x, a = std::fabs(xd);
  bool big = a > 0.5;
  double z = blend(big, 0.5 - 0.5 * a, a * a);
  double s = blend(big, sqrt_f64_approx(z), a);
  double r = asin_half_f64(s, z);
  // |x| <= 1/2: pi/2 - asin(x); past it 2 asin(...) for x > 0, pi - that below.
  double small = kPio2F64 - blend(sign_bit(x), -r, r);
  double large = blend(sign_bit(x), kPiF64 - 2.0 * r, 2.0 * r);
  float out = static_cast<float>(blend(big, large, small));
  return blend(a <= 1.0, out, std::numeric_limits<float>::quiet_NaN());
}

// asinh(|x|) = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))): no cancellation near 0,
// and x^2 cannot overflow in double.
inline float asinh_f32(float x) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  double a = std::fabs(static_cast<double>(x));
  a = blend(a < 1e300, a, 0.0); // inf and NaN are restored below
  double r = log1p_f64_core(a + a * a / (1.0 + sqrt_f64_approx(1.0 + a * a)));
  float out = with_sign_of(static_cast<float>(r), x);
  out = blend(std::fabs(x) == kInf, x, out);
  return blend(x != x, x, out);
}

// acosh(x) = log1p((x - 1) + sqrt((x - 1)(x + 1))), x - 1 exact in double.
inline float acosh_f32(float x) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  double d = static_cast<double>(clamp_bits(x, 1.0f, std::numeric_limits<float>::max())) - 1.0;
  double r = log1p_f64_core(d + sqrt_f64_approx(d * (d + 2.0)));
  float out = blend(x == kInf, kInf, static_cast<float>(r));
  return blend(x >= 1.0f, out, std::numeric_limits<float>::quiet_NaN()); // NaN too
}

// atanh(|x|) = log1p(2|x| / (1 - |x|)) / 2, 1 - |x| exact in double.
inline float atanh_f32(float x) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  double a = std::fabs(static_cast<double>(x));
  double ac = blend(a < 1.0, a, 0.0);
  double r = 0.5 * log1p_f64_core(2.0 * ac / (1.0 - ac));
  float out = with_sign_of(blend(a == 1.0, kInf, static_cast<float>(r)), x);
  return blend(a <= 1.0, out, std::numeric_limits<float>::quiet_NaN()); // NaN too
}

// erfinv(y) = y P(w), w = -log(1 - y^2): one polynomial in w - 2.5 for
// w < 5, one in sqrt(w) - 3 for the tails (w reaches 16.6 at the float32
// next to 1); relative errors 2.4e-11 and 2.5e-10. (M. Giles' single-precision
// approximation uses the same two variables, "Approximating the erfinv
// function", GPU Computing Gems, 2011; these coefficients are our own fit.)
inline float erfinv_f32(float y) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  double yd = y, ay = std::fabs(yd);
  double v = (1.0 - ay) * (1.0 + ay);
  double w = -log_f64_core(blend(v > 0.0, v, 1.0));
  double t = w - 2.5;
  double pc = -1.9767558411132907e-11;
  pc = pc * t + 1.235960176367598e-10;
  pc = pc * t + 8.06200356417924e-10;
  pc = pc * t - 1.0863850953687853e-08;
  pc = pc * t + 1.3874350392838866e-08;
  pc = pc * t + 4.787017348774353e-07;
  pc = pc * t - 3.417694636665988e-06;
  pc = pc * t - 4.996029920515866e-06;
  pc = pc * t + 0.00021825147529571978;
  pc = pc * t - 0.001252707927622561;
  pc = pc * t - 0.004177318237958184;
  pc = pc * t + 0.2466402767402688;
  pc = pc * t + 1.5014093511463968;
  double u = sqrt_f64_approx(w) - 3.0;
  double pt = 7.72118053660335e-06;
  pt = pt * u - 2.209805878905513e-05;
  pt = pt * u - 2.62228141751974e-05;
  pt = pt * u + 0.00019623357708612368;
  pt = pt * u - 0.0002951875615857386;
  pt = pt * u - 0.00014169847659606562;
  pt = pt * u + 0.001487263580014168;
  pt = pt * u - 0.0035609603757915643;
  pt = pt * u + 0.005684675250501936;
  pt = pt * u - 0.007643548586059388;
  pt = pt * u + 0.00944555237597474;
  pt = pt * u + 1.001675268384128;
  pt = pt * u + 2.832976798385666;
  float out = static_cast<float>(yd * blend(w < 5.0, pc, pt));
  out = blend(ay == 1.0, with_sign_of(kInf, y), out);
  return blend(ay <= 1.0, out, std::numeric_limits<float>::quiet_NaN()); // NaN too
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
