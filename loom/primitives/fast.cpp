#include "loom/primitives/fast.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <typeinfo>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gather.h"
#include "loom/ops/linalg.h"
#include "loom/ops/reduce.h"
#include "loom/ops/shape.h"
#include "loom/ops/slice.h"
#include "loom/ops/softmax.h"
#include "loom/transforms/transforms.h"

namespace loom {

namespace {

// Half precision computes in float32, as the kernels do.
array upcast(const array& x, Stream s) {
  return x.dtype() == float16 || x.dtype() == bfloat16 ? astype(x, float32, s) : x;
}

std::vector<int> leading_axes(const array& x) {
  std::vector<int> axes;
  for (int i = 0; i + 1 < x.ndim(); ++i) axes.push_back(i);
  return axes;
}

// Sums a gradient of x's shape down to a 1-D parameter of the last axis.
array reduce_to_last(const array& g, Dtype dtype, Stream s) {
  return astype(sum(g, leading_axes(g), false, s), dtype, s);
}

} // namespace

// FastPrimitive: transforms through the composite ----------------------------------

std::vector<array> FastPrimitive::vjp(const std::vector<array>& primals,
                                      const std::vector<array>& cotangents,
                                      const std::vector<int>& argnums, const std::vector<array>&) {
  auto fn = [this](const std::vector<array>& in) { return composite(in); };
  auto grads = loom::vjp(fn, primals, cotangents).second;
  std::vector<array> out;
  for (int i : argnums) out.push_back(grads[i]);
  return out;
}

std::vector<array> FastPrimitive::jvp(const std::vector<array>& primals,
                                      const std::vector<array>& tangents,
                                      const std::vector<int>& argnums) {
  std::vector<array> full;
  for (auto& p : primals) full.push_back(zeros_like(p, stream()));
  for (size_t i = 0; i < argnums.size(); ++i) full[argnums[i]] = tangents[i];
  auto fn = [this](const std::vector<array>& in) { return composite(in); };
  return loom::jvp(fn, primals, full).second;
}

std::pair<std::vector<array>, std::vector<int>> FastPrimitive::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto fn = [this](const std::vector<array>& in) { return composite(in); };
  auto outs = vmap_apply(fn, inputs, axes,
                         [](const std::vector<array>& o) { return std::vector<int>(o.size(), 0); });
  return {outs, std::vector<int>(outs.size(), 0)};
}

bool FastPrimitive::is_equivalent(const Primitive& other) const {
  return typeid(*this) == typeid(other) && state() == other.state();
}

// RMSNorm ----------------------------------------------------------------------------

std::vector<Shape> RMSNorm::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> RMSNorm::composite(const std::vector<array>& inputs) const {
  Stream s = stream();
  const array& x = inputs[0];
  array xf = upcast(x, s);
  array r = rsqrt(add(mean(square(xf, s), -1, true, s), array(eps_, xf.dtype()), s), s);
  array y = multiply(xf, r, s);
  if (has_weight_) y = multiply(y, upcast(inputs[1], s), s);
  return {astype(y, x.dtype(), s)};
}

std::vector<array> RMSNorm::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums, const std::vector<array>&) {
  Stream s = stream();
  const array& x = primals[0];
  array xf = upcast(x, s);
  array gf = upcast(cotangents[0], s);
  array r = rsqrt(add(mean(square(xf, s), -1, true, s), array(eps_, xf.dtype()), s), s);
  array gw = has_weight_ ? multiply(gf, upcast(primals[1], s), s) : gf;
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      // d/dx of x r: r g - x r^3 mean(g x).
      array m = mean(multiply(gw, xf, s), -1, true, s);
      array dx = subtract(multiply(r, gw, s),
                          multiply(xf, multiply(power(r, array(3.0f, r.dtype()), s), m, s), s), s);
      out.push_back(astype(dx, x.dtype(), s));
    } else {
      out.push_back(reduce_to_last(multiply(gf, multiply(xf, r, s), s), primals[1].dtype(), s));
    }
  }
  return out;
}

