// Writing MLX's .mlxfn function files (the layout mlxfn.cpp reads), so that a
// function exported by Loom runs on MLX 0.32.4 (on a Mac, say). Each Loom
// node becomes the MLX primitive(s) computing it, with the state laid out as
// MLX's importer reads it; a node MLX cannot represent (or that this writer
// does not map yet) raises an error naming it, and nothing is written.
#include "loom/io/mlxfn_write.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/io/export.h"
#include "loom/primitives/fast.h"

namespace loom::io::mlxw {

int mlx_dtype_code(Dtype d) {
  static const Dtype by_code[] = {bool_, uint8, uint16,  uint32,  uint64,  int8,     int16,
                                  int32, int64, float16, float32, float64, bfloat16, complex64};
  for (int k = 0; k < 14; ++k)
    if (by_code[k] == d) return k;
  throw std::invalid_argument(std::string("[export_mlxfn] MLX has no dtype ") + dtype_name(d) +
                              ".");
}

[[noreturn]] void cannot(const std::string& primitive, const std::string& why) {
  throw std::invalid_argument("[export_mlxfn] Cannot write the primitive " + primitive +
                              " in MLX's .mlxfn format: " + why + ".");
}

} // namespace loom::io::mlxw

namespace loom::io {

namespace {

using compile_detail::Graph;
using compile_detail::GraphNode;
using compile_detail::ValueRef;
using namespace mlxw;

std::vector<MlxNode> composite_nodes(const FastPrimitive& p, const std::vector<uint64_t>& in,
                                     const std::vector<Shape>& in_shapes,
                                     const std::vector<Dtype>& in_dtypes);

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
  } else if (auto* fast = dynamic_cast<const FastPrimitive*>(n.primitive.get())) {
    // A fused node MLX has no counterpart of (the convolution gradients):
    // its composite, node by node.
    return composite_nodes(*fast, in, in_shapes, in_dtypes);
  } else {
    cannot(name, "the .mlxfn writer does not map it (see docs/export.md for the list)");
  }
  m.state = o.s;
  return {m};
}

// `p`'s composite built on placeholders of the node's inputs, as a graph
// (compile's walk, inputs first), its nodes translated one by one and their
// entries renumbered into one composite.
std::vector<MlxNode> composite_nodes(const FastPrimitive& p, const std::vector<uint64_t>& in,
                                     const std::vector<Shape>& in_shapes,
                                     const std::vector<Dtype>& in_dtypes) {
  std::vector<array> placeholders;
  for (size_t k = 0; k < in.size(); ++k) {
    placeholders.push_back(array::empty(in_shapes[k], in_dtypes[k]));
  }
  const std::vector<array> outs = p.composite(placeholders);
  if (outs.size() != 1) cannot(p.name(), "composites of several outputs are not mapped yet");
  const Graph graph = compile_detail::graph_from_trace(placeholders, outs);
  if (!graph.constants.empty()) cannot(p.name(), "its composite holds a constant");
  const ValueRef result = graph.outputs[0];
  if (result.kind != ValueRef::node) cannot(p.name(), "its composite returns an input");
  // The entries' last one is the node's output (translate's contract).
  if (result.id + 1 != static_cast<int32_t>(graph.nodes.size()))
    cannot(p.name(), "its composite's result is not its last node");
  std::vector<MlxNode> entries;
  std::vector<uint64_t> node_entry(graph.nodes.size()); // node -> its last entry
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const GraphNode& node = graph.nodes[n];
    if (node.shapes.size() > 1) cannot(p.name(), "its composite has a node of several outputs");
    // translate sees its arguments as tokens (kArg | k): its result then
    // tells them apart from its own kLocal references, which move past the
    // entries already here, while a token becomes the argument's id.
    constexpr uint64_t kArg = uint64_t(1) << 62;
    std::vector<uint64_t> args, tokens;
    std::vector<Shape> shapes;
    std::vector<Dtype> dtypes;
    for (const ValueRef& r : node.inputs) {
      const bool input = r.kind == ValueRef::input;
      tokens.push_back(kArg | args.size());
      args.push_back(input ? in[r.id] : node_entry[r.id]);
      shapes.push_back(input ? in_shapes[r.id] : graph.nodes[r.id].shapes[0]);
      dtypes.push_back(input ? in_dtypes[r.id] : graph.nodes[r.id].dtypes[0]);
    }
    std::vector<MlxNode> sub = translate(node, tokens, shapes, dtypes);
    // An entry without inputs reads the entry before it (write_trace): a
    // nullary node cannot follow others.
    if (!entries.empty() && !sub.empty() && sub[0].inputs.empty() && !sub[0].constant)
      cannot(p.name(), "its composite has a node without inputs");
    const uint64_t base = entries.size();
    for (MlxNode& e : sub) {
      for (uint64_t& r : e.inputs) {
        if ((r & kLocal) != 0) {
          r = kLocal | ((r & ~kLocal) + base);
        } else if ((r & kArg) != 0) {
          r = args.at(r & ~kArg);
        }
      }
      entries.push_back(std::move(e));
    }
    node_entry[n] = kLocal | (entries.size() - 1);
  }
  return entries;
}

void write_trace(Out& o, const ExportedTrace& t) {
  if (t.shapeless) {
    throw std::invalid_argument(
        "[export_mlxfn] Cannot write a shapeless trace in MLX's .mlxfn format yet.");
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
