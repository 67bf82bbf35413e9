// The CUDA backend: found at run time, one CUDA stream per Loom GPU stream,
// kernels looked up per primitive type, and the CPU as a transparent fallback
// for primitives that have no GPU kernel yet.
#include "loom/scheduler/backend.h"

#include <cuda.h>

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
#include "loom/backend/cuda/launch_batch.h"
#include "loom/primitives/primitive.h"
#include "loom/scheduler/scheduler.h"

namespace loom::cuda {

namespace profile {

namespace {
const char* const kSlotNames[kSlots] = {
    "eval (whole GPU node)",     "prepare (kernel lookup, args)", "alloc (output buffer)",
    "launch (cudaLaunchKernel)", "signal (completion event)",     "sync (caller waits)",
    "flush (batched launches)",  "graph argument updates",        "graph launch"};
std::atomic<long long> g_ns[kSlots];
std::atomic<long long> g_calls[kSlots];

} // namespace

// Totals of every stream's launch batch (added at each flush).
std::atomic<long long> g_batch[8];

namespace {

void report() {
  std::fprintf(stderr, "[loom cuda profile] slot: calls, mean us\n");
  for (int i = 0; i < kSlots; ++i) {
    long long c = g_calls[i].load();
    if (c == 0) continue;
    std::fprintf(stderr, "  %-32s %10lld %9.3f\n", kSlotNames[i], c,
                 static_cast<double>(g_ns[i].load()) / 1e3 / static_cast<double>(c));
  }
  std::fprintf(stderr,
               "[loom cuda graphs] recorded %lld, direct %lld, graphs built %lld, graph launches "
               "%lld, nodes in graphs %lld, node updates %lld, failures %lld, whole updates %lld\n",
               g_batch[0].load(), g_batch[1].load(), g_batch[2].load(), g_batch[3].load(),
               g_batch[4].load(), g_batch[5].load(), g_batch[6].load(), g_batch[7].load());
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

// --- launch batching (launch_batch.h) ---------------------------------------

// The driver calls a batch makes, fetched through the runtime (libcuda is not
// linked). Null members when unavailable: batching is then off.
struct GraphApi {
  using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);
  using GraphCreate = CUresult (*)(CUgraph*, unsigned);
  using AddKernelNode = CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                     const CUDA_KERNEL_NODE_PARAMS_v2*);
  using Instantiate = CUresult (*)(CUgraphExec*, CUgraph, unsigned long long);
  using SetParams = CUresult (*)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2*);
  using GraphLaunch = CUresult (*)(CUgraphExec, CUstream);
  using ExecDestroy = CUresult (*)(CUgraphExec);
  using GraphDestroy = CUresult (*)(CUgraph);
  using ParamInfo = CUresult (*)(CUfunction, size_t, size_t*, size_t*);
  using ExecUpdate = CUresult (*)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo*);
  Launch launch = nullptr;
  GraphCreate graph_create = nullptr;
  AddKernelNode add_kernel_node = nullptr;
  Instantiate instantiate = nullptr;
  SetParams set_params = nullptr;
  GraphLaunch graph_launch = nullptr;
  ExecDestroy exec_destroy = nullptr;
  GraphDestroy graph_destroy = nullptr;
  ParamInfo param_info = nullptr;
  ExecUpdate exec_update = nullptr; // optional (update_all)
  bool ok = false;
};

template <typename F>
bool entry_point(const char* name, int version, F& out) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess || p == nullptr) {
    cudaGetLastError();
    return false;
  }
  out = reinterpret_cast<F>(p);
  return true;
}

// LOOM_CUDA_GRAPHS=0 switches batching off (every launch goes out at once).
const GraphApi& graph_api() {
  static const GraphApi api = [] {
    GraphApi a;
    const char* v = std::getenv("LOOM_CUDA_GRAPHS");
    if (v != nullptr && std::string(v) == "0") return a;
    v = std::getenv("LOOM_CUDA_RUNTIME_LAUNCH");
    if (v != nullptr && std::string(v) == "1")
      return a; // launches bypass launch_kernel's driver path
    a.ok = entry_point("cuLaunchKernel", 12000, a.launch) &&
           entry_point("cuGraphCreate", 12000, a.graph_create) &&
           entry_point("cuGraphAddKernelNode", 12000, a.add_kernel_node) &&
           entry_point("cuGraphInstantiateWithFlags", 12000, a.instantiate) &&
           entry_point("cuGraphExecKernelNodeSetParams", 12000, a.set_params) &&
           entry_point("cuGraphLaunch", 12000, a.graph_launch) &&
           entry_point("cuGraphExecDestroy", 12000, a.exec_destroy) &&
           entry_point("cuGraphDestroy", 12000, a.graph_destroy) &&
           entry_point("cuFuncGetParamInfo", 12040, a.param_info);
    if (a.ok) entry_point("cuGraphExecUpdate", 12000, a.exec_update);
    return a;
  }();
  return api;
}