std::pair<std::vector<array>, std::vector<int>> RMSNorm::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  if (has_weight_ && axes[1] >= 0) return FastPrimitive::vmap(inputs, axes);
  std::vector<array> in = inputs;
  in[0] = moveaxis(inputs[0], axes[0], 0, stream());
  auto out = array(in[0].shape(), in[0].dtype(),
                   std::make_shared<RMSNorm>(stream(), eps_, has_weight_), in);
  return {{out}, {0}};
}

LOOM_REGISTER_PRIMITIVE(RMSNorm, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<RMSNorm>(s, state_get<float>(st, "RMSNorm", "eps"),
                                   state_get<bool>(st, "RMSNorm", "has_weight"));
});

// LayerNorm --------------------------------------------------------------------------

std::vector<Shape> LayerNorm::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> LayerNorm::composite(const std::vector<array>& inputs) const {
  Stream s = stream();
  const array& x = inputs[0];
  array xf = upcast(x, s);
  array xc = subtract(xf, mean(xf, -1, true, s), s);
  array r = rsqrt(add(mean(square(xc, s), -1, true, s), array(eps_, xf.dtype()), s), s);
  array y = multiply(xc, r, s);
  size_t next = 1;
  if (has_weight_) y = multiply(y, upcast(inputs[next++], s), s);
  if (has_bias_) y = add(y, upcast(inputs[next++], s), s);
  return {astype(y, x.dtype(), s)};
}

std::vector<array> LayerNorm::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>& argnums, const std::vector<array>&) {
  Stream s = stream();
  const array& x = primals[0];
  array xf = upcast(x, s);
  array gf = upcast(cotangents[0], s);
  array xc = subtract(xf, mean(xf, -1, true, s), s);
  array r = rsqrt(add(mean(square(xc, s), -1, true, s), array(eps_, xf.dtype()), s), s);
  array xh = multiply(xc, r, s);
  array gh = has_weight_ ? multiply(gf, upcast(primals[1], s), s) : gf;
  const int bias_index = has_weight_ ? 2 : 1;
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      // r (g - mean(g) - x^ mean(g x^)), g the gradient of x^.
      array dx = multiply(r,
                          subtract(subtract(gh, mean(gh, -1, true, s), s),
                                   multiply(xh, mean(multiply(gh, xh, s), -1, true, s), s), s),
                          s);
      out.push_back(astype(dx, x.dtype(), s));
    } else if (has_weight_ && i == 1) {
      out.push_back(reduce_to_last(multiply(gf, xh, s), primals[1].dtype(), s));
    } else if (has_bias_ && i == bias_index) {
      out.push_back(reduce_to_last(gf, primals[i].dtype(), s));
    }
  }
  return out;
}

std::pair<std::vector<array>, std::vector<int>> LayerNorm::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  for (size_t i = 1; i < axes.size(); ++i) {
    if (axes[i] >= 0) return FastPrimitive::vmap(inputs, axes);
  }
  std::vector<array> in = inputs;
  in[0] = moveaxis(inputs[0], axes[0], 0, stream());
  auto out = array(in[0].shape(), in[0].dtype(),
                   std::make_shared<LayerNorm>(stream(), eps_, has_weight_, has_bias_), in);
  return {{out}, {0}};
}

LOOM_REGISTER_PRIMITIVE(LayerNorm, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<LayerNorm>(s, state_get<float>(st, "LayerNorm", "eps"),
                                     state_get<bool>(st, "LayerNorm", "has_weight"),
                                     state_get<bool>(st, "LayerNorm", "has_bias"));
});

// RoPE -------------------------------------------------------------------------------

