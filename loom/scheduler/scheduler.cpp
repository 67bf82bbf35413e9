#include "loom/scheduler/scheduler.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>

#include "loom/allocator/allocator.h"
#include "loom/allocator/memory.h"
#include "loom/primitives/primitive.h"

namespace loom {
namespace scheduler {

StreamWorker::StreamWorker(Stream stream)
    : stream_(stream),
      backend_(backend(stream.device.type)),
      timeline_(std::make_shared<Timeline>()) {
  if (backend_ != nullptr) backend_->stream_created(stream_);
  thread_ = std::thread([this] { loop(); });
}

StreamWorker::~StreamWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (inline_deferred_ != 0) complete(inline_deferred_);
    inline_deferred_ = 0;
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
  if (backend_ != nullptr) backend_->stream_destroyed(stream_);
}

void StreamWorker::complete(uint64_t seq) {
  if (backend_ != nullptr) {
    backend_->signal_when_done(stream_, timeline_, seq);
  } else {
    timeline_->signal(seq);
  }
}

Event StreamWorker::submit(std::function<void()> task) {
  uint64_t seq;
  bool was_empty;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    was_empty = queue_.empty();
    seq = ++submitted_;
    queue_.push_back({seq, std::move(task)});
  }
  if (was_empty) cv_.notify_one();
  return Event{timeline_, seq};
}

void StreamWorker::synchronize() {
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (inline_deferred_ != 0) {
      complete(inline_deferred_);
      inline_deferred_ = 0;
    }
    target = submitted_;
  }
  timeline_->wait(target);
}

namespace {

// Workers holding back the signal of a task this thread ran inline. Their
// eval_impl keeps them alive and sends the signals before it returns.
thread_local std::vector<StreamWorker*> t_inline_held;

bool signal_each_task() {
  static const bool each = [] {
    const char* v = std::getenv("LOOM_SIGNAL_EACH_TASK");
    return v != nullptr && std::string(v) == "1";
  }();
  return each;
}

// LOOM_EVAL_WAIT_WORKER=1: eval waits for the completion thread's signal
// even when it could wait for the device itself (to compare).
bool wait_on_caller() {
  static const bool on = [] {
    const char* v = std::getenv("LOOM_EVAL_WAIT_WORKER");
    return v == nullptr || std::string(v) != "1";
  }();
  return on;
}

void flush_inline_held() {
  if (t_inline_held.empty()) return;
  auto held = std::move(t_inline_held);
  t_inline_held.clear();
  for (StreamWorker* w : held) w->flush_inline();
}

} // namespace

void StreamWorker::flush_inline() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (inline_deferred_ != 0) {
    complete(inline_deferred_);
    inline_deferred_ = 0;
  }
}

void StreamWorker::finish_on_caller(bool wait) {
  uint64_t target = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (backend_ == nullptr) return;
    const uint64_t done = timeline_->completed.load(std::memory_order_acquire);
    if (inline_deferred_ != 0 && done >= inline_deferred_) inline_deferred_ = 0; // covered
    if (done >= submitted_) return;
    bool launched = queue_.empty() && !busy_ && !inline_active_;
    if (!(wait && launched && wait_on_caller())) {
      if (inline_deferred_ != 0) {
        complete(inline_deferred_);
        inline_deferred_ = 0;
      }
      return;
    }
    target = submitted_;
  }
  // Every task up to `target` has enqueued its device work: once the device
  // has drained the stream, they are all complete.
  if (backend_->synchronize(stream_)) {
    timeline_->signal(target);
    std::lock_guard<std::mutex> lock(mutex_);
    if (inline_deferred_ <= target) inline_deferred_ = 0;
    return;
  }
  flush_inline();
}

bool StreamWorker::try_run_inline(std::function<void()>& task, Event& done) {
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (inline_active_) return false;
    if (backend_ != nullptr ? (busy_ || !queue_.empty())
                            : timeline_->completed.load(std::memory_order_acquire) != submitted_) {
      return false;
    }
    seq = ++submitted_;
    inline_active_ = true;
  }
  task();
  task = nullptr;
  bool queued_meanwhile;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    inline_active_ = false;
    if (backend_ != nullptr && !signal_each_task()) {
      // Held back: the next inline task's signal, or the worker's, covers
      // it (completion is monotonic); the evaluating thread sends the last.
      // Listed on this thread even when another thread's inline task is
      // held here too, so this thread's flush before it blocks sends it.
      if (t_inline_held.empty() || t_inline_held.back() != this) t_inline_held.push_back(this);
      inline_deferred_ = seq;
    } else {
      // Under the lock: the worker's next signal is queued after this one.
      complete(seq);
    }
    queued_meanwhile = !queue_.empty();
  }
  // Work queued by another thread meanwhile waited for this task. Waking the
  // idle worker when nothing is queued cost a futex wake and two context
  // switches per inline node (a third of the time of small-op loops).
  if (queued_meanwhile) cv_.notify_one();
  done = Event{timeline_, seq};
  return true;
}

