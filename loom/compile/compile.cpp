// The compile cache and the call path: key lookup (seed §8.2), trace on a
// miss, passes per mode, replay; plus the churn warning, LRU eviction and
// the equivalence check.
#include "loom/compile/compile.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

#include "loom/compile/graph.h"
#include "loom/ops.h"
#include "loom/transforms/shapeless.h"
#include "loom/transforms/trace.h"

namespace loom {

namespace {

// -1: not chosen by a call yet (the environment decides).
std::atomic<int> g_mode{-1};

CompileMode env_mode() {
  for (const char* name : {"LOOM_DISABLE_COMPILE", "MLX_DISABLE_COMPILE"}) {
    const char* v = std::getenv(name);
    if (v && *v && std::string(v) != "0") return CompileMode::disabled;
  }
  return CompileMode::enabled;
}

} // namespace

void set_compile_mode(CompileMode mode) { g_mode = static_cast<int>(mode); }
CompileMode compile_mode() {
  int m = g_mode.load();
  return m < 0 ? env_mode() : static_cast<CompileMode>(m);
}
void disable_compile() { set_compile_mode(CompileMode::disabled); }
void enable_compile() { set_compile_mode(CompileMode::enabled); }
bool compile_enabled() { return compile_mode() != CompileMode::disabled; }

namespace compile_detail {

namespace {

thread_local int t_compile_depth = 0;

struct TraceDepth {
  TraceDepth() { ++t_compile_depth; }
  ~TraceDepth() { --t_compile_depth; }
};

// Placeholders of the shapeless trace running on this thread, and which of
// them had their shape read by Python.
struct ShapeReads {
  std::unordered_map<const ArrayDesc*, size_t> index;
  std::vector<char> read;
};
thread_local ShapeReads* t_shape_reads = nullptr;

// Retraces of one function caused by one component before the churn warning.
constexpr size_t kChurnLimit = 8;

struct Entry {
  Stream stream;
  bool shapeless;
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  std::vector<Constant> constants;
  // Under shapeless: inputs whose shape the trace read, so their shape keys.
  std::vector<char> shape_keyed;
  std::shared_ptr<void> user_data;
  uint64_t last_use = 0;
  bool checked = false;

  // The traced graph, and the graph after the passes of each mode.
  std::mutex mutex;
  std::shared_ptr<const Graph> raw;
  std::shared_ptr<const Graph> optimized[4];