std::vector<Shape> RoPE::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> RoPE::composite(const std::vector<array>& inputs) const {
  Stream s = stream();
  const array& x = inputs[0];
  const array& offset = inputs[1];
  const int T = x.shape(-2);
  const int half = dims_ / 2;
  array inv_freq = base_ > 0 ? exp(multiply(arange(0.0, half, 1.0, float32, s),
                                            array(static_cast<float>(-std::log(base_) / half)), s),
                                   s)
                             : reciprocal(astype(inputs[2], float32, s), s);
  array pos = astype(arange(0, T, 1, s), float32, s);
  array off = astype(offset, float32, s);
  // Positions: (T,) for one offset, (B, T) for one per batch entry.
  const bool per_entry = offset.size() != 1;
  pos = per_entry ? add(expand_dims(off, -1, s), pos, s) : add(pos, reshape(off, {}, s), s);
  array theta = multiply(expand_dims(multiply(pos, array(static_cast<float>(scale_)), s), -1, s),
                         inv_freq, s);
  if (per_entry) {
    Shape sh(x.ndim(), 1);
    sh[0] = x.shape(0);
    sh[x.ndim() - 2] = T;
    sh[x.ndim() - 1] = half;
    theta = reshape(theta, sh, s);
  }
  array c = cos(theta, s);
  array sn = sin(theta, s);
  if (!forward_) sn = negative(sn, s);
  const int D = x.shape(-1);
  Shape start(x.ndim(), 0), stop = x.shape(), step(x.ndim(), 1);
  stop.back() = dims_;
  array rot = upcast(slice(x, start, stop, step, s), s);
  auto rotated = [&]() {
    if (traditional_) {
      Shape pairs = rot.shape();
      pairs.back() = half;
      pairs.push_back(2);
      auto parts = split(reshape(rot, pairs, s), 2, -1, s);
      array a = squeeze(parts[0], std::vector<int>{-1}, s);
      array b = squeeze(parts[1], std::vector<int>{-1}, s);
      array o1 = subtract(multiply(a, c, s), multiply(b, sn, s), s);
      array o2 = add(multiply(a, sn, s), multiply(b, c, s), s);
      return reshape(stack({o1, o2}, -1, s), rot.shape(), s);
    }
    auto parts = split(rot, 2, -1, s);
    array o1 = subtract(multiply(parts[0], c, s), multiply(parts[1], sn, s), s);
    array o2 = add(multiply(parts[0], sn, s), multiply(parts[1], c, s), s);
    return concatenate({o1, o2}, -1, s);
  };
  array out = rotated();
  out = astype(out, x.dtype(), s);
  if (dims_ < D) {
    Shape rest_start(x.ndim(), 0);
    rest_start.back() = dims_;
    out = concatenate({out, slice(x, rest_start, x.shape(), step, s)}, -1, s);
  }
  return {out};
}

// A rotation's transpose is the opposite rotation.
std::vector<array> RoPE::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents, const std::vector<int>& argnums,
                             const std::vector<array>& outputs) {
  bool only_x = true;
  for (int i : argnums) only_x &= i == 0 || i == 1;
  if (!only_x) return FastPrimitive::vjp(primals, cotangents, argnums, outputs);
  std::vector<array> in = primals;
  in[0] = cotangents[0];
  array dx =
      array(in[0].shape(), in[0].dtype(),
            std::make_shared<RoPE>(stream(), dims_, traditional_, base_, scale_, !forward_), in);
  std::vector<array> out;
  for (int i : argnums) out.push_back(i == 0 ? dx : zeros_like(primals[i], stream()));
  return out;
}

LOOM_REGISTER_PRIMITIVE(RoPE, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<RoPE>(
      s, state_get<int>(st, "RoPE", "dims"), state_get<bool>(st, "RoPE", "traditional"),
      state_get<double>(st, "RoPE", "base"), state_get<double>(st, "RoPE", "scale"),
      state_get<bool>(st, "RoPE", "forward"));
});

// Attention --------------------------------------------------------------------------

std::vector<Shape> ScaledDotProductAttention::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs[0].shape();
  out.back() = inputs[2].shape(-1);
  return {out};
}

