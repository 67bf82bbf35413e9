// Convolution forward, backward data and backward filter through cuDNN's
// convolution API, loaded with dlopen on first use (Loom links no CUDA library but the runtime).
// cuDNN takes channels-last tensors (given by their strides) and filters in KRSC order, which is
// the layout Loom's Convolution already has: nothing is transposed.
//
// The library is looked for at LOOM_CUDNN_PATH (a file or its folder; the
// Python package points it at the nvidia-cudnn wheel that PyTorch and JAX
// install, when there is one), then by soname on the loader's path. The
// declarations below are the few entry points used, with cuDNN 9's
// documented enum values, so that Loom builds without cuDNN's headers.
//
// The algorithm is cuDNN's heuristic first choice that fits the workspace
// cap (what PyTorch does without benchmark mode), cached per geometry and
// direction.
#include "loom/backend/cuda/conv_cudnn.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "loom/backend/cuda/cuda.h"

namespace loom::cuda {

namespace {

using Status = int;
constexpr Status kSuccess = 0;
using Handle = struct CudnnContext*;
using TensorDesc = struct CudnnTensorStruct*;
using FilterDesc = struct CudnnFilterStruct*;
using ConvDesc = struct CudnnConvolutionStruct*;

// cudnnDataType_t, cudnnTensorFormat_t, cudnnMathType_t, cudnnConvolutionMode_t.
constexpr int kFloat = 0, kDouble = 1, kHalf = 2, kBfloat16 = 9;
constexpr int kFormatNhwc = 1;
constexpr int kDefaultMath = 0, kTensorOpMath = 1, kFmaMath = 3;
constexpr int kConvolution = 0, kCrossCorrelation = 1;

// cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t, which share a layout.
struct AlgoPerf {
  int algo;
  Status status;
  float time;
  size_t memory;
  int determinism;
  int math_type;
  int reserved[3];
};

struct Library {
  size_t (*version)() = nullptr;
  Status (*create)(Handle*) = nullptr;
  Status (*set_stream)(Handle, cudaStream_t) = nullptr;
  Status (*create_tensor)(TensorDesc*) = nullptr;
  Status (*set_tensor)(TensorDesc, int, int, const int*, const int*) = nullptr;
  Status (*destroy_tensor)(TensorDesc) = nullptr;
  Status (*create_filter)(FilterDesc*) = nullptr;
  Status (*set_filter)(FilterDesc, int, int, int, const int*) = nullptr;
  Status (*destroy_filter)(FilterDesc) = nullptr;
  Status (*create_conv)(ConvDesc*) = nullptr;
  Status (*set_conv)(ConvDesc, int, const int*, const int*, const int*, int, int) = nullptr;
  Status (*set_groups)(ConvDesc, int) = nullptr;
  Status (*set_math)(ConvDesc, int) = nullptr;
  Status (*destroy_conv)(ConvDesc) = nullptr;
  Status (*output_dims)(ConvDesc, TensorDesc, FilterDesc, int, int*) = nullptr;
  Status (*algorithms)(Handle, TensorDesc, FilterDesc, ConvDesc, TensorDesc, int, int*,
                       AlgoPerf*) = nullptr;
  Status (*workspace)(Handle, TensorDesc, FilterDesc, ConvDesc, TensorDesc, int, size_t*) = nullptr;
  Status (*forward)(Handle, const void*, TensorDesc, const void*, FilterDesc, const void*, ConvDesc,
                    int, void*, size_t, const void*, TensorDesc, void*) = nullptr;
  // Backward data: (w, dy) -> dx.
  Status (*data_algorithms)(Handle, FilterDesc, TensorDesc, ConvDesc, TensorDesc, int, int*,
                            AlgoPerf*) = nullptr;
  Status (*data_workspace)(Handle, FilterDesc, TensorDesc, ConvDesc, TensorDesc, int,
                           size_t*) = nullptr;
  Status (*backward_data)(Handle, const void*, FilterDesc, const void*, TensorDesc, const void*,
                          ConvDesc, int, void*, size_t, const void*, TensorDesc, void*) = nullptr;
  // Backward filter: (x, dy) -> dw.
  Status (*filter_algorithms)(Handle, TensorDesc, TensorDesc, ConvDesc, FilterDesc, int, int*,
                              AlgoPerf*) = nullptr;
  Status (*filter_workspace)(Handle, TensorDesc, TensorDesc, ConvDesc, FilterDesc, int,
                             size_t*) = nullptr;
  Status (*backward_filter)(Handle, const void*, TensorDesc, const void*, TensorDesc, const void*,
                            ConvDesc, int, void*, size_t, const void*, FilterDesc, void*) = nullptr;

