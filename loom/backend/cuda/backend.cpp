// The CUDA backend: found at run time, one CUDA stream per Loom GPU stream,
// kernels looked up per primitive type, and the CPU as a transparent fallback
// for primitives that have no GPU kernel yet.
#include "loom/scheduler/backend.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "loom/backend/cuda/cuda.h"
#include "loom/primitives/primitive.h"
#include "loom/scheduler/scheduler.h"

namespace loom::cuda {

namespace profile {

namespace {
const char* const kSlotNames[kSlots] = {
    "eval (whole GPU node)",     "prepare (kernel lookup, args)", "alloc (output buffer)",
    "launch (cudaLaunchKernel)", "signal (completion event)",     "sync (caller waits)"};
std::atomic<long long> g_ns[kSlots];
std::atomic<long long> g_calls[kSlots];

void report() {
  std::fprintf(stderr, "[loom cuda profile] slot: calls, mean us\n");
  for (int i = 0; i < kSlots; ++i) {
    long long c = g_calls[i].load();
    if (c == 0) continue;
    std::fprintf(stderr, "  %-32s %10lld %9.3f\n", kSlotNames[i], c,
                 static_cast<double>(g_ns[i].load()) / 1e3 / static_cast<double>(c));
  }
}
} // namespace

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("LOOM_CUDA_PROFILE");
    bool yes = v != nullptr && std::string(v) == "1";
    if (yes) std::atexit(report);
    return yes;
  }();
  return on;
}

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void add(Slot slot, long long ns) {
  g_ns[slot].fetch_add(ns, std::memory_order_relaxed);
  g_calls[slot].fetch_add(1, std::memory_order_relaxed);
}

} // namespace profile

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError(); // leave no error behind for the next call to trip on
  const char* name = cudaGetErrorName(e);
  const char* text = cudaGetErrorString(e);
  throw std::runtime_error(std::string("[cuda] ") + what + " failed: " + (name ? name : "?") +
                           " (" + (text ? text : "no description") + ").");
}

namespace {

std::unordered_map<std::type_index, Kernel>& kernel_table() {
  // Never destroyed: GPU workers may still look kernels up while the process exits.
  static auto& table = *new std::unordered_map<std::type_index, Kernel>;
  return table;
}

thread_local cudaStream_t t_stream = cudaStreamLegacy;
thread_local int t_stream_index = -1;
class Completer;
thread_local Completer* t_completer = nullptr;

// Primitives whose CPU evaluation only re-describes an input's buffer (a
// view): running them "on the CPU" moves no data, so they earn no warning.
bool is_view_primitive(const std::string& name) {
  static const std::set<std::string> views = {
      "Reshape", "Transpose",    "Broadcast", "Slice",  "Squeeze",     "ExpandDims",
      "Flatten", "StopGradient", "Split",     "Marker", "Placeholder", "VmapPlaceholder"};
  return views.count(name) > 0;
}

// Turns kernel completion into timeline signals without stalling the GPU: the
// worker records an event after the work a signal covers, and this stream's
// completion thread waits for the events in order and signals. (A host
// function queued on the CUDA stream would do the same, but the stream stops
// until the host function has run, ~10 us per signal on an H200.)
class Completer {
 public:
  Completer() : thread_([this] { loop(); }) {}