std::vector<array> ScaledDotProductAttention::composite(const std::vector<array>& inputs) const {
  Stream s = stream();
  const array& q = inputs[0];
  array k = inputs[1];
  array v = inputs[2];
  const int groups = q.shape(1) / k.shape(1);
  if (groups > 1) {
    k = repeat(k, groups, 1, s);
    v = repeat(v, groups, 1, s);
  }
  array scores = astype(multiply(matmul(q, swapaxes(k, -1, -2, s), s), array(scale_, q.dtype()), s),
                        float32, s);
  // Masked scores take the lowest finite value (MLX's choice: a fully
  // masked row weighs its keys equally rather than becoming NaN).
  const float masked = std::numeric_limits<float>::lowest();
  const int Tq = q.shape(2);
  const int Tk = k.shape(2);
  size_t next = 3;
  if (mask_mode_ == "causal") {
    array rows = reshape(arange(0, Tq, 1, s), {Tq, 1}, s);
    array cols = reshape(arange(0, Tk, 1, s), {1, Tk}, s);
    array keep = less_equal(cols, add(rows, array(Tk - Tq), s), s);
    scores = where(keep, scores, array(masked), s);
  } else if (mask_mode_ == "array") {
    const array& m = inputs[next++];
    scores = m.dtype() == bool_ ? where(m, scores, array(masked), s)
                                : add(scores, astype(m, float32, s), s);
  }
  if (has_sinks_) {
    const array& sinks = inputs[next++];
    Shape sh = scores.shape();
    sh.back() = 1;
    array col = broadcast_to(reshape(astype(sinks, float32, s), {1, -1, 1, 1}, s), sh, s);
    array p = softmax(concatenate({col, scores}, -1, s), std::vector<int>{-1}, false, s);
    Shape start(4, 0), stop = p.shape(), step(4, 1);
    start.back() = 1;
    scores = slice(p, start, stop, step, s);
  } else {
    scores = softmax(scores, std::vector<int>{-1}, false, s);
  }
  return {matmul(astype(scores, q.dtype(), s), v, s)};
}

std::vector<array> ScaledDotProductAttention::vjp(const std::vector<array>& primals,
                                                  const std::vector<array>& cotangents,
                                                  const std::vector<int>& argnums,
                                                  const std::vector<array>& outputs) {
  // On a GPU stream the fused backward has a kernel for the tensor-core
  // forward's cases (float16/bfloat16, D == Dv of 64 or 128); elsewhere the
  // gradient is the composite's (matmuls and a softmax with GPU kernels).
  // LOOM_CUDA_ATTN_FUSED_VJP=0 turns it off (the composite, for comparison).
  if (stream().device.type == Device::gpu) {
    static const bool fused_gpu = [] {
      const char* e = std::getenv("LOOM_CUDA_ATTN_FUSED_VJP");
      return e == nullptr || std::string(e) != "0";
    }();
    const Dtype d = primals[0].dtype();
    const int D = primals[0].shape(3);
    if (!fused_gpu || !(d == float16 || d == bfloat16) || primals[2].shape(3) != D ||
        (D != 64 && D != 128)) {
      return FastPrimitive::vjp(primals, cotangents, argnums, outputs);
    }
  }
  const int mask_index = mask_mode_ == "array" ? 3 : -1;
  for (int i : argnums) {
    // An additive mask's gradient comes from the composite.
    if (i == mask_index) return FastPrimitive::vjp(primals, cotangents, argnums, outputs);
  }
  std::vector<array> in = primals;
  in.push_back(outputs[0]);
  in.push_back(cotangents[0]);
  std::vector<Shape> shapes{primals[0].shape(), primals[1].shape(), primals[2].shape()};
  std::vector<Dtype> dtypes{primals[0].dtype(), primals[1].dtype(), primals[2].dtype()};
  if (has_sinks_) {
    shapes.push_back(primals.back().shape());
    dtypes.push_back(primals.back().dtype());
  }
  auto grads = array::make_arrays(
      shapes, dtypes,
      std::make_shared<ScaledDotProductAttentionVJP>(stream(), scale_, mask_mode_, has_sinks_), in);
  std::vector<array> out;
  for (int i : argnums) {
    if (i < 3) {
      out.push_back(grads[i]);
    } else if (i == mask_index) {
      out.push_back(zeros_like(primals[i], stream()));
    } else {
      out.push_back(grads[3]);
    }
  }
  return out;
}

