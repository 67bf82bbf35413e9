// Element types, their categories and MLX's promotion rules.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace loom {

struct Dtype {
  enum class Val : uint8_t {
    bool_,
    uint8,
    uint16,
    uint32,
    uint64,
    int8,
    int16,
    int32,
    int64,
    float16,
    bfloat16,
    float32,
    float64,
    complex64,
  };
  // The category tree used by issubdtype (NumPy's abstract types).
  enum class Category {
    complexfloating,
    floating,
    inexact,
    signedinteger,
    unsignedinteger,
    integer,
    number,
    generic,
  };
  enum class Kind : char {
    b = 'b',
    u = 'u',
    i = 'i',
    f = 'f',
    V = 'V', // bfloat16: no NumPy equivalent
    c = 'c',
  };

  Val val;
  uint8_t size; // bytes per element

  constexpr Dtype(Val v, uint8_t s) : val(v), size(s) {}
  constexpr bool operator==(const Dtype& o) const { return val == o.val; }
  constexpr bool operator!=(const Dtype& o) const { return val != o.val; }
};

inline constexpr int kNumDtypes = 14;

inline constexpr Dtype bool_{Dtype::Val::bool_, 1};
inline constexpr Dtype uint8{Dtype::Val::uint8, 1};
inline constexpr Dtype uint16{Dtype::Val::uint16, 2};
inline constexpr Dtype uint32{Dtype::Val::uint32, 4};
inline constexpr Dtype uint64{Dtype::Val::uint64, 8};
inline constexpr Dtype int8{Dtype::Val::int8, 1};
inline constexpr Dtype int16{Dtype::Val::int16, 2};
inline constexpr Dtype int32{Dtype::Val::int32, 4};
inline constexpr Dtype int64{Dtype::Val::int64, 8};
inline constexpr Dtype float16{Dtype::Val::float16, 2};
inline constexpr Dtype bfloat16{Dtype::Val::bfloat16, 2};
inline constexpr Dtype float32{Dtype::Val::float32, 4};
inline constexpr Dtype float64{Dtype::Val::float64, 8};
inline constexpr Dtype complex64{Dtype::Val::complex64, 8};

inline constexpr Dtype::Category complexfloating = Dtype::Category::complexfloating;
inline constexpr Dtype::Category floating = Dtype::Category::floating;
inline constexpr Dtype::Category inexact = Dtype::Category::inexact;
inline constexpr Dtype::Category signedinteger = Dtype::Category::signedinteger;
inline constexpr Dtype::Category unsignedinteger = Dtype::Category::unsignedinteger;
inline constexpr Dtype::Category integer = Dtype::Category::integer;
inline constexpr Dtype::Category number = Dtype::Category::number;
inline constexpr Dtype::Category generic = Dtype::Category::generic;

Dtype dtype_from_index(int i);
inline int dtype_index(Dtype d) { return static_cast<int>(d.val); }

Dtype promote_types(Dtype a, Dtype b);
Dtype::Kind kind(Dtype d);
std::string dtype_name(Dtype d); // "float32"

bool issubdtype(Dtype a, Dtype b);
bool issubdtype(Dtype a, Dtype::Category c);
bool issubdtype(Dtype::Category a, Dtype b);
bool issubdtype(Dtype::Category a, Dtype::Category b);
std::string category_name(Dtype::Category c);

inline bool is_floating_point(Dtype d) {
  return d == float16 || d == bfloat16 || d == float32 || d == float64;
}
inline bool is_complex(Dtype d) { return d == complex64; }
inline bool is_inexact(Dtype d) { return is_floating_point(d) || is_complex(d); }
inline bool is_unsigned(Dtype d) {
  return d == uint8 || d == uint16 || d == uint32 || d == uint64;
}
inline bool is_signed_integer(Dtype d) {
  return d == int8 || d == int16 || d == int32 || d == int64;
}
inline bool is_integral(Dtype d) { return is_unsigned(d) || is_signed_integer(d); }

std::ostream& operator<<(std::ostream& os, Dtype d);

} // namespace loom
