// mx.fast on the GPU: RMSNorm and LayerNorm (one block per row of the last
// axis, float16/bfloat16 in float, rounded once as on the CPU) and RoPE (one
// thread per rotated pair, angles in float as the CPU computes them). Their
// VJPs are composites of ordinary ops, built with the graph, so they run on
// the GPU's other kernels. An input that is not row-major (a transposed
// (B, H, T, D) view, say) is first copied into the output buffer, and the
// kernel then works in place: each thread reads the elements it writes.
#include "loom/primitives/fast.h"

#include <cmath>
#include <string>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"

namespace loom::cuda {

namespace {

constexpr unsigned kThreads = 256;

bool row_dense(const array& a) { return a.flags().row_contiguous && a.data_size() == a.size(); }

// The input's row-major data: its own buffer, or a copy in `y` (the output's).
const void* row_major_input(const array& in, void* y, cudaStream_t s) {
  if (row_dense(in)) return device_data(in, s);
  copy_to_row_major(in, y, s);
  return y;
}

// A per-feature parameter (weight, bias) the kernels read as `n` elements.
bool usable_param(const array& p, Dtype d, long long n) {
  return p.dtype() == d && p.size() == static_cast<size_t>(n) && row_dense(p);
}

} // namespace

std::string norm_kernel_source(const std::string& name, Dtype d, bool layer) {
  std::string st = storage_type(d), ct = compute_type(d);
  std::string src = std::string(jit_prelude()) + row_reduce_prelude();
  src += "extern \"C\" __global__ void " + name + "(const " + st + "* in, const " + st +
         "* __restrict__ w, const " + st + "* __restrict__ b, " + st + "* out, long long n, " + ct +
         " eps) {\n  __shared__ " + ct + " sh[33];\n  const " + st +
         "* x = in + (long long)blockIdx.x * n;\n  " + st +
         "* y = out + (long long)blockIdx.x * n;\n  " + ct + " mu = 0;\n";
  if (layer) {
    src += "  " + ct +
           " total = 0;\n"
           "  for (long long j = threadIdx.x; j < n; j += blockDim.x) total += (" +
           ct + ")loom_ld(x[j]);\n  mu = loom_block_reduce<" + ct + ", false>(total, sh) / (" + ct +
           ")n;\n";
  }
  // The variance about the mean in a second pass (no cancellation), as the CPU.
  src += "  " + ct +
         " ss = 0;\n"
         "  for (long long j = threadIdx.x; j < n; j += blockDim.x) {\n    " +
         ct + " v = (" + ct +
         ")loom_ld(x[j]) - mu;\n    ss += v * v;\n  }\n  ss = loom_block_reduce<" + ct +
         ", false>(ss, sh);\n  const " + ct + " inv = (" + ct + ")1 / sqrt(ss / (" + ct +
         ")n + eps);\n"
         "  for (long long j = threadIdx.x; j < n; j += blockDim.x) {\n    " +
         ct + " v = ((" + ct + ")loom_ld(x[j]) - mu) * inv * (w ? (" + ct + ")loom_ld(w[j]) : (" +
         ct + ")1);\n    if (b) v += (" + ct + ")loom_ld(b[j]);\n    loom_st(y + j, v);\n  }\n}\n";
  return src;
}

std::string rope_kernel_source(const std::string& name, Dtype d) {
  std::string st = storage_type(d), ct = compute_type(d);
  std::string src = jit_prelude();
  // Unit u of a row: a rotated pair (u < half) or a copied feature past dims.
  src += "extern \"C\" __global__ void " + name + "(const " + st + "* in, " + st +
         "* out, const int* __restrict__ offset, const float* __restrict__ freqs, long long "
         "rows, long long T, long long per_batch, long long D, int dims, int traditional, "
         "int per_entry, float scale, float log_step, float sign) {\n"
         "  const int half = dims / 2;\n"
         "  const long long width = half + (D - dims);\n"
         "  const long long total = rows * width;\n"
         "  for (long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x; u < total;\n"
         "       u += (long long)gridDim.x * blockDim.x) {\n"
         "    const long long r = u / width;\n"
         "    const long long k = u - r * width;\n"
         "    const " +
         st + "* x = in + r * D;\n    " + st +
         "* y = out + r * D;\n"
         "    if (k >= half) { const long long j = dims + (k - half); y[j] = x[j]; continue; }\n"
         "    const int i = (int)k;\n"
         "    const long long t = r % T;\n"
         "    const long long entry = r / (T * per_batch);\n"
         "    const float off = (float)offset[per_entry ? entry : 0];\n"
         "    const float inv_freq = freqs ? 1.0f / freqs[i] : expf((float)i * log_step);\n"
         "    const float theta = (((float)t + off) * scale) * inv_freq;\n"
         "    const float c = cosf(theta), sn = sign * sinf(theta);\n"
         "    const long long ia = traditional ? 2 * i : i;\n"
         "    const long long ib = traditional ? 2 * i + 1 : i + half;\n"
         "    const " +
         ct + " a = (" + ct + ")loom_ld(x[ia]), bb = (" + ct +
         ")loom_ld(x[ib]);\n"
         "    loom_st(y + ia, a * (" +
         ct + ")c - bb * (" + ct + ")sn);\n    loom_st(y + ib, a * (" + ct + ")sn + bb * (" + ct +
         ")c);\n  }\n}\n";
  return src;
}

namespace {

bool norm_kernel(const std::vector<array>& inputs, std::vector<array>& outputs, cudaStream_t s,
                 bool layer, bool has_weight, bool has_bias, double eps) {
  const array& in = inputs[0];
  array& out = outputs[0];
  const Dtype d = in.dtype();
  if (!is_float(d) || out.dtype() != d || in.ndim() == 0) return false;
  const long long n = in.shape(-1);
  size_t next = 1;
  const array* w = has_weight ? &inputs[next++] : nullptr;
  const array* b = has_bias ? &inputs[next++] : nullptr;
  if ((w && !usable_param(*w, d, n)) || (b && !usable_param(*b, d, n))) return false;
  if (n == 0 || in.size() == 0) {
    alloc_output(out);
    return true;
  }
  const size_t rows = in.size() / static_cast<size_t>(n);
  if (rows > 0x7fffffffu) return false;
  void* y = alloc_output(out);
  const void* x = row_major_input(in, y, s);
  const void* pw = w ? device_data(*w, s) : nullptr;
  const void* pb = b ? device_data(*b, s) : nullptr;
  std::string name = std::string(layer ? "loom_layer_norm_" : "loom_rms_norm_") +
                     std::to_string(static_cast<int>(d.val));
  cudaKernel_t k = jit_kernel(name, [&] { return norm_kernel_source(name, d, layer); });
  long long cols = n;
  float eps_f = static_cast<float>(eps);
  double eps_d = eps;
  void* eps_arg = d == float64 ? static_cast<void*>(&eps_d) : static_cast<void*>(&eps_f);
  void* args[] = {&x, &pw, &pb, &y, &cols, eps_arg};
  unsigned threads = n >= kThreads ? kThreads : static_cast<unsigned>((n + 31) / 32 * 32);
  check(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(rows)),
                         dim3(threads), args, 0, s),
        layer ? "cudaLaunchKernel (layer_norm)" : "cudaLaunchKernel (rms_norm)");
  return true;
}