namespace {
thread_local StreamWorker* t_worker = nullptr;
} // namespace

void StreamWorker::flush_deferred() {
  if (deferred_ != 0) {
    complete(deferred_);
    deferred_ = 0;
  }
}

void flush_stream_signals() {
  if (t_worker != nullptr) t_worker->flush_deferred();
  flush_inline_held();
}

void StreamWorker::loop() {
  t_worker = this;
  for (;;) {
    QueuedTask item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || (!queue_.empty() && !inline_active_); });
      if (queue_.empty()) return; // stopping and drained
      item = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    item.task();
    // Release what the task held (its node, and through it the inputs)
    // before signalling, so a waiter sees the memory already returned.
    item.task = nullptr;
    if (backend_ != nullptr && !signal_each_task()) {
      bool more;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        more = !queue_.empty();
      }
      if (more) {
        deferred_ = item.seq; // the next task's signal covers this one
        continue;
      }
      deferred_ = 0;
    }
    complete(item.seq);
    std::lock_guard<std::mutex> lock(mutex_);
    busy_ = false;
  }
}

namespace {

std::string describe_failure(const Node& node, const std::exception& e) {
  std::ostringstream msg;
  msg << e.what() << "\n  while evaluating " << node.primitive->describe() << " on inputs ";
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    msg << shape_to_string(node.inputs[i].shape()) << " " << node.inputs[i].dtype();
    if (i + 1 < node.inputs.size()) msg << ", ";
  }
  if (!node.origin.empty()) msg << "\n  built at " << node.origin;
  return msg.str();
}

// LOOM_PROFILE_NODES=1: wall time of every CPU kernel, summed per primitive
// (its description and output shape) and printed to stderr at exit, to find
// where a graph's time goes (e.g. a compiled graph against the eager one).
struct NodeProfile {
  struct Total {
    double wall_ms = 0;
    double cpu_ms = 0; // of the evaluating thread (all of it with LOOM_NUM_THREADS=1)
    size_t calls = 0;
  };
  std::mutex mutex;
  std::map<std::string, Total> totals;
};

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

NodeProfile* node_profile() {
  static NodeProfile* p = [] {
    const char* v = std::getenv("LOOM_PROFILE_NODES");
    if (v == nullptr || std::string(v) != "1") return static_cast<NodeProfile*>(nullptr);
    auto* prof = new NodeProfile; // leaked: kernels may run during exit
    std::atexit([] {
      NodeProfile& np = *node_profile();
      std::lock_guard<std::mutex> lock(np.mutex);
      std::vector<std::tuple<double, double, std::string>> rows;
      double wall = 0, cpu = 0;
      for (auto& [key, t] : np.totals) {
        rows.emplace_back(t.cpu_ms, t.wall_ms, key + " x" + std::to_string(t.calls));
        wall += t.wall_ms;
        cpu += t.cpu_ms;
      }
      std::sort(rows.rbegin(), rows.rend());
      std::fprintf(stderr, "[profile] CPU kernels: %.1f ms wall, %.1f ms thread CPU\n", wall, cpu);
      for (auto& [c, w, key] : rows) {
        std::fprintf(stderr, "[profile] %9.2f cpu %9.2f wall  %s\n", c, w, key.c_str());
      }
    });
    return prof;
  }();
  return p;
}

void eval_cpu_profiled(Primitive& prim, const std::vector<array>& inputs,
                       std::vector<array>& outputs, NodeProfile& prof) {
  auto t0 = std::chrono::steady_clock::now();
  double c0 = thread_cpu_ms();
  prim.eval_cpu(inputs, outputs);
  double cpu = thread_cpu_ms() - c0;
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::string key = prim.describe();
  if (key.size() > 90) key = key.substr(0, 87) + "...";
  if (!outputs.empty()) key += " -> " + shape_to_string(outputs[0].shape());
  std::lock_guard<std::mutex> lock(prof.mutex);
  auto& t = prof.totals[key];
  t.wall_ms += ms;
  t.cpu_ms += cpu;
  ++t.calls;
}

