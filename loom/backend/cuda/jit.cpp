#include "loom/backend/cuda/jit.h"

#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"

namespace loom::cuda {

namespace {

struct Nvrtc {
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcGetErrorString) error = nullptr;
  decltype(&nvrtcVersion) version = nullptr;
};

const Nvrtc& nvrtc() {
  static Nvrtc lib = [] {
    Nvrtc n;
    LibraryLoad loading;
    void* h = nullptr;
    for (const char* name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) {
      if ((h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    }
    if (h == nullptr) {
      for (const char* path :
           {"/usr/local/cuda/lib64/libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13"}) {
        if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
      }
    }
    if (h == nullptr) return n;
    // Its static destructors were registered by the load: close first.
    close_before_teardown();
    n.create = reinterpret_cast<decltype(n.create)>(dlsym(h, "nvrtcCreateProgram"));
    n.compile = reinterpret_cast<decltype(n.compile)>(dlsym(h, "nvrtcCompileProgram"));
    n.log_size = reinterpret_cast<decltype(n.log_size)>(dlsym(h, "nvrtcGetProgramLogSize"));
    n.log = reinterpret_cast<decltype(n.log)>(dlsym(h, "nvrtcGetProgramLog"));
    n.cubin_size = reinterpret_cast<decltype(n.cubin_size)>(dlsym(h, "nvrtcGetCUBINSize"));
    n.cubin = reinterpret_cast<decltype(n.cubin)>(dlsym(h, "nvrtcGetCUBIN"));
    n.destroy = reinterpret_cast<decltype(n.destroy)>(dlsym(h, "nvrtcDestroyProgram"));
    n.error = reinterpret_cast<decltype(n.error)>(dlsym(h, "nvrtcGetErrorString"));
    n.version = reinterpret_cast<decltype(n.version)>(dlsym(h, "nvrtcVersion"));
    return n;
  }();
  if (lib.create == nullptr) {
    throw std::runtime_error(
        "[cuda] NVRTC (libnvrtc.so) was not found: GPU kernels are built with it at run time. "
        "Install the CUDA toolkit's NVRTC or add its folder to LD_LIBRARY_PATH.");
  }
  return lib;
}

// FNV-1a: stable across runs, so the disk cache survives restarts.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::filesystem::path cache_dir() {
  if (const char* d = std::getenv("LOOM_CUDA_CACHE")) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"))
    return std::filesystem::path(x) / "loom" / "cuda";
  if (const char* home = std::getenv("HOME"))
    return std::filesystem::path(home) / ".cache" / "loom" / "cuda";
  return std::filesystem::temp_directory_path() / "loom-cuda";
}

std::string build_cubin(const std::string& source, int arch) {
  const auto& n = nvrtc();
  nvrtcProgram prog = nullptr;
  if (n.create(&prog, source.c_str(), "loom_kernel.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS) {
    throw std::runtime_error("[cuda] nvrtcCreateProgram failed.");
  }
  std::string arch_opt = "-arch=sm_" + std::to_string(arch);
  // No contraction of a*b+c into one FMA: a fused region rounds as its ops
  // do eagerly (long chains amplify the difference).
  const char* opts[] = {arch_opt.c_str(), "--std=c++17", "-default-device", "--fmad=false"};
  nvrtcResult r;
  {
    LibraryLoad compiling; // NVRTC's state must outlive the compile: the gate waits
    r = n.compile(prog, 4, opts);
  }
  if (r != NVRTC_SUCCESS) {
    size_t len = 0;
    n.log_size(prog, &len);
    std::string log(len, '\0');
    if (len > 0) n.log(prog, log.data());
    n.destroy(&prog);
    throw std::runtime_error(std::string("[cuda] NVRTC failed to build a generated kernel: ") +
                             n.error(r) + "\n" + log + "\n--- source ---\n" + source);
  }
  size_t size = 0;
  n.cubin_size(prog, &size);
  std::string cubin(size, '\0');
  n.cubin(prog, cubin.data());
  n.destroy(&prog);
  // NVRTC's teardown exists once it has compiled: the exit gate closes first.
  static std::once_flag registered;
  std::call_once(registered, close_before_teardown);
  return cubin;
}

// Reads the cubin from the disk cache, or builds and stores it (written to a
// temporary file and renamed, so concurrent processes never read half a file).
std::string cubin_for(const std::string& source, int arch) {
  int major = 0, minor = 0;
  if (nvrtc().version) nvrtc().version(&major, &minor);
  std::string key = source + "\n// sm_" + std::to_string(arch) + " nvrtc " + std::to_string(major) +
                    "." + std::to_string(minor) + " fmad=false";
  std::ostringstream name;
  name << std::hex << fnv1a(key) << ".cubin";
  std::error_code ec;
  auto dir = cache_dir();
  auto path = dir / name.str();
  if (std::ifstream in{path, std::ios::binary}) {
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!data.empty()) return data;
  }
  std::string cubin = build_cubin(source, arch);
  std::filesystem::create_directories(dir, ec);
  if (!ec) {
    auto tmp = dir / (name.str() + ".tmp" + std::to_string(getpid()));
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) std::filesystem::remove(tmp, ec);
  }
  return cubin;
}

} // namespace

