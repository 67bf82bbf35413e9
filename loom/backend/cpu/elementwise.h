// CPU kernels of the element-wise families (unary, binary, where) and the
// pieces they share: layout tests, output allocation with donation, and
// vectorisable float32 exp/erf.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "loom/array.h"
#include "loom/primitives/binary.h"
#include "loom/primitives/unary.h"

namespace loom::cpu {

// Inputs are evaluated and validated by ops/; `out` has shape and dtype.
void unary(UnaryOp op, const array& in, array& out);
void binary(BinaryOp op, const array& a, const array& b, array& out);
void select(const array& condition, const array& x, const array& y, array& out);

namespace elementwise {

// Cheap element-wise work splits into chunks of at least this many elements.
inline constexpr size_t kGrain = size_t(1) << 16;

// float16 and bfloat16 are stored as such and computed in float.
template <typename T>
using compute_t =
    std::conditional_t<std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>, float, T>;

template <typename T>
inline constexpr bool is_complex_v = std::is_same_v<T, complex64_t>;

// bool elements are read and written as bytes: GCC does not vectorise
// loops that load bool, and a byte holds 0 or 1 either way.
template <typename T>
using storage_t = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

// float16 <-> float conversions written with integer operations only (GCC
// does not vectorise conversions through _Float16 on x86 without AVX512-FP16).
// Round to nearest even; NaN stays NaN, overflow gives inf.
inline float half_to_float(uint16_t h) {
  uint32_t magnitude = static_cast<uint32_t>(h & 0x7fffu) << 13;
  uint32_t exponent = magnitude & 0x0f800000u;
  uint32_t normal = magnitude + 0x38000000u;  // rebias 15 -> 127
  uint32_t inf_nan = magnitude | 0x7f800000u; // exponent 31 -> 255
  float subnormal = std::bit_cast<float>(magnitude + 0x38800000u) - 6.10351562e-05f; // 2^-14
  uint32_t bits = exponent == 0x0f800000u ? inf_nan : normal;
  bits = exponent == 0 ? std::bit_cast<uint32_t>(subnormal) : bits;
  return std::bit_cast<float>(bits | (static_cast<uint32_t>(h & 0x8000u) << 16));
}

inline uint16_t float_to_half(float x) {
  uint32_t f = std::bit_cast<uint32_t>(x);
  uint32_t sign = (f >> 16) & 0x8000u;
  uint32_t a = f & 0x7fffffffu;
  // Normal results: rebias, then round the 13 dropped bits to nearest even
  // (a carry into the exponent is the correct rounding, up to inf).
  uint32_t normal = (a - 0x38000000u + 0x0fffu + ((a >> 13) & 1u)) >> 13;
  // Subnormal results: adding 0.5 aligns the value so that the float
  // addition itself rounds at 2^-24.
  uint32_t subnormal = std::bit_cast<uint32_t>(std::bit_cast<float>(a) + 0.5f) - 0x3f000000u;
  uint32_t bits = a < 0x38800000u ? subnormal : normal;
  bits = a >= 0x47800000u ? 0x7c00u : bits; // |x| >= 65536: inf
  bits = a > 0x7f800000u ? 0x7e00u : bits;  // NaN
  return static_cast<uint16_t>(bits | sign);
}

// Reads a stored element as its compute type.
template <typename T>
inline compute_t<T> load(T v) {
  if constexpr (std::is_same_v<T, float16_t>) {
    return half_to_float(v.bits);
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16);
  } else {
    return v;
  }
}

// Reads an element from its storage (bool is stored as a byte).
template <typename T>
inline compute_t<T> load_storage(storage_t<T> v) {
  if constexpr (std::is_same_v<T, bool>)
    return v != 0;
  else
    return load(v);
}

// Converts a computed value to the stored element type. bfloat16 rounds to
// nearest even here without a branch, so loops writing it vectorise.
template <typename Out, typename V>
inline Out store(V v) {
  if constexpr (std::is_same_v<Out, bfloat16_t>) {
    uint32_t u = std::bit_cast<uint32_t>(static_cast<float>(v));
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x40u;
    Out out;
    out.bits = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
    return out;
  } else if constexpr (std::is_same_v<Out, float16_t>) {
    Out out;
    out.bits = float_to_half(static_cast<float>(v));
    return out;
  } else {
    return static_cast<Out>(v);
  }
}

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

// Every element sits in the data_size() slots from data() on, once: a flat
// loop over them visits each element exactly once, in some order. (A view
// with a negative stride is walked backwards from data(), so it is not.)
inline bool is_dense(const array& a) {
  if (!a.flags().contiguous || a.data_size() != a.size()) return false;
  for (int d = 0; d < a.ndim(); ++d) {
    if (a.shape()[d] > 1 && a.strides()[d] < 0) return false;
  }
  return true;
}

// Every element is the same buffer slot (a scalar, or a broadcast of one).
inline bool is_scalar_like(const array& a) {
  for (int d = 0; d < a.ndim(); ++d) {
    if (a.shape()[d] > 1 && a.strides()[d] != 0) return false;
  }
  return true;
}

// Two dense arrays of one shape whose elements sit at the same positions.
inline bool same_dense_layout(const array& a, const array& b) {
  for (int d = 0; d < a.ndim(); ++d) {
    if (a.shape()[d] > 1 && a.strides()[d] != b.strides()[d]) return false;
  }
  return true;
}

// An input whose buffer `out` may take over and overwrite in place.
inline bool can_donate(const array& in, const array& out) {
  return in.itemsize() == out.itemsize() && is_dense(in) && in.is_donatable() && !out.is_tracer();
}

// Gives `out` storage laid out like the dense array `like`: the buffer of
// the first donatable candidate, else a fresh one with like's strides.
inline void alloc_like(array& out, const array& like, std::initializer_list<const array*> donors) {
  for (const array* d : donors) {
    if (can_donate(*d, out)) {
      out.copy_shared_buffer(*d);
      return;
    }
  }
  out.set_data(allocator::allocate(like.data_size() * out.itemsize()), like.data_size(),
               like.strides(), like.flags());
}

// Storage for one element that every position of `out` refers to.
inline void alloc_scalar_like(array& out) {
  Flags flags{out.size() <= 1, out.size() <= 1, out.size() <= 1};
  out.set_data(allocator::allocate(out.itemsize()), 1, Strides(out.ndim(), 0), flags);
}

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

} // namespace elementwise
} // namespace loom::cpu
