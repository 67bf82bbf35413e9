// Convolution: shapes, state and transforms. The kernel lives in
// backend/cpu/conv.cpp, the argument checks in ops/conv.cpp.
//
// Notation per spatial axis: I input length, K kernel length, O output
// length, s stride, kd kernel dilation, id input dilation, lo/hi padding.
// The input is dilated to (I-1)*id+1 elements (zeros between samples), padded
// by lo and hi, and output o reads dilated position o*s + k'*kd - lo, where
// k' = k, or K-1-k when flipped.
#include "loom/primitives/conv.h"

#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <string>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/shape.h"
#include "loom/scheduler/inline_eval.h"
#include "loom/scheduler/stream_borrow.h"

namespace loom {

namespace {

std::vector<int64_t> widen(const std::vector<int>& v) { return {v.begin(), v.end()}; }

int64_t dilated(int64_t n, int64_t d) { return n == 0 ? 0 : (n - 1) * d + 1; }

array convolve_with(const array& in, const array& wt, ConvParams p, const Stream& s) {
  Shape shape = conv_output_shape(in.shape(), wt.shape(), p);
  return array(std::move(shape), in.dtype(), std::make_shared<Convolution>(s, std::move(p)),
               {in, wt});
}

// Axes permutation that keeps the spatial axes and swaps the first and last.
std::vector<int> swap_ends(int ndim) {
  std::vector<int> axes(ndim);
  std::iota(axes.begin(), axes.end(), 0);
  std::swap(axes.front(), axes.back());
  return axes;
}

std::vector<int> spatial_axes(int nd) {
  std::vector<int> axes(nd);
  std::iota(axes.begin(), axes.end(), 1);
  return axes;
}

} // namespace

Shape conv_output_shape(const Shape& in, const Shape& wt, const ConvParams& p) {
  const int nd = static_cast<int>(in.size()) - 2;
  Shape out{in[0]};
  for (int i = 0; i < nd; ++i) {
    const int64_t span = dilated(in[i + 1], p.input_dilation[i]) + p.padding_lo[i] +
                         p.padding_hi[i] - dilated(wt[i + 1], p.kernel_dilation[i]);
    out.push_back(span < 0 ? 0 : span / p.stride[i] + 1);
  }
  out.push_back(wt[0]);
  return out;
}

std::vector<Shape> Convolution::output_shapes(const std::vector<array>& inputs) {
  return {conv_output_shape(inputs[0].shape(), inputs[1].shape(), p_)};
}

namespace {

PrimitiveState conv_state(const ConvParams& p) {
  return {{"stride", widen(p.stride)},
          {"padding_lo", widen(p.padding_lo)},
          {"padding_hi", widen(p.padding_hi)},
          {"kernel_dilation", widen(p.kernel_dilation)},
          {"input_dilation", widen(p.input_dilation)},
          {"groups", static_cast<int64_t>(p.groups)},
          {"flip", p.flip}};
}

} // namespace

PrimitiveState Convolution::state() const { return conv_state(p_); }

bool Convolution::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Convolution*>(&other);
  return o != nullptr && o->p_ == p_;
}

namespace {

ConvParams conv_params_from(const PrimitiveState& st, const char* name) {
  ConvParams p;
  p.stride = state_get<std::vector<int>>(st, name, "stride");
  p.padding_lo = state_get<std::vector<int>>(st, name, "padding_lo");
  p.padding_hi = state_get<std::vector<int>>(st, name, "padding_hi");
  p.kernel_dilation = state_get<std::vector<int>>(st, name, "kernel_dilation");
  p.input_dilation = state_get<std::vector<int>>(st, name, "input_dilation");
  p.groups = state_get<int>(st, name, "groups");
  p.flip = state_get<bool>(st, name, "flip");
  return p;
}

} // namespace

LOOM_REGISTER_PRIMITIVE(Convolution, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Convolution>(s, conv_params_from(st, "Convolution"));
});

