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
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <unordered_map>
#include <variant>

#include "loom/io/detail.h"
#include "loom/io/export.h"
#include "loom/ops.h"

namespace loom::io {

namespace {

// A value of a primitive's state.
using MlxValue = std::variant<int64_t, double, std::vector<int>, Dtype, std::string>;
using MlxState = std::vector<MlxValue>;

struct MlxType {
  Shape shape;
  Dtype dtype = float32;
};

struct MlxEntry {
  enum Kind { input, constant, node } kind = input;
  uint64_t id = 0;
  array value{0.0f}; // constant
  std::string name;  // node
  MlxState state;
  std::vector<uint64_t> inputs;
  std::vector<uint64_t> outputs; // all output ids (the entry's id when one)
  std::vector<MlxType> types;
};

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

// The state layout of each MLX primitive Loom reads, one letter per field:
// i int32 (and enums), f float32, d float64, b bool, V vector<int32>,
// U vector<uint64> (read as ints), D dtype, s string. (MLX's fast primitives store a leading
// nullptr, which is no bytes.)
const std::unordered_map<std::string, const char*>& state_layouts() {
  static const std::unordered_map<std::string, const char*> layouts = [] {
    std::unordered_map<std::string, const char*> m;
    for (const char* n :
         {"Abs",       "Add",          "ArcCos",     "ArcCosh",       "ArcSin",      "ArcSinh",
          "ArcTan",    "ArcTan2",      "ArcTanh",    "BitwiseInvert", "Ceil",        "Conjugate",
          "Copy",      "Cos",          "Cosh",       "Divide",        "DivMod",      "Erf",
          "ErfInv",    "Exp",          "Expm1",      "Floor",         "FloorDivide", "Full",
          "Greater",   "GreaterEqual", "Imag",       "Less",          "LessEqual",   "Log1p",
          "LogAddExp", "LogicalAnd",   "LogicalNot", "LogicalOr",     "LogSumExp",   "Matmul",
          "Maximum",   "Minimum",      "Multiply",   "Negative",      "NotEqual",    "Power",
          "Real",      "Remainder",    "Round",      "Select",        "Sigmoid",     "Sign",
          "Sin",       "Sinh",         "Square",     "StopGradient",  "Subtract",    "Tan",
          "Tanh",      "Contiguous"}) {
      m[n] = "";
    }
    m["Log"] = "i";
    m["Sqrt"] = "b";
    m["Equal"] = "b";
    m["BitwiseBinary"] = "i";
    m["AsType"] = "D";
    m["Arange"] = "ddd";
    m["Broadcast"] = "V";
    m["BroadcastAxes"] = "V";
    m["Reshape"] = "V";
    m["Flatten"] = "ii";
    m["Unflatten"] = "iV";
    m["ExpandDims"] = "V";
    m["Squeeze"] = "V";
    m["Transpose"] = "V";
    m["Concatenate"] = "i";
    m["Split"] = "Vi";
    m["Slice"] = "VVV";
    m["SliceUpdate"] = "iVVV";
    m["DynamicSlice"] = "VV";
    m["DynamicSliceUpdate"] = "V";
    m["Pad"] = "VVV";
    m["Reduce"] = "iV";
    m["ArgReduce"] = "ii";
    m["Scan"] = "iibb";
    m["Sort"] = "i";
    m["ArgSort"] = "i";
    m["Partition"] = "ii";
    m["ArgPartition"] = "ii";
    m["Softmax"] = "b";
    m["AddMM"] = "ff";
    m["Gather"] = "VV";
    m["GatherAxis"] = "i";
    m["Scatter"] = "iV";
    m["ScatterAxis"] = "ii";
    m["Convolution"] = "VVVVVib";
    m["QuantizedMatmul"] = "iiib";
    m["Hadamard"] = "f";
    m["RMSNorm"] = "f";
    m["LayerNorm"] = "f";
    m["RoPE"] = "ibffb";
    m["ScaledDotProductAttention"] = "fbbbb";
    m["Quantize"] = "iiib";
    m["GatherMM"] = "bb";
    m["FFT"] = "Ubbb";
    m["RandomBits"] = "Vi";
    m["Inverse"] = "bb";
    m["Cholesky"] = "b";
    m["QRF"] = "";
    m["SVD"] = "b";
    m["Eigh"] = "sb";
    return m;
  }();
  return layouts;
}

MlxState read_state(MlxIn& in, const std::string& primitive) {
  auto it = state_layouts().find(primitive);
  if (it == state_layouts().end()) {
    throw std::runtime_error("[import_function] " + in.name() + " uses the MLX primitive '" +
                             primitive +
                             "', which Loom cannot import (its state layout is unknown to "
                             "Loom's .mlxfn reader).");
  }
  MlxState st;
  for (const char* c = it->second; *c; ++c) {
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

// --- MLX primitives as Loom ops -----------------------------------------------------

int64_t int_at(const MlxState& st, size_t i) { return std::get<int64_t>(st.at(i)); }
double real_at(const MlxState& st, size_t i) { return std::get<double>(st.at(i)); }
const std::vector<int>& ints_at(const MlxState& st, size_t i) {
  return std::get<std::vector<int>>(st.at(i));
}

using Op = std::function<std::vector<array>(const std::vector<array>& in, const MlxEntry& e)>;

[[noreturn]] void unsupported(const MlxEntry& e, const std::string& what) {
  throw std::runtime_error("[import_function] The MLX primitive " + e.name + " " + what +
                           " has no Loom equivalent.");
}

Shape to_shape(const std::vector<int>& v) { return Shape(v.begin(), v.end()); }

// MLX's Gather: indices for `axes`, then a slice of `slice_sizes` (one per
// axis of a) at each; output = index shape + slice_sizes. Loom's gather
// takes whole slices of the other axes, so partial slices of non-indexed
// axes are cut first; indexed axes must have slice size 1.
array mlx_gather(const std::vector<array>& in, const MlxEntry& e) {
  const std::vector<int>& axes = ints_at(e.state, 0);
  const std::vector<int>& sizes = ints_at(e.state, 1);
  array a = in[0];
  std::vector<array> indices(in.begin() + 1, in.end());
  if (static_cast<int>(sizes.size()) != a.ndim()) unsupported(e, "with mismatched slice sizes");
  Shape start(a.ndim(), 0), stop = a.shape(), strides(a.ndim(), 1);
  bool cut = false;
  for (int d = 0; d < a.ndim(); ++d) {
    bool indexed = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (indexed && sizes[d] != 1) unsupported(e, "with slices wider than 1 on an indexed axis");
    if (!indexed && sizes[d] != a.shape(d)) {
      stop[d] = sizes[d];
      cut = true;
    }
  }
  if (cut) a = slice(a, start, stop, strides);
  if (axes.empty()) return reshape(a, e.types[0].shape);
  return reshape(gather(a, indices, axes), e.types[0].shape);
}

// MLX's Scatter: updates have the index shape followed by a's rank in
// slice sizes (1 on the indexed axes); Loom's take index shape + the other
// axes.
array mlx_scatter(const std::vector<array>& in, const MlxEntry& e) {
  int type = static_cast<int>(int_at(e.state, 0));
  const std::vector<int>& axes = ints_at(e.state, 1);
  const array& a = in[0];
  std::vector<array> indices(in.begin() + 1, in.end() - 1);
  array updates = in.back();
  Shape upd_shape;
  int index_rank = updates.ndim() - a.ndim();
  for (int d = 0; d < index_rank; ++d) upd_shape.push_back(updates.shape(d));
  for (int d = 0; d < a.ndim(); ++d) {
    bool indexed = std::find(axes.begin(), axes.end(), d) != axes.end();
    int size = updates.shape(index_rank + d);
    if (indexed) {
      if (size != 1) unsupported(e, "with update slices wider than 1 on an indexed axis");
    } else {
      if (size != a.shape(d)) unsupported(e, "with partial update slices");
      upd_shape.push_back(size);
    }
  }
  updates = reshape(updates, upd_shape);
  // MLX's Scatter::ReduceType: Max, Min, Sum, Prod, None.
  switch (type) {
    case 0:
      return scatter_max(a, indices, updates, axes);
    case 1:
      return scatter_min(a, indices, updates, axes);
    case 2:
      return scatter_add(a, indices, updates, axes);
    case 3:
      return scatter_prod(a, indices, updates, axes);
    case 4:
      return scatter(a, indices, updates, axes);
  }
  unsupported(e, "with reduction code " + std::to_string(type));
}

// MLX stores a slice's normalised start and stride; the stop Loom needs is
// derived from the output length recorded in the file.
void slice_bounds(const MlxEntry& e, const Shape& region, Shape& start, Shape& stop,
                  Shape& strides) {
  start = to_shape(ints_at(e.state, e.name == "Slice" ? 0 : 1));
  strides = to_shape(ints_at(e.state, e.name == "Slice" ? 2 : 3));
  if (start.size() != region.size() || strides.size() != region.size()) {
    unsupported(e, "with bounds of the wrong rank");
  }
  stop.resize(region.size());
  for (size_t d = 0; d < region.size(); ++d) {
    int n = region[d];
    stop[d] = n == 0 ? start[d] : start[d] + strides[d] * (n - 1) + (strides[d] > 0 ? 1 : -1);
  }
}

const std::unordered_map<std::string, Op>& mlx_ops() {
  static const std::unordered_map<std::string, Op> ops = [] {
    std::unordered_map<std::string, Op> m;
    using A = const std::vector<array>&;
    using E = const MlxEntry&;
    auto unary = [&m](const char* name, array (*f)(const array&, StreamOrDevice)) {
      m[name] = [f](A in, E) { return std::vector<array>{f(in[0], {})}; };
    };
    auto binary = [&m](const char* name, array (*f)(const array&, const array&, StreamOrDevice)) {
      m[name] = [f](A in, E) { return std::vector<array>{f(in[0], in[1], {})}; };
    };
    unary("Abs", abs);
    unary("Negative", negative);
    unary("Sign", sign);
    unary("Square", square);
    unary("Exp", exp);
    unary("Expm1", expm1);
    unary("Log1p", log1p);
    unary("Sin", sin);
    unary("Cos", cos);
    unary("Tan", tan);
    unary("Sinh", sinh);
    unary("Cosh", cosh);
    unary("Tanh", tanh);
    unary("ArcSin", arcsin);
    unary("ArcCos", arccos);
    unary("ArcTan", arctan);
    unary("ArcSinh", arcsinh);
    unary("ArcCosh", arccosh);
    unary("ArcTanh", arctanh);
    unary("Erf", erf);
    unary("ErfInv", erfinv);
    unary("Sigmoid", sigmoid);
    unary("Floor", floor);
    unary("Ceil", ceil);
    unary("LogicalNot", logical_not);
    unary("BitwiseInvert", bitwise_invert);
    unary("Conjugate", conjugate);
    unary("Real", real);
    unary("Imag", imag);
    unary("Copy", copy);
    unary("StopGradient", stop_gradient);
    m["Contiguous"] = [](A in, E) { return std::vector<array>{contiguous(in[0])}; };
    m["Round"] = [](A in, E) { return std::vector<array>{round(in[0], 0)}; };
    binary("Add", add);
    binary("Subtract", subtract);
    binary("Multiply", multiply);
    binary("Divide", divide);
    binary("Remainder", remainder);
    binary("Power", power);
    binary("Maximum", maximum);
    binary("Minimum", minimum);
    binary("Greater", greater);
    binary("GreaterEqual", greater_equal);
    binary("Less", less);
    binary("LessEqual", less_equal);
    binary("NotEqual", not_equal);
    binary("LogicalAnd", logical_and);
    binary("LogicalOr", logical_or);
    binary("LogAddExp", logaddexp);
    binary("ArcTan2", arctan2);
    binary("FloorDivide", floor_divide);
    binary("Matmul", matmul);
    m["DivMod"] = [](A in, E) { return divmod(in[0], in[1]); };
    m["Equal"] = [](A in, E e) {
      array eq = equal(in[0], in[1]);
      if (int_at(e.state, 0)) eq = logical_or(eq, logical_and(isnan(in[0]), isnan(in[1])));
      return std::vector<array>{eq};
    };
    m["BitwiseBinary"] = [](A in, E e) {
      // MLX's BitwiseBinary::Op: And, Or, Xor, LeftShift, RightShift.
      switch (int_at(e.state, 0)) {
        case 0:
          return std::vector<array>{bitwise_and(in[0], in[1])};
        case 1:
          return std::vector<array>{bitwise_or(in[0], in[1])};
        case 2:
          return std::vector<array>{bitwise_xor(in[0], in[1])};
        case 3:
          return std::vector<array>{left_shift(in[0], in[1])};
        case 4:
          return std::vector<array>{right_shift(in[0], in[1])};
      }
      unsupported(e, "with operation code " + std::to_string(int_at(e.state, 0)));
    };
    m["Select"] = [](A in, E) { return std::vector<array>{where(in[0], in[1], in[2])}; };
    m["Log"] = [](A in, E e) {
      // MLX's Log::Base: two, ten, e.
      switch (int_at(e.state, 0)) {
        case 0:
          return std::vector<array>{log2(in[0])};
        case 1:
          return std::vector<array>{log10(in[0])};
        default:
          return std::vector<array>{log(in[0])};
      }
    };
    m["Sqrt"] = [](A in, E e) {
      return std::vector<array>{int_at(e.state, 0) ? rsqrt(in[0]) : sqrt(in[0])};
    };
    m["AsType"] = [](A in, E e) {
      return std::vector<array>{astype(in[0], std::get<Dtype>(e.state.at(0)))};
    };
    m["Arange"] = [](A, E e) {
      return std::vector<array>{
          arange(real_at(e.state, 0), real_at(e.state, 1), real_at(e.state, 2), e.types[0].dtype)};
    };
    m["Full"] = [](A in, E e) {
      return std::vector<array>{astype(broadcast_to(in[0], e.types[0].shape), e.types[0].dtype)};
    };
    m["Broadcast"] = [](A in, E e) {
      return std::vector<array>{broadcast_to(in[0], to_shape(ints_at(e.state, 0)))};
    };
    m["BroadcastAxes"] = [](A in, E e) {
      return std::vector<array>{broadcast_to(in[0], e.types[0].shape)};
    };
    m["Reshape"] = [](A in, E e) {
      return std::vector<array>{reshape(in[0], to_shape(ints_at(e.state, 0)))};
    };
    m["Flatten"] = [](A in, E e) {
      return std::vector<array>{flatten(in[0], static_cast<int>(int_at(e.state, 0)),
                                        static_cast<int>(int_at(e.state, 1)))};
    };
    m["Unflatten"] = [](A in, E e) {
      return std::vector<array>{
          unflatten(in[0], static_cast<int>(int_at(e.state, 0)), to_shape(ints_at(e.state, 1)))};
    };
    m["ExpandDims"] = [](A in, E e) {
      return std::vector<array>{expand_dims(in[0], ints_at(e.state, 0))};
    };
    m["Squeeze"] = [](A in, E e) {
      return std::vector<array>{squeeze(in[0], ints_at(e.state, 0))};
    };
    m["Transpose"] = [](A in, E e) {
      return std::vector<array>{transpose(in[0], ints_at(e.state, 0))};
    };
    m["Concatenate"] = [](A in, E e) {
      return std::vector<array>{concatenate(in, static_cast<int>(int_at(e.state, 0)))};
    };
    m["Split"] = [](A in, E e) {
      return split(in[0], to_shape(ints_at(e.state, 0)), static_cast<int>(int_at(e.state, 1)));
    };
    m["Slice"] = [](A in, E e) {
      Shape start, stop, strides;
      slice_bounds(e, e.types[0].shape, start, stop, strides);
      return std::vector<array>{slice(in[0], start, stop, strides)};
    };
    m["SliceUpdate"] = [](A in, E e) {
      Shape start, stop, strides;
      slice_bounds(e, in[1].shape(), start, stop, strides);
      array update = in[1];
      // MLX's SliceUpdate::ReduceType: Max, Min, Sum, Prod, None (a.at[...].add
      // and friends): the region is combined with the update, then written.
      int64_t type = int_at(e.state, 0);
      if (type != 4) {
        array region = slice(in[0], start, stop, strides);
        switch (type) {
          case 0:
            update = maximum(region, update);
            break;
          case 1:
            update = minimum(region, update);
            break;
          case 2:
            update = add(region, update);
            break;
          case 3:
            update = multiply(region, update);
            break;
          default:
            unsupported(e, "with reduction code " + std::to_string(type));
        }
      }
      return std::vector<array>{slice_update(in[0], update, start, stop, strides)};
    };
    m["DynamicSlice"] = [](A in, E e) {
      return std::vector<array>{
          slice(in[0], in[1], ints_at(e.state, 0), to_shape(ints_at(e.state, 1)))};
    };
    m["DynamicSliceUpdate"] = [](A in, E e) {
      return std::vector<array>{slice_update(in[0], in[1], in[2], ints_at(e.state, 0))};
    };
    m["Pad"] = [](A in, E e) {
      const auto& axes = ints_at(e.state, 0);
      const auto& lo = ints_at(e.state, 1);
      const auto& hi = ints_at(e.state, 2);
      if (lo.size() != axes.size() || hi.size() != axes.size())
        unsupported(e, "with ragged widths");
      std::vector<std::pair<int, int>> widths(in[0].ndim(), {0, 0});
      for (size_t k = 0; k < axes.size(); ++k) {
        int ax = axes[k] < 0 ? axes[k] + in[0].ndim() : axes[k];
        if (ax < 0 || ax >= in[0].ndim()) unsupported(e, "with an axis out of range");
        widths[ax] = {lo[k], hi[k]};
      }
      return std::vector<array>{pad(in[0], widths, in[1])};
    };
    m["Reduce"] = [](A in, E e) {
      const auto& axes = ints_at(e.state, 1);
      // MLX's Reduce::ReduceType: And, Or, Sum, Prod, Min, Max; the
      // primitive keeps the reduced axes.
      switch (int_at(e.state, 0)) {
        case 0:
          return std::vector<array>{all(in[0], axes, true)};
        case 1:
          return std::vector<array>{any(in[0], axes, true)};
        case 2:
          return std::vector<array>{astype(sum(in[0], axes, true), e.types[0].dtype)};
        case 3:
          return std::vector<array>{astype(prod(in[0], axes, true), e.types[0].dtype)};
        case 4:
          return std::vector<array>{min(in[0], axes, true)};
        case 5:
          return std::vector<array>{max(in[0], axes, true)};
      }
      unsupported(e, "with reduction code " + std::to_string(int_at(e.state, 0)));
    };
    m["ArgReduce"] = [](A in, E e) {
      int axis = static_cast<int>(int_at(e.state, 1));
      return std::vector<array>{int_at(e.state, 0) == 0 ? argmin(in[0], axis, true)
                                                        : argmax(in[0], axis, true)};
    };
    m["Scan"] = [](A in, E e) {
      int axis = static_cast<int>(int_at(e.state, 1));
      bool reverse = int_at(e.state, 2), inclusive = int_at(e.state, 3);
      // MLX's Scan::ReduceType: Max, Min, Sum, Prod, LogAddExp.
      switch (int_at(e.state, 0)) {
        case 0:
          return std::vector<array>{cummax(in[0], axis, reverse, inclusive)};
        case 1:
          return std::vector<array>{cummin(in[0], axis, reverse, inclusive)};
        case 2:
          return std::vector<array>{
              astype(cumsum(in[0], axis, reverse, inclusive), e.types[0].dtype)};
        case 3:
          return std::vector<array>{
              astype(cumprod(in[0], axis, reverse, inclusive), e.types[0].dtype)};
        case 4:
          return std::vector<array>{logcumsumexp(in[0], axis, reverse, inclusive)};
      }
      unsupported(e, "with scan code " + std::to_string(int_at(e.state, 0)));
    };
    m["Sort"] = [](A in, E e) {
      return std::vector<array>{sort(in[0], static_cast<int>(int_at(e.state, 0)))};
    };
    m["ArgSort"] = [](A in, E e) {
      return std::vector<array>{argsort(in[0], static_cast<int>(int_at(e.state, 0)))};
    };
    m["Partition"] = [](A in, E e) {
      return std::vector<array>{partition(in[0], static_cast<int>(int_at(e.state, 0)),
                                          static_cast<int>(int_at(e.state, 1)))};
    };
    m["ArgPartition"] = [](A in, E e) {
      return std::vector<array>{argpartition(in[0], static_cast<int>(int_at(e.state, 0)),
                                             static_cast<int>(int_at(e.state, 1)))};
    };
    m["Softmax"] = [](A in, E e) {
      return std::vector<array>{softmax(in[0], std::vector<int>{-1}, int_at(e.state, 0) != 0)};
    };
    m["LogSumExp"] = [](A in, E) {
      return std::vector<array>{logsumexp(in[0], std::vector<int>{-1}, true)};
    };
    m["AddMM"] = [](A in, E e) {
      return std::vector<array>{addmm(in[2], in[0], in[1], static_cast<float>(real_at(e.state, 0)),
                                      static_cast<float>(real_at(e.state, 1)))};
    };
    m["Gather"] = [](A in, E e) { return std::vector<array>{mlx_gather(in, e)}; };
    m["GatherAxis"] = [](A in, E e) {
      return std::vector<array>{
          take_along_axis(in[0], in[1], static_cast<int>(int_at(e.state, 0)))};
    };
    m["Scatter"] = [](A in, E e) { return std::vector<array>{mlx_scatter(in, e)}; };
    m["ScatterAxis"] = [](A in, E e) {
      int axis = static_cast<int>(int_at(e.state, 1));
      // MLX's ScatterAxis::ReduceType: Sum, None.
      if (int_at(e.state, 0) == 0) {
        return std::vector<array>{scatter_add_axis(in[0], in[1], in[2], axis)};
      }
      return std::vector<array>{put_along_axis(in[0], in[1], in[2], axis)};
    };
    m["Convolution"] = [](A in, E e) {
      return std::vector<array>{
          conv_general(in[0], in[1], ints_at(e.state, 0), ints_at(e.state, 1), ints_at(e.state, 2),
                       ints_at(e.state, 3), ints_at(e.state, 4),
                       static_cast<int>(int_at(e.state, 5)), int_at(e.state, 6) != 0)};
    };
    m["QuantizedMatmul"] = [](A in, E e) {
      // MLX's QuantizationMode: affine, mxfp4, mxfp8, nvfp4.
      static const char* modes[] = {"affine", "mxfp4", "mxfp8", "nvfp4"};
      int64_t mode = int_at(e.state, 2);
      if (mode < 0 || mode > 3) unsupported(e, "with quantization mode " + std::to_string(mode));
      std::optional<array> biases;
      if (in.size() >= 4) biases = in[3];
      return std::vector<array>{quantized_matmul(
          in[0], in[1], in[2], biases, int_at(e.state, 3) != 0,
          static_cast<int>(int_at(e.state, 0)), static_cast<int>(int_at(e.state, 1)), modes[mode])};
    };
    m["Hadamard"] = [](A in, E e) {
      return std::vector<array>{hadamard_transform(in[0], static_cast<float>(real_at(e.state, 0)))};
    };
    // --- MLX's fast primitives (in files exported with Metal; the CPU build
    // decomposes them) ---
    m["RMSNorm"] = [](A in, E e) {
      std::optional<array> w;
      if (in.size() > 1) w = in[1];
      return std::vector<array>{fast::rms_norm(in[0], w, static_cast<float>(real_at(e.state, 0)))};
    };
    m["LayerNorm"] = [](A in, E e) {
      std::optional<array> w, b;
      if (in.size() > 1) w = in[1];
      if (in.size() > 2) b = in[2];
      return std::vector<array>{
          fast::layer_norm(in[0], w, b, static_cast<float>(real_at(e.state, 0)))};
    };
    m["RoPE"] = [](A in, E e) {
      // Inputs: x, the offset (an integer array) and, when given, freqs.
      if (!int_at(e.state, 4)) unsupported(e, "of a backward pass (forward=False)");
      if (in.size() < 2) unsupported(e, "without an offset input");
      std::optional<float> base;
      std::optional<array> freqs;
      if (in.size() > 2) {
        freqs = in[2];
      } else {
        base = static_cast<float>(real_at(e.state, 2));
      }
      return std::vector<array>{fast::rope(in[0], static_cast<int>(int_at(e.state, 0)),
                                           int_at(e.state, 1) != 0, base,
                                           static_cast<float>(real_at(e.state, 3)), in[1], freqs)};
    };
    m["ScaledDotProductAttention"] = [](A in, E e) {
      // Inputs: q, k, v, then the mask (an array mask) and the sinks.
      bool causal = int_at(e.state, 1) != 0, sinks = int_at(e.state, 2) != 0;
      if (int_at(e.state, 3)) unsupported(e, "returning the log-sum-exp (a training pass)");
      if (in.size() < 3) unsupported(e, "with fewer than 3 inputs");
      std::optional<array> mask, sink;
      size_t extra = in.size() - 3;
      if (sinks) {
        if (extra == 0) unsupported(e, "declaring sinks without a sinks input");
        sink = in.back();
        --extra;
      }
      if (extra > 1) unsupported(e, "with " + std::to_string(in.size()) + " inputs");
      if (extra == 1) mask = in[3];
      return std::vector<array>{fast::scaled_dot_product_attention(
          in[0], in[1], in[2], static_cast<float>(real_at(e.state, 0)), causal ? "causal" : "",
          mask, sink)};
    };
    m["Quantize"] = [](A in, E e) {
      static const char* modes[] = {"affine", "mxfp4", "mxfp8", "nvfp4"};
      int64_t mode = int_at(e.state, 2);
      if (mode < 0 || mode > 3) unsupported(e, "with quantization mode " + std::to_string(mode));
      int group = static_cast<int>(int_at(e.state, 0)), bits = static_cast<int>(int_at(e.state, 1));
      if (int_at(e.state, 3)) {
        std::optional<array> biases;
        if (in.size() > 2) biases = in[2];
        return std::vector<array>{dequantize(in[0], in[1], biases, group, bits, modes[mode],
                                             std::nullopt, e.types[0].dtype)};
      }
      return quantize(in[0], group, bits, modes[mode]);
    };
    m["GatherMM"] = [](A in, E e) {
      if (in.size() != 4) unsupported(e, "with " + std::to_string(in.size()) + " inputs");
      return std::vector<array>{gather_mm(in[0], in[1], in[2], in[3],
                                          int_at(e.state, 0) != 0 || int_at(e.state, 1) != 0)};
    };
    m["FFT"] = [](A in, E e) {
      const std::vector<int>& axes = ints_at(e.state, 0);
      bool inverse = int_at(e.state, 1) != 0, real_fft = int_at(e.state, 2) != 0;
      // The transform sizes: the output's along the axes for irfft, else
      // the input's.
      const Shape& sized = real_fft && inverse ? e.types[0].shape : in[0].shape();
      Shape n;
      for (int ax : axes) {
        int a = ax < 0 ? ax + static_cast<int>(sized.size()) : ax;
        if (a < 0 || a >= static_cast<int>(sized.size()))
          unsupported(e, "with an axis out of range");
        n.push_back(sized[a]);
      }
      if (real_fft) {
        return std::vector<array>{inverse ? fft::irfftn(in[0], n, axes)
                                          : fft::rfftn(in[0], n, axes)};
      }
      return std::vector<array>{inverse ? fft::ifftn(in[0], n, axes) : fft::fftn(in[0], n, axes)};
    };
    m["RandomBits"] = [](A in, E e) {
      return std::vector<array>{
          random::bits(to_shape(ints_at(e.state, 0)), static_cast<int>(int_at(e.state, 1)), in[0])};
    };
    // --- linear algebra ---
    m["Inverse"] = [](A in, E e) {
      bool tri = int_at(e.state, 0) != 0, upper = int_at(e.state, 1) != 0;
      return std::vector<array>{tri ? linalg::tri_inv(in[0], upper) : linalg::inv(in[0])};
    };
    m["Cholesky"] = [](A in, E e) {
      return std::vector<array>{linalg::cholesky(in[0], int_at(e.state, 0) != 0)};
    };
    m["QRF"] = [](A in, E) { return linalg::qr(in[0]); };
    m["SVD"] = [](A in, E e) { return linalg::svd(in[0], int_at(e.state, 0) != 0); };
    m["Eigh"] = [](A in, E e) {
      const std::string& uplo = std::get<std::string>(e.state.at(0));
      if (!int_at(e.state, 1)) return std::vector<array>{linalg::eigvalsh(in[0], uplo)};
      return linalg::eigh(in[0], uplo);
    };
    return m;
  }();
  return ops;
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
    auto op = mlx_ops().find(e.name);
    if (op == mlx_ops().end()) {
      throw std::runtime_error("[import_function] " + file + " uses the MLX primitive '" + e.name +
                               "', which Loom's .mlxfn reader does not map onto a Loom op.");
    }
    std::vector<array> in;
    for (uint64_t id : e.inputs) in.push_back(lookup(id, "primitive " + e.name));
    std::vector<array> out;
    try {
      out = op->second(in, e);
    } catch (const std::bad_variant_access&) {
      throw std::runtime_error("[import_function] Invalid MLX function file (.mlxfn) " + file +
                               ": primitive " + e.name + " has a malformed state.");
    } catch (const std::out_of_range&) {
      throw std::runtime_error("[import_function] Invalid MLX function file (.mlxfn) " + file +
                               ": primitive " + e.name + " has a malformed state.");
    }
    if (out.size() != e.outputs.size()) {
      throw std::runtime_error("[import_function] " + file + ": MLX primitive " + e.name + " has " +
                               std::to_string(e.outputs.size()) + " outputs; Loom's mapping gave " +
                               std::to_string(out.size()) + ".");
    }
    for (size_t k = 0; k < out.size(); ++k) {
      if (out[k].shape() != e.types[k].shape || out[k].dtype() != e.types[k].dtype) {
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

} // namespace

bool is_mlxfn(Reader& r) {
  if (r.size() < 9) return false;
  unsigned char head[8 + 32];
  size_t n = static_cast<size_t>(std::min<uint64_t>(sizeof(head), r.size()));
  r.read_at(0, head, n);
  uint64_t len = detail::le64(head);
  if (len == 0 || len > 32 || 8 + len > n) return false;
  for (uint64_t k = 0; k < len; ++k) {
    unsigned char c = head[8 + k];
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
    f.traces.push_back(trace_for_export(fn, args, kwargs, shapeless));
  }
  return f;
}

} // namespace loom::io
