// CPU kernels of slicing and slice updates.
#include "loom/primitives/slice.h"

#include "loom/backend/cpu/copy.h"
#include "loom/primitives/shape.h"

namespace loom {

void Slice::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  Strides strides(in.ndim());
  int64_t offset = 0;
  for (int d = 0; d < in.ndim(); ++d) {
    offset += static_cast<int64_t>(start_[d]) * in.strides()[d];
    strides[d] = in.strides()[d] * strides_[d];
  }
  make_view(in, outputs[0], std::move(strides), offset);
}

void SliceUpdate::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  const array& update = inputs[1];
  array& out = outputs[0];
  // Write in place when nothing else can see a's buffer and every element of
  // it is distinct (a broadcast layout would alias the region's elements).
  bool dense = a.flags().contiguous && a.data_size() == a.size();
  if (dense && a.is_donatable() && !out.is_tracer()) {
    out.copy_shared_buffer(a);
  } else {
    cpu::copy_contiguous(a, out);
  }
  if (update.size() == 0) return;
  Strides region_strides(out.ndim());
  int64_t offset = 0;
  for (int d = 0; d < out.ndim(); ++d) {
    offset += static_cast<int64_t>(start_[d]) * out.strides()[d];
    region_strides[d] = out.strides()[d] * strides_[d];
  }
  cpu::copy_strided(update, out, region_strides, offset);
}

} // namespace loom
