// Execution of the primitives the transform engine inserts
// (loom/transforms/primitives.h): identities that share their input's
// buffer, and the vmap placeholder that must never run.
#include <stdexcept>

#include "loom/transforms/primitives.h"

namespace loom {

void Marker::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  outputs[0].copy_shared_buffer(inputs[0]);
}

void VmapPlaceholder::eval_cpu(const std::vector<array>&, std::vector<array>&) {
  throw std::invalid_argument(
      "[vmap] Cannot evaluate an array inside a vmapped function: its value depends on the "
      "slice being mapped. Move item(), print, numpy conversion or Python control flow on "
      "arrays out of the function.");
}

void CustomTransforms::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].copy_shared_buffer(inputs[num_inputs_ + i]);
  }
}

} // namespace loom
