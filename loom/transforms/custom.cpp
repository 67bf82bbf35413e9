// custom_function and checkpoint: both wrap a function's outputs in one
// CustomTransforms node that carries the rules to use instead of the default
// transforms of the body.
#include <sstream>

#include "loom/ops/creation.h"
#include "loom/transforms/primitives.h"
#include "loom/transforms/tape.h"
#include "loom/transforms/trace.h"
#include "loom/transforms/transforms.h"

namespace loom {

namespace {

std::vector<array> wrap_outputs(const std::vector<array>& inputs,
                                const std::vector<array>& body_outputs,
                                std::shared_ptr<CustomTransforms> prim) {
  std::vector<array> node_inputs = inputs;
  node_inputs.insert(node_inputs.end(), body_outputs.begin(), body_outputs.end());
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  for (auto& o : body_outputs) {
    shapes.push_back(o.shape());
    dtypes.push_back(o.dtype());
  }
  return array::make_arrays(std::move(shapes), dtypes, prim, std::move(node_inputs));
}

} // namespace

ArrayFn custom_function(ArrayFn fun, CustomVjp vjp_rule, CustomJvp jvp_rule,
                        CustomVmap vmap_rule) {
  return [fun = std::move(fun), vjp_rule = std::move(vjp_rule), jvp_rule = std::move(jvp_rule),
          vmap_rule = std::move(vmap_rule)](const std::vector<array>& inputs) {
    auto body_outputs = fun(inputs);
    if (transforms::in_trace() && (vjp_rule || jvp_rule)) {
      warn_if_captures_differentiated(inputs, body_outputs);
    }
    auto prim = std::make_shared<CustomTransforms>(default_stream(default_device()),
                                                   static_cast<int>(inputs.size()), vjp_rule,
                                                   jvp_rule, vmap_rule);
    return wrap_outputs(inputs, body_outputs, prim);
  };
}

// The body runs outside the trace, so its intermediates are ordinary arrays
// freed once evaluated; the backward pass recomputes them through vjp.
ArrayFn checkpoint(const ArrayFn& fun) {
  return [fun](const std::vector<array>& inputs) {
    std::vector<array> body_outputs;
    {
      transforms::SuspendTrace suspend;
      body_outputs = fun(inputs);
    }
    CustomVjp recompute = [fun](const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<array>&) {
      return vjp(fun, primals, cotangents).second;
    };
    CustomJvp forward = [fun](const std::vector<array>& primals,
                              const std::vector<array>& tangents,
                              const std::vector<int>& argnums) {
      std::vector<array> all_tangents;
      for (size_t i = 0, j = 0; i < primals.size(); ++i) {
        if (j < argnums.size() && argnums[j] == static_cast<int>(i)) {
          all_tangents.push_back(tangents[j++]);
        } else {
          all_tangents.push_back(zeros_like(primals[i]));
        }
      }
      return jvp(fun, primals, all_tangents).second;
    };
    CustomVmap batched = [fun](const std::vector<array>& in, const std::vector<int>& axes) {
      auto outs = vmap(fun, axes, {})(in);
      return std::make_pair(outs, std::vector<int>(outs.size(), 0));
    };
    auto prim = std::make_shared<CustomTransforms>(default_stream(default_device()),
                                                   static_cast<int>(inputs.size()), recompute,
                                                   forward, batched);
    return wrap_outputs(inputs, body_outputs, prim);
  };
}

} // namespace loom
