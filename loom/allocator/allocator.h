// Buffers and their pools. One allocator per device, registered at run time
// (the host pool always; a GPU pool when its backend finds a device); each
// keeps a cache of freed buffers and honest statistics.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loom/device.h"

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
  virtual Device device() const { return Device(Device::cpu, 0); }
  // Device pools move bytes between their buffers and host memory. `stream`
  // is the backend's queue the copy is ordered on (null: wait for all work).
  virtual void copy_to_host(void* host, const void* device_ptr, size_t n) const;
  virtual void copy_from_host(void* device_ptr, const void* host, size_t n, void* stream) const;
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
//
// The handle is separate from any one pointer: a buffer may hold a host copy,
// a device copy or both, and knows which are valid. Host access goes through
// ptr() (reading) or ptr_for_write(), which bring a host copy first when only
// the device has one; device kernels use device_ptr(). The host-valid check
// is one relaxed-cost atomic load, so the CPU path stays a plain pointer read.
class Data {
 public:
  static constexpr uint8_t kHost = 1;
  static constexpr uint8_t kDevice = 2;

  // A buffer from `owner`'s pool; it is valid where that pool lives.
  Data(Buffer buffer, Allocator* owner);
  // Wraps host memory owned elsewhere; `release` runs when the last array lets go.
  Data(void* ptr, size_t size, std::function<void(void*)> release);
  ~Data();
  Data(const Data&) = delete;
  Data& operator=(const Data&) = delete;

  // Host pointer for reading.
  void* ptr() const {
    if (valid_.load(std::memory_order_acquire) & kHost) [[likely]]
      return host_.ptr;
    return host_slow();
  }
  // Host pointer for writing: any device copy becomes stale.
  void* ptr_for_write() {
    void* p = ptr();
    if (valid_.load(std::memory_order_relaxed) != kHost) [[unlikely]]
      drop_device_copy();
    return p;
  }
  // Device pointer on `pool`'s device, uploading the host copy on `stream`
  // when the device has none yet.
  void* device_ptr(Allocator& pool, void* stream);
  size_t size() const { return size_; }
  uint8_t valid() const { return valid_.load(std::memory_order_acquire); }
  // The pool of the device copy, if any.
  Allocator* device_pool() const { return device_owner_; }

 private:
  void* host_slow() const;
  void drop_device_copy();

  size_t size_ = 0;
  mutable Buffer host_;
  mutable Allocator* host_owner_ = nullptr;
  std::function<void(void*)> release_;
  Buffer device_;
  Allocator* device_owner_ = nullptr;
  mutable std::atomic<uint8_t> valid_{kHost};
};

// Allocates `size` bytes from the host pool; raises a clear out-of-memory
// error when the request cannot fit under the memory limit.
std::shared_ptr<Data> allocate(size_t size);
// Allocates from the pool of `device` (the host pool for the CPU).
std::shared_ptr<Data> allocate(size_t size, Device device);

// The pools. Backends register theirs when they find a device; the host pool
// is always there. Registration happens once per device and never undoes.
void register_allocator(Device device, Allocator* pool);
Allocator* allocator_for(Device device); // null when none is registered
std::vector<Allocator*> registered_allocators();

} // namespace loom::allocator