  Entry(Stream s, bool sl) : stream(s), shapeless(sl) {}
};

struct FunctionCache {
  std::string name;
  std::vector<std::shared_ptr<Entry>> entries;
  size_t hits = 0;
  size_t misses = 0;
  std::vector<std::string> reasons; // the latest retrace reasons
  std::map<std::string, size_t> churn;
  std::set<std::string> warned;
};

struct Cache {
  std::mutex mutex;
  std::unordered_map<std::uintptr_t, FunctionCache> functions;
  uint64_t clock = 0;
  size_t max_entries = 0;
};

Cache& cache() {
  static Cache* c = [] {
    auto* c = new Cache;
    const char* v = std::getenv("LOOM_COMPILE_CACHE_MAX_ENTRIES");
    c->max_entries = v && *v ? std::strtoull(v, nullptr, 10) : 1024;
    return c;
  }();
  return *c;
}

WarningHook g_warning_hook = nullptr;

const char* constant_kind_name(Constant::Kind k) {
  switch (k) {
    case Constant::array:
      return "array";
    case Constant::int_:
      return "int";
    case Constant::float_:
      return "float";
    case Constant::str:
      return "str";
    default:
      return "None";
  }
}

// Under shapeless, whether the dimensions of size 1 are where the trace had
// them. A trace decides at each op whether an operand broadcasts (a
// Broadcast node, a gradient summed back to the operand's shape), and a
// dimension that becomes 1, or stops being 1, changes that decision: the
// graph would read the new size-1 dimension as a broadcast against the
// traced size. So that pattern is part of the key, and such a call retraces.
bool same_unit_dims(const Shape& traced, const Shape& now) {
  for (size_t d = 0; d < traced.size(); ++d) {
    if ((traced[d] == 1) != (now[d] == 1)) return false;
  }
  return true;
}

bool same_inputs(const Entry& e, const std::vector<array>& inputs, bool shapeless) {
  if (e.shapes.size() != inputs.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (e.shapes[i].size() != inputs[i].shape().size()) return false;
    bool keyed = !shapeless || (i < e.shape_keyed.size() && e.shape_keyed[i]);
    if (keyed && e.shapes[i] != inputs[i].shape()) return false;
    if (!keyed && !same_unit_dims(e.shapes[i], inputs[i].shape())) return false;
    if (e.dtypes[i] != inputs[i].dtype()) return false;
  }
  return true;
}

// Why `e` does not match the call: the first differing key component, as
// (component id for counting, words for the warning).
std::pair<std::string, std::string> mismatch(const Entry& e, Stream stream, bool shapeless,
                                             const std::vector<array>& inputs,
                                             const std::vector<Constant>& constants) {
  if (e.stream != stream) {
    return {"stream", "the default stream or device changed between calls"};
  }
  if (e.shapeless != shapeless) return {"shapeless", "the shapeless flag changed"};
  if (e.shapes.size() != inputs.size()) {
    return {"count", "the number of array inputs changed"};
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string pos = std::to_string(i);
    if (e.dtypes[i] != inputs[i].dtype()) {
      return {"dtype" + pos, "the dtype of array input " + pos + " changed"};
    }
    if (e.shapes[i].size() != inputs[i].shape().size()) {
      return {"ndim" + pos, "the number of dimensions of array input " + pos + " changed"};
    }
    bool keyed = !shapeless || (i < e.shape_keyed.size() && e.shape_keyed[i]);
    if (keyed && e.shapes[i] != inputs[i].shape()) {
      return {"shape" + pos, "the shape of array input " + pos +
                                 " changed (shapeless=True avoids retracing on shapes)"};
    }
    if (!keyed && !same_unit_dims(e.shapes[i], inputs[i].shape())) {
      return {"ones" + pos, "a dimension of array input " + pos +
                                " became 1 or stopped being 1 (under shapeless=True a size-1 "
                                "dimension broadcasts, so the trace depends on where they are)"};
    }
  }
  for (size_t i = 0; i < constants.size(); ++i) {
    if (i >= e.constants.size() || !(e.constants[i] == constants[i])) {
      std::string pos = std::to_string(i);
      std::string kind = constant_kind_name(constants[i].kind);
      return {"const" + pos,
              "argument " + pos + " (" + kind + ") changed; pass an mx.array to avoid retracing"};
    }
  }
  return {"other", "the captured state changed"};
}

void evict_lru_locked(Cache& c) {
  size_t total = 0;
  for (auto& [id, f] : c.functions) total += f.entries.size();
  while (c.max_entries > 0 && total > c.max_entries) {
    FunctionCache* victim_fun = nullptr;
    size_t victim = 0;
    uint64_t oldest = UINT64_MAX;
    for (auto& [id, f] : c.functions) {
      for (size_t i = 0; i < f.entries.size(); ++i) {
        if (f.entries[i]->last_use < oldest) {
          oldest = f.entries[i]->last_use;
          victim_fun = &f;
          victim = i;
        }
      }
    }
    if (!victim_fun) break;
    victim_fun->entries.erase(victim_fun->entries.begin() + victim);
    --total;
  }
}

std::shared_ptr<const Graph> graph_for_mode(Entry& e, CompileMode mode) {
  std::lock_guard<std::mutex> lock(e.mutex);
  int m = static_cast<int>(mode);
  if (!e.optimized[m]) {
    auto g = std::make_shared<Graph>(*e.raw);
    const size_t traced = g->nodes.size();
    if (mode != CompileMode::no_simplify) simplify(*g);
    const size_t simplified = g->nodes.size();
    if (mode != CompileMode::no_fuse) fuse(*g);
    static const bool dump = [] {
      const char* v = std::getenv("LOOM_COMPILE_DUMP");
      return v != nullptr && std::string(v) == "1";
    }();
    if (dump) {
      std::fprintf(stderr, "[compile] %zu nodes traced, %zu after simplify, %zu after fuse\n%s",
                   traced, simplified, g->nodes.size(), summarize(*g).c_str());
    }
    e.optimized[m] = std::move(g);
  }
  return e.optimized[m];
}

// Tolerance of the equivalence check per dtype.
double tolerance(Dtype d) {
  if (d == float16 || d == bfloat16) return 1e-2;
  if (d == float32 || d == complex64) return 1e-4;
  return 0;
}

void check_against_eager(const std::vector<array>& compiled, const ArrayFn& eager,
                         const std::vector<array>& inputs) {
  std::vector<array> reference = eager(inputs);
  if (reference.size() != compiled.size()) {
    throw std::runtime_error("[compile] check: the compiled function returned " +
                             std::to_string(compiled.size()) + " arrays, the eager one " +
                             std::to_string(reference.size()) + ".");
  }
  for (size_t i = 0; i < compiled.size(); ++i) {
    array a = astype(compiled[i], float32);
    array b = astype(reference[i], float32);
    if (a.shape() != b.shape()) {
      throw std::runtime_error("[compile] check: output " + std::to_string(i) + " has shape " +
                               shape_to_string(a.shape()) + " compiled and " +
                               shape_to_string(b.shape()) + " eager.");
    }
    array diff = abs(subtract(a, b));
    double scale = 1.0 + max(abs(b)).item<double>();
    double worst = a.size() ? max(diff).item<double>() : 0.0;
    double tol = tolerance(compiled[i].dtype()) * scale;
    bool nan_mismatch = any(not_equal(isnan(a), isnan(b))).item<bool>();
    if (nan_mismatch || worst > tol) {
      std::ostringstream msg;
      msg << "[compile] check: output " << i << " of the compiled function differs from the "
          << "eager function by up to " << worst << " (tolerance " << tol << " for "
          << dtype_name(compiled[i].dtype()) << ")" << (nan_mismatch ? ", and NaNs differ" : "")
          << ". A captured array that changed since tracing (pass it as an argument or with "
             "inputs=) or shape arithmetic under shapeless=True are the usual causes.";
      throw std::runtime_error(msg.str());
    }
  }
}

} // namespace

bool in_compile_trace() { return t_compile_depth > 0; }

TracedFunction trace_graph(const std::function<std::vector<array>(const std::vector<array>&)>& fun,
                           const std::vector<Shape>& shapes, const std::vector<Dtype>& dtypes,
                           bool shapeless) {
  std::vector<array> placeholders;
  placeholders.reserve(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    placeholders.push_back(make_placeholder(shapes[i], dtypes[i]));
  }
  ShapeReads reads;
  if (shapeless) {
    for (size_t i = 0; i < placeholders.size(); ++i) reads.index.emplace(placeholders[i].id(), i);
    reads.read.assign(placeholders.size(), 0);
  }
  std::vector<array> traced;
  {
    TraceDepth depth;
    transforms::ShapelessScope shapeless_scope(shapeless);
    ShapeReads* saved = t_shape_reads;
    t_shape_reads = shapeless ? &reads : nullptr;
    try {
      traced = fun(placeholders);
    } catch (...) {
      t_shape_reads = saved;
      throw;
    }
    t_shape_reads = saved;
  }
  TracedFunction out;
  out.graph = graph_from_trace(placeholders, traced);
  out.shape_reads = std::move(reads.read);
  return out;
}

void note_shape_read(const array& a) {
  if (!t_shape_reads) return;
  auto it = t_shape_reads->index.find(a.id());
  if (it != t_shape_reads->index.end()) t_shape_reads->read[it->second] = 1;
}

void set_warning_hook(WarningHook hook) { g_warning_hook = hook; }
void warn(const std::string& message) {
  if (g_warning_hook) {
    g_warning_hook(message);
  }
}

size_t max_entries() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  return cache().max_entries;
}
void set_max_entries(size_t n) {
  auto& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.max_entries = n;
  evict_lru_locked(c);
}

void set_function_name(std::uintptr_t fun_id, std::string name) {
  auto& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.functions[fun_id].name = std::move(name);
}

CallResult call(std::uintptr_t fun_id, const TraceFn& trace, const std::vector<array>& inputs,
                const std::vector<Constant>& constants, bool shapeless, bool check,
                const ArrayFn& eager) {
  auto& c = cache();
  Stream stream = default_stream(default_device());
  CompileMode mode = compile_mode();
  std::shared_ptr<Entry> entry;
  std::string churn_message;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    FunctionCache& f = c.functions[fun_id];
    for (auto& e : f.entries) {
      if (e->stream == stream && e->shapeless == shapeless && same_inputs(*e, inputs, shapeless) &&
          e->constants == constants) {
        entry = e;
        break;
      }
    }
    if (entry) {
      ++f.hits;
      entry->last_use = ++c.clock;
    } else {
      ++f.misses;
      if (!f.entries.empty()) {
        // Blame the most recently used entry's differing component.
        auto latest = *std::max_element(
            f.entries.begin(), f.entries.end(),
            [](const auto& a, const auto& b) { return a->last_use < b->last_use; });
        auto [component, words] = mismatch(*latest, stream, shapeless, inputs, constants);
        f.reasons.push_back(words);
        if (f.reasons.size() > 16) f.reasons.erase(f.reasons.begin());
        if (++f.churn[component] > kChurnLimit && f.warned.insert(component).second) {
          std::string who = f.name.empty() ? "a compiled function" : "'" + f.name + "'";
          churn_message = "[compile] " + who + " was retraced " +
                          std::to_string(f.churn[component]) + " times because " + words +
                          ". Every retrace builds and keeps a new cache entry.";
        }
      }
    }
  }
  if (!churn_message.empty()) warn(churn_message);