// Runs one node's kernel on the worker of its stream.
void run_node(const std::shared_ptr<Node>& node, std::vector<array>& outputs,
              const std::vector<Event>& waits) {
  if (!waits.empty()) flush_stream_signals();
  for (auto& e : waits) e.wait();
  for (auto& in : node->inputs) {
    if (in.desc()->error) {
      for (auto& o : outputs) o.desc()->error = in.desc()->error;
      return;
    }
  }
  try {
    auto& prim = *node->primitive;
    if (prim.device().type == Device::cpu) {
      if (auto* prof = node_profile()) {
        eval_cpu_profiled(prim, node->inputs, outputs, *prof);
      } else {
        prim.eval_cpu(node->inputs, outputs);
      }
    } else if (auto* b = backend(prim.device().type)) {
      b->eval(prim, node->inputs, outputs);
    } else {
      prim.eval_gpu(node->inputs, outputs);
    }
  } catch (const std::exception& e) {
    std::exception_ptr err;
    std::string msg = describe_failure(*node, e);
    if (dynamic_cast<const std::invalid_argument*>(&e)) {
      err = std::make_exception_ptr(std::invalid_argument(msg));
    } else {
      err = std::make_exception_ptr(std::runtime_error(msg));
    }
    for (auto& o : outputs) o.desc()->error = err;
  }
}

struct PendingNode {
  std::shared_ptr<Node> node;
  int missing = 0;        // producers not yet scheduled
  int first_consumer = 0; // into PendingGraph::consumers
  int num_consumers = 0;
};

// The claimed nodes and their consumer lists, flat: a chain of tiny ops
// costs no allocation per node here.
struct PendingGraph {
  std::vector<PendingNode> nodes;
  std::vector<int> consumers;
};

// Several threads may evaluate one graph (readers of a shared lazy array,
// async_eval racing item()). Each unscheduled node is claimed by exactly one
// of them: collection and claiming happen together under this mutex, and a
// thread that meets a node claimed by another waits for its status to move
// past `claimed` before it reads the node's event. A thread only ever waits on
// claims made before its own, so no cycle of waits can form.
std::mutex& claim_mutex() {
  // Leaked: threads may evaluate during exit. Held across fork() so that the
  // child inherits it unlocked.
  static auto* m = [] {
    // The pool's fork handler is registered first, so that its mutex is
    // taken after this one (the order in which an evaluation nests them).
    allocator::host_allocator();
    pthread_atfork([] { claim_mutex().lock(); }, [] { claim_mutex().unlock(); },
                   [] { claim_mutex().unlock(); });
    return new std::mutex();
  }();
  return *m;
}

void set_node_status(const Node& node, Status s) {
  for (auto& w : node.outputs) {
    if (auto d = w.lock()) array(std::move(d)).publish_status(s);
  }
}

// Node -> position among the collected nodes: open addressing over one
// vector (a std::unordered_map cost an allocation per node).
class NodeIndex {
 public:
  NodeIndex() : slots_(16) {}
  int find(const Node* n) const {
    for (size_t i = hash(n);; i = (i + 1) & mask()) {
      if (slots_[i].node == n) return slots_[i].index;
      if (slots_[i].node == nullptr) return -1;
    }
  }
  void insert(const Node* n, int index) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    place(n, index);
    ++size_;
  }

 private:
  struct Slot {
    const Node* node = nullptr;
    int index = -1;
  };
  size_t mask() const { return slots_.size() - 1; }
  size_t hash(const Node* n) const {
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(n) >> 4) * 0x9E3779B97F4A7C15ull >>
                               17) &
           mask();
  }
  void place(const Node* n, int index) {
    size_t i = hash(n);
    while (slots_[i].node != nullptr) i = (i + 1) & mask();
    slots_[i] = Slot{n, index};
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (auto& s : old) {
      if (s.node != nullptr) place(s.node, s.index);
    }
  }
  std::vector<Slot> slots_; // a power of two, at most half full
  size_t size_ = 0;
};

