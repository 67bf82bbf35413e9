// The graph of an exported trace as records (the callback form of
// export_function) and the DOT rendering of export_to_dot.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "loom/io/export.h"

namespace loom::io {

using compile_detail::GraphNode;
using compile_detail::ValueRef;

namespace {

// "A", "B", ..., "Z", "AA", "AB", ...: the names MLX's callback and DOT
// output give to unnamed values.
std::string value_name(size_t i) {
  std::string s;
  ++i;
  while (i > 0) {
    --i;
    s.insert(s.begin(), static_cast<char>('A' + i % 26));
    i /= 26;
  }
  return s;
}

} // namespace

TraceInfo describe_trace(const ExportedTrace& t) {
  TraceInfo info;
  const auto& g = t.graph;
  size_t next = 0;
  std::vector<ValueInfo> inputs;
  for (size_t i = 0; i < t.shapes.size(); ++i) {
    inputs.push_back({value_name(next++), t.shapes[i], t.dtypes[i]});
  }
  // Node outputs are named when first seen: graph outputs first, as MLX does.
  std::vector<std::vector<std::string>> node_names(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) node_names[i].resize(g.nodes[i].shapes.size());
  std::vector<std::string> constant_names(g.constants.size());
  auto name_of = [&](const ValueRef& r) -> std::string& {
    switch (r.kind) {
      case ValueRef::input:
        return inputs[r.id].name;
      case ValueRef::constant:
        return constant_names[r.id];
      default:
        return node_names[r.id][r.index];
    }
  };
  auto info_of = [&](const ValueRef& r) {
    std::string& name = name_of(r);
    if (name.empty()) name = value_name(next++);
    switch (r.kind) {
      case ValueRef::input:
        return inputs[r.id];
      case ValueRef::constant:
        return ValueInfo{name, g.constants[r.id].shape(), g.constants[r.id].dtype()};
      default:
        return ValueInfo{name, g.nodes[r.id].shapes[r.index], g.nodes[r.id].dtypes[r.index]};
    }
  };
  for (int i = 0; i < t.num_positional; ++i) info.inputs.push_back(inputs[i]);
  for (size_t k = 0; k < t.keywords.size(); ++k) {
    info.inputs.push_back(inputs[t.num_positional + k]);
    info.keywords.emplace_back(t.keywords[k], inputs[t.num_positional + k].name);
  }
  for (const ValueRef& r : g.outputs) info.outputs.push_back(info_of(r));
  for (size_t c = 0; c < g.constants.size(); ++c) {
    ValueRef r{ValueRef::constant, static_cast<int32_t>(c), 0};
    info.constants.emplace_back(info_of(r).name, g.constants[c]);
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    NodeInfo node;
    node.name = n.primitive->name();
    node.state = n.primitive->state();
    for (const ValueRef& r : n.inputs) node.inputs.push_back(info_of(r));
    for (size_t k = 0; k < n.shapes.size(); ++k) {
      node.outputs.push_back(
          info_of(ValueRef{ValueRef::node, static_cast<int32_t>(i), static_cast<int32_t>(k)}));
    }
    info.nodes.push_back(std::move(node));
  }
  return info;
}

void export_to_dot(std::ostream& os, const std::vector<array>& outputs,
                   const std::vector<std::pair<std::string, array>>& names) {
  std::unordered_map<const ArrayDesc*, std::string> label;
  for (const auto& [name, a] : names) label.emplace(a.id(), name);
  size_t next = 0;
  auto name_of = [&](const array& a) -> const std::string& {
    auto it = label.find(a.id());
    if (it == label.end()) {
      std::string n = value_name(next++);
      // Skip generated names the caller already used.
      while (std::any_of(names.begin(), names.end(), [&](auto& p) { return p.first == n; })) {
        n = value_name(next++);
      }
      it = label.emplace(a.id(), std::move(n)).first;
    }
    return it->second;
  };
  auto is_leaf = [](const array& a) { return !a.has_node() || a.status() != Status::unscheduled; };

  // Nodes in topological order (iterative post-order walk).
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<const Node*> done;
  std::unordered_set<const Node*> expanded;
  std::vector<array> leaves;
  std::unordered_set<const ArrayDesc*> leaf_seen;
  std::vector<array> stack(outputs.rbegin(), outputs.rend());
  while (!stack.empty()) {
    array a = stack.back();
    if (is_leaf(a)) {
      stack.pop_back();
      if (leaf_seen.insert(a.id()).second) leaves.push_back(a);
      continue;
    }
    const Node* n = a.node().get();
    if (done.count(n)) {
      stack.pop_back();
      continue;
    }
    if (expanded.insert(n).second) {
      for (auto it = n->inputs.rbegin(); it != n->inputs.rend(); ++it) stack.push_back(*it);
      continue;
    }
    stack.pop_back();
    done.insert(n);
    order.push_back(a.node());
  }
  std::unordered_set<const ArrayDesc*> is_output;
  for (const array& o : outputs) is_output.insert(o.id());

  os << "digraph {\n";
  for (const array& l : leaves) os << "{ rank=source; \"" << name_of(l) << "\"; }\n";
  for (const auto& node : order) {
    auto id = reinterpret_cast<std::uintptr_t>(node.get());
    os << "{ " << id << " [label =\"" << node->primitive->describe() << "\", shape=rectangle]; }\n";
    for (const array& in : node->inputs) os << "\"" << name_of(in) << "\" -> " << id << "\n";
    for (size_t k = 0; k < node->outputs.size(); ++k) {
      auto desc = node->outputs[k].lock();
      if (!desc) continue;
      array out(desc);
      bool sink = is_output.count(out.id()) > 0;
      os << "{ " << (sink ? "rank=sink; " : "") << "\"" << name_of(out) << "\"; }\n";
      os << id << " -> \"" << name_of(out) << "\"\n";
    }
  }
  os << "}\n";
}

} // namespace loom::io
