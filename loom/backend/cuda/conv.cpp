// Convolution on the GPU as im2col + one cuBLAS GEMM per group (strided
// batched over the groups), every form the primitive has: 1 to 3 spatial
// axes, strides, asymmetric and negative padding, kernel and input dilation
// (transposed convolutions), groups, flip. Gradients are convolutions of the
// same primitive, so they run here too.
//
// The im2col kernel writes, for a chunk of output positions, the patch of
// each position as [group][tap][channel] (zeros where a tap falls in padding
// or between dilated input elements), so the weight (O, taps..., C/G) is
// already the GEMM's other operand and the output (positions, O) is written
// in place, channels last. Chunks keep the patch buffer under 2^28 elements.
// A 1x1 convolution with unit stride and no padding or dilation reads the
// input directly. float32 (strict FP32 as matmul, LOOM_CUDA_TF32=1 for TF32),
// float64, float16 and bfloat16 (accumulating in float32). When a cuDNN 9
// library loads (conv_cudnn.cpp), the forms it expresses exactly go to it
// first; this path serves the rest (input dilation, uneven padding, 1x1).
// The gradient nodes go to cuDNN's backward kernels, or else run their
// composite, whose convolutions come here.
#include "loom/primitives/conv.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/conv_cudnn.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/gemm_util.h"
#include "loom/backend/cuda/jit.h"

namespace loom::cuda {

namespace {

// The geometry the im2col kernel reads, spatial axes right-aligned to 3.
struct ConvGeom {
  long long in[3], k[3], out[3], stride[3], kdil[3], pad[3], idil[3];
  long long C, G, Cg, taps, positions; // positions: output positions per image
  int flip;
};

const char* kGeomDecl = R"(
struct ConvGeom {
  long long in[3], k[3], out[3], stride[3], kdil[3], pad[3], idil[3];
  long long C, G, Cg, taps, positions;
  int flip;
};
)";

std::string im2col_source(const std::string& name, Dtype d) {
  std::string src = jit_prelude();
  src += "typedef " + std::string(storage_type(d)) + " T;\n";
  src += kGeomDecl;
  src += R"(
// Patches of output positions [p0, p0 + count) of the batch, [pos][g][tap][c].
extern "C" __global__ void NAME(const T* __restrict__ x, T* __restrict__ col, ConvGeom g,
                                long long p0, long long count) {
  const long long width = g.G * g.taps * g.Cg;
  const long long total = count * width;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long c = e % g.Cg;
    const long long t = (e / g.Cg) % g.taps;
    const long long grp = (e / (g.Cg * g.taps)) % g.G;
    long long p = p0 + e / width;
    const long long n = p / g.positions;
    long long rest = p % g.positions;
    long long o[3], j[3];
    o[2] = rest % g.out[2]; rest /= g.out[2];
    o[1] = rest % g.out[1]; o[0] = rest / g.out[1];
    long long tt = t;
    j[2] = tt % g.k[2]; tt /= g.k[2];
    j[1] = tt % g.k[1]; j[0] = tt / g.k[1];
    long long src = n;
    bool inside = true;
    for (int a = 0; a < 3; ++a) {
      const long long tap = g.flip ? g.k[a] - 1 - j[a] : j[a];
      const long long pos = o[a] * g.stride[a] + tap * g.kdil[a] - g.pad[a];
      const long long span = g.in[a] == 0 ? 0 : (g.in[a] - 1) * g.idil[a] + 1;
      if (pos < 0 || pos >= span || pos % g.idil[a] != 0) inside = false;
      src = src * g.in[a] + (inside ? pos / g.idil[a] : 0);
    }
    T v;
    if (inside) v = x[src * g.C + grp * g.Cg + c];
    else loom_st(&v, 0.0f);
    col[e] = v;
  }
}
)";
  size_t pos = src.find("void NAME(");
  src.replace(pos + 5, 4, name);
  return src;
}