std::string nvrtc_build(const std::string& source, int arch) { return build_cubin(source, arch); }

cudaKernel_t jit_kernel(const std::string& kernel_name,
                        const std::function<std::string()>& make_source) {
  // Never destroyed: GPU workers may still build or look up kernels at exit.
  static std::mutex& m = *new std::mutex;
  static auto& kernels = *new std::unordered_map<std::string, cudaKernel_t>;
  int dev = 0;
  cudaGetDevice(&dev);
  std::string key = std::to_string(dev) + "|" + kernel_name;
  std::lock_guard<std::mutex> lock(m);
  auto it = kernels.find(key);
  if (it != kernels.end()) return it->second;
  std::string cubin = cubin_for(make_source(), compute_capability(dev));
  cudaLibrary_t lib = nullptr;
  check(cudaLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
        "cudaLibraryLoadData");
  cudaKernel_t k = nullptr;
  check(cudaLibraryGetKernel(&k, lib, kernel_name.c_str()), "cudaLibraryGetKernel");
  kernels.emplace(key, k);
  return k;
}

namespace {

// Driver entry points fetched through the runtime (libcuda is not linked:
// the runtime finds it at run time). Null when unavailable or switched off.
struct DriverLaunch {
  using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);
  using GetFunction = CUresult (*)(CUfunction*, CUkernel);
  Launch launch = nullptr;
  GetFunction get_function = nullptr;
};

const DriverLaunch& driver_launch() {
  static const DriverLaunch d = [] {
    DriverLaunch r;
    const char* v = std::getenv("LOOM_CUDA_RUNTIME_LAUNCH");
    if (v != nullptr && std::string(v) == "1") return r;
    void* launch = nullptr;
    void* get = nullptr;
    cudaDriverEntryPointQueryResult q1 = cudaDriverEntryPointSymbolNotFound, q2 = q1;
    if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", &launch, 12000, cudaEnableDefault,
                                         &q1) == cudaSuccess &&
        cudaGetDriverEntryPointByVersion("cuKernelGetFunction", &get, 12000, cudaEnableDefault,
                                         &q2) == cudaSuccess &&
        q1 == cudaDriverEntryPointSuccess && q2 == cudaDriverEntryPointSuccess) {
      r.launch = reinterpret_cast<DriverLaunch::Launch>(launch);
      r.get_function = reinterpret_cast<DriverLaunch::GetFunction>(get);
    }
    cudaGetLastError();
    return r;
  }();
  return d;
}

// The kernel's function in the calling thread's current context (one per
// device: the primary contexts), resolved once per thread.
CUfunction function_for(cudaKernel_t kernel, const DriverLaunch& d) {
  thread_local std::unordered_map<const void*, CUfunction> cache;
  int dev = current_device();
  const void* key = reinterpret_cast<const char*>(kernel) + dev; // kernels are far apart
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  CUfunction f = nullptr;
  if (d.get_function(&f, reinterpret_cast<CUkernel>(kernel)) != CUDA_SUCCESS) return nullptr;
  cache.emplace(key, f);
  return f;
}

} // namespace

void launch_kernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args, size_t shared_bytes,
                   cudaStream_t stream, const char* what) {
  profile::Timer timer(profile::kLaunch);
  const DriverLaunch& d = driver_launch();
  if (d.launch != nullptr) {
    if (CUfunction f = function_for(kernel, d)) {
      // Recorded into this stream's batch inside an element-wise kernel of
      // one eval (backend.cpp); any other launch first enqueues that batch.
      if (record_launch(f, grid, block, static_cast<unsigned>(shared_bytes), stream, args)) return;
      if (d.launch(f, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                   static_cast<unsigned>(shared_bytes), reinterpret_cast<CUstream>(stream), args,
                   nullptr) == CUDA_SUCCESS) {
        return;
      }
    }
    // The runtime's launch reports the error (or succeeds where the driver
    // path could not, e.g. no current context yet).
  }
  flush_launches(stream); // recorded launches go first
  check(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, args, shared_bytes,
                         stream),
        what);
}

