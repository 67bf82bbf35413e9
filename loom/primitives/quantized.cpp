#include "loom/primitives/quantized.h"

#include <memory>
#include <optional>
#include <stdexcept>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gather.h"
#include "loom/ops/linalg.h"
#include "loom/ops/quantized.h"
#include "loom/ops/reduce.h"
#include "loom/ops/shape.h"
#include "loom/ops/utils.h"

namespace loom {

std::string quantization_mode_name(QuantizationMode mode) {
  switch (mode) {
    case QuantizationMode::affine:
      return "affine";
    case QuantizationMode::mxfp4:
      return "mxfp4";
    case QuantizationMode::mxfp8:
      return "mxfp8";
    case QuantizationMode::nvfp4:
      return "nvfp4";
  }
  return "affine";
}

QuantizationMode parse_quantization_mode(const std::string& name, const char* op) {
  if (name == "affine") return QuantizationMode::affine;
  if (name == "mxfp4") return QuantizationMode::mxfp4;
  if (name == "mxfp8") return QuantizationMode::mxfp8;
  if (name == "nvfp4") return QuantizationMode::nvfp4;
  throw std::invalid_argument(std::string("[") + op + "] Invalid quantization mode '" + name +
                              "'.");
}

namespace {

// Sums a broadcast cotangent back to the shape of the input it came from.
array sum_to_shape(const array& g, const Shape& shape, Stream s) {
  if (g.shape() == shape) return g;
  const int extra = g.ndim() - static_cast<int>(shape.size());
  std::vector<int> axes;
  for (int i = 0; i < extra; ++i) axes.push_back(i);
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    if (shape[i] == 1 && g.shape(i + extra) != 1) axes.push_back(i + extra);
  }
  array r = axes.empty() ? g : sum(g, axes, true, s);
  return reshape(r, shape, s);
}

// Moves a mapped axis to the front, or adds a unit one; then pads every
// input with unit axes after the front so their batch axes line up when
// broadcast from the right (the last `core` axes are the op's own).
std::vector<array> align_batched(const std::vector<array>& inputs, const std::vector<int>& axes,
                                 Stream s) {
  std::vector<array> out;
  int max_ndim = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    array a = axes[i] < 0 ? expand_dims(inputs[i], 0, s) : moveaxis(inputs[i], axes[i], 0, s);
    max_ndim = std::max(max_ndim, a.ndim());
    out.push_back(std::move(a));
  }
  for (auto& a : out) {
    while (a.ndim() < max_ndim) a = expand_dims(a, 1, s);
  }
  return out;
}

// The batch shape (all but the last two axes) the inputs broadcast to.
Shape common_batch(const std::vector<array>& inputs) {
  std::vector<Shape> batches;
  for (const auto& a : inputs) batches.emplace_back(a.shape().begin(), a.shape().end() - 2);
  return broadcast_shapes(batches);
}

array with_batch(const array& a, const Shape& batch, Stream s) {
  Shape shape = batch;
  shape.push_back(a.shape(-2));
  shape.push_back(a.shape(-1));
  return a.shape() == shape ? a : broadcast_to(a, shape, s);
}

} // namespace

// --- Quantize ---------------------------------------------------------------

std::vector<Shape> Quantize::output_shapes(const std::vector<array>& inputs) {
  Shape codes = inputs[0].shape();
  Shape scales = codes;
  codes.back() = codes.back() * bits_ / 32;
  scales.back() = scales.back() / group_size_;
  if (mode_ == QuantizationMode::affine) return {codes, scales, scales};
  return {codes, scales};
}