namespace {

// The input's gradient as a convolution of this primitive: the cotangent,
// dilated by the stride, against the kernel turned around (flip toggled)
// with in/out channels swapped per group; stepping by the input dilation
// keeps only the positions that held input samples. `xs` is the input's shape.
array input_grad_composite(const array& cot, const array& w, const ConvParams& p, const Shape& xs,
                           const Stream& s) {
  const int nd = static_cast<int>(xs.size()) - 2;
  const int G = p.groups;
  const int C = xs.back();
  const int Cg = C / G;
  const int Og = w.shape(0) / G;
  if (cot.size() == 0) return zeros(xs, cot.dtype(), s);
  ConvParams q;
  q.groups = p.groups;
  q.flip = !p.flip;
  q.stride = p.input_dilation;
  q.kernel_dilation = p.kernel_dilation;
  q.input_dilation = p.stride;
  for (int i = 0; i < nd; ++i) {
    const int64_t K = w.shape(i + 1);
    const int64_t kd = p.kernel_dilation[i];
    const int64_t lo = (K - 1) * kd - p.padding_lo[i];
    const int64_t span = dilated(cot.shape(i + 1), p.stride[i]);
    const int64_t hi = (xs[i + 1] - 1) * p.input_dilation[i] + (K - 1) * kd + 1 - span - lo;
    q.padding_lo.push_back(static_cast<int>(lo));
    q.padding_hi.push_back(static_cast<int>(hi));
  }
  Shape grouped{G, Og};
  for (int i = 0; i < nd; ++i) grouped.push_back(w.shape(i + 1));
  grouped.push_back(Cg);
  std::vector<int> perm{0, nd + 2};
  for (int i = 0; i < nd; ++i) perm.push_back(i + 2);
  perm.push_back(1);
  Shape wt_shape{C};
  for (int i = 0; i < nd; ++i) wt_shape.push_back(w.shape(i + 1));
  wt_shape.push_back(Og);
  array wt = reshape(transpose(reshape(w, grouped, s), perm, s), wt_shape, s);
  return convolve_with(cot, wt, std::move(q), s);
}

// The weight's gradient correlates the input with the cotangent: the input's
// channels become the batch and its batch the channels (kept per group), the
// cotangent is the kernel, dilated by the stride, and stepping by the kernel
// dilation gives one output per kernel tap. `ws` is the weight's shape.
array weight_grad_composite(const array& x, const array& cot, const ConvParams& p, const Shape& ws,
                            const Stream& s) {
  const int nd = x.ndim() - 2;
  const int G = p.groups;
  const int Cg = x.shape(-1) / G;
  const int N = x.shape(0);
  if (cot.size() == 0) return zeros(ws, x.dtype(), s);
  ConvParams q;
  q.groups = p.groups;
  q.flip = false;
  q.stride = p.kernel_dilation;
  q.kernel_dilation = p.stride;
  q.input_dilation = p.input_dilation;
  for (int i = 0; i < nd; ++i) {
    const int64_t K = ws[i + 1];
    const int64_t span = dilated(x.shape(i + 1), p.input_dilation[i]);
    const int64_t hi = (K - 1) * p.kernel_dilation[i] + p.stride[i] * (cot.shape(i + 1) - 1) + 1 -
                       span - p.padding_lo[i];
    q.padding_lo.push_back(p.padding_lo[i]);
    q.padding_hi.push_back(static_cast<int>(hi));
  }
  // x: (N, S..., G, Cg) -> (Cg, S..., G, N) -> (Cg, S..., G*N).
  Shape xs{N};
  for (int i = 0; i < nd; ++i) xs.push_back(x.shape(i + 1));
  xs.push_back(G);
  xs.push_back(Cg);
  std::vector<int> xperm{nd + 2};
  for (int i = 0; i < nd; ++i) xperm.push_back(i + 1);
  xperm.push_back(nd + 1);
  xperm.push_back(0);
  Shape xt_shape{Cg};
  for (int i = 0; i < nd; ++i) xt_shape.push_back(x.shape(i + 1));
  xt_shape.push_back(G * N);
  // With one group this is a plain swap of the end axes, a view the kernel
  // reads in place (backend/cpu/conv.cpp: the weight-gradient layout).
  array xt = G == 1 ? transpose(x, swap_ends(x.ndim()), s)
                    : reshape(transpose(reshape(x, xs, s), xperm, s), xt_shape, s);
  // cotangent: (N, O..., C_out) -> (C_out, O..., N).
  array ct = transpose(cot, swap_ends(cot.ndim()), s);
  // (Cg, K..., C_out) -> (C_out, K..., Cg).
  array g = transpose(convolve_with(xt, ct, std::move(q), s), swap_ends(x.ndim()), s);
  if (p.flip) g = flip(g, spatial_axes(nd), s);
  return g;
}

} // namespace

