// Function export: tracing through compile's tracer, the captured-array
// checks of seed §12.7, the binary format and the imported function's call.
// The callback records and DOT output are in export_describe.cpp.
#include "loom/io/export.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "loom/compile/compiled.h"
#include "loom/io/detail.h"
#include "loom/ops/creation.h"
#include "loom/ops/slice.h"
#include "loom/primitives/random.h"
#include "loom/primitives/state_util.h"
#include "loom/scheduler/scheduler.h"
#include "loom/transforms/primitives.h"

namespace loom::io {

using compile_detail::Graph;
using compile_detail::GraphNode;
using compile_detail::ValueRef;

namespace {

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'F', 'U', 'N', 'C'};
// A shape of more dimensions than this is refused as corrupt.
constexpr uint32_t kMaxDims = 64;

// True when an unevaluated captured array is (partly) computed by a random
// primitive: the exported function would hold the initialiser, not values.
bool produced_by_random(const array& a) {
  std::vector<array> stack{a};
  std::unordered_set<const Node*> seen;
  while (!stack.empty()) {
    array x = std::move(stack.back());
    stack.pop_back();
    if (!x.has_node() || x.status() != Status::unscheduled) continue;
    const Node* n = x.node().get();
    if (!seen.insert(n).second) continue;
    if (dynamic_cast<const RandomBits*>(n->primitive.get())) return true;
    for (const array& in : n->inputs) stack.push_back(in);
  }
  return false;
}

// Bytes the evaluation of `arrays` would allocate: every unevaluated array
// in their graphs (intermediates included).
uint64_t unevaluated_bytes(const std::vector<array>& arrays) {
  std::vector<array> stack(arrays);
  std::unordered_set<const ArrayDesc*> seen;
  uint64_t total = 0;
  while (!stack.empty()) {
    array x = std::move(stack.back());
    stack.pop_back();
    if (!x.has_node() || x.status() != Status::unscheduled) continue;
    if (!seen.insert(x.id()).second) continue;
    total += x.nbytes();
    for (const array& in : x.node()->inputs) stack.push_back(in);
  }
  return total;
}

// Under shapeless, a constant that is a broadcast view (the 2 of `x * 2`,
// a bias or a norm's weight broadcast to the traced shape) and feeds only
// element-wise nodes is stored with its broadcast dimensions of size 1, so
// that replay broadcasts it to whatever shape the new inputs give. Frozen at
// the traced size, it would turn a dimension that becomes 1 on a later call
// back into the traced size.
void shrink_broadcast_constants(Graph& g) {
  std::vector<char> elementwise_only(g.constants.size(), 1);
  for (const GraphNode& n : g.nodes) {
    for (const ValueRef& r : n.inputs) {
      if (r.kind == ValueRef::constant && !n.primitive->traits().elementwise) {
        elementwise_only[r.id] = 0;
      }
    }
  }
  for (const ValueRef& r : g.outputs) {
    if (r.kind == ValueRef::constant) elementwise_only[r.id] = 0;
  }
  for (size_t i = 0; i < g.constants.size(); ++i) {
    const array& c = g.constants[i];
    if (!elementwise_only[i] || c.size() <= 1) continue;
    Shape stop = c.shape();
    bool broadcast = false;
    for (int d = 0; d < c.ndim(); ++d) {
      if (c.shape(d) > 1 && c.strides(d) == 0) {
        stop[d] = 1;
        broadcast = true;
      }
    }
    if (!broadcast) continue;
    array small = contiguous(slice(c, Shape(c.ndim(), 0), stop, Shape(c.ndim(), 1)));
    detail::evaluate(small);
    g.constants[i] = small;
  }
}

bool has_compiled(const Graph& g) {
  for (const GraphNode& n : g.nodes) {
    if (dynamic_cast<const compile_detail::Compiled*>(n.primitive.get())) return true;
  }
  return false;
}

// The graph's nodes built on `inputs`, each fused Compiled region replaced
// by its ops: MLX's export traces through a compiled function called inside
// the exported one, so its file (and the callback form) lists the ops, not a
// region; Loom's does the same.
std::vector<array> replay_expanded(const Graph& g, const std::vector<array>& inputs) {
  std::vector<std::vector<array>> produced(g.nodes.size());
  auto value = [&](const ValueRef& r) -> array {
    switch (r.kind) {
      case ValueRef::input:
        return inputs[r.id];
      case ValueRef::constant:
        return g.constants[r.id];
      default:
        return produced[r.id][r.index];
    }
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    std::vector<array> args;
    for (const ValueRef& r : n.inputs) args.push_back(value(r));
    if (auto* c = dynamic_cast<const compile_detail::Compiled*>(n.primitive.get())) {
      produced[i] = c->expand(args);
    } else if (n.shapes.size() == 1) {
      produced[i].emplace_back(n.shapes[0], n.dtypes[0], n.primitive, std::move(args));
    } else {
      produced[i] = array::make_arrays(n.shapes, n.dtypes, n.primitive, std::move(args));
    }
  }
  std::vector<array> outs;
  for (const ValueRef& r : g.outputs) outs.push_back(value(r));
  return outs;
}

} // namespace

