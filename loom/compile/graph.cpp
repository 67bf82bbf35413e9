#include "loom/compile/graph.h"

#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "loom/compile/compiled.h"
#include "loom/ops/shape.h"
#include "loom/ops/utils.h"

namespace loom::compile_detail {

void Placeholder::eval_cpu(const std::vector<array>&, std::vector<array>&) {
  throw std::invalid_argument(
      "[compile] Cannot evaluate an array that depends on a compiled function's inputs while "
      "the function is traced: print, item(), tolist(), bool(), NumPy conversion and Python "
      "control flow on arrays are not allowed inside mx.compile (the inputs are placeholders "
      "with a shape and a dtype but no data). An array stored outside the function during "
      "the trace is such a placeholder too: return it, or capture it with outputs=.");
}

array make_placeholder(const Shape& shape, Dtype dtype) {
  auto stream = default_stream(default_device());
  return array(shape, dtype, std::make_shared<Placeholder>(stream), {});
}

bool is_placeholder(const array& a) {
  return a.has_node() && dynamic_cast<const Placeholder*>(&a.primitive()) != nullptr;
}

size_t Graph::constant_bytes() const {
  size_t bytes = 0;
  for (auto& c : constants) bytes += c.nbytes();
  return bytes;
}

Graph graph_from_trace(const std::vector<array>& placeholders, const std::vector<array>& outputs) {
  Graph g;
  g.num_inputs = static_cast<int>(placeholders.size());
  std::unordered_map<const ArrayDesc*, ValueRef> leaf;
  for (size_t i = 0; i < placeholders.size(); ++i) {
    leaf.emplace(placeholders[i].id(), ValueRef{ValueRef::input, static_cast<int32_t>(i), 0});
  }
  // Node -> graph index, or -1 when it depends on no placeholder.
  std::unordered_map<const Node*, int> node_index;
  std::unordered_map<const Node*, bool> expanded;

  auto is_leaf = [&](const array& a) {
    return leaf.count(a.id()) || !a.has_node() || a.status() != Status::unscheduled;
  };
  auto resolve = [&](const array& a) -> ValueRef {
    if (auto it = leaf.find(a.id()); it != leaf.end()) return it->second;
    if (!is_leaf(a)) {
      int idx = node_index.at(a.node().get());
      if (idx >= 0) {
        return ValueRef{ValueRef::node, idx, static_cast<int32_t>(a.output_index())};
      }
    }
    ValueRef ref{ValueRef::constant, static_cast<int32_t>(g.constants.size()), 0};
    g.constants.push_back(a);
    leaf.emplace(a.id(), ref);
    return ref;
  };

  std::vector<array> stack(outputs.rbegin(), outputs.rend());
  while (!stack.empty()) {
    array a = stack.back();
    if (is_leaf(a) || node_index.count(a.node().get())) {
      stack.pop_back();
      continue;
    }
    const Node* n = a.node().get();
    bool& done_children = expanded[n];
    if (!done_children) {
      done_children = true;
      for (auto it = n->inputs.rbegin(); it != n->inputs.rend(); ++it) {
        if (!is_leaf(*it) && !node_index.count(it->node().get())) stack.push_back(*it);
      }
      continue;
    }
    stack.pop_back();
    GraphNode gn;
    bool dependent = false;
    for (auto& in : n->inputs) {
      bool in_leaf = leaf.count(in.id()) > 0;
      bool dep = in_leaf ? leaf.at(in.id()).kind == ValueRef::input
                         : (!is_leaf(in) && node_index.at(in.node().get()) >= 0);
      dependent = dependent || dep;
    }
    if (!dependent) {
      node_index.emplace(n, -1);
      continue;
    }
    for (auto& in : n->inputs) gn.inputs.push_back(resolve(in));
    gn.primitive = n->primitive;
    if (n->output_shapes.empty()) {
      // A single-output node keeps its metadata on its one output.
      gn.shapes = {a.shape()};
      gn.dtypes = {a.dtype()};
    } else {
      gn.shapes = n->output_shapes;
      gn.dtypes = n->output_dtypes;
    }
    node_index.emplace(n, static_cast<int>(g.nodes.size()));
    g.nodes.push_back(std::move(gn));
  }
  for (auto& o : outputs) g.outputs.push_back(resolve(o));
  return g;
}

namespace {

// The array a lazy broadcast reads (itself when it is not one).
const array& broadcast_source(const array& a) {
  const array* x = &a;
  while (x->has_node() && x->status() == Status::unscheduled && x->primitive().traits().broadcast &&
         x->inputs().size() == 1) {
    x = &x->inputs()[0];
  }
  return *x;
}

// Under shapeless, an element-wise node (or a fused region of them) was
// traced on operands of one shape, the smaller ones broadcast to it: by the
// op itself (`2 * x` broadcasts the scalar) or by a captured constant. Those
// broadcasts froze the traced size, so with new input shapes the operands
// no longer agree (`2 * x` kept returning the traced shape). Operands that
// are lazy broadcasts go back to what they broadcast, as long as another
// operand carries a shape from the inputs; then, for an element-wise node,
// every operand is broadcast to the shape they now share (its kernel wants
// equal shapes; a region reads its inputs broadcast itself). Operands that
// no longer broadcast together are left as they are.
void rebroadcast(std::vector<array>& args, bool elementwise, Stream stream) {
  bool some_plain = false;
  for (auto& a : args) some_plain = some_plain || broadcast_source(a).id() == a.id();
  if (some_plain) {
    for (auto& a : args) {
      const array& src = broadcast_source(a);
      if (src.id() != a.id()) a = src;
    }
  }
  if (!elementwise) return;
  std::vector<Shape> in_shapes;
  for (auto& a : args) in_shapes.push_back(a.shape());
  std::optional<Shape> common;
  try {
    common = broadcast_shapes(in_shapes);
  } catch (const std::invalid_argument&) {
  }
  for (auto& a : args) {
    if (common && a.shape() != *common) a = broadcast_to(a, *common, stream);
  }
}

} // namespace

std::vector<array> replay(const Graph& g, const std::vector<array>& inputs, bool shapeless) {
  std::vector<std::vector<array>> produced(g.nodes.size());
  auto value = [&](const ValueRef& r) -> const array& {
    switch (r.kind) {
      case ValueRef::input:
        return inputs[r.id];
      case ValueRef::constant:
        return g.constants[r.id];
      default:
        return produced[r.id][r.index];
    }
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    std::vector<array> args;
    args.reserve(n.inputs.size());
    for (auto& r : n.inputs) args.push_back(value(r));
    const auto traits = n.primitive->traits();
    if (shapeless && args.size() > 1 &&
        (traits.elementwise || dynamic_cast<const Compiled*>(n.primitive.get()))) {
      rebroadcast(args, traits.elementwise, n.primitive->stream());
    }
    std::vector<Shape> shapes = shapeless ? n.primitive->output_shapes(args) : n.shapes;
    if (shapes.size() == 1) {
      produced[i].emplace_back(std::move(shapes[0]), n.dtypes[0], n.primitive, std::move(args));
    } else {
      produced[i] = array::make_arrays(std::move(shapes), n.dtypes, n.primitive, std::move(args));
    }
  }
  std::vector<array> outs;
  outs.reserve(g.outputs.size());
  for (auto& r : g.outputs) outs.push_back(value(r));
  return outs;
}

} // namespace loom::compile_detail
