// Reading MLX's .mlxfn function files (written by MLX 0.32.4's
// export_function / exporter), so that a function exported by MLX runs on
// Loom.
//
// The layout, learned from files MLX writes (all little-endian; a string is
// a u64 length and its bytes; a vector is a u64 count and its elements; a
// shape is a vector of i32; a dtype is MLX's i32 type code and a u8 size):
//   header: string version, i32 trace count, u8 shapeless, string metadata
//   trace:  vector<string> keyword names, vector<u64> input ids,
//           vector<(shape, dtype)> input types, vector<u64> output ids,
//           u64 tape length, tape entries in topological order
//   entry:  u64 id, u8 has_primitive
//           no primitive: u8 is_constant [, shape, dtype, raw data]  (else an input)
//           primitive: vector<u64> input ids, 12 bytes of stream, string name,
//             the primitive's state (its fields back to back, no length),
//             u64 sibling count; when 0: shape, dtype of the one output;
//             else vector<u64> output ids, vector<shape>, vector<dtype>
// The state has no length prefix, so a primitive whose state layout Loom
// does not know stops the read: the error names it.
//
// Each MLX trace is turned into a Loom trace by running its tape through
// Loom's ops under compile's tracer (trace_for_export): the imported function
// is then an ordinary Loom graph (callable, transformable, exportable).
#include "loom/io/mlxfn.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "loom/io/detail.h"
#include "loom/io/export.h"
#include "loom/ops.h"

namespace loom::io {

namespace {

using namespace mlx;

struct MlxTrace {
  std::vector<std::string> keywords;
  std::vector<uint64_t> input_ids;
  std::vector<MlxType> inputs;
  std::vector<uint64_t> output_ids;
  std::vector<MlxEntry> tape;
};

constexpr uint32_t kMaxDims = 64;

// Sequential checked reads over a reader (files are read whole: .mlxfn
// files hold their constants inline, and the tape is walked once).
class MlxIn {
 public:
  explicit MlxIn(Reader& r) : r_(r) {
    bytes_.resize(static_cast<size_t>(r.size()));
    if (!bytes_.empty()) r.read_at(0, bytes_.data(), bytes_.size());
  }
  [[noreturn]] void invalid(const std::string& what) const {
    throw std::runtime_error("[import_function] Invalid MLX function file (.mlxfn) " + r_.name() +
                             ": " + what + ".");
  }
  uint64_t left() const { return bytes_.size() - pos_; }
  const unsigned char* take(uint64_t n, const char* what) {
    if (n > left()) invalid(std::string("truncated ") + what);
    const unsigned char* p = reinterpret_cast<const unsigned char*>(bytes_.data()) + pos_;
    pos_ += n;
    return p;
  }
  uint8_t u8(const char* what) { return *take(1, what); }
  bool flag(const char* what) {
    uint8_t v = u8(what);
    if (v > 1) invalid(std::string(what) + " is not a boolean (" + std::to_string(v) + ")");
    return v != 0;
  }
  int32_t i32(const char* what) { return static_cast<int32_t>(detail::le32(take(4, what))); }
  uint64_t u64(const char* what) { return detail::le64(take(8, what)); }
  double f64(const char* what) {
    uint64_t bits = u64(what);
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    return d;
  }
  double f32(const char* what) {
    uint32_t bits = static_cast<uint32_t>(i32(what));
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }
  // A count of elements of at least `min_bytes` each, checked against the
  // bytes left so that a corrupt count allocates nothing.
  uint64_t count(const char* what, uint64_t min_bytes) {
    uint64_t n = u64(what);
    if (min_bytes > 0 && n > left() / min_bytes) {
      invalid(std::string(what) + " count " + std::to_string(n) + " exceeds the file's size");
    }
    return n;
  }
  std::string str(const char* what) {
    uint64_t n = count(what, 1);
    const unsigned char* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
  }
  std::vector<int> ints(const char* what) {
    uint64_t n = count(what, 4);
    if (n > (1u << 20)) invalid(std::string(what) + " has " + std::to_string(n) + " entries");
    std::vector<int> v(static_cast<size_t>(n));
    for (auto& x : v) x = i32(what);
    return v;
  }
  Shape shape(const char* what) {
    uint64_t n = count(what, 4);
    if (n > kMaxDims) invalid(std::string(what) + " has " + std::to_string(n) + " dimensions");
    Shape s(static_cast<size_t>(n));
    for (auto& d : s) {
      d = i32(what);
      if (d < 0) invalid(std::string(what) + " has a negative dimension");
    }
    return s;
  }
  Dtype dtype(const char* what) {
    int32_t code = i32(what);
    uint8_t size = u8(what);
    // MLX's type codes: bool, uint8..64, int8..64, float16, float32,
    // float64, bfloat16, complex64.
    static const Dtype by_code[] = {bool_, uint8, uint16,  uint32,  uint64,  int8,     int16,
                                    int32, int64, float16, float32, float64, bfloat16, complex64};
    if (code < 0 || code >= 14) {
      invalid(std::string(what) + " has unknown MLX dtype code " + std::to_string(code));
    }
    Dtype d = by_code[code];
    if (d.size != size) {
      invalid(std::string(what) + " has dtype " + dtype_name(d) + " with item size " +
              std::to_string(size));
    }
    return d;
  }
  std::vector<uint64_t> ids(const char* what) {
    uint64_t n = count(what, 8);
    std::vector<uint64_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = u64(what);
    return v;
  }
  const std::string& name() const { return r_.name(); }

