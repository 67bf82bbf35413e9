// Pieces shared by the .mlxfn writer (mlxfn_write.cpp) and its float32
// decompositions of Loom's fast primitives (mlxfn_write_fast.cpp): MLX's
// little-endian layout and the tape entries a Loom node becomes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/array.h"
#include "loom/io/detail.h"
#include "loom/primitives/state.h"

namespace loom::io::mlxw {

// MLX's type code of `d` (raises for a dtype MLX lacks).
int mlx_dtype_code(Dtype d);

// Little-endian pieces of MLX's layout.
struct Out {
  std::string s;
  void u8(uint8_t v) { s.push_back(static_cast<char>(v)); }
  void i32(int32_t v) { detail::put32(s, static_cast<uint32_t>(v)); }
  void u64(uint64_t v) { detail::put64(s, v); }
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

// Raises "[export_mlxfn] Cannot write the primitive <primitive> ...".
[[noreturn]] void cannot(const std::string& primitive, const std::string& why);

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
  uint64_t constant(const Shape& shape, const std::vector<float>& values) {
    MlxNode c{"", "", {}, shape, float32, {}, {}, true, {}};
    c.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
    nodes.push_back(std::move(c));
    return kLocal | (nodes.size() - 1);
  }
  // A float32 scalar constant (an eps, a 1 / n).
  uint64_t scalar(double v) { return constant({}, {static_cast<float>(v)}); }
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
    return add("Multiply", "", {sum, scalar(1.0 / shape.back())}, kept, float32);
  }
};

// An entry reading the entry before it in a composite.
inline MlxNode follow(const char* name, std::string state, const Shape& shape, Dtype dtype) {
  return MlxNode{name, std::move(state), {}, shape, dtype, {}, {}, false, {}};
}

// scaled_dot_product_attention as MLX's ordinary primitives (MLX's CPU
// build decomposes it the same way): softmax(q k^T * scale + mask) v, in
// float32; grouped queries share their key/value head.
std::vector<MlxNode> sdpa_composite(const PrimitiveState& st, const std::vector<uint64_t>& in,
                                    const std::vector<Shape>& in_shapes,
                                    const std::vector<Dtype>& in_dtypes, const Shape& out,
                                    Dtype dtype);
// fast::rope: see mlxfn_write_fast.cpp.
std::vector<MlxNode> rope_composite(const PrimitiveState& st, const std::vector<uint64_t>& in,
                                    const std::vector<Shape>& in_shapes,
                                    const std::vector<Dtype>& in_dtypes, Dtype dtype);
// rms_norm / layer_norm as MLX's ordinary primitives, computed in float32
// as Loom's kernels do (MLX's CPU build decomposes them the same way).
std::vector<MlxNode> norm_composite(const std::string& name, const PrimitiveState& st,
                                    const std::vector<uint64_t>& in,
                                    const std::vector<Shape>& in_shapes,
                                    const std::vector<Dtype>& in_dtypes, const Shape& shape,
                                    Dtype dtype);

} // namespace loom::io::mlxw