  void signal_after(cudaStream_t s, std::shared_ptr<scheduler::Timeline> timeline, uint64_t value) {
    cudaEvent_t ev = take_event();
    if (ev == nullptr || cudaEventRecord(ev, s) != cudaSuccess) {
      // The device is unusable: wake waiters now rather than never.
      cudaGetLastError();
      timeline->signal(value);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back({ev, std::move(timeline), value});
      pending_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_one();
  }

  // Sends the queued signals, ends the thread and deletes `c`. Joined, not
  // left to finish alone: a thread still destroying events while exit()
  // tears the CUDA runtime down crashed the process.
  static void retire(Completer* c) {
    {
      std::lock_guard<std::mutex> lock(c->mutex_);
      c->stop_ = true;
    }
    c->cv_.notify_one();
    c->thread_.join();
    CudaScope scope;
    if (scope.open()) {
      for (cudaEvent_t ev : c->free_) cudaEventDestroy(ev);
    }
    delete c;
  }

 private:
  struct Item {
    cudaEvent_t event;
    std::shared_ptr<scheduler::Timeline> timeline;
    uint64_t value;
  };

  cudaEvent_t take_event() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        cudaEvent_t ev = free_.back();
        free_.pop_back();
        return ev;
      }
    }
    cudaEvent_t ev = nullptr;
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) return nullptr;
    return ev;
  }

  // Waits for `ev` polling for a while first: a blocking wait wakes late
  // (tens of us), and a waiter is usually evaluating small kernels.
  static void wait_event(cudaEvent_t ev) {
    CudaScope scope;
    if (!scope.open()) return; // exiting: nobody reads the results
    auto start = std::chrono::steady_clock::now();
    for (;;) {
      cudaError_t e = cudaEventQuery(ev);
      if (e != cudaErrorNotReady) break;
      if (std::chrono::steady_clock::now() - start > std::chrono::microseconds(200)) {
        cudaEventSynchronize(ev);
        break;
      }
      std::this_thread::yield();
    }
    cudaGetLastError(); // an error still ends the wait: the signal is sent
  }

  void loop() {
    for (;;) {
      Item item;
      // Poll briefly for the next signal before sleeping on the queue.
      auto start = std::chrono::steady_clock::now();
      while (pending_.load(std::memory_order_acquire) == 0 &&
             std::chrono::steady_clock::now() - start < std::chrono::microseconds(100)) {
        std::this_thread::yield();
      }
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) break;
        item = std::move(queue_.front());
        queue_.pop_front();
        pending_.fetch_sub(1, std::memory_order_relaxed);
      }
      wait_event(item.event);
      item.timeline->signal(item.value);
      item.timeline.reset();
      std::lock_guard<std::mutex> lock(mutex_);
      free_.push_back(item.event);
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  std::atomic<size_t> pending_{0}; // queue_.size(), read without the lock
  std::vector<cudaEvent_t> free_;
  bool stop_ = false;
  std::thread thread_; // last: starts once the members above exist
};

class CudaBackend;
CudaBackend* g_backend = nullptr;
std::atomic<cudaStream_t> g_sole_stream{nullptr};

class CudaBackend final : public scheduler::DeviceBackend {
 public:
  explicit CudaBackend(int count) : count_(count) {
    for (int i = 0; i < count_; ++i) {
      allocator::register_allocator(Device(Device::gpu, i), &device_pool(i));
    }
    if (const char* v = std::getenv("LOOM_CUDA_FALLBACK_WARN")) quiet_ = std::string(v) == "0";
    if (const char* v = std::getenv("LOOM_CUDA_HOST_FUNC_SIGNALS"))
      host_func_ = std::string(v) == "1";
    g_backend = this;
  }

  int device_count() const override { return count_; }

  void eval(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs) override {
    profile::Timer timer(profile::kEval);
    CudaScope scope;
    scope.require(p.name());
    cudaStream_t s = stream_of(p.stream());
    std::type_index type(typeid(p));
    auto it = kernel_table().find(type);
    if (it != kernel_table().end() && it->second(p, inputs, outputs, s)) {
      check(cudaGetLastError(), p.name());
      return;
    }
    if (is_view_type(type, p)) {
      // Mostly re-describes an input's buffer. A Reshape or Flatten whose
      // input cannot be viewed copies it on the CPU instead, which downloads
      // the input; that waits only for work already queued on the device,
      // never for another task's signal, so it cannot deadlock and no
      // held-back signal needs sending first.
      p.eval_cpu(inputs, outputs);
      return;
    }
    fallback(p, inputs, outputs);
  }

  void signal_when_done(const Stream& stream, const std::shared_ptr<scheduler::Timeline>& timeline,
                        uint64_t value) override {
    profile::Timer timer(profile::kSignal);
    CudaScope scope;
    if (!scope.open()) {
      timeline->signal(value); // exiting: no kernel of this stream runs any more
      return;
    }
    cudaStream_t s = stream_of(stream);
    if (!host_func_) {
      Completer* c = t_stream_index == stream.index ? t_completer : nullptr;
      if (c == nullptr) {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = completers_.find(stream.index);
        if (it != completers_.end()) c = it->second;
      }
      if (c != nullptr) {
        c->signal_after(s, timeline, value);
        return;
      }
    }
    auto* payload = new Signal{timeline, value};
    if (cudaLaunchHostFunc(s, &Signal::fire, payload) != cudaSuccess) {
      // The device is unusable: wake waiters now rather than never.
      cudaGetLastError();
      Signal::fire(payload);
    }
  }