bool rms_norm_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                     cudaStream_t s) {
  const auto st = p.state();
  return norm_kernel(inputs, outputs, s, false, state_get<bool>(st, "RMSNorm", "has_weight"), false,
                     state_get<double>(st, "RMSNorm", "eps"));
}

bool layer_norm_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                       cudaStream_t s) {
  const auto st = p.state();
  return norm_kernel(inputs, outputs, s, true, state_get<bool>(st, "LayerNorm", "has_weight"),
                     state_get<bool>(st, "LayerNorm", "has_bias"),
                     state_get<double>(st, "LayerNorm", "eps"));
}

bool rope_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                 cudaStream_t s) {
  const array& in = inputs[0];
  const array& offset = inputs[1];
  array& out = outputs[0];
  const Dtype d = in.dtype();
  if (!is_float(d) || out.dtype() != d || in.ndim() < 2 || offset.dtype() != int32) return false;
  const auto st = p.state();
  const int dims = state_get<int>(st, "RoPE", "dims");
  const bool traditional = state_get<bool>(st, "RoPE", "traditional");
  const double base = state_get<double>(st, "RoPE", "base");
  const double scale = state_get<double>(st, "RoPE", "scale");
  const bool forward = state_get<bool>(st, "RoPE", "forward");
  if (base <= 0 && (inputs.size() < 3 || inputs[2].dtype() != float32)) return false;
  if (out.size() == 0) {
    alloc_output(out);
    return true;
  }
  const long long D = in.shape(-1), T = in.shape(-2), batch = in.shape(0);
  if (dims > D || dims < 0) return false;
  const long long rows = static_cast<long long>(in.size() / static_cast<size_t>(D));
  const long long per_batch = rows / (batch * T);
  void* y = alloc_output(out);
  const void* x = row_major_input(in, y, s);
  const void* off = device_data(offset, s);
  const void* freqs = base > 0 ? nullptr : device_data(inputs[2], s);
  int idims = dims, trad = traditional, per_entry = offset.size() != 1;
  float fscale = static_cast<float>(scale);
  const int half = dims / 2;
  // The CPU's exponent step, computed the same way (in double, then float).
  float log_step = base > 0 ? static_cast<float>(-std::log(base) / half) : 0.0f;
  float sign = forward ? 1.0f : -1.0f;
  long long r = rows, t = T, pb = per_batch, dd = D;
  std::string name = "loom_rope_" + std::to_string(static_cast<int>(d.val));
  cudaKernel_t k = jit_kernel(name, [&] { return rope_kernel_source(name, d); });
  void* args[] = {&x,  &y,     &off,  &freqs,     &r,      &t,        &pb,
                  &dd, &idims, &trad, &per_entry, &fscale, &log_step, &sign};
  launch_elementwise(k, static_cast<size_t>(rows * (half + (D - dims))), args, s);
  return true;
}

struct Registration {
  Registration() {
    register_kernel(typeid(RMSNorm), &rms_norm_kernel);
    register_kernel(typeid(LayerNorm), &layer_norm_kernel);
    register_kernel(typeid(RoPE), &rope_kernel);
  }
} registration;

} // namespace
} // namespace loom::cuda
