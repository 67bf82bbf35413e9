// Batched launches of tiny kernels, replayed as CUDA graphs.
//
// A launch costs ~4 us of host time on the device machine's VM (the driver's
// cuLaunchKernel), more than a tiny element-wise kernel runs. While one eval
// launches many such kernels on a stream, the backend records them here
// instead (function, launch shape, a copy of the argument bytes), and a
// flush enqueues them in their order: a few directly, a longer run as one CUDA
// graph (a chain of kernel nodes) instantiated the second time the same
// sequence of (function, grid, block, shared memory, argument size) is seen and
// replayed afterwards with only the nodes whose argument bytes changed updated.
//
// This file holds the device-independent part (what to launch how, the graph
// cache) behind `GraphDriver`, so that it is tested without a GPU; the CUDA
// driver calls live in backend.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

namespace loom::cuda {

// Where each kernel argument lies in the packed argument bytes.
struct ParamSlot {
  uint32_t offset;
  uint32_t size;
};
using ParamLayout = std::vector<ParamSlot>;

// One recorded launch. `params` points at the argument bytes, packed at the
// layout's offsets (valid during the driver call only).
struct LaunchRecord {
  const void* function; // the driver's CUfunction
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  const ParamLayout* layout; // stable storage, owned by the caller
  uint32_t params_begin;     // into the batch's argument bytes
  uint32_t params_size;
};

// What a batch needs from the device. `args` is the kernel's argument list
// (one pointer per argument, as cuLaunchKernel takes it). Every call returns
// false on failure; nothing throws.
class GraphDriver {
 public:
  virtual ~GraphDriver() = default;
  virtual bool launch(const LaunchRecord& r, void** args) = 0;
  // A graph running the launches in order (each node after the previous);
  // fills `nodes` with one handle per launch. Null on failure.
  virtual void* instantiate(const std::vector<LaunchRecord>& records,
                            const std::vector<void**>& args, std::vector<void*>& nodes) = 0;
  // Sets node `node`'s arguments for the next launches of `exec`.
  virtual bool update(void* exec, void* node, const LaunchRecord& r, void** args) = 0;
  // Sets every node's arguments at once (a graph of the same launches with
  // these arguments, applied to `exec`); false when not done.
  virtual bool update_all(void* exec, const std::vector<LaunchRecord>& records,
                          const std::vector<void**>& args) {
    return false;
  }
  virtual bool launch_graph(void* exec) = 0;
  virtual void destroy(void* exec) = 0;
  // The error code of the last call that failed (0: none), for the warning.
  virtual int last_error() const { return 0; }
};

struct LaunchBatchStats {
  size_t recorded = 0;       // launches recorded
  size_t direct = 0;         // launched one by one at a flush
  size_t graphs_built = 0;   // graphs instantiated
  size_t graph_launches = 0; // cached graphs launched
  size_t graph_nodes = 0;    // launches that went out inside a graph
  size_t node_updates = 0;   // nodes whose arguments were updated before a replay
  size_t whole_updates = 0;  // replays whose graph was updated at once (update_all)
  size_t failures = 0;       // driver calls that failed (the launches then went direct)
  size_t given_up = 0;       // flushes sent direct because their graph failed to build before
};

// Not thread-safe: the backend holds its stream's lock around every call.
class LaunchBatch {
 public:
  struct Options {
    size_t max_pending = 64;     // a record reaching this flushes (the device starts meanwhile)
    size_t min_graph = 4;        // shorter runs launch directly
    size_t max_graphs = 32;      // cached graphs (the least recently replayed goes first; 0: none)
    size_t max_sightings = 4096; // remembered signatures seen once
    // Replays with at least this many changed nodes update the graph at once
    // (update_all) rather than node by node; 0 never does.
    size_t whole_update_from = 0;
  };

  LaunchBatch(GraphDriver& driver, Options options);
  ~LaunchBatch(); // destroys the cached graphs through the driver
  LaunchBatch(const LaunchBatch&) = delete;
  LaunchBatch& operator=(const LaunchBatch&) = delete;

  // Records a launch; `args` as cuLaunchKernel takes them, read now (the
  // values are copied). Returns true when the batch is full and should be
  // flushed.
  bool record(const void* function, const unsigned grid[3], const unsigned block[3],
              unsigned shared_bytes, const ParamLayout& layout, void** args);
  // Holds `owner` until the recorded launches are enqueued: the buffers they
  // read and write must not be freed (stream-ordered) before them.
  void keep_alive(std::shared_ptr<const void> owner);
  size_t pending() const { return records_.size(); }

  // Enqueues the recorded launches in order. The held owners are appended
  // to `released`: the caller drops them after unlocking (their frees are
  // then ordered after the launches). A graph that fails to instantiate or
  // launch is not tried again for that sequence (it goes out launch by
  // launch from then on).
  void flush(std::vector<std::shared_ptr<const void>>& released);
  // Drops the recorded launches without running them (the process is exiting).
  void discard();

  const LaunchBatchStats& stats() const { return stats_; }
  int driver_error() const { return driver_.last_error(); }

 private:
  struct Signature {
    const void* function;
    unsigned grid[3];
    unsigned block[3];
    unsigned shared_bytes;
    uint32_t params_size;
    bool operator==(const Signature& o) const;
  };
  struct CachedGraph {
    uint64_t key = 0;
    std::vector<Signature> signature;
    void* exec = nullptr;
    std::vector<void*> nodes;
    std::vector<unsigned char> last_params; // the arguments the graph holds now
    std::vector<uint32_t> last_begin;
  };

  void launch_directly(const std::vector<void**>& args);
  std::vector<void**> build_args();
  CachedGraph* find(uint64_t key);
  void insert(uint64_t key, CachedGraph graph);
  void erase(uint64_t key);
  void release_to(std::vector<std::shared_ptr<const void>>& released);
  void remember_failure(uint64_t key);

  GraphDriver& driver_;
  Options options_;
  std::vector<LaunchRecord> records_;
  std::vector<Signature> signature_;
  uint64_t key_ = 0;
  std::vector<unsigned char> params_;
  std::vector<std::vector<void*>> arg_lists_; // reused between flushes
  std::vector<size_t> changed_;               // nodes to update, reused
  std::vector<std::shared_ptr<const void>> keep_;
  std::unordered_map<uint64_t, std::list<CachedGraph>::iterator> index_;
  std::list<CachedGraph> graphs_; // least recently replayed first
  std::unordered_map<uint64_t, uint32_t> sightings_;
  std::unordered_map<uint64_t, uint32_t> failed_; // sequences whose graph failed (bounded)
  LaunchBatchStats stats_;
};

} // namespace loom::cuda
