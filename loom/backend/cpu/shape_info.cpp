#include "loom/primitives/shape_info.h"

#include "loom/allocator/allocator.h"
#include "loom/types/dispatch.h"

namespace loom {

void NumberOfElements::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  const double n = count(inputs[0].shape());
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    *out.data<T>() = convert<T>(n);
  });
}

} // namespace loom
