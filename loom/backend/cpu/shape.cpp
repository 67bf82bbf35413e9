// CPU kernels of the shape primitives: views, concatenation and split.
#include "loom/primitives/shape.h"

#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/strided.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/types/dispatch.h"

namespace loom {

// Views -------------------------------------------------------------------------

void Reshape::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  if (auto strides = reshape_strides(in.shape(), in.strides(), out.shape())) {
    make_view(in, out, std::move(*strides));
  } else {
    // Row-major order of the input is the output's order.
    out.set_data(allocator::allocate(out.nbytes()));
    cpu::copy_strided(in, out, row_major_strides(in.shape()), 0);
  }
}

void Transpose::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  Strides strides(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) strides[i] = in.strides()[axes_[i]];
  make_view(in, outputs[0], std::move(strides));
}

void Broadcast::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  make_view(inputs[0], outputs[0], cpu::broadcast_strides(inputs[0], outputs[0].shape()));
}

void ExpandDims::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  const Shape& shape = outputs[0].shape();
  Strides strides(shape.size());
  size_t next_in = in.ndim();
  size_t next_axis = axes_.size();
  // Walk from the back so an inserted axis gets the stride a packed layout
  // would give it (any stride is valid for a size-1 axis).
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (next_axis > 0 && axes_[next_axis - 1] == d) {
      --next_axis;
      strides[d] = d + 1 < static_cast<int>(shape.size())
                       ? strides[d + 1] * std::max<int64_t>(shape[d + 1], 1)
                       : 1;
    } else {
      strides[d] = in.strides()[--next_in];
    }
  }
  make_view(in, outputs[0], std::move(strides));
}

void Squeeze::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  Strides strides;
  size_t next_axis = 0;
  for (int d = 0; d < in.ndim(); ++d) {
    if (next_axis < axes_.size() && axes_[next_axis] == d) {
      ++next_axis;
    } else {
      strides.push_back(in.strides()[d]);
    }
  }
  make_view(in, outputs[0], std::move(strides));
}

void Concatenate::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  const Strides& strides = out.strides();
  int64_t offset = 0;
  for (auto& in : inputs) {
    cpu::copy_strided(in, out, strides, offset);
    offset += static_cast<int64_t>(in.shape(axis_)) * strides[axis_];
  }
}

void Split::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  auto parts = pieces(in.shape(axis_));
  for (size_t i = 0; i < outputs.size(); ++i) {
    make_view(in, outputs[i], in.strides(),
              static_cast<int64_t>(parts[i].first) * in.strides()[axis_]);
  }
}

} // namespace loom
