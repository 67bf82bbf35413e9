#include "loom/primitives/ternary.h"

#include <memory>

#include "loom/backend/cpu/elementwise.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/primitives/binary.h"

namespace loom {

array make_select(const array& condition, const array& x, const array& y, Stream stream) {
  return array(x.shape(), x.dtype(), std::make_shared<Select>(stream), {condition, x, y});
}

void Select::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cpu::select(inputs[0], inputs[1], inputs[2], outputs[0]);
}

std::vector<Shape> Select::output_shapes(const std::vector<array>& inputs) {
  return {inputs[1].shape()};
}

std::vector<array> Select::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums, const std::vector<array>&) {
  const array& condition = primals[0];
  const array& cot = cotangents[0];
  array zero(0.0, cot.dtype());
  std::vector<array> grads;
  for (int arg : argnums) {
    if (arg == 0) {
      grads.push_back(zeros_like(condition, stream()));
    } else {
      array g =
          arg == 1 ? where(condition, cot, zero, stream()) : where(condition, zero, cot, stream());
      if (g.dtype() != primals[arg].dtype()) g = astype(g, primals[arg].dtype(), stream());
      grads.push_back(g);
    }
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
  const Dtype dt = primals[1].dtype();
  array zero(0.0, dt);
  // The condition is piecewise constant: its tangent does not contribute.
  if (tx != nullptr && ty != nullptr) return {where(condition, *tx, *ty, stream())};
  if (tx != nullptr) return {where(condition, *tx, zero, stream())};
  if (ty != nullptr) return {where(condition, zero, *ty, stream())};
  return {zeros_like(primals[1], stream())};
}

std::pair<std::vector<array>, std::vector<int>> Select::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  std::vector<array> in = inputs;
  int axis = align_batched_inputs(in, axes, stream());
  return {{make_select(in[0], in[1], in[2], stream())}, {axis}};
}

bool Select::is_equivalent(const Primitive& other) const {
  return dynamic_cast<const Select*>(&other) != nullptr;
}

} // namespace loom