// --- tracing --------------------------------------------------------------------

ExportedTrace trace_for_export(const KwFn& fun, const std::vector<array>& args,
                               const std::map<std::string, array>& kwargs, bool shapeless,
                               const ExportWarning& warn, uint64_t max_folded_bytes) {
  ExportedTrace t;
  t.num_positional = static_cast<int>(args.size());
  t.shapeless = shapeless;
  std::vector<array> inputs(args);
  for (const auto& [key, value] : kwargs) {
    t.keywords.push_back(key);
    inputs.push_back(value);
  }
  for (const array& in : inputs) {
    t.shapes.push_back(in.shape());
    t.dtypes.push_back(in.dtype());
  }
  auto traced = compile_detail::trace_graph(
      [&](const std::vector<array>& placeholders) {
        std::vector<array> positional(placeholders.begin(),
                                      placeholders.begin() + t.num_positional);
        std::map<std::string, array> keyword;
        for (size_t k = 0; k < t.keywords.size(); ++k) {
          keyword.emplace(t.keywords[k], placeholders[t.num_positional + k]);
        }
        return fun(positional, keyword);
      },
      t.shapes, t.dtypes, shapeless);
  t.graph = std::move(traced.graph);
  if (has_compiled(t.graph)) {
    t.graph = compile_detail::trace_graph(
                  [&](const std::vector<array>& placeholders) {
                    return replay_expanded(t.graph, placeholders);
                  },
                  t.shapes, t.dtypes, shapeless)
                  .graph;
  }

  std::string read;
  for (size_t i = 0; i < traced.shape_reads.size(); ++i) {
    if (traced.shape_reads[i]) read += (read.empty() ? "" : ", ") + std::to_string(i);
  }
  if (!read.empty() && warn) {
    warn("[export_function] The function (shapeless=True) read the shape of input(s) " + read +
         " while tracing: Python arithmetic on a shape is frozen into the exported graph and "
         "will be wrong for other shapes. Derive sizes from array operations (flatten, reshape "
         "with -1) to stay shapeless.");
  }
  for (const GraphNode& n : t.graph.nodes) {
    const char* name = n.primitive->name();
    if (!is_registered_primitive(name)) {
      throw std::invalid_argument(std::string("[export_function] Unable to export primitive ") +
                                  name +
                                  ": it has no registered factory, so an import could "
                                  "not rebuild it.");
    }
    if (auto* custom = dynamic_cast<const CustomTransforms*>(n.primitive.get()); custom && warn) {
      PrimitiveState st = custom->state();
      if (state_get<bool>(st, "CustomTransforms", "custom_vjp") ||
          state_get<bool>(st, "CustomTransforms", "custom_jvp") ||
          state_get<bool>(st, "CustomTransforms", "custom_vmap")) {
        warn(
            "[export_function] The function uses a custom_function with custom transforms; "
            "they are Python code and are not exported. The imported function computes the "
            "same values, and its transforms follow the custom function's body.");
      }
    }
  }
  bool random = false;
  std::vector<array> pending;
  for (const array& c : t.graph.constants) {
    if (c.status() == Status::unscheduled && c.has_node()) {
      random = random || produced_by_random(c);
      pending.push_back(c);
    }
  }
  if (random && warn) {
    warn(
        "[export_function] An array the function captures is still the unevaluated output of "
        "a random initialiser (did you forget mx.eval(model.parameters())?). Loom evaluates it "
        "now and exports its values, but the model's parameters were never materialised "
        "before export: evaluate them first so that what you export is what you trained.");
  }
  if (max_folded_bytes > 0 && !pending.empty()) {
    uint64_t bytes = unevaluated_bytes(pending);
    if (bytes > max_folded_bytes) {
      throw std::runtime_error(
          "[export_function] Computing the values that depend on no input "
          "would allocate " +
          std::to_string(bytes) + " bytes, more than the " + std::to_string(max_folded_bytes) +
          " allowed.");
    }
  }
  if (!pending.empty()) eval(pending);
  for (const array& c : t.graph.constants) detail::evaluate(c);
  if (shapeless) shrink_broadcast_constants(t.graph);
  return t;
}

