// Element-wise kernels (Unary, Binary, Select, AsType, Copy) generated from
// the op table's code forms and built with NVRTC: one small kernel per op,
// dtype and input layout (contiguous, broadcast scalar, or strided), cached.
// Complex dtypes and ops whose code form is not valid device code run on the
// CPU fallback.
#include <cstring>
#include <string>
#include <unordered_map>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"
#include "loom/primitives/binary.h"
#include "loom/primitives/creation.h"
#include "loom/primitives/elementwise_table.h"
#include "loom/primitives/ternary.h"
#include "loom/primitives/unary.h"

namespace loom::cuda {

namespace {

// The kernels' loom_layout, byte for byte.
struct loom_layout_host {
  int ndim;
  long long shape[8];
  long long strides[3][8];
};

// Element `i` of an input: contiguous, one broadcast element, or strided;
// 'v': one element whose host copy is valid (a Python scalar, `x + 1.0`),
// passed by value as a kernel argument. Uploading it instead cost a pool
// block and a pageable copy per op, the larger part of a tiny op's launch.
char layout_mode(const array& a) {
  if (a.data_size() == 1) {
    return (a.data_shared_ptr()->valid() & allocator::Data::kHost) && a.itemsize() <= 8 ? 'v' : 's';
  }
  if (a.flags().row_contiguous && a.data_size() == a.size()) return 'c';
  return 'g';
}

// The table's code form of `info` for `dt`, built once per thread: the
// string work cost about a microsecond per launch of a tiny op.
const std::string& cached_expr(const ew::OpInfo& info, Dtype dt) {
  thread_local std::unordered_map<uint64_t, std::string> cache;
  uint64_t key = (static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&info)) << 8) ^
                 static_cast<uint64_t>(static_cast<int>(dt.val));
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  static const std::vector<std::string> names[4] = {{}, {"x0"}, {"x0", "x1"}, {"x0", "x1", "x2"}};
  return cache.emplace(key, device_expr(info, dt, names[info.arity])).first->second;
}

// A generated kernel's identity without building its name: the op's tag
// (a string with static storage), the dtypes, the input modes and vec.
struct KernelKey {
  const char* tag;
  uint64_t rest;
  bool operator==(const KernelKey& o) const { return tag == o.tag && rest == o.rest; }
};
struct KernelKeyHash {
  size_t operator()(const KernelKey& k) const {
    return std::hash<const void*>()(k.tag) * 31 + std::hash<uint64_t>()(k.rest);
  }
};