// Where each argument of `f` lies, from the driver (one lookup per function;
// the layouts live as long as the process, records point at them). Null when
// the driver cannot tell.
const ParamLayout* param_layout(CUfunction f) {
  thread_local std::unordered_map<CUfunction, const ParamLayout*> seen;
  auto it = seen.find(f);
  if (it != seen.end()) return it->second;
  static std::mutex& m = *new std::mutex;
  static auto& layouts = *new std::unordered_map<CUfunction, std::unique_ptr<ParamLayout>>;
  std::lock_guard<std::mutex> lock(m);
  auto& slot = layouts[f];
  if (!slot) {
    auto layout = std::make_unique<ParamLayout>();
    for (size_t i = 0; i < 256; ++i) {
      size_t offset = 0, size = 0;
      if (graph_api().param_info(f, i, &offset, &size) != CUDA_SUCCESS) break;
      layout->push_back({static_cast<uint32_t>(offset), static_cast<uint32_t>(size)});
    }
    slot = std::move(layout);
  }
  const ParamLayout* result = slot->empty() ? nullptr : slot.get();
  seen.emplace(f, result);
  return result;
}

// The batch's device side: launches, graphs of kernel nodes chained in
// order, argument updates and replays on one CUDA stream.
class CudaGraphDriver final : public GraphDriver {
 public:
  explicit CudaGraphDriver(cudaStream_t s) : stream_(reinterpret_cast<CUstream>(s)) {}

  bool launch(const LaunchRecord& r, void** args) override {
    const GraphApi& a = graph_api();
    return ok(a.launch(static_cast<CUfunction>(const_cast<void*>(r.function)), r.grid[0], r.grid[1],
                       r.grid[2], r.block[0], r.block[1], r.block[2], r.shared_bytes, stream_, args,
                       nullptr));
  }

  void* instantiate(const std::vector<LaunchRecord>& records, const std::vector<void**>& args,
                    std::vector<void*>& nodes) override {
    auto g = std::make_unique<Graph>();
    g->graph = build(records, args, &nodes, last_);
    if (g->graph == nullptr || !ok(graph_api().instantiate(&g->exec, g->graph, 0))) {
      g->exec = nullptr;
      nodes.clear();
      destroy(g.release());
      return nullptr;
    }
    return g.release();
  }

  bool update(void* exec, void* node, const LaunchRecord& r, void** args) override {
    profile::Timer timer(profile::kGraphUpdate);
    CUDA_KERNEL_NODE_PARAMS_v2 p = params(r, args);
    return ok(graph_api().set_params(static_cast<Graph*>(exec)->exec,
                                     static_cast<CUgraphNode>(node), &p));
  }

  bool update_all(void* exec, const std::vector<LaunchRecord>& records,
                  const std::vector<void**>& args) override {
    const GraphApi& a = graph_api();
    if (a.exec_update == nullptr) return false;
    profile::Timer timer(profile::kGraphUpdate);
    CUgraph fresh = build(records, args, nullptr, last_);
    if (fresh == nullptr) return false;
    CUgraphExecUpdateResultInfo info{};
    bool updated = ok(a.exec_update(static_cast<Graph*>(exec)->exec, fresh, &info));
    a.graph_destroy(fresh);
    return updated;
  }

  bool launch_graph(void* exec) override {
    profile::Timer timer(profile::kGraphLaunch);
    return ok(graph_api().graph_launch(static_cast<Graph*>(exec)->exec, stream_));
  }

  int last_error() const override { return static_cast<int>(last_); }

  void destroy(void* exec) override {
    auto* g = static_cast<Graph*>(exec);
    if (g == nullptr) return;
    CudaScope scope;
    if (scope.open()) { // exiting: the driver's objects go with the process
      if (g->exec != nullptr) graph_api().exec_destroy(g->exec);
      if (g->graph != nullptr) graph_api().graph_destroy(g->graph);
    }
    delete g;
  }

 private:
  struct Graph {
    CUgraph graph = nullptr; // kept: node handles belong to it
    CUgraphExec exec = nullptr;
  };

