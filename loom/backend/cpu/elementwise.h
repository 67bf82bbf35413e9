// CPU kernels of the element-wise families (unary, binary, where) and the
// pieces they share: layout tests, output allocation with donation, and
// vectorisable float32 exp/erf.
#pragma once

#include <bit>
#include <cstdint>
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

// Every element sits in the first data_size() slots of the buffer, once:
// a flat loop over them visits each element exactly once, in some order.
inline bool is_dense(const array& a) { return a.flags().contiguous && a.data_size() == a.size(); }

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

} // namespace elementwise
} // namespace loom::cpu
