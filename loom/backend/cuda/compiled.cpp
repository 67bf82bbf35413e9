// compile's fused regions on the GPU: the region's tape (Compiled's ops) is
// written out as ONE kernel, each op as its element-wise table entry's code
// form over the values before it, built with NVRTC and cached in memory and on
// disk like the eager kernels. Each thread reads its elements of the inputs
// once, keeps every intermediate in registers and writes only the values that
// escape the region. Dense inputs and the outputs move four elements per
// memory access when their pointers allow it.
//
// A region holding an op without a device code form runs op by op instead,
// each op on its own GPU kernel (or the CPU fallback), as it would eagerly.
#include "loom/compile/compiled.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <unordered_map>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"
#include "loom/primitives/binary.h"
#include "loom/primitives/creation.h"
#include "loom/primitives/ternary.h"
#include "loom/primitives/unary.h"

namespace loom::cuda {

namespace {

using compile_detail::Compiled;
using compile_detail::FusedOp;

constexpr int kMaxDims = 8;

// How input k is read at element i of the region.
struct InputPlan {
  char mode = 'c'; // 'c' dense, 's' one element for all, 'g' strided
  int slot = -1;   // for 'g': its row in the layout's strides
  Strides strides; // for 'g': read as the region's shape (broadcast: 0)
};

// Strides (in elements) that read `in` as `shape`, dimensions aligned on the
// right, broadcast dimensions read with stride 0.
Strides broadcast_strides_to(const array& in, const Shape& shape) {
  Strides out(shape.size(), 0);
  int offset = static_cast<int>(shape.size()) - in.ndim();
  for (int d = 0; d < in.ndim(); ++d) out[offset + d] = in.shape(d) == 1 ? 0 : in.strides(d);
  return out;
}

// The value names and dtypes of the region: inputs first, then one per op.
struct Tape {
  std::vector<Dtype> dtypes;
  std::string name(int v) const { return "v" + std::to_string(v); }
};

// The C expression op `op` computes from earlier values; empty when the op
// has no device code form for these dtypes.
std::string op_expr(const FusedOp& op, const Tape& tape) {
  Primitive& p = *op.primitive;
  std::vector<std::string> args;
  for (int a : op.args) args.push_back(tape.name(a));
  if (p.traits().broadcast || typeid(p) == typeid(Copy) || typeid(p) == typeid(StopGradient)) {
    return args.size() == 1 ? args[0] : std::string();
  }
  if (auto* u = dynamic_cast<Unary*>(&p)) {
    return device_expr(ew::info(u->op()), tape.dtypes[op.args[0]], args);
  }
  if (auto* b = dynamic_cast<Binary*>(&p)) {
    if (tape.dtypes[op.args[0]] != tape.dtypes[op.args[1]]) return {};
    return device_expr(ew::info(b->op()), tape.dtypes[op.args[0]], args);
  }
  if (typeid(p) == typeid(Select)) {
    if (tape.dtypes[op.args[1]] != tape.dtypes[op.args[2]]) return {};
    return device_expr(ew::info(TernaryOp::Select), tape.dtypes[op.args[1]], args);
  }
  if (typeid(p) == typeid(AsType)) return cast_expr(tape.dtypes[op.args[0]], op.dtype, args[0]);
  return {};
}

// float16/bfloat16 values are rounded to their storage type after each op,
// as the eager kernels store them: fusing changes no result.
std::string rounded(Dtype d, const std::string& e) {
  if (d == float16) return "loom_rt_f16(" + e + ")";
  if (d == bfloat16) return "loom_rt_bf16(" + e + ")";
  return e;
}

const char* kFusedPrelude = R"(
__device__ __forceinline__ float loom_rt_f16(float v) { loom_half h; loom_st(&h, v); return loom_ld(h); }
__device__ __forceinline__ float loom_rt_bf16(float v) { return loom_round_bf16(v); }
struct loom_fused_layout {
  int ndim;
  long long shape[8];
  long long strides[LOOM_STRIDED][8];
};
__device__ __forceinline__ long long loom_foff(long long i, const loom_fused_layout& l, int k) {
  long long off = 0;
  for (int d = l.ndim - 1; d >= 0; --d) {
    long long q = i / l.shape[d];
    off += (i - q * l.shape[d]) * l.strides[k][d];
    i = q;
  }
  return off;
}
)";

// The kernel's source with `NAME` for its name, or empty when some op has no
// device form.
} // namespace

