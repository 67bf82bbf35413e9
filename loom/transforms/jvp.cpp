// Forward mode: trace the function on markers, then push tangents through
// the tape in order.
#include <sstream>
#include <unordered_map>

#include "loom/ops/creation.h"
#include "loom/transforms/marker.h"
#include "loom/transforms/tape.h"
#include "loom/transforms/trace.h"
#include "loom/transforms/transforms.h"

namespace loom {

std::pair<std::vector<array>, std::vector<array>> jvp(const ArrayFn& fun,
                                                      const std::vector<array>& primals,
                                                      const std::vector<array>& tangents) {
  if (primals.size() != tangents.size()) {
    std::ostringstream msg;
    msg << "[jvp] Number of inputs (" << primals.size() << ") does not match number of tangents ("
        << tangents.size() << ").";
    throw std::invalid_argument(msg.str());
  }
  for (size_t i = 0; i < primals.size(); ++i) {
    if (primals[i].shape() != tangents[i].shape()) {
      throw std::invalid_argument("[jvp] Input shape " + shape_to_string(primals[i].shape()) +
                                  " does not match tangent shape " +
                                  shape_to_string(tangents[i].shape()) + ".");
    }
  }
  std::vector<array> outputs;
  std::vector<array> output_tangents;
  {
    transforms::TraceScope scope;
    std::vector<array> markers;
    std::unordered_set<const Node*> sources;
    std::unordered_map<const ArrayDesc*, array> tan;
    for (size_t i = 0; i < primals.size(); ++i) {
      markers.push_back(transforms::make_marker(primals[i]));
      sources.insert(markers.back().node().get());
      tan.emplace(markers.back().id(), astype(tangents[i], primals[i].dtype()));
    }
    outputs = fun(markers);
    auto tape = transforms::build_tape(outputs, sources, TransformKind::jvp);

    for (const array& any_output : tape.nodes) {
      auto& node = *any_output.node();
      std::vector<int> argnums;
      std::vector<array> input_tangents;
      int count = node.primitive->transform_input_count(TransformKind::jvp,
                                                        static_cast<int>(node.inputs.size()));
      for (int i = 0; i < count; ++i) {
        auto t = tan.find(node.inputs[i].id());
        if (t != tan.end()) {
          argnums.push_back(i);
          input_tangents.push_back(t->second);
        }
      }
      if (argnums.empty()) continue;
      auto out_tangents = node.primitive->jvp(node.inputs, input_tangents, argnums);
      for (size_t k = 0; k < node.outputs.size() && k < out_tangents.size(); ++k) {
        if (auto desc = node.outputs[k].lock()) tan.insert_or_assign(desc.get(), out_tangents[k]);
      }
    }
    for (auto& o : outputs) {
      auto t = tan.find(o.id());
      output_tangents.push_back(t != tan.end() ? t->second : zeros_like(o));
    }
  }
  return {outputs, output_tangents};
}

} // namespace loom