// Depth-first walk of the unscheduled graph behind `outputs`, numbering each
// node it meets in `index`.
void collect_nodes(const std::vector<array>& outputs, std::vector<PendingNode>& nodes,
                   NodeIndex& index) {
  auto collected = [&](const array& a) { return a.has_node() && index.find(a.node().get()) >= 0; };
  std::vector<const array*> stack;
  stack.reserve(outputs.size());
  for (auto& o : outputs) stack.push_back(&o);
  while (!stack.empty()) {
    const array* a = stack.back();
    stack.pop_back();
    if (a->status() != Status::unscheduled) continue;
    if (!a->has_node()) {
      throw std::runtime_error("[eval] Array of shape " + shape_to_string(a->shape()) +
                               " has neither data nor a graph to compute it.");
    }
    const Node* n = a->node().get();
    if (index.find(n) >= 0) continue;
    index.insert(n, static_cast<int>(nodes.size()));
    nodes.push_back(PendingNode{a->node()});
    for (auto& in : n->inputs) {
      if (in.status() == Status::unscheduled && !collected(in)) stack.push_back(&in);
    }
  }
}

// Each node's distinct producers, then the consumer lists by counting.
void link_consumers(PendingGraph& graph, const NodeIndex& index) {
  auto& nodes = graph.nodes;
  const int count = static_cast<int>(nodes.size());
  std::vector<int> producers;
  std::vector<int> first_producer(count + 1, 0);
  for (int i = 0; i < count; ++i) {
    const size_t start = producers.size();
    for (auto& in : nodes[i].node->inputs) {
      if (in.status() == Status::unscheduled) producers.push_back(index.find(in.node().get()));
    }
    std::sort(producers.begin() + start, producers.end());
    producers.erase(std::unique(producers.begin() + start, producers.end()), producers.end());
    nodes[i].missing = static_cast<int>(producers.size() - start);
    first_producer[i + 1] = static_cast<int>(producers.size());
    for (size_t k = start; k < producers.size(); ++k) ++nodes[producers[k]].num_consumers;
  }
  int offset = 0;
  for (auto& p : nodes) {
    p.first_consumer = offset;
    offset += p.num_consumers;
    p.num_consumers = 0;
  }
  graph.consumers.resize(offset);
  for (int i = 0; i < count; ++i) { // consumers in ascending order, as scheduled
    for (int k = first_producer[i]; k < first_producer[i + 1]; ++k) {
      PendingNode& p = nodes[producers[k]];
      graph.consumers[p.first_consumer + p.num_consumers++] = i;
    }
  }
}

// Collects the unscheduled nodes behind `outputs` and their dependencies, and
// claims them. Must run under claim_mutex(): only there is the node of an
// unscheduled array stable (its claimer detaches it later).
PendingGraph collect_and_claim(const std::vector<array>& outputs) {
  PendingGraph graph;
  NodeIndex index;
  collect_nodes(outputs, graph.nodes, index);
  link_consumers(graph, index);
  for (auto& p : graph.nodes) set_node_status(*p.node, Status::claimed);
  return graph;
}

// Blocks until an input claimed by another thread has its event. If that
// thread gave its claim up (its scheduling failed), this one schedules it.
void await_foreign_claim(const array& in) {
  if (in.status() != Status::claimed) return;
  // The other thread may be waiting for a signal this one holds back.
  flush_inline_held();
  if (in.wait_while(Status::claimed) == Status::unscheduled) {
    async_eval({in});
    await_foreign_claim(in);
  }
}

// Outputs at most this large run on the evaluating thread when their stream
// is idle: a hand-off to the worker costs more than such a kernel.
constexpr size_t kInlineBytes = 1 << 16;

// On a device stream a task only enqueues device work, whatever its size:
// launching it on the evaluating thread saves the worker's wake-up (tens of
// us) for large kernels too. LOOM_GPU_INLINE_MAX_BYTES sets a limit (to
// compare with the CPU's rule).
size_t device_inline_bytes() {
  static const size_t limit = [] {
    const char* v = std::getenv("LOOM_GPU_INLINE_MAX_BYTES");
    return v != nullptr ? static_cast<size_t>(std::strtoull(v, nullptr, 10)) : SIZE_MAX;
  }();
  return limit;
}

