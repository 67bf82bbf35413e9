// FFT on the GPU through cuFFT (loaded with dlopen on first use, as cuBLAS):
// fft/ifft/rfft/irfft and their n-d forms, the same passes as the CPU kernel.
//
// A complex transform over trailing axes (up to three, in order) of a dense
// array is one plan-many call with the leading axes as its batch; other axis
// sets run one axis at a time, in place in the output: a line of the axis is
// either contiguous (one call, the outer lines as batch) or strided by the
// `inner` extent (batch over whichever of outer/inner is larger, one call per
// line of the other). rfft transforms its real (last listed) axis first, then
// the others in place (one R2C plan when the axes are trailing and in
// order); irfft does the complex axes first in a scratch copy
// (cuFFT's complex-to-real transform overwrites its input), then the real
// one. A float32 input to a complex transform is widened first. The scale is
// one pass at the end. Plans are cached per worker thread (each worker drives
// one stream) by type, sizes and layout. float64/complex128 never reach here
// (the ops compute in float32/complex64). The Hadamard transform of
// power-of-two order is here too (same primitive family).
#include "loom/primitives/fft.h"

#include <cufft.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"

namespace loom::cuda {

namespace {

struct Cufft {
  decltype(&cufftPlanMany) plan_many = nullptr;
  decltype(&cufftSetStream) set_stream = nullptr;
  decltype(&cufftExecC2C) c2c = nullptr;
  decltype(&cufftExecR2C) r2c = nullptr;
  decltype(&cufftExecC2R) c2r = nullptr;
  bool ok() const { return plan_many && set_stream && c2c && r2c && c2r; }
};

const Cufft& cufft() {
  static Cufft lib = [] {
    Cufft c;
    LibraryLoad loading;
    void* h = nullptr;
    for (const char* name : {"libcufft.so.12", "libcufft.so.11", "libcufft.so",
                             "/usr/local/cuda/lib64/libcufft.so.12"}) {
      if ((h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    }
    if (h == nullptr) return c;
    close_before_teardown(); // after the library's own teardown was registered
    c.plan_many = reinterpret_cast<decltype(c.plan_many)>(dlsym(h, "cufftPlanMany"));
    c.set_stream = reinterpret_cast<decltype(c.set_stream)>(dlsym(h, "cufftSetStream"));
    c.c2c = reinterpret_cast<decltype(c.c2c)>(dlsym(h, "cufftExecC2C"));
    c.r2c = reinterpret_cast<decltype(c.r2c)>(dlsym(h, "cufftExecR2C"));
    c.c2r = reinterpret_cast<decltype(c.c2r)>(dlsym(h, "cufftExecC2R"));
    return c;
  }();
  return lib;
}

void check_fft(cufftResult r, const char* what) {
  if (r != CUFFT_SUCCESS) {
    throw std::runtime_error(std::string("[fft] cuFFT ") + what + " failed with status " +
                             std::to_string(static_cast<int>(r)) + ".");
  }
}

// One plan's description: rank and logical sizes, the input and output
// embeddings, strides and distances, type and batch.
using PlanKey = std::tuple<int, int, std::vector<int>, std::vector<int>, int, int, std::vector<int>,
                           int, int, int>;

cufftHandle plan_for(cufftType type, std::vector<int> n, std::vector<int> inembed, int istride,
                     int idist, std::vector<int> onembed, int ostride, int odist, int batch,
                     cudaStream_t s) {
  // Plans must not be shared by threads at once; each worker serves one stream.
  thread_local std::map<PlanKey, cufftHandle> plans;
  PlanKey key{current_device(),
              static_cast<int>(type),
              n,
              inembed,
              istride,
              idist,
              onembed,
              ostride,
              odist,
              batch};
  auto it = plans.find(key);
  cufftHandle h;
  if (it != plans.end()) {
    h = it->second;
  } else {
    LibraryLoad loading; // a first plan initialises cuFFT's state
    check_fft(
        cufft().plan_many(&h, static_cast<int>(n.size()), n.data(),
                          inembed.empty() ? nullptr : inembed.data(), istride, idist,
                          onembed.empty() ? nullptr : onembed.data(), ostride, odist, type, batch),
        "plan creation");
    plans.emplace(key, h);
  }
  check_fft(cufft().set_stream(h, s), "set stream");
  return h;
}

void exec(cufftType type, cufftHandle h, void* in, void* out, bool inverse) {
  if (type == CUFFT_C2C) {
    check_fft(cufft().c2c(h, static_cast<cufftComplex*>(in), static_cast<cufftComplex*>(out),
                          inverse ? CUFFT_INVERSE : CUFFT_FORWARD),
              "C2C");
  } else if (type == CUFFT_R2C) {
    check_fft(cufft().r2c(h, static_cast<cufftReal*>(in), static_cast<cufftComplex*>(out)), "R2C");
  } else {
    check_fft(cufft().c2r(h, static_cast<cufftComplex*>(in), static_cast<cufftReal*>(out)), "C2R");
  }
}

// One axis of a dense (outer, n, inner) array: logical length `len`, `nin`
// and `nout` stored elements along it (they differ for R2C and C2R).
void transform_axis(cufftType type, void* in, void* out, long long outer, long long inner, int len,
                    int nin, int nout, bool inverse, cudaStream_t s) {
  const size_t isz = type == CUFFT_R2C ? sizeof(float) : sizeof(cufftComplex);
  const size_t osz = type == CUFFT_C2R ? sizeof(float) : sizeof(cufftComplex);
  char* ip = static_cast<char*>(in);
  char* op = static_cast<char*>(out);
  if (inner == 1) {
    cufftHandle h =
        plan_for(type, {len}, {nin}, 1, nin, {nout}, 1, nout, static_cast<int>(outer), s);
    exec(type, h, ip, op, inverse);
  } else if (outer <= inner || type != CUFFT_C2C) {
    // Batch over the inner lines of one outer slice, one call per slice. Real
    // transforms always take this branch: cuFFT refuses a real side that is
    // not 8-byte aligned (status 4), and the other branch offsets it by one
    // float per line (the caller checks the slices' offsets, real_axis_ok).
    cufftHandle h = plan_for(type, {len}, {nin}, static_cast<int>(inner), 1, {nout},
                             static_cast<int>(inner), 1, static_cast<int>(inner), s);
    for (long long o = 0; o < outer; ++o) {
      exec(type, h, ip + o * nin * inner * isz, op + o * nout * inner * osz, inverse);
    }
  } else {
    cufftHandle h = plan_for(type, {len}, {nin}, static_cast<int>(inner),
                             static_cast<int>(nin * inner), {nout}, static_cast<int>(inner),
                             static_cast<int>(nout * inner), static_cast<int>(outer), s);
    for (long long j = 0; j < inner; ++j) exec(type, h, ip + j * isz, op + j * osz, inverse);
  }
}

struct Lines {
  long long outer = 1, inner = 1;
};

// Whether the real side of a real transform along an axis of (outer, real_len,
// inner) lines starts 8-byte aligned in every call transform_axis makes.
bool real_axis_ok(const Lines& l, long long real_len) {
  return l.inner == 1 || l.outer == 1 || (real_len * l.inner) % 2 == 0;
}

Lines lines_of(const Shape& shape, int axis) {
  Lines l;
  for (int i = 0; i < axis; ++i) l.outer *= shape[i];
  for (int i = axis + 1; i < static_cast<int>(shape.size()); ++i) l.inner *= shape[i];
  return l;
}

const char* kHelpers = R"(
extern "C" __global__ void loom_fft_widen(const float* __restrict__ in, float2* __restrict__ out,
                                          long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    float2 v;
    v.x = in[i];
    v.y = 0.0f;
    out[i] = v;
  }
}
extern "C" __global__ void loom_fft_scale(float* __restrict__ x, long long n, float s) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) x[i] = x[i] * s;
}
)";