bool conv_kernel(Primitive& prim, const std::vector<array>& inputs, std::vector<array>& outputs,
                 cudaStream_t s) {
  auto* conv = dynamic_cast<Convolution*>(&prim);
  if (conv == nullptr) return false;
  const ConvParams& p = conv->params();
  const array &x = inputs[0], &w = inputs[1];
  array& out = outputs[0];
  const Dtype d = out.dtype();
  if ((d != float32 && d != float64 && d != float16 && d != bfloat16) || x.dtype() != d ||
      w.dtype() != d) {
    return false;
  }
  const int nd = x.ndim() - 2;
  if (nd < 1 || nd > 3 || w.ndim() != x.ndim() || out.ndim() != x.ndim()) return false;
  ConvGeom g{};
  for (int a = 0; a < 3; ++a) {
    g.in[a] = g.k[a] = g.out[a] = g.stride[a] = g.kdil[a] = g.idil[a] = 1;
    g.pad[a] = 0;
  }
  bool identity = true;
  for (int i = 0; i < nd; ++i) {
    const int a = 3 - nd + i;
    g.in[a] = x.shape(i + 1);
    g.k[a] = w.shape(i + 1);
    g.out[a] = out.shape(i + 1);
    g.stride[a] = p.stride[i];
    g.kdil[a] = p.kernel_dilation[i];
    g.pad[a] = p.padding_lo[i];
    g.idil[a] = p.input_dilation[i];
    if (g.idil[a] < 1 || g.stride[a] < 1) return false;
    if (g.k[a] != 1 || g.out[a] != g.in[a] || g.stride[a] != 1 || g.pad[a] != 0 || g.idil[a] != 1)
      identity = false;
  }
  g.C = x.shape(-1);
  g.G = p.groups;
  if (g.G < 1 || g.C % g.G != 0) return false;
  g.Cg = g.C / g.G;
  g.flip = p.flip ? 1 : 0;
  g.taps = g.k[0] * g.k[1] * g.k[2];
  g.positions = g.out[0] * g.out[1] * g.out[2];
  const long long O = out.shape(-1);
  if (O % g.G != 0 || w.shape(0) != O || w.shape(-1) != g.Cg) return false;
  const long long Og = O / g.G, Kc = g.taps * g.Cg;
  const long long N = x.shape(0);
  const long long rows = N * g.positions;
  if (Kc > 0x7fffffffLL || O > 0x7fffffffLL) return false;
  void* y = alloc_output(out);
  if (out.size() == 0) return true;
  if (Kc == 0 || x.size() == 0) {
    check(cudaMemsetAsync(y, 0, out.nbytes(), s), "cudaMemsetAsync (conv)");
    return true;
  }
  auto& pool = device_pool(current_device());
  allocator::Buffer tx{nullptr, 0}, tw{nullptr, 0}, col{nullptr, 0};
  const void* xp = dense_data(x, tx, s);
  const void* wp = dense_data(w, tw, s);
  if (!identity && cudnn_conv_forward(p, x, w, out, xp, wp, y, s)) {
    if (tx.ptr != nullptr) pool.free(tx);
    if (tw.ptr != nullptr) pool.free(tw);
    return true;
  }
  const long long width = g.G * Kc;
  // Output positions per chunk: patches under 2^28 elements, GEMM sizes in int.
  const long long chunk =
      identity ? std::min<long long>(rows, 0x7fffffffLL)
               : std::max<long long>(1, std::min<long long>((1LL << 28) / width, 0x7fffffffLL));
  const size_t esize = d.size;
  cudaKernel_t k = nullptr;
  std::string name = "loom_im2col_" + std::to_string(static_cast<int>(d.val));
  if (!identity) {
    k = jit_kernel(name, [&] { return im2col_source(name, d); });
    col = pool.malloc(static_cast<size_t>(std::min(chunk, rows) * width) * esize);
  }
  bool ok = true;
  for (long long p0 = 0; p0 < rows && ok; p0 += chunk) {
    long long count = std::min(chunk, rows - p0);
    const void* b;
    if (identity) {
      b = static_cast<const char*>(xp) + static_cast<size_t>(p0 * g.C) * esize;
    } else {
      void* cp = col.ptr;
      void* args[] = {&xp, &cp, &g, &p0, &count};
      const long long total = count * width;
      const long long blocks = std::min<long long>((total + 255) / 256, 132LL * 64);
      check(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(blocks)),
                             dim3(256), args, 0, s),
            "cudaLaunchKernel (im2col)");
      b = col.ptr;
    }
    void* c = static_cast<char*>(y) + static_cast<size_t>(p0 * O) * esize;
    ok = gemm(d, true, false, static_cast<int>(Og), static_cast<int>(count), static_cast<int>(Kc),
              wp, static_cast<int>(Kc), Og * Kc, b, static_cast<int>(width), Kc, c,
              static_cast<int>(O), Og, static_cast<int>(g.G), s, "conv");
  }
  if (tx.ptr != nullptr) pool.free(tx);
  if (tw.ptr != nullptr) pool.free(tw);
  if (col.ptr != nullptr) pool.free(col);
  // Without cuBLAS the first GEMM declined before anything was written.
  return ok;
}

