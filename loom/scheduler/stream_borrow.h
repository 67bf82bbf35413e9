// A stream belongs to the thread that created it: ops given another thread's
// stream refuse it (streams.cpp, check_stream_thread). A kernel running on a
// stream's worker (or on any thread evaluating that stream's task) may still
// need to build a few ops on that stream from its own inputs, to evaluate
// them at once (the convolution gradients' composite: primitives/conv.h).
// For the lifetime of a StreamBorrow the calling thread may use `stream` as
// if it owned it.
#pragma once

#include "loom/stream.h"

namespace loom::scheduler {

class StreamBorrow {
 public:
  explicit StreamBorrow(const Stream& stream);
  ~StreamBorrow();
  StreamBorrow(const StreamBorrow&) = delete;
  StreamBorrow& operator=(const StreamBorrow&) = delete;

 private:
  int previous_;
};

} // namespace loom::scheduler
