// Maps a runtime Dtype to its C++ element type: dispatch(dtype, [&](auto tag) {
//   using T = typename decltype(tag)::type; ... }).
#pragma once

#include <complex>
#include <stdexcept>
#include <string>

#include "loom/dtype.h"
#include "loom/types/half.h"

namespace loom {

template <typename T>
struct type_tag {
  using type = T;
};

template <typename F>
decltype(auto) dispatch(Dtype d, F&& f) {
  using V = Dtype::Val;
  switch (d.val) {
    case V::bool_: return f(type_tag<bool>{});
    case V::uint8: return f(type_tag<uint8_t>{});
    case V::uint16: return f(type_tag<uint16_t>{});
    case V::uint32: return f(type_tag<uint32_t>{});
    case V::uint64: return f(type_tag<uint64_t>{});
    case V::int8: return f(type_tag<int8_t>{});
    case V::int16: return f(type_tag<int16_t>{});
    case V::int32: return f(type_tag<int32_t>{});
    case V::int64: return f(type_tag<int64_t>{});
    case V::float16: return f(type_tag<float16_t>{});
    case V::bfloat16: return f(type_tag<bfloat16_t>{});
    case V::float32: return f(type_tag<float>{});
    case V::float64: return f(type_tag<double>{});
    case V::complex64: return f(type_tag<std::complex<float>>{});
  }
  throw std::invalid_argument("[dispatch] unknown dtype");
}

// The four floating dtypes, by value: dispatch_floating(d, "op", [&](auto zero) {
//   using T = decltype(zero); ... }). Any other dtype raises "[op] Unsupported dtype".
template <typename F>
void dispatch_floating(Dtype d, const char* op, F&& f) {
  using V = Dtype::Val;
  switch (d.val) {
    case V::float32: return f(float{});
    case V::float64: return f(double{});
    case V::float16: return f(float16_t{});
    case V::bfloat16: return f(bfloat16_t{});
    default:
      throw std::invalid_argument(std::string("[") + op + "] Unsupported dtype " + dtype_name(d) +
                                  ".");
  }
}

// Value conversion between element types, defined for every pair including
// complex (real part) and the half types (through float).
template <typename To, typename From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, std::complex<float>>) {
    if constexpr (std::is_same_v<To, bool>) return v != std::complex<float>(0);
    else return convert<To>(v.real());
  } else if constexpr (std::is_same_v<To, std::complex<float>>) {
    return std::complex<float>(static_cast<float>(convert<double>(v)), 0.0f);
  } else if constexpr (std::is_same_v<From, float16_t> || std::is_same_v<From, bfloat16_t>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, float16_t> || std::is_same_v<To, bfloat16_t>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else {
    return static_cast<To>(v);
  }
}

} // namespace loom
