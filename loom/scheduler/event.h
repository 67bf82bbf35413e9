// An event is a point on a stream's timeline: it fires once the stream has
// completed that many tasks. Dependencies across streams wait on events.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace loom::scheduler {

struct Timeline {
  std::atomic<uint64_t> completed{0};

  // Out of line (event.cpp): std::atomic's wait/notify keep their waiter
  // table in the code that calls them, so every waiter and signaller must
  // reach the one copy inside libloom, whatever module calls them.
  void wait(uint64_t value) const;
  void signal(uint64_t value);
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
