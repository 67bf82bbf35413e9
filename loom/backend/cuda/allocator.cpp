// Device memory: one stream-ordered pool per GPU (cudaMallocAsync on the
// device's default pool, which keeps freed blocks for reuse). Statistics and
// limits are Loom's own, so over the limit or out of device memory a request
// fails with a clear error naming the pool, and the process goes on.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "loom/backend/cpu/thread_pool.h"
#include "loom/backend/cuda/cuda.h"

namespace loom::cuda {

namespace {

std::string format_bytes(size_t n) {
  std::ostringstream os;
  if (n >= (size_t(1) << 30)) {
    os << static_cast<double>(n) / (1 << 30) << " GiB";
  } else if (n >= (size_t(1) << 20)) {
    os << static_cast<double>(n) / (1 << 20) << " MiB";
  } else {
    os << n << " bytes";
  }
  return os.str();
}

// Sizes round to 256 bytes (the pool's own granularity is coarser; this
// keeps the statistics honest about what arrays hold).
size_t round_up(size_t n) { return std::max<size_t>(256, (n + 255) / 256 * 256); }

class DevicePool final : public allocator::Allocator {
 public:
  explicit DevicePool(int index) : index_(index) {
    check(cudaSetDevice(index), "cudaSetDevice");
    check(cudaDeviceGetDefaultMemPool(&pool_, index), "cudaDeviceGetDefaultMemPool");
    // Keep freed memory in the pool instead of returning it at every
    // synchronisation: clear_cache() and the cache limit release it.
    uint64_t keep = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep),
          "cudaMemPoolSetAttribute");
    size_t free_b = 0, total_b = 0;
    check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    total_ = total_b;
    memory_limit_ = total_b;
    cache_limit_ = total_b;
  }

