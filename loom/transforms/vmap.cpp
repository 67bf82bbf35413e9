// Vectorisation: trace the function on placeholders of one slice each, then
// replay the tape through every primitive's vmap rule on the real inputs.
#include <sstream>
#include <unordered_map>

#include "loom/ops/creation.h"
#include "loom/ops/shape.h"
#include "loom/transforms/primitives.h"
#include "loom/transforms/tape.h"
#include "loom/transforms/trace.h"
#include "loom/transforms/transforms.h"

namespace loom {

namespace {

struct Batched {
  array value;
  int axis; // -1: not batched
};

} // namespace

std::vector<array> vmap_apply(const ArrayFn& fun, const std::vector<array>& inputs,
                              const std::vector<int>& in_axes, const OutAxesFn& choose_out_axes) {
  {
    if (in_axes.size() != inputs.size()) {
      std::ostringstream msg;
      msg << "[vmap] The number of in axes (" << in_axes.size()
          << ") must match the number of arguments (" << inputs.size() << ").";
      throw std::invalid_argument(msg.str());
    }
    int batch = -1;
    for (size_t i = 0; i < inputs.size(); ++i) {
      int ax = in_axes[i];
      if (ax < 0) continue;
      if (ax >= inputs[i].ndim()) {
        std::ostringstream msg;
        msg << "[vmap] Invalid vectorization axis " << ax << " for array with shape "
            << shape_to_string(inputs[i].shape());
        throw std::out_of_range(msg.str());
      }
      int size = inputs[i].shape(ax);
      if (batch >= 0 && size != batch) {
        std::ostringstream msg;
        msg << "[vmap] Inconsistent axis sizes: " << batch << " and " << size << ".";
        throw std::invalid_argument(msg.str());
      }
      batch = size;
    }
    if (batch < 0) {
      throw std::invalid_argument("[vmap] At least one input must be mapped (in_axes all None).");
    }

    std::vector<array> outputs;
    std::vector<array> results;
    {
      transforms::TraceScope scope;
      std::vector<array> traced;
      std::unordered_set<const Node*> sources;
      std::unordered_map<const ArrayDesc*, Batched> mapped;
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (in_axes[i] < 0) {
          traced.push_back(inputs[i]);
          continue;
        }
        Shape slice_shape = inputs[i].shape();
        slice_shape.erase(slice_shape.begin() + in_axes[i]);
        auto stream = default_stream(default_device());
        array placeholder(slice_shape, inputs[i].dtype(),
                          std::make_shared<VmapPlaceholder>(stream), {});
        sources.insert(placeholder.node().get());
        mapped.emplace(placeholder.id(), Batched{inputs[i], in_axes[i]});
        traced.push_back(placeholder);
      }
      outputs = fun(traced);
      std::vector<int> out_axes = choose_out_axes(outputs);
      if (!out_axes.empty() && out_axes.size() != outputs.size()) {
        std::ostringstream msg;
        msg << "[vmap] The number of out axes (" << out_axes.size()
            << ") must match the number of outputs (" << outputs.size() << ").";
        throw std::invalid_argument(msg.str());
      }

      auto tape = transforms::build_tape(outputs, sources, TransformKind::vmap);
      for (const array& any_output : tape.nodes) {
        auto& node = *any_output.node();
        int count = node.primitive->transform_input_count(TransformKind::vmap,
                                                          static_cast<int>(node.inputs.size()));
        std::vector<array> args;
        std::vector<int> axes;
        for (int i = 0; i < count; ++i) {
          auto m = mapped.find(node.inputs[i].id());
          if (m != mapped.end()) {
            args.push_back(m->second.value);
            axes.push_back(m->second.axis);
          } else {
            args.push_back(node.inputs[i]);
            axes.push_back(-1);
          }
        }
        auto [outs, outs_axes] = node.primitive->vmap(args, axes);
        for (size_t k = 0; k < node.outputs.size() && k < outs.size(); ++k) {
          if (auto desc = node.outputs[k].lock()) {
            mapped.insert_or_assign(desc.get(), Batched{outs[k], outs_axes[k]});
          }
        }
      }

      for (size_t i = 0; i < outputs.size(); ++i) {
        int target = out_axes.empty() ? 0 : out_axes[i];
        auto m = mapped.find(outputs[i].id());
        if (m == mapped.end() || m->second.axis < 0) {
          // Does not depend on the mapped inputs: same value for every slice.
          array value = m == mapped.end() ? outputs[i] : m->second.value;
          if (target < 0) {
            results.push_back(value);
            continue;
          }
          array e = expand_dims(value, target);
          Shape shape = e.shape();
          shape[target] = batch;
          results.push_back(broadcast_to(e, shape));
          continue;
        }
        if (target < 0) {
          throw std::invalid_argument(
              "[vmap] Cannot have None as an out axis for an output that depends on a mapped "
              "input.");
        }
        int ndim = m->second.value.ndim();
        if (target >= ndim) {
          std::ostringstream msg;
          msg << "[vmap] Output axis " << target << " is out of bounds for output with " << ndim
              << " dimensions.";
          throw std::invalid_argument(msg.str());
        }
        results.push_back(m->second.axis == target
                              ? m->second.value
                              : moveaxis(m->second.value, m->second.axis, target));
      }
    }
    return results;
  }
}

ArrayFn vmap(const ArrayFn& fun, std::vector<int> in_axes, std::vector<int> out_axes) {
  return [fun, in_axes, out_axes](const std::vector<array>& inputs) {
    return vmap_apply(fun, inputs, in_axes, [&](const std::vector<array>&) { return out_axes; });
  };
}

} // namespace loom
