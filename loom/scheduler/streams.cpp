// Devices and streams: the registry of streams, their owning threads and
// their workers.
#include <pthread.h>

#include <cstdlib>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

#include "loom/device.h"
#include "loom/scheduler/backend.h"
#include "loom/scheduler/scheduler.h"
#include "loom/scheduler/stream_borrow.h"
#include "loom/stream.h"

namespace loom {

namespace {

struct StreamState {
  Stream stream;
  std::thread::id owner;
  // Shared: another thread evaluating a graph built on this stream keeps the
  // worker alive while it submits, even if the owner exits meanwhile.
  std::shared_ptr<scheduler::StreamWorker> worker;
};

struct Registry {
  std::mutex mutex;
  std::unordered_map<int, std::unique_ptr<StreamState>> streams;
  int next_index = 0;
  Device default_device{Device::cpu, 0};
};

// After fork() the child has none of the parent's worker threads. The
// registry's mutex is held across fork so the child inherits it unlocked and
// consistent; the child then drops (leaks: their threads are gone, their
// mutexes may be held) the old workers, and worker_for() starts new ones.
void lock_before_fork();
void unlock_after_fork();
void reset_in_child();

Registry& registry() {
  // Leaked on purpose: workers must outlive static arrays freed at exit.
  static auto* r = [] {
    pthread_atfork(&lock_before_fork, &unlock_after_fork, &reset_in_child);
    return new Registry();
  }();
  return *r;
}

void lock_before_fork() { registry().mutex.lock(); }
void unlock_after_fork() { registry().mutex.unlock(); }
void reset_in_child() {
  auto& r = registry();
  for (auto& [index, state] : r.streams) {
    new std::shared_ptr<scheduler::StreamWorker>(std::move(state->worker)); // leaked
  }
  r.mutex.unlock();
}

// The streams a thread created, destroyed (after draining) when it exits.
struct ThreadStreams {
  std::vector<int> owned;
  int default_cpu = -1;
  int default_gpu = -1;
  ~ThreadStreams() { destroy(); }
  void destroy();
};

thread_local ThreadStreams t_streams;

// The stream this thread borrowed (StreamBorrow), or -1.
thread_local int t_borrowed = -1;

void ThreadStreams::destroy() {
  std::vector<std::unique_ptr<StreamState>> dying;
  {
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (int idx : owned) {
      auto it = r.streams.find(idx);
      if (it != r.streams.end()) {
        dying.push_back(std::move(it->second));
        r.streams.erase(it);
      }
    }
  }
  owned.clear();
  default_cpu = default_gpu = -1;
  // Workers drain their queues in their destructors, outside the lock.
  dying.clear();
}

void check_gpu(const Device& d) {
  if (d.type == Device::gpu && !is_available(d)) {
    throw std::invalid_argument(
        "[device] Device(gpu, " + std::to_string(d.index) +
        ") is not available: this build of Loom has no GPU backend or no GPU was found. Use "
        "loom.core.cpu, or check loom.core.is_available(loom.core.gpu) first.");
  }
}

Stream create_stream(Device d) {
  check_gpu(d);
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  Stream s(r.next_index++, d);
  auto state = std::make_unique<StreamState>(StreamState{s, std::this_thread::get_id(), nullptr});
  state->worker = std::make_shared<scheduler::StreamWorker>(s);
  r.streams.emplace(s.index, std::move(state));
  t_streams.owned.push_back(s.index);
  return s;
}

} // namespace

std::string to_string(Device::DeviceType t) { return t == Device::cpu ? "cpu" : "gpu"; }

std::ostream& operator<<(std::ostream& os, const Device& d) {
  return os << "Device(" << to_string(d.type) << ", " << d.index << ")";
}

std::ostream& operator<<(std::ostream& os, const Stream& s) {
  return os << "Stream(" << s.device << ", " << s.index << ")";
}

// The GPU is the default device when a backend found one (as in MLX's CUDA
// build); asking probes the backends once.
const Device& default_device() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (is_available(Device(Device::gpu, 0))) registry().default_device = Device(Device::gpu, 0);
  });
  return registry().default_device;
}

void set_default_device(const Device& d) {
  check_gpu(d);
  default_device(); // settle the initial choice before overriding it
  registry().default_device = d;
}

bool is_available(const Device& d) {
  if (d.type == Device::cpu) return d.index == 0;
  return d.index >= 0 && d.index < device_count(Device::gpu);
}

int device_count(Device::DeviceType t) {
  if (t == Device::cpu) return 1;
  auto* b = scheduler::backend(t);
  return b != nullptr ? b->device_count() : 0;
}

Stream default_stream(Device d) {
  check_gpu(d);
  int& idx = d.type == Device::cpu ? t_streams.default_cpu : t_streams.default_gpu;
  if (idx < 0) idx = create_stream(d).index;
  return Stream(idx, d);
}

void set_default_stream(Stream s) {
  check_stream_thread(s);
  (s.device.type == Device::cpu ? t_streams.default_cpu : t_streams.default_gpu) = s.index;
}

Stream new_stream(Device d) { return create_stream(d); }

void check_stream_thread(const Stream& s) {
  if (s.index == t_borrowed) return;
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.streams.find(s.index);
  if (it == r.streams.end() || it->second->owner != std::this_thread::get_id()) {
    std::ostringstream msg;
    msg << "There is no Stream(" << to_string(s.device.type) << ", " << s.index
        << ") in current thread. A stream can only be used on the thread that created it; "
           "make one per thread with new_stream or new_thread_local_stream.";
    throw std::runtime_error(msg.str());
  }
}

Stream to_stream(StreamOrDevice s) {
  if (std::holds_alternative<Stream>(s)) {
    auto st = std::get<Stream>(s);
    check_stream_thread(st);
    return st;
  }
  if (std::holds_alternative<Device>(s)) return default_stream(std::get<Device>(s));
  return default_stream(default_device());
}

void synchronize(Stream s) { scheduler::worker_for(s)->synchronize(); }

void synchronize() { synchronize(default_stream(default_device())); }

void clear_streams() { t_streams.destroy(); }

namespace scheduler {

StreamBorrow::StreamBorrow(const Stream& stream) : previous_(t_borrowed) {
  t_borrowed = stream.index;
}

StreamBorrow::~StreamBorrow() { t_borrowed = previous_; }

std::shared_ptr<StreamWorker> worker_for(const Stream& stream) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.streams.find(stream.index);
  if (it == r.streams.end()) {
    std::ostringstream msg;
    msg << "There is no Stream(" << to_string(stream.device.type) << ", " << stream.index
        << ") in current thread; it was destroyed by clear_streams or its thread exited.";
    throw std::runtime_error(msg.str());
  }
  auto& worker = it->second->worker;
  if (!worker) worker = std::make_shared<StreamWorker>(stream); // first use after fork()
  return worker;
}

void drain_all_streams() {
  std::vector<std::shared_ptr<StreamWorker>> workers;
  {
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (auto& [index, state] : r.streams) {
      if (state->worker) workers.push_back(state->worker);
    }
  }
  // Outside the lock: a queued task may create or look up streams.
  for (auto& w : workers) w->synchronize();
}

int bfs_max_width() {
  static int width = [] {
    for (const char* name : {"LOOM_BFS_MAX_WIDTH", "MLX_BFS_MAX_WIDTH"}) {
      if (const char* v = std::getenv(name)) {
        int w = std::atoi(v);
        if (w > 0) return w;
      }
    }
    return 20;
  }();
  return width;
}

} // namespace scheduler
} // namespace loom
