// The creation primitives made from parameters alone (Arange, Linspace, Eye)
// on the GPU, bit-identical to backend/cpu/creation.cpp: each kernel does the
// CPU's arithmetic in the same order with explicitly rounded operations
// (__dmul_rn and friends), so that NVRTC's default contraction into fused
// multiply-adds cannot change a value.
#include "loom/primitives/creation.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"
#include "loom/types/dispatch.h"

namespace loom::cuda {

namespace {

std::string grid_loop() {
  return "  const long long stride = (long long)gridDim.x * blockDim.x;\n"
         "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;"
         " i += stride) {\n";
}

bool is_integer(Dtype d) {
  return d == uint8 || d == uint16 || d == uint32 || d == uint64 || d == int8 || d == int16 ||
         d == int32 || d == int64;
}

// Integer dtypes: base + i * delta wrapped into the type (the progression
// comes from the primitive, as on the CPU). Floating dtypes: start + i * step
// in double, rounded once to float32/float64 (through float32 for the half
// types, as the CPU's conversion does); element 0 is start itself.
std::string arange_source(const std::string& name, Dtype d) {
  const std::string t = storage_type(d);
  std::string src = jit_prelude();
  if (is_integer(d)) {
    src += "extern \"C\" __global__ void " + name + "(" + t +
           "* out, unsigned long long base, unsigned long long delta, long long n) {\n" +
           grid_loop() + "    out[i] = (" + t +
           ")(base + (unsigned long long)i * delta);\n  }\n}\n";
    return src;
  }
  const bool half = d == float16 || d == bfloat16;
  src += "extern \"C\" __global__ void " + name + "(" + t +
         "* out, double start, double step, long long n) {\n" + grid_loop() +
         "    double v = i == 0 ? start : __dadd_rn(start, __dmul_rn((double)i, step));\n" +
         (half ? "    loom_st(out + i, __double2float_rn(v));\n" : "    out[i] = (" + t + ")v;\n") +
         "  }\n}\n";
  return src;
}

bool arange_kernel(Primitive& p, const std::vector<array>&, std::vector<array>& outputs,
                   cudaStream_t s) {
  auto& arange = static_cast<Arange&>(p);
  array& out = outputs[0];
  const Dtype d = out.dtype();
  if (!is_integer(d) && !is_float(d)) return false; // bool and complex64 stay on the CPU
  void* dst = alloc_output(out);
  long long n = static_cast<long long>(out.size());
  if (n == 0) return true;
  const std::string name = "loom_arange_" + std::to_string(static_cast<int>(d.val));
  cudaKernel_t kern = jit_kernel(name, [&] { return arange_source(name, d); });
  if (is_integer(d)) {
    const Arange::IntegerProgression prog = arange.integer_progression();
    unsigned long long base = prog.base, delta = prog.delta;
    void* args[] = {&dst, &base, &delta, &n};
    launch_elementwise(kern, static_cast<size_t>(n), args, s);
  } else {
    double start = arange.start(), step = arange.step();
    void* args[] = {&dst, &start, &step, &n};
    launch_elementwise(kern, static_cast<size_t>(n), args, s);
  }
  return true;
}

// t = i / (n - 1); (1 - t) * start + t * stop, every operation rounded on its
// own: in float32 for float32 and the half types (then rounded to them), in
// double for float64. A single element is start.
std::string linspace_source(const std::string& name, Dtype d) {
  const std::string t = storage_type(d);
  const bool dbl = d == float64;
  const std::string c = dbl ? "double" : "float";
  const std::string sfx = dbl ? "d" : "f";
  std::string src = jit_prelude();
  src += "extern \"C\" __global__ void " + name + "(" + t + "* out, " + c + " start, " + c +
         " stop, long long n) {\n" + grid_loop() + "    " + c + " v;\n" +
         "    if (n == 1) {\n      v = start;\n    } else {\n" + "      " + c + " tt = __" + sfx +
         "div_rn((" + c + ")i, (" + c + ")(n - 1));\n" + "      v = __" + sfx + "add_rn(__" + sfx +
         "mul_rn(__" + sfx + "sub_rn((" + c + ")1, tt), start), __" + sfx +
         "mul_rn(tt, stop));\n    }\n" +
         (d == float16 || d == bfloat16 ? "    loom_st(out + i, v);\n" : "    out[i] = v;\n") +
         "  }\n}\n";
  return src;
}

bool linspace_kernel(Primitive& p, const std::vector<array>&, std::vector<array>& outputs,
                     cudaStream_t s) {
  auto& linspace = static_cast<Linspace&>(p);
  array& out = outputs[0];
  const Dtype d = out.dtype();
  // Integer outputs convert float32 values with the CPU's x86 rules: they
  // stay on the CPU.
  if (!is_float(d)) return false;
  void* dst = alloc_output(out);
  long long n = static_cast<long long>(out.size());
  if (n == 0) return true;
  const std::string name = "loom_linspace_" + std::to_string(static_cast<int>(d.val));
  cudaKernel_t kern = jit_kernel(name, [&] { return linspace_source(name, d); });
  if (d == float64) {
    double start = linspace.start(), stop = linspace.stop();
    void* args[] = {&dst, &start, &stop, &n};
    launch_elementwise(kern, static_cast<size_t>(n), args, s);
  } else {
    float start = static_cast<float>(linspace.start()), stop = static_cast<float>(linspace.stop());
    void* args[] = {&dst, &start, &stop, &n};
    launch_elementwise(kern, static_cast<size_t>(n), args, s);
  }
  return true;
}

// Writes `bytes` bytes of `pattern` (the dtype's one, encoded on the host by
// the CPU's own conversion) at each element of the diagonal.
std::string eye_source(const std::string& name, int bytes) {
  const char* word = bytes == 1   ? "unsigned char"
                     : bytes == 2 ? "unsigned short"
                     : bytes == 4 ? "unsigned int"
                                  : "unsigned long long";
  return "extern \"C\" __global__ void " + name + "(" + word +
         "* out, unsigned long long pattern, long long first_row, long long cols, long long "
         "diagonal, long long n) {\n" +
         grid_loop() + "    const long long row = first_row + i;\n" +
         "    out[row * cols + row + diagonal] = (" + word + ")pattern;\n  }\n}\n";
}

bool eye_kernel(Primitive& p, const std::vector<array>&, std::vector<array>& outputs,
                cudaStream_t s) {
  auto& eye = static_cast<Eye&>(p);
  array& out = outputs[0];
  const Dtype d = out.dtype();
  void* dst = alloc_output(out);
  if (out.size() == 0) return true;
  check(cudaMemsetAsync(dst, 0, out.nbytes(), s), "cudaMemsetAsync");
  long long rows = eye.rows(), cols = eye.cols(), diagonal = eye.diagonal();
  long long first_row = diagonal < 0 ? -diagonal : 0;
  // Rows i with first_row <= i < rows and i + diagonal < cols (the CPU's loop).
  long long last_row = std::min(rows, cols - diagonal);
  long long n = last_row - first_row;
  if (n <= 0) return true;
  unsigned long long pattern = 0;
  dispatch(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T one = convert<T>(1);
    std::memcpy(&pattern, &one, sizeof(T));
  });
  const int bytes = static_cast<int>(d.size);
  const std::string name = "loom_eye_" + std::to_string(bytes);
  cudaKernel_t kern = jit_kernel(name, [&] { return eye_source(name, bytes); });
  void* args[] = {&dst, &pattern, &first_row, &cols, &diagonal, &n};
  launch_elementwise(kern, static_cast<size_t>(n), args, s);
  return true;
}

struct Registration {
  Registration() {
    register_kernel(typeid(Arange), &arange_kernel);
    register_kernel(typeid(Linspace), &linspace_kernel);
    register_kernel(typeid(Eye), &eye_kernel);
  }
} registration;

} // namespace
} // namespace loom::cuda