  // Records a failed call's code for the warning.
  bool ok(CUresult r) {
    if (r != CUDA_SUCCESS) last_ = r;
    return r == CUDA_SUCCESS;
  }

  // A graph of the launches, each node after the previous; null on failure
  // (its code in `error`).
  static CUgraph build(const std::vector<LaunchRecord>& records, const std::vector<void**>& args,
                       std::vector<void*>* nodes, CUresult& error) {
    const GraphApi& a = graph_api();
    CUgraph graph = nullptr;
    if (CUresult r = a.graph_create(&graph, 0); r != CUDA_SUCCESS) {
      error = r;
      return nullptr;
    }
    if (nodes != nullptr) nodes->clear();
    CUgraphNode prev = nullptr;
    for (size_t i = 0; i < records.size(); ++i) {
      CUDA_KERNEL_NODE_PARAMS_v2 p = params(records[i], args[i]);
      CUgraphNode node = nullptr;
      if (CUresult r = a.add_kernel_node(&node, graph, prev != nullptr ? &prev : nullptr,
                                         prev != nullptr ? 1 : 0, &p);
          r != CUDA_SUCCESS) {
        error = r;
        a.graph_destroy(graph);
        return nullptr;
      }
      if (nodes != nullptr) nodes->push_back(node);
      prev = node;
    }
    return graph;
  }

  static CUDA_KERNEL_NODE_PARAMS_v2 params(const LaunchRecord& r, void** args) {
    CUDA_KERNEL_NODE_PARAMS_v2 p{};
    p.func = static_cast<CUfunction>(const_cast<void*>(r.function));
    p.gridDimX = r.grid[0];
    p.gridDimY = r.grid[1];
    p.gridDimZ = r.grid[2];
    p.blockDimX = r.block[0];
    p.blockDimY = r.block[1];
    p.blockDimZ = r.block[2];
    p.sharedMemBytes = r.shared_bytes;
    p.kernelParams = args;
    return p;
  }

  CUstream stream_;
  CUresult last_ = CUDA_SUCCESS;
};

LaunchBatch::Options batch_options() {
  LaunchBatch::Options o;
  if (const char* v = std::getenv("LOOM_CUDA_GRAPH_NODES")) {
    o.max_pending = std::max<size_t>(1, std::strtoull(v, nullptr, 10));
  }
  // LOOM_CUDA_GRAPH_WHOLE_UPDATE=N: replays with N or more changed nodes
  // update the whole graph in one cuGraphExecUpdate (to compare).
  if (const char* v = std::getenv("LOOM_CUDA_GRAPH_WHOLE_UPDATE")) {
    o.whole_update_from = std::strtoull(v, nullptr, 10);
  }
  return o;
}

// Element-wise kernels whose launches may be recorded (register_batchable).
std::unordered_map<std::type_index, bool>& batchable_table() {
  static auto& table = *new std::unordered_map<std::type_index, bool>;
  return table;
}

// Batches with recorded launches or held buffers, over all streams: a
// launch outside a batch checks this before looking its stream up.
std::atomic<int> g_open_batches{0};

// One GPU stream's batch. Its lock orders recording (the thread running the
// stream's task) against flushes from any thread (a signal, a synchronize).
struct StreamBatch {
  StreamBatch(cudaStream_t s, int dev)
      : stream(s), device(dev), driver(s), batch(driver, batch_options()) {}

  // Enqueues what is recorded; the buffers held for it are dropped after the
  // lock is released (their stream-ordered frees come after the launches).
  void flush() {
    if (!open.load(std::memory_order_acquire)) return;
    profile::Timer timer(profile::kFlush);
    std::vector<std::shared_ptr<const void>> released;
    {
      std::lock_guard<std::mutex> lock(mutex);
      flush_locked(released);
    }
    released.clear();
  }