void launch_helper(const char* name, long long n, void** args, cudaStream_t s) {
  if (n <= 0) return;
  cudaKernel_t k = jit_kernel(name, [] { return std::string(kHelpers); });
  const long long blocks = std::min<long long>((n + 255) / 256, 132LL * 64);
  check(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(blocks)),
                         dim3(256), args, 0, s),
        "cudaLaunchKernel (fft)");
}

// Whether `axes` are the last axes.size() <= 3 axes of an nd-array, in order.
bool trailing_in_order(const std::vector<int>& axes, int nd) {
  if (axes.size() > 3) return false;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] != nd - static_cast<int>(axes.size()) + static_cast<int>(i)) return false;
  }
  return true;
}

bool fft_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                cudaStream_t s) {
  const PrimitiveState st = p.state();
  const std::vector<int64_t> axes64 = state_get<std::vector<int64_t>>(st, "FFT", "axes");
  const bool inverse = state_get<bool>(st, "FFT", "inverse");
  const bool real = state_get<bool>(st, "FFT", "real");
  const double scale = state_get<double>(st, "FFT", "scale");
  const array& in = inputs[0];
  array& out = outputs[0];
  if (axes64.empty()) return false;
  if (real ? (inverse ? in.dtype() != complex64 || out.dtype() != float32
                      : in.dtype() != float32 || out.dtype() != complex64)
           : (in.dtype() != complex64 && in.dtype() != float32) || out.dtype() != complex64) {
    return false;
  }
  // cuFFT's plan-many sizes are ints.
  if (in.size() > 0x7fffffffLL || out.size() > 0x7fffffffLL) return false;
  std::vector<int> axes(axes64.begin(), axes64.end());
  for (int a : axes) {
    if (a < 0 || a >= in.ndim()) return false;
  }
  if (!cufft().ok()) return false;
  const int nd = out.ndim();
  if (real && !(!inverse && trailing_in_order(axes, nd))) {
    const int last = axes.back();
    const Shape& real_shape = inverse ? out.shape() : in.shape();
    if (!real_axis_ok(lines_of(real_shape, last), real_shape[last])) return false;
  }
  void* y = alloc_output(out);
  if (out.size() == 0) return true;
  auto& pool = device_pool(current_device());
  allocator::Buffer dense{nullptr, 0}, scratch{nullptr, 0};
  const void* x = nullptr;
  const bool row_dense = in.flags().row_contiguous && in.data_size() == in.size();
  if (row_dense) x = device_data(in, s);
  // A real input read by cuFFT itself must start 8-byte aligned (a view at an
  // odd offset is copied).
  if (!row_dense || (real && !inverse && reinterpret_cast<uintptr_t>(x) % 8 != 0)) {
    dense = pool.malloc(in.nbytes());
    copy_to_row_major(in, dense.ptr, s);
    x = dense.ptr;
  }
  if (!real) {
    if (in.dtype() == float32) {
      long long n = static_cast<long long>(in.size());
      void* args[] = {&x, &y, &n};
      launch_helper("loom_fft_widen", n, args, s);
    } else {
      check(cudaMemcpyAsync(y, x, out.nbytes(), cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
    }
    // Trailing axes in order (fft, fft2, fftn over the last <= 3 axes): one plan.
    std::vector<int> sorted = axes;
    std::sort(sorted.begin(), sorted.end());
    if (trailing_in_order(axes, nd)) {
      std::vector<int> n;
      long long batch = 1;
      for (int i = 0; i < nd; ++i) {
        if (i < sorted.front())
          batch *= out.shape(i);
        else
          n.push_back(static_cast<int>(out.shape(i)));
      }
      cufftHandle h = plan_for(CUFFT_C2C, n, {}, 1, 0, {}, 1, 0, static_cast<int>(batch), s);
      exec(CUFFT_C2C, h, y, y, inverse);
    } else {
      std::sort(sorted.rbegin(), sorted.rend());
      for (int a : sorted) {
        Lines l = lines_of(out.shape(), a);
        const int len = static_cast<int>(out.shape(a));
        transform_axis(CUFFT_C2C, y, y, l.outer, l.inner, len, len, len, inverse, s);
      }
    }
  } else if (!inverse && trailing_in_order(axes, nd)) {
    // rfft, rfft2, rfftn over the last <= 3 axes: one plan.
    std::vector<int> n;
    long long batch = 1;
    for (int i = 0; i < nd; ++i) {
      if (i < axes.front())
        batch *= in.shape(i);
      else
        n.push_back(static_cast<int>(in.shape(i)));
    }
    cufftHandle h = plan_for(CUFFT_R2C, n, {}, 1, 0, {}, 1, 0, static_cast<int>(batch), s);
    exec(CUFFT_R2C, h, const_cast<void*>(x), y, false);
  } else if (!inverse) {
    const int last = axes.back();
    Lines l = lines_of(in.shape(), last);
    transform_axis(CUFFT_R2C, const_cast<void*>(x), y, l.outer, l.inner,
                   static_cast<int>(in.shape(last)), static_cast<int>(in.shape(last)),
                   static_cast<int>(out.shape(last)), false, s);
    for (size_t i = 0; i + 1 < axes.size(); ++i) {
      Lines m = lines_of(out.shape(), axes[i]);
      const int len = static_cast<int>(out.shape(axes[i]));
      transform_axis(CUFFT_C2C, y, y, m.outer, m.inner, len, len, len, false, s);
    }
  } else {
    scratch = pool.malloc(in.nbytes());
    check(cudaMemcpyAsync(scratch.ptr, x, in.nbytes(), cudaMemcpyDeviceToDevice, s),
          "cudaMemcpyAsync");
    for (size_t i = 0; i + 1 < axes.size(); ++i) {
      Lines m = lines_of(in.shape(), axes[i]);
      const int len = static_cast<int>(in.shape(axes[i]));
      transform_axis(CUFFT_C2C, scratch.ptr, scratch.ptr, m.outer, m.inner, len, len, len, true, s);
    }
    const int last = axes.back();
    Lines l = lines_of(out.shape(), last);
    transform_axis(CUFFT_C2R, scratch.ptr, y, l.outer, l.inner, static_cast<int>(out.shape(last)),
                   static_cast<int>(in.shape(last)), static_cast<int>(out.shape(last)), true, s);
  }
  if (scale != 1.0) {
    long long n = static_cast<long long>(out.size()) * (out.dtype() == complex64 ? 2 : 1);
    float f = static_cast<float>(scale);
    void* args[] = {&y, &n, &f};
    launch_helper("loom_fft_scale", n, args, s);
  }
  if (dense.ptr != nullptr) pool.free(dense);
  if (scratch.ptr != nullptr) pool.free(scratch);
  return true;
}

// Hadamard of power-of-two order (m = 1), n <= 8192: one block per row, the
// CPU kernel's butterfly stages in its order, in float, then the scale, so
// the result is the CPU's bit for bit. Orders 12, 20 and 28 times a power of
// two stay on the CPU.
constexpr long long kMaxHadamard = 8192;

std::string hadamard_source(const std::string& name, Dtype d) {
  std::string src = jit_prelude();
  src += "typedef " + std::string(storage_type(d)) + " T;\n";
  src += R"(
extern "C" __global__ void NAME(const T* __restrict__ in, T* __restrict__ out, long long n,
                                float scale) {
  __shared__ float x[8192];
  const T* row = in + (long long)blockIdx.x * n;
  for (long long j = threadIdx.x; j < n; j += blockDim.x) x[j] = (float)loom_ld(row[j]);
  __syncthreads();
  for (long long h = 1; h < n; h *= 2) {
    for (long long q = threadIdx.x; q < n / 2; q += blockDim.x) {
      const long long i = (q / h) * 2 * h + q % h;
      const float u = x[i], v = x[i + h];
      x[i] = u + v;
      x[i + h] = u - v;
    }
    __syncthreads();
  }
  T* dst = out + (long long)blockIdx.x * n;
  for (long long j = threadIdx.x; j < n; j += blockDim.x) loom_st(dst + j, x[j] * scale);
}
)";
  size_t pos = src.find("void NAME(");
  src.replace(pos + 5, 4, name);
  return src;
}

bool hadamard_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                     cudaStream_t s) {
  const array& in = inputs[0];
  array& out = outputs[0];
  const Dtype d = in.dtype();
  if ((d != float32 && d != float16 && d != bfloat16 && d != float64) || out.dtype() != d) {
    return false;
  }
  long long n = in.ndim() == 0 ? 1 : in.shape(-1);
  if (n < 1 || n > kMaxHadamard || (n & (n - 1)) != 0) return false;
  const long long rows = static_cast<long long>(in.size()) / n;
  if (rows > 0x7fffffffLL) return false;
  float scale = static_cast<float>(state_get<double>(p.state(), "Hadamard", "scale"));
  void* y = alloc_output(out);
  if (out.size() == 0) return true;
  allocator::Buffer tmp{nullptr, 0};
  const void* x = dense_data(in, tmp, s);
  const std::string name = "loom_hadamard_" + std::to_string(static_cast<int>(d.val));
  cudaKernel_t k = jit_kernel(name, [&] { return hadamard_source(name, d); });
  const unsigned threads = n >= 512 ? 256u : 64u;
  void* args[] = {&x, &y, &n, &scale};
  check(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(rows)),
                         dim3(threads), args, 0, s),
        "cudaLaunchKernel (hadamard)");
  if (tmp.ptr != nullptr) device_pool(current_device()).free(tmp);
  return true;
}

struct Registration {
  Registration() {
    register_kernel(typeid(FFT), &fft_kernel);
    register_kernel(typeid(Hadamard), &hadamard_kernel);
  }
} registration;

} // namespace

// The helper kernels' source, for the NVRTC build test.
std::string fft_helper_source() { return kHelpers; }
std::string hadamard_kernel_source(const std::string& name, Dtype d) {
  return hadamard_source(name, d);
}

} // namespace loom::cuda