std::string fused_kernel_source(const compile_detail::Compiled& c,
                                const std::vector<Dtype>& input_dtypes, const std::string& modes,
                                const std::vector<Dtype>& output_dtypes, bool vec, int unroll) {
  Tape tape;
  tape.dtypes = input_dtypes;
  for (auto& op : c.ops()) tape.dtypes.push_back(op.dtype);
  const int n_in = c.num_inputs();
  for (Dtype d : tape.dtypes) {
    if (storage_type(d) == nullptr) return {};
  }
  struct Plan {
    char mode;
    int slot;
  };
  std::vector<Plan> plans;
  int strided = 0;
  for (char m : modes) plans.push_back({m, m == 'g' ? strided++ : -1});
  struct Out {
    Dtype d;
    Dtype dtype() const { return d; }
  };
  std::vector<Out> outputs;
  for (Dtype d : output_dtypes) outputs.push_back({d});

  // The body: inputs as compute-type values in, escaping values out.
  std::ostringstream body;
  body << "__device__ __forceinline__ void loom_body(";
  for (int k = 0; k < n_in; ++k) {
    body << (k ? ", " : "") << compute_type(tape.dtypes[k]) << " " << tape.name(k);
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    body << (n_in + j ? ", " : "") << compute_type(outputs[j].dtype()) << "& r" << j;
  }
  body << ") {\n";
  for (size_t i = 0; i < c.ops().size(); ++i) {
    const FusedOp& op = c.ops()[i];
    std::string e = op_expr(op, tape);
    if (e.empty()) return {};
    const char* ct = compute_type(op.dtype);
    body << "  " << ct << " " << tape.name(n_in + static_cast<int>(i)) << " = "
         << rounded(op.dtype, std::string("(") + ct + ")(" + e + ")") << ";\n";
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    body << "  r" << j << " = " << tape.name(n_in + c.output_ops()[j]) << ";\n";
  }
  body << "}\n";

  std::ostringstream k;
  k << "extern \"C\" __global__ void NAME(";
  for (int i = 0; i < n_in; ++i) {
    k << "const " << storage_type(tape.dtypes[i]) << "* __restrict__ in" << i << ", ";
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    k << storage_type(outputs[j].dtype()) << "* __restrict__ out" << j << ", ";
  }
  k << "long long n, loom_fused_layout layout) {\n"
    << "  const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    << "  const long long step = (long long)gridDim.x * blockDim.x;\n";
  for (int i = 0; i < n_in; ++i) {
    if (plans[i].mode == 's') {
      k << "  const " << compute_type(tape.dtypes[i]) << " s" << i << " = ("
        << compute_type(tape.dtypes[i]) << ")loom_ld(in" << i << "[0]);\n";
    }
  }
  // One element's call of the body; `at` is the dense input's element; `sfx`
  // names the vectors (a<k><sfx>, b<j><sfx>) of an unrolled step.
  auto call = [&](const std::string& elem, bool from_vec, const std::string& sfx = "") {
    std::ostringstream s;
    for (size_t j = 0; j < outputs.size(); ++j) {
      s << compute_type(outputs[j].dtype()) << " r" << j << "; ";
    }
    s << "loom_body(";
    for (int i = 0; i < n_in; ++i) {
      const char* ct = compute_type(tape.dtypes[i]);
      s << (i ? ", " : "");
      if (plans[i].mode == 's') {
        s << "s" << i;
      } else if (plans[i].mode == 'g') {
        s << "(" << ct << ")loom_ld(in" << i << "[loom_foff(" << elem << ", layout, "
          << plans[i].slot << ")])";
      } else if (from_vec) {
        s << "(" << ct << ")loom_ld(a" << i << sfx << ".v[e])";
      } else {
        s << "(" << ct << ")loom_ld(in" << i << "[" << elem << "])";
      }
    }
    for (size_t j = 0; j < outputs.size(); ++j) s << ", r" << j;
    s << "); ";
    for (size_t j = 0; j < outputs.size(); ++j) {
      if (from_vec) {
        s << "loom_st(&b" << j << sfx << ".v[e], r" << j << "); ";
      } else {
        s << "loom_st(out" << j << " + " << elem << ", r" << j << "); ";
      }
    }
    return s.str();
  };
  std::string first = "0";
  if (vec && unroll > 1) {
    // Each thread loads `unroll` vectors, blockDim apart (coalesced), before
    // it computes on the first: more bytes in flight per thread.
    const int u_n = unroll;
    k << "  const long long nv = n / 4;\n"
      << "  const long long vstep = (long long)gridDim.x * blockDim.x * " << u_n << ";\n"
      << "  for (long long j0 = (long long)blockIdx.x * blockDim.x * " << u_n
      << " + threadIdx.x; j0 < nv; j0 += vstep) {\n";
    for (int u = 0; u < u_n; ++u) {
      std::string us = "_" + std::to_string(u);
      k << "    const long long j" << us << " = j0 + " << u << " * (long long)blockDim.x;\n"
        << "    const long long i" << us << " = j" << us << " * 4;\n";
      for (int i = 0; i < n_in; ++i) {
        if (plans[i].mode != 'c') continue;
        const char* st = storage_type(tape.dtypes[i]);
        k << "    loom_vec4<" << st << "> a" << i << us << " = {};\n"
          << "    if (j" << us << " < nv) a" << i << us << " = *reinterpret_cast<const loom_vec4<"
          << st << ">*>(in" << i << " + i" << us << ");\n";
      }
    }
    for (int u = 0; u < u_n; ++u) {
      std::string us = "_" + std::to_string(u);
      k << "    if (j" << us << " < nv) {\n";
      for (size_t j = 0; j < outputs.size(); ++j) {
        k << "      loom_vec4<" << storage_type(outputs[j].dtype()) << "> b" << j << us << ";\n";
      }
      k << "#pragma unroll\n      for (int e = 0; e < 4; ++e) { "
        << call("i" + us + " + e", true, us) << "}\n";
      for (size_t j = 0; j < outputs.size(); ++j) {
        const char* st = storage_type(outputs[j].dtype());
        k << "      *reinterpret_cast<loom_vec4<" << st << ">*>(out" << j << " + i" << us << ") = b"
          << j << us << ";\n";
      }
      k << "    }\n";
    }
    k << "  }\n";
    first = "nv * 4";
  } else if (vec) {
    k << "  const long long nv = n / 4;\n"
      << "  for (long long j = tid; j < nv; j += step) {\n"
      << "    const long long i = j * 4;\n";
    for (int i = 0; i < n_in; ++i) {
      if (plans[i].mode != 'c') continue;
      const char* st = storage_type(tape.dtypes[i]);
      k << "    const loom_vec4<" << st << "> a" << i << " = *reinterpret_cast<const loom_vec4<"
        << st << ">*>(in" << i << " + i);\n";
    }
    for (size_t j = 0; j < outputs.size(); ++j) {
      k << "    loom_vec4<" << storage_type(outputs[j].dtype()) << "> b" << j << ";\n";
    }
    k << "#pragma unroll\n    for (int e = 0; e < 4; ++e) { " << call("i + e", true) << "}\n";
    for (size_t j = 0; j < outputs.size(); ++j) {
      const char* st = storage_type(outputs[j].dtype());
      k << "    *reinterpret_cast<loom_vec4<" << st << ">*>(out" << j << " + i) = b" << j << ";\n";
    }
    k << "  }\n";
    first = "nv * 4";
  }
  k << "  for (long long i = " << first << " + tid; i < n; i += step) { " << call("i", false)
    << "}\n}\n";

  std::string prelude = kFusedPrelude;
  prelude.replace(prelude.find("LOOM_STRIDED"), 12, std::to_string(std::max(strided, 1)));
  return std::string(jit_prelude()) + prelude + body.str() + k.str();
}

