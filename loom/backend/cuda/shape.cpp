// Shape-family primitives that move data on the GPU without a generated
// kernel: Concatenate as one strided device-to-device copy per input (the
// copy engine writes each input's rows into its column band of the output).
#include "loom/primitives/shape.h"

#include "loom/backend/cuda/cuda.h"

namespace loom::cuda {

namespace {

bool dense(const array& a) { return a.flags().row_contiguous && a.data_size() == a.size(); }

bool concatenate_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                        cudaStream_t s) {
  array& out = outputs[0];
  int axis = static_cast<Concatenate&>(p).axis();
  if (axis < 0) axis += out.ndim();
  if (axis < 0 || axis >= out.ndim()) return false;
  for (auto& in : inputs) {
    if (in.itemsize() != out.itemsize() || in.ndim() != out.ndim()) return false;
    if (in.size() > 0 && !dense(in)) return false; // strided inputs: the CPU copies them
  }
  size_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= static_cast<size_t>(out.shape(d));
  auto row_bytes = [&](const array& a) {
    size_t n = a.itemsize();
    for (int d = axis; d < a.ndim(); ++d) n *= static_cast<size_t>(a.shape(d));
    return n;
  };
  const size_t out_row = row_bytes(out);
  char* dst = static_cast<char*>(alloc_output(out));
  size_t offset = 0;
  for (auto& in : inputs) {
    const size_t row = row_bytes(in);
    if (row == 0 || outer == 0) continue;
    const void* src = device_data(in, s);
    if (outer == 1) {
      check(cudaMemcpyAsync(dst + offset, src, row, cudaMemcpyDeviceToDevice, s),
            "cudaMemcpyAsync (Concatenate)");
    } else {
      check(cudaMemcpy2DAsync(dst + offset, out_row, src, row, row, outer, cudaMemcpyDeviceToDevice,
                              s),
            "cudaMemcpy2DAsync (Concatenate)");
    }
    offset += row;
  }
  return true;
}

struct Registration {
  Registration() { register_kernel(typeid(Concatenate), &concatenate_kernel); }
} registration;

} // namespace
} // namespace loom::cuda