// --- the format: writing ----------------------------------------------------------

namespace {

class Out {
 public:
  explicit Out(Writer& w) : w_(w) {}
  void u8(uint8_t v) { buf_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { detail::put32(buf_, v); }
  void u64(uint64_t v) { detail::put64(buf_, v); }
  void i32(int32_t v) { detail::put32(buf_, static_cast<uint32_t>(v)); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    buf_ += s;
  }
  void raw(const char* p, size_t n) { buf_.append(p, n); }
  void type(const Shape& shape, Dtype dtype) {
    u8(static_cast<uint8_t>(dtype_index(dtype)));
    u32(static_cast<uint32_t>(shape.size()));
    for (int32_t d : shape) i32(d);
  }
  void flush() {
    if (!buf_.empty()) w_.write(buf_.data(), buf_.size());
    buf_.clear();
  }
  Writer& writer() { return w_; }

 private:
  Writer& w_;
  std::string buf_;
};

// Constants of all traces, each stored once: by identity, else by content.
struct ConstantTable {
  std::vector<array> arrays;
  std::unordered_map<const ArrayDesc*, uint32_t> by_id;
  std::unordered_multimap<uint64_t, uint32_t> by_hash;

  static std::string bytes_of(const array& a) {
    BufferWriter b;
    detail::write_elements(b, a);
    return b.bytes();
  }
  static uint64_t hash(const std::string& s) {
    uint64_t h = 1469598103934665603ull; // FNV-1a
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
  }