  CallResult result;
  if (!entry) {
    entry = std::make_shared<Entry>(stream, shapeless);
    for (auto& in : inputs) {
      entry->shapes.push_back(in.shape());
      entry->dtypes.push_back(in.dtype());
    }
    entry->constants = constants;
    TracedFunction traced = trace_graph(
        [&](const std::vector<array>& placeholders) {
          return trace(placeholders, entry->user_data);
        },
        entry->shapes, entry->dtypes, shapeless);
    ShapeReads reads;
    reads.read = std::move(traced.shape_reads);
    std::string shape_message;
    if (shapeless) {
      entry->shape_keyed = reads.read;
      std::string which;
      for (size_t i = 0; i < reads.read.size(); ++i) {
        if (reads.read[i]) which += (which.empty() ? "" : ", ") + std::to_string(i);
      }
      if (!which.empty()) {
        std::lock_guard<std::mutex> lock(c.mutex);
        FunctionCache& f = c.functions[fun_id];
        if (f.warned.insert("shape-read").second) {
          std::string who = f.name.empty() ? "a compiled function" : "'" + f.name + "'";
          shape_message =
              "[compile] " + who + " (shapeless=True) read the shape of array input(s) " + which +
              " while tracing. Python arithmetic on a shape is frozen into the trace, so Loom "
              "makes those shapes part of the cache key: a call with another shape retraces "
              "instead of silently reusing the traced value. Derive sizes from array "
              "operations (flatten, reshape with -1, mx.sum of a mask) to stay shapeless.";
        }
      }
    }
    if (!shape_message.empty()) warn(shape_message);
    entry->raw = std::make_shared<Graph>(std::move(traced.graph));
    for (auto& k : entry->raw->constants) result.constant_ids.push_back(k.id());
    std::lock_guard<std::mutex> lock(c.mutex);
    entry->last_use = ++c.clock;
    c.functions[fun_id].entries.push_back(entry);
    evict_lru_locked(c);
    result.traced = true;
  }
  // Inside another transform's trace, replay the ops themselves so that the
  // outer transform sees ordinary primitives.
  std::shared_ptr<const Graph> graph =
      transforms::in_trace() ? entry->raw : graph_for_mode(*entry, mode);
  result.outputs = replay(*graph, inputs, shapeless);
  result.user_data = entry->user_data;
  bool first_check = false;
  if (check && eager) {
    std::lock_guard<std::mutex> lock(entry->mutex);
    first_check = !entry->checked;
    entry->checked = true;
  }
  if (first_check) check_against_eager(result.outputs, eager, inputs);
  return result;
}

