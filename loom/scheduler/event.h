// An event is a point on a stream's timeline: it fires once the stream has
// completed that many tasks. Dependencies across streams wait on events.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace loom::scheduler {

struct Timeline {
  std::atomic<uint64_t> completed{0};

  void wait(uint64_t value) const {
    uint64_t seen = completed.load(std::memory_order_acquire);
    while (seen < value) {
      completed.wait(seen, std::memory_order_acquire);
      seen = completed.load(std::memory_order_acquire);
    }
  }
  void signal(uint64_t value) {
    completed.store(value, std::memory_order_release);
    completed.notify_all();
  }
};

struct Event {
  std::shared_ptr<Timeline> timeline;
  uint64_t value = 0;

  bool valid() const { return timeline != nullptr; }
  bool is_signaled() const {
    return !timeline || timeline->completed.load(std::memory_order_acquire) >= value;
  }
  void wait() const {
    if (timeline) timeline->wait(value);
  }
};

} // namespace loom::scheduler