  uint32_t add(const array& a) {
    if (auto it = by_id.find(a.id()); it != by_id.end()) return it->second;
    std::string bytes = bytes_of(a);
    uint64_t h = hash(bytes) ^ (static_cast<uint64_t>(dtype_index(a.dtype())) << 56);
    auto [lo, hi] = by_hash.equal_range(h);
    for (auto it = lo; it != hi; ++it) {
      const array& b = arrays[it->second];
      if (b.dtype() == a.dtype() && b.shape() == a.shape() && bytes_of(b) == bytes) {
        by_id.emplace(a.id(), it->second);
        return it->second;
      }
    }
    uint32_t index = static_cast<uint32_t>(arrays.size());
    arrays.push_back(a);
    by_id.emplace(a.id(), index);
    by_hash.emplace(h, index);
    return index;
  }
};

void write_ref(Out& o, const ValueRef& r) {
  o.u8(static_cast<uint8_t>(r.kind));
  o.u32(static_cast<uint32_t>(r.id));
  o.u32(static_cast<uint32_t>(r.index));
}

} // namespace

void write_function(Writer& w, const ExportedFunction& f) {
  ConstantTable table;
  std::vector<std::vector<uint32_t>> trace_constants;
  for (const ExportedTrace& t : f.traces) {
    std::vector<uint32_t> ids;
    for (const array& c : t.graph.constants) {
      detail::evaluate(c);
      ids.push_back(table.add(c));
    }
    trace_constants.push_back(std::move(ids));
  }
  Out o(w);
  o.raw(kMagic, sizeof(kMagic));
  o.u32(kExportFormatVersion);
  o.u32(kPrimitiveSetVersion);
  o.str(f.metadata);
  o.u32(static_cast<uint32_t>(table.arrays.size()));
  for (const array& c : table.arrays) {
    o.type(c.shape(), c.dtype());
    o.u64(c.nbytes());
    o.flush();
    detail::write_elements(w, c);
  }
  o.u32(static_cast<uint32_t>(f.traces.size()));
  for (size_t ti = 0; ti < f.traces.size(); ++ti) {
    const ExportedTrace& t = f.traces[ti];
    o.u8(t.shapeless ? 1 : 0);
    o.u32(static_cast<uint32_t>(t.num_positional));
    o.u32(static_cast<uint32_t>(t.keywords.size()));
    for (const std::string& k : t.keywords) o.str(k);
    o.u32(static_cast<uint32_t>(t.shapes.size()));
    for (size_t i = 0; i < t.shapes.size(); ++i) o.type(t.shapes[i], t.dtypes[i]);
    o.u32(static_cast<uint32_t>(trace_constants[ti].size()));
    for (uint32_t id : trace_constants[ti]) o.u32(id);
    o.u32(static_cast<uint32_t>(t.graph.nodes.size()));
    for (const GraphNode& n : t.graph.nodes) {
      o.str(n.primitive->name());
      o.str(encode_state(n.primitive->state()));
      o.u32(static_cast<uint32_t>(n.inputs.size()));
      for (const ValueRef& r : n.inputs) write_ref(o, r);
      o.u32(static_cast<uint32_t>(n.shapes.size()));
      for (size_t k = 0; k < n.shapes.size(); ++k) o.type(n.shapes[k], n.dtypes[k]);
    }
    o.u32(static_cast<uint32_t>(t.graph.outputs.size()));
    for (const ValueRef& r : t.graph.outputs) write_ref(o, r);
    o.flush();
  }
  o.flush();
}

// --- the format: reading ----------------------------------------------------------

namespace {

// Sequential reads through a window buffer; every read is checked against
// the bytes left in the file.
class In {
 public:
  explicit In(Reader& r) : r_(r), size_(r.size()) {}

  [[noreturn]] void invalid(const std::string& what) const {
    throw std::runtime_error("[import_function] Invalid function file " + r_.name() + ": " + what +
                             ".");
  }
  uint64_t left() const { return size_ - pos_; }
  void need(uint64_t n, const char* what) const {
    if (n > left()) invalid(std::string("truncated ") + what);
  }
  void read(void* dst, size_t n, const char* what) {
    need(n, what);
    char* out = static_cast<char*>(dst);
    while (n > 0) {
      if (pos_ < buf_start_ || pos_ >= buf_start_ + buf_.size()) {
        buf_start_ = pos_;
        buf_.resize(static_cast<size_t>(std::min<uint64_t>(kWindow, left())));
        r_.read_at(buf_start_, buf_.data(), buf_.size());
      }
      size_t at = static_cast<size_t>(pos_ - buf_start_);
      size_t take = std::min(n, buf_.size() - at);
      std::memcpy(out, buf_.data() + at, take);
      out += take;
      n -= take;
      pos_ += take;
    }
  }
  // Large payloads go straight from the reader into their buffer.
  void read_direct(void* dst, size_t n, const char* what) {
    need(n, what);
    if (n < kWindow) return read(dst, n, what);
    r_.read_at(pos_, dst, n);
    pos_ += n;
  }
  uint8_t u8(const char* what) {
    unsigned char b;
    read(&b, 1, what);
    return b;
  }
  uint32_t u32(const char* what) {
    unsigned char b[4];
    read(b, 4, what);
    return detail::le32(b);
  }
  uint64_t u64(const char* what) {
    unsigned char b[8];
    read(b, 8, what);
    return detail::le64(b);
  }
  // A count of records of at least `min_bytes` each, checked against the
  // bytes left so that a corrupt count allocates nothing.
  uint32_t count(const char* what, uint64_t min_bytes) {
    uint32_t n = u32(what);
    if (static_cast<uint64_t>(n) * min_bytes > left()) {
      invalid(std::string(what) + " count " + std::to_string(n) + " exceeds the file's size");
    }
    return n;
  }
  std::string str(const char* what) {
    uint32_t n = u32(what);
    need(n, what);
    std::string s(n, '\0');
    read(s.data(), n, what);
    return s;
  }
  Dtype dtype(const char* what) {
    uint8_t d = u8(what);
    if (d >= kNumDtypes)
      invalid(std::string(what) + " has unknown dtype code " + std::to_string(d));
    return dtype_from_index(d);
  }
  std::pair<Shape, Dtype> type(const char* what) {
    Dtype d = dtype(what);
    uint32_t ndim = u32(what);
    if (ndim > kMaxDims)
      invalid(std::string(what) + " has " + std::to_string(ndim) + " dimensions");
    need(4ull * ndim, what);
    Shape shape(ndim);
    for (uint32_t i = 0; i < ndim; ++i) {
      int32_t v = static_cast<int32_t>(u32(what));
      if (v < 0) invalid(std::string(what) + " has a negative dimension");
      shape[i] = v;
    }
    return {std::move(shape), d};
  }
  const std::string& name() const { return r_.name(); }

