// CPU kernels of the element-wise families (unary, binary, where) and the
// pieces they share: layout tests, output allocation with donation, element
// loads and stores that vectorise (bool as bytes, float16/bfloat16 through
// integer bit operations). The ops themselves (scalar functors) and their
// scalar math come from the op table, loom/primitives/elementwise_table.h.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "loom/array.h"
#include "loom/primitives/binary.h"
#include "loom/primitives/elementwise_scalar.h"
#include "loom/primitives/unary.h"

namespace loom::cpu {

// Inputs are evaluated and validated by ops/; `out` has shape and dtype.
void unary(UnaryOp op, const array& in, array& out);
void binary(BinaryOp op, const array& a, const array& b, array& out);
void select(const array& condition, const array& x, const array& y, array& out);

namespace elementwise {

using namespace loom::scalar;

// Cheap element-wise work splits into chunks of at least this many elements.
inline constexpr size_t kGrain = size_t(1) << 16;

// float16 and bfloat16 are stored as such and computed in float.
template <typename T>
using compute_t =
    std::conditional_t<std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>, float, T>;

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
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    return load(v);
  }
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

} // namespace elementwise
} // namespace loom::cpu
