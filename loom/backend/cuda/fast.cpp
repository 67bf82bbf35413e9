// The mx.fast primitives on the GPU until each has a kernel of its own: the
// primitive's composite (the ops it is defined by and tested against,
// primitives/fast.h) is built over its evaluated inputs and run node by node
// on the eager GPU kernels, on this stream and in this worker, as a compiled
// region without a fused kernel runs; the outputs take the composite's
// buffers. Slower than a fused kernel (the intermediates are materialised),
// but the data stays on the device instead of taking the CPU fallback.
#include "loom/primitives/fast.h"

#include <unordered_set>
#include <utility>

#include "loom/backend/cuda/cuda.h"

namespace loom::cuda {

namespace {

// Evaluates every unevaluated node behind `outs`, inputs first.
void run_graph(const std::vector<array>& outs) {
  std::vector<array> order;
  std::unordered_set<const void*> seen;
  std::vector<std::pair<array, size_t>> stack;
  auto visit = [&](const array& a) {
    if (a.status() == Status::available) return;
    if (!a.has_node())
      throw std::runtime_error("[cuda] A composite produced an array without data.");
    if (seen.insert(a.node().get()).second) stack.emplace_back(a, 0);
  };
  for (const array& o : outs) visit(o);
  while (!stack.empty()) {
    auto& [a, next] = stack.back();
    const std::vector<array>& in = a.inputs();
    if (next < in.size()) {
      const array child = in[next++];
      visit(child);
      continue;
    }
    order.push_back(a);
    stack.pop_back();
  }
  for (array& a : order) {
    std::vector<array> node_outs = a.outputs();
    eval_primitive(a.primitive(), a.inputs(), node_outs);
    for (array& o : node_outs) o.set_status(Status::available);
  }
}

bool composite_kernel(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs,
                      cudaStream_t) {
  std::vector<array> outs = static_cast<FastPrimitive&>(p).composite(inputs);
  if (outs.size() != outputs.size()) return false;
  for (size_t j = 0; j < outs.size(); ++j) {
    if (outs[j].shape() != outputs[j].shape() || outs[j].dtype() != outputs[j].dtype())
      return false;
  }
  run_graph(outs);
  for (size_t j = 0; j < outs.size(); ++j) outputs[j].copy_shared_buffer(outs[j]);
  return true;
}

struct Registration {
  Registration() {
    register_kernel(typeid(RMSNorm), &composite_kernel);
    register_kernel(typeid(LayerNorm), &composite_kernel);
    register_kernel(typeid(RoPE), &composite_kernel);
    register_kernel(typeid(ScaledDotProductAttention), &composite_kernel);
    register_kernel(typeid(CrossEntropy), &composite_kernel);
    register_kernel(typeid(GatedDeltaUpdate), &composite_kernel);
    register_kernel(typeid(GatedDeltaUpdateVJP), &composite_kernel);
  }
} registration;

} // namespace
} // namespace loom::cuda
