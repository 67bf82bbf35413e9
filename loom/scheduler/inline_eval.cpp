#include "loom/scheduler/inline_eval.h"

#include <memory>
#include <utility>

namespace loom {

void evaluate_inline(const std::vector<array>& roots, const InlineEval& eval) {
  // Post-order with an explicit stack: an entry is expanded (its inputs
  // pushed) the first time it is popped and evaluated the second.
  std::vector<std::pair<array, bool>> stack;
  for (const array& r : roots) stack.emplace_back(r, false);
  while (!stack.empty()) {
    auto [a, expanded] = stack.back();
    stack.pop_back();
    // Only the composite's own nodes are unscheduled: the inputs it was built
    // from are evaluated, or queued on a stream (a GPU input's kernels).
    if (a.status() != Status::unscheduled || !a.has_node()) continue;
    const std::shared_ptr<Node> node = a.node();
    if (!expanded) {
      stack.emplace_back(a, true);
      for (const array& in : node->inputs) {
        if (in.status() == Status::unscheduled) stack.emplace_back(in, false);
      }
      continue;
    }
    std::vector<array> outs;
    for (size_t i = 0; i < node->outputs.size(); ++i) {
      if (auto d = node->outputs[i].lock()) {
        outs.emplace_back(std::move(d));
      } else {
        outs.push_back(array::empty(node->output_shapes[i], node->output_dtypes[i]));
      }
    }
    eval(*node->primitive, node->inputs, outs);
    for (array& o : outs) o.set_status(Status::available);
  }
}

} // namespace loom
