#include "loom/primitives/state.h"

#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <typeinfo>

#include "loom/primitives/primitive.h"
#include "loom/primitives/state_util.h"

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

bool same_type_and_state(const Primitive& a, const Primitive& b) {
  return typeid(a) == typeid(b) && std::strcmp(a.name(), b.name()) == 0 && a.state() == b.state();
}

namespace {

// Values are stored as in memory: Loom's hosts (x86-64, aarch64) are
// little-endian, as the file formats it writes are.
template <typename T>
void put(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<uint32_t>(out, static_cast<uint32_t>(s.size()));
  out += s;
}

struct Cursor {
  std::string_view bytes;
  std::string_view primitive;
  size_t pos = 0;

  [[noreturn]] void corrupt(const std::string& what) const {
    throw std::invalid_argument("[" + std::string(primitive) + "] corrupt state: " + what + ".");
  }
  void need(size_t n, const char* what) const {
    if (n > bytes.size() - pos) corrupt(std::string("truncated ") + what);
  }
  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string get_string(const char* what) {
    uint32_t n = get<uint32_t>(what);
    need(n, what);
    std::string s(bytes.substr(pos, n));
    pos += n;
    return s;
  }
  template <typename T>
  std::vector<T> get_vector(const char* what) {
    uint32_t n = get<uint32_t>(what);
    // Checked against the bytes left before anything is allocated.
    if (n > (bytes.size() - pos) / sizeof(T)) corrupt(std::string("truncated ") + what);
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), bytes.data() + pos, n * sizeof(T));
    pos += n * sizeof(T);
    return v;
  }
};

} // namespace

std::string encode_state(const PrimitiveState& state) {
  std::string out;
  put<uint32_t>(out, static_cast<uint32_t>(state.size()));
  for (const StateField& f : state) {
    put_string(out, f.name);
    // The tag is the index of the value's alternative in StateValue.
    put<uint8_t>(out, static_cast<uint8_t>(f.value.index()));
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, bool>) {
            put<uint8_t>(out, v ? 1 : 0);
          } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
            put<T>(out, v);
          } else if constexpr (std::is_same_v<T, std::string>) {
            put_string(out, v);
          } else if constexpr (std::is_same_v<T, Dtype>) {
            put<uint8_t>(out, static_cast<uint8_t>(dtype_index(v)));
          } else {
            put<uint32_t>(out, static_cast<uint32_t>(v.size()));
            for (auto x : v) put(out, x);
          }
        },
        f.value);
  }
  return out;
}

PrimitiveState decode_state(std::string_view bytes, std::string_view primitive) {
  Cursor c{bytes, primitive};
  uint32_t count = c.get<uint32_t>("field count");
  // Every field takes at least 6 bytes (name length and tag).
  if (count > bytes.size() / 6) c.corrupt("field count beyond the bytes given");
  PrimitiveState state;
  state.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    StateField f;
    f.name = c.get_string("field name");
    uint8_t tag = c.get<uint8_t>("field tag");
    switch (tag) {
      case 0:
        f.value = c.get<uint8_t>("bool") != 0;
        break;
      case 1:
        f.value = c.get<int64_t>("int");
        break;
      case 2:
        f.value = c.get<double>("float");
        break;
      case 3:
        f.value = c.get_string("string");
        break;
      case 4:
        f.value = c.get_vector<int64_t>("int list");
        break;
      case 5:
        f.value = c.get_vector<double>("float list");
        break;
      case 6: {
        uint8_t d = c.get<uint8_t>("dtype");
        if (d >= kNumDtypes) c.corrupt("dtype code " + std::to_string(d) + " unknown");
        f.value = dtype_from_index(d);
        break;
      }
      default:
        c.corrupt("field '" + f.name + "' has unknown type tag " + std::to_string(tag));
    }
    state.push_back(std::move(f));
  }
  if (c.pos != bytes.size()) c.corrupt("trailing bytes");
  return state;
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
