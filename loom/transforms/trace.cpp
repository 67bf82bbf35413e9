#include "loom/transforms/trace.h"

#include <algorithm>
#include <vector>

#include "loom/array.h"

namespace loom::transforms {

namespace {

thread_local int t_depth = 0;
// The arrays built in the open trace, weakly: the trace must not keep them.
thread_local std::vector<std::weak_ptr<ArrayDesc>> t_tracers;
// Expired entries are dropped when the list reaches this size, which then
// doubles, so the list stays within twice the live tracers.
thread_local size_t t_prune_at = 1024;

// Ends the tracer status of everything the closing trace built. An array
// whose kernel may be running right now (scheduled) keeps the flag: the
// worker may be reading it, and such an array already keeps its node.
void close_trace() {
  auto tracers = std::move(t_tracers);
  t_tracers.clear();
  t_prune_at = 1024;
  for (auto& weak : tracers) {
    if (auto desc = weak.lock()) {
      if (desc->status.load(std::memory_order_acquire) != Status::scheduled) {
        desc->is_tracer = false;
      }
    }
  }
}

} // namespace

bool in_trace() { return t_depth > 0; }

void record_tracer(const std::shared_ptr<ArrayDesc>& desc) {
  if (t_tracers.size() >= t_prune_at) {
    std::erase_if(t_tracers, [](const std::weak_ptr<ArrayDesc>& w) { return w.expired(); });
    t_prune_at = std::max<size_t>(1024, 2 * t_tracers.size());
  }
  t_tracers.emplace_back(desc);
}

TraceScope::TraceScope() { ++t_depth; }

TraceScope::~TraceScope() {
  if (--t_depth == 0) close_trace();
}

SuspendTrace::SuspendTrace() : saved_depth_(t_depth), saved_tracers_(std::move(t_tracers)) {
  t_depth = 0;
  t_tracers.clear();
}

SuspendTrace::~SuspendTrace() {
  t_depth = saved_depth_;
  t_tracers = std::move(saved_tracers_);
}

} // namespace loom::transforms
