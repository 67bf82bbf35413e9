#include "loom/dtype.h"

#include <array>
#include <stdexcept>

namespace loom {

namespace {

constexpr std::array<Dtype, kNumDtypes> kAll = {
    bool_, uint8,  uint16,  uint32,   uint64,  int8,    int16,
    int32, int64, float16, bfloat16, float32, float64, complex64};

// Result of promote_types(row, column) in the order of Dtype::Val. This is
// MLX's lattice: mixing signed and unsigned widens, uint64 with any signed
// integer goes to float32, float16 with bfloat16 goes to float32.
using V = Dtype::Val;
constexpr V b = V::bool_, u8 = V::uint8, u16 = V::uint16, u32 = V::uint32,
            u64 = V::uint64, i8 = V::int8, i16 = V::int16, i32 = V::int32,
            i64 = V::int64, f16 = V::float16, bf = V::bfloat16,
            f32 = V::float32, f64 = V::float64, c64 = V::complex64;
constexpr V kPromotion[kNumDtypes][kNumDtypes] = {
    {b, u8, u16, u32, u64, i8, i16, i32, i64, f16, bf, f32, f64, c64},
    {u8, u8, u16, u32, u64, i16, i16, i32, i64, f16, bf, f32, f64, c64},
    {u16, u16, u16, u32, u64, i32, i32, i32, i64, f16, bf, f32, f64, c64},
    {u32, u32, u32, u32, u64, i64, i64, i64, i64, f16, bf, f32, f64, c64},
    {u64, u64, u64, u64, u64, f32, f32, f32, f32, f16, bf, f32, f64, c64},
    {i8, i16, i32, i64, f32, i8, i16, i32, i64, f16, bf, f32, f64, c64},
    {i16, i16, i32, i64, f32, i16, i16, i32, i64, f16, bf, f32, f64, c64},
    {i32, i32, i32, i64, f32, i32, i32, i32, i64, f16, bf, f32, f64, c64},
    {i64, i64, i64, i64, f32, i64, i64, i64, i64, f16, bf, f32, f64, c64},
    {f16, f16, f16, f16, f16, f16, f16, f16, f16, f16, f32, f32, f64, c64},
    {bf, bf, bf, bf, bf, bf, bf, bf, bf, f32, bf, f32, f64, c64},
    {f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f64, c64},
    {f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, c64},
    {c64, c64, c64, c64, c64, c64, c64, c64, c64, c64, c64, c64, c64, c64},
};

Dtype::Category leaf_category(Dtype d) {
  if (d == bool_) return Dtype::Category::generic;
  if (is_unsigned(d)) return unsignedinteger;
  if (is_signed_integer(d)) return signedinteger;
  if (is_floating_point(d)) return floating;
  return complexfloating;
}

// Parent of each category in the tree; generic is the root.
Dtype::Category parent(Dtype::Category c) {
  switch (c) {
    case complexfloating:
    case floating:
      return inexact;
    case signedinteger:
    case unsignedinteger:
      return integer;
    case inexact:
    case integer:
      return number;
    default:
      return generic;
  }
}

} // namespace

Dtype dtype_from_index(int i) {
  if (i < 0 || i >= kNumDtypes) {
    throw std::invalid_argument("[dtype] Invalid dtype index " + std::to_string(i) + ".");
  }
  return kAll[i];
}

Dtype promote_types(Dtype a, Dtype b) {
  return dtype_from_index(static_cast<int>(kPromotion[dtype_index(a)][dtype_index(b)]));
}

Dtype::Kind kind(Dtype d) {
  if (d == bool_) return Dtype::Kind::b;
  if (is_unsigned(d)) return Dtype::Kind::u;
  if (is_signed_integer(d)) return Dtype::Kind::i;
  if (d == bfloat16) return Dtype::Kind::V;
  if (is_floating_point(d)) return Dtype::Kind::f;
  return Dtype::Kind::c;
}

std::string dtype_name(Dtype d) {
  static const char* names[kNumDtypes] = {
      "bool",  "uint8", "uint16",  "uint32",   "uint64",  "int8",    "int16",
      "int32", "int64", "float16", "bfloat16", "float32", "float64", "complex64"};
  return names[dtype_index(d)];
}

std::string category_name(Dtype::Category c) {
  switch (c) {
    case complexfloating: return "complexfloating";
    case floating: return "floating";
    case inexact: return "inexact";
    case signedinteger: return "signedinteger";
    case unsignedinteger: return "unsignedinteger";
    case integer: return "integer";
    case number: return "number";
    default: return "generic";
  }
}

bool issubdtype(Dtype a, Dtype b) { return a == b; }

bool issubdtype(Dtype::Category a, Dtype::Category b) {
  if (b == generic) return true;
  for (auto c = a;; c = parent(c)) {
    if (c == b) return true;
    if (c == generic) return false;
  }
}

bool issubdtype(Dtype a, Dtype::Category c) {
  if (c == generic) return true;
  if (a == bool_) return false;
  return issubdtype(leaf_category(a), c);
}

bool issubdtype(Dtype::Category, Dtype) { return false; }

std::ostream& operator<<(std::ostream& os, Dtype d) { return os << dtype_name(d); }

} // namespace loom
