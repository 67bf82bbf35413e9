// The fused primitive's shapes, transforms and printing. Its CPU kernel is
// in backend/cpu/compiled.cpp.
#include "loom/compile/compiled.h"

#include <stdexcept>

#include "loom/ops/creation.h"
#include "loom/ops/utils.h"
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
  // Every value of a region has one shape, and the inputs an element-wise op
  // reads directly had that shape when traced (smaller ones reach it through
  // a broadcast op, whose size is frozen): under shapeless the region's shape
  // is what those inputs broadcast to now.
  std::vector<Shape> direct;
  for (const auto& op : ops_) {
    if (op.primitive->traits().broadcast) continue;
    for (int a : op.args) {
      if (a < num_inputs_) direct.push_back(inputs[a].shape());
    }
  }
  if (!direct.empty()) {
    try {
      return std::vector<Shape>(outputs_.size(), broadcast_shapes(direct));
    } catch (const std::invalid_argument&) {
    }
  }
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

PrimitiveState Compiled::state() const {
  PrimitiveState ops;
  for (size_t i = 0; i < ops_.size(); ++i) {
    const FusedOp& op = ops_[i];
    PrimitiveState fields{{"name", std::string(op.primitive->name())},
                          {"state", encode_state(op.primitive->state())},
                          {"args", state_ints(op.args)},
                          {"shape", state_ints(op.shape)},
                          {"dtype", op.dtype}};
    ops.push_back({std::to_string(i), encode_state(fields)});
  }
  return {{"num_inputs", int64_t{num_inputs_}},
          {"outputs", state_ints(outputs_)},
          {"ops", encode_state(ops)}};
}

namespace {

// Rebuilds a region from its state, checking every reference, since the
// state may come from a file.
std::shared_ptr<Primitive> make_compiled(Stream s, const PrimitiveState& st) {
  int num_inputs = state_get<int>(st, "Compiled", "num_inputs");
  auto outputs = state_get<std::vector<int>>(st, "Compiled", "outputs");
  PrimitiveState encoded = decode_state(state_get<std::string>(st, "Compiled", "ops"), "Compiled");
  auto bad = [](const std::string& what) {
    return std::invalid_argument("[Compiled] invalid state: " + what + ".");
  };
  if (num_inputs < 0) throw bad("negative number of inputs");
  std::vector<FusedOp> ops;
  for (const StateField& f : encoded) {
    auto* bytes = std::get_if<std::string>(&f.value);
    if (!bytes) throw bad("op " + f.name + " is not an encoded state");
    PrimitiveState fields = decode_state(*bytes, "Compiled");
    std::string name = state_get<std::string>(fields, "Compiled", "name");
    if (name == "Compiled") throw bad("a region nested in a region");
    FusedOp op{
        make_primitive(name, s,
                       decode_state(state_get<std::string>(fields, "Compiled", "state"), name)),
        state_get<std::vector<int>>(fields, "Compiled", "args"),
        state_get<Shape>(fields, "Compiled", "shape"),
        state_get<Dtype>(fields, "Compiled", "dtype")};
    const int known = num_inputs + static_cast<int>(ops.size());
    for (int a : op.args) {
      if (a < 0 || a >= known) throw bad("op " + f.name + " reads value " + std::to_string(a));
    }
    for (int32_t d : op.shape) {
      if (d < 0) throw bad("op " + f.name + " has a negative dimension");
    }
    ops.push_back(std::move(op));
  }
  for (int o : outputs) {
    if (o < 0 || o >= static_cast<int>(ops.size())) throw bad("output " + std::to_string(o));
  }
  return std::make_shared<Compiled>(s, num_inputs, std::move(ops), std::move(outputs));
}

} // namespace

LOOM_REGISTER_PRIMITIVE(Compiled, make_compiled);

} // namespace loom::compile_detail
