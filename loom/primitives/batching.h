// Helpers of vmap rules shared by the primitive families: moving the batch
// axis to the front and giving unbatched inputs one.
#pragma once

#include <vector>

#include "loom/array.h"
#include "loom/ops/shape.h"

namespace loom {

inline array batch_first(const array& x, int axis, const Stream& s) {
  return axis == 0 ? x : moveaxis(x, axis, 0, s);
}

// x with a leading batch axis of size `batch`, whether or not it had one.
inline array batched(const array& x, int axis, int32_t batch, const Stream& s) {
  if (axis >= 0) return batch_first(x, axis, s);
  Shape shape = x.shape();
  shape.insert(shape.begin(), batch);
  return broadcast_to(expand_dims(x, 0, s), shape, s);
}

// The batch size: the mapped axis' length of the first mapped input.
inline int32_t batch_size(const std::vector<array>& inputs, const std::vector<int>& axes) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) return inputs[i].shape(axes[i]);
  }
  return 1;
}

} // namespace loom
