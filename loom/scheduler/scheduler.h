// Evaluation: orders the unevaluated graph and hands each node to the worker
// of its stream. Dependencies inside a stream follow its queue order; across
// streams a task waits on the producer's event.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "loom/array.h"
#include "loom/scheduler/backend.h"
#include "loom/scheduler/event.h"

namespace loom {

void eval(std::vector<array> outputs);
void async_eval(std::vector<array> outputs);

namespace scheduler {

// One thread and one FIFO queue per stream. On a CPU stream a task's event
// fires when the task has run; on a device stream the task enqueues device
// work, and its event fires when that work completes (the backend signals the
// timeline from the device queue).
class StreamWorker {
 public:
  explicit StreamWorker(Stream stream);
  ~StreamWorker();
  StreamWorker(const StreamWorker&) = delete;
  StreamWorker& operator=(const StreamWorker&) = delete;

  // Queues a task; returns the event that fires when it has run.
  Event submit(std::function<void()> task);
  // Runs `task` on the calling thread if the worker has nothing queued or
  // running (the stream's order is kept); `done` is its event then. On a
  // device stream the task only enqueues device work, so it may run inline
  // while earlier device work is still in flight: the device queue orders it.
  bool try_run_inline(std::function<void()>& task, Event& done);
  // Waits until every task submitted so far has run.
  void synchronize();
  const Stream& stream() const { return stream_; }
  bool on_device() const { return backend_ != nullptr; }
  const std::shared_ptr<Timeline>& timeline() const { return timeline_; }
  // A device stream's completion signal may be held back while more tasks
  // are queued (one signal then covers the run: completion is monotonic).
  // The worker sends it before it blocks on anything, so no wait can depend
  // on a held-back signal. Called on the worker's own thread.
  void flush_deferred();
  // Device streams: a task run inline holds its completion signal back (one
  // event then covers a run of inline tasks); the evaluating thread sends it
  // once its graph is scheduled, or before it blocks (flush_stream_signals),
  // and synchronize() sends it for any thread. Any thread may call it.
  void flush_inline();
  // After an eval's scheduling: when every task submitted so far has been
  // launched, waits for the device on the calling thread and signals the
  // timeline itself (no completion round trip through another thread).
  // Otherwise sends the held-back inline signal as flush_inline does.
  void finish_on_caller(bool wait);

 private:
  void loop();

  void complete(uint64_t seq);

  uint64_t deferred_ = 0; // worker thread only

  Stream stream_;
  DeviceBackend* backend_ = nullptr; // null on the CPU
  std::shared_ptr<Timeline> timeline_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  struct QueuedTask {
    uint64_t seq = 0;
    std::function<void()> task;
  };
  std::deque<QueuedTask> queue_;
  uint64_t submitted_ = 0;
  uint64_t inline_deferred_ = 0; // a held-back inline task's signal (device streams)
  bool inline_active_ = false;
  bool busy_ = false; // the worker runs a task or holds its signal (device streams)
  bool stop_ = false;
  std::thread thread_;
};

// Sends the held-back completion signal of the stream whose worker runs on
// the calling thread, if any (backends call it before they block).
void flush_stream_signals();

// The worker of `stream`; raises if the stream was destroyed.
std::shared_ptr<StreamWorker> worker_for(const Stream& stream);

// Waits until the work queued on every stream, of every thread, has run.
// Python's os.fork() calls it first (os.register_at_fork in loom/__init__.py):
// the child has none of the workers, so an array still queued at fork would
// never be computed there. It runs before the pthread_atfork handlers, whose
// locks the workers need; a C++ program that forks calls it itself.
void drain_all_streams();
// The width of the ready frontier before scheduling turns depth-first
// (MLX_BFS_MAX_WIDTH / LOOM_BFS_MAX_WIDTH, default 20).
int bfs_max_width();

} // namespace scheduler
} // namespace loom
