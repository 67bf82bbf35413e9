#include "loom/scheduler/event.h"

namespace loom::scheduler {

void Timeline::wait(uint64_t value) const {
  uint64_t seen = completed.load(std::memory_order_acquire);
  while (seen < value) {
    completed.wait(seen, std::memory_order_acquire);
    seen = completed.load(std::memory_order_acquire);
  }
}

void Timeline::signal(uint64_t value) {
  completed.store(value, std::memory_order_release);
  completed.notify_all();
}

} // namespace loom::scheduler
