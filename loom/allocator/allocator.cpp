#include "loom/allocator/allocator.h"

#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "loom/allocator/memory.h"
#include "loom/allocator/object_pool.h"
#include "loom/allocator/pools.h"

namespace loom::allocator {

namespace {
constexpr size_t kAlignment = 64;
constexpr size_t kPage = 4096;

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
} // namespace

size_t total_system_memory() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  return static_cast<size_t>(pages) * static_cast<size_t>(page_size);
}

namespace {

// Buckets below 512 bytes are only ever reused at their exact size (the 1/8
// slack is under one alignment step there), so the host pool caches them in
// one list per bucket: a free and the next malloc of a tiny array cost a push
// and a pop instead of a map node's allocation and release. The lists belong
// to the process's host pool (the first HostAllocator built; others keep
// everything in their map) and are guarded by its mutex.
constexpr size_t kSmallBuckets = 7; // 64, 128, ..., 448 bytes
constexpr size_t kSmallLimit = (kSmallBuckets + 1) * kAlignment;

struct SmallCache {
  std::vector<void*> lists[kSmallBuckets]; // free buffers of bucket (i + 1) * 64
};

std::atomic<const HostAllocator*> g_small_owner{nullptr};

SmallCache* small_cache(const HostAllocator* pool) {
  static auto* cache = new SmallCache; // leaked with the host pool
  return g_small_owner.load(std::memory_order_relaxed) == pool ? cache : nullptr;
}

} // namespace

HostAllocator::HostAllocator()
    : memory_limit_(total_system_memory()), cache_limit_(total_system_memory()) {
  const HostAllocator* none = nullptr;
  g_small_owner.compare_exchange_strong(none, this);
}

HostAllocator::~HostAllocator() { clear_cache(); }

// Small requests round to the alignment, larger ones to pages, so that
// buffers of nearly the same size land in the same bucket.
size_t HostAllocator::bucket_size(size_t size) {
  if (size == 0) return kAlignment;
  if (size < kPage) return (size + kAlignment - 1) / kAlignment * kAlignment;
  return (size + kPage - 1) / kPage * kPage;
}

Buffer HostAllocator::malloc(size_t size) {
  size_t bucket = bucket_size(size);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The limit bounds active memory whatever the cache holds, so a request
    // fails the same way with a warm cache as with an empty one.
    if (stats_.active + bucket > memory_limit_) {
      std::ostringstream msg;
      msg << "[malloc] Out of memory: cannot allocate " << format_bytes(bucket)
          << " on the cpu pool (active " << format_bytes(stats_.active) << ", cache "
          << format_bytes(stats_.cache) << ", memory limit " << format_bytes(memory_limit_)
          << "). Free arrays, evaluate in smaller pieces, or raise the limit with "
             "set_memory_limit.";
      throw std::runtime_error(msg.str());
    }
    SmallCache* small = bucket < kSmallLimit ? small_cache(this) : nullptr;
    if (small != nullptr) {
      auto& list = small->lists[bucket / kAlignment - 1];
      if (!list.empty() && stats_.active + bucket <= memory_limit_) {
        Buffer buf{list.back(), bucket};
        list.pop_back();
        stats_.cache -= bucket;
        stats_.active += bucket;
        stats_.peak = std::max(stats_.peak, stats_.active);
        return buf;
      }
    }
    // Reuse a cached buffer no more than 1/8 larger than the request.
    auto it = cache_.lower_bound(bucket);
    if (it != cache_.end() && it->first <= bucket + bucket / 8 &&
        stats_.active + it->first <= memory_limit_) {
      Buffer buf{it->second, it->first};
      cache_.erase(it);
      stats_.cache -= buf.size;
      stats_.active += buf.size;
      stats_.peak = std::max(stats_.peak, stats_.active);
      return buf;
    }
    if (stats_.active + stats_.cache + bucket > memory_limit_) {
      trim_cache_locked(memory_limit_ - stats_.active - bucket);
    }
  }
  void* ptr = std::aligned_alloc(kAlignment, bucket);
  if (ptr == nullptr) {
    std::ostringstream msg;
    msg << "[malloc] Out of memory: the system refused " << format_bytes(bucket)
        << " on the cpu pool (active " << format_bytes(stats().active) << ").";
    throw std::runtime_error(msg.str());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.active += bucket;
  stats_.peak = std::max(stats_.peak, stats_.active);
  return Buffer{ptr, bucket};
}

