// Buffers and their pools. One allocator per device; each keeps a
// size-bucketed cache of freed buffers and honest statistics.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace loom::allocator {

struct Buffer {
  void* ptr = nullptr;
  size_t size = 0; // bytes actually reserved (the bucket's size)
};

struct MemoryStats {
  size_t active = 0; // bytes in buffers held by arrays
  size_t peak = 0;   // high-water mark of `active` since the last reset
  size_t cache = 0;  // bytes in freed buffers kept for reuse
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Buffer malloc(size_t size) = 0;
  virtual void free(Buffer buffer) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak() = 0;
  virtual size_t set_memory_limit(size_t limit) = 0; // returns the previous limit
  virtual size_t set_cache_limit(size_t limit) = 0;
  virtual size_t set_wired_limit(size_t limit) = 0;
  virtual size_t memory_limit() const = 0;
  virtual void clear_cache() = 0;
  virtual std::string name() const = 0;
};

// Host memory: 64-byte aligned buffers, cached by size bucket.
class HostAllocator final : public Allocator {
 public:
  HostAllocator();
  ~HostAllocator() override;
  Buffer malloc(size_t size) override;
  void free(Buffer buffer) override;
  MemoryStats stats() const override;
  void reset_peak() override;
  size_t set_memory_limit(size_t limit) override;
  size_t set_cache_limit(size_t limit) override;
  size_t set_wired_limit(size_t limit) override;
  size_t memory_limit() const override;
  void clear_cache() override;
  std::string name() const override { return "cpu"; }

  static size_t bucket_size(size_t size);
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }

 private:
  void trim_cache_locked(size_t target);

  mutable std::mutex mutex_;
  std::multimap<size_t, void*> cache_; // bucket size -> free buffer
  MemoryStats stats_;
  size_t memory_limit_;
  size_t cache_limit_;
  size_t wired_limit_ = 0;
};

Allocator& host_allocator();
size_t total_system_memory();

// Reference-counted storage behind one or more arrays (views share it).
class Data {
 public:
  Data(Buffer buffer, Allocator* owner) : buffer_(buffer), owner_(owner) {}
  // Wraps memory owned elsewhere; `release` runs when the last array lets go.
  Data(void* ptr, size_t size, std::function<void(void*)> release);
  ~Data();
  Data(const Data&) = delete;
  Data& operator=(const Data&) = delete;
  void* ptr() const { return buffer_.ptr; }
  size_t size() const { return buffer_.size; }

 private:
  Buffer buffer_;
  Allocator* owner_ = nullptr;
  std::function<void(void*)> release_;
};

// Allocates `size` bytes from the host pool; raises a clear out-of-memory
// error when the request cannot fit under the memory limit.
std::shared_ptr<Data> allocate(size_t size);

} // namespace loom::allocator