// A gradient node (ConvolutionWeightGrad, ConvolutionInputGrad): cuDNN's
// backward filter or backward data when it takes the form, else its
// composite (the convolutions above, with the copies that lay out their
// operands), op by op on this stream.
bool conv_grad_kernel(Primitive& prim, const std::vector<array>& inputs,
                      std::vector<array>& outputs, cudaStream_t s) {
  auto* grad = dynamic_cast<ConvolutionGrad*>(&prim);
  if (grad == nullptr) return false;
  const bool weight = dynamic_cast<ConvolutionWeightGrad*>(&prim) != nullptr;
  const ConvParams& p = grad->params();
  grad->gradient_shape(inputs); // raises for inputs of disagreeing shapes
  array& out = outputs[0];
  const Dtype d = out.dtype();
  const bool typed = (d == float32 || d == float64 || d == float16 || d == bfloat16) &&
                     inputs[0].dtype() == d && inputs[1].dtype() == d;
  const int nd = out.ndim() - 2;
  // With LOOM_CUDNN_BACKWARD=0 the nodes only come from an imported or
  // deserialised graph, and run their composite.
  const bool backward = gpu_convolution_gradient_nodes();
  // Forms cuDNN cannot take are known before any operand is laid out.
  bool expressible = backward && typed && nd >= 1 && nd <= 3 && out.size() > 0 &&
                     inputs[0].size() > 0 && inputs[1].size() > 0 && cudnn_available();
  for (int i = 0; expressible && i < nd; ++i) {
    expressible = p.input_dilation[i] == 1 && p.padding_lo[i] >= 0;
  }
  if (expressible) {
    // The forward's shapes: x, w and y = dy.
    const Shape& xs = weight ? inputs[0].shape() : out.shape();
    const Shape& ws = weight ? out.shape() : inputs[1].shape();
    const Shape& ys = weight ? inputs[1].shape() : inputs[0].shape();
    auto& pool = device_pool(current_device());
    allocator::Buffer ta{nullptr, 0}, tb{nullptr, 0};
    const void* a = dense_data(inputs[0], ta, s);
    const void* b = dense_data(inputs[1], tb, s);
    void* r = alloc_output(out);
    const bool ran = weight ? cudnn_conv_backward_filter(p, xs, ws, ys, d, a, b, r, s)
                            : cudnn_conv_backward_data(p, xs, ws, ys, d, a, b, r, s);
    if (ta.ptr != nullptr) pool.free(ta);
    if (tb.ptr != nullptr) pool.free(tb);
    if (ran) return true;
  }
  out.copy_shared_buffer(
      grad->run_composite(inputs, [](Primitive& op, const std::vector<array>& in,
                                     std::vector<array>& outs) { eval_primitive(op, in, outs); }));
  return true;
}

struct Registration {
  Registration() {
    register_kernel(typeid(Convolution), &conv_kernel);
    register_kernel(typeid(ConvolutionWeightGrad), &conv_grad_kernel);
    register_kernel(typeid(ConvolutionInputGrad), &conv_grad_kernel);
  }
} registration;

} // namespace

std::string im2col_kernel_source(const std::string& name, Dtype d) {
  return im2col_source(name, d);
}

} // namespace loom::cuda
