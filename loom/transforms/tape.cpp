#include "loom/transforms/tape.h"

#include <unordered_map>

namespace loom::transforms {

namespace {

// The inputs of `a`'s node that `kind` follows.
std::pair<const array*, int> followed_inputs(const array& a, TransformKind kind) {
  const auto& inputs = a.inputs();
  int n = static_cast<int>(inputs.size());
  return {inputs.data(), a.primitive().transform_input_count(kind, n)};
}

} // namespace

Tape build_tape(const std::vector<array>& outputs,
                const std::unordered_set<const Node*>& sources, TransformKind kind) {
  Tape tape;
  // 0: unvisited, 1: children pushed, 2: done
  std::unordered_map<const Node*, int> state;
  std::vector<array> stack;
  for (auto& o : outputs) {
    if (o.has_node()) stack.push_back(o);
  }
  while (!stack.empty()) {
    array a = stack.back();
    const Node* n = a.node().get();
    int& st = state[n];
    if (st == 2) {
      stack.pop_back();
      continue;
    }
    if (sources.count(n)) {
      st = 2;
      tape.dependent.insert(n);
      stack.pop_back();
      continue;
    }
    if (st == 0) {
      st = 1;
      auto [inputs, count] = followed_inputs(a, kind);
      for (int i = 0; i < count; ++i) {
        const array& in = inputs[i];
        if (!in.has_node() || !in.is_tracer()) continue;
        auto it = state.find(in.node().get());
        if (it == state.end() || it->second == 0) stack.push_back(in);
      }
      continue;
    }
    // All inputs are done: this node depends if any followed input does.
    st = 2;
    stack.pop_back();
    auto [inputs, count] = followed_inputs(a, kind);
    for (int i = 0; i < count; ++i) {
      if (tape.depends(inputs[i])) {
        tape.dependent.insert(n);
        tape.nodes.push_back(a);
        break;
      }
    }
  }
  return tape;
}

} // namespace loom::transforms