 private:
  static constexpr size_t kWindow = 1 << 16;
  Reader& r_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t buf_start_ = 0;
  std::string buf_;
};

} // namespace

ExportedFunction read_function(Reader& r) {
  In in(r);
  char magic[sizeof(kMagic)];
  if (r.size() < sizeof(kMagic)) in.invalid("too short for a Loom function file");
  in.read(magic, sizeof(magic), "magic");
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    if (is_mlxfn(r)) return read_mlxfn(r);
    in.invalid("not a Loom function file (it does not start with LOOMFUNC) nor an MLX .mlxfn file");
  }
  uint32_t format = in.u32("format version");
  uint32_t primitives = in.u32("primitive set version");
  if (format != kExportFormatVersion) {
    throw std::runtime_error(
        "[import_function] " + r.name() + " has function file format version " +
        std::to_string(format) + "; this build of Loom reads version " +
        std::to_string(kExportFormatVersion) + ". Export the function again with this version.");
  }
  if (primitives > kPrimitiveSetVersion) {
    throw std::runtime_error("[import_function] " + r.name() +
                             " was written with primitive set version " +
                             std::to_string(primitives) + ", newer than this build of Loom's (" +
                             std::to_string(kPrimitiveSetVersion) +
                             "). Import it with a newer Loom or export it again.");
  }
  ExportedFunction f;
  f.metadata = in.str("metadata");

  std::vector<array> constants;
  uint32_t num_constants = in.count("constant", 13);
  for (uint32_t i = 0; i < num_constants; ++i) {
    auto [shape, dtype] = in.type("constant");
    uint64_t nbytes = in.u64("constant size");
    std::vector<int64_t> dims(shape.begin(), shape.end());
    auto expected = detail::checked_nbytes(dims, dtype.size);
    if (!expected || *expected != nbytes) {
      in.invalid("constant " + std::to_string(i) + " declares " + std::to_string(nbytes) +
                 " bytes for shape " + shape_to_string(shape));
    }
    in.need(nbytes, "constant data");
    auto data = detail::allocate_checked(static_cast<size_t>(nbytes));
    if (nbytes) in.read_direct(data->ptr(), static_cast<size_t>(nbytes), "constant data");
    constants.push_back(detail::make_array(std::move(data), std::move(shape), dtype));
  }

