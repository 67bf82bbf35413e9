// The part of a traced graph that lies between a transform's inputs and its
// outputs, in topological order. Built iteratively, so graph depth never
// touches the stack.
#pragma once

#include <unordered_set>
#include <vector>

#include "loom/array.h"
#include "loom/primitives/primitive.h"

namespace loom::transforms {

struct Tape {
  // Nodes that depend on a source, inputs before consumers. Each entry is a
  // live array produced by that node (any of its outputs).
  std::vector<array> nodes;
  // Nodes (sources included) that depend on a source.
  std::unordered_set<const Node*> dependent;

  bool depends(const array& a) const {
    return a.has_node() && dependent.count(a.node().get()) > 0;
  }
};

// `sources` are the nodes the transform starts from (markers or vmap
// placeholders); the walk does not look behind them. Only tracers are
// followed: an array made outside every trace cannot depend on a source.
Tape build_tape(const std::vector<array>& outputs,
                const std::unordered_set<const Node*>& sources, TransformKind kind);

} // namespace loom::transforms
