// A traced function as data: the nodes between its placeholders and its
// outputs, with every value named by where it comes from. Detached from the
// arrays of the trace, so an entry holds primitives and constants only.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/array.h"
#include "loom/primitives/primitive.h"

namespace loom::compile_detail {

// Where a value comes from: input i, constant i, or output `index` of node i.
struct ValueRef {
  enum Kind : uint8_t { input, constant, node } kind = input;
  int32_t id = 0;
  int32_t index = 0;
  bool operator==(const ValueRef&) const = default;
};

struct GraphNode {
  std::shared_ptr<Primitive> primitive;
  std::vector<ValueRef> inputs;
  std::vector<Shape> shapes; // as traced
  std::vector<Dtype> dtypes;
};

struct Graph {
  int num_inputs = 0;
  std::vector<array> constants; // captured arrays and scalars of the trace
  std::vector<GraphNode> nodes; // topological order
  std::vector<ValueRef> outputs;

  size_t constant_bytes() const;
};

// Stands for an input of the compiled function while it is traced. Its
// eval raises: a placeholder has a shape and a dtype, never data.
class Placeholder : public Primitive {
 public:
  using Primitive::Primitive;
  void eval_cpu(const std::vector<array>&, std::vector<array>&) override;
  const char* name() const override { return "Placeholder"; }
};

array make_placeholder(const Shape& shape, Dtype dtype);
bool is_placeholder(const array& a);

// The graph from `placeholders` to `outputs` (iterative walk). Arrays that do
// not depend on a placeholder become constants.
Graph graph_from_trace(const std::vector<array>& placeholders, const std::vector<array>& outputs);

// The one tracer of compile and export (compile.cpp): runs `fun` once on
// placeholders of these shapes and dtypes as a compiled function's trace
// (evaluating an input-dependent array raises) and returns its graph. Under
// shapeless, shape_reads[i] tells whether Python read input i's shape.
struct TracedFunction {
  Graph graph;
  std::vector<char> shape_reads;
};
TracedFunction trace_graph(const std::function<std::vector<array>(const std::vector<array>&)>& fun,
                           const std::vector<Shape>& shapes, const std::vector<Dtype>& dtypes,
                           bool shapeless);

// Builds the graph's nodes on real inputs. With shapeless, output shapes are
// recomputed from the inputs through Primitive::output_shapes.
std::vector<array> replay(const Graph& graph, const std::vector<array>& inputs, bool shapeless);

// Passes (passes.cpp).
void simplify(Graph& graph);
void fuse(Graph& graph);

// What the passes left, for LOOM_COMPILE_DUMP=1: the count of each unfused
// primitive, then one line per fused region (shape, ops, inputs, outputs).
std::string summarize(const Graph& graph);

} // namespace loom::compile_detail