// The codes are rounded (no derivative); the affine scale and bias are
// smooth functions of the group's extremes, differentiated as MLX's
// composite does: scale = edge / q0 and bias = edge when the edge's code q0 is
// not 0, else scale = +-max(range / n_bins, eps) and bias = 0 (one bit:
// scale = max(range, eps), bias = min). Ties at an extreme share its
// gradient equally. The fp modes' power-of-two scales have none.
std::vector<array> Quantize::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums, const std::vector<array>&) {
  Stream s = stream();
  std::vector<array> out;
  for (int i : argnums) {
    if (i != 0 || mode_ != QuantizationMode::affine) {
      out.push_back(zeros_like(primals[i], s));
      continue;
    }
    const array& w = primals[0];
    Shape grouped = w.shape();
    grouped.back() = w.shape(-1) / group_size_;
    grouped.push_back(group_size_);
    array wg = astype(reshape(w, grouped, s), float32, s);
    array w_max = max(wg, std::vector<int>{-1}, true, s);
    array w_min = min(wg, std::vector<int>{-1}, true, s);
    array cs = expand_dims(astype(cotangents[1], float32, s), -1, s);
    array cb = expand_dims(astype(cotangents[2], float32, s), -1, s);
    const float n_bins = static_cast<float>((1 << bits_) - 1);
    array eps = array(1e-7f);
    array range = subtract(w_max, w_min, s);
    array zero = zeros_like(range, s);
    array d_max = zero, d_min = zero;
    if (bits_ == 1) {
      array active = astype(greater(range, eps, s), float32, s);
      d_max = multiply(cs, active, s);
      d_min = add(negative(d_max, s), cb, s);
    } else {
      array mask = greater(abs(w_min, s), abs(w_max, s), s);
      array step = maximum(divide(range, array(n_bins), s), eps, s);
      array scale0 = where(mask, step, negative(step, s), s);
      array edge = where(mask, w_min, w_max, s);
      array q0 = round(divide(edge, scale0, s), 0, s);
      array nonzero = not_equal(q0, zero, s);
      array safe_q0 = where(nonzero, q0, ones_like(q0, s), s);
      array d_edge = where(nonzero, add(divide(cs, safe_q0, s), cb, s), zero, s);
      array active = astype(greater(divide(range, array(n_bins), s), eps, s), float32, s);
      array sign = where(mask, ones_like(range, s), negative(ones_like(range, s), s), s);
      array d_range = where(
          nonzero, zero, divide(multiply(multiply(cs, sign, s), active, s), array(n_bins), s), s);
      d_max = add(d_range, where(mask, zero, d_edge, s), s);
      d_min = add(negative(d_range, s), where(mask, d_edge, zero, s), s);
    }
    array at_max = astype(equal(wg, w_max, s), float32, s);
    array at_min = astype(equal(wg, w_min, s), float32, s);
    array g =
        add(multiply(at_max, divide(d_max, sum(at_max, std::vector<int>{-1}, true, s), s), s),
            multiply(at_min, divide(d_min, sum(at_min, std::vector<int>{-1}, true, s), s), s), s);
    out.push_back(astype(reshape(g, w.shape(), s), w.dtype(), s));
  }
  return out;
}

std::pair<std::vector<array>, std::vector<int>> Quantize::vmap(const std::vector<array>& inputs,
                                                               const std::vector<int>& axes) {
  Stream s = stream();
  if (inputs.size() > 1 && axes[1] >= 0) {
    throw std::invalid_argument("[Quantize::vmap] a batched global scale is not supported.");
  }
  array w = inputs[0];
  int b = axes[0];
  if (b == w.ndim() - 1) {
    w = moveaxis(w, b, 0, s);
    b = 0;
  }
  std::vector<array> in = inputs;
  in[0] = w;
  auto shapes = output_shapes(in);
  std::vector<Dtype> dtypes = {uint32, mode_ == QuantizationMode::affine ? w.dtype() : uint8};
  if (mode_ == QuantizationMode::affine) dtypes.push_back(w.dtype());
  auto outs = array::make_arrays(std::move(shapes), dtypes,
                                 std::make_shared<Quantize>(s, group_size_, bits_, mode_), in);
  return {outs, std::vector<int>(outs.size(), b)};
}

bool Quantize::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Quantize*>(&other);
  return o != nullptr && o->state() == state();
}

PrimitiveState Quantize::state() const {
  return {{"group_size", int64_t{group_size_}},
          {"bits", int64_t{bits_}},
          {"mode", quantization_mode_name(mode_)}};
}

// --- Dequantize -------------------------------------------------------------

std::vector<Shape> Dequantize::output_shapes(const std::vector<array>& inputs) {
  Shape shape = inputs[0].shape();
  shape.back() = shape.back() * 32 / bits_;
  return {shape};
}

