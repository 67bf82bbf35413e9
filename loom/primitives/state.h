// A primitive's parameters as data: named fields that printing, CSE
// (equivalence) and function export read, and that a registered factory
// turns back into the primitive (import). One description, three uses.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "loom/dtype.h"
#include "loom/stream.h"

namespace loom {

class Primitive;

using StateValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                                std::vector<double>, Dtype>;

struct StateField {
  std::string name;
  StateValue value;
  bool operator==(const StateField& o) const { return name == o.name && value == o.value; }
};

using PrimitiveState = std::vector<StateField>;

// Reads a field back by name; a missing field or a wrong type raises an
// error naming the primitive and the field (a corrupt or foreign export).
const StateValue& state_field(const PrimitiveState& state, std::string_view primitive,
                              std::string_view name);

template <typename T>
T state_get(const PrimitiveState& state, std::string_view primitive, std::string_view name) {
  const StateValue& v = state_field(state, primitive, name);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (auto* i = std::get_if<int64_t>(&v)) return static_cast<T>(*i);
  } else if constexpr (std::is_same_v<T, std::vector<int>>) {
    if (auto* vs = std::get_if<std::vector<int64_t>>(&v)) return T(vs->begin(), vs->end());
  } else if constexpr (std::is_same_v<T, float>) {
    if (auto* d = std::get_if<double>(&v)) return static_cast<float>(*d);
  } else {
    if (auto* x = std::get_if<T>(&v)) return *x;
  }
  throw std::invalid_argument("[" + std::string(primitive) + "] state field '" + std::string(name) +
                              "' has the wrong type.");
}

// "axes=(0, 1), keepdims=True": the default printing of a primitive.
void print_state(std::ostream& os, const PrimitiveState& state);

// Rebuilds a primitive from its name and state (function import).
using PrimitiveFactory =
    std::function<std::shared_ptr<Primitive>(Stream stream, const PrimitiveState& state)>;

void register_primitive(const std::string& name, PrimitiveFactory factory);
bool is_registered_primitive(const std::string& name);
// Raises "[import] unknown primitive 'X'" for names nothing registered.
std::shared_ptr<Primitive> make_primitive(const std::string& name, Stream stream,
                                          const PrimitiveState& state);
std::vector<std::string> registered_primitives();

// Registers a factory at load time from a family file:
//   LOOM_REGISTER_PRIMITIVE(Sum, [](Stream s, const PrimitiveState& st) { ... });
#define LOOM_REGISTER_PRIMITIVE(NAME, ...)          \
  static const bool loom_registered_##NAME = [] {   \
    ::loom::register_primitive(#NAME, __VA_ARGS__); \
    return true;                                    \
  }()

} // namespace loom