namespace {

// FNV-1a of the generated code: the kernel's name, so equal regions share
// one build (in this process and, through the disk cache, across runs).
std::string hashed_name(const std::string& src) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : src) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  std::ostringstream os;
  os << "loom_fused_" << std::hex << h;
  return os.str();
}

// What the generated source depends on, as bytes: per op its primitive type,
// element-wise op code and cast target, dtype and arguments; the outputs; the
// inputs' dtypes and modes; vec and unroll. Building and hashing the source
// itself on every call cost ~10 us per fused launch.
std::string region_key(const Compiled& c, const std::vector<array>& inputs,
                       const std::vector<array>& outputs, const std::string& modes, bool vec,
                       int unroll) {
  std::string key;
  auto put = [&key](const void* p, size_t n) { key.append(static_cast<const char*>(p), n); };
  auto put_int = [&put](long long v) { put(&v, sizeof(v)); };
  put_int(c.num_inputs());
  for (const FusedOp& op : c.ops()) {
    Primitive& p = *op.primitive;
    const std::type_info* t = &typeid(p);
    put(&t, sizeof(t));
    if (auto* u = dynamic_cast<Unary*>(&p)) put_int(static_cast<int>(u->op()));
    if (auto* b = dynamic_cast<Binary*>(&p)) put_int(static_cast<int>(b->op()));
    put_int(static_cast<int>(op.dtype.val));
    put_int(static_cast<long long>(op.args.size()));
    for (int a : op.args) put_int(a);
  }
  for (int o : c.output_ops()) put_int(o);
  for (auto& in : inputs) put_int(static_cast<int>(in.dtype().val));
  for (auto& o : outputs) put_int(static_cast<int>(o.dtype().val));
  key += modes;
  put_int(vec ? unroll : 0);
  put_int(current_device());
  return key;
}