std::vector<array> Dequantize::vjp(const std::vector<array>& primals,
                                   const std::vector<array>& cotangents,
                                   const std::vector<int>& argnums, const std::vector<array>&) {
  Stream s = stream();
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      // Integer codes carry no gradient; MLX returns zeros, as here.
      out.push_back(zeros_like(primals[0], s));
      continue;
    }
    if (mode_ != QuantizationMode::affine) {
      // uint8 exponent codes (and a global scale) get no gradient.
      out.push_back(zeros_like(primals[i], s));
      continue;
    }
    // w = scale * q + bias per group: d bias = sum of the group's cotangent,
    // d scale = sum of cotangent * q.
    const array& scales = primals[1];
    Shape grouped = cotangents[0].shape();
    grouped.back() = scales.shape(-1);
    grouped.push_back(group_size_);
    array g = astype(cotangents[0], float32, s);
    if (i == 2) {
      out.push_back(astype(sum(reshape(g, grouped, s), std::vector<int>{-1}, false, s),
                           primals[2].dtype(), s));
    } else {
      array q = dequantize(primals[0], ones_like(scales, s), zeros_like(scales, s), group_size_,
                           bits_, "affine", std::nullopt, float32, s);
      out.push_back(
          astype(sum(reshape(multiply(g, q, s), grouped, s), std::vector<int>{-1}, false, s),
                 scales.dtype(), s));
    }
  }
  return out;
}

// Affine dequantization is linear in (scales, biases).
std::vector<array> Dequantize::jvp(const std::vector<array>& primals,
                                   const std::vector<array>& tangents,
                                   const std::vector<int>& argnums) {
  Stream s = stream();
  if (mode_ != QuantizationMode::affine || primals.size() < 3) {
    throw std::invalid_argument(
        "[Dequantize::jvp] only the scales and biases of affine "
        "quantization have tangents.");
  }
  array ts = zeros_like(primals[1], s), tb = zeros_like(primals[2], s);
  for (size_t k = 0; k < argnums.size(); ++k) {
    if (argnums[k] == 0) {
      throw std::invalid_argument("[Dequantize::jvp] no derivative wrt the quantized weights.");
    }
    if (argnums[k] == 1) ts = tangents[k];
    if (argnums[k] == 2) tb = tangents[k];
  }
  return {dequantize(primals[0], ts, tb, group_size_, bits_, "affine", std::nullopt, dtype_, s)};
}

std::pair<std::vector<array>, std::vector<int>> Dequantize::vmap(const std::vector<array>& inputs,
                                                                 const std::vector<int>& axes) {
  Stream s = stream();
  const size_t n = mode_ == QuantizationMode::affine ? 3 : 2;
  if (inputs.size() > n && axes[n] >= 0) {
    throw std::invalid_argument("[Dequantize::vmap] a batched global scale is not supported.");
  }
  std::vector<array> head(inputs.begin(), inputs.begin() + n);
  std::vector<int> head_axes(axes.begin(), axes.begin() + n);
  std::vector<array> in = align_batched(head, head_axes, s);
  // Codes, scales and biases must agree on every axis but the last.
  std::vector<Shape> lead;
  for (const auto& a : in) lead.emplace_back(a.shape().begin(), a.shape().end() - 1);
  Shape common = broadcast_shapes(lead);
  for (auto& a : in) {
    Shape shape = common;
    shape.push_back(a.shape(-1));
    if (a.shape() != shape) a = broadcast_to(a, shape, s);
  }
  for (size_t i = n; i < inputs.size(); ++i) in.push_back(inputs[i]);
  auto shapes = output_shapes(in);
  array out(std::move(shapes[0]), dtype_,
            std::make_shared<Dequantize>(s, group_size_, bits_, mode_, dtype_), in);
  return {{out}, {0}};
}

bool Dequantize::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Dequantize*>(&other);
  return o != nullptr && o->state() == state();
}

PrimitiveState Dequantize::state() const {
  return {{"group_size", int64_t{group_size_}},
          {"bits", int64_t{bits_}},
          {"mode", quantization_mode_name(mode_)},
          {"dtype", dtype_}};
}

// --- QuantizedMatmul --------------------------------------------------------

