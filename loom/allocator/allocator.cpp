#include "loom/allocator/allocator.h"

#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "loom/allocator/memory.h"

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

HostAllocator::HostAllocator()
    : memory_limit_(total_system_memory()), cache_limit_(total_system_memory()) {}

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
  cache_.emplace(buffer.size, buffer.ptr);
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

Data::Data(void* ptr, size_t size, std::function<void(void*)> release)
    : buffer_{ptr, size}, release_(std::move(release)) {}

Data::~Data() {
  if (owner_ != nullptr) {
    owner_->free(buffer_);
  } else if (release_) {
    release_(buffer_.ptr);
  }
}

std::shared_ptr<Data> allocate(size_t size) {
  auto& alloc = host_allocator();
  return std::make_shared<Data>(alloc.malloc(size), &alloc);
}

} // namespace loom::allocator
