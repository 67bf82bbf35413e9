#include "loom/primitives/ternary.h"

#include <memory>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/primitives/binary.h"
#include "loom/primitives/state_util.h"

namespace loom {

array make_select(const array& condition, const array& x, const array& y, Stream stream) {
  return array(x.shape(), x.dtype(), std::make_shared<Select>(stream), {condition, x, y});
}

std::vector<Shape> Select::output_shapes(const std::vector<array>& inputs) {
  return {inputs[1].shape()};
}

std::vector<array> Select::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums, const std::vector<array>&) {
  const Stream s = stream();
  std::vector<array> grads;
  for (int arg : argnums) {
    array g = ew::Select::derivative({arg, primals[0], primals[1], primals[2], cotangents[0], s});
    if (g.dtype() != primals[arg].dtype()) g = astype(g, primals[arg].dtype(), s);
    grads.push_back(g);
  }
  return grads;
}

std::vector<array> Select::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  const array& condition = primals[0];
  const array* tx = nullptr;
  const array* ty = nullptr;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 1) tx = &tangents[i];
    if (argnums[i] == 2) ty = &tangents[i];
  }
  // The condition is piecewise constant: its tangent does not contribute.
  // Both branches at once is one select rather than the sum of two.
  if (tx != nullptr && ty != nullptr) return {where(condition, *tx, *ty, stream())};
  const Stream s = stream();
  if (tx != nullptr)
    return {ew::Select::derivative({1, condition, primals[1], primals[2], *tx, s})};
  if (ty != nullptr)
    return {ew::Select::derivative({2, condition, primals[1], primals[2], *ty, s})};
  return {zeros_like(primals[1], s)};
}

std::pair<std::vector<array>, std::vector<int>> Select::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  std::vector<array> in = inputs;
  int axis = align_batched_inputs(in, axes, stream());
  return {{make_select(in[0], in[1], in[2], stream())}, {axis}};
}

bool Select::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

LOOM_REGISTER_PRIMITIVE(Select, [](Stream s, const PrimitiveState&) {
  return std::make_shared<Select>(s);
});

} // namespace loom