std::vector<Shape> QuantizedMatmul::output_shapes(const std::vector<array>& inputs) {
  const array& x = inputs[0];
  const array& w = inputs[1];
  Shape out = common_batch({x, w});
  out.push_back(x.shape(-2));
  out.push_back(transpose_ ? w.shape(-2) : w.shape(-1) * 32 / bits_);
  return {out};
}

std::vector<array> QuantizedMatmul::vjp(const std::vector<array>& primals,
                                        const std::vector<array>& cotangents,
                                        const std::vector<int>& argnums,
                                        const std::vector<array>&) {
  Stream s = stream();
  const array& x = primals[0];
  const array& cot = cotangents[0];
  std::optional<array> biases;
  if (primals.size() > 3) biases = primals[3];
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      array g = quantized_matmul(cot, primals[1], primals[2], biases, !transpose_, group_size_,
                                 bits_, quantization_mode_name(mode_), s);
      out.push_back(astype(sum_to_shape(g, x.shape(), s), x.dtype(), s));
    } else if (i == 1) {
      throw std::invalid_argument("[QuantizedMatmul::vjp] no gradient wrt the quantized weights.");
    } else {
      if (mode_ != QuantizationMode::affine) {
        throw std::invalid_argument(
            "[QuantizedMatmul::vjp] gradients of the scales are only "
            "available for affine quantization.");
      }
      // Gradient of the dense weight, then through dequantize's linearity.
      array xf = astype(x, float32, s);
      array cf = astype(cot, float32, s);
      array dw = transpose_ ? matmul(swapaxes(cf, -1, -2, s), xf, s)
                            : matmul(swapaxes(xf, -1, -2, s), cf, s);
      const array& scales = primals[2];
      Shape wshape(scales.shape().begin(), scales.shape().end() - 2);
      wshape.push_back(dw.shape(-2));
      wshape.push_back(dw.shape(-1));
      dw = sum_to_shape(dw, wshape, s);
      Shape grouped = dw.shape();
      grouped.back() = scales.shape(-1);
      grouped.push_back(group_size_);
      if (i == 3) {
        out.push_back(astype(sum(reshape(dw, grouped, s), std::vector<int>{-1}, false, s),
                             primals[3].dtype(), s));
      } else {
        array q = dequantize(primals[1], ones_like(scales, s), zeros_like(scales, s), group_size_,
                             bits_, "affine", std::nullopt, float32, s);
        out.push_back(
            astype(sum(reshape(multiply(dw, q, s), grouped, s), std::vector<int>{-1}, false, s),
                   scales.dtype(), s));
      }
    }
  }
  return out;
}

// Linear in x and, for affine, in (scales, biases) together.
std::vector<array> QuantizedMatmul::jvp(const std::vector<array>& primals,
                                        const std::vector<array>& tangents,
                                        const std::vector<int>& argnums) {
  Stream s = stream();
  const std::string mode = quantization_mode_name(mode_);
  std::optional<array> biases;
  if (primals.size() > 3) biases = primals[3];
  std::optional<array> result;
  std::optional<array> ts, tb;
  for (size_t k = 0; k < argnums.size(); ++k) {
    const int i = argnums[k];
    if (i == 0) {
      result = quantized_matmul(tangents[k], primals[1], primals[2], biases, transpose_,
                                group_size_, bits_, mode, s);
    } else if (i == 1) {
      throw std::invalid_argument(
          "[QuantizedMatmul::jvp] no derivative wrt the quantized "
          "weights.");
    } else if (mode_ != QuantizationMode::affine) {
      throw std::invalid_argument(
          "[QuantizedMatmul::jvp] derivatives wrt the scales are only "
          "available for affine quantization.");
    } else if (i == 2) {
      ts = tangents[k];
    } else {
      tb = tangents[k];
    }
  }
  if (ts || tb) {
    array s_t = ts ? *ts : zeros_like(primals[2], s);
    array b_t = tb ? *tb : zeros_like(primals[3], s);
    array extra =
        quantized_matmul(primals[0], primals[1], s_t, b_t, transpose_, group_size_, bits_, mode, s);
    result = result ? add(*result, extra, s) : extra;
  }
  return {*result};
}