void launch_elementwise(cudaKernel_t kernel, size_t n, void** args, cudaStream_t stream) {
  if (n == 0) return;
  constexpr unsigned threads = 256;
  // One thread per unit of work (many loads in flight); a grid-stride loop
  // covers what is beyond the grid limit.
  size_t blocks = std::min<size_t>((n + threads - 1) / threads, 0x7fffffffu);
  launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(threads), args, 0, stream,
                "cudaLaunchKernel");
}

namespace {

// float -> bfloat16, round to nearest even; a NaN keeps its sign and top
// payload bits, made quiet (the CPU's rule). The integer form is the
// reference; sm_80+ rounds with the packed conversion (F2FP, one
// instruction against ~6 integer ones: a bfloat16 kernel that rounds every
// intermediate, as a fused AdamW step does, is bound by this arithmetic),
// the same bits for every non-NaN input, the NaN rule applied by a select.
// LOOM_CUDA_BF16_ROUND=int keeps the integer form everywhere (to compare).
const char* kBf16Store = R"(
__device__ __forceinline__ unsigned loom_bf16_bits(float v) {
  unsigned u = __float_as_uint(v);
#if __CUDA_ARCH__ >= 800 && !defined(LOOM_BF16_INT_ROUND)
  unsigned d; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(0.0f), "f"(v));
  return v != v ? (u >> 16) | 0x40u : d;
#else
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
  u += 0x7fffu + ((u >> 16) & 1u); // round to nearest even
  return u >> 16;
#endif
}
// v rounded to bfloat16 and back (as a store and a load would).
__device__ __forceinline__ float loom_round_bf16(float v) {
#if __CUDA_ARCH__ >= 800 && !defined(LOOM_BF16_INT_ROUND)
  unsigned u = __float_as_uint(v);
  unsigned d; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(v), "f"(0.0f));
  return __uint_as_float(v != v ? (u | 0x400000u) & 0xffff0000u : d);
#else
  return __uint_as_float(loom_bf16_bits(v) << 16);
#endif
}
__device__ __forceinline__ void loom_st(loom_bf16* p, float v) {
  p->bits = (unsigned short)loom_bf16_bits(v);
}
)";

std::string make_prelude(const char* body) {
  std::string s = body;
  const char* v = std::getenv("LOOM_CUDA_BF16_ROUND");
  std::string store = kBf16Store;
  if (v != nullptr && std::string(v) == "int") store = "\n#define LOOM_BF16_INT_ROUND 1" + store;
  s.replace(s.find("LOOM_BF16_STORE"), 15, store);
  return s;
}

} // namespace

const char* jit_prelude() {
  static const std::string prelude = make_prelude(R"(
struct loom_half { unsigned short bits; };
struct loom_bf16 { unsigned short bits; };
__device__ __forceinline__ float loom_ld(loom_half h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits)); return f;
}
__device__ __forceinline__ float loom_ld(loom_bf16 h) {
  return __uint_as_float(((unsigned)h.bits) << 16);
}
template <typename T> __device__ __forceinline__ T loom_ld(T x) { return x; }
template <typename T> struct alignas(4 * sizeof(T)) loom_vec4 { T v[4]; };
__device__ __forceinline__ void loom_st(loom_half* p, float v) {
  unsigned short b; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(v)); p->bits = b;
}
LOOM_BF16_STOREtemplate <typename T, typename V> __device__ __forceinline__ void loom_st(T* p, V v) { *p = (T)v; }
template <typename T> __device__ __forceinline__ bool loom_isnan(T x) { return x != x; }
template <typename T> __device__ __forceinline__ bool loom_isinf(T x) {
  return x == (T)__int_as_float(0x7f800000) || x == -(T)__int_as_float(0x7f800000);
}
struct loom_layout {
  int ndim;
  long long shape[8];
  long long strides[3][8];
};
__device__ __forceinline__ long long loom_offset(long long i, const loom_layout& l, int k) {
  long long off = 0;
  for (int d = l.ndim - 1; d >= 0; --d) {
    long long q = i / l.shape[d];
    off += (i - q * l.shape[d]) * l.strides[k][d];
    i = q;
  }
  return off;
}
)");
  return prelude.c_str();
}

} // namespace loom::cuda