std::vector<Shape> ScaledDotProductAttentionVJP::output_shapes(const std::vector<array>& inputs) {
  std::vector<Shape> out{inputs[0].shape(), inputs[1].shape(), inputs[2].shape()};
  if (has_sinks_) out.push_back(inputs[inputs.size() - 3].shape());
  return out;
}

bool ScaledDotProductAttentionVJP::is_equivalent(const Primitive& other) const {
  return typeid(*this) == typeid(other) && state() == other.state();
}

LOOM_REGISTER_PRIMITIVE(ScaledDotProductAttention, [](Stream s, const PrimitiveState& st) {
  const char* n = "ScaledDotProductAttention";
  return std::make_shared<ScaledDotProductAttention>(s, state_get<float>(st, n, "scale"),
                                                     state_get<std::string>(st, n, "mask_mode"),
                                                     state_get<bool>(st, n, "has_sinks"));
});

LOOM_REGISTER_PRIMITIVE(ScaledDotProductAttentionVJP, [](Stream s, const PrimitiveState& st) {
  const char* n = "ScaledDotProductAttentionVJP";
  return std::make_shared<ScaledDotProductAttentionVJP>(s, state_get<float>(st, n, "scale"),
                                                        state_get<std::string>(st, n, "mask_mode"),
                                                        state_get<bool>(st, n, "has_sinks"));
});

// CrossEntropy -----------------------------------------------------------------------

std::vector<Shape> CrossEntropy::output_shapes(const std::vector<array>& inputs) {
  return {inputs[1].shape()};
}

std::vector<array> CrossEntropy::composite(const std::vector<array>& inputs) const {
  Stream s = stream();
  array l = astype(inputs[0], float32, s);
  array picked = take_along_axis(l, expand_dims(inputs[1], -1, s), -1, s);
  return {subtract(logsumexp(l, std::vector<int>{-1}, false, s),
                   squeeze(picked, std::vector<int>{-1}, s), s)};
}

// softmax(logits) - onehot(target), scaled by the loss's cotangent.
std::vector<array> CrossEntropy::vjp(const std::vector<array>& primals,
                                     const std::vector<array>& cotangents,
                                     const std::vector<int>& argnums, const std::vector<array>&) {
  Stream s = stream();
  const array& logits = primals[0];
  std::vector<array> out;
  for (int i : argnums) {
    if (i != 0) {
      out.push_back(zeros_like(primals[i], s));
      continue;
    }
    array l = astype(logits, float32, s);
    array p = softmax(l, std::vector<int>{-1}, false, s);
    array classes = arange(0, logits.shape(-1), 1, s);
    array hot = astype(equal(classes, expand_dims(primals[1], -1, s), s), float32, s);
    array g = multiply(subtract(p, hot, s), expand_dims(cotangents[0], -1, s), s);
    out.push_back(astype(g, logits.dtype(), s));
  }
  return out;
}

std::pair<std::vector<array>, std::vector<int>> CrossEntropy::vmap(const std::vector<array>& inputs,
                                                                   const std::vector<int>& axes) {
  Stream s = stream();
  array l = inputs[0];
  array t = inputs[1];
  // Bring both batch axes to the front (broadcasting an unbatched input).
  const int n = axes[0] >= 0 ? l.shape(axes[0]) : t.shape(axes[1]);
  if (axes[0] >= 0) {
    l = moveaxis(l, axes[0], 0, s);
  } else {
    Shape sh = l.shape();
    sh.insert(sh.begin(), n);
    l = broadcast_to(expand_dims(l, 0, s), sh, s);
  }
  if (axes[1] >= 0) {
    t = moveaxis(t, axes[1], 0, s);
  } else {
    Shape sh = t.shape();
    sh.insert(sh.begin(), n);
    t = broadcast_to(expand_dims(t, 0, s), sh, s);
  }
  return {{array(t.shape(), float32, std::make_shared<CrossEntropy>(s), {l, t})}, {0}};
}

