// Whether the calling thread is inside a transform's trace. Arrays built
// while tracing are tracers: evaluating them keeps their graph, because the
// transform still has to walk it.
#pragma once

namespace loom::transforms {

bool in_trace();

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
  int saved_;
};

} // namespace loom::transforms
