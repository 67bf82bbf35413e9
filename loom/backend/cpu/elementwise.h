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
    return float16_t(static_cast<float>(v));
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
  return x != x ? x : y;
}

// erf(x) for float32 within 2 ulp, branch-free like exp_f32.
inline float erf_f32(float x) {
  constexpr float kSplit = 0.921875f;
  float ax = x < 0.0f ? -x : x;
  // |x| < kSplit: erf(x) = x + x P(x^2), relative error ~4e-10.
  float t = x * x;
  float ps = 8.3700708577e-05f;
  ps = ps * t - 8.1426973252e-04f;
  ps = ps * t + 5.2010316763e-03f;
  ps = ps * t - 2.6859398011e-02f;
  ps = ps * t + 1.1283695489e-01f;
  ps = ps * t - 3.7612633735e-01f;
  ps = ps * t + 1.2837916664e-01f;
  float small = x + x * ps;
  // kSplit <= |x| <= 4: erfc(x) = exp(-x^2 + Q(x)), Q fitted around 2.5.
  // Past 4, erfc is below half an ulp of 1 and the clamp gives exactly 1.
  float xl = ax < kSplit ? kSplit : ax;
  xl = xl > 4.0f ? 4.0f : xl;
  float u = xl - 2.5f;
  float q = -2.1184090922e-05f;
  q = q * u + 6.4754518972e-05f;
  q = q * u - 4.2416348432e-04f;
  q = q * u + 2.1740980746e-03f;
  q = q * u - 1.0849461843e-02f;
  q = q * u + 5.6108797236e-02f;
  q = q * u - 3.5268080669e-01f;
  q = q * u - 1.5568153549e+00f;
  float large = 1.0f - exp_f32(q - xl * xl);
  large = x < 0.0f ? -large : large;
  return ax < kSplit ? small : (x != x ? x : large);
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
  // Otherwise 1 - 2 / (e^{2|x|} + 1), which reaches exactly 1 (e = inf).
  float large = 1.0f - 2.0f / (exp_f32(2.0f * ax) + 1.0f);
  large = x < 0.0f ? -large : large;
  return ax < kSplit ? small : (x != x ? x : large);
}

// Natural log for float32 within 2 ulp (subnormal inputs included),
// branch-free: log(m 2^e) = e ln2 + log1p(m - 1) with m in [sqrt(1/2), sqrt(2)).
inline float log_f32(float x) {
  constexpr float kMinNormal = 1.17549435e-38f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  const bool subnormal = x < kMinNormal;
  float xs = subnormal ? x * 8388608.0f : x; // 2^23 makes subnormals normal
  uint32_t bits = std::bit_cast<uint32_t>(xs);
  int32_t e = static_cast<int32_t>((bits >> 23) & 0xffu) - 127;
  float m = std::bit_cast<float>((bits & 0x007fffffu) | 0x3f800000u);
  const bool high = m > 1.41421356f;
  m = high ? m * 0.5f : m;
  e = high ? e + 1 : e;
  e = subnormal ? e - 23 : e;
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
  constexpr float kInf = std::numeric_limits<float>::infinity();
  r = x == kInf ? kInf : r;
  r = x == 0.0f ? -kInf : r;
  r = x < 0.0f ? std::numeric_limits<float>::quiet_NaN() : r;
  return x != x ? x : r;
}

} // namespace elementwise
} // namespace loom::cpu
