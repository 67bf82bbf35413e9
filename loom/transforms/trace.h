// Whether the calling thread is inside a transform's trace. Arrays built
// while tracing are tracers: evaluating them keeps their graph, because the
// transform still has to walk it, and kernels do not donate buffers into
// them. They are tracers only while the trace that built them is open (MLX:
// is_tracer && in_tracing()): when the outermost transform returns, every
// array built inside it becomes an ordinary array, so evaluating results and
// intermediates alike frees their graphs.
#pragma once

#include <memory>
#include <vector>

namespace loom {
struct ArrayDesc;
}

namespace loom::transforms {

bool in_trace();

// Registers an array built inside the open trace (array's constructors call
// it), so that closing the trace can end its tracer status.
void record_tracer(const std::shared_ptr<ArrayDesc>& desc);

// Opens a trace for its lifetime; the outermost scope closes it on exit.
class TraceScope {
 public:
  TraceScope();
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;
};

// Runs a region as if outside every transform (checkpoint's forward body).
class SuspendTrace {
 public:
  SuspendTrace();
  ~SuspendTrace();
  SuspendTrace(const SuspendTrace&) = delete;
  SuspendTrace& operator=(const SuspendTrace&) = delete;

 private:
  int saved_depth_;
  std::vector<std::weak_ptr<ArrayDesc>> saved_tracers_;
};

} // namespace loom::transforms