void erase(std::uintptr_t fun_id) {
  std::vector<std::shared_ptr<Entry>> dropped;
  {
    auto& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.functions.find(fun_id);
    if (it == c.functions.end()) return;
    dropped = std::move(it->second.entries);
    c.functions.erase(it);
  }
  // `dropped` releases the entries (and their constants) outside the lock.
}

void clear_cache() {
  std::unordered_map<std::uintptr_t, FunctionCache> dropped;
  {
    auto& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    for (auto& [id, f] : c.functions) {
      dropped[id].entries = std::move(f.entries);
      f.entries.clear();
      f.hits = f.misses = 0;
      f.reasons.clear();
      f.churn.clear();
    }
  }
}

std::vector<FunctionInfo> cache_info() {
  auto& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::vector<FunctionInfo> out;
  for (auto& [id, f] : c.functions) {
    FunctionInfo info;
    info.fun_id = id;
    info.name = f.name;
    info.entries = f.entries.size();
    info.hits = f.hits;
    info.misses = f.misses;
    info.retrace_reasons = f.reasons;
    for (auto& e : f.entries) info.bytes += e->raw->constant_bytes();
    out.push_back(std::move(info));
  }
  return out;
}

} // namespace compile_detail

ArrayFn compile(ArrayFn fun, std::uintptr_t fun_id, bool shapeless) {
  return [fun = std::move(fun), fun_id, shapeless](const std::vector<array>& inputs) {
    if (!compile_enabled()) return fun(inputs);
    std::vector<compile_detail::Constant> constants(inputs.size());
    auto trace = [&](const std::vector<array>& placeholders, std::shared_ptr<void>&) {
      return fun(placeholders);
    };
    return compile_detail::call(fun_id, trace, inputs, constants, shapeless).outputs;
  };
}

} // namespace loom