// Generates, builds and launches `out = expr(inputs)`; false when the case
// has no GPU path (the caller falls back to the CPU). `tag` has static
// storage (it keys the kernel cache).
// With `keep_layout`, a one-input op over a dense input in any order (a
// transposed matrix) writes its output in that same order, as the CPU does.
bool run_generated(const char* tag, const std::string& expr, const std::vector<array>& inputs,
                   array& out, cudaStream_t stream, bool keep_layout = false) {
  profile::Timer prepare(profile::kPrepare);
  if (inputs.size() > 3) return false;
  const char* out_store = storage_type(out.dtype());
  if (out_store == nullptr || out.ndim() > 8) return false;
  for (auto& in : inputs) {
    if (storage_type(in.dtype()) == nullptr) return false;
  }
  std::string modes;
  for (auto& in : inputs) modes += layout_mode(in);
  const array& first = inputs[0];
  keep_layout = keep_layout && inputs.size() == 1 && modes[0] == 'g' && first.flags().contiguous &&
                first.data_size() == first.size();
  if (keep_layout) modes[0] = 'c';
  // Inputs are broadcast to the output's shape by ops/; anything else is a
  // case this generator does not index.
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (modes[k] == 'c' && inputs[k].size() != out.size()) return false;
    if (modes[k] == 'g' && inputs[k].shape() != out.shape()) return false;
  }

  // A pointer per input, or for 'v' the element's bits.
  void* ptrs[3] = {nullptr, nullptr, nullptr};
  unsigned long long values[3] = {0, 0, 0};
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (modes[k] == 'v') {
      const char* host = static_cast<const char*>(inputs[k].data_shared_ptr()->ptr());
      std::memcpy(&values[k], host + inputs[k].offset(), inputs[k].itemsize());
    } else {
      ptrs[k] = const_cast<void*>(device_data(inputs[k], stream));
    }
  }
  // Without strided inputs, four elements per memory access where the dense
  // inputs are aligned for it (outputs are fresh pool blocks, 256-aligned).
  const bool strided = modes.find('g') != std::string::npos;
  bool vec = out.size() >= 4 && !strided;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (modes[k] == 'c')
      vec = vec && reinterpret_cast<uintptr_t>(ptrs[k]) % (4 * inputs[k].itemsize()) == 0;
  }

  uint64_t rest = static_cast<uint64_t>(static_cast<int>(out.dtype().val)) | (vec ? 1ull << 8 : 0);
  for (size_t k = 0; k < inputs.size(); ++k) {
    rest |= static_cast<uint64_t>(static_cast<int>(inputs[k].dtype().val) & 0xff) << (16 + 8 * k);
    rest |= static_cast<uint64_t>(static_cast<unsigned char>(modes[k])) << (40 + 8 * k);
  }
  rest |= static_cast<uint64_t>(inputs.size()) << 12;
  rest |= static_cast<uint64_t>(current_device() & 0x7) << 9;
  thread_local std::unordered_map<KernelKey, cudaKernel_t, KernelKeyHash> kernels;
  KernelKey key{tag, rest};
  auto found = kernels.find(key);
  cudaKernel_t kernel = found != kernels.end() ? found->second : nullptr;

  std::string name;
  if (kernel == nullptr) {
    name = std::string("loom_") + tag + "_" + std::to_string(static_cast<int>(out.dtype().val));
    for (auto& in : inputs) name += "_" + std::to_string(static_cast<int>(in.dtype().val));
    name += "_" + modes + (vec ? "_v4" : "");
  }

  auto make_source = [&] {
    std::string src = jit_prelude();
    if (modes.find('v') != std::string::npos) {
      src +=
          "template <typename T> __device__ __forceinline__ T loom_bits(unsigned long long b) {\n"
          "  union { unsigned long long u; T t; } c; c.u = b; return c.t;\n}\n";
    }
    src += "extern \"C\" __global__ void " + name + "(";
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (modes[k] == 'v') {
        src += "unsigned long long v" + std::to_string(k) + ", ";
        continue;
      }
      src += std::string("const ") + storage_type(inputs[k].dtype()) + "* __restrict__ in" +
             std::to_string(k) + ", ";
    }
    // The layout only for strided inputs: its 264 bytes are copied into
    // the command stream at every launch.
    src += std::string(out_store) + "* __restrict__ out, long long n" +
           (strided ? ", loom_layout layout) {\n" : ") {\n");
    src +=
        "  const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
        "  const long long step = (long long)gridDim.x * blockDim.x;\n";
    // x_k = element `at` of input k; `vec_elem`: from the loaded vector a_k.
    auto loads = [&](const std::string& at, bool from_vec) {
      std::string l;
      for (size_t k = 0; k < inputs.size(); ++k) {
        std::string ks = std::to_string(k);
        const char* ct = compute_type(inputs[k].dtype());
        std::string val =
            modes[k] == 'v'
                ? std::string("loom_bits<") + storage_type(inputs[k].dtype()) + ">(v" + ks + ")"
            : modes[k] == 's' ? "in" + ks + "[0]"
            : modes[k] == 'g' ? "in" + ks + "[loom_offset(" + at + ", layout, " + ks + ")]"
            : from_vec        ? "a" + ks + ".v[e]"
                              : "in" + ks + "[" + at + "]";
        l += std::string(ct) + " x" + ks + " = (" + ct + ")loom_ld(" + val + "); ";
      }
      return l;
    };
    std::string value = std::string("(") + compute_type(out.dtype()) + ")(" + expr + ")";
    std::string first = "0";
    if (vec) {
      src +=
          "  const long long nv = n / 4;\n"
          "  for (long long j = tid; j < nv; j += step) {\n"
          "    const long long i = j * 4;\n";
      for (size_t k = 0; k < inputs.size(); ++k) {
        if (modes[k] != 'c') continue;
        std::string st = storage_type(inputs[k].dtype()), ks = std::to_string(k);
        src += "    const loom_vec4<" + st + "> a" + ks + " = *reinterpret_cast<const loom_vec4<" +
               st + ">*>(in" + ks + " + i);\n";
      }
      src += std::string("    loom_vec4<") + out_store + "> b;\n";
      src += "#pragma unroll\n    for (int e = 0; e < 4; ++e) { " + loads("i + e", true) +
             "loom_st(&b.v[e], " + value + "); }\n";
      src +=
          std::string("    *reinterpret_cast<loom_vec4<") + out_store + ">*>(out + i) = b;\n  }\n";
      first = "nv * 4";
    }
    src += "  for (long long i = " + first + " + tid; i < n; i += step) { " + loads("i", false) +
           "loom_st(out + i, " + value + "); }\n}\n";

    return src;
  };
  if (kernel == nullptr) {
    kernel = jit_kernel(name, make_source);
    kernels.emplace(key, kernel);
  }

  loom_layout_host layout{};
  layout.ndim = out.ndim();
  for (int d = 0; d < out.ndim(); ++d) layout.shape[d] = out.shape(d);
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (modes[k] != 'g') continue;
    for (int d = 0; d < out.ndim(); ++d) layout.strides[k][d] = inputs[k].strides(d);
  }
  prepare.stop();
  void* optr;
  profile::Timer alloc_timer(profile::kAlloc);
  if (keep_layout) {
    auto& pool = device_pool(current_device());
    out.set_data(std::make_shared<allocator::Data>(pool.malloc(out.nbytes()), &pool),
                 first.data_size(), first.strides(), first.flags());
    optr = out.data_shared_ptr()->device_ptr(pool, nullptr);
  } else {
    optr = alloc_output(out);
  }
  alloc_timer.stop();
  long long n = static_cast<long long>(out.size());
  void* args[6];
  size_t nargs = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    args[nargs++] = modes[k] == 'v' ? static_cast<void*>(&values[k]) : &ptrs[k];
  }
  args[nargs++] = &optr;
  args[nargs++] = &n;
  if (strided) args[nargs++] = &layout;
  size_t units = vec ? (out.size() + 3) / 4 : out.size();
  launch_elementwise(kernel, units, args, stream);
  return true;
}