// How many four-element accesses a thread of a fused kernel makes per loop
// step: two measured best on an H200 (gelu 279 us of kernel time against
// 291 with one, 4.3 TB/s copy floor 245); LOOM_CUDA_FUSED_UNROLL sets it.
int fused_unroll() {
  static const int u = [] {
    const char* v = std::getenv("LOOM_CUDA_FUSED_UNROLL");
    int n = v != nullptr ? std::atoi(v) : 2;
    return n >= 1 && n <= 8 ? n : 2;
  }();
  return u;
}

// Threads per block of a fused kernel (LOOM_CUDA_FUSED_THREADS: 64 to 1024,
// a multiple of 32; default 256).
unsigned fused_threads() {
  static const unsigned t = [] {
    const char* v = std::getenv("LOOM_CUDA_FUSED_THREADS");
    long n = v != nullptr ? std::atol(v) : 256;
    return n >= 64 && n <= 1024 && n % 32 == 0 ? static_cast<unsigned>(n) : 256u;
  }();
  return t;
}

// LOOM_CUDA_FUSED_MIN_BLOCKS=k asks ptxas for k resident blocks per SM
// (__launch_bounds__); 0, the default: no bound.
unsigned fused_min_blocks() {
  static const unsigned k = [] {
    const char* v = std::getenv("LOOM_CUDA_FUSED_MIN_BLOCKS");
    long n = v != nullptr ? std::atol(v) : 0;
    return n > 0 && n <= 32 ? static_cast<unsigned>(n) : 0u;
  }();
  return k;
}

// The region op by op, each on its own eager kernel.
void run_op_by_op(const Compiled& c, const std::vector<array>& inputs,
                  std::vector<array>& outputs) {
  std::vector<array> values(inputs.begin(), inputs.end());
  for (const FusedOp& op : c.ops()) {
    std::vector<array> args;
    for (int a : op.args) args.push_back(values[a]);
    std::vector<array> outs{array::empty(op.primitive->output_shapes(args)[0], op.dtype)};
    eval_primitive(*op.primitive, args, outs);
    outs[0].set_status(Status::available);
    values.push_back(std::move(outs[0]));
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    outputs[j].copy_shared_buffer(values[c.num_inputs() + c.output_ops()[j]]);
  }
}

