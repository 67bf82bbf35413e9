// The two passes over a traced graph: simplify (drop no-ops, merge common
// subexpressions through Primitive::is_equivalent) and fuse (maximal regions
// of element-wise nodes of one shape become one Compiled node, each reading
// the broadcasts it needs from their operands and recomputing cheap values of
// other regions instead of reading them). Every walk is iterative; summarize
// prints the result (LOOM_COMPILE_DUMP=1).
#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "loom/compile/compiled.h"
#include "loom/compile/graph.h"

namespace loom::compile_detail {

namespace {

// Keeps the nodes the outputs reach, in their order, renumbered.
void drop_dead(Graph& g) {
  std::vector<char> live(g.nodes.size(), 0);
  std::vector<int> stack;
  for (auto& o : g.outputs) {
    if (o.kind == ValueRef::node) stack.push_back(o.id);
  }
  while (!stack.empty()) {
    int i = stack.back();
    stack.pop_back();
    if (live[i]) continue;
    live[i] = 1;
    for (auto& r : g.nodes[i].inputs) {
      if (r.kind == ValueRef::node && !live[r.id]) stack.push_back(r.id);
    }
  }
  std::vector<int> renumber(g.nodes.size(), -1);
  std::vector<GraphNode> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!live[i]) continue;
    renumber[i] = static_cast<int>(kept.size());
    kept.push_back(std::move(g.nodes[i]));
  }
  auto fix = [&](ValueRef& r) {
    if (r.kind == ValueRef::node) r.id = renumber[r.id];
  };
  for (auto& n : kept) {
    for (auto& r : n.inputs) fix(r);
  }
  for (auto& r : g.outputs) fix(r);
  g.nodes = std::move(kept);
}

} // namespace

void simplify(Graph& g) {
  // alias[i][k]: what output k of node i now stands for.
  std::vector<std::vector<ValueRef>> alias(g.nodes.size());
  auto resolve = [&](ValueRef r) {
    while (r.kind == ValueRef::node && !alias[r.id].empty()) {
      ValueRef next = alias[r.id][r.index];
      if (next == r) break;
      r = next;
    }
    return r;
  };
  // Candidates for CSE, keyed by name and inputs.
  std::multimap<std::string, int> seen;
  auto key_of = [](const GraphNode& n) {
    std::string key = n.primitive->name();
    for (auto& r : n.inputs) {
      key += '|' + std::to_string(int(r.kind)) + ':' + std::to_string(r.id) + ':' +
             std::to_string(r.index);
    }
    return key;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    GraphNode& n = g.nodes[i];
    for (auto& r : n.inputs) r = resolve(r);
    if (n.primitive->traits().noop && n.inputs.size() == 1 && n.shapes.size() == 1) {
      alias[i] = {n.inputs[0]};
      continue;
    }
    std::string key = key_of(n);
    auto [lo, hi] = seen.equal_range(key);
    bool merged = false;
    for (auto it = lo; it != hi; ++it) {
      const GraphNode& m = g.nodes[it->second];
      if (m.shapes == n.shapes && m.dtypes == n.dtypes &&
          m.primitive->is_equivalent(*n.primitive)) {
        for (size_t k = 0; k < n.shapes.size(); ++k) {
          alias[i].push_back(ValueRef{ValueRef::node, it->second, static_cast<int32_t>(k)});
        }
        merged = true;
        break;
      }
    }
    if (!merged) seen.emplace(std::move(key), static_cast<int>(i));
  }
  for (auto& r : g.outputs) r = resolve(r);
  drop_dead(g);
}

namespace {

// Regions fuse on every device: the CPU runs them tiled, the GPU as one
// generated kernel (backend/cuda/compiled.cpp).
bool fusable(const GraphNode& n) {
  if (n.shapes.size() != 1) return false;
  auto t = n.primitive->traits();
  return (t.elementwise || t.broadcast) && !t.multi_output;
}

bool is_broadcast(const GraphNode& n) { return n.primitive->traits().broadcast; }

// Ops one recomputed value may cost a region that reads it
// (LOOM_COMPILE_RECOMPUTE overrides; 0 turns recomputation off).
int max_recompute() {
  static const int n = [] {
    const char* v = std::getenv("LOOM_COMPILE_RECOMPUTE");
    return v && *v ? std::atoi(v) : 8;
  }();
  return n;
}

// LOOM_COMPILE_RECOMPUTE_COSTLY=1: recompute costly values too (to compare).
int recompute_costly() {
  static const int n = [] {
    const char* v = std::getenv("LOOM_COMPILE_RECOMPUTE_COSTLY");
    return v && *v ? std::atoi(v) : 0;
  }();
  return n;
}

} // namespace

