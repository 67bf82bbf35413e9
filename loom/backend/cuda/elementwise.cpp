// Element-wise kernels (Unary, Binary, Select, AsType, Copy) generated from
// the op table's code forms and built with NVRTC: one small kernel per op,
// dtype and input layout (contiguous, broadcast scalar, or strided), cached.
// Complex dtypes and ops whose code form is not valid device code run on the
// CPU fallback.
#include <cstring>
#include <string>

#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"
#include "loom/primitives/binary.h"
#include "loom/primitives/creation.h"
#include "loom/primitives/elementwise_table.h"
#include "loom/primitives/ternary.h"
#include "loom/primitives/unary.h"

namespace loom::cuda {

namespace {

// Storage type in generated code, or null when the dtype has no GPU path.
const char* storage_type(Dtype d) {
  switch (d.val) {
    case Dtype::Val::bool_:
      return "bool";
    case Dtype::Val::uint8:
      return "unsigned char";
    case Dtype::Val::uint16:
      return "unsigned short";
    case Dtype::Val::uint32:
      return "unsigned int";
    case Dtype::Val::uint64:
      return "unsigned long long";
    case Dtype::Val::int8:
      return "signed char";
    case Dtype::Val::int16:
      return "short";
    case Dtype::Val::int32:
      return "int";
    case Dtype::Val::int64:
      return "long long";
    case Dtype::Val::float16:
      return "loom_half";
    case Dtype::Val::bfloat16:
      return "loom_bf16";
    case Dtype::Val::float32:
      return "float";
    case Dtype::Val::float64:
      return "double";
    case Dtype::Val::complex64:
      return nullptr;
  }
  return nullptr;
}

// The type arithmetic happens in (float16/bfloat16 compute as float).
const char* compute_type(Dtype d) {
  if (d == float16 || d == bfloat16) return "float";
  return storage_type(d);
}

bool is_float(Dtype d) { return d == float16 || d == bfloat16 || d == float32 || d == float64; }

// Ops whose code form computes the CPU functor's result on integers (C
// integer arithmetic, wrapped on store) and on bools.
bool int_safe(const std::string& name, bool boolean) {
  static const char* both[] = {"LogicalNot", "Equal",      "NotEqual",     "Less",
                               "LessEqual",  "Greater",    "GreaterEqual", "LogicalAnd",
                               "LogicalOr",  "BitwiseAnd", "BitwiseOr",    "BitwiseXor",
                               "Maximum",    "Minimum",    "Select"};
  static const char* ints[] = {"Negative", "Square",   "Sign",    "BitwiseInvert",
                               "Add",      "Subtract", "Multiply"};
  for (auto* n : both)
    if (name == n) return true;
  if (boolean) return false;
  for (auto* n : ints)
    if (name == n) return true;
  return false;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

// The kernels' loom_layout, byte for byte.
struct loom_layout_host {
  int ndim;
  long long shape[8];
  long long strides[3][8];
};

// Element `i` of an input: contiguous, one broadcast element, or strided.
char layout_mode(const array& a) {
  if (a.data_size() == 1) return 's';
  if (a.flags().row_contiguous && a.data_size() == a.size()) return 'c';
  return 'g';
}

// Generates, builds and launches `out = expr(inputs)`; false when the case
// has no GPU path (the caller falls back to the CPU).
// With `keep_layout`, a one-input op over a dense input in any order (a
// transposed matrix) writes its output in that same order, as the CPU does.
bool run_generated(const std::string& tag, const std::string& expr,
                   const std::vector<array>& inputs, array& out, cudaStream_t stream,
                   bool keep_layout = false) {
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

  std::string name = "loom_" + tag + "_" + std::to_string(static_cast<int>(out.dtype().val));
  for (auto& in : inputs) name += "_" + std::to_string(static_cast<int>(in.dtype().val));
  name += "_" + modes;

  auto make_source = [&] {
    std::string src = jit_prelude();
    src += "extern \"C\" __global__ void " + name + "(";
    for (size_t k = 0; k < inputs.size(); ++k) {
      src += std::string("const ") + storage_type(inputs[k].dtype()) + "* __restrict__ in" +
             std::to_string(k) + ", ";
    }
    src += std::string(out_store) + "* __restrict__ out, long long n, loom_layout layout) {\n";
    src +=
        "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;"
        " i += (long long)gridDim.x * blockDim.x) {\n";
    for (size_t k = 0; k < inputs.size(); ++k) {
      std::string ks = std::to_string(k);
      std::string idx = modes[k] == 'c'   ? "i"
                        : modes[k] == 's' ? "0"
                                          : "loom_offset(i, layout, " + ks + ")";
      src += std::string("    ") + compute_type(inputs[k].dtype()) + " x" + ks + " = (" +
             compute_type(inputs[k].dtype()) + ")loom_ld(in" + ks + "[" + idx + "]);\n";
    }
    src +=
        std::string("    loom_st(out + i, (") + compute_type(out.dtype()) + ")(" + expr + "));\n";
    src += "  }\n}\n";

    return src;
  };
  cudaKernel_t kernel = jit_kernel(name, make_source);

  loom_layout_host layout{};
  layout.ndim = out.ndim();
  for (int d = 0; d < out.ndim(); ++d) layout.shape[d] = out.shape(d);
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (modes[k] != 'g') continue;
    for (int d = 0; d < out.ndim(); ++d) layout.strides[k][d] = inputs[k].strides(d);
  }
  std::vector<void*> ptrs;
  for (auto& in : inputs) ptrs.push_back(const_cast<void*>(device_data(in, stream)));
  void* optr;
  if (keep_layout) {
    auto& pool = device_pool(current_device());
    out.set_data(std::make_shared<allocator::Data>(pool.malloc(out.nbytes()), &pool),
                 first.data_size(), first.strides(), first.flags());
    optr = out.data_shared_ptr()->device_ptr(pool, nullptr);
  } else {
    optr = alloc_output(out);
  }
  long long n = static_cast<long long>(out.size());
  std::vector<void*> args;
  for (auto& p : ptrs) args.push_back(&p);
  args.push_back(&optr);
  args.push_back(&n);
  args.push_back(&layout);
  launch_elementwise(kernel, out.size(), args.data(), stream);
  return true;
}

// The op table's code form in device syntax, or empty if it has none here.
std::string device_expr(const ew::OpInfo& info, Dtype compute_dtype) {
  if (!info.fusable || info.code == nullptr) return {};
  std::string name = info.name;
  if (!is_float(compute_dtype) && !int_safe(name, compute_dtype == bool_)) return {};
  if (is_float(compute_dtype) &&
      (info.accepts == ew::Accepts::integral || info.accepts == ew::Accepts::integer)) {
    return {};
  }
  std::string e = info.code;
  if (e.find("std::") != std::string::npos || e.find("loom::") != std::string::npos) return {};
  e = replace_all(e, "isnan(", "loom_isnan(");
  e = replace_all(e, "isinf(", "loom_isinf(");
  for (int k = 0; k < 3; ++k)
    e = replace_all(e, "{" + std::to_string(k) + "}", "x" + std::to_string(k));
  return e;
}

bool unary_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                  cudaStream_t s) {
  auto op = static_cast<Unary&>(p).op();
  std::string expr = device_expr(ew::info(op), inputs[0].dtype());
  if (expr.empty()) return false;
  return run_generated(ew::info(op).name, expr, inputs, outputs[0], s, true);
}

bool binary_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                   cudaStream_t s) {
  auto op = static_cast<Binary&>(p).op();
  if (inputs[0].dtype() != inputs[1].dtype()) return false;
  std::string expr = device_expr(ew::info(op), inputs[0].dtype());
  if (expr.empty()) return false;
  return run_generated(ew::info(op).name, expr, inputs, outputs[0], s);
}

bool select_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                   cudaStream_t s) {
  if (inputs[1].dtype() != inputs[2].dtype()) return false;
  std::string expr = device_expr(ew::info(TernaryOp::Select), inputs[1].dtype());
  if (expr.empty()) return false;
  return run_generated("Select", expr, inputs, outputs[0], s);
}

// A cast goes through the compute types: float16/bfloat16 via float.
bool astype_kernel(Primitive&, const std::vector<array>& inputs, std::vector<array>& outputs,
                   cudaStream_t s) {
  Dtype from = inputs[0].dtype(), to = outputs[0].dtype();
  if (to == bool_ && from != bool_)
    return run_generated("AsType", "(x0 != 0)", inputs, outputs[0], s, true);
  // Float to integer: the CPU path's saturating/NaN conventions are not
  // pinned down here yet, so those casts stay on the CPU.
  if (is_float(from) && !is_float(to) && to != bool_) return false;
  return run_generated("AsType", "x0", inputs, outputs[0], s, true);
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
  }
} registration;

} // namespace
} // namespace loom::cuda
