// SliceUpdate on the GPU (x[a:b:s] = v, KV-cache writes): the input is
// donated or copied into the output, then one strided copy writes the update
// into its region. The strided copy (any source layout into any destination
// strides) is shared with Scatter, whose input may be a broadcast or a view.
#include "loom/primitives/slice.h"

#include <string>

#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"
#include "loom/primitives/state.h"

namespace loom::cuda {

namespace {

constexpr int kMaxDims = 8;

// The kernel's loom_copy_layout, byte for byte.
struct CopyLayout {
  int ndim;
  long long shape[kMaxDims];
  long long src_strides[kMaxDims];
  long long dst_strides[kMaxDims];
};

const char* sized_type(size_t size) {
  switch (size) {
    case 1:
      return "unsigned char";
    case 2:
      return "unsigned short";
    case 4:
      return "unsigned int";
    default:
      return "unsigned long long";
  }
}

std::string copy_source(const std::string& name, size_t size) {
  std::string t = sized_type(size);
  return "struct loom_copy_layout { int ndim; long long shape[8], src[8], dst[8]; };\n"
         "extern \"C\" __global__ void " +
         name + "(const " + t + "* __restrict__ in, " + t +
         "* __restrict__ out, long long n, loom_copy_layout l) {\n"
         "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
         "       i += (long long)gridDim.x * blockDim.x) {\n"
         "    long long r = i, si = 0, di = 0;\n"
         "    for (int d = l.ndim - 1; d >= 0; --d) {\n"
         "      const long long q = r / l.shape[d], c = r - q * l.shape[d];\n"
         "      si += c * l.src[d];\n"
         "      di += c * l.dst[d];\n"
         "      r = q;\n"
         "    }\n"
         "    out[di] = in[si];\n"
         "  }\n"
         "}\n";
}

bool slice_update_kernel(Primitive& prim, const std::vector<array>& inputs,
                         std::vector<array>& outputs, cudaStream_t s) {
  const array& a = inputs[0];
  const array& update = inputs[1];
  array& out = outputs[0];
  if (a.ndim() > kMaxDims || update.ndim() != a.ndim() || update.dtype() != a.dtype()) return false;
  if (a.itemsize() > 8 || (a.itemsize() & (a.itemsize() - 1)) != 0) return false;
  PrimitiveState st = prim.state();
  auto start = state_get<std::vector<int>>(st, "SliceUpdate", "start");
  auto step = state_get<std::vector<int>>(st, "SliceUpdate", "strides");
  if (static_cast<int>(start.size()) != a.ndim() || static_cast<int>(step.size()) != a.ndim())
    return false;
  // Donate a buffer only the device holds (a host copy would go stale).
  char* dst = nullptr;
  const bool dense = a.flags().row_contiguous && a.data_size() == a.size();
  if (dense && a.data_shared_ptr()->valid() == allocator::Data::kDevice && a.is_donatable() &&
      !out.is_tracer()) {
    dst = static_cast<char*>(const_cast<void*>(device_data(a, s)));
    out.copy_shared_buffer(a);
  } else {
    dst = static_cast<char*>(alloc_output(out));
    if (a.size() > 0) copy_to_row_major(a, dst, s);
  }
  if (update.size() == 0) return true;
  std::vector<int64_t> region(a.ndim());
  int64_t offset = 0, row = 1;
  for (int d = a.ndim() - 1; d >= 0; --d) {
    offset += static_cast<int64_t>(start[d]) * row;
    region[d] = row * step[d];
    row *= a.shape(d);
  }
  copy_strided(update, dst + offset * static_cast<int64_t>(a.itemsize()), region, s);
  return true;
}

struct Registration {
  Registration() { register_kernel(typeid(SliceUpdate), &slice_update_kernel); }
} registration;

} // namespace

void copy_strided(const array& src, void* dst, const std::vector<int64_t>& dst_strides,
                  cudaStream_t s) {
  if (src.size() == 0) return;
  if (src.ndim() > kMaxDims) throw std::runtime_error("[cuda] Too many dimensions for a copy.");
  CopyLayout l{};
  l.ndim = src.ndim();
  for (int d = 0; d < src.ndim(); ++d) {
    l.shape[d] = src.shape(d);
    l.src_strides[d] = src.strides(d);
    l.dst_strides[d] = dst_strides[d];
  }
  const void* in = device_data(src, s);
  std::string name = "loom_copy_strided_" + std::to_string(src.itemsize());
  cudaKernel_t k = jit_kernel(name, [&] { return copy_source(name, src.itemsize()); });
  long long n = static_cast<long long>(src.size());
  void* args[] = {&in, &dst, &n, &l};
  launch_elementwise(k, src.size(), args, s);
}

void copy_to_row_major(const array& src, void* dst, cudaStream_t s) {
  if (src.size() == 0) return;
  if (src.flags().row_contiguous && src.data_size() == src.size()) {
    check(cudaMemcpyAsync(dst, device_data(src, s), src.nbytes(), cudaMemcpyDeviceToDevice, s),
          "cudaMemcpyAsync (device to device)");
    return;
  }
  std::vector<int64_t> row(src.ndim(), 1);
  for (int d = src.ndim() - 2; d >= 0; --d) row[d] = row[d + 1] * src.shape(d + 1);
  copy_strided(src, dst, row, s);
}

const void* dense_data(const array& a, allocator::Buffer& tmp, cudaStream_t s) {
  if (a.flags().row_contiguous && a.data_size() == a.size()) return device_data(a, s);
  tmp = device_pool(current_device()).malloc(a.nbytes());
  copy_to_row_major(a, tmp.ptr, s);
  return tmp.ptr;
}

std::string strided_copy_kernel_source(const std::string& name, size_t size) {
  return copy_source(name, size);
}

} // namespace loom::cuda