void HostAllocator::free(Buffer buffer) {
  if (buffer.ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.active -= buffer.size;
  if (cache_limit_ == 0 || buffer.size > cache_limit_) {
    std::free(buffer.ptr);
    return;
  }
  if (stats_.cache + buffer.size > cache_limit_) {
    trim_cache_locked(cache_limit_ - buffer.size);
  }
  SmallCache* small = buffer.size < kSmallLimit ? small_cache(this) : nullptr;
  if (small != nullptr && buffer.size % kAlignment == 0) {
    small->lists[buffer.size / kAlignment - 1].push_back(buffer.ptr);
  } else {
    cache_.emplace(buffer.size, buffer.ptr);
  }
  stats_.cache += buffer.size;
}

// Frees cached buffers, largest first, until the cache holds at most `target`.
void HostAllocator::trim_cache_locked(size_t target) {
  while (stats_.cache > target && !cache_.empty()) {
    auto it = std::prev(cache_.end());
    stats_.cache -= it->first;
    std::free(it->second);
    cache_.erase(it);
  }
  SmallCache* small = small_cache(this);
  for (size_t i = kSmallBuckets; small != nullptr && i-- > 0 && stats_.cache > target;) {
    auto& list = small->lists[i];
    while (stats_.cache > target && !list.empty()) {
      stats_.cache -= (i + 1) * kAlignment;
      std::free(list.back());
      list.pop_back();
    }
    if (list.empty()) list.shrink_to_fit();
  }
}

MemoryStats HostAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void HostAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak = stats_.active;
}

size_t HostAllocator::set_memory_limit(size_t limit) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t old = memory_limit_;
  memory_limit_ = limit;
  return old;
}

size_t HostAllocator::set_cache_limit(size_t limit) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t old = cache_limit_;
  cache_limit_ = limit;
  trim_cache_locked(limit);
  return old;
}

// Wiring pins memory on unified-memory GPUs; host memory has nothing to pin,
// so the value is recorded and reported back as MLX does on the CPU.
size_t HostAllocator::set_wired_limit(size_t limit) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t old = wired_limit_;
  wired_limit_ = limit;
  return old;
}

size_t HostAllocator::memory_limit() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return memory_limit_;
}

void HostAllocator::clear_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  trim_cache_locked(0);
}

Allocator& host_allocator() {
  // Leaked on purpose: arrays held by static objects may be freed after
  // main() returns, and must still find their pool.
  static auto* alloc = [] {
    auto* a = new HostAllocator();
    // A fork() while another thread holds the pool's mutex would leave it
    // locked forever in the child: hold it across the fork instead.
    pthread_atfork([] { static_cast<HostAllocator&>(host_allocator()).lock_for_fork(); },
                   [] { static_cast<HostAllocator&>(host_allocator()).unlock_after_fork(); },
                   [] { static_cast<HostAllocator&>(host_allocator()).unlock_after_fork(); });
    return a;
  }();
  return *alloc;
}

void Allocator::copy_to_host(void* host, const void* device_ptr, size_t n) const {
  throw std::runtime_error("[copy] The " + name() + " pool holds host memory; nothing to copy.");
}

void Allocator::copy_from_host(void* device_ptr, const void* host, size_t n, void*) const {
  throw std::runtime_error("[copy] The " + name() + " pool holds host memory; nothing to copy.");
}

namespace {

// Readers find pools without a lock: slots are written once, before the
// device is reported available.
constexpr int kMaxDevices = 16;
std::atomic<Allocator*> g_device_pools[kMaxDevices];

// Migrations of one buffer are serialised by one of these (striped by the
// buffer's address so that Data stays small).
std::mutex& migration_mutex(const void* data) {
  static std::mutex stripes[64];
  return stripes[(reinterpret_cast<uintptr_t>(data) >> 6) % 64];
}

} // namespace

void register_allocator(Device device, Allocator* pool) {
  if (device.type == Device::cpu) return; // the host pool is built in
  if (device.index < 0 || device.index >= kMaxDevices) {
    throw std::invalid_argument("[register_allocator] Device index out of range.");
  }
  g_device_pools[device.index].store(pool, std::memory_order_release);
}

Allocator* allocator_for(Device device) {
  if (device.type == Device::cpu) return &host_allocator();
  if (device.index < 0 || device.index >= kMaxDevices) return nullptr;
  return g_device_pools[device.index].load(std::memory_order_acquire);
}

std::vector<Allocator*> registered_allocators() {
  std::vector<Allocator*> pools{&host_allocator()};
  for (auto& p : g_device_pools) {
    if (auto* a = p.load(std::memory_order_acquire)) pools.push_back(a);
  }
  return pools;
}

size_t active_memory_of_all_pools() {
  size_t n = host_allocator().stats().active;
  for (auto& p : g_device_pools) {
    if (auto* a = p.load(std::memory_order_acquire)) n += a->stats().active;
  }
  return n;
}

Data::Data(Buffer buffer, Allocator* owner) : size_(buffer.size) {
  if (owner->device().type == Device::cpu) {
    host_ = buffer;
    host_owner_ = owner;
    valid_.store(kHost, std::memory_order_relaxed);
  } else {
    device_ = buffer;
    device_owner_ = owner;
    valid_.store(kDevice, std::memory_order_relaxed);
  }
}

Data::Data(void* ptr, size_t size, std::function<void(void*)> release)
    : size_(size), host_{ptr, size}, release_(std::move(release)) {}

Data::~Data() {
  if (host_owner_ != nullptr) {
    host_owner_->free(host_);
  } else if (release_) {
    release_(host_.ptr);
  }
  if (device_owner_ != nullptr) device_owner_->free(device_);
}

