#include "loom/transforms/trace.h"

namespace loom::transforms {

namespace {
thread_local int t_depth = 0;
} // namespace

bool in_trace() { return t_depth > 0; }
TraceScope::TraceScope() { ++t_depth; }
TraceScope::~TraceScope() { --t_depth; }
SuspendTrace::SuspendTrace() : saved_(t_depth) { t_depth = 0; }
SuspendTrace::~SuspendTrace() { t_depth = saved_; }

} // namespace loom::transforms