std::pair<std::vector<array>, std::vector<int>> QuantizedMatmul::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  Stream s = stream();
  std::vector<array> in = align_batched(inputs, axes, s);
  // The weight, scales and biases share one batch index in the kernel.
  std::vector<array> wsb(in.begin() + 1, in.end());
  Shape batch = common_batch(wsb);
  for (size_t i = 1; i < in.size(); ++i) in[i] = with_batch(in[i], batch, s);
  auto shapes = output_shapes(in);
  array out(std::move(shapes[0]), in[0].dtype(),
            std::make_shared<QuantizedMatmul>(s, group_size_, bits_, mode_, transpose_), in);
  return {{out}, {0}};
}

bool QuantizedMatmul::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const QuantizedMatmul*>(&other);
  return o != nullptr && o->state() == state();
}

PrimitiveState QuantizedMatmul::state() const {
  return {{"group_size", int64_t{group_size_}},
          {"bits", int64_t{bits_}},
          {"mode", quantization_mode_name(mode_)},
          {"transpose", transpose_}};
}

// --- GatherQMM --------------------------------------------------------------

std::vector<Shape> GatherQMM::output_shapes(const std::vector<array>& inputs) {
  const array& x = inputs[0];
  const array& w = inputs[1];
  const array& lhs = inputs[inputs.size() - 2];
  return {{lhs.shape(0), x.shape(-2), transpose_ ? w.shape(-2) : w.shape(-1) * 32 / bits_}};
}

// d x[b] = sum over the p with lhs[p] == b of cot[p] times w[rhs[p]] the
// other way round: the same gathered product, scattered back.
std::vector<array> GatherQMM::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>& argnums, const std::vector<array>&) {
  Stream s = stream();
  const size_t n = primals.size();
  const array& x = primals[0];
  const array& lhs = primals[n - 2];
  std::vector<array> out;
  for (int i : argnums) {
    if (i != 0) {
      throw std::invalid_argument("[GatherQMM::vjp] gradients are available only wrt x.");
    }
    const array& cot = cotangents[0];
    std::vector<array> in = {cot};
    for (size_t k = 1; k + 2 < n; ++k) in.push_back(primals[k]);
    in.push_back(astype(arange(int64_t{0}, lhs.shape(0), int64_t{1}, s), uint32, s));
    in.push_back(primals[n - 1]);
    auto back = std::make_shared<GatherQMM>(s, group_size_, bits_, mode_, !transpose_);
    Shape shape = back->output_shapes(in)[0];
    array g(shape, cot.dtype(), back, std::move(in));
    out.push_back(scatter_add(zeros_like(x, s), {lhs}, g, {0}, s));
  }
  return out;
}

// The mapped axis folds into the matrix batch: mapped operands become
// (V * B, rows, cols), each index gains v * B for its slice v, and the V * P
// products come out of one node, split back into (V, P, M, N). Unmapped
// weight parts are broadcast when another weight part is mapped, since the
// kernel reads w, scales and biases at one batch index.
std::pair<std::vector<array>, std::vector<int>> GatherQMM::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  Stream s = stream();
  const size_t n = inputs.size();
  int64_t V = 1;
  for (size_t i = 0; i < n; ++i) {
    if (axes[i] >= 0) V = inputs[i].shape(axes[i]);
  }
  std::vector<array> in;
  for (size_t i = 0; i < n; ++i) {
    in.push_back(axes[i] >= 0 ? moveaxis(inputs[i], axes[i], 0, s) : inputs[i]);
  }
  auto fold = [&](const array& a) {
    return reshape(a, {static_cast<int>(a.shape(0) * a.shape(1)), a.shape(2), a.shape(3)}, s);
  };
  // The offset v * B of slice v, as a (V, 1) column of uint32.
  auto offsets = [&](int64_t B) {
    return reshape(astype(arange(int64_t{0}, V * B, B, s), uint32, s), {static_cast<int>(V), 1}, s);
  };
  auto lift = [&](size_t i) { // an index array as (V, P)
    const array& idx = in[i];
    Shape shape = {static_cast<int>(V), axes[i] >= 0 ? idx.shape(1) : idx.shape(0)};
    return axes[i] >= 0 ? idx : broadcast_to(expand_dims(idx, 0, s), shape, s);
  };
  array lhs = lift(n - 2);
  array rhs = lift(n - 1);
  if (axes[0] >= 0) {
    lhs = add(lhs, offsets(in[0].shape(1)), s);
    in[0] = fold(in[0]);
  }
  bool w_mapped = false;
  for (size_t i = 1; i + 2 < n; ++i) w_mapped = w_mapped || axes[i] >= 0;
  if (w_mapped) {
    for (size_t i = 1; i + 2 < n; ++i) {
      if (axes[i] < 0) {
        Shape shape = in[i].shape();
        shape.insert(shape.begin(), static_cast<int>(V));
        in[i] = broadcast_to(expand_dims(in[i], 0, s), shape, s);
      }
    }
    rhs = add(rhs, offsets(in[1].shape(1)), s);
    for (size_t i = 1; i + 2 < n; ++i) in[i] = fold(in[i]);
  }
  in[n - 2] = flatten(lhs, 0, -1, s);
  in[n - 1] = flatten(rhs, 0, -1, s);
  auto prim = std::make_shared<GatherQMM>(s, group_size_, bits_, mode_, transpose_);
  Shape flat = prim->output_shapes(in)[0];
  const Dtype dtype = in[0].dtype();
  array out(flat, dtype, prim, std::move(in));
  return {{reshape(out, {static_cast<int>(V), flat[0] / static_cast<int>(V), flat[1], flat[2]}, s)},
          {0}};
}