LOOM_REGISTER_PRIMITIVE(CrossEntropy, [](Stream s, const PrimitiveState&) {
  return std::make_shared<CrossEntropy>(s);
});

// GatedDeltaUpdate ---------------------------------------------------------------------

std::vector<Shape> GatedDeltaUpdate::output_shapes(const std::vector<array>& inputs) {
  return {inputs[2].shape(), inputs[5].shape()};
}

std::vector<array> GatedDeltaUpdate::composite(const std::vector<array>& inputs) const {
  Stream s = stream();
  const array& q = inputs[0];
  const int T = q.shape(1);
  const int Hk = q.shape(2);
  const int Hv = inputs[2].shape(2);
  auto heads = [&](const array& x) {
    array f = astype(x, float32, s);
    return Hv == Hk ? f : repeat(f, Hv / Hk, 2, s);
  };
  array qf = heads(q);
  array kf = heads(inputs[1]);
  array vf = astype(inputs[2], float32, s);
  array gf = astype(inputs[3], float32, s);
  array bf = astype(inputs[4], float32, s);
  array state = inputs[5];
  std::vector<array> ys;
  auto at = [&](const array& x, int t) {
    Shape start(x.ndim(), 0), stop = x.shape(), step(x.ndim(), 1);
    start[1] = t;
    stop[1] = t + 1;
    return squeeze(slice(x, start, stop, step, s), std::vector<int>{1}, s);
  };
  for (int t = 0; t < T; ++t) {
    array old = state;
    array g = at(gf, t); // (B, Hv) or (B, Hv, Dk)
    g = g.ndim() == 2 ? expand_dims(g, {-1, -2}, s) : expand_dims(g, -2, s);
    array kt = expand_dims(at(kf, t), -2, s); // (B, Hv, 1, Dk)
    state = multiply(state, g, s);
    array kv = sum(multiply(state, kt, s), -1, false, s); // (B, Hv, Dv)
    array delta = multiply(subtract(at(vf, t), kv, s), expand_dims(at(bf, t), -1, s), s);
    state = add(state, multiply(kt, expand_dims(delta, -1, s), s), s);
    array y = sum(multiply(state, expand_dims(at(qf, t), -2, s), s), -1, false, s);
    if (has_mask_) {
      array m = at(inputs[6], t); // (B,)
      array m4 = reshape(m, {-1, 1, 1, 1}, s);
      state = where(m4, state, old, s);
      y = where(reshape(m, {-1, 1, 1}, s), y, zeros_like(y, s), s);
    }
    ys.push_back(astype(y, inputs[2].dtype(), s));
  }
  return {stack(ys, 1, s), state};
}

namespace {

// Every input of the delta rule (and of its backward) leads with the batch
// axis B, and batch entries are independent: a mapped axis folds into B,
// (V, B, ...) -> (V * B, ...), unmapped inputs broadcast to V first.
std::vector<array> fold_into_batch(const std::vector<array>& inputs, const std::vector<int>& axes,
                                   int V, Stream s) {
  std::vector<array> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    array a = inputs[i];
    if (axes[i] >= 0) {
      a = moveaxis(a, axes[i], 0, s);
    } else {
      Shape shape = a.shape();
      shape.insert(shape.begin(), V);
      a = broadcast_to(expand_dims(a, 0, s), shape, s);
    }
    Shape shape(a.shape().begin() + 1, a.shape().end());
    shape[0] *= V;
    out.push_back(reshape(a, shape, s));
  }
  return out;
}

