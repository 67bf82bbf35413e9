// Replaying an imported shapeless trace on inputs of new shapes.
//
// A trace records, at every element-wise op, whether an operand broadcast:
// a Broadcast node with the traced target shape where it did, nothing where
// the operands had equal shapes. Compile retraces when the dimensions of
// size 1 move (compile.cpp); an imported function cannot, so its replay
// recomputes each Broadcast from the shape of its input and leaves the
// broadcast dimensions to the element-wise op that consumes it, which
// broadcasts its operands to their common shape. A frozen traced size would
// otherwise reappear as soon as a dimension becomes 1 (the bias of a linear
// layer traced at batch 3 made a batch-1 call return 3 rows).
//
// What no graph can represent: an input-dependent operand that must now
// broadcast where the trace had none (x * y traced with equal shapes, then
// called with y of one row), or two inputs of one size in the trace of which
// the call makes one 1 and not the other. The forward value would be right,
// but anything the trace derived from the equal shapes, a gradient summed
// back to y's shape above all, would not: such a call raises, naming the
// inputs whose dimensions became (or stopped being) 1. (A captured array of
// the traced size tied to an input that becomes 1 is not detected: the
// sizes of constants coincide with inputs' too often to refuse on them.)
#include <sstream>
#include <stdexcept>

#include "loom/io/export.h"
#include "loom/ops/shape.h"
#include "loom/ops/utils.h"
#include "loom/primitives/shape.h"

namespace loom::io {

using compile_detail::Graph;
using compile_detail::GraphNode;
using compile_detail::ValueRef;

namespace {

// One replayed value: the array, its shape in the trace, whether it depends
// on an input, and which of its dimensions were left at 1 for the consumer
// to broadcast.
struct Value {
  array a;
  Shape traced;
  bool dependent = false;
  std::vector<char> deferred;
};

bool is_elementwise(const GraphNode& n) { return n.primitive->traits().elementwise; }

// Whether node i's outputs may keep broadcast dimensions at 1: every
// consumer is an element-wise node that broadcasts its operands, or one
// with a single operand whose own outputs may (the dimension stays 1
// through it), and no output of the function reads it.
std::vector<char> deferrable_nodes(const Graph& g) {
  const size_t n = g.nodes.size();
  std::vector<std::vector<int>> consumers(n);
  std::vector<char> is_output(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (const ValueRef& r : g.nodes[i].inputs) {
      if (r.kind == ValueRef::node) consumers[r.id].push_back(static_cast<int>(i));
    }
  }
  for (const ValueRef& r : g.outputs) {
    if (r.kind == ValueRef::node) is_output[r.id] = 1;
  }
  std::vector<char> ok(n, 0);
  for (size_t k = n; k-- > 0;) {
    if (is_output[k] || consumers[k].empty() || g.nodes[k].shapes.size() != 1) continue;
    bool all = true;
    for (int c : consumers[k]) {
      const GraphNode& cn = g.nodes[c];
      all = all && is_elementwise(cn) && cn.shapes.size() == 1 && (cn.inputs.size() > 1 || ok[c]);
    }
    ok[k] = all;
  }
  return ok;
}

bool unit_moved(const ExportedTrace& t, const std::vector<array>& inputs, size_t i, size_t d) {
  return (t.shapes[i][d] == 1) != (inputs[i].shape(static_cast<int>(d)) == 1);
}

std::string input_dim(const ExportedTrace& t, const std::vector<array>& inputs, size_t i,
                      size_t d) {
  std::ostringstream os;
  os << "input ";
  if (static_cast<int>(i) < t.num_positional) {
    os << (i + 1);
  } else {
    os << '"' << t.keywords[i - t.num_positional] << '"';
  }
  os << " dimension " << d << " (" << t.shapes[i][d] << " when traced, "
     << inputs[i].shape(static_cast<int>(d)) << " now)";
  return os.str();
}

// The inputs whose size-1 dimensions moved since the trace, for messages.
std::string moved_unit_dims(const ExportedTrace& t, const std::vector<array>& inputs) {
  std::string out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (size_t d = 0; d < t.shapes[i].size(); ++d) {
      if (unit_moved(t, inputs, i, d))
        out += (out.empty() ? "" : ", ") + input_dim(t, inputs, i, d);
    }
  }
  return out;
}

constexpr const char* kRemedy =
    " A shapeless trace cannot tell a dimension of size 1 from a broadcast, and what it "
    "derived from the traced shapes (a gradient summed back to an input's shape) would be "
    "wrong. Export a trace with these dimensions of size 1 too (mx.exporter), or without "
    "shapeless.";

// Two inputs with dimensions of one size in the trace may be tied by it (the
// operands of one op, an operand and the gradient of another): when a call
// makes one of them 1 and not the other, the trace's broadcast decisions no
// longer hold, even where no op of the graph reads both (the gradient of
// sum(x * y) with respect to y is x times the cotangent: y is not read).
void check_ties(const ExportedTrace& t, const std::vector<array>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (size_t d = 0; d < t.shapes[i].size(); ++d) {
      if (!unit_moved(t, inputs, i, d)) continue;
      for (size_t j = 0; j < inputs.size(); ++j) {
        if (j == i) continue;
        for (size_t e = 0; e < t.shapes[j].size(); ++e) {
          if (t.shapes[j][e] != t.shapes[i][d] || unit_moved(t, inputs, j, e)) continue;
          throw std::invalid_argument(
              "[import_function::call] The shapeless function was traced with " +
              input_dim(t, inputs, i, d) + " of the size of " + input_dim(t, inputs, j, e) +
              ", and this call makes one of them 1 and not the other." + kRemedy);
        }
      }
    }
  }
}