  bool synchronize(const Stream& stream) override {
    profile::Timer timer(profile::kSync);
    CudaScope scope;
    if (!scope.open()) return false;
    cudaStream_t s = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = streams_.find(stream.index);
      if (it == streams_.end()) return false;
      s = it->second;
    }
    if (cudaStreamSynchronize(s) != cudaSuccess) {
      cudaGetLastError(); // the completion thread's signal still comes
      return false;
    }
    return true;
  }

  void stream_created(const Stream& stream) override {
    CudaScope scope;
    scope.require("cudaStreamCreate");
    cudaSetDevice(stream.device.index);
    cudaStream_t s = nullptr;
    check(cudaStreamCreate(&s), "cudaStreamCreate");
    std::lock_guard<std::mutex> lock(mutex_);
    streams_[stream.index] = s;
    completers_[stream.index] = new Completer();
    update_sole_stream();
  }

  void stream_destroyed(const Stream& stream) override {
    cudaStream_t s = nullptr;
    Completer* completer = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = streams_.find(stream.index);
      if (it == streams_.end()) return;
      s = it->second;
      streams_.erase(it);
      auto c = completers_.find(stream.index);
      if (c != completers_.end()) {
        completer = c->second;
        completers_.erase(c);
      }
      update_sole_stream();
    }
    if (completer != nullptr) Completer::retire(completer);
    CudaScope scope;
    if (!scope.open()) return;
    // Its kernels finish first: once it is gone the remaining stream may be
    // the sole one, whose frees assume no other stream reads their buffers.
    cudaStreamSynchronize(s);
    cudaGetLastError();
    cudaStreamDestroy(s);
  }

  void before_exit() override { close_gate_now(); }

  std::map<std::string, std::variant<std::string, size_t>> device_info(int index) override {
    CudaScope scope;
    scope.require("device_info");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
    std::map<std::string, std::variant<std::string, size_t>> info;
    info["device_name"] = std::string(prop.name);
    info["architecture"] = "sm_" + std::to_string(prop.major * 10 + prop.minor);
    info["total_memory"] = static_cast<size_t>(prop.totalGlobalMem);
    size_t free_b = 0, total_b = 0;
    cudaSetDevice(index);
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) info["free_memory"] = free_b;
    cudaGetLastError();
    info["compute_capability_major"] = static_cast<size_t>(prop.major);
    info["compute_capability_minor"] = static_cast<size_t>(prop.minor);
    info["multiprocessor_count"] = static_cast<size_t>(prop.multiProcessorCount);
    return info;
  }

 private:
  struct Signal {
    std::shared_ptr<scheduler::Timeline> timeline;
    uint64_t value;
    static void CUDART_CB fire(void* p) {
      auto* s = static_cast<Signal*>(p);
      s->timeline->signal(s->value);
      delete s;
    }
  };

  cudaStream_t stream_of(const Stream& stream) {
    if (t_stream_index == stream.index) return t_stream;
    cudaSetDevice(stream.device.index);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = streams_.find(stream.index);
    if (it == streams_.end()) {
      throw std::runtime_error("[cuda] Stream " + std::to_string(stream.index) +
                               " has no CUDA stream.");
    }
    // A worker thread serves one stream for its whole life.
    t_stream = it->second;
    t_stream_index = stream.index;
    auto c = completers_.find(stream.index);
    t_completer = c != completers_.end() ? c->second : nullptr;
    return t_stream;
  }

  // Called under mutex_.
  void update_sole_stream() {
    static const bool legacy = [] {
      const char* v = std::getenv("LOOM_CUDA_FREE_LEGACY");
      return v != nullptr && std::string(v) == "1";
    }();
    g_sole_stream.store(streams_.size() == 1 && !legacy ? streams_.begin()->second : nullptr,
                        std::memory_order_release);
  }

  // Per primitive type, once per thread: a broadcast scalar (`x + 1.0`) makes
  // a view node per op, and the name's string and set lookup cost ~0.3 us.
  static bool is_view_type(std::type_index type, Primitive& p) {
    thread_local std::unordered_map<std::type_index, bool> views;
    auto it = views.find(type);
    if (it != views.end()) return it->second;
    return views.emplace(type, is_view_primitive(p.name())).first->second;
  }

  // Beyond MLX: a primitive without a GPU kernel runs on the CPU, on this
  // stream's worker, in stream order. Its inputs come down through Data's
  // host copies (each copy waits for the kernels that wrote it), and its
  // outputs live on the host until a GPU kernel needs them.
  void fallback(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs) {
    // A CPU kernel may block (host copies, nested evaluation): no completion
    // signal of this stream may be held back meanwhile.
    scheduler::flush_stream_signals();
    std::string name = p.name();
    if (!quiet_ && !is_view_primitive(name)) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (warned_.insert(name).second) {
        std::cerr << "[loom] warning: " << name
                  << " has no GPU kernel yet; it runs on the CPU (its data moves to the host "
                     "and back). This warning is shown once per primitive.\n";
      }
    }
    p.eval_cpu(inputs, outputs);
  }

  int count_;
  bool quiet_ = false;
  bool host_func_ = false; // LOOM_CUDA_HOST_FUNC_SIGNALS=1: the former signalling, to compare
  std::unordered_map<int, Completer*> completers_;
  std::mutex mutex_;
  std::unordered_map<int, cudaStream_t> streams_;
  std::set<std::string> warned_;
};