  // Under `mutex`.
  void flush_locked(std::vector<std::shared_ptr<const void>>& released) {
    if (!open.load(std::memory_order_relaxed)) return;
    CudaScope scope;
    if (!scope.open()) {
      batch.discard(); // exiting: nobody reads the results
    } else {
      int dev = current_device();
      if (dev != device) cudaSetDevice(device);
      batch.flush(released);
      const LaunchBatchStats& after = batch.stats();
      const LaunchBatchStats& before = reported;
      if (profile::enabled()) {
        profile::g_batch[0] += static_cast<long long>(after.recorded - before.recorded);
        profile::g_batch[1] += static_cast<long long>(after.direct - before.direct);
        profile::g_batch[2] += static_cast<long long>(after.graphs_built - before.graphs_built);
        profile::g_batch[3] += static_cast<long long>(after.graph_launches - before.graph_launches);
        profile::g_batch[4] += static_cast<long long>(after.graph_nodes - before.graph_nodes);
        profile::g_batch[5] += static_cast<long long>(after.node_updates - before.node_updates);
        profile::g_batch[6] += static_cast<long long>(after.failures - before.failures);
        profile::g_batch[7] += static_cast<long long>(after.whole_updates - before.whole_updates);
      }
      const bool failed = after.failures != before.failures;
      reported = after;
      if (failed) {
        // The driver's code (CUresult) of the call that failed; its
        // launches went out one by one (or failed too, reported by the
        // runtime's error).
        std::cerr << "[loom] warning: a batch of kernel launches failed on the GPU (driver "
                  << "error " << batch.driver_error()
                  << ", runtime: " << cudaGetErrorString(cudaGetLastError()) << ")\n";
      }
      if (dev != device) cudaSetDevice(dev);
    }
    open.store(false, std::memory_order_release);
    g_open_batches.fetch_sub(1, std::memory_order_acq_rel);
  }

  // Under `mutex`: the batch now holds something to flush.
  void mark_open() {
    if (!open.load(std::memory_order_relaxed)) {
      open.store(true, std::memory_order_release);
      g_open_batches.fetch_add(1, std::memory_order_acq_rel);
    }
  }

  cudaStream_t stream;
  int device;
  std::mutex mutex;
  std::atomic<bool> open{false};
  LaunchBatchStats reported; // the counters added to the profile's totals so far
  CudaGraphDriver driver;
  LaunchBatch batch;
};

