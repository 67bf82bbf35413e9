// The fused primitive's shapes, transforms and printing. Its CPU kernel is
// in backend/cpu/compiled.cpp.
#include "loom/compile/compiled.h"

#include "loom/ops/creation.h"
#include "loom/transforms/transforms.h"

namespace loom::compile_detail {

std::vector<array> Compiled::expand(const std::vector<array>& inputs) const {
  std::vector<array> values(inputs.begin(), inputs.end());
  values.reserve(inputs.size() + ops_.size());
  for (const auto& op : ops_) {
    std::vector<array> args;
    for (int a : op.args) args.push_back(values[a]);
    Shape shape = op.primitive->output_shapes(args)[0];
    values.emplace_back(std::move(shape), op.dtype, op.primitive, std::move(args));
  }
  std::vector<array> outs;
  for (int o : outputs_) outs.push_back(values[num_inputs_ + o]);
  return outs;
}

std::vector<Shape> Compiled::output_shapes(const std::vector<array>& inputs) {
  // Shapes only: run the ops' shape rules on data-less arrays.
  std::vector<array> values(inputs.begin(), inputs.end());
  for (const auto& op : ops_) {
    std::vector<array> args;
    for (int a : op.args) args.push_back(values[a]);
    values.push_back(array::empty(op.primitive->output_shapes(args)[0], op.dtype));
  }
  std::vector<Shape> shapes;
  for (int o : outputs_) shapes.push_back(values[num_inputs_ + o].shape());
  return shapes;
}

std::vector<array> Compiled::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums, const std::vector<array>&) {
  auto [outs, grads] =
      loom::vjp([this](const std::vector<array>& in) { return expand(in); }, primals, cotangents);
  std::vector<array> result;
  for (int a : argnums) result.push_back(grads[a]);
  return result;
}

std::vector<array> Compiled::jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>& argnums) {
  std::vector<array> all;
  for (auto& p : primals) all.push_back(zeros_like(p));
  for (size_t k = 0; k < argnums.size(); ++k) all[argnums[k]] = tangents[k];
  return loom::jvp([this](const std::vector<array>& in) { return expand(in); }, primals, all)
      .second;
}

std::pair<std::vector<array>, std::vector<int>> Compiled::vmap(const std::vector<array>& inputs,
                                                               const std::vector<int>& axes) {
  auto outs = vmap_apply([this](const std::vector<array>& in) { return expand(in); }, inputs, axes,
                         [](const std::vector<array>& o) { return std::vector<int>(o.size(), 0); });
  return {outs, std::vector<int>(outs.size(), 0)};
}

void Compiled::print_params(std::ostream& os) const {
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (i) os << ", ";
    os << ops_[i].primitive->describe();
  }
}

} // namespace loom::compile_detail
