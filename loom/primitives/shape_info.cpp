#include "loom/primitives/shape_info.h"

#include "loom/ops.h"
#include "loom/ops/shape_info.h"

namespace loom {

double NumberOfElements::count(const Shape& shape) const {
  double n = 1;
  for (int ax : axes_) n *= shape.at(static_cast<size_t>(ax));
  return inverted_ ? 1.0 / n : n;
}

std::vector<Shape> NumberOfElements::output_shapes(const std::vector<array>&) { return {{}}; }

// The count depends on the input's shape only: its derivative is zero.
std::vector<array> NumberOfElements::vjp(const std::vector<array>& primals,
                                         const std::vector<array>&, const std::vector<int>& argnums,
                                         const std::vector<array>&) {
  std::vector<array> grads;
  for (size_t i = 0; i < argnums.size(); ++i) grads.push_back(zeros_like(primals[0], stream()));
  return grads;
}

std::vector<array> NumberOfElements::jvp(const std::vector<array>&, const std::vector<array>&,
                                         const std::vector<int>&) {
  return {zeros({}, dtype_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> NumberOfElements::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  // The mapped axis is not one of the counted ones: shift those after it.
  std::vector<int> shifted;
  for (int ax : axes_) shifted.push_back(axes[0] >= 0 && ax >= axes[0] ? ax + 1 : ax);
  return {{array(Shape{}, dtype_,
                 std::make_shared<NumberOfElements>(stream(), shifted, inverted_, dtype_),
                 {inputs[0]})},
          {-1}};
}

PrimitiveState NumberOfElements::state() const {
  return {{"axes", std::vector<int64_t>(axes_.begin(), axes_.end())},
          {"inverted", inverted_},
          {"dtype", dtype_}};
}

LOOM_REGISTER_PRIMITIVE(NumberOfElements, [](Stream s, const PrimitiveState& st) {
  auto axes = state_get<std::vector<int64_t>>(st, "NumberOfElements", "axes");
  return std::make_shared<NumberOfElements>(s, std::vector<int>(axes.begin(), axes.end()),
                                            state_get<bool>(st, "NumberOfElements", "inverted"),
                                            state_get<Dtype>(st, "NumberOfElements", "dtype"));
});

} // namespace loom