bool compiled_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                     cudaStream_t stream) {
  auto& c = static_cast<Compiled&>(p);
  const Shape shape = outputs[0].shape();
  const size_t n = outputs[0].size();
  bool generable = static_cast<int>(shape.size()) <= kMaxDims;
  for (auto& in : inputs) generable = generable && storage_type(in.dtype()) != nullptr;
  for (auto& o : outputs) generable = generable && storage_type(o.dtype()) != nullptr;
  for (auto& o : outputs) generable = generable && o.size() == n;

  std::vector<InputPlan> plans(inputs.size());
  int strided = 0;
  for (size_t k = 0; generable && k < inputs.size(); ++k) {
    const array& in = inputs[k];
    Strides bs = broadcast_strides_to(in, shape);
    if (std::all_of(bs.begin(), bs.end(), [](int64_t s) { return s == 0; })) {
      plans[k].mode = 's';
    } else if (in.shape() == shape && in.flags().row_contiguous && in.data_size() == in.size()) {
      plans[k].mode = 'c';
    } else {
      plans[k].mode = 'g';
      plans[k].slot = strided++;
      plans[k].strides = std::move(bs);
    }
  }
  if (!generable) {
    run_op_by_op(c, inputs, outputs);
    return true;
  }
  if (n == 0) {
    for (auto& o : outputs) alloc_output(o);
    return true;
  }

  std::vector<void*> ptrs;
  for (auto& in : inputs) ptrs.push_back(const_cast<void*>(device_data(in, stream)));
  // Four elements per access where every dense input is aligned for it (the
  // outputs are fresh pool blocks, 256-byte aligned).
  bool vec = n >= 4;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (plans[k].mode != 'c') continue;
    vec = vec && reinterpret_cast<uintptr_t>(ptrs[k]) % (4 * inputs[k].itemsize()) == 0;
  }
  std::string modes;
  for (size_t k = 0; k < inputs.size(); ++k) modes += plans[k].mode;
  const int unroll = vec ? fused_unroll() : 1;
  // Per thread: the kernel of each region shape, or null when the region
  // has no device form (then it runs op by op).
  thread_local std::unordered_map<std::string, cudaKernel_t> kernels;
  std::string key = region_key(c, inputs, outputs, modes, vec, unroll);
  auto found = kernels.find(key);
  cudaKernel_t kernel = nullptr;
  if (found != kernels.end()) {
    kernel = found->second;
  } else {
    std::vector<Dtype> in_dt, out_dt;
    for (auto& in : inputs) in_dt.push_back(in.dtype());
    for (auto& o : outputs) out_dt.push_back(o.dtype());
    std::string src = fused_kernel_source(c, in_dt, modes, out_dt, vec, unroll);
    if (!src.empty()) {
      if (unsigned k = fused_min_blocks()) {
        // Fewer registers for more resident blocks (ptxas may spill).
        const std::string decl = "__global__ void NAME(";
        size_t at = src.find(decl);
        if (at != std::string::npos) {
          src.replace(at, decl.size(),
                      "__global__ void __launch_bounds__(" + std::to_string(fused_threads()) +
                          ", " + std::to_string(k) + ") NAME(");
        }
      }
      std::string name = hashed_name(src);
      for (size_t pos = 0; (pos = src.find("NAME(", pos)) != std::string::npos;) {
        src.replace(pos, 4, name);
      }
      kernel = jit_kernel(name, [&] { return src; });
    }
    kernels.emplace(std::move(key), kernel);
  }
  if (kernel == nullptr) {
    run_op_by_op(c, inputs, outputs);
    return true;
  }
  for (auto& o : outputs) ptrs.push_back(alloc_output(o));

  // The layout: ndim, shape, then one stride row per strided input.
  std::vector<long long> layout(1 + kMaxDims + kMaxDims * std::max(strided, 1), 0);
  std::vector<char> layout_bytes(sizeof(long long) * layout.size(), 0);
  int ndim = static_cast<int>(shape.size()); // in the first 8 bytes, as the struct pads it
  for (int d = 0; d < ndim; ++d) layout[1 + d] = shape[d];
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (plans[k].mode != 'g') continue;
    for (int d = 0; d < ndim; ++d)
      layout[1 + kMaxDims + plans[k].slot * kMaxDims + d] = plans[k].strides[d];
  }
  std::memcpy(layout_bytes.data(), layout.data(), layout_bytes.size());
  std::memcpy(layout_bytes.data(), &ndim, sizeof(int));

  long long count = static_cast<long long>(n);
  std::vector<void*> args;
  for (auto& ptr : ptrs) args.push_back(&ptr);
  args.push_back(&count);
  args.push_back(layout_bytes.data());
  const unsigned threads = fused_threads();
  size_t work = vec ? ((n + 3) / 4 + unroll - 1) / unroll : n;
  // One thread per unit of work keeps the most loads in flight.
  size_t blocks = std::min<size_t>((work + threads - 1) / threads, 0x7fffffffu);
  launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(threads), args.data(), 0, stream,
                "cudaLaunchKernel (fused region)");
  return true;
}

struct Registration {
  Registration() { register_kernel(typeid(Compiled), &compiled_kernel); }
} registration;

} // namespace
} // namespace loom::cuda