bool unary_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                  cudaStream_t s) {
  auto op = static_cast<Unary&>(p).op();
  const std::string& expr = cached_expr(ew::info(op), inputs[0].dtype());
  if (expr.empty()) return false;
  return run_generated(ew::info(op).name, expr, inputs, outputs[0], s, true);
}

bool binary_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                   cudaStream_t s) {
  auto op = static_cast<Binary&>(p).op();
  if (inputs[0].dtype() != inputs[1].dtype()) return false;
  const std::string& expr = cached_expr(ew::info(op), inputs[0].dtype());
  if (expr.empty()) return false;
  return run_generated(ew::info(op).name, expr, inputs, outputs[0], s);
}

bool select_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                   cudaStream_t s) {
  if (inputs[1].dtype() != inputs[2].dtype()) return false;
  const std::string& expr = cached_expr(ew::info(TernaryOp::Select), inputs[1].dtype());
  if (expr.empty()) return false;
  return run_generated("Select", expr, inputs, outputs[0], s);
}

// A cast goes through the compute types: float16/bfloat16 via float.
bool astype_kernel(Primitive&, const std::vector<array>& inputs, std::vector<array>& outputs,
                   cudaStream_t s) {
  std::string expr = cast_expr(inputs[0].dtype(), outputs[0].dtype(), "x0");
  if (expr.empty()) return false;
  return run_generated("AsType", expr, inputs, outputs[0], s, true);
}

bool copy_kernel(Primitive&, const std::vector<array>& inputs, std::vector<array>& outputs,
                 cudaStream_t s) {
  const array& in = inputs[0];
  if (layout_mode(in) == 'c') {
    const void* src = device_data(in, s);
    void* dst = alloc_output(outputs[0]);
    check(cudaMemcpyAsync(dst, src, in.nbytes(), cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
    return true;
  }
  return run_generated("Copy", "x0", inputs, outputs[0], s);
}

// Full: the value (a broadcast scalar or an array of the output's shape)
// written into a fresh buffer.
bool full_kernel(Primitive&, const std::vector<array>& inputs, std::vector<array>& outputs,
                 cudaStream_t s) {
  Dtype from = inputs[0].dtype(), to = outputs[0].dtype();
  if (from != to && !(is_float(from) && is_float(to))) return false;
  return run_generated("Full", "x0", inputs, outputs[0], s);
}

struct Registration {
  Registration() {
    register_kernel(typeid(Unary), &unary_kernel);
    register_kernel(typeid(Binary), &binary_kernel);
    register_kernel(typeid(Select), &select_kernel);
    register_kernel(typeid(AsType), &astype_kernel);
    register_kernel(typeid(Copy), &copy_kernel);
    register_kernel(typeid(Full), &full_kernel);
    // Through run_generated only: an output allocation, device_data and one
    // launch_kernel, so their launches may be recorded and replayed as a
    // CUDA graph. (Copy may issue a cudaMemcpyAsync: not batchable.)
    for (std::type_index t : {std::type_index(typeid(Unary)), std::type_index(typeid(Binary)),
                              std::type_index(typeid(Select)), std::type_index(typeid(AsType)),
                              std::type_index(typeid(Full))}) {
      register_batchable(t);
    }
  }
} registration;

} // namespace
} // namespace loom::cuda