  Stream stream = default_stream(default_device());
  uint32_t num_traces = in.count("trace", 21);
  for (uint32_t ti = 0; ti < num_traces; ++ti) {
    ExportedTrace t;
    t.shapeless = in.u8("shapeless flag") != 0;
    t.num_positional = static_cast<int>(in.u32("positional count"));
    uint32_t num_keywords = in.count("keyword", 4);
    for (uint32_t k = 0; k < num_keywords; ++k) t.keywords.push_back(in.str("keyword"));
    if (!std::is_sorted(t.keywords.begin(), t.keywords.end()) ||
        std::adjacent_find(t.keywords.begin(), t.keywords.end()) != t.keywords.end()) {
      in.invalid("keywords are not sorted and unique");
    }
    uint32_t num_inputs = in.count("input", 5);
    if (static_cast<uint64_t>(t.num_positional) + num_keywords != num_inputs) {
      in.invalid("trace " + std::to_string(ti) + " has " + std::to_string(num_inputs) +
                 " inputs for " + std::to_string(t.num_positional) + " positional and " +
                 std::to_string(num_keywords) + " keyword arguments");
    }
    for (uint32_t i = 0; i < num_inputs; ++i) {
      auto [shape, dtype] = in.type("input");
      t.shapes.push_back(std::move(shape));
      t.dtypes.push_back(dtype);
    }
    Graph& g = t.graph;
    g.num_inputs = static_cast<int>(num_inputs);
    uint32_t used = in.count("trace constant", 4);
    for (uint32_t k = 0; k < used; ++k) {
      uint32_t id = in.u32("constant index");
      if (id >= constants.size())
        in.invalid("constant index " + std::to_string(id) + " out of range");
      g.constants.push_back(constants[id]);
    }
    auto check_ref = [&](const ValueRef& ref) {
      bool ok = false;
      switch (ref.kind) {
        case ValueRef::input:
          ok = ref.id >= 0 && ref.id < g.num_inputs && ref.index == 0;
          break;
        case ValueRef::constant:
          ok = ref.id >= 0 && static_cast<size_t>(ref.id) < g.constants.size() && ref.index == 0;
          break;
        case ValueRef::node:
          ok = ref.id >= 0 && static_cast<size_t>(ref.id) < g.nodes.size() && ref.index >= 0 &&
               static_cast<size_t>(ref.index) < g.nodes[ref.id].shapes.size();
          break;
      }
      if (!ok)
        in.invalid("a value reference (kind " + std::to_string(int(ref.kind)) + ", " +
                   std::to_string(ref.id) + ":" + std::to_string(ref.index) +
                   ") points outside the graph");
    };
    auto read_ref = [&]() {
      uint8_t kind = in.u8("value reference");
      if (kind > ValueRef::node) in.invalid("unknown value reference kind " + std::to_string(kind));
      ValueRef ref{static_cast<ValueRef::Kind>(kind), static_cast<int32_t>(in.u32("reference")),
                   static_cast<int32_t>(in.u32("reference"))};
      check_ref(ref);
      return ref;
    };
    uint32_t num_nodes = in.count("node", 16);
    for (uint32_t ni = 0; ni < num_nodes; ++ni) {
      GraphNode n;
      std::string name = in.str("primitive name");
      std::string state = in.str("primitive state");
      uint32_t num_in = in.count("node input", 9);
      for (uint32_t k = 0; k < num_in; ++k) n.inputs.push_back(read_ref());
      uint32_t num_out = in.count("node output", 5);
      if (num_out == 0) in.invalid("primitive " + name + " has no outputs");
      for (uint32_t k = 0; k < num_out; ++k) {
        auto [shape, dtype] = in.type("node output");
        n.shapes.push_back(std::move(shape));
        n.dtypes.push_back(dtype);
      }
      if (!is_registered_primitive(name)) {
        throw std::runtime_error("[import_function] " + r.name() + " uses the primitive '" + name +
                                 "', which this build of Loom does not have.");
      }
      try {
        n.primitive = make_primitive(name, stream, decode_state(state, name));
      } catch (const std::exception& e) {
        in.invalid(std::string("primitive ") + name + ": " + e.what());
      }
      g.nodes.push_back(std::move(n));
    }
    uint32_t num_outputs = in.count("output", 9);
    for (uint32_t k = 0; k < num_outputs; ++k) g.outputs.push_back(read_ref());
    f.traces.push_back(std::move(t));
  }
  if (in.left() != 0) in.invalid(std::to_string(in.left()) + " trailing bytes");
  return f;
}

// --- files ------------------------------------------------------------------------

FunctionExporter::FunctionExporter(std::string path, KwFn fun, bool shapeless, std::string metadata,
                                   ExportWarning warn)
    : path_(std::move(path)), fun_(std::move(fun)), shapeless_(shapeless), warn_(std::move(warn)) {
  function_.metadata = std::move(metadata);
}

FunctionExporter::~FunctionExporter() {
  try {
    close();
  } catch (...) {
    // A destructor cannot report; close() explicitly to see write errors.
  }
}