std::vector<array> unfold_batch(const std::vector<array>& outputs, int V, Stream s) {
  std::vector<array> out;
  for (const auto& a : outputs) {
    Shape shape = a.shape();
    shape[0] /= V;
    shape.insert(shape.begin(), V);
    out.push_back(reshape(a, shape, s));
  }
  return out;
}

int mapped_size(const std::vector<array>& inputs, const std::vector<int>& axes) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) return inputs[i].shape(axes[i]);
  }
  return 1;
}

} // namespace

std::vector<array> GatedDeltaUpdate::vjp(const std::vector<array>& primals,
                                         const std::vector<array>& cotangents,
                                         const std::vector<int>& argnums,
                                         const std::vector<array>&) {
  Stream s = stream();
  std::vector<array> in = primals;
  in.push_back(astype(cotangents[0], primals[2].dtype(), s));
  in.push_back(astype(cotangents[1], float32, s));
  auto prim = std::make_shared<GatedDeltaUpdateVJP>(s, has_mask_);
  auto shapes = prim->output_shapes(in);
  auto grads =
      array::make_arrays(std::move(shapes), std::vector<Dtype>(6, float32), prim, std::move(in));
  std::vector<array> out;
  for (int i : argnums) {
    out.push_back(i < 6 ? astype(grads[i], primals[i].dtype(), s) : zeros_like(primals[i], s));
  }
  return out;
}

std::pair<std::vector<array>, std::vector<int>> GatedDeltaUpdate::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  Stream s = stream();
  const int V = mapped_size(inputs, axes);
  std::vector<array> in = fold_into_batch(inputs, axes, V, s);
  auto prim = std::make_shared<GatedDeltaUpdate>(s, has_mask_);
  auto shapes = prim->output_shapes(in);
  const Dtype dtype = in[2].dtype();
  auto outs = array::make_arrays(std::move(shapes), {dtype, float32}, prim, std::move(in));
  return {unfold_batch(outs, V, s), {0, 0}};
}

std::vector<Shape> GatedDeltaUpdateVJP::output_shapes(const std::vector<array>& inputs) {
  std::vector<Shape> out;
  for (int i = 0; i < 6; ++i) out.push_back(inputs[i].shape());
  return out;
}

std::vector<array> GatedDeltaUpdateVJP::composite(const std::vector<array>& inputs) const {
  Stream s = stream();
  const size_t n = inputs.size();
  auto forward = std::make_shared<GatedDeltaUpdate>(s, has_mask_);
  auto fn = [forward](const std::vector<array>& in) { return forward->composite(in); };
  std::vector<array> primals(inputs.begin(), inputs.end() - 2);
  auto grads = loom::vjp(fn, primals, {inputs[n - 2], inputs[n - 1]}).second;
  std::vector<array> out;
  for (int i = 0; i < 6; ++i) out.push_back(astype(grads[i], float32, s));
  return out;
}

std::pair<std::vector<array>, std::vector<int>> GatedDeltaUpdateVJP::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  Stream s = stream();
  const int V = mapped_size(inputs, axes);
  std::vector<array> in = fold_into_batch(inputs, axes, V, s);
  auto prim = std::make_shared<GatedDeltaUpdateVJP>(s, has_mask_);
  auto shapes = prim->output_shapes(in);
  auto outs =
      array::make_arrays(std::move(shapes), std::vector<Dtype>(6, float32), prim, std::move(in));
  return {unfold_batch(outs, V, s), std::vector<int>(6, 0)};
}

LOOM_REGISTER_PRIMITIVE(GatedDeltaUpdateVJP, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<GatedDeltaUpdateVJP>(
      s, state_get<bool>(st, "GatedDeltaUpdateVJP", "has_mask"));
});

LOOM_REGISTER_PRIMITIVE(GatedDeltaUpdate, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<GatedDeltaUpdate>(s, state_get<bool>(st, "GatedDeltaUpdate", "has_mask"));
});

} // namespace loom
