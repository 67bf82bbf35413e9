// Loom's fast primitives (rms_norm, layer_norm, rope, attention) as MLX's
// ordinary primitives for the .mlxfn writer, in float32: what MLX's CPU build
// writes for them, so that the file runs on every MLX build.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "loom/io/mlxfn_write.h"

namespace loom::io::mlxw {

// scaled_dot_product_attention as MLX's ordinary primitives (MLX's CPU
// build decomposes it the same way): softmax(q k^T * scale + mask) v, in
// float32; grouped queries share their key/value head.
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
  s = c.add("Multiply", "", {s, c.scalar(static_cast<double>(state_get<float>(st, name, "scale")))},
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
      uint64_t neg = c.broadcast(c.scalar(-inf), scores, float32);
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
    uint64_t div = c.add("Divide", "", {c.scalar(scale), in[2]}, {half}, float32);
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

// rms_norm / layer_norm as MLX's ordinary primitives, computed in float32
// as Loom's kernels do (MLX's CPU build decomposes them the same way).
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
  uint64_t r =
      c.add("Sqrt", rs.s, {c.add("Add", "", {var, c.scalar(eps)}, kept, float32)}, kept, float32);
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

} // namespace loom::io::mlxw