void FunctionExporter::operator()(const std::vector<array>& args,
                                  const std::map<std::string, array>& kwargs) {
  if (closed_) {
    throw std::runtime_error("[export_function] The exporter of " + path_ +
                             " is closed; open a new one to add traces.");
  }
  function_.traces.push_back(trace_for_export(fun_, args, kwargs, shapeless_, warn_));
}

void FunctionExporter::close() {
  if (closed_) return;
  closed_ = true;
  AtomicFileWriter w(path_, "export_function");
  write_function(w, function_);
  w.commit();
  function_.traces.clear();
}

void export_function(const std::string& path, const KwFn& fun, const std::vector<array>& args,
                     const std::map<std::string, array>& kwargs, bool shapeless,
                     const std::string& metadata, const ExportWarning& warn) {
  ExportedFunction f;
  f.metadata = metadata;
  f.traces.push_back(trace_for_export(fun, args, kwargs, shapeless, warn));
  AtomicFileWriter w(path, "export_function");
  write_function(w, f);
  w.commit();
}

ImportedFunction import_function(const std::string& path) {
  auto r = open_file(path, "import_function");
  return ImportedFunction(read_function(*r));
}

// --- calling an imported function ---------------------------------------------------

namespace {

void describe_inputs(std::ostream& os, int positional, const std::vector<std::string>& keywords,
                     const std::vector<Shape>& shapes, const std::vector<Dtype>& dtypes) {
  for (size_t i = 0; i < shapes.size(); ++i) {
    os << "  ";
    if (static_cast<int>(i) < positional) {
      os << (i + 1);
    } else {
      os << '"' << keywords[i - positional] << '"';
    }
    os << ": " << shape_to_string(shapes[i]) << ' ' << dtypes[i] << '\n';
  }
}

} // namespace

std::vector<array> ImportedFunction::operator()(const std::vector<array>& args,
                                                const std::map<std::string, array>& kwargs) const {
  std::vector<std::string> keywords;
  std::vector<array> inputs(args);
  for (const auto& [k, v] : kwargs) {
    keywords.push_back(k);
    inputs.push_back(v);
  }
  // The first trace that matches; among shapeless ones, one whose size-1
  // dimensions are where this call has them first (exporter traces of batch
  // 1 and batch n: replay_shapeless).
  const ExportedTrace* found = nullptr;
  for (const ExportedTrace& t : f_.traces) {
    if (t.num_positional != static_cast<int>(args.size()) || t.keywords != keywords) continue;
    bool match = true;
    bool same_units = true;
    for (size_t i = 0; i < inputs.size() && match; ++i) {
      match = inputs[i].dtype() == t.dtypes[i] &&
              (t.shapeless ? inputs[i].ndim() == static_cast<int>(t.shapes[i].size())
                           : inputs[i].shape() == t.shapes[i]);
      for (size_t d = 0; match && d < t.shapes[i].size(); ++d) {
        same_units =
            same_units && (t.shapes[i][d] == 1) == (inputs[i].shape(static_cast<int>(d)) == 1);
      }
    }
    if (!match) continue;
    if (!found) found = &t;
    if (!t.shapeless || same_units) {
      found = &t;
      break;
    }
  }
  if (found) {
    return found->shapeless ? replay_shapeless(*found, inputs)
                            : compile_detail::replay(found->graph, inputs, false);
  }
  std::ostringstream msg;
  msg << "[import_function::call] No imported function found which matches the given "
         "positional and keyword arguments. Possible functions include:\n";
  for (size_t k = 0; k < f_.traces.size(); ++k) {
    const ExportedTrace& t = f_.traces[k];
    msg << ' ' << (k + 1) << ". Function with " << t.num_positional << " positional inputs and "
        << t.keywords.size() << " keyword inputs" << (t.shapeless ? " (shapeless)" : "") << ":\n";
    describe_inputs(msg, t.num_positional, t.keywords, t.shapes, t.dtypes);
  }
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  for (const array& a : inputs) {
    shapes.push_back(a.shape());
    dtypes.push_back(a.dtype());
  }
  msg << "\nCalled with " << args.size() << " positional inputs and " << kwargs.size()
      << " keyword inputs:\n";
  describe_inputs(msg, static_cast<int>(args.size()), keywords, shapes, dtypes);
  throw std::invalid_argument(msg.str());
}

} // namespace loom::io