void schedule(PendingNode& pending, StreamWorker& worker, bool may_run_inline) {
  auto& node = pending.node;
  std::vector<array> outputs;
  outputs.reserve(node->outputs.size());
  for (size_t i = 0; i < node->outputs.size(); ++i) {
    if (auto d = node->outputs[i].lock()) {
      outputs.emplace_back(std::move(d));
    } else {
      outputs.push_back(array::empty(node->output_shapes.at(i), node->output_dtypes.at(i)));
    }
  }
  std::vector<Event> waits;
  for (auto& in : node->inputs) {
    await_foreign_claim(in);
    // Work of this same stream is ordered by its queue (and, on a GPU, by the
    // device queue): only other streams' events need waiting for. Waiting on
    // our own would make a GPU stream wait for each kernel before launching
    // the next.
    if (in.status() == Status::scheduled && in.event().timeline &&
        in.event().timeline != worker.timeline() && !in.event().is_signaled()) {
      waits.push_back(in.event());
    }
  }
  size_t bytes = 0;
  for (auto& o : outputs) bytes += o.nbytes();
  Event done;
  const size_t inline_limit = worker.on_device() ? device_inline_bytes() : kInlineBytes;
  auto run_here = [&] { run_node(node, outputs, waits); };
  // Holds a pointer only, so std::function keeps it without an allocation
  // (the copying lambda below, for the queue, costs one).
  std::function<void()> inline_task = [run = &run_here] { (*run)(); };
  if (!(may_run_inline && waits.empty() && bytes <= inline_limit &&
        worker.try_run_inline(inline_task, done))) {
    // A task that waits on another stream may wait on a signal this thread
    // holds back: send those now, or that stream's worker idles until the
    // whole graph is scheduled.
    if (!waits.empty()) flush_inline_held();
    done = worker.submit([node, outputs, waits]() mutable { run_node(node, outputs, waits); });
  }
  // The event and the detached node are written before the status moves on,
  // so a thread that sees `scheduled` reads both safely.
  for (auto& o : outputs) {
    o.event() = done;
    // Detach now: the task holds the node until its kernel has run, then
    // lets go of the inputs. Tracers keep their graph for the transform.
    if (!o.is_tracer()) o.detach();
    o.publish_status(Status::scheduled);
  }
}

void eval_impl(std::vector<array> outputs, bool wait) {
  PendingGraph graph;
  {
    std::lock_guard<std::mutex> lock(claim_mutex());
    graph = collect_and_claim(outputs);
  }
  auto& nodes = graph.nodes;
  if (!nodes.empty()) {
    std::deque<int> ready;
    for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
      if (nodes[i].missing == 0) ready.push_back(i);
    }
    const size_t width = static_cast<size_t>(bfs_max_width());
    const size_t limit = get_memory_limit();
    std::vector<std::shared_ptr<StreamWorker>> used;
    try {
      while (!ready.empty()) {
        // Breadth-first while the frontier is narrow, depth-first beyond it,
        // so wide graphs do not keep every branch's buffers alive at once.
        int i;
        if (ready.size() <= width) {
          i = ready.front();
          ready.pop_front();
        } else {
          i = ready.back();
          ready.pop_back();
        }
        if (get_active_memory() > limit) {
          // Over the limit: let in-flight work finish and free its buffers.
          flush_inline_held();
          for (auto& w : used) w->synchronize();
        }
        // The workers met so far serve their streams again without a
        // registry lookup (a mutex and a map search per node).
        const Stream& stream = nodes[i].node->primitive->stream();
        StreamWorker* w = nullptr;
        for (auto& u : used) {
          if (u->stream() == stream) w = u.get();
        }
        if (w == nullptr) {
          used.push_back(worker_for(stream));
          w = used.back().get();
        }
        schedule(nodes[i], *w, wait);
        const int* c = graph.consumers.data() + nodes[i].first_consumer;
        for (int k = 0; k < nodes[i].num_consumers; ++k) {
          if (--nodes[c[k]].missing == 0) ready.push_back(c[k]);
        }
        nodes[i].node.reset();
      }
    } catch (...) {
      flush_inline_held();
      // Give up the claims not scheduled, so that no other thread waits on
      // them forever.
      for (auto& p : nodes) {
        if (p.node) set_node_status(*p.node, Status::unscheduled);
      }
      throw;
    }
    // Device streams whose work is all launched: an eval waits for the
    // device here rather than for a completion thread's wake-up; otherwise
    // the held-back signals of inline tasks go out now.
    for (auto& w : used) w->finish_on_caller(wait);
    flush_inline_held();
  }
  if (!wait) return;
  std::exception_ptr first_error;
  for (auto& o : outputs) {
    try {
      o.wait();
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

} // namespace
} // namespace scheduler

void eval(std::vector<array> outputs) { scheduler::eval_impl(std::move(outputs), true); }

void async_eval(std::vector<array> outputs) { scheduler::eval_impl(std::move(outputs), false); }

} // namespace loom
