#include "loom/scheduler/event.h"

namespace loom::scheduler {

void Timeline::wait(uint64_t value) const {
  uint64_t seen = completed.load(std::memory_order_acquire);
  while (seen < value) {
    completed.wait(seen, std::memory_order_acquire);
    seen = completed.load(std::memory_order_acquire);
  }
}

// Monotonic: a device stream's timeline may be signalled by its completion
// thread and by a thread that waited for the device itself (the evaluating
// thread after an eval), in either order.
void Timeline::signal(uint64_t value) {
  uint64_t seen = completed.load(std::memory_order_relaxed);
  while (seen < value && !completed.compare_exchange_weak(seen, value, std::memory_order_release,
                                                          std::memory_order_relaxed)) {
  }
  completed.notify_all();
}

} // namespace loom::scheduler