// The batch this thread records into: set by eval() around a batchable
// kernel of its stream.
thread_local StreamBatch* t_recording = nullptr;
// eval() calls on this thread that have not returned (a fused region runs
// its ops through eval_primitive, nested): only the outermost records.
thread_local int t_eval_depth = 0;
thread_local StreamBatch* t_batch = nullptr; // the batch of t_stream

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
    StreamBatch* batch = t_batch;
    std::type_index type(typeid(p));
    auto it = kernel_table().find(type);
    struct Depth {
      Depth() { ++t_eval_depth; }
      ~Depth() { --t_eval_depth; }
    } depth;
    if (it != kernel_table().end()) {
      bool record = batch != nullptr && t_eval_depth == 1 && graph_api().ok && is_batchable(type) &&
                    small_outputs(outputs);
      // Anything else this kernel enqueues comes after the recorded launches.
      if (!record && batch != nullptr) batch->flush();
      bool ran;
      if (record) {
        ran = run_recording(*batch, it->second, p, inputs, outputs, s);
      } else {
        ran = it->second(p, inputs, outputs, s);
      }
      if (ran) {
        check(cudaGetLastError(), p.name());
        return;
      }
    }
    ViewKind view = view_kind(type, p);
    if (view != ViewKind::none) {
      // Mostly re-describes an input's buffer. A Reshape or Flatten whose
      // input cannot be viewed copies it on the CPU instead, which downloads
      // the input; that waits only for work already queued on the device,
      // never for another task's signal, so it cannot deadlock and no
      // held-back signal needs sending first. Recorded launches are queued
      // before such a download (it reads what they write).
      if (view == ViewKind::may_copy && batch != nullptr) batch->flush();
      p.eval_cpu(inputs, outputs);
      return;
    }
    if (batch != nullptr) batch->flush();
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
    // The event must follow the recorded launches the signal covers.
    if (t_batch != nullptr) t_batch->flush();
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
    std::shared_ptr<StreamBatch> batch; // held: the stream may be destroyed meanwhile
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = streams_.find(stream.index);
      if (it == streams_.end()) return false;
      s = it->second;
      auto b = batches_.find(s);
      if (b != batches_.end()) batch = b->second;
    }
    if (batch != nullptr) batch->flush();
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
    batches_[s] = std::make_shared<StreamBatch>(s, stream.device.index);
    completers_[stream.index] = new Completer();
    update_sole_stream();
  }

  void stream_destroyed(const Stream& stream) override {
    cudaStream_t s = nullptr;
    Completer* completer = nullptr;
    std::shared_ptr<StreamBatch> batch;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = streams_.find(stream.index);
      if (it == streams_.end()) return;
      s = it->second;
      streams_.erase(it);
      auto b = batches_.find(s);
      if (b != batches_.end()) {
        batch = b->second;
        batches_.erase(b);
      }
      auto c = completers_.find(stream.index);
      if (c != completers_.end()) {
        completer = c->second;
        completers_.erase(c);
      }
      update_sole_stream();
    }
    if (batch != nullptr) {
      batch->flush(); // the worker has drained: nothing records into it any more
      batch.reset();  // its graphs go with it (or with a flusher that still holds it)
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
    auto b = batches_.find(t_stream);
    t_batch = b != batches_.end() ? b->second.get() : nullptr;
    return t_stream;
  }

 public:
  // The batch of CUDA stream `s`, or null; held, so that a stream destroyed
  // meanwhile on another thread leaves it alive until the caller's flush is
  // done. (Not through t_batch: a thread may still point at the batch of a
  // stream destroyed since.)
  std::shared_ptr<StreamBatch> batch_of(cudaStream_t s) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto b = batches_.find(s);
    return b != batches_.end() ? b->second : nullptr;
  }

 private:
  // Outputs small enough for their launch to matter more than the kernel;
  // the batch also holds them until it is flushed.
  static bool small_outputs(const std::vector<array>& outputs) {
    size_t bytes = 0;
    for (auto& o : outputs) bytes += o.nbytes();
    return bytes <= (size_t(1) << 20);
  }

  static bool is_batchable(std::type_index type) {
    auto& table = batchable_table();
    auto it = table.find(type);
    return it != table.end() && it->second;
  }

  // Runs a batchable kernel with its launches recorded; the inputs' and
  // outputs' buffers stay held until the batch is flushed.
  static bool run_recording(StreamBatch& batch, Kernel kernel, Primitive& p,
                            const std::vector<array>& inputs, std::vector<array>& outputs,
                            cudaStream_t s) {
    t_recording = &batch;
    bool ran;
    try {
      ran = kernel(p, inputs, outputs, s);
    } catch (...) {
      t_recording = nullptr;
      batch.flush(); // launches already recorded go out while their buffers live
      throw;
    }
    t_recording = nullptr;
    if (!ran) return false;
    bool full = false;
    {
      std::lock_guard<std::mutex> lock(batch.mutex);
      if (batch.open.load(std::memory_order_relaxed)) {
        for (auto& in : inputs) batch.batch.keep_alive(in.data_shared_ptr());
        for (auto& out : outputs) batch.batch.keep_alive(out.data_shared_ptr());
        full = batch.batch.pending() >= batch_options_cached().max_pending;
      }
    }
    if (full) batch.flush();
    return true;
  }

  static const LaunchBatch::Options& batch_options_cached() {
    static const LaunchBatch::Options o = batch_options();
    return o;
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
  enum class ViewKind { none, view, may_copy };
  static ViewKind view_kind(std::type_index type, Primitive& p) {
    thread_local std::unordered_map<std::type_index, ViewKind> views;
    auto it = views.find(type);
    if (it != views.end()) return it->second;
    std::string name = p.name();
    ViewKind kind = !is_view_primitive(name)                 ? ViewKind::none
                    : name == "Reshape" || name == "Flatten" ? ViewKind::may_copy
                                                             : ViewKind::view;
    return views.emplace(type, kind).first->second;
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
  std::unordered_map<cudaStream_t, std::shared_ptr<StreamBatch>> batches_;
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

void register_batchable(std::type_index primitive) { batchable_table()[primitive] = true; }

bool record_launch(const void* function, dim3 grid, dim3 block, unsigned shared_bytes,
                   cudaStream_t stream, void** args) {
  StreamBatch* b = t_recording;
  if (b != nullptr && b->stream == stream) {
    if (const ParamLayout* layout =
            param_layout(static_cast<CUfunction>(const_cast<void*>(function)))) {
      const unsigned g[3] = {grid.x, grid.y, grid.z};
      const unsigned k[3] = {block.x, block.y, block.z};
      std::lock_guard<std::mutex> lock(b->mutex);
      b->batch.record(function, g, k, shared_bytes, *layout, args);
      b->mark_open();
      return true;
    }
  }
  flush_launches(stream);
  return false;
}

void flush_launches(cudaStream_t stream) {
  if (g_open_batches.load(std::memory_order_acquire) == 0 || g_backend == nullptr) return;
  if (std::shared_ptr<StreamBatch> b = g_backend->batch_of(stream)) b->flush();
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
