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

} // namespace loom::transforms