// Only the device holds the bytes: take a host buffer and copy them down.
// The copy waits for the work that wrote them (the device pool's copy is
// ordered after everything queued on the device).
void* Data::host_slow() const {
  std::lock_guard<std::mutex> lock(migration_mutex(this));
  uint8_t v = valid_.load(std::memory_order_acquire);
  if (v & kHost) return host_.ptr;
  if (!(v & kDevice) || device_owner_ == nullptr) {
    throw std::runtime_error("[Data] Buffer has no valid copy on any device.");
  }
  if (host_.ptr == nullptr) {
    host_ = host_allocator().malloc(size_);
    host_owner_ = &host_allocator();
  }
  if (size_ > 0) device_owner_->copy_to_host(host_.ptr, device_.ptr, size_);
  valid_.store(v | kHost, std::memory_order_release);
  return host_.ptr;
}

void Data::drop_device_copy() {
  std::lock_guard<std::mutex> lock(migration_mutex(this));
  valid_.store(kHost, std::memory_order_release);
}

void* Data::device_ptr(Allocator& pool, void* stream) {
  uint8_t v = valid_.load(std::memory_order_acquire);
  if ((v & kDevice) && device_owner_ == &pool) return device_.ptr;
  std::lock_guard<std::mutex> lock(migration_mutex(this));
  v = valid_.load(std::memory_order_acquire);
  if ((v & kDevice) && device_owner_ == &pool) return device_.ptr;
  if (device_owner_ != nullptr && device_owner_ != &pool) {
    // Another device's copy: go through the host (peer copies come later).
    if (!(v & kHost)) {
      migration_mutex(this).unlock();
      try {
        ptr();
      } catch (...) {
        migration_mutex(this).lock();
        throw;
      }
      migration_mutex(this).lock();
      v = valid_.load(std::memory_order_acquire);
    }
    device_owner_->free(device_);
    device_ = Buffer{};
    device_owner_ = nullptr;
  }
  if (device_.ptr == nullptr) {
    device_ = pool.malloc(size_);
    device_owner_ = &pool;
  }
  if (size_ > 0) pool.copy_from_host(device_.ptr, host_.ptr, size_, stream);
  valid_.store(v | kDevice, std::memory_order_release);
  return device_.ptr;
}

std::shared_ptr<Data> allocate(size_t size) {
  auto& alloc = host_allocator();
  return std::allocate_shared<Data>(PoolAllocator<Data>(), alloc.malloc(size), &alloc);
}

std::shared_ptr<Data> allocate(size_t size, Device device) {
  Allocator* pool = allocator_for(device);
  if (pool == nullptr) {
    throw std::invalid_argument("[allocate] No memory pool for Device(gpu, " +
                                std::to_string(device.index) + "): no GPU backend registered.");
  }
  return std::allocate_shared<Data>(PoolAllocator<Data>(), pool->malloc(size), pool);
}

// --- the object pool (object_pool.h) ---

namespace {

constexpr size_t kPoolClasses = kPoolMaxBytes / kPoolClassBytes;

struct FreeBlock {
  FreeBlock* next;
};

struct ThreadObjectPool {
  FreeBlock* heads[kPoolClasses] = {};
  size_t counts[kPoolClasses] = {};
  ~ThreadObjectPool() {
    for (auto* head : heads) {
      while (head != nullptr) {
        FreeBlock* next = head->next;
        ::operator delete(head);
        head = next;
      }
    }
  }
};

// Reached through trivially destructible thread-locals (as the node release
// list in array.cpp): blocks freed after the thread's pool is gone, by
// thread-locals destroyed later, go straight back to the system.
thread_local ThreadObjectPool* t_object_pool = nullptr;
thread_local bool t_object_pool_gone = false;

struct ThreadObjectPoolOwner {
  ThreadObjectPoolOwner() { t_object_pool = new ThreadObjectPool; }
  ~ThreadObjectPoolOwner() {
    delete t_object_pool;
    t_object_pool = nullptr;
    t_object_pool_gone = true;
  }
};

size_t pool_class(size_t bytes) { return (bytes + kPoolClassBytes - 1) / kPoolClassBytes - 1; }

} // namespace

void* pool_allocate(size_t bytes) {
  const size_t c = pool_class(bytes);
  if (t_object_pool == nullptr && !t_object_pool_gone) {
    thread_local ThreadObjectPoolOwner owner;
  }
  if (ThreadObjectPool* pool = t_object_pool; pool != nullptr && pool->heads[c] != nullptr) {
    FreeBlock* block = pool->heads[c];
    pool->heads[c] = block->next;
    --pool->counts[c];
    return block;
  }
  return ::operator new((c + 1) * kPoolClassBytes);
}

void pool_free(void* p, size_t bytes) noexcept {
  const size_t c = pool_class(bytes);
  // A thread that never allocated here does not build a pool to free into.
  ThreadObjectPool* pool = t_object_pool;
  if (pool == nullptr || pool->counts[c] >= kPoolDepth) {
    ::operator delete(p);
    return;
  }
  auto* block = static_cast<FreeBlock*>(p);
  block->next = pool->heads[c];
  pool->heads[c] = block;
  ++pool->counts[c];
}

} // namespace loom::allocator