void fuse(Graph& g) {
  const int count = static_cast<int>(g.nodes.size());
  std::vector<std::vector<int>> consumers(count);
  std::vector<char> is_output(count, 0);
  for (int i = 0; i < count; ++i) {
    for (auto& r : g.nodes[i].inputs) {
      if (r.kind == ValueRef::node) consumers[r.id].push_back(i);
    }
  }
  for (auto& o : g.outputs) {
    if (o.kind == ValueRef::node) is_output[o.id] = 1;
  }

  // region[i]: the region node i belongs to (-1: none).
  std::vector<int> region(count, -1);
  std::vector<std::vector<int>> members;
  // own[r]: nodes region r computes for itself without owning them. A
  // broadcast is never a member: each region that reads it reads its small
  // operand (a broadcast owned by one region and read by another was written
  // out at full size, where eager code keeps a view). Later, cheap values
  // the region can recompute from what it reads anyway join too.
  std::vector<std::unordered_set<int>> own;
  auto inside = [&](int c, int r) { return region[c] == r || own[r].count(c) > 0; };
  auto same_place = [&](int j, int i) {
    return g.nodes[j].shapes[0] == g.nodes[i].shapes[0] &&
           g.nodes[j].primitive->stream() == g.nodes[i].primitive->stream();
  };
  // Adding j to a region must not create a path region -> outside -> region:
  // walk forward from j's consumers outside the region.
  auto creates_cycle = [&](int j, int r) {
    std::vector<int> stack;
    std::vector<char> seen(count, 0);
    for (int c : consumers[j]) {
      if (!inside(c, r)) stack.push_back(c);
    }
    while (!stack.empty()) {
      int c = stack.back();
      stack.pop_back();
      if (seen[c]) continue;
      seen[c] = 1;
      if (inside(c, r)) return true;
      for (int d : consumers[c]) stack.push_back(d);
    }
    return false;
  };
  for (int i = count - 1; i >= 0; --i) {
    if (region[i] >= 0 || !fusable(g.nodes[i]) || is_broadcast(g.nodes[i])) continue;
    int r = static_cast<int>(members.size());
    members.push_back({i});
    own.emplace_back();
    region[i] = r;
    std::vector<int> frontier{i};
    while (!frontier.empty()) {
      int m = frontier.back();
      frontier.pop_back();
      for (auto& in : g.nodes[m].inputs) {
        if (in.kind != ValueRef::node) continue;
        int j = in.id;
        // One region runs on one stream: ops placed on another device stay there.
        if (!fusable(g.nodes[j]) || !same_place(j, i)) continue;
        // The region reads the broadcast's operand, an ancestor of the
        // broadcast: no cycle can form.
        if (is_broadcast(g.nodes[j])) {
          own[r].insert(j);
          continue;
        }
        if (region[j] >= 0 || creates_cycle(j, r)) continue;
        region[j] = r;
        members[r].push_back(j);
        frontier.push_back(j);
      }
    }
  }
  // A region worth fusing computes at least two element-wise ops.
  for (size_t r = 0; r < members.size(); ++r) {
    if (members[r].size() >= 2) continue;
    for (int m : members[r]) region[m] = -1;
    members[r].clear();
    own[r].clear();
  }

  // Recomputation: a value another region computed (or a lone op), read
  // here, that this region can compute from its operands (values it reads
  // anyway, constants equal at every position, broadcasts of smaller
  // arrays) is computed here instead; once no one else reads it, its
  // producer stops writing it and this region stops reading it (the
  // backward pass re-derives gelu's x / sqrt(2) and 1 + erf(.) from x
  // instead of storing both at full size). Every new operand was already
  // an ancestor of the region, so no cycle can form.
  auto cheap_constant = [&](int id, size_t size) {
    const array& c = g.constants[id];
    if (c.size() < size) return true;
    if (c.status() == Status::unscheduled) {
      return c.has_node() && c.primitive().traits().broadcast;
    }
    return c.data_size() < size;
  };
  for (int r = 0; r < static_cast<int>(members.size()); ++r) {
    if (members[r].empty()) continue;
    const int seed = members[r][0];
    const size_t size = shape_size(g.nodes[seed].shapes[0]);
    std::set<std::tuple<int, int, int>> reads;
    auto key = [](const ValueRef& v) { return std::make_tuple(int(v.kind), v.id, v.index); };
    for (int m : members[r]) {
      for (auto& in : g.nodes[m].inputs) {
        if (in.kind != ValueRef::node || !inside(in.id, r)) reads.insert(key(in));
      }
    }
    auto try_recompute = [&](int j) {
      std::vector<int> work{j};
      std::unordered_set<int> taken{j};
      int ops = 0;
      while (!work.empty()) {
        int k = work.back();
        work.pop_back();
        if (is_broadcast(g.nodes[k])) continue; // reads its smaller operand
        // A transcendental costs more to compute again than to read back.
        if (g.nodes[k].primitive->traits().costly && recompute_costly() == 0) return false;
        if (++ops > max_recompute()) return false;
        for (auto& in : g.nodes[k].inputs) {
          if (reads.count(key(in))) continue;
          if (in.kind == ValueRef::constant) {
            if (cheap_constant(in.id, size)) continue;
            return false;
          }
          if (in.kind == ValueRef::input) return false;
          int q = in.id;
          if (inside(q, r) || taken.count(q)) continue;
          if (!fusable(g.nodes[q]) || !same_place(q, seed) || is_output[q]) return false;
          taken.insert(q);
          work.push_back(q);
        }
      }
      own[r].insert(taken.begin(), taken.end());
      return true;
    };
    std::vector<int> order(members[r].begin(), members[r].end());
    std::sort(order.rbegin(), order.rend());
    for (int m : order) {
      for (auto& in : g.nodes[m].inputs) {
        if (in.kind != ValueRef::node) continue;
        int j = in.id;
        if (inside(j, r) || !fusable(g.nodes[j]) || is_broadcast(g.nodes[j]) ||
            !same_place(j, seed) || is_output[j]) {
          continue;
        }
        // Only values that live in regions (or lone element-wise ops): one
        // that a matmul or a reduction reads is written out anyway.
        bool all_fused = true;
        for (int c : consumers[j]) all_fused = all_fused && region[c] >= 0;
        if (all_fused) try_recompute(j);
      }
    }
  }

  // Build one unit per kept node or region; units refer to values through
  // (unit, output) pairs and are emitted in a fresh topological order.
  struct Unit {
    GraphNode node;
    std::vector<int> deps;
  };
  std::vector<Unit> units;
  std::vector<int> unit_of(count, -1);
  // Where node i's output k lives after fusion: (unit, output index).
  std::vector<std::vector<std::pair<int, int>>> where(count);
  for (int i = 0; i < count; ++i) {
    where[i].resize(g.nodes[i].shapes.size(), {-1, 0});
    if (region[i] < 0) {
      unit_of[i] = static_cast<int>(units.size());
      units.push_back(Unit{g.nodes[i], {}});
      for (size_t k = 0; k < where[i].size(); ++k) where[i][k] = {unit_of[i], int(k)};
    }
  }
  for (size_t rr = 0; rr < members.size(); ++rr) {
    if (members[rr].empty()) continue;
    const int r = static_cast<int>(rr);
    // Members and the nodes the region computes for itself, in graph order.
    std::vector<int> mem = members[rr];
    mem.insert(mem.end(), own[rr].begin(), own[rr].end());
    std::sort(mem.begin(), mem.end());
    int u = static_cast<int>(units.size());
    std::vector<ValueRef> external;
    std::vector<FusedOp> ops;
    std::unordered_map<int, int> op_index;
    auto external_index = [&](const ValueRef& ref) {
      for (size_t k = 0; k < external.size(); ++k) {
        if (external[k] == ref) return static_cast<int>(k);
      }
      external.push_back(ref);
      return static_cast<int>(external.size()) - 1;
    };
    for (int m : mem) {
      FusedOp op{g.nodes[m].primitive, {}, g.nodes[m].shapes[0], g.nodes[m].dtypes[0]};
      for (auto& in : g.nodes[m].inputs) {
        if (in.kind == ValueRef::node && inside(in.id, r)) {
          op.args.push_back(-1 - op_index.at(in.id)); // negative: an op of the region
        } else {
          op.args.push_back(external_index(in));
        }
      }
      op_index.emplace(m, static_cast<int>(ops.size()));
      ops.push_back(std::move(op));
    }
    // Escaping values: used outside the region or returned.
    std::vector<int> escaping;
    GraphNode fused;
    for (int m : mem) {
      // What the region computes for itself is never written out.
      if (region[m] != r) continue;
      bool escapes = is_output[m];
      for (int c : consumers[m]) {
        escapes = escapes || (region[c] != r && !(region[c] >= 0 && own[region[c]].count(m)));
      }
      if (!escapes) continue;
      where[m][0] = {u, static_cast<int>(escaping.size())};
      escaping.push_back(op_index.at(m));
      fused.shapes.push_back(g.nodes[m].shapes[0]);
      fused.dtypes.push_back(g.nodes[m].dtypes[0]);
    }
    // Every value it computes is recomputed where it is read.
    if (escaping.empty()) continue;
    int n_ext = static_cast<int>(external.size());
    for (auto& op : ops) {
      for (auto& a : op.args) a = a < 0 ? n_ext + (-1 - a) : a;
    }
    fused.primitive = std::make_shared<Compiled>(g.nodes[mem[0]].primitive->stream(), n_ext,
                                                 std::move(ops), std::move(escaping));
    fused.inputs = std::move(external);
    units.push_back(Unit{std::move(fused), {}});
  }
  // Rewrite the units' inputs to (unit, output) refs, then order them.
  auto remap = [&](ValueRef r) {
    if (r.kind != ValueRef::node) return r;
    auto [u, k] = where[r.id][r.index];
    return ValueRef{ValueRef::node, u, k};
  };
  for (auto& unit : units) {
    for (auto& r : unit.node.inputs) {
      r = remap(r);
      if (r.kind == ValueRef::node) unit.deps.push_back(r.id);
    }
  }
  std::vector<ValueRef> outputs;
  for (auto& o : g.outputs) outputs.push_back(remap(o));

  std::vector<int> order;
  std::vector<int> state(units.size(), 0);
  std::vector<int> stack;
  for (auto& o : outputs) {
    if (o.kind == ValueRef::node) stack.push_back(o.id);
  }
  while (!stack.empty()) {
    int u = stack.back();
    if (state[u] == 2) {
      stack.pop_back();
      continue;
    }
    if (state[u] == 0) {
      state[u] = 1;
      for (int d : units[u].deps) {
        if (state[d] == 0) stack.push_back(d);
      }
      continue;
    }
    state[u] = 2;
    order.push_back(u);
    stack.pop_back();
  }
  std::vector<int> position(units.size(), -1);
  Graph out;
  out.num_inputs = g.num_inputs;
  out.constants = std::move(g.constants);
  for (int u : order) {
    position[u] = static_cast<int>(out.nodes.size());
    out.nodes.push_back(std::move(units[u].node));
  }
  auto place = [&](ValueRef& r) {
    if (r.kind == ValueRef::node) r.id = position[r.id];
  };
  for (auto& n : out.nodes) {
    for (auto& r : n.inputs) place(r);
  }
  for (auto& o : outputs) place(o);
  out.outputs = std::move(outputs);
  g = std::move(out);
}

std::string summarize(const Graph& g) {
  std::map<std::string, int> unfused;
  std::ostringstream regions;
  int fused_ops = 0, region_count = 0;
  for (const auto& n : g.nodes) {
    auto* c = dynamic_cast<const Compiled*>(n.primitive.get());
    if (c == nullptr) {
      ++unfused[n.primitive->name()];
      continue;
    }
    ++region_count;
    fused_ops += static_cast<int>(c->ops().size());
    regions << "  region " << shape_to_string(n.shapes[0]) << ": " << c->ops().size() << " ops, "
            << c->num_inputs() << " inputs, " << n.shapes.size() << " outputs: ";
    c->print_params(regions);
    regions << "\n";
  }
  std::ostringstream os;
  os << "  " << region_count << " regions of " << fused_ops << " ops; unfused:";
  for (auto& [name, k] : unfused) os << " " << name << " x" << k;
  os << "\n" << regions.str();
  return os.str();
}

} // namespace loom::compile_detail
