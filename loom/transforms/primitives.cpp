#include "loom/transforms/primitives.h"

#include <algorithm>
#include <unordered_set>

#include "loom/ops/creation.h"

namespace loom {

namespace {
CaptureWarningHook g_capture_warning = nullptr;
} // namespace

void warn_if_captures_differentiated(const std::vector<array>& inputs,
                                     const std::vector<array>& body_outputs) {
  if (g_capture_warning == nullptr) return;
  std::unordered_set<const Node*> explicit_inputs;
  for (auto& in : inputs) {
    if (in.has_node()) explicit_inputs.insert(in.node().get());
  }
  std::unordered_set<const Node*> visited;
  std::vector<array> stack(body_outputs.begin(), body_outputs.end());
  while (!stack.empty()) {
    array a = std::move(stack.back());
    stack.pop_back();
    if (!a.has_node() || !a.is_tracer()) continue;
    const Node* node = a.node().get();
    if (explicit_inputs.count(node) || !visited.insert(node).second) continue;
    if (dynamic_cast<const Marker*>(node->primitive.get()) != nullptr) {
      g_capture_warning(
          "A custom_function captured an array that is being differentiated (it is not one of "
          "the function's arguments). Its gradient through this function will be zero, as in "
          "MLX: custom functions treat captured arrays as constants. Pass the array as an "
          "argument to differentiate through it.");
      return;
    }
    for (auto& in : a.inputs()) stack.push_back(in);
  }
}

void set_capture_warning_hook(CaptureWarningHook hook) { g_capture_warning = hook; }

// --- Marker ---

// Marker, VmapPlaceholder and CustomTransforms run on the CPU in
// backend/cpu/transforms.cpp; on a GPU the identities are the same views.
void Marker::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  outputs[0].copy_shared_buffer(inputs[0]);
}
std::vector<Shape> Marker::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}
std::vector<array> Marker::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                               const std::vector<int>&, const std::vector<array>&) {
  return {cotangents[0]};
}
std::vector<array> Marker::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                               const std::vector<int>&) {
  return {tangents[0]};
}
std::pair<std::vector<array>, std::vector<int>> Marker::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  return {inputs, axes};
}

// --- CustomTransforms ---

void CustomTransforms::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  eval_cpu(inputs, outputs);
}

std::vector<Shape> CustomTransforms::output_shapes(const std::vector<array>& inputs) {
  std::vector<Shape> shapes;
  for (size_t i = num_inputs_; i < inputs.size(); ++i) shapes.push_back(inputs[i].shape());
  return shapes;
}

int CustomTransforms::transform_input_count(TransformKind kind, int num_inputs) const {
  bool has_rule = (kind == TransformKind::vjp && vjp_rule_) ||
                  (kind == TransformKind::jvp && jvp_rule_) ||
                  (kind == TransformKind::vmap && vmap_rule_);
  return has_rule ? num_inputs_ : num_inputs;
}

std::vector<array> CustomTransforms::vjp(const std::vector<array>& primals,
                                         const std::vector<array>& cotangents,
                                         const std::vector<int>& argnums,
                                         const std::vector<array>& outputs) {
  std::vector<array> result;
  if (!vjp_rule_) {
    // Default: the body's own graph carries the gradient to the inputs.
    for (int a : argnums) {
      result.push_back(a < num_inputs_ ? zeros_like(primals[a]) : cotangents[a - num_inputs_]);
    }
    return result;
  }
  std::vector<array> explicit_primals(primals.begin(), primals.begin() + num_inputs_);
  auto rule_cotangents = vjp_rule_(explicit_primals, cotangents, outputs);
  if (rule_cotangents.size() != static_cast<size_t>(num_inputs_)) {
    throw std::invalid_argument("[custom_function] The vjp returned " +
                                std::to_string(rule_cotangents.size()) + " cotangents for " +
                                std::to_string(num_inputs_) + " inputs.");
  }
  for (int a : argnums) result.push_back(rule_cotangents[a]);
  return result;
}

std::vector<array> CustomTransforms::jvp(const std::vector<array>& primals,
                                         const std::vector<array>& tangents,
                                         const std::vector<int>& argnums) {
  int num_outputs = static_cast<int>(primals.size()) - num_inputs_;
  if (!jvp_rule_) {
    std::vector<array> result;
    for (int k = 0; k < num_outputs; ++k) {
      auto it = std::find(argnums.begin(), argnums.end(), num_inputs_ + k);
      result.push_back(it != argnums.end() ? tangents[it - argnums.begin()]
                                           : zeros_like(primals[num_inputs_ + k]));
    }
    return result;
  }
  std::vector<array> explicit_primals(primals.begin(), primals.begin() + num_inputs_);
  auto result = jvp_rule_(explicit_primals, tangents, argnums);
  if (result.size() != static_cast<size_t>(num_outputs)) {
    throw std::invalid_argument("[custom_function] The jvp returned " +
                                std::to_string(result.size()) + " tangents for " +
                                std::to_string(num_outputs) + " outputs.");
  }
  return result;
}

std::pair<std::vector<array>, std::vector<int>> CustomTransforms::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  if (!vmap_rule_) {
    return {std::vector<array>(inputs.begin() + num_inputs_, inputs.end()),
            std::vector<int>(axes.begin() + num_inputs_, axes.end())};
  }
  std::vector<array> explicit_inputs(inputs.begin(), inputs.begin() + num_inputs_);
  std::vector<int> explicit_axes(axes.begin(), axes.begin() + num_inputs_);
  return vmap_rule_(explicit_inputs, explicit_axes);
}

PrimitiveState CustomTransforms::state() const {
  return {{"num_inputs", int64_t{num_inputs_}},
          {"custom_vjp", static_cast<bool>(vjp_rule_)},
          {"custom_jvp", static_cast<bool>(jvp_rule_)},
          {"custom_vmap", static_cast<bool>(vmap_rule_)}};
}

LOOM_REGISTER_PRIMITIVE(CustomTransforms, [](Stream s, const PrimitiveState& st) {
  int num_inputs = state_get<int>(st, "CustomTransforms", "num_inputs");
  if (num_inputs < 0) {
    throw std::invalid_argument("[CustomTransforms] invalid state: negative number of inputs.");
  }
  return std::make_shared<CustomTransforms>(s, num_inputs, nullptr, nullptr, nullptr);
});

LOOM_REGISTER_PRIMITIVE(Marker, [](Stream s, const PrimitiveState&) {
  return std::make_shared<Marker>(s);
});

} // namespace loom