// Broadcast node `n` on its new input: dimensions the trace did not
// broadcast follow the input; broadcast ones stay 1 when the consumers
// broadcast anyway (`defer`), else keep the traced size.
Value replay_broadcast(const GraphNode& n, const Value& in, bool defer) {
  const Shape& target = n.shapes[0];
  const int added = static_cast<int>(target.size()) - in.a.ndim();
  std::vector<char> deferred(target.size(), 0);
  if (added < 0 || in.traced.size() != static_cast<size_t>(in.a.ndim())) {
    return {broadcast_to(in.a, target, n.primitive->stream()), target, true, deferred};
  }
  Shape shape(target.size());
  for (int d = 0; d < static_cast<int>(target.size()); ++d) {
    bool was_broadcast = d < added || in.traced[d - added] != target[d];
    int32_t now = d < added ? 1 : in.a.shape(d - added);
    if (!was_broadcast || now != 1) {
      shape[d] = now;
    } else if (defer) {
      shape[d] = 1;
      deferred[d] = 1;
    } else {
      shape[d] = target[d];
    }
  }
  return {broadcast_to(in.a, shape, n.primitive->stream()), target, true, deferred};
}

} // namespace

std::vector<array> replay_shapeless(const ExportedTrace& t, const std::vector<array>& inputs) {
  const Graph& g = t.graph;
  std::vector<char> defer = deferrable_nodes(g);
  bool moved = false;
  for (size_t i = 0; i < inputs.size() && !moved; ++i) {
    for (size_t d = 0; d < t.shapes[i].size(); ++d) {
      moved = moved || (t.shapes[i][d] == 1) != (inputs[i].shape(static_cast<int>(d)) == 1);
    }
  }
  if (moved) check_ties(t, inputs);
  std::vector<Value> in_values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in_values.push_back({inputs[i], t.shapes[i], true, std::vector<char>(t.shapes[i].size(), 0)});
  }
  std::vector<Value> const_values;
  for (const array& c : g.constants) {
    const_values.push_back({c, c.shape(), false, std::vector<char>(c.ndim(), 0)});
  }
  std::vector<std::vector<Value>> produced(g.nodes.size());
  auto value = [&](const ValueRef& r) -> const Value& {
    switch (r.kind) {
      case ValueRef::input:
        return in_values[r.id];
      case ValueRef::constant:
        return const_values[r.id];
      default:
        return produced[r.id][r.index];
    }
  };

  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    if (dynamic_cast<const Broadcast*>(n.primitive.get()) && n.inputs.size() == 1) {
      produced[i].push_back(replay_broadcast(n, value(n.inputs[0]), defer[i]));
      continue;
    }
    std::vector<Value> args;
    for (const ValueRef& r : n.inputs) args.push_back(value(r));
    std::vector<char> deferred;
    if (is_elementwise(n) && args.size() > 1) {
      std::vector<Shape> shapes;
      for (const Value& v : args) shapes.push_back(v.a.shape());
      Shape common;
      try {
        common = broadcast_shapes(shapes);
      } catch (const std::invalid_argument&) {
        std::ostringstream msg;
        msg << "[import_function::call] The shapeless function's " << n.primitive->name()
            << " node gets operands of shapes";
        for (const Shape& s : shapes) msg << ' ' << shape_to_string(s);
        msg << ", which do not broadcast together (traced as " << shape_to_string(n.shapes[0])
            << ").";
        throw std::invalid_argument(msg.str());
      }
      for (Value& v : args) {
        const int added = static_cast<int>(common.size()) - v.a.ndim();
        for (int d = 0; d < static_cast<int>(common.size()) && moved && v.dependent; ++d) {
          int32_t have = d < added ? 1 : v.a.shape(d - added);
          bool expected = d >= added && static_cast<size_t>(d - added) < v.deferred.size() &&
                          v.deferred[d - added];
          if (have == 1 && common[d] != 1 && !expected) {
            std::ostringstream msg;
            msg << "[import_function::call] The shapeless function was traced without a "
                   "broadcast where this call needs one ("
                << n.primitive->name() << " of shapes";
            for (const Shape& s : shapes) msg << ' ' << shape_to_string(s);
            msg << ", traced as " << shape_to_string(n.shapes[0])
                << "): " << moved_unit_dims(t, inputs) << '.' << kRemedy;
            throw std::invalid_argument(msg.str());
          }
        }
        if (v.a.shape() != common) v.a = broadcast_to(v.a, common, n.primitive->stream());
      }
    } else if (is_elementwise(n) && args.size() == 1 && defer[i]) {
      deferred = args[0].deferred;
    }
    std::vector<array> arrays;
    for (Value& v : args) arrays.push_back(std::move(v.a));
    std::vector<Shape> shapes = n.primitive->output_shapes(arrays);
    std::vector<array> outs;
    if (shapes.size() == 1) {
      outs.emplace_back(std::move(shapes[0]), n.dtypes[0], n.primitive, std::move(arrays));
    } else {
      outs = array::make_arrays(std::move(shapes), n.dtypes, n.primitive, std::move(arrays));
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      std::vector<char> mask = deferred.size() == static_cast<size_t>(outs[k].ndim())
                                   ? deferred
                                   : std::vector<char>(outs[k].ndim(), 0);
      produced[i].push_back({std::move(outs[k]), n.shapes[k], true, std::move(mask)});
    }
  }
  std::vector<array> outs;
  for (const ValueRef& r : g.outputs) outs.push_back(value(r).a);
  return outs;
}

} // namespace loom::io
