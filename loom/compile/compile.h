// mx.compile's core: trace a function once on placeholders, simplify and fuse
// the traced graph, cache it under the key of the seed's §8.2, and replay it
// on real inputs. The Python layer flattens trees onto these calls.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/array.h"
#include "loom/transforms/transforms.h"

namespace loom {

enum class CompileMode { disabled, no_simplify, no_fuse, enabled };

// The mode set here wins over MLX_DISABLE_COMPILE / LOOM_DISABLE_COMPILE, as
// MLX's enable_compile() does.
void set_compile_mode(CompileMode mode);
CompileMode compile_mode();
void disable_compile();
void enable_compile();
bool compile_enabled();

// Compiles `fun` (fun_id identifies it in the cache; an address is fine) for
// plain C++ callers. Captured arrays become constants of the trace.
ArrayFn compile(ArrayFn fun, std::uintptr_t fun_id, bool shapeless = false);

namespace compile_detail {

// One leaf of the arguments in the key: an array (its shape and dtype are
// compared separately), or a Python int (bool too), float, str or None, whose
// value is part of the key.
struct Constant {
  enum Kind : uint8_t { array, int_, float_, str, none } kind = array;
  int64_t i = 0;
  double f = 0;
  std::string s;
  bool operator==(const Constant& o) const {
    // Floats compare by bits, as MLX does (NaN == NaN, 0.0 != -0.0).
    return kind == o.kind && i == o.i && std::memcmp(&f, &o.f, sizeof f) == 0 && s == o.s;
  }
};

struct CallResult {
  std::vector<array> outputs;
  // Whatever the tracer attached to the entry (the Python output tree).
  std::shared_ptr<void> user_data;
  bool traced = false;
  // On a trace: the arrays the entry captured as constants.
  std::vector<const ArrayDesc*> constant_ids;
};

// Called on a cache miss with one placeholder per input; returns the traced
// outputs and may attach data to the entry.
using TraceFn = std::function<std::vector<array>(const std::vector<array>& placeholders,
                                                 std::shared_ptr<void>& user_data)>;

// Looks up (fun_id, default stream, shapeless, inputs, constants), traces on
// a miss, and replays the entry's graph on `inputs`.
CallResult call(std::uintptr_t fun_id, const TraceFn& trace, const std::vector<array>& inputs,
                const std::vector<Constant>& constants, bool shapeless, bool check = false,
                const ArrayFn& eager = nullptr);

// Drops every entry of fun_id (the compiled callable died).
void erase(std::uintptr_t fun_id);
void clear_cache();

struct FunctionInfo {
  std::uintptr_t fun_id = 0;
  std::string name;
  size_t entries = 0;
  size_t hits = 0;
  size_t misses = 0;
  size_t bytes = 0; // bytes of constants held by the entries
  std::vector<std::string> retrace_reasons;
};
std::vector<FunctionInfo> cache_info();
void set_function_name(std::uintptr_t fun_id, std::string name);

// Warnings go through this hook (the Python layer raises a UserWarning).
using WarningHook = void (*)(const std::string& message);
void set_warning_hook(WarningHook hook);
void warn(const std::string& message);

// Cap on entries over all functions (LOOM_COMPILE_CACHE_MAX_ENTRIES).
size_t max_entries();
void set_max_entries(size_t n);

// Whether the calling thread is tracing a compiled function.
bool in_compile_trace();

// The bindings call this when Python reads an array's shape, size or len():
// under shapeless=True, reading an input's shape while tracing makes that
// input's shape part of the cache key (seed §9.3's silent failure).
void note_shape_read(const array& a);

} // namespace compile_detail
} // namespace loom