bool GatherQMM::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const GatherQMM*>(&other);
  return o != nullptr && o->state() == state();
}

PrimitiveState GatherQMM::state() const {
  return {{"group_size", int64_t{group_size_}},
          {"bits", int64_t{bits_}},
          {"mode", quantization_mode_name(mode_)},
          {"transpose", transpose_}};
}

// --- fp8 conversions ------------------------------------------------------------

std::pair<std::vector<array>, std::vector<int>> ToFP8::vmap(const std::vector<array>& inputs,
                                                            const std::vector<int>& axes) {
  return {{array(inputs[0].shape(), uint8, std::make_shared<ToFP8>(stream()), {inputs[0]})},
          {axes[0]}};
}

std::pair<std::vector<array>, std::vector<int>> FromFP8::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  return {
      {array(inputs[0].shape(), dtype_, std::make_shared<FromFP8>(stream(), dtype_), {inputs[0]})},
      {axes[0]}};
}

bool FromFP8::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const FromFP8*>(&other);
  return o != nullptr && o->dtype_ == dtype_;
}

namespace {

QuantizationMode mode_field(const PrimitiveState& st, const char* name) {
  return parse_quantization_mode(state_get<std::string>(st, name, "mode"), name);
}

} // namespace

LOOM_REGISTER_PRIMITIVE(Quantize, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Quantize>(s, state_get<int>(st, "Quantize", "group_size"),
                                    state_get<int>(st, "Quantize", "bits"),
                                    mode_field(st, "Quantize"));
});
LOOM_REGISTER_PRIMITIVE(Dequantize, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Dequantize>(
      s, state_get<int>(st, "Dequantize", "group_size"), state_get<int>(st, "Dequantize", "bits"),
      mode_field(st, "Dequantize"), state_get<Dtype>(st, "Dequantize", "dtype"));
});
LOOM_REGISTER_PRIMITIVE(QuantizedMatmul, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<QuantizedMatmul>(s, state_get<int>(st, "QuantizedMatmul", "group_size"),
                                           state_get<int>(st, "QuantizedMatmul", "bits"),
                                           mode_field(st, "QuantizedMatmul"),
                                           state_get<bool>(st, "QuantizedMatmul", "transpose"));
});

LOOM_REGISTER_PRIMITIVE(GatherQMM, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<GatherQMM>(
      s, state_get<int>(st, "GatherQMM", "group_size"), state_get<int>(st, "GatherQMM", "bits"),
      mode_field(st, "GatherQMM"), state_get<bool>(st, "GatherQMM", "transpose"));
});

LOOM_REGISTER_PRIMITIVE(ToFP8,
                        [](Stream s, const PrimitiveState&) { return std::make_shared<ToFP8>(s); });
LOOM_REGISTER_PRIMITIVE(FromFP8, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<FromFP8>(s, state_get<Dtype>(st, "FromFP8", "dtype"));
});

} // namespace loom
