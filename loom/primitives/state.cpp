#include "loom/primitives/state.h"

#include <map>
#include <mutex>
#include <stdexcept>

namespace loom {

const StateValue& state_field(const PrimitiveState& state, std::string_view primitive,
                              std::string_view name) {
  for (const StateField& f : state) {
    if (f.name == name) return f.value;
  }
  throw std::invalid_argument("[" + std::string(primitive) + "] state has no field '" +
                              std::string(name) + "'.");
}

namespace {

void print_value(std::ostream& os, const StateValue& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          os << (v ? "True" : "False");
        } else if constexpr (std::is_same_v<T, std::string>) {
          os << '\'' << v << '\'';
        } else if constexpr (std::is_same_v<T, Dtype>) {
          os << v;
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>> ||
                             std::is_same_v<T, std::vector<double>>) {
          os << '(';
          for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
          os << (v.size() == 1 ? ",)" : ")");
        } else {
          os << v;
        }
      },
      value);
}

struct Registry {
  std::mutex mutex;
  std::map<std::string, PrimitiveFactory> factories;
};

Registry& registry() {
  static Registry* r = new Registry(); // never destroyed: used during static init/exit
  return *r;
}

} // namespace

void print_state(std::ostream& os, const PrimitiveState& state) {
  for (size_t i = 0; i < state.size(); ++i) {
    os << (i ? ", " : "") << state[i].name << '=';
    print_value(os, state[i].value);
  }
}

void register_primitive(const std::string& name, PrimitiveFactory factory) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (!r.factories.emplace(name, std::move(factory)).second) {
    throw std::logic_error("[register_primitive] '" + name + "' is registered twice.");
  }
}

bool is_registered_primitive(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.factories.count(name) != 0;
}

std::shared_ptr<Primitive> make_primitive(const std::string& name, Stream stream,
                                          const PrimitiveState& state) {
  PrimitiveFactory factory;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.factories.find(name);
    if (it == r.factories.end()) {
      throw std::invalid_argument("[import] unknown primitive '" + name +
                                  "': this build of Loom cannot rebuild it.");
    }
    factory = it->second;
  }
  return factory(stream, state);
}

std::vector<std::string> registered_primitives() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, _] : r.factories) names.push_back(name);
  return names;
}

} // namespace loom