bool gpu_convolution_gradient_nodes() {
  static const bool on = [] {
    const char* v = std::getenv("LOOM_CUDNN_BACKWARD");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

namespace {

// A 1x1 kernel with unit strides and no padding or dilation: the input
// gradient is one matrix product, which cuBLAS runs 3-4x faster than cuDNN's
// backward-data kernel on an H200 (docs/performance.md, session 12).
bool pointwise(const ConvParams& p, const Shape& weight_shape) {
  for (size_t i = 0; i < p.stride.size(); ++i) {
    if (weight_shape[i + 1] != 1 || p.stride[i] != 1 || p.padding_lo[i] != 0 ||
        p.padding_hi[i] != 0 || p.input_dilation[i] != 1) {
      return false;
    }
  }
  return p.groups == 1;
}

} // namespace

std::vector<array> Convolution::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums, const std::vector<array>&) {
  const array& x = primals[0];
  const array& w = primals[1];
  const array& cot = cotangents[0];
  const bool gpu = stream().device.type == Device::gpu;
  const bool composite_weight = gpu && !gpu_convolution_gradient_nodes();
  const bool composite_input = composite_weight || (gpu && pointwise(p_, w.shape()));
  std::vector<array> grads;
  for (int arg : argnums) {
    if (cot.size() == 0) {
      grads.push_back(zeros_like(arg == 0 ? x : w, stream()));
    } else if (arg == 0 ? composite_input : composite_weight) {
      grads.push_back(arg == 0 ? input_grad_composite(cot, w, p_, x.shape(), stream())
                               : weight_grad_composite(x, cot, p_, w.shape(), stream()));
    } else if (arg == 0) {
      grads.push_back(array(x.shape(), cot.dtype(),
                            std::make_shared<ConvolutionInputGrad>(stream(), p_, x.shape()),
                            {cot, w}));
    } else {
      grads.push_back(array(w.shape(), x.dtype(),
                            std::make_shared<ConvolutionWeightGrad>(stream(), p_, w.shape()),
                            {x, cot}));
    }
  }
  return grads;
}

std::vector<array> Convolution::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  // Bilinear: the tangent is the sum of the convolutions with one factor
  // replaced by its tangent.
  std::vector<array> terms;
  for (size_t i = 0; i < argnums.size(); ++i) {
    terms.push_back(argnums[i] == 0 ? convolve_with(tangents[i], primals[1], p_, stream())
                                    : convolve_with(primals[0], tangents[i], p_, stream()));
  }
  return {terms.size() == 1 ? terms[0] : add(terms[0], terms[1], stream())};
}

std::pair<std::vector<array>, std::vector<int>> Convolution::vmap(const std::vector<array>& inputs,
                                                                  const std::vector<int>& axes) {
  const int bx = axes[0];
  const int bw = axes[1];
  if (bx < 0 && bw < 0) return {{convolve_with(inputs[0], inputs[1], p_, stream())}, {-1}};
  const Stream s = stream();
  if (bw < 0) {
    // Batched input only: the vmapped axis joins the batch axis.
    array x = moveaxis(inputs[0], bx, 0, s);
    const int B = x.shape(0);
    Shape merged(x.shape().begin() + 1, x.shape().end());
    merged[0] *= B;
    array out = convolve_with(reshape(x, merged, s), inputs[1], p_, s);
    Shape split = out.shape();
    split[0] /= B;
    split.insert(split.begin(), B);
    return {{reshape(out, split, s)}, {0}};
  }
  array w = moveaxis(inputs[1], bw, 0, s);
  const int B = w.shape(0);
  const int G = p_.groups;
  const int O = w.shape(1);
  const int nd = w.ndim() - 3;
  // Weights (B, G, Og, K..., Cg) ordered group-major, so that group g of
  // every vmapped entry stays beside its input channels.
  Shape ws{B, G, O / G};
  ws.insert(ws.end(), w.shape().begin() + 2, w.shape().end());
  if (bx < 0) {
    // Batched weight only: the entries become more output channels.
    std::vector<int> perm(ws.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[0], perm[1]);
    Shape flat{G * B * (O / G)};
    flat.insert(flat.end(), w.shape().begin() + 2, w.shape().end());
    array wf = reshape(transpose(reshape(w, ws, s), perm, s), flat, s);
    array out = convolve_with(inputs[0], wf, p_, s);
    // (N, S..., G*B*Og) -> (N, S..., G, B, Og) -> (B, N, S..., G, Og) -> (B, N, S..., O).
    Shape os(out.shape().begin(), out.shape().end() - 1);
    const int lead = static_cast<int>(os.size());
    os.insert(os.end(), {G, B, O / G});
    array r = moveaxis(reshape(out, os, s), lead + 1, 0, s);
    Shape fin(r.shape().begin(), r.shape().end() - 2);
    fin.push_back(O);
    return {{reshape(r, fin, s)}, {0}};
  }
  // Both batched: every entry is its own set of groups.
  array x = moveaxis(inputs[0], bx, 0, s);    // (B, N, S..., C)
  array xm = moveaxis(x, 0, x.ndim() - 2, s); // (N, S..., B, C)
  Shape xs(xm.shape().begin(), xm.shape().end() - 2);
  xs.push_back(B * x.shape(-1));
  Shape flat{B * O};
  flat.insert(flat.end(), w.shape().begin() + 2, w.shape().end());
  ConvParams q = p_;
  q.groups = static_cast<int>(B * G);
  array out = convolve_with(reshape(xm, xs, s), reshape(w, flat, s), std::move(q), s);
  Shape os(out.shape().begin(), out.shape().end() - 1);
  os.push_back(B);
  os.push_back(O);
  array r = moveaxis(reshape(out, os, s), nd + 1, 0, s);
  return {{r}, {0}};
}