 private:
  Reader& r_;
  std::string bytes_;
  uint64_t pos_ = 0;
};

MlxState read_state(MlxIn& in, const std::string& primitive) {
  const char* layout = state_layout(primitive);
  if (primitive == "CustomKernel") {
    // mx.fast.metal_kernel / cuda_kernel: the state holds the kernel's Metal
    // or CUDA source, which Loom has no compiler for.
    throw std::runtime_error("[import_function] " + in.name() +
                             " uses the MLX primitive 'CustomKernel' (a kernel from "
                             "mx.fast.metal_kernel or mx.fast.cuda_kernel): Loom cannot import "
                             "custom kernels, whose Metal or CUDA source it cannot run.");
  }
  if (!layout) {
    throw std::runtime_error("[import_function] " + in.name() + " uses the MLX primitive '" +
                             primitive +
                             "', which Loom cannot import (its state layout is unknown to "
                             "Loom's .mlxfn reader).");
  }
  MlxState st;
  for (const char* c = layout; *c; ++c) {
    switch (*c) {
      case 'i':
        st.emplace_back(int64_t{in.i32("primitive state")});
        break;
      case 'b':
        st.emplace_back(int64_t{in.flag("primitive state")});
        break;
      case 'f':
        st.emplace_back(in.f32("primitive state"));
        break;
      case 'd':
        st.emplace_back(in.f64("primitive state"));
        break;
      case 'V':
        st.emplace_back(in.ints("primitive state"));
        break;
      case 'U': {
        uint64_t n = in.count("primitive state", 8);
        std::vector<int> v;
        for (uint64_t k = 0; k < n; ++k) {
          uint64_t x = in.u64("primitive state");
          if (x > static_cast<uint64_t>(INT32_MAX))
            in.invalid(primitive + " has an axis out of range");
          v.push_back(static_cast<int>(x));
        }
        st.emplace_back(std::move(v));
        break;
      }
      case 'D':
        st.emplace_back(in.dtype("primitive state"));
        break;
      case 's':
        st.emplace_back(in.str("primitive state"));
        break;
      case 'Q':
        st.emplace_back(static_cast<int64_t>(in.u64("primitive state")));
        break;
      case 'L': {
        uint64_t n = in.count("primitive state", 8);
        std::vector<int64_t> v;
        for (uint64_t k = 0; k < n; ++k)
          v.push_back(static_cast<int64_t>(in.u64("primitive state")));
        st.emplace_back(std::move(v));
        break;
      }
    }
  }
  return st;
}

MlxType read_type(MlxIn& in, const char* what) {
  MlxType t;
  t.shape = in.shape(what);
  t.dtype = in.dtype(what);
  return t;
}

MlxTrace read_trace(MlxIn& in) {
  MlxTrace t;
  uint64_t num_keywords = in.count("keyword", 8);
  for (uint64_t k = 0; k < num_keywords; ++k) t.keywords.push_back(in.str("keyword"));
  t.input_ids = in.ids("input ids");
  uint64_t num_inputs = in.count("input types", 13);
  for (uint64_t k = 0; k < num_inputs; ++k) t.inputs.push_back(read_type(in, "input type"));
  if (t.inputs.size() != t.input_ids.size() || t.keywords.size() > t.inputs.size()) {
    in.invalid("a trace has " + std::to_string(t.input_ids.size()) + " input ids, " +
               std::to_string(t.inputs.size()) + " input types and " +
               std::to_string(t.keywords.size()) + " keywords");
  }
  t.output_ids = in.ids("output ids");
  uint64_t tape = in.count("tape", 10);
  for (uint64_t k = 0; k < tape; ++k) {
    MlxEntry e;
    e.id = in.u64("tape id");
    if (!in.flag("tape entry kind")) {
      if (in.flag("constant flag")) {
        e.kind = MlxEntry::constant;
        MlxType type = read_type(in, "constant");
        std::vector<int64_t> dims(type.shape.begin(), type.shape.end());
        auto nbytes = detail::checked_nbytes(dims, type.dtype.size);
        if (!nbytes)
          in.invalid("constant of shape " + shape_to_string(type.shape) + " is too large");
        const unsigned char* p = in.take(*nbytes, "constant data");
        auto data = detail::allocate_checked(static_cast<size_t>(*nbytes));
        if (*nbytes) std::memcpy(data->ptr(), p, static_cast<size_t>(*nbytes));
        e.value = detail::make_array(std::move(data), type.shape, type.dtype);
      }
      t.tape.push_back(std::move(e));
      continue;
    }
    e.kind = MlxEntry::node;
    e.inputs = in.ids("primitive inputs");
    in.take(12, "stream");
    e.name = in.str("primitive name");
    e.state = read_state(in, e.name);
    uint64_t siblings = in.u64("sibling count");
    if (siblings == 0) {
      e.outputs = {e.id};
      e.types.push_back(read_type(in, "output type"));
    } else {
      e.outputs = in.ids("output ids");
      uint64_t num_shapes = in.count("output shapes", 8);
      std::vector<Shape> shapes;
      for (uint64_t s = 0; s < num_shapes; ++s) shapes.push_back(in.shape("output shape"));
      uint64_t num_dtypes = in.count("output dtypes", 5);
      if (num_shapes != e.outputs.size() || num_dtypes != e.outputs.size()) {
        in.invalid("primitive " + e.name + " lists " + std::to_string(e.outputs.size()) +
                   " outputs, " + std::to_string(num_shapes) + " shapes and " +
                   std::to_string(num_dtypes) + " dtypes");
      }
      for (uint64_t s = 0; s < num_dtypes; ++s) {
        e.types.push_back({shapes[s], in.dtype("output dtype")});
      }
    }
    t.tape.push_back(std::move(e));
  }
  return t;
}

// Runs an MLX tape on Loom arrays: `inputs` in the order of the trace's
// input ids.
std::vector<array> run_tape(const MlxTrace& t, const std::vector<array>& inputs,
                            const std::string& file) {
  std::unordered_map<uint64_t, array> values;
  for (size_t k = 0; k < inputs.size(); ++k) values.insert_or_assign(t.input_ids[k], inputs[k]);
  auto lookup = [&](uint64_t id, const std::string& user) -> const array& {
    auto it = values.find(id);
    if (it == values.end()) {
      throw std::runtime_error("[import_function] Invalid MLX function file (.mlxfn) " + file +
                               ": " + user + " reads a value no earlier entry produced.");
    }
    return it->second;
  };
  for (const MlxEntry& e : t.tape) {
    if (e.kind == MlxEntry::input) continue;
    if (e.kind == MlxEntry::constant) {
      values.insert_or_assign(e.id, e.value);
      continue;
    }
    std::vector<array> in;
    for (uint64_t id : e.inputs) in.push_back(lookup(id, "primitive " + e.name));
    std::vector<array> out;
    bool known = false;
    try {
      known = run_primitive(e, in, out);
    } catch (const std::bad_variant_access&) {
      throw std::runtime_error("[import_function] Invalid MLX function file (.mlxfn) " + file +
                               ": primitive " + e.name + " has a malformed state.");
    } catch (const std::out_of_range&) {
      throw std::runtime_error("[import_function] Invalid MLX function file (.mlxfn) " + file +
                               ": primitive " + e.name + " has a malformed state.");
    }
    if (!known) {
      throw std::runtime_error("[import_function] " + file + " uses the MLX primitive '" + e.name +
                               "', which Loom's .mlxfn reader does not map onto a Loom op.");
    }
    if (out.size() != e.outputs.size()) {
      throw std::runtime_error("[import_function] " + file + ": MLX primitive " + e.name + " has " +
                               std::to_string(e.outputs.size()) + " outputs; Loom's mapping gave " +
                               std::to_string(out.size()) + ".");
    }
    // A shapeless broadcast is deferred to the op it feeds (mlxfn_ops.cpp).
    bool deferred = e.name == "Broadcast" && e.inputs.size() > 1;
    for (size_t k = 0; k < out.size(); ++k) {
      if ((!deferred && out[k].shape() != e.types[k].shape) || out[k].dtype() != e.types[k].dtype) {
        throw std::runtime_error("[import_function] " + file + ": MLX primitive " + e.name +
                                 " records output " + shape_to_string(e.types[k].shape) + " " +
                                 dtype_name(e.types[k].dtype) + "; Loom computed " +
                                 shape_to_string(out[k].shape()) + " " +
                                 dtype_name(out[k].dtype()) + ".");
      }
      values.insert_or_assign(e.outputs[k], out[k]);
    }
  }
  std::vector<array> outs;
  for (uint64_t id : t.output_ids) outs.push_back(lookup(id, "an output"));
  return outs;
}

uint64_t folded_limit(uint64_t file_size) {
  return std::max<uint64_t>(uint64_t(64) << 20, file_size * 16);
}

// Entries that depend on no input are computed once, at import (compile's
// tracer folds them into constants): a causal mask, an arange. Their size
// must be one the file justifies, so that a tiny file cannot make the import
// allocate gigabytes: at most 64 MiB or 16 times the file's size.
void check_folded_size(MlxIn& in, const MlxTrace& t, uint64_t file_size) {
  std::unordered_set<uint64_t> dependent(t.input_ids.begin(), t.input_ids.end());
  uint64_t folded = 0;
  const uint64_t limit = folded_limit(file_size);
  for (const MlxEntry& e : t.tape) {
    if (e.kind != MlxEntry::node) continue;
    bool depends = false;
    for (uint64_t id : e.inputs) depends = depends || dependent.count(id) > 0;
    if (depends) {
      dependent.insert(e.outputs.begin(), e.outputs.end());
      continue;
    }
    for (const MlxType& type : e.types) {
      std::vector<int64_t> dims(type.shape.begin(), type.shape.end());
      auto nbytes = detail::checked_nbytes(dims, type.dtype.size);
      folded += nbytes ? *nbytes : limit + 1;
      if (folded > limit) {
        in.invalid("primitive " + e.name +
                   " and the other values that depend on no input "
                   "need more than " +
                   std::to_string(limit) + " bytes at import, more than a " +
                   std::to_string(file_size) + "-byte file justifies");
      }
    }
  }
}

} // namespace

bool is_mlxfn(Reader& r) {
  // MLX's files start with the version string ("0.32.4": a u64 length, then
  // digits and dots); a truncated one is still recognised, so that its error
  // says what is missing.
  if (r.size() < 9) return false;
  unsigned char head[8 + 32];
  size_t n = static_cast<size_t>(std::min<uint64_t>(sizeof(head), r.size()));
  r.read_at(0, head, n);
  uint64_t len = detail::le64(head);
  if (len == 0 || len > 32) return false;
  for (size_t k = 8; k < n && k < 8 + len; ++k) {
    unsigned char c = head[k];
    if (!(c == '.' || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

ExportedFunction read_mlxfn(Reader& r) {
  MlxIn in(r);
  std::string version = in.str("version");
  int32_t count = in.i32("trace count");
  if (count < 0) in.invalid("negative trace count");
  bool shapeless = in.flag("shapeless flag");
  ExportedFunction f;
  f.metadata = in.str("metadata");
  std::vector<MlxTrace> traces;
  for (int32_t k = 0; k < count; ++k) traces.push_back(read_trace(in));
  if (in.left() != 0) in.invalid(std::to_string(in.left()) + " trailing bytes");

  const std::string file = r.name();
  for (const MlxTrace& t : traces) {
    check_folded_size(in, t, r.size());
    size_t positional = t.inputs.size() - t.keywords.size();
    std::vector<array> args;
    std::map<std::string, array> kwargs;
    for (size_t k = 0; k < t.inputs.size(); ++k) {
      array placeholder = zeros(t.inputs[k].shape, t.inputs[k].dtype);
      if (k < positional) {
        args.push_back(placeholder);
      } else if (!kwargs.emplace(t.keywords[k - positional], placeholder).second) {
        in.invalid("keyword '" + t.keywords[k - positional] + "' appears twice");
      }
    }
    KwFn fn = [&t, &file, positional](const std::vector<array>& a,
                                      const std::map<std::string, array>& kw) {
      std::vector<array> inputs(a);
      for (size_t k = positional; k < t.inputs.size(); ++k) {
        inputs.push_back(kw.at(t.keywords[k - positional]));
      }
      return run_tape(t, inputs, file);
    };
    // Loom's ops may fold input-independent intermediates too (the padded
    // frame of a pad): the tracer bounds what evaluating them allocates.
    try {
      f.traces.push_back(
          trace_for_export(fn, args, kwargs, shapeless, nullptr, folded_limit(r.size())));
    } catch (const std::runtime_error& e) {
      std::string what = e.what();
      if (what.rfind("[export_function] Computing the values", 0) != 0) throw;
      what = what.substr(std::string("[export_function] ").size());
      if (!what.empty() && what.back() == '.') what.pop_back();
      in.invalid(what);
    }
  }
  return f;
}

} // namespace loom::io
