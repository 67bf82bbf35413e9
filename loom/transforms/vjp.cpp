// Reverse mode: trace the function on markers, then walk the tape backwards
// accumulating cotangents.
#include <sstream>
#include <unordered_map>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/transforms/marker.h"
#include "loom/transforms/primitives.h"
#include "loom/transforms/tape.h"
#include "loom/transforms/trace.h"
#include "loom/transforms/transforms.h"

namespace loom {

namespace transforms {

array make_marker(const array& a) {
  auto stream = default_stream(default_device());
  return array(a.shape(), a.dtype(), std::make_shared<Marker>(stream), {a});
}

} // namespace transforms

std::pair<std::vector<array>, std::vector<array>> vjp(const ArrayFn& fun,
                                                      const std::vector<array>& primals,
                                                      const std::vector<array>& cotangents) {
  std::vector<array> outputs;
  std::vector<array> markers;
  std::vector<array> grads;
  {
    transforms::TraceScope scope;
    std::unordered_set<const Node*> sources;
    for (auto& p : primals) {
      markers.push_back(transforms::make_marker(p));
      sources.insert(markers.back().node().get());
    }
    outputs = fun(markers);
    if (cotangents.size() != outputs.size()) {
      std::ostringstream msg;
      msg << "[vjp] Number of outputs to compute gradients for (" << outputs.size()
          << ") does not match number of cotangents (" << cotangents.size() << ").";
      throw std::invalid_argument(msg.str());
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].shape() != cotangents[i].shape()) {
        throw std::invalid_argument("[vjp] Output shape " + shape_to_string(outputs[i].shape()) +
                                    " does not match cotangent shape " +
                                    shape_to_string(cotangents[i].shape()) + ".");
      }
    }

    auto tape = transforms::build_tape(outputs, sources, TransformKind::vjp);

    std::unordered_map<const ArrayDesc*, array> cotan;
    auto accumulate = [&](const array& target, const array& c) {
      auto it = cotan.find(target.id());
      if (it == cotan.end()) {
        cotan.emplace(target.id(), c);
      } else {
        it->second = add(it->second, c);
      }
    };
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (tape.depends(outputs[i])) accumulate(outputs[i], astype(cotangents[i], outputs[i].dtype()));
    }

    for (auto it = tape.nodes.rbegin(); it != tape.nodes.rend(); ++it) {
      const array& any_output = *it;
      auto outs = any_output.outputs();
      auto& node = *any_output.node();
      // Cotangent of every output slot (zeros where none arrived).
      std::vector<array> node_outputs;
      std::vector<array> node_cotans;
      bool any = false;
      for (size_t k = 0; k < node.outputs.size(); ++k) {
        auto desc = node.outputs[k].lock();
        if (desc) {
          array o(desc);
          auto c = cotan.find(o.id());
          if (c != cotan.end()) {
            node_cotans.push_back(c->second);
            cotan.erase(c);
            any = true;
          } else {
            node_cotans.push_back(zeros_like(o));
          }
          node_outputs.push_back(o);
        } else {
          node_cotans.push_back(zeros(node.output_shapes.at(k), node.output_dtypes.at(k)));
          node_outputs.push_back(zeros(node.output_shapes.at(k), node.output_dtypes.at(k)));
        }
      }
      if (!any) continue;
      std::vector<int> argnums;
      int count = node.primitive->transform_input_count(TransformKind::vjp,
                                                        static_cast<int>(node.inputs.size()));
      for (int i = 0; i < count; ++i) {
        if (tape.depends(node.inputs[i])) argnums.push_back(i);
      }
      auto input_cotans = node.primitive->vjp(node.inputs, node_cotans, argnums, node_outputs);
      for (size_t j = 0; j < argnums.size(); ++j) {
        accumulate(node.inputs[argnums[j]], input_cotans[j]);
      }
    }

    for (size_t i = 0; i < primals.size(); ++i) {
      auto c = cotan.find(markers[i].id());
      grads.push_back(c != cotan.end() ? c->second : zeros_like(primals[i]));
    }
  }
  return {outputs, grads};
}

ValueAndGradFn value_and_grad(const ArrayFn& fun, std::vector<int> argnums) {
  if (argnums.empty()) {
    throw std::invalid_argument("[grad] Must specify at least one argument.");
  }
  return [fun, argnums](const std::vector<array>& inputs) {
    int n = static_cast<int>(inputs.size());
    std::vector<array> primals;
    for (int a : argnums) {
      if (a < 0 || a >= n) {
        std::ostringstream msg;
        msg << "[grad] Invalid argument number for function with " << n << " arguments.";
        throw std::invalid_argument(msg.str());
      }
      primals.push_back(inputs[a]);
    }
    std::vector<array> all_outputs;
    auto loss_only = [&](const std::vector<array>& ps) {
      std::vector<array> args = inputs;
      for (size_t i = 0; i < argnums.size(); ++i) args[argnums[i]] = ps[i];
      all_outputs = fun(args);
      if (all_outputs.empty() || all_outputs[0].size() != 1 || all_outputs[0].ndim() != 0) {
        throw std::invalid_argument(
            "[value_and_grad] The return value of the function whose gradient we want to "
            "compute should be either a scalar array or a tuple with the first value being a "
            "scalar array (Union[array, tuple[array, Any, ...]]).");
      }
      return std::vector<array>{all_outputs[0]};
    };
    auto [loss, grads] = vjp(loss_only, primals, {array(1.0f)});
    all_outputs[0] = loss[0];
    return std::make_pair(all_outputs, grads);
  };
}

} // namespace loom