  bool ok() const {
    return version && create && set_stream && create_tensor && set_tensor && destroy_tensor &&
           create_filter && set_filter && destroy_filter && create_conv && set_conv && set_groups &&
           set_math && destroy_conv && output_dims && algorithms && workspace && forward;
  }
  bool has_backward() const {
    return data_algorithms && data_workspace && backward_data && filter_algorithms &&
           filter_workspace && backward_filter;
  }
};

template <typename Fn>
void bind(void* h, Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(dlsym(h, name));
}

void* open_cudnn() {
  if (const char* path = std::getenv("LOOM_CUDNN_PATH"); path != nullptr && *path != '\0') {
    std::string p = path;
    if (void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    if (void* h = dlopen((p + "/libcudnn.so.9").c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  }
  return dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
}

const Library& library() {
  static Library lib = [] {
    Library l;
    const char* off = std::getenv("LOOM_CUDNN");
    if (off != nullptr && std::string(off) == "0") return l;
    LibraryLoad loading;
    void* h = open_cudnn();
    if (h == nullptr) return l;
    close_before_teardown(); // after the library's own teardown was registered
    bind(h, l.version, "cudnnGetVersion");
    bind(h, l.create, "cudnnCreate");
    bind(h, l.set_stream, "cudnnSetStream");
    bind(h, l.create_tensor, "cudnnCreateTensorDescriptor");
    bind(h, l.set_tensor, "cudnnSetTensorNdDescriptor");
    bind(h, l.destroy_tensor, "cudnnDestroyTensorDescriptor");
    bind(h, l.create_filter, "cudnnCreateFilterDescriptor");
    bind(h, l.set_filter, "cudnnSetFilterNdDescriptor");
    bind(h, l.destroy_filter, "cudnnDestroyFilterDescriptor");
    bind(h, l.create_conv, "cudnnCreateConvolutionDescriptor");
    bind(h, l.set_conv, "cudnnSetConvolutionNdDescriptor");
    bind(h, l.set_groups, "cudnnSetConvolutionGroupCount");
    bind(h, l.set_math, "cudnnSetConvolutionMathType");
    bind(h, l.destroy_conv, "cudnnDestroyConvolutionDescriptor");
    bind(h, l.output_dims, "cudnnGetConvolutionNdForwardOutputDim");
    bind(h, l.algorithms, "cudnnGetConvolutionForwardAlgorithm_v7");
    bind(h, l.workspace, "cudnnGetConvolutionForwardWorkspaceSize");
    bind(h, l.forward, "cudnnConvolutionForward");
    bind(h, l.data_algorithms, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    bind(h, l.data_workspace, "cudnnGetConvolutionBackwardDataWorkspaceSize");
    bind(h, l.backward_data, "cudnnConvolutionBackwardData");
    bind(h, l.filter_algorithms, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    bind(h, l.filter_workspace, "cudnnGetConvolutionBackwardFilterWorkspaceSize");
    bind(h, l.backward_filter, "cudnnConvolutionBackwardFilter");
    // The legacy convolution API these signatures describe is cuDNN 9's.
    if (!l.ok() || l.version() < 90000) l = Library{};
    return l;
  }();
  return lib;
}

// One handle per worker thread (a handle must not be used by two threads at
// once); each worker serves one stream.
Handle handle(cudaStream_t s) {
  thread_local Handle h = nullptr;
  thread_local cudaStream_t bound = nullptr;
  thread_local bool failed = false;
  if (failed) return nullptr;
  if (h == nullptr) {
    LibraryLoad loading; // creating a handle loads cuDNN's kernels
    if (library().create(&h) != kSuccess) {
      h = nullptr;
      failed = true;
      return nullptr;
    }
  }
  if (bound != s) {
    if (library().set_stream(h, s) != kSuccess) return nullptr;
    bound = s;
  }
  return h;
}

// The descriptors of one call, destroyed together.
struct Descriptors {
  TensorDesc x = nullptr, y = nullptr;
  FilterDesc w = nullptr;
  ConvDesc conv = nullptr;
  ~Descriptors() {
    const Library& l = library();
    if (x != nullptr) l.destroy_tensor(x);
    if (y != nullptr) l.destroy_tensor(y);
    if (w != nullptr) l.destroy_filter(w);
    if (conv != nullptr) l.destroy_conv(conv);
  }
};

// Channels-last strides for cuDNN's (N, C, spatial...) dimension order.
std::vector<int> channels_last_strides(const std::vector<int>& dims) {
  const int nd = static_cast<int>(dims.size());
  std::vector<int> strides(nd);
  long long step = dims[1];
  strides[1] = 1;
  for (int a = nd - 1; a >= 2; --a) {
    strides[a] = static_cast<int>(step);
    step *= dims[a];
  }
  strides[0] = static_cast<int>(step);
  return strides;
}

struct Plan {
  int algo;
  size_t workspace;
};

// Workspaces above this are not asked for: cuDNN's next candidate is used.
constexpr size_t kWorkspaceCap = size_t{1} << 30;

std::mutex plans_mutex;
std::map<std::vector<long long>, Plan> plans;

} // namespace

bool cudnn_available() { return library().ok(); }

namespace {

enum class Direction { forward, backward_data, backward_filter };

// One convolution of the forward geometry (x (N, S..., C), w (O, K..., C/G),
// y (N, out..., O)) in direction `dir`: y from (a, b) = (x, w), dx from
// (w, dy), dw from (x, dy), written to `result`.
bool run(Direction dir, const ConvParams& p, const Shape& xs, const Shape& ws, const Shape& ys,
         Dtype d, const void* a, const void* b, void* result, cudaStream_t s) {
  const Library& lib = library();
  if (!lib.ok() || (dir != Direction::forward && !lib.has_backward())) return false;
  int data_type, compute_type, math;
  if (d == float32) {
    data_type = compute_type = kFloat;
    // Read once, as matmul's switch (gemm_util.cpp): not per convolution.
    static const bool tf32 = [] {
      const char* v = std::getenv("LOOM_CUDA_TF32");
      return v != nullptr && std::string(v) == "1";
    }();
    math = tf32 ? kDefaultMath : kFmaMath;
  } else if (d == float16 || d == bfloat16) {
    data_type = d == float16 ? kHalf : kBfloat16;
    compute_type = kFloat;
    math = kTensorOpMath;
  } else if (d == float64) {
    data_type = compute_type = kDouble;
    math = kDefaultMath;
  } else {
    return false;
  }
  const int spatial = static_cast<int>(xs.size()) - 2;
  // cuDNN's descriptors have 2 or 3 spatial axes: a 1-d convolution gets a
  // leading axis of 1.
  const int lead = spatial == 1 ? 1 : 0;
  const int axes = spatial + lead;
  if (axes < 2 || axes > 3) return false;
  std::vector<int> xd{0, 0}, wd{0, 0}, yd{0, 0};
  std::vector<int> pad(axes, 0), stride(axes, 1), dil(axes, 1);
  std::vector<long long> key{static_cast<long long>(dir), static_cast<long long>(d.val), p.groups,
                             p.flip ? 1 : 0};
  for (int i = 0; i < lead; ++i) {
    xd.push_back(1);
    wd.push_back(1);
    yd.push_back(1);
  }
  for (int i = 0; i < spatial; ++i) {
    if (p.input_dilation[i] != 1 || p.padding_lo[i] < 0) return false;
    xd.push_back(static_cast<int>(xs[i + 1]));
    wd.push_back(static_cast<int>(ws[i + 1]));
    yd.push_back(static_cast<int>(ys[i + 1]));
    pad[lead + i] = p.padding_lo[i];
    stride[lead + i] = p.stride[i];
    dil[lead + i] = p.kernel_dilation[i];
  }
  xd[0] = yd[0] = static_cast<int>(xs[0]);
  xd[1] = static_cast<int>(xs.back());
  yd[1] = wd[0] = static_cast<int>(ys.back());
  wd[1] = static_cast<int>(ws.back());
  // cuDNN indexes its tensors with 32-bit offsets in most algorithms.
  if (shape_size(xs) > 0x7fffffff || shape_size(ys) > 0x7fffffff || shape_size(ws) > 0x7fffffff)
    return false;
  for (int v : xd) key.push_back(v);
  for (int v : wd) key.push_back(v);
  for (int i = 0; i < axes; ++i) {
    key.push_back(pad[i]);
    key.push_back(stride[i]);
    key.push_back(dil[i]);
  }
  key.push_back(math);

  Handle h = handle(s);
  if (h == nullptr) return false;
  Descriptors desc;
  const int nb = axes + 2;
  if (lib.create_tensor(&desc.x) != kSuccess || lib.create_tensor(&desc.y) != kSuccess ||
      lib.create_filter(&desc.w) != kSuccess || lib.create_conv(&desc.conv) != kSuccess) {
    return false;
  }
  const std::vector<int> xst = channels_last_strides(xd), yst = channels_last_strides(yd);
  if (lib.set_tensor(desc.x, data_type, nb, xd.data(), xst.data()) != kSuccess ||
      lib.set_tensor(desc.y, data_type, nb, yd.data(), yst.data()) != kSuccess ||
      lib.set_filter(desc.w, data_type, kFormatNhwc, nb, wd.data()) != kSuccess ||
      lib.set_conv(desc.conv, axes, pad.data(), stride.data(), dil.data(),
                   p.flip ? kConvolution : kCrossCorrelation, compute_type) != kSuccess ||
      lib.set_groups(desc.conv, p.groups) != kSuccess ||
      lib.set_math(desc.conv, math) != kSuccess) {
    return false;
  }
  // cuDNN sizes the output from the low padding alone: the positions it
  // computes are the primitive's only when the sizes agree. (The gradients
  // read no other positions either: the primitive's high padding adds zeros
  // or crops outputs that do not exist.)
  std::vector<int> cudnn_out(nb);
  if (lib.output_dims(desc.conv, desc.x, desc.w, nb, cudnn_out.data()) != kSuccess ||
      cudnn_out != yd) {
    return false;
  }

  Plan plan{-1, 0};
  {
    std::lock_guard<std::mutex> lock(plans_mutex);
    if (auto it = plans.find(key); it != plans.end()) plan = it->second;
  }
  if (plan.algo < 0) {
    // cuDNN 9 loads a family's sub-library on its first call.
    LibraryLoad loading;
    AlgoPerf perf[16];
    int returned = 0;
    Status st;
    if (dir == Direction::forward) {
      st = lib.algorithms(h, desc.x, desc.w, desc.conv, desc.y, 16, &returned, perf);
    } else if (dir == Direction::backward_data) {
      st = lib.data_algorithms(h, desc.w, desc.y, desc.conv, desc.x, 16, &returned, perf);
    } else {
      st = lib.filter_algorithms(h, desc.x, desc.y, desc.conv, desc.w, 16, &returned, perf);
    }
    if (st != kSuccess) return false;
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status != kSuccess) continue;
      size_t bytes = 0;
      if (dir == Direction::forward) {
        st = lib.workspace(h, desc.x, desc.w, desc.conv, desc.y, perf[i].algo, &bytes);
      } else if (dir == Direction::backward_data) {
        st = lib.data_workspace(h, desc.w, desc.y, desc.conv, desc.x, perf[i].algo, &bytes);
      } else {
        st = lib.filter_workspace(h, desc.x, desc.y, desc.conv, desc.w, perf[i].algo, &bytes);
      }
      if (st != kSuccess || bytes > kWorkspaceCap) continue;
      plan = Plan{perf[i].algo, bytes};
      break;
    }
    if (plan.algo < 0) return false;
    std::lock_guard<std::mutex> lock(plans_mutex);
    if (plans.size() >= 1024) plans.clear(); // geometries are few; bound the map anyway
    plans.emplace(key, plan);
  }

  auto& pool = device_pool(current_device());
  allocator::Buffer work{nullptr, 0};
  if (plan.workspace > 0) work = pool.malloc(plan.workspace);
  const float alpha_f = 1.0f, beta_f = 0.0f;
  const double alpha_d = 1.0, beta_d = 0.0;
  const void* alpha = d == float64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = d == float64 ? static_cast<const void*>(&beta_d) : &beta_f;
  Status st;
  if (dir == Direction::forward) {
    st = lib.forward(h, alpha, desc.x, a, desc.w, b, desc.conv, plan.algo, work.ptr, plan.workspace,
                     beta, desc.y, result);
  } else if (dir == Direction::backward_data) {
    st = lib.backward_data(h, alpha, desc.w, a, desc.y, b, desc.conv, plan.algo, work.ptr,
                           plan.workspace, beta, desc.x, result);
  } else {
    st = lib.backward_filter(h, alpha, desc.x, a, desc.y, b, desc.conv, plan.algo, work.ptr,
                             plan.workspace, beta, desc.w, result);
  }
  if (work.ptr != nullptr) pool.free(work); // stream-ordered: after the launch
  return st == kSuccess;
}

} // namespace

bool cudnn_conv_forward(const ConvParams& p, const array& x, const array& w, const array& out,
                        const void* xp, const void* wp, void* y, cudaStream_t s) {
  // A kernel with more taps than the output has positions is a weight
  // gradient written as a convolution (the composite of
  // ConvolutionWeightGrad, when backward filter declined): cuDNN's forward
  // algorithms run it slower than im2col + one GEMM (H200, B32 56x56x64 3x3
  // fwd+bwd: 5.2 ms against 4.7).
  long long taps = 1, positions = 1;
  for (int i = 1; i + 1 < x.ndim(); ++i) {
    taps *= w.shape(i);
    positions *= out.shape(i);
  }
  if (taps > positions) return false;
  return run(Direction::forward, p, x.shape(), w.shape(), out.shape(), out.dtype(), xp, wp, y, s);
}

bool cudnn_conv_backward_data(const ConvParams& p, const Shape& xs, const Shape& ws,
                              const Shape& ys, Dtype d, const void* dy, const void* wp, void* dx,
                              cudaStream_t s) {
  return run(Direction::backward_data, p, xs, ws, ys, d, wp, dy, dx, s);
}

bool cudnn_conv_backward_filter(const ConvParams& p, const Shape& xs, const Shape& ws,
                                const Shape& ys, Dtype d, const void* xp, const void* dy, void* dw,
                                cudaStream_t s) {
  return run(Direction::backward_filter, p, xs, ws, ys, d, xp, dy, dw, s);
}

} // namespace loom::cuda