scheduler::DeviceBackend* probe() {
  if (const char* v = std::getenv("LOOM_DISABLE_GPU"); v != nullptr && std::string(v) == "1") {
    return nullptr;
  }
  int count = 0;
  // Without a driver (or a device) this fails, and Loom is a CPU library.
  if (cudaGetDeviceCount(&count) != cudaSuccess || count <= 0) {
    cudaGetLastError();
    return nullptr;
  }
  // The runtime's teardown is registered by now: the gate closes before it.
  close_before_teardown();
  try {
    return new CudaBackend(count); // leaked: lives as long as the process
  } catch (const std::exception& e) {
    std::cerr << "[loom] warning: a GPU was found but the CUDA backend failed to start: "
              << e.what() << "\n";
    return nullptr;
  }
}

struct Registration {
  Registration() { scheduler::register_probe(Device::gpu, &probe); }
} registration;

} // namespace

cudaStream_t current_stream() { return t_stream; }

cudaStream_t sole_stream() { return g_sole_stream.load(std::memory_order_acquire); }

void register_kernel(std::type_index primitive, Kernel kernel) {
  kernel_table()[primitive] = kernel;
}

const void* device_data(const array& a, cudaStream_t stream) {
  auto& data = a.data_shared_ptr();
  int dev = 0;
  cudaGetDevice(&dev);
  char* base = static_cast<char*>(data->device_ptr(device_pool(dev), stream));
  return base + a.offset();
}

void* alloc_output(array& out) {
  int dev = 0;
  cudaGetDevice(&dev);
  auto& pool = device_pool(dev);
  out.set_data(std::make_shared<allocator::Data>(pool.malloc(out.nbytes()), &pool));
  return out.data_shared_ptr()->device_ptr(pool, nullptr);
}

void eval_primitive(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs) {
  g_backend->eval(p, inputs, outputs);
}

int multiprocessor_count(int index) {
  static std::mutex& m = *new std::mutex;
  static std::unordered_map<int, int>& cache = *new std::unordered_map<int, int>;
  std::lock_guard<std::mutex> lock(m);
  auto it = cache.find(index);
  if (it != cache.end()) return it->second;
  int n = 0;
  cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, index);
  return cache[index] = n > 0 ? n : 1;
}

int current_device() {
  int dev = 0;
  cudaGetDevice(&dev);
  return dev;
}

int compute_capability(int index) {
  static std::mutex& m = *new std::mutex;
  static std::unordered_map<int, int>& cache = *new std::unordered_map<int, int>;
  std::lock_guard<std::mutex> lock(m);
  auto it = cache.find(index);
  if (it != cache.end()) return it->second;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index);
  return cache[index] = major * 10 + minor;
}

} // namespace loom::cuda