  allocator::Buffer malloc(size_t size) override {
    size_t bytes = round_up(size);
    CudaScope scope;
    scope.require("malloc");
    cudaStream_t s = current_stream();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (active_ + bytes > memory_limit_) throw oom(bytes, "over the memory limit");
      if (void* p = take_small(bytes, s)) {
        active_ += bytes;
        peak_ = std::max(peak_, active_);
        return allocator::Buffer{p, bytes};
      }
    }
    void* p = nullptr;
    cudaError_t e = cudaMallocFromPoolAsync(&p, bytes, pool_, s);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError(); // clear the sticky-free error state of the runtime
      flush_small();
      // Blocks freed on other streams become reusable once those finish.
      cudaStreamSynchronize(cudaStreamLegacy);
      cudaMemPoolTrimTo(pool_, 0);
      e = cudaMallocFromPoolAsync(&p, bytes, pool_, s);
      if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        throw oom(bytes, "the device has no free memory left");
      }
    }
    check(e, "cudaMallocAsync");
    std::lock_guard<std::mutex> lock(mutex_);
    active_ += bytes;
    peak_ = std::max(peak_, active_);
    if (slack_ > 0) shrink_slack_locked(); // the block may sit in the slack
    return allocator::Buffer{p, bytes};
  }

  // With one GPU stream, frees are ordered on it. With several, on the
  // legacy stream, which waits for all earlier work on every (blocking)
  // stream: a buffer read by a kernel still running on another stream is not
  // reused under it. (That wait costs each free a barrier across streams.)
  void free(allocator::Buffer b) override {
    if (b.ptr == nullptr) return;
    CudaScope scope;
    if (!scope.open()) return; // exiting: the memory goes with the process
    cudaStream_t s = sole_stream();
    size_t active, limit;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      active_ -= b.size;
      if (active_ == 0) slack_ = 0; // no chunk is partly held any more
      if (keep_small(b, s)) return;
      active = active_;
      limit = cache_limit_;
    }
    if (s == nullptr) s = cudaStreamLegacy;
    cudaFreeAsync(b.ptr, s);
    // Under a cache limit the user set, give back what the pool keeps above
    // it now: the release threshold alone acts only at a later
    // synchronisation, so get_cache_memory() read over the limit (the pool
    // grows in 32 MiB chunks) until some other call synchronised.
    if (limit < total_) {
      uint64_t reserved = 0;
      cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved);
      if (reserved > active + limit) {
        cudaStreamSynchronize(s);
        cudaMemPoolTrimTo(pool_, active + limit);
      }
    }
  }

  allocator::MemoryStats stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    allocator::MemoryStats st;
    st.active = active_;
    st.peak = peak_;
    CudaScope scope;
    size_t held = 0; // reserved, not active
    if (scope.open()) {
      held = held_locked();
      slack_ = std::min(slack_, held);
    }
    st.cache = held - std::min(slack_, held);
    return st;
  }
  void reset_peak() override {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_ = active_;
  }
  size_t set_memory_limit(size_t limit) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(memory_limit_, limit);
  }
  size_t set_cache_limit(size_t limit) override {
    size_t old;
    CudaScope scope;
    if (!scope.open()) return cache_limit_;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      old = std::exchange(cache_limit_, limit);
    }
    if (limit < total_) flush_small();
    uint64_t keep = limit >= total_ ? UINT64_MAX : limit;
    cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep);
    if (limit < total_) {
      cudaStreamSynchronize(cudaStreamLegacy);
      cudaMemPoolTrimTo(pool_, limit);
      std::lock_guard<std::mutex> lock(mutex_);
      shrink_slack_locked();
    }
    return old;
  }
  size_t set_wired_limit(size_t) override { return 0; }
  size_t memory_limit() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return memory_limit_;
  }
  void clear_cache() override {
    CudaScope scope;
    if (!scope.open()) return;
    flush_small();
    cudaStreamSynchronize(cudaStreamLegacy);
    cudaMemPoolTrimTo(pool_, 0);
    // What the trim could not give back lies in chunks that live arrays
    // still hold part of: not cache (no call can release it), so the cache
    // reads 0 now, as after MLX's clear_cache.
    std::lock_guard<std::mutex> lock(mutex_);
    slack_ = held_locked();
  }
  std::string name() const override { return "gpu"; }
  Device device() const override { return Device(Device::gpu, index_); }

  // Device-to-host on the legacy stream: it starts after all work queued so
  // far (the kernels that wrote the buffer) and returns when the bytes are in.
  void copy_to_host(void* host, const void* dev, size_t n) const override {
    CudaScope scope;
    scope.require("cudaMemcpy (device to host)");
    check(cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost), "cudaMemcpy (device to host)");
  }
  void copy_from_host(void* dev, const void* host, size_t n, void* stream) const override {
    CudaScope scope;
    scope.require("cudaMemcpyAsync (host to device)");
    auto s = stream != nullptr ? static_cast<cudaStream_t>(stream) : cudaStreamLegacy;
    if (n >= kStageMin && staging_enabled() && staging_.copy(dev, host, n, s)) return;
    check(cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, s),
          "cudaMemcpyAsync (host to device)");
  }

 private:
  // Small blocks freed while one GPU stream exists are kept here and handed
  // back to allocations on that same stream: the stream orders a new
  // writer after every kernel that read the block, and the pool's own
  // stream-ordered allocation and free (a CUDA call each, ~1-2 us) are
  // skipped for the many tiny arrays of small-op chains. Not used under a
  // cache limit the user set, nor once a second stream exists (blocks kept
  // for the old sole stream are then freed on the legacy stream, which waits
  // for the work of every stream).
  static constexpr size_t kSmallMax = size_t(64) << 10;
  static constexpr size_t kSmallKeep = size_t(64) << 20;

  // Under mutex_: bytes the pool reserves beyond the active ones (freed
  // blocks, kept small blocks, and the unused rest of partly held chunks).
  size_t held_locked() const {
    uint64_t reserved = 0;
    cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved);
    return reserved > active_ ? static_cast<size_t>(reserved) - active_ : 0;
  }

  // Under mutex_: allocations placed in the slack, or a trim, leave less of it.
  void shrink_slack_locked() { slack_ = std::min(slack_, held_locked()); }

  // Under mutex_.
  void* take_small(size_t bytes, cudaStream_t s) {
    if (bytes > kSmallMax || s == nullptr || s != small_stream_ || s != sole_stream()) {
      return nullptr;
    }
    auto it = small_.find(bytes);
    if (it == small_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    small_bytes_ -= bytes;
    return p;
  }

  // Under mutex_; false when `b` is not kept (the caller frees it).
  bool keep_small(const allocator::Buffer& b, cudaStream_t s) {
    if (b.size > kSmallMax || s == nullptr || cache_limit_ < total_) return false;
    if (s != small_stream_) {
      release_small_locked();
      small_stream_ = s;
    }
    if (small_bytes_ + b.size > kSmallKeep) return false;
    small_[b.size].push_back(b.ptr);
    small_bytes_ += b.size;
    return true;
  }

  void release_small_locked() {
    for (auto& [size, blocks] : small_) {
      for (void* p : blocks) cudaFreeAsync(p, cudaStreamLegacy);
      blocks.clear();
    }
    small_bytes_ = 0;
  }

  void flush_small() {
    std::lock_guard<std::mutex> lock(mutex_);
    release_small_locked();
  }

  std::runtime_error oom(size_t bytes, const char* why) const {
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    cudaGetLastError();
    std::ostringstream msg;
    msg << "[malloc] Out of memory: cannot allocate " << format_bytes(bytes) << " on the gpu pool "
        << "of Device(gpu, " << index_ << "), " << why << " (active " << format_bytes(active_)
        << ", memory limit " << format_bytes(memory_limit_) << ", device free "
        << format_bytes(free_b) << " of " << format_bytes(total_b)
        << "). Free arrays, evaluate in smaller pieces, or lower the batch size.";
    return std::runtime_error(msg.str());
  }

  // Uploads of pageable host memory go through a ring of pinned buffers: the
  // host copies chunk k+1 (over the intra-op pool's threads) while the copy
  // engine moves chunk k, asynchronously on the consumer's stream. The
  // driver's own pageable path copies on one thread and waits for each
  // chunk's DMA; this overlaps the two.
  static constexpr size_t kStageMin = size_t(1) << 20;
  static constexpr size_t kStageChunk = size_t(8) << 20;
  static constexpr int kStageBuffers = 4;

  static bool staging_enabled() {
    static const bool on = [] {
      const char* v = std::getenv("LOOM_CUDA_STAGING");
      return v == nullptr || std::string(v) != "0";
    }();
    return on;
  }

  struct Staging {
    std::mutex mutex;
    void* buffers[kStageBuffers] = {};
    cudaEvent_t done[kStageBuffers] = {};
    bool ready = false;
    bool failed = false;

    bool setup() {
      if (ready || failed) return ready;
      for (int b = 0; b < kStageBuffers; ++b) {
        if (cudaMallocHost(&buffers[b], kStageChunk) != cudaSuccess ||
            cudaEventCreateWithFlags(&done[b], cudaEventDisableTiming) != cudaSuccess) {
          cudaGetLastError();
          failed = true; // no pinned memory to spare: the driver's path does it
          return false;
        }
      }
      return ready = true;
    }

    bool copy(void* dev, const void* host, size_t n, cudaStream_t s) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!setup()) return false;
      const char* src = static_cast<const char*>(host);
      char* dst = static_cast<char*>(dev);
      int b = 0;
      for (size_t off = 0; off < n; off += kStageChunk, b = (b + 1) % kStageBuffers) {
        size_t len = std::min(kStageChunk, n - off);
        // The buffer's previous chunk must have left before it is refilled.
        check(cudaEventSynchronize(done[b]), "cudaEventSynchronize (staging)");
        char* stage = static_cast<char*>(buffers[b]);
        constexpr size_t kPiece = size_t(1) << 20;
        cpu::parallel_for((len + kPiece - 1) / kPiece, 1, [&](size_t p0, size_t p1) {
          size_t a = p0 * kPiece, e = std::min(len, p1 * kPiece);
          std::memcpy(stage + a, src + off + a, e - a);
        });
        check(cudaMemcpyAsync(dst + off, stage, len, cudaMemcpyHostToDevice, s),
              "cudaMemcpyAsync (host to device)");
        check(cudaEventRecord(done[b], s), "cudaEventRecord (staging)");
      }
      return true;
    }
  };

  int index_;
  mutable Staging staging_;
  cudaMemPool_t pool_ = nullptr;
  mutable std::mutex mutex_;
  size_t active_ = 0;
  size_t peak_ = 0;
  size_t total_ = 0;
  size_t memory_limit_ = 0;
  size_t cache_limit_ = 0;
  std::unordered_map<size_t, std::vector<void*>> small_;
  size_t small_bytes_ = 0;
  cudaStream_t small_stream_ = nullptr;
  // Reserved bytes that clear_cache() could not release (the free rest of
  // 32 MiB pool chunks that live arrays hold part of), measured by it and
  // lowered as allocations fill them: the cache reported leaves them out.
  // (Once such a chunk is wholly freed its bytes are releasable again but stay
  // uncounted until the next clear_cache, or until no array is active.)
  mutable size_t slack_ = 0;
};

} // namespace

// Leaked on purpose, as the host pool: arrays freed during exit still find it.
allocator::Allocator& device_pool(int index) {
  // Never destroyed: daemon threads may still allocate while the process exits.
  static std::mutex& m = *new std::mutex;
  static std::vector<DevicePool*>& pools = *new std::vector<DevicePool*>;
  std::lock_guard<std::mutex> lock(m);
  if (static_cast<int>(pools.size()) <= index) pools.resize(index + 1, nullptr);
  if (pools[index] == nullptr) pools[index] = new DevicePool(index);
  return *pools[index];
}

} // namespace loom::cuda
