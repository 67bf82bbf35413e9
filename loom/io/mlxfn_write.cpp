// Writing MLX's .mlxfn function files (the layout mlxfn.cpp reads), so that a
// function exported by Loom runs on MLX 0.32.4 (on a Mac, say). Each Loom
// node becomes the MLX primitive(s) computing it, with the state laid out as
// MLX's importer reads it; a node MLX cannot represent (or that this writer
// does not map yet) raises an error naming it, and nothing is written.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/io/detail.h"
#include "loom/io/export.h"

namespace loom::io {

namespace {

using compile_detail::Graph;
using compile_detail::GraphNode;
using compile_detail::ValueRef;

int mlx_dtype_code(Dtype d) {
  static const Dtype by_code[] = {bool_, uint8, uint16,  uint32,  uint64,  int8,     int16,
                                  int32, int64, float16, float32, float64, bfloat16, complex64};
  for (int k = 0; k < 14; ++k)
    if (by_code[k] == d) return k;
  throw std::invalid_argument(std::string("[export_function] MLX has no dtype ") + dtype_name(d) +
                              ".");
}

// Little-endian pieces of MLX's layout.
struct Out {
  std::string s;
  void u8(uint8_t v) { s.push_back(static_cast<char>(v)); }
  void i32(int32_t v) { detail::put32(s, static_cast<uint32_t>(v)); }
  void u64(uint64_t v) { detail::put64(s, v); }
  void f32(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    detail::put32(s, bits);
  }
  void str(const std::string& v) {
    u64(v.size());
    s += v;
  }
  void ints(const std::vector<int64_t>& v) {
    u64(v.size());
    for (int64_t x : v) i32(static_cast<int32_t>(x));
  }
  void shape(const Shape& v) {
    u64(v.size());
    for (auto x : v) i32(static_cast<int32_t>(x));
  }
  void dtype(Dtype d) {
    i32(mlx_dtype_code(d));
    u8(static_cast<uint8_t>(d.size));
  }
  void ids(const std::vector<uint64_t>& v) {
    u64(v.size());
    for (uint64_t x : v) u64(x);
  }
};

[[noreturn]] void cannot(const std::string& primitive, const std::string& why) {
  throw std::invalid_argument("[export_function] Cannot write the primitive " + primitive +
                              " in MLX's .mlxfn format: " + why + ".");
}

// One MLX tape entry to write: a primitive on value ids.
struct MlxNode {
  std::string name;
  std::string state; // the fields back to back
  std::vector<uint64_t> inputs;
  Shape shape;
  Dtype dtype;
  // Nodes of several outputs (Split): all their shapes and dtypes.
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  // A constant of a composite (an eps, a 1/n): its bytes.
  bool constant = false;
  std::string data;
};

// In a composite, an input id with this bit set names the output of an
// earlier entry of the same composite (its index below the bit).
constexpr uint64_t kLocal = uint64_t(1) << 63;

// Builds the entries of a composite: values are ids (the node's inputs) or
// kLocal | index of an entry added before.
struct Composite {
  std::vector<MlxNode> nodes;
  uint64_t add(const char* name, std::string state, std::vector<uint64_t> inputs,
               const Shape& shape, Dtype dtype) {
    nodes.push_back(
        MlxNode{name, std::move(state), std::move(inputs), shape, dtype, {}, {}, false, {}});
    return kLocal | (nodes.size() - 1);
  }
  uint64_t scalar(double v, Dtype dtype) {
    MlxNode c{"", "", {}, {}, dtype, {}, {}, false, {}};
    c.constant = true;
    if (dtype == float32) {
      float f = static_cast<float>(v);
      c.data.assign(reinterpret_cast<const char*>(&f), 4);
    } else {
      throw std::logic_error("[export_function] composite constants are float32");
    }
    nodes.push_back(std::move(c));
    return kLocal | (nodes.size() - 1);
  }
  uint64_t constant(const Shape& shape, const std::vector<float>& values) {
    MlxNode c{"", "", {}, shape, float32, {}, {}, true, {}};
    c.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
    nodes.push_back(std::move(c));
    return kLocal | (nodes.size() - 1);
  }
  static std::string ints(const std::vector<int64_t>& v) {
    Out o;
    o.ints(v);
    return o.s;
  }
  uint64_t broadcast(uint64_t x, const Shape& shape, Dtype dtype) {
    return add("Broadcast", ints(std::vector<int64_t>(shape.begin(), shape.end())), {x}, shape,
               dtype);
  }
  // The mean over the last axis, kept: Sum * (1 / n).
  uint64_t mean_last(uint64_t x, const Shape& shape) {
    Shape kept = shape;
    kept.back() = 1;
    Out o;
    o.i32(2);
    o.ints({static_cast<int64_t>(shape.size()) - 1});
    uint64_t sum = add("Reduce", o.s, {x}, kept, float32);
    return add("Multiply", "", {sum, scalar(1.0 / shape.back(), float32)}, kept, float32);
  }
};

// rms_norm / layer_norm as MLX's ordinary primitives, computed in float32
// as Loom's kernels do (MLX's CPU build decomposes them the same way).
// scaled_dot_product_attention as MLX's ordinary primitives (MLX's CPU
// build decomposes it the same way): softmax(q k^T * scale + mask) v, in
// float32, for as many key/value heads as query heads.
std::vector<MlxNode> sdpa_composite(const PrimitiveState& st, const std::vector<uint64_t>& in,
                                    const std::vector<Shape>& in_shapes,
                                    const std::vector<Dtype>& in_dtypes, const Shape& out,
                                    Dtype dtype) {
  const char* name = "ScaledDotProductAttention";
  if (state_get<bool>(st, name, "has_sinks")) cannot(name, "attention sinks are not mapped yet");
  if (in.size() < 3 || in_shapes[0].size() != 4 || in_shapes[1].size() != 4 ||
      in_shapes[2].size() != 4)
    cannot(name, "of inputs that are not 4-D");
  const Shape &q = in_shapes[0], &k = in_shapes[1], &v = in_shapes[2];
  if (q[0] != k[0] || k[0] != v[0] || k[1] != v[1] || k[1] == 0 || q[1] % k[1] != 0)
    cannot(name, "of these shapes");
  // Grouped queries (fewer key/value heads): the query heads of a group
  // share one key/value head, through a 5-D (B, Hk, group, L, .) layout.
  const int32_t B = q[0], Hk = k[1], group = q[1] / k[1], L = q[2], S = k[2];
  Composite c;
  auto reshape = [&](uint64_t x, const Shape& to) {
    return c.add("Reshape", Composite::ints(std::vector<int64_t>(to.begin(), to.end())), {x}, to,
                 float32);
  };
  auto as_f32 = [&](size_t i) {
    if (in_dtypes[i] == float32) return in[i];
    Out o;
    o.dtype(float32);
    return c.add("AsType", o.s, {in[i]}, in_shapes[i], float32);
  };
  uint64_t qf = as_f32(0), kf = as_f32(1), vf = as_f32(2);
  Shape kt_shape{k[0], k[1], k[3], k[2]};
  uint64_t kt = c.add("Transpose", Composite::ints({0, 1, 3, 2}), {kf}, kt_shape, float32);
  Shape scores{q[0], q[1], q[2], k[2]};
  if (group > 1) {
    qf = reshape(qf, {B, Hk, group, L, q[3]});
    kt = c.broadcast(reshape(kt, {B, Hk, 1, k[3], S}), {B, Hk, group, k[3], S}, float32);
    vf = c.broadcast(reshape(vf, {B, Hk, 1, S, v[3]}), {B, Hk, group, S, v[3]}, float32);
    scores = {B, Hk, group, L, S};
  }
  uint64_t s = c.add("Matmul", "", {qf, kt}, scores, float32);
  s = c.add("Multiply", "",
            {s, c.scalar(static_cast<double>(state_get<float>(st, name, "scale")), float32)},
            scores, float32);
  const std::string mode = state_get<std::string>(st, name, "mask_mode");
  const float inf = std::numeric_limits<float>::infinity();
  if (mode == "causal") {
    // Query i sees keys j <= i + (S - L), as MLX aligns a causal mask.
    int64_t L = q[2], S = k[2];
    std::vector<float> mask(static_cast<size_t>(L * S));
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < S; ++j) mask[i * S + j] = j <= i + (S - L) ? 0.0f : -inf;
    uint64_t m = c.broadcast(c.constant({static_cast<int32_t>(L), static_cast<int32_t>(S)}, mask),
                             scores, float32);
    s = c.add("Add", "", {s, m}, scores, float32);
  } else if (mode == "array") {
    if (in.size() < 4) cannot(name, "with an array mask but no mask input");
    uint64_t m = in[3];
    if (group > 1) {
      Shape full{B, q[1], L, S};
      if (in_shapes[3] != full) m = c.broadcast(m, full, in_dtypes[3]);
      m = c.add("Reshape", Composite::ints(std::vector<int64_t>(scores.begin(), scores.end())), {m},
                scores, in_dtypes[3]);
    } else if (in_shapes[3] != scores) {
      m = c.broadcast(m, scores, in_dtypes[3]);
    }
    if (in_dtypes[3] == bool_) {
      uint64_t neg = c.broadcast(c.scalar(-inf, float32), scores, float32);
      s = c.add("Select", "", {m, s, neg}, scores, float32);
    } else {
      if (in_dtypes[3] != float32) {
        Out o;
        o.dtype(float32);
        m = c.add("AsType", o.s, {m}, scores, float32);
      }
      s = c.add("Add", "", {s, m}, scores, float32);
    }
  } else if (mode != "none") {
    cannot(name, "with mask mode '" + mode + "'");
  }
  Out precise;
  precise.u8(0);
  uint64_t p = c.add("Softmax", precise.s, {s}, scores, float32);
  uint64_t o;
  if (group > 1) {
    o = reshape(c.add("Matmul", "", {p, vf}, {B, Hk, group, L, v[3]}, float32), out);
  } else {
    o = c.add("Matmul", "", {p, vf}, out, float32);
  }
  if (dtype != float32) {
    Out d;
    d.dtype(dtype);
    c.add("AsType", d.s, {o}, out, dtype);
  }
  return c.nodes;
}

// fast::rope as MLX's ordinary primitives, in float32: the angles
// (position + offset) * scale * inv_freq, then each pair of the first `dims`
// features rotated (halves, or interleaved pairs when traditional); the
// backward pass (forward=False) rotates the other way. Scalar offsets only.
std::vector<MlxNode> rope_composite(const PrimitiveState& st, const std::vector<uint64_t>& in,
                                    const std::vector<Shape>& in_shapes,
                                    const std::vector<Dtype>& in_dtypes, Dtype dtype) {
  const char* name = "RoPE";
  const Shape& xs = in_shapes.at(0);
  int r = static_cast<int>(xs.size());
  int dims = state_get<int32_t>(st, name, "dims");
  bool traditional = state_get<bool>(st, name, "traditional");
  double base = state_get<double>(st, name, "base");
  double scale = state_get<double>(st, name, "scale");
  bool forward = state_get<bool>(st, name, "forward");
  if (r < 2 || dims < 2 || dims % 2 || dims > xs.back()) cannot(name, "of this shape");
  if (in.size() < 2 || !in_shapes[1].empty()) cannot(name, "with a per-batch offset");
  const int32_t L = xs[r - 2], D = xs.back(), half = dims / 2;
  Composite c;
  Out f32;
  f32.dtype(float32);
  uint64_t x = in_dtypes[0] == float32 ? in[0] : c.add("AsType", f32.s, {in[0]}, xs, float32);
  std::vector<float> positions(static_cast<size_t>(L));
  for (int32_t i = 0; i < L; ++i) positions[i] = static_cast<float>(i);
  uint64_t offset = c.add("AsType", f32.s, {in[1]}, {}, float32);
  uint64_t pos = c.add("Add", "", {c.constant({L, 1}, positions), offset}, {L, 1}, float32);
  uint64_t inv;
  if (in.size() > 2) {
    uint64_t div = c.add("Divide", "", {c.scalar(scale, float32), in[2]}, {half}, float32);
    inv = c.add("Reshape", Composite::ints({1, half}), {div}, {1, half}, float32);
  } else {
    std::vector<float> v(static_cast<size_t>(half));
    for (int32_t i = 0; i < half; ++i)
      v[i] = static_cast<float>(scale * std::pow(base, -static_cast<double>(i) / half));
    inv = c.constant({1, half}, v);
  }
  Shape lh{L, half};
  uint64_t theta = c.add(
      "Multiply", "", {c.broadcast(pos, lh, float32), c.broadcast(inv, lh, float32)}, lh, float32);
  Shape hs = xs;
  hs.back() = half;
  uint64_t cos = c.broadcast(c.add("Cos", "", {theta}, lh, float32), hs, float32);
  uint64_t sin = c.add("Sin", "", {theta}, lh, float32);
  if (!forward) sin = c.add("Negative", "", {sin}, lh, float32);
  sin = c.broadcast(sin, hs, float32);
  auto slice = [&](uint64_t v, const Shape& shape, int32_t lo, int32_t hi, int32_t step) {
    std::vector<int64_t> start(shape.size(), 0), stop(shape.begin(), shape.end()),
        strides(shape.size(), 1);
    start.back() = lo;
    stop.back() = hi;
    strides.back() = step;
    Shape out = shape;
    out.back() = (hi - lo + step - 1) / step;
    return c.add("Slice", Composite::ints(start) + Composite::ints(stop) + Composite::ints(strides),
                 {v}, out, float32);
  };
  // The two halves of each rotated pair: x[..., :half] and x[..., half:dims],
  // or the even and odd features when traditional.
  uint64_t x1 = traditional ? slice(x, xs, 0, dims, 2) : slice(x, xs, 0, half, 1);
  uint64_t x2 = traditional ? slice(x, xs, 1, dims, 2) : slice(x, xs, half, dims, 1);
  auto mul = [&](uint64_t a, uint64_t b) { return c.add("Multiply", "", {a, b}, hs, float32); };
  uint64_t o1 = c.add("Subtract", "", {mul(x1, cos), mul(x2, sin)}, hs, float32);
  uint64_t o2 = c.add("Add", "", {mul(x1, sin), mul(x2, cos)}, hs, float32);
  Shape ds = xs;
  ds.back() = dims;
  Out axis;
  uint64_t rotated;
  if (traditional) {
    Shape pair = hs;
    pair.push_back(1);
    std::vector<int64_t> pv(pair.begin(), pair.end());
    uint64_t e1 = c.add("Reshape", Composite::ints(pv), {o1}, pair, float32);
    uint64_t e2 = c.add("Reshape", Composite::ints(pv), {o2}, pair, float32);
    pair.back() = 2;
    axis.i32(r);
    uint64_t both = c.add("Concatenate", axis.s, {e1, e2}, pair, float32);
    rotated = c.add("Reshape", Composite::ints(std::vector<int64_t>(ds.begin(), ds.end())), {both},
                    ds, float32);
  } else {
    axis.i32(r - 1);
    rotated = c.add("Concatenate", axis.s, {o1, o2}, ds, float32);
  }
  if (dims < D) {
    Out last;
    last.i32(r - 1);
    rotated = c.add("Concatenate", last.s, {rotated, slice(x, xs, dims, D, 1)}, xs, float32);
  }
  if (dtype != float32) {
    Out d;
    d.dtype(dtype);
    c.add("AsType", d.s, {rotated}, xs, dtype);
  }
  return c.nodes;
}

std::vector<MlxNode> norm_composite(const std::string& name, const PrimitiveState& st,
                                    const std::vector<uint64_t>& in,
                                    const std::vector<Shape>& in_shapes,
                                    const std::vector<Dtype>& in_dtypes, const Shape& shape,
                                    Dtype dtype) {
  Composite c;
  auto as_f32 = [&](uint64_t v, Dtype d, const Shape& sh) {
    if (d == float32) return v;
    Out o;
    o.dtype(float32);
    return c.add("AsType", o.s, {v}, sh, float32);
  };
  if (shape.empty()) cannot(name, "of a 0-d input");
  float eps = state_get<float>(st, name, "eps");
  bool has_w = state_get<bool>(st, name, "has_weight");
  bool layer = name == "LayerNorm";
  bool has_b = layer && state_get<bool>(st, name, "has_bias");
  uint64_t x = as_f32(in[0], in_dtypes[0], shape);
  Shape kept = shape;
  kept.back() = 1;
  uint64_t centered = x, var;
  if (layer) {
    uint64_t mean = c.broadcast(c.mean_last(x, shape), shape, float32);
    centered = c.add("Subtract", "", {x, mean}, shape, float32);
  }
  var = c.mean_last(c.add("Square", "", {centered}, shape, float32), shape);
  Out rs;
  rs.u8(1);
  uint64_t r = c.add("Sqrt", rs.s, {c.add("Add", "", {var, c.scalar(eps, float32)}, kept, float32)},
                     kept, float32);
  uint64_t y = c.add("Multiply", "", {centered, c.broadcast(r, shape, float32)}, shape, float32);
  size_t next_in = 1;
  auto param = [&]() {
    size_t k = next_in++;
    uint64_t p = as_f32(in.at(k), in_dtypes.at(k), in_shapes.at(k));
    return in_shapes.at(k) == shape ? p : c.broadcast(p, shape, float32);
  };
  if (has_w) y = c.add("Multiply", "", {y, param()}, shape, float32);
  if (has_b) y = c.add("Add", "", {y, param()}, shape, float32);
  if (dtype != float32) {
    Out o;
    o.dtype(dtype);
    c.add("AsType", o.s, {y}, shape, dtype);
  }
  return c.nodes;
}

MlxNode follow(const char* name, std::string state, const Shape& shape, Dtype dtype) {
  return MlxNode{name, std::move(state), {}, shape, dtype, {}, {}, false, {}};
}

// The MLX entries computing Loom node `n` on the MLX values `in`, each
// reading the one before it; the last one's output is the node's output.
std::vector<MlxNode> translate(const GraphNode& n, const std::vector<uint64_t>& in,
                               const std::vector<Shape>& in_shapes,
                               const std::vector<Dtype>& in_dtypes) {
  const std::string name = n.primitive->name();
  const PrimitiveState st = n.primitive->state();
  if (name == "Split") {
    Out o;
    o.ints(state_get<std::vector<int64_t>>(st, name, "indices"));
    o.i32(state_get<int32_t>(st, name, "axis"));
    return {MlxNode{name, o.s, in, {}, float32, n.shapes, n.dtypes, false, {}}};
  }
  if (n.shapes.size() != 1) cannot(name, "nodes of several outputs are not mapped yet");
  MlxNode m{name, "", in, n.shapes[0], n.dtypes[0], {}, {}, false, {}};
  Out o;
  static const char* same[] = {
      "Abs",       "Add",       "ArcCos",      "ArcCosh",      "ArcSin",       "ArcSinh",
      "ArcTan",    "ArcTan2",   "ArcTanh",     "Ceil",         "Conjugate",    "Copy",
      "Cos",       "Cosh",      "Divide",      "Erf",          "ErfInv",       "Exp",
      "Expm1",     "Floor",     "FloorDivide", "Greater",      "GreaterEqual", "Imag",
      "Less",      "LessEqual", "Log1p",       "LogAddExp",    "LogicalAnd",   "LogicalNot",
      "LogicalOr", "Maximum",   "Minimum",     "Multiply",     "Negative",     "NotEqual",
      "Power",     "Real",      "Remainder",   "Select",       "Sigmoid",      "Sign",
      "Sin",       "Sinh",      "Square",      "StopGradient", "Subtract",     "Tan",
      "Tanh"};
  if (name == "Matmul") {
    // MLX's Matmul takes operands of the output's batch shape (its op
    // broadcasts them first); Loom's broadcasts inside.
    const Shape& out = n.shapes[0];
    if (in.size() != 2 || in_shapes[0].size() < 2 || in_shapes[1].size() < 2 || out.size() < 2)
      cannot(name, "of operands of fewer than 2 dimensions");
    Composite c;
    std::vector<uint64_t> ops;
    for (size_t k = 0; k < 2; ++k) {
      Shape want(out.begin(), out.end() - 2);
      want.insert(want.end(), in_shapes[k].end() - 2, in_shapes[k].end());
      ops.push_back(in_shapes[k] == want ? in[k] : c.broadcast(in[k], want, in_dtypes[k]));
    }
    c.add("Matmul", "", ops, out, n.dtypes[0]);
    return c.nodes;
  }
  for (const char* s : same) {
    if (name == s) {
      if (!st.empty()) cannot(name, "its state has no MLX counterpart");
      return {m};
    }
  }
  auto ints = [&](const char* field) { return state_get<std::vector<int64_t>>(st, name, field); };
  if (name == "Sqrt" || name == "Rsqrt") {
    m.name = "Sqrt";
    o.u8(name == "Rsqrt");
  } else if (name == "Log" || name == "Log2" || name == "Log10") {
    // MLX's Log::Base: two, ten, e.
    m.name = "Log";
    o.i32(name == "Log2" ? 0 : name == "Log10" ? 1 : 2);
  } else if (name == "Equal") {
    o.u8(0); // equal_nan: Loom's Equal never treats NaNs as equal
  } else if (name == "BitwiseAnd" || name == "BitwiseOr" || name == "BitwiseXor" ||
             name == "LeftShift" || name == "RightShift") {
    static const std::unordered_map<std::string, int> code{{"BitwiseAnd", 0},
                                                           {"BitwiseOr", 1},
                                                           {"BitwiseXor", 2},
                                                           {"LeftShift", 3},
                                                           {"RightShift", 4}};
    m.name = "BitwiseBinary";
    o.i32(code.at(name));
  } else if (name == "AsType") {
    o.dtype(state_get<Dtype>(st, name, "dtype"));
  } else if (name == "Broadcast" || name == "Reshape") {
    o.ints(ints("shape"));
  } else if (name == "Transpose" || name == "ExpandDims" || name == "Squeeze") {
    o.ints(ints("axes"));
  } else if (name == "Softmax") {
    o.u8(state_get<bool>(st, name, "precise"));
  } else if (name == "Concatenate") {
    o.i32(state_get<int32_t>(st, name, "axis"));
  } else if (name == "Slice") {
    o.ints(ints("start"));
    o.ints(ints("stop"));
    o.ints(ints("strides"));
  } else if (name == "And" || name == "Or" || name == "Sum" || name == "Prod" || name == "Min" ||
             name == "Max") {
    // MLX's Reduce keeps the reduced axes (Reduce::ReduceType: And, Or, Sum,
    // Prod, Min, Max); a Squeeze drops them.
    static const std::unordered_map<std::string, int> code{{"And", 0},  {"Or", 1},  {"Sum", 2},
                                                           {"Prod", 3}, {"Min", 4}, {"Max", 5}};
    std::vector<int64_t> axes = ints("axes");
    bool keepdims = state_get<bool>(st, name, "keepdims");
    if (in.size() != 1) cannot(name, "it has more than one input");
    m.name = "Reduce";
    o.i32(code.at(name));
    o.ints(axes);
    m.state = o.s;
    if (keepdims) return {m};
    Shape kept = n.shapes[0];
    for (int64_t ax : axes) kept.insert(kept.begin() + ax, 1);
    m.shape = kept;
    Out sq;
    sq.ints(axes);
    return {m, follow("Squeeze", sq.s, n.shapes[0], n.dtypes[0])};
  } else if (name == "ArgMax" || name == "ArgMin") {
    // MLX's ArgReduce (ReduceType: ArgMin, ArgMax) keeps the axis; Loom's
    // all-axes form (axis -1) runs on the flattened array.
    int axis = state_get<int32_t>(st, name, "axis");
    bool keepdims = state_get<bool>(st, name, "keepdims");
    m.name = "ArgReduce";
    o.i32(name == "ArgMax" ? 1 : 0);
    if (axis == -1) {
      int64_t size = 1;
      for (auto d : in_shapes.at(0)) size *= d;
      Out flat;
      flat.ints({size});
      MlxNode reshape{"Reshape", flat.s, in, {static_cast<int32_t>(size)}, n.dtypes[0], {},
                      {},        false,  {}};
      reshape.dtype = in_dtypes.at(0);
      o.i32(0);
      Out back;
      std::vector<int64_t> final_shape(n.shapes[0].begin(), n.shapes[0].end());
      back.ints(final_shape);
      return {reshape, follow("ArgReduce", o.s, {1}, n.dtypes[0]),
              follow("Reshape", back.s, n.shapes[0], n.dtypes[0])};
    }
    o.i32(axis);
    m.state = o.s;
    if (keepdims) return {m};
    Shape kept = n.shapes[0];
    kept.insert(kept.begin() + axis, 1);
    m.shape = kept;
    Out sq;
    sq.ints({axis});
    return {m, follow("Squeeze", sq.s, n.shapes[0], n.dtypes[0])};
  } else if (name == "Gather") {
    // MLX's Gather takes a slice of `slice_sizes` at each index (1 on the
    // indexed axes, whole elsewhere): output = index shape + slice sizes,
    // which Loom's output is with the indexed axes' 1s dropped.
    std::vector<int64_t> axes = ints("axes");
    const Shape& a = in_shapes.at(0);
    for (size_t k = 2; k < in_shapes.size(); ++k) {
      if (in_shapes[k] != in_shapes[1]) cannot(name, "its indices have different shapes");
    }
    std::vector<int64_t> sizes(a.begin(), a.end());
    for (int64_t ax : axes) sizes.at(static_cast<size_t>(ax)) = 1;
    o.ints(axes);
    o.ints(sizes);
    m.state = o.s;
    Shape full = in_shapes.size() > 1 ? in_shapes[1] : Shape{};
    full.insert(full.end(), sizes.begin(), sizes.end());
    m.shape = full;
    Out back;
    back.ints(std::vector<int64_t>(n.shapes[0].begin(), n.shapes[0].end()));
    return {m, follow("Reshape", back.s, n.shapes[0], n.dtypes[0])};
  } else if (name == "CumSum" || name == "CumProd" || name == "CumMax" || name == "CumMin" ||
             name == "CumLogaddexp") {
    // MLX's Scan::ReduceType: Max, Min, Sum, Prod, LogAddExp.
    static const std::unordered_map<std::string, int> code{
        {"CumMax", 0}, {"CumMin", 1}, {"CumSum", 2}, {"CumProd", 3}, {"CumLogaddexp", 4}};
    m.name = "Scan";
    o.i32(code.at(name));
    o.i32(state_get<int32_t>(st, name, "axis"));
    o.u8(state_get<bool>(st, name, "reverse"));
    o.u8(state_get<bool>(st, name, "inclusive"));
  } else if (name == "Sort" || name == "ArgSort") {
    o.i32(state_get<int32_t>(st, name, "axis"));
  } else if (name == "Partition" || name == "ArgPartition") {
    o.i32(state_get<int32_t>(st, name, "kth"));
    o.i32(state_get<int32_t>(st, name, "axis"));
  } else if (name == "LogSumExp") {
    // MLX's LogSumExp keeps the (last) reduced axis.
    if (!st.empty()) cannot(name, "its state has no MLX counterpart");
    Shape kept = n.shapes[0];
    kept.push_back(1);
    m.shape = kept;
    Out sq;
    sq.ints({static_cast<int64_t>(kept.size()) - 1});
    return {m, follow("Squeeze", sq.s, n.shapes[0], n.dtypes[0])};
  } else if (name == "QuantizedMatmul") {
    // MLX's QuantizationMode: affine, mxfp4, mxfp8, nvfp4.
    static const std::unordered_map<std::string, int> modes{
        {"affine", 0}, {"mxfp4", 1}, {"mxfp8", 2}, {"nvfp4", 3}};
    std::string mode = state_get<std::string>(st, name, "mode");
    if (!modes.count(mode)) cannot(name, "in mode " + mode);
    if (in.size() != (mode == "affine" ? 4u : 3u))
      cannot(name, "with a global scale (not mapped yet)");
    o.i32(state_get<int32_t>(st, name, "group_size"));
    o.i32(state_get<int32_t>(st, name, "bits"));
    o.i32(modes.at(mode));
    o.u8(state_get<bool>(st, name, "transpose"));
  } else if (name == "SliceUpdate") {
    o.i32(4); // MLX's SliceUpdate::ReduceType None: the region is replaced
    o.ints(ints("start"));
    o.ints(ints("stop"));
    o.ints(ints("strides"));
  } else if (name == "Scatter" || name == "ScatterAdd" || name == "ScatterMax" ||
             name == "ScatterMin" || name == "ScatterProd") {
    // MLX's updates have the index shape then one dimension per axis of the
    // array (1 on the indexed ones); Loom's leave the indexed ones out.
    // Scatter::ReduceType: Max, Min, Sum, Prod, None.
    static const std::unordered_map<std::string, int> code{{"ScatterMax", 0},
                                                           {"ScatterMin", 1},
                                                           {"ScatterAdd", 2},
                                                           {"ScatterProd", 3},
                                                           {"Scatter", 4}};
    std::vector<int64_t> axes = ints("axes");
    const Shape& a = in_shapes.at(0);
    size_t n_idx = in.size() - 2;
    if (n_idx != axes.size()) cannot(name, "with a different count of indices and axes");
    for (size_t k = 2; k + 1 < in.size(); ++k)
      if (in_shapes[k] != in_shapes[1]) cannot(name, "its indices have different shapes");
    Shape idx = n_idx ? in_shapes[1] : Shape{};
    Shape upd = idx;
    for (int d = 0; d < static_cast<int>(a.size()); ++d) {
      bool indexed = false;
      for (int64_t ax : axes) indexed = indexed || ax == d;
      upd.push_back(indexed ? 1 : a[d]);
    }
    Composite c;
    std::vector<uint64_t> ins(in.begin(), in.end());
    if (in_shapes.back() != upd) {
      ins.back() = c.add("Reshape", Composite::ints(std::vector<int64_t>(upd.begin(), upd.end())),
                         {in.back()}, upd, in_dtypes.back());
    }
    o.i32(code.at(name));
    o.ints(axes);
    c.add("Scatter", o.s, ins, n.shapes[0], n.dtypes[0]);
    return c.nodes;
  } else if (name == "RoPE") {
    return rope_composite(st, in, in_shapes, in_dtypes, n.dtypes[0]);
  } else if (name == "ScaledDotProductAttention") {
    return sdpa_composite(st, in, in_shapes, in_dtypes, n.shapes[0], n.dtypes[0]);
  } else if (name == "RMSNorm" || name == "LayerNorm") {
    return norm_composite(name, st, in, in_shapes, in_dtypes, n.shapes[0], n.dtypes[0]);
  } else if (name == "Convolution") {
    for (const char* f :
         {"stride", "padding_lo", "padding_hi", "kernel_dilation", "input_dilation"})
      o.ints(ints(f));
    o.i32(state_get<int32_t>(st, name, "groups"));
    o.u8(state_get<bool>(st, name, "flip"));
  } else if (name == "Flatten") {
    o.i32(state_get<int32_t>(st, name, "start_axis"));
    o.i32(state_get<int32_t>(st, name, "end_axis"));
  } else if (name == "IsNan") {
    // MLX's isnan is x != x.
    m.name = "NotEqual";
    m.inputs = {in[0], in[0]};
  } else {
    cannot(name, "the .mlxfn writer does not map it (see docs/export.md for the list)");
  }
  m.state = o.s;
  return {m};
}

void write_trace(Out& o, const ExportedTrace& t) {
  if (t.shapeless) {
    throw std::invalid_argument(
        "[export_function] Cannot write a shapeless trace in MLX's .mlxfn format yet.");
  }
  const Graph& g = t.graph;
  uint64_t next = 1;
  std::vector<uint64_t> input_ids, constant_ids(g.constants.size());
  for (int i = 0; i < g.num_inputs; ++i) input_ids.push_back(next++);
  for (auto& id : constant_ids) id = next++;
  std::vector<std::vector<uint64_t>> node_ids(g.nodes.size());
  auto id_of = [&](const ValueRef& r) {
    switch (r.kind) {
      case ValueRef::input:
        return input_ids[r.id];
      case ValueRef::constant:
        return constant_ids[r.id];
      default:
        return node_ids[r.id].at(r.index);
    }
  };
  Out tape;
  uint64_t entries = 0;
  for (int i = 0; i < g.num_inputs; ++i) {
    tape.u64(input_ids[i]);
    tape.u8(0);
    tape.u8(0);
    ++entries;
  }
  for (size_t c = 0; c < g.constants.size(); ++c) {
    const array& a = g.constants[c];
    detail::evaluate(a);
    tape.u64(constant_ids[c]);
    tape.u8(0);
    tape.u8(1);
    tape.shape(a.shape());
    tape.dtype(a.dtype());
    BufferWriter data;
    detail::write_elements(data, a);
    tape.s += data.bytes();
    ++entries;
  }
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const GraphNode& n = g.nodes[k];
    std::vector<uint64_t> in;
    std::vector<Shape> in_shapes;
    std::vector<Dtype> in_dtypes;
    for (const ValueRef& r : n.inputs) {
      in.push_back(id_of(r));
      switch (r.kind) {
        case ValueRef::input:
          in_shapes.push_back(t.shapes[r.id]);
          in_dtypes.push_back(t.dtypes[r.id]);
          break;
        case ValueRef::constant:
          in_shapes.push_back(g.constants[r.id].shape());
          in_dtypes.push_back(g.constants[r.id].dtype());
          break;
        default:
          in_shapes.push_back(g.nodes[r.id].shapes[r.index]);
          in_dtypes.push_back(g.nodes[r.id].dtypes[r.index]);
      }
    }
    if (std::string(n.primitive->name()) == "Marker" && in.size() == 1) {
      // The identity a transform puts on its inputs (vjp stops there): MLX
      // has none, and its input is the same value.
      node_ids[k] = {in[0]};
      continue;
    }
    std::vector<MlxNode> ms = translate(n, in, in_shapes, in_dtypes);
    std::vector<uint64_t> local(ms.size());
    for (size_t j = 0; j < ms.size(); ++j) {
      MlxNode& m = ms[j];
      if (m.constant) {
        local[j] = next;
        tape.u64(next++);
        tape.u8(0);
        tape.u8(1);
        tape.shape(m.shape);
        tape.dtype(m.dtype);
        tape.s += m.data;
        ++entries;
        continue;
      }
      if (j > 0 && m.inputs.empty()) m.inputs = {local[j - 1]};
      for (uint64_t& id : m.inputs)
        if (id & kLocal) id = local.at(id & ~kLocal);
      std::vector<uint64_t> outs;
      for (size_t x = 0; x < std::max<size_t>(1, m.shapes.size()); ++x) outs.push_back(next++);
      tape.u64(outs[0]);
      tape.u8(1);
      tape.ids(m.inputs);
      tape.s.append(12, '\0'); // the stream: index 0 of the CPU
      tape.str(m.name);
      tape.s += m.state;
      if (m.shapes.empty()) {
        tape.u64(0); // one output
        tape.shape(m.shape);
        tape.dtype(m.dtype);
      } else {
        tape.u64(1); // siblings: every output's id, shape and dtype
        tape.ids(outs);
        tape.u64(m.shapes.size());
        for (const Shape& sh : m.shapes) tape.shape(sh);
        tape.u64(m.dtypes.size());
        for (Dtype d : m.dtypes) tape.dtype(d);
      }
      ++entries;
      node_ids[k] = outs;
      local[j] = outs[0];
    }
  }
  o.u64(t.keywords.size());
  for (const auto& k : t.keywords) o.str(k);
  o.ids(input_ids);
  o.u64(t.shapes.size());
  for (size_t i = 0; i < t.shapes.size(); ++i) {
    o.shape(t.shapes[i]);
    o.dtype(t.dtypes[i]);
  }
  std::vector<uint64_t> outs;
  for (const ValueRef& r : g.outputs) outs.push_back(id_of(r));
  o.ids(outs);
  o.u64(entries);
  o.s += tape.s;
}

} // namespace

void write_mlxfn(Writer& w, const ExportedFunction& f) {
  Out o;
  o.str("0.32.4");
  o.i32(static_cast<int32_t>(f.traces.size()));
  bool shapeless = !f.traces.empty() && f.traces[0].shapeless;
  o.u8(shapeless);
  o.str(f.metadata);
  for (const ExportedTrace& t : f.traces) write_trace(o, t);
  w.write(o.s.data(), o.s.size());
}

} // namespace loom::io