// ConvolutionGrad ------------------------------------------------------------

PrimitiveState ConvolutionGrad::state() const {
  PrimitiveState st = conv_state(p_);
  st.push_back({"target", std::vector<int64_t>(target_.begin(), target_.end())});
  return st;
}

array ConvolutionGrad::run_composite(const std::vector<array>& inputs,
                                     const InlineEval& eval) const {
  // The thread evaluating this node may not own its stream (a worker).
  scheduler::StreamBorrow borrow(stream());
  std::vector<array> r = composite(inputs);
  evaluate_inline(r, eval);
  return r[0];
}

namespace {

void check_cotangent(const char* name, const Shape& xs, const Shape& ws, const Shape& cot,
                     const ConvParams& p) {
  const Shape want = conv_output_shape(xs, ws, p);
  if (cot != want) {
    throw std::invalid_argument(std::string("[") + name + "] The cotangent has shape " +
                                shape_to_string(cot) + " where the convolution of an input " +
                                shape_to_string(xs) + " and a weight " + shape_to_string(ws) +
                                " has " + shape_to_string(want) + ".");
  }
}

} // namespace

Shape ConvolutionWeightGrad::gradient_shape(const std::vector<array>& inputs) const {
  // (O, K..., Cg).
  Shape ws = target_;
  ws.front() = inputs[1].shape(-1);
  ws.back() = inputs[0].shape(-1) / p_.groups;
  check_cotangent(name(), inputs[0].shape(), ws, inputs[1].shape(), p_);
  return ws;
}

std::vector<array> ConvolutionWeightGrad::composite(const std::vector<array>& inputs) const {
  return {weight_grad_composite(inputs[0], inputs[1], p_, gradient_shape(inputs), stream())};
}

Shape ConvolutionInputGrad::gradient_shape(const std::vector<array>& inputs) const {
  // (N, S..., C).
  Shape xs = target_;
  xs.front() = inputs[0].shape(0);
  xs.back() = inputs[1].shape(-1) * p_.groups;
  check_cotangent(name(), xs, inputs[1].shape(), inputs[0].shape(), p_);
  return xs;
}

std::vector<array> ConvolutionInputGrad::composite(const std::vector<array>& inputs) const {
  return {input_grad_composite(inputs[0], inputs[1], p_, gradient_shape(inputs), stream())};
}

namespace {

Shape target_from(const PrimitiveState& st, const char* name) {
  std::vector<int> t = state_get<std::vector<int>>(st, name, "target");
  return Shape(t.begin(), t.end());
}

} // namespace

LOOM_REGISTER_PRIMITIVE(ConvolutionWeightGrad, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<ConvolutionWeightGrad>(s, conv_params_from(st, "ConvolutionWeightGrad"),
                                                 target_from(st, "ConvolutionWeightGrad"));
});

LOOM_REGISTER_PRIMITIVE(ConvolutionInputGrad, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<ConvolutionInputGrad>(s, conv_params_from(st, "ConvolutionInputGrad"),
                                                target_from(st, "ConvolutionInputGrad"));
});

array make_convolution(const array& in, const array& wt, ConvParams p, const Stream& s) {
  return convolve_with(in, wt, std::move(p), s);
}

} // namespace loom
