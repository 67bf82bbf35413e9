// Helpers over primitive state that primitives and export share: integer
// list fields, equivalence by state, and the state's bytes (function export,
// and fields nested in a field such as the fused ops of Compiled). Kept out
// of state.h, which every file includes through primitive.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "loom/primitives/state.h"

namespace loom {

// An integer list field from axes or a shape.
template <typename V>
std::vector<int64_t> state_ints(const V& v) {
  return std::vector<int64_t>(v.begin(), v.end());
}

// Same dynamic type, name and state: the is_equivalent (CSE) of every
// primitive whose parameters are all in its name and state (a family such
// as Unary carries its op in its name: "Exp").
bool same_type_and_state(const Primitive& a, const Primitive& b);

// A state as bytes and back (function export; fields nested in a field, as
// the fused ops of Compiled). decode_state checks every length against the
// bytes it is given and raises "[<primitive>] corrupt state: ..." otherwise.
std::string encode_state(const PrimitiveState& state);
PrimitiveState decode_state(std::string_view bytes, std::string_view primitive);

} // namespace loom
